// noleak_malloc_ours.c: a scenario of the preload suite (tests/tpprof/meson.build gives
// each mode its test; harness.h runs the program under libtpprof.so).
// Mode: noleak_malloc_ours.
#include "harness.h"

static void test_noleak_malloc_ours(char *prog) {
    char *argv[] = {prog, NULL};
    struct result r;
    if (record("ours.db", argv, NULL, &r))
        CHECK_MSG(qi("SELECT count(*) FROM meta WHERE key = 'malloc_replaced_by'") == 0, "an ordinary program: no key");
}

int preload_scenario(const char *mode, char *prog, char *extra) {
    (void)extra;
    if (strcmp(mode, "noleak_malloc_ours") == 0) test_noleak_malloc_ours(prog);
    else return -1;
    return check_failures;
}
