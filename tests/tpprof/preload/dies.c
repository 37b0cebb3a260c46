// dies.c: a scenario of the preload suite (tests/tpprof/meson.build gives
// each mode its test; harness.h runs the program under libtpprof.so).
// Mode: dies_.
#include "harness.h"

// A program that dies of a signal right after allocating (progs/dies.c,
// `how` segv, abort, raise or chained): it dies of that signal as natively,
// and the recording holds its last allocation, written on the way (scanned,
// except after a fault). "caught": the program's own handler recovers from
// faults and the recording ends as any exit does.
static void test_dies(char *prog, const char *how) {
    char out[600], name[64];
    snprintf(name, sizeof name, "dies-%s.db", how);
    char *argv[] = {prog, (char *)how, NULL};
    static struct result native, r;
    run_both(name, argv, &native, &r, out, sizeof out);
    bool caught = strcmp(how, "caught") == 0, is_abort = strcmp(how, "abort") == 0;
    int want_sig = caught ? 0 : is_abort ? 6 : strcmp(how, "alarm") == 0 ? 14 : 11;
    CHECK_MSG(r.status == native.status && r.status == (caught ? 0 : 128 + want_sig), "exit status %d, natively %d",
          r.status, native.status);
    CHECK_MSG(strcmp(r.out, native.out) == 0, "stdout '%s', natively '%s'", r.out, native.out);
    if (!open_db(out)) {
        CHECK_MSG(false, "no database at %s", out);
        return;
    }
    expect_complete(how);
    char v[64];
    qs(v, sizeof v, "SELECT coalesce((SELECT value FROM meta WHERE key = 'end_reason'), '')");
    CHECK_MSG(strcmp(v, caught ? "exit" : "signal") == 0, "end_reason '%s'", v);
    int64_t sig = qi("SELECT coalesce((SELECT value FROM meta WHERE key = 'end_signal'), 0)");
    CHECK_MSG(sig == want_sig, "end_signal %lld", (long long)sig);
    // Scanned unless a fault: a raised SIGSEGV is sent, and the chained
    // handler finds SIG_DFL (the recorder's stand-in is hidden), sets it
    // (the stand-in returns) and raises.
    int scanned = strcmp(how, "segv") != 0;
    CHECK_MSG(qi("SELECT count(*) FROM live_blocks WHERE size = 6161 AND reachability %s", scanned ? "IN (1, 2)" : "= 0") == 1,
          "the last block, %s", scanned ? "scanned" : "not scanned");
}

int preload_scenario(const char *mode, char *prog, char *extra) {
    (void)extra;
    if (strncmp(mode, "dies_", 5) == 0) test_dies(prog, mode + 5);
    else return -1;
    return check_failures;
}
