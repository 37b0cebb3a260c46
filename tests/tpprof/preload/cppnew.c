// cppnew.c: a scenario of the preload suite (tests/tpprof/meson.build gives
// each mode its test; harness.h runs the program under libtpprof.so).
// Mode: cppnew.
#include "harness.h"

// Through libstdc++'s frameless operator new and string internals
// (progs/cppnew.cpp): the same stacks as libunwind's, and the frame-pointer
// walk's verdicts checked by another walk (the CFI walk's, else libunwind's)
// for a handful (SKIP verdicts learnt once), not for every one.
static void test_cppnew(char *prog) {
    test_unwind_same(prog);
    char a[600];
    db_path(a, sizeof a, "default.db");
    if (!open_db(a)) return;
    long long allocs = qi("SELECT sum(alloc_count) FROM sites"),
              slow = qi("SELECT sum(value) FROM meta WHERE key IN ('libunwind_walks', 'cfi_walks')");
    CHECK_MSG(allocs > 100000 && slow >= 1 && slow < 100, "CFI or libunwind walked %lld of %lld stacks", slow, allocs);
}

int preload_scenario(const char *mode, char *prog, char *extra) {
    (void)extra;
    if (strcmp(mode, "cppnew") == 0) test_cppnew(prog);
    else return -1;
    return check_failures;
}
