// dlerr.c: a scenario of the preload suite (tests/tpprof/meson.build gives
// each mode its test; harness.h runs the program under libtpprof.so).
// Mode: dlerr.
#include "harness.h"

// (progs/dlerr.c)
static void test_dlerr(char *prog) {
    char *argv[] = {prog, NULL};
    struct result r;
    if (record("dlerr.db", argv, NULL, &r)) {
        CHECK_MSG(strcmp(r.out, "libtpprof\ndlerr ok\n") == 0, "stdout '%s'", r.out);
        CHECK_MSG(count_blocks(1, 321, 1, "lose", 0) == 1, "the block lost in lose");
        CHECK_MSG(qi("SELECT count(*) FROM live_blocks WHERE reachability = 1") == 1,
              "nothing else lost (the dlerror() state glibc keeps is reachable): %lld",
              (long long)qi("SELECT count(*) FROM live_blocks WHERE reachability = 1"));
    }
}

int preload_scenario(const char *mode, char *prog, char *extra) {
    (void)extra;
    if (strcmp(mode, "dlerr") == 0) test_dlerr(prog);
    else return -1;
    return check_failures;
}
