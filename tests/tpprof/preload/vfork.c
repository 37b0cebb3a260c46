// vfork.c: a scenario of the preload suite (tests/tpprof/meson.build gives
// each mode its test; harness.h runs the program under libtpprof.so).
// Mode: vfork.
#include "harness.h"

static void test_vfork(char *prog) {
    char *argv[] = {prog, NULL};
    struct result r;
    if (!record("vfork.db", argv, NULL, &r)) return;
    CHECK_MSG(strcmp(r.out, "child 3\nchild 3\nchild 3\n") == 0, "stdout '%s'", r.out);
    char v[64];
    qs(v, sizeof v, "SELECT value FROM meta WHERE key = 'end_reason'");
    CHECK_MSG(strcmp(v, "exit") == 0, "parent ended by exit, not by its children: '%s'", v);
    CHECK_MSG(count_blocks(1, 456, 1, "vfork_leak", 0) + count_blocks(2, 456, 1, "vfork_leak", 0) == 1,
          "recording went on after the vfork children");
}

int preload_scenario(const char *mode, char *prog, char *extra) {
    (void)extra;
    if (strcmp(mode, "vfork") == 0) test_vfork(prog);
    else return -1;
    return check_failures;
}
