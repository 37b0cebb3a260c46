// reserve.c: a scenario of the preload suite (tests/tpprof/meson.build gives
// each mode its test; harness.h runs the program under libtpprof.so).
// Mode: reserve.
#include "harness.h"

// 64 GiB reserved, a few pages touched (progs/reserve.c): the exit's scan
// reads the touched pages, finds the block kept 40 GiB in, and takes far
// less than reading all of it did (13 s on the 2-core machines).
static void test_reserve(char *prog) {
    char *argv[] = {prog, NULL};
    struct result r;
    if (!record("reserve.db", argv, NULL, &r)) return;
    if (strcmp(r.out, "reserve skipped\n") == 0) {
        fprintf(stderr, "skip: the 64 GiB reservation was refused\n");
        skipped = true;
        return;
    }
    CHECK_MSG(strcmp(r.out, "reserve ok\n") == 0, "stdout '%s'", r.out);
    CHECK_MSG(count_blocks(2, 4040, 1, "reserve_keep", 0) == 1, "the block kept 40 GiB into the reservation is reachable");
    CHECK_MSG(count_blocks(1, 5050, 1, "reserve_lose", 0) + count_blocks(2, 5050, 1, "reserve_lose", 0) == 1,
          "the other block");
    long long ns = qi("SELECT value FROM meta WHERE key = 'duration_ns'");
    CHECK_MSG(ns < 3000000000LL, "the run, its exit scan included, under 3 s: %lld ns", ns);
}

int preload_scenario(const char *mode, char *prog, char *extra) {
    (void)extra;
    if (strcmp(mode, "reserve") == 0) test_reserve(prog);
    else return -1;
    return check_failures;
}
