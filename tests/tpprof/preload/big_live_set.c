// big_live_set.c: a scenario of the preload suite (tests/tpprof/meson.build gives
// each mode its test; harness.h runs the program under libtpprof.so).
// Mode: bigset.
#include "harness.h"

// A million blocks made in a row and kept to the end (progs/bigset.c):
// none dropped, every one in live_blocks (reachable from `keep`).
static void test_big_live_set(char *prog) {
    char *argv[] = {prog, NULL};
    struct result r;
    if (!record("bigset.db", argv, NULL, &r)) return;
    CHECK_MSG(strcmp(r.out, "bigset 1000000\n") == 0, "stdout '%s'", r.out);
    CHECK_MSG(qi("SELECT value FROM meta WHERE key = 'dropped_events'") == 0, "no event dropped");
    CHECK_MSG(qi("SELECT count(*) FROM live_blocks WHERE size BETWEEN 16 AND 72 AND reachability = 2") == 1000000,
          "the million blocks, reachable: %lld", (long long)qi("SELECT count(*) FROM live_blocks WHERE size BETWEEN 16 AND 72"));
}

int preload_scenario(const char *mode, char *prog, char *extra) {
    (void)extra;
    if (strcmp(mode, "bigset") == 0) test_big_live_set(prog);
    else return -1;
    return check_failures;
}
