// vfork_many.c: a scenario of the preload suite (tests/tpprof/meson.build gives
// each mode its test; harness.h runs the program under libtpprof.so).
// Mode: vfork_many.
#include "harness.h"

// 200 vfork+execl (progs/vforker.c many): the children's exec wrappers map
// nothing in the memory they share with the parent (each left 50 KiB there:
// 10 MB here).
static void test_vfork_many(char *prog) {
    char *argv[] = {prog, "many", NULL};
    struct result r;
    if (!record("vfork_many.db", argv, NULL, &r)) return;
    long grew = 1 << 30;
    sscanf(r.out, "grew %ld", &grew);
    // (The recorder's own tables and SQLite's cache grow with the run: a few
    // hundred KiB.)
    CHECK_MSG(strncmp(r.out, "grew ", 5) == 0 && grew < 2048, "the parent's mappings grew %ld KiB over 200 vfork+exec", grew);
}

int preload_scenario(const char *mode, char *prog, char *extra) {
    (void)extra;
    if (strcmp(mode, "vfork_many") == 0) test_vfork_many(prog);
    else return -1;
    return check_failures;
}
