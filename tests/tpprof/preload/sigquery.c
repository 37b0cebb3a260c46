// sigquery.c: a scenario of the preload suite (tests/tpprof/meson.build gives
// each mode its test; harness.h runs the program under libtpprof.so).
// Mode: sigquery.
#include "harness.h"

// Signal dispositions set and read back by a strict ISO C program
// (progs/sigquery.c, signal() = __sysv_signal): as natively.
static void test_sigquery(char *prog) {
    char *argv[] = {prog, NULL};
    struct result native = run(NULL, argv, NULL);
    struct result r;
    if (!record("sigquery.db", argv, NULL, &r)) return;
    CHECK_MSG(native.status == 0 && strstr(native.out, "SIGTERM at start: default"), "native: %s", native.out);
    CHECK_MSG(strcmp(r.out, native.out) == 0, "under the preload:\n%s\nnatively:\n%s", r.out, native.out);
}

int preload_scenario(const char *mode, char *prog, char *extra) {
    (void)extra;
    if (strcmp(mode, "sigquery") == 0) test_sigquery(prog);
    else return -1;
    return check_failures;
}
