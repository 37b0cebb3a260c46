// wrapword.c: a scenario of the preload suite (tests/tpprof/meson.build gives
// each mode its test; harness.h runs the program under libtpprof.so).
// Mode: wrapword.
#include "harness.h"

// (progs/wrapword.c)
static void test_wrapword(char *prog) {
    char *argv[] = {prog, NULL};
    struct result r;
    if (record("wrapword.db", argv, NULL, &r)) {
        CHECK_MSG(strcmp(r.out, "wrapword ok\n") == 0, "stdout '%s', stderr '%s'", r.out, r.err);
        CHECK_MSG(qi("SELECT coalesce(sum(alloc_count), 0) FROM sites WHERE kind = 1") >= 100, "the 100 allocations");
    }
}

int preload_scenario(const char *mode, char *prog, char *extra) {
    (void)extra;
    if (strcmp(mode, "wrapword") == 0) test_wrapword(prog);
    else return -1;
    return check_failures;
}
