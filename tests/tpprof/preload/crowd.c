// crowd.c: a scenario of the preload suite (tests/tpprof/meson.build gives
// each mode its test; harness.h runs the program under libtpprof.so).
// Modes: crowd, crowd_wrap.
#include "harness.h"

// 256 threads at once sharing glibc's arenas (so the address stripes), each
// freeing blocks the others allocated: every block's free is applied before
// its address is allocated again, whichever rings the two records are in.
// `env`: NULL, or TPPROF_ORDER_START=wrap.
static void test_crowd(char *prog, const char *env) {
    char *argv[] = {prog, NULL};
    struct result r;
    if (!record(env ? "crowd_wrap.db" : "crowd.db", argv, env, &r)) return;
    CHECK_MSG(strcmp(r.out, "crowd: 512000 blocks\n") == 0, "stdout '%s'", r.out);
    check_handed(512000); // (crowd_block's one stack)
    int leaks = 0;
    for (int k = 0; k < 4; k++) leaks += count_blocks(1, 5000 + k, 1, "crowd_leak", 0) + count_blocks(2, 5000 + k, 1, "crowd_leak", 0);
    CHECK_MSG(leaks == 256, "each thread's leak is live at crowd_leak (%d)", leaks);
    CHECK_MSG(qi("SELECT count(*) FROM threads") >= 257, "every thread seen (%lld)", (long long)qi("SELECT count(*) FROM threads"));
    CHECK_MSG(qi("SELECT value FROM meta WHERE key = 'dropped_events'") <= 0, "no event dropped");
}

int preload_scenario(const char *mode, char *prog, char *extra) {
    (void)extra;
    if (strcmp(mode, "crowd") == 0) test_crowd(prog, NULL);
    else if (strcmp(mode, "crowd_wrap") == 0) test_crowd(prog, "TPPROF_ORDER_START=wrap");
    else return -1;
    return check_failures;
}
