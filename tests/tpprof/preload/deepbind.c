// deepbind.c: a scenario of the preload suite (tests/tpprof/meson.build gives
// each mode its test; harness.h runs the program under libtpprof.so).
// Mode: deepbind.
#include "harness.h"

// RTLD_DEEPBIND binds the plugin's malloc and free to libc's: tpprof cannot
// see them, and says which library that was (the CLI warns from it).
static void test_deepbind(char *prog, char *plugin) {
    char *argv[] = {prog, plugin, "deep", NULL};
    struct result r;
    if (!record("deepbind.db", argv, NULL, &r)) return;
    char v[1024] = "";
    qs(v, sizeof v, "SELECT value FROM meta WHERE key = 'bypassing_modules'");
    CHECK_MSG(strstr(v, "libtpprof_plugin.so\"") != NULL && v[0] == '[', "the plugin is named: '%s'", v);
    CHECK_MSG(strstr(v, "libc.so") == NULL && strstr(v, "tpprof_prog_host\"") == NULL, "only the plugin: '%s'", v);
    // The plugin's frees are not seen, so its 8192 blocks stay live in the
    // recording (but for any address the program's later allocations took
    // again) after glibc gave their memory back; a dangling pointer into
    // one of them did not make the leak scan read that memory (the program
    // ran to its end and the recording is complete: record() checked).
    CHECK_MSG(strcmp(r.out, "host: done\n") == 0, "stdout '%s'", r.out);
    CHECK_MSG(qi("SELECT count(*) FROM live_blocks WHERE size = 1000") >= 8000 &&
              qi("SELECT count(*) FROM live_blocks WHERE size = 1000 AND reachability = 0") == 0,
          "the unseen frees' blocks are live and classified (%lld)",
          (long long)qi("SELECT count(*) FROM live_blocks WHERE size = 1000"));
}

int preload_scenario(const char *mode, char *prog, char *extra) {
    if (strcmp(mode, "deepbind") == 0 && extra) test_deepbind(prog, extra);
    else return -1;
    return check_failures;
}
