// running.c: a scenario of the preload suite (tests/tpprof/meson.build gives
// each mode its test; harness.h runs the program under libtpprof.so).
// Mode: running.
#include "harness.h"

// Threads still live at exit: a running one is stopped for the leak scan (a
// block only its registers point to is reachable, one only a dead frame
// below its stack pointer points to is lost); a blocked one is read from
// the stack pointer the kernel reports, and not woken.
static void test_running(char *prog) {
    char *argv[] = {prog, NULL};
    struct result r;
    if (!record("running.db", argv, NULL, &r)) return;
    CHECK_MSG(strcmp(r.out, "running: ready\n") == 0, "stdout '%s'", r.out);
    CHECK_MSG(count_blocks(2, 5555, 1, "running_in_register", 0) == 1, "the block in a register is reachable (lost: %d)",
          count_blocks(1, 5555, 1, "running_in_register", 0));
    CHECK_MSG(count_blocks(1, 6666, 1, "running_below_sp", 0) == 1, "the block in a dead frame is lost (reachable: %d)",
          count_blocks(2, 6666, 1, "running_below_sp", 0));
    // The sleeping thread: read from its stack pointer, not woken.
    CHECK_MSG(count_blocks(1, 7777, 1, "running_blocked_below_sp", 0) == 1,
          "the sleeper's dead-frame block is lost (reachable: %d)", count_blocks(2, 7777, 1, "running_blocked_below_sp", 0));
    CHECK_MSG(strstr(r.err, "interrupted") == NULL, "the sleeper was not woken: stderr '%s'", r.err);
    // TPPROF_SCAN_STOP=0: the spinning thread is not stopped, its whole
    // stack is read, dead frames too; the sleeper is read as before.
    if (!record("running_nostop.db", argv, "TPPROF_SCAN_STOP=0", &r)) return;
    CHECK_MSG(count_blocks(2, 6666, 1, "running_below_sp", 0) == 1, "not stopped: the dead frame's block is reachable");
    CHECK_MSG(count_blocks(1, 7777, 1, "running_blocked_below_sp", 0) == 1, "the sleeper's is still lost");
}

int preload_scenario(const char *mode, char *prog, char *extra) {
    (void)extra;
    if (strcmp(mode, "running") == 0) test_running(prog);
    else return -1;
    return check_failures;
}
