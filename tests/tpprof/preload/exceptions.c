// exceptions.c: a scenario of the preload suite (tests/tpprof/meson.build gives
// each mode its test; harness.h runs the program under libtpprof.so).
// Mode: exceptions.
#include "harness.h"

static void test_exceptions(char *prog) {
    char out[600];
    db_path(out, sizeof out, "exceptions.db");
    char *argv[] = {prog, NULL};
    struct result native = run(NULL, argv, NULL);
    struct result r = run(out, argv, NULL);
    CHECK_MSG(native.status == 0, "native exit status %d", native.status);
    CHECK_MSG(r.status == native.status, "exit status %d vs native %d", r.status, native.status);
    CHECK_MSG(strcmp(r.out, native.out) == 0, "same output: '%s' vs '%s'", r.out, native.out);
    CHECK_MSG(r.err[0] == 0, "nothing on stderr: %s", r.err);
    if (!open_db(out)) {
        CHECK_MSG(false, "no database");
        return;
    }
    expect_complete("exceptions");
    CHECK_MSG(qi("SELECT sum(alloc_count) FROM sites") >= 20000, "exception allocations recorded");
    CHECK_MSG(qi("SELECT count(*) FROM live_blocks WHERE reachability = 1") == 0, "no lost block");
}

int preload_scenario(const char *mode, char *prog, char *extra) {
    (void)extra;
    if (strcmp(mode, "exceptions") == 0) test_exceptions(prog);
    else return -1;
    return check_failures;
}
