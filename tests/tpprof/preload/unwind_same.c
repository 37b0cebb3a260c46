// unwind_same.c: a scenario of the preload suite (tests/tpprof/meson.build gives
// each mode its test; harness.h runs the program under libtpprof.so).
// Modes: unwind_same, unwind_nofp.
#include "harness.h"



// (progs/nofp.c) Built without frame pointers: the same stacks as
// libunwind alone, and the lost block's shows each of its callers.
static void test_unwind_nofp(char *prog) {
    test_unwind_same(prog);
    char path[600];
    db_path(path, sizeof path, "default.db");
    if (!open_db(path)) return; // (said above)
    CHECK_MSG(count_blocks(1, 4242, 1, "inner", 0) == 1, "4242 B lost in inner");
    CHECK_MSG(count_blocks(1, 4242, 1, "middle", 1) == 1, "its frame 1 in middle");
    CHECK_MSG(count_blocks(1, 4242, 1, "outer", 2) == 1, "its frame 2 in outer");
    CHECK_MSG(count_blocks(1, 4242, 1, "main", 3) == 1, "its frame 3 in main");
    CHECK_MSG(qi("SELECT coalesce(sum(alloc_count), 0) FROM sites WHERE kind = 1") >= 4300, "every allocation");
}

int preload_scenario(const char *mode, char *prog, char *extra) {
    (void)extra;
    if (strcmp(mode, "unwind_same") == 0) test_unwind_same(prog);
    else if (strcmp(mode, "unwind_nofp") == 0) test_unwind_nofp(prog);
    else return -1;
    return check_failures;
}
