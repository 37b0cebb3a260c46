// exit_busy.c: a scenario of the preload suite (tests/tpprof/meson.build gives
// each mode its test; harness.h runs the program under libtpprof.so).
// Mode: exitbusy.
#include "harness.h"

// exit while three threads allocate flat out, sharing one arena
// (progs/exitbusy.c): the final drain takes what the rings held when exit
// began instead of chasing the threads (it took 1 to 17 s).
static void test_exit_busy(char *prog) {
    char *argv[] = {prog, NULL};
    struct result r;
    if (!record("exitbusy.db", argv, "MALLOC_ARENA_MAX=1", &r)) return;
    CHECK_MSG(strcmp(r.out, "exitbusy: exiting\n") == 0, "stdout '%s'", r.out);
    CHECK_MSG(count_blocks(1, 4444, 1, "exit_leak", 0) + count_blocks(2, 4444, 1, "exit_leak", 0) == 1, "main's lost block");
    CHECK_MSG(qi("SELECT value FROM meta WHERE key = 'duration_ns'") < 5000000000LL, "the run (with its exit) under 5 s: %lld ns",
          (long long)qi("SELECT value FROM meta WHERE key = 'duration_ns'"));
}

int preload_scenario(const char *mode, char *prog, char *extra) {
    (void)extra;
    if (strcmp(mode, "exitbusy") == 0) test_exit_busy(prog);
    else return -1;
    return check_failures;
}
