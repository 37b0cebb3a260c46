// errnos.c: a scenario of the preload suite (tests/tpprof/meson.build gives
// each mode its test; harness.h runs the program under libtpprof.so).
// Mode: errnos.
#include "harness.h"

// errno after each allocation call (progs/errnos.c) is what it is natively.
static void test_errnos(char *prog) {
    char *argv[] = {prog, NULL};
    struct result native = run(NULL, argv, NULL);
    struct result r;
    if (!record("errnos.db", argv, NULL, &r)) return;
    CHECK_MSG(native.status == 0 && strstr(native.out, "thread2 free(NULL): errno kept"), "native run: %s", native.out);
    CHECK_MSG(strcmp(r.out, native.out) == 0, "same errnos as natively:\n%s\nnatively:\n%s", r.out, native.out);
}

int preload_scenario(const char *mode, char *prog, char *extra) {
    (void)extra;
    if (strcmp(mode, "errnos") == 0) test_errnos(prog);
    else return -1;
    return check_failures;
}
