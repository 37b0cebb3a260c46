// alt_stack.c: a scenario of the preload suite (tests/tpprof/meson.build gives
// each mode its test; harness.h runs the program under libtpprof.so).
// Modes: altstack_garbage, altstack_small.
#include "harness.h"

// Allocations in a signal handler on an alternate signal stack
// (progs/altstack.c, `mode` garbage or small): the program runs as natively
// and the handler's block is recorded, its stack starting in handler_leak.
static void test_alt_stack(char *prog, const char *mode) {
    char *argv[] = {prog, (char *)mode, NULL};
    char name[64], want[64];
    snprintf(name, sizeof name, "altstack-%s.db", mode);
    snprintf(want, sizeof want, "altstack %s ok\n", mode);
    struct result r;
    if (!record(name, argv, NULL, &r)) return;
    CHECK_MSG(strcmp(r.out, want) == 0, "stdout '%s'", r.out);
    // Lost, or reachable through the signal stack's dead frames (an mmap'd
    // block that is itself reachable): the scan is conservative.
    CHECK_MSG(count_blocks(1, 4321, 1, "handler_leak", 0) + count_blocks(2, 4321, 1, "handler_leak", 0) == 1,
          "the handler's block, its stack from handler_leak");
}

int preload_scenario(const char *mode, char *prog, char *extra) {
    (void)extra;
    if (strcmp(mode, "altstack_garbage") == 0) test_alt_stack(prog, "garbage");
    else if (strcmp(mode, "altstack_small") == 0) test_alt_stack(prog, "small");
    else return -1;
    return check_failures;
}
