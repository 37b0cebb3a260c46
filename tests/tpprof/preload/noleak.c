// noleak.c: a scenario of the preload suite (tests/tpprof/meson.build gives
// each mode its test; harness.h runs the program under libtpprof.so).
// Mode: noleak.
#include "harness.h"

static void test_noleak(char *prog) {
    char out[600];
    char *argv[] = {prog, NULL};
    static struct result native, r;
    run_both("noleak.db", argv, &native, &r, out, sizeof out);
    CHECK_MSG(r.status == 0 && native.status == 0, "exit status %d", r.status);
    CHECK_MSG(strcmp(r.out, native.out) == 0, "same output: '%s' vs '%s'", r.out, native.out);
    if (!open_db(out)) {
        CHECK_MSG(false, "no database");
        return;
    }
    expect_complete("noleak");
    CHECK_MSG(qi("SELECT count(*) FROM live_blocks WHERE reachability = 1") == 0, "no lost block (%lld)",
          (long long)qi("SELECT count(*) FROM live_blocks WHERE reachability = 1"));
    CHECK_MSG(qi("SELECT count(*) FROM live_blocks WHERE reachability = 0") == 0, "every live block scanned");
}

int preload_scenario(const char *mode, char *prog, char *extra) {
    (void)extra;
    if (strcmp(mode, "noleak") == 0) test_noleak(prog);
    else return -1;
    return check_failures;
}
