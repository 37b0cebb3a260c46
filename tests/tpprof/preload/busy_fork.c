// busy_fork.c: a scenario of the preload suite (tests/tpprof/meson.build gives
// each mode its test; harness.h runs the program under libtpprof.so).
// Mode: busyfork.
#include "harness.h"

// A program that forks while three threads allocate flat out: the merge
// lets each fork in (and keeps sampling the timeline) instead of holding
// its lock for as long as the threads keep it busy.
static void test_busy_fork(char *prog) {
    char *argv[] = {prog, NULL};
    struct result r;
    if (!record("busyfork.db", argv, NULL, &r)) return;
    CHECK_MSG(strcmp(r.out, "busyfork ok\n") == 0, "stdout '%s', stderr '%s'", r.out, r.err);
    int64_t gap = qi("SELECT max(b.time_ns - a.time_ns) FROM timeline a JOIN timeline b ON b.time_ns = "
                     "(SELECT min(time_ns) FROM timeline c WHERE c.time_ns > a.time_ns)");
    int64_t rows = qi("SELECT count(*) FROM timeline");
    // The timeline's period is 10 ms; a merge that never let go left gaps
    // of seconds (the whole run took 16 s, 0.05 s natively).
    CHECK_MSG(rows >= 3 && gap < 500000000, "timeline kept its pace: %lld rows, longest gap %lld ns", (long long)rows,
          (long long)gap);
    CHECK_MSG(qi("SELECT value FROM meta WHERE key = 'duration_ns'") < 10000000000LL, "the run took under 10 s");
}

int preload_scenario(const char *mode, char *prog, char *extra) {
    (void)extra;
    if (strcmp(mode, "busyfork") == 0) test_busy_fork(prog);
    else return -1;
    return check_failures;
}
