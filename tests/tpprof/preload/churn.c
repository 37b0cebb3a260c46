// churn.c: a scenario of the preload suite (tests/tpprof/meson.build gives
// each mode its test; harness.h runs the program under libtpprof.so).
// Mode: churn.
#include "harness.h"

static void test_churn(char *prog) {
    char *argv[] = {prog, NULL};
    struct result r;
    if (!record("churn.db", argv, NULL, &r)) return;
    CHECK_MSG(qi("SELECT count(*) FROM threads") == 301, "301 threads, got %lld", (long long)qi("SELECT count(*) FROM threads"));
    CHECK_MSG(count_blocks(1, 2000, 1, "churn_leak", 0) == 300, "300 leaks of 2000 B, got %d",
          count_blocks(1, 2000, 1, "churn_leak", 0));
    CHECK_MSG(qi("SELECT count(DISTINCT tid) FROM live_blocks WHERE size = 2000") >= 2, "leaks from many threads");
    CHECK_MSG(qi("SELECT sum(temp_count) FROM sites WHERE alloc_bytes = %d", 300 * 10 * 48) == 3000, "3000 temporaries");
    // What one thread learnt of the code is every thread's: the 300 threads
    // run the same code, so no thread's first walks go to the CFI walk or
    // libunwind (whose first call on a thread mapped and filled a 256 KiB
    // cache for it; the CFI walk's state is 42 KiB).
    long long slow = qi("SELECT sum(value) FROM meta WHERE key IN ('libunwind_walks', 'cfi_walks')");
    CHECK_MSG(slow >= 1 && slow < 50, "CFI or libunwind walked %lld stacks for 300 threads of the same code", slow);
}

int preload_scenario(const char *mode, char *prog, char *extra) {
    (void)extra;
    if (strcmp(mode, "churn") == 0) test_churn(prog);
    else return -1;
    return check_failures;
}
