// unwritable.c: a scenario of the preload suite (tests/tpprof/meson.build gives
// each mode its test; harness.h runs the program under libtpprof.so).
// Mode: unwritable.
#include "harness.h"

static void test_unwritable(char *prog) {
    char *argv[] = {prog, NULL};
    struct result native = run(NULL, argv, NULL);
    struct result r = run("/nonexistent-tpprof-dir/x.db", argv, NULL);
    CHECK_MSG(r.status == native.status, "exit status %d vs %d", r.status, native.status);
    CHECK_MSG(strcmp(r.out, native.out) == 0, "same stdout");
    const char *want = "tpprof: cannot write /nonexistent-tpprof-dir/x.db: ";
    CHECK_MSG(strncmp(r.err, want, strlen(want)) == 0, "stderr starts with the message: '%s'", r.err);
    int lines = 0;
    for (const char *p = r.err; *p; p++) lines += *p == '\n';
    CHECK_MSG(lines == 1, "exactly one stderr line, got %d: '%s'", lines, r.err);
    CHECK_MSG(strstr(r.err, "; recording disabled\n") != NULL, "says recording is disabled");
}

int preload_scenario(const char *mode, char *prog, char *extra) {
    (void)extra;
    if (strcmp(mode, "unwritable") == 0) test_unwritable(prog);
    else return -1;
    return check_failures;
}
