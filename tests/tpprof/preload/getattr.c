// getattr.c: a scenario of the preload suite (tests/tpprof/meson.build gives
// each mode its test; harness.h runs the program under libtpprof.so).
// Mode: getattr.
#include "harness.h"

// Threads whose first allocation is made inside pthread_getattr_np, the
// main thread's too (progs/getattr.c): the program ends (the library before
// hung), and the stacks taken there and after are whole.
static void test_getattr(char *prog) {
    char *argv[] = {prog, NULL};
    struct result r;
    if (!record("getattr.db", argv, NULL, &r)) return;
    CHECK_MSG(strcmp(r.out, "getattr ok\n") == 0, "stdout '%s', stderr '%s'", r.out, r.err);
    int l = count_blocks(1, 333, 1, "leaf", 0) + count_blocks(2, 333, 1, "leaf", 0);
    int m = count_blocks(1, 333, 1, "middle", 1) + count_blocks(2, 333, 1, "middle", 1);
    int t = count_blocks(1, 333, 1, "top", 2) + count_blocks(2, 333, 1, "top", 2);
    CHECK_MSG(l == 80 && m == 80 && t == 80, "80 blocks from leaf < middle < top: %d %d %d", l, m, t);
    CHECK_MSG(count_blocks(1, 444, 1, "main_leaf", 0) + count_blocks(2, 444, 1, "main_leaf", 0) == 1, "main's block");
    CHECK_MSG(qi("SELECT count(*) FROM threads") >= 5, "the 5 threads: %lld", (long long)qi("SELECT count(*) FROM threads"));
}

int preload_scenario(const char *mode, char *prog, char *extra) {
    (void)extra;
    if (strcmp(mode, "getattr") == 0) test_getattr(prog);
    else return -1;
    return check_failures;
}
