// threads.c: a scenario of the preload suite (tests/tpprof/meson.build gives
// each mode its test; harness.h runs the program under libtpprof.so).
// Mode: threads.
#include "harness.h"

static void test_threads(char *prog) {
    char *argv[] = {prog, NULL};
    struct result r;
    if (!record("threads.db", argv, NULL, &r)) return;
    for (int i = 0; i < 4; i++)
        CHECK_MSG(count_blocks(1, 1000 + i, 1, "thread_leak", 0) == i + 1, "thread %d leaks %d blocks of %d B", i, i + 1,
              1000 + i);
    CHECK_MSG(qi("SELECT count(*) FROM live_blocks WHERE reachability = 1") == 10, "exactly 10 lost");
    CHECK_MSG(qi("SELECT count(DISTINCT tid) FROM live_blocks WHERE reachability = 1") == 4, "lost blocks from 4 threads");
    CHECK_MSG(qi("SELECT count(*) FROM live_blocks WHERE size BETWEEN 64 AND 83") == 0, "cross-thread frees seen");
    CHECK_MSG(qi("SELECT count(*) FROM threads") >= 5, "threads table");
    CHECK_MSG(qi("SELECT sum(free_count) FROM sites WHERE alloc_count >= 80") >= 80, "frees counted at their site");
}

int preload_scenario(const char *mode, char *prog, char *extra) {
    (void)extra;
    if (strcmp(mode, "threads") == 0) test_threads(prog);
    else return -1;
    return check_failures;
}
