// small_stacks.c: a scenario of the preload suite (tests/tpprof/meson.build gives
// each mode its test; harness.h runs the program under libtpprof.so).
// Modes: smallstack, smallstack_nofp.
#include "harness.h"

// Threads with 16 KiB stacks allocating 7 KiB down them (progs/smallstack.c):
// the hooks fit in what is left, and the blocks are recorded.
static void test_small_stacks(char *prog) {
    char *argv[] = {prog, NULL};
    struct result r;
    if (!record("smallstack.db", argv, NULL, &r)) return;
    CHECK_MSG(strcmp(r.out, "smallstack ok\n") == 0, "stdout '%s', stderr '%s'", r.out, r.err);
    CHECK_MSG(qi("SELECT sum(alloc_count) FROM sites") >= 8 * 201, "every allocation recorded");
    CHECK_MSG(qi("SELECT count(*) FROM live_blocks WHERE size = 777") == 8, "the 8 blocks lost");
    // With 8 KiB left: libunwind's stack, from its own stack (built without
    // frame pointers, the frame-pointer walk has mid3 alone). The first
    // allocation of those threads is made inside pthread_getattr_np, which
    // holds the thread's lock: the thread's registration must not wait for
    // it (the library before hung there).
    int m3 = count_blocks(1, 555, 1, "mid3", 0) + count_blocks(2, 555, 1, "mid3", 0);
    int m2 = count_blocks(1, 555, 1, "mid2", 1) + count_blocks(2, 555, 1, "mid2", 1);
    int m1 = count_blocks(1, 555, 1, "mid1", 2) + count_blocks(2, 555, 1, "mid1", 2);
    CHECK_MSG(m3 == 80 && m2 == 80 && m1 == 80, "80 blocks from mid3 < mid2 < mid1: %d %d %d", m3, m2, m1);
    int64_t sid = qi("SELECT stack_id FROM live_blocks WHERE size = 555 LIMIT 1");
    CHECK_MSG(stack_has(sid, "thread_main2"), "the stack goes down to the thread's start routine");
}

int preload_scenario(const char *mode, char *prog, char *extra) {
    (void)extra;
    if (strcmp(mode, "smallstack") == 0 || strcmp(mode, "smallstack_nofp") == 0) test_small_stacks(prog);
    else return -1;
    return check_failures;
}
