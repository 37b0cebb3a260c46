// manystacks.c: a scenario of the preload suite (tests/tpprof/meson.build gives
// each mode its test; harness.h runs the program under libtpprof.so).
// Mode: manystacks.
#include "harness.h"

// (progs/manystacks.c)
static void test_manystacks(char *prog) {
    char *argv[] = {prog, NULL};
    struct result r;
    if (record("manystacks.db", argv, "TPPROF_TEST_MAX_STACKS=300", &r)) {
        CHECK_MSG(strcmp(r.out, "manystacks ok\n") == 0, "stdout '%s'", r.out);
        int64_t full = qi("SELECT value FROM meta WHERE key = 'stacks_full'");
        int64_t nostack = qi("SELECT coalesce(sum(alloc_count), 0) FROM sites WHERE stack_id = 0");
        CHECK_MSG(nostack >= 1024 - 300 && full >= nostack, "%lld allocations without a stack, stacks_full %lld",
              (long long)nostack, (long long)full);
        CHECK_MSG(qi("SELECT sum(alloc_count) FROM sites") >= 1024, "every allocation recorded");
    }
}

int preload_scenario(const char *mode, char *prog, char *extra) {
    (void)extra;
    if (strcmp(mode, "manystacks") == 0) test_manystacks(prog);
    else return -1;
    return check_failures;
}
