// exec.c: a scenario of the preload suite (tests/tpprof/meson.build gives
// each mode its test; harness.h runs the program under libtpprof.so).
// Modes: exec, fexecve, execveat.
#include "harness.h"

// `how`: NULL (execl), "fexecve" or "execveat": each finishes the first
// image's database and records the new image into its own.
static void test_exec(char *prog, const char *how) {
    char out[600];
    db_path(out, sizeof out, "exec.db");
    char *argv[] = {prog, (char *)how, NULL};
    struct result r = run(out, argv, NULL);
    CHECK_MSG(r.status == 0, "exit status %d: %s", r.status, r.err);
    CHECK_MSG(strcmp(r.out, "execer: child done\n") == 0, "stdout '%s'", r.out);
    if (!open_db(out)) {
        CHECK_MSG(false, "no database for the first image");
        return;
    }
    char v[64];
    qs(v, sizeof v, "SELECT value FROM meta WHERE key = 'end_reason'");
    CHECK_MSG(strcmp(v, "exec") == 0, "first image ended by exec: '%s'", v);
    CHECK_MSG(qi("SELECT count(*) FROM live_blocks WHERE size = 444") == 1, "the first image's live block");
    CHECK_MSG(access(out, F_OK) == 0 && qi("SELECT value FROM meta WHERE key = 'complete'") == 1, "first image complete");
    char edb[700];
    snprintf(edb, sizeof edb, "%s/exec.exec1.db", tmpdir);
    if (!open_db(edb)) {
        CHECK_MSG(false, "no database for the exec'd image at %s", edb);
        return;
    }
    expect_complete("exec'd image");
    // Recorded and scanned; lost or reachable depends on whether a stale copy
    // of the pointer survives in exit's stack frames (conservative scan).
    CHECK_MSG(count_blocks(1, 999, 1, "exec_child_leak", 0) + count_blocks(2, 999, 1, "exec_child_leak", 0) == 1,
          "the new image's leak");
}

int preload_scenario(const char *mode, char *prog, char *extra) {
    (void)extra;
    if (strcmp(mode, "exec") == 0) test_exec(prog, NULL);
    else if (strcmp(mode, "fexecve") == 0 || strcmp(mode, "execveat") == 0) test_exec(prog, mode);
    else return -1;
    return check_failures;
}
