// sigset.c: a scenario of the preload suite (tests/tpprof/meson.build gives
// each mode its test; harness.h runs the program under libtpprof.so).
// Mode: sigset.
#include "harness.h"

// SysV's sigset() on the signals the recorder stands in for
// (progs/sigsetter.c): what it returns is what it returns natively, and
// SIG_DFL set through it puts the stand-in back: the SIGTERM at the end is
// recorded.
static void test_sigset(char *prog) {
    char out[600];
    char *argv[] = {prog, NULL};
    static struct result native, r;
    run_both("sigset.db", argv, &native, &r, out, sizeof out);
    CHECK_MSG(r.status == 128 + SIGTERM && native.status == r.status, "status %d, natively %d", r.status, native.status);
    CHECK_MSG(strcmp(r.out, native.out) == 0 && strstr(r.out, "TERM first: SIG_DFL\n"), "stdout '%s', natively '%s'", r.out,
          native.out);
    if (!open_db(out)) {
        CHECK_MSG(false, "no database at %s", out);
        return;
    }
    expect_complete("sigset");
    CHECK_MSG(qi("SELECT coalesce((SELECT value FROM meta WHERE key = 'end_signal'), 0)") == SIGTERM, "died of SIGTERM");
    CHECK_MSG(qi("SELECT count(*) FROM live_blocks WHERE size = 6161") == 1, "the block, in the live set");
}

int preload_scenario(const char *mode, char *prog, char *extra) {
    (void)extra;
    if (strcmp(mode, "sigset") == 0) test_sigset(prog);
    else return -1;
    return check_failures;
}
