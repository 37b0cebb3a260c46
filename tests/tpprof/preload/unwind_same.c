// unwind_same.c: a scenario of the preload suite (tests/tpprof/meson.build gives
// each mode its test; harness.h runs the program under libtpprof.so).
// Mode: unwind_same.
#include "harness.h"



int preload_scenario(const char *mode, char *prog, char *extra) {
    (void)extra;
    if (strcmp(mode, "unwind_same") == 0) test_unwind_same(prog);
    else return -1;
    return check_failures;
}
