// early.c: a scenario of the preload suite (tests/tpprof/meson.build gives
// each mode its test; harness.h runs the program under libtpprof.so).
// Mode: early.
#include "harness.h"

// Blocks kept only in a list whose head a library's constructor allocated
// before the recorder started, or in a pool it mapped then (progs/early.c):
// reachable, not lost; that head and pool are neither allocations of the
// recording nor leaks.
static void test_early(char *prog) {
    char *argv[] = {prog, NULL};
    struct result r;
    if (!record("early.db", argv, NULL, &r)) return;
    CHECK_MSG(strcmp(r.out, "early done\n") == 0, "stdout '%s'", r.out);
    CHECK_MSG(count_blocks(2, 48, 2, "early_push", 0) == 5, "the 5 nodes reachable through the early head (lost: %d)",
          count_blocks(1, 48, 2, "early_push", 0));
    CHECK_MSG(count_blocks(2, 56, 1, "early_pool_keep", 0) == 3, "the 3 blocks kept in the early pool reachable (lost: %d)",
          count_blocks(1, 56, 1, "early_pool_keep", 0));
    CHECK_MSG(count_blocks(1, 77, 1, "lose_one", 0) + count_blocks(2, 77, 1, "lose_one", 0) == 1, "the block of 77 bytes");
    CHECK_MSG(qi("SELECT count(*) FROM live_blocks WHERE size IN (64, 96) OR size >= 1048576") == 0,
          "the blocks and the mapping of before are not reported");
    CHECK_MSG(qi("SELECT count(*) FROM sites WHERE kind = 0 OR stack_id = 0") == 0, "nor counted as allocations");
    CHECK_MSG(qi("SELECT sum(alloc_count) FROM sites WHERE kind = 2") == 5, "5 callocs recorded: %lld",
          (long long)qi("SELECT sum(alloc_count) FROM sites WHERE kind = 2"));
}

int preload_scenario(const char *mode, char *prog, char *extra) {
    (void)extra;
    if (strcmp(mode, "early") == 0) test_early(prog);
    else return -1;
    return check_failures;
}
