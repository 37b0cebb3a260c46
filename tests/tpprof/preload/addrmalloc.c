// addrmalloc.c: a scenario of the preload suite (tests/tpprof/meson.build gives
// each mode its test; harness.h runs the program under libtpprof.so).
// Mode: addrmalloc.
#include "harness.h"

// (progs/addrmalloc.c)
static void test_addrmalloc(char *prog) {
    char *argv[] = {prog, NULL};
    struct result r;
    if (record("addrmalloc.db", argv, NULL, &r)) {
        CHECK_MSG(strcmp(r.out, "addrmalloc ok\n") == 0, "stdout '%s'", r.out);
        CHECK_MSG(qi("SELECT count(*) FROM meta WHERE key = 'malloc_replaced_by'") == 0,
              "malloc's canonical PLT entry is not an allocator of the program's");
        CHECK_MSG(count_blocks(1, 1234, 1, "main", 0) == 1, "the block allocated through the pointer, lost");
    }
}

int preload_scenario(const char *mode, char *prog, char *extra) {
    (void)extra;
    if (strcmp(mode, "addrmalloc") == 0) test_addrmalloc(prog);
    else return -1;
    return check_failures;
}
