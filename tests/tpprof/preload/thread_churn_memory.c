// thread_churn_memory.c: a scenario of the preload suite (tests/tpprof/meson.build gives
// each mode its test; harness.h runs the program under libtpprof.so).
// Mode: churn_many.
#include "harness.h"

// 6000 threads one after another: the recorder releases a thread's ring,
// unwinder state and stack cache once it is gone (they were ~25 KB resident
// a thread, 150 MB here, and a mapping or more each).
static void test_thread_churn_memory(char *prog) {
    char *argv[] = {prog, "6000", NULL};
    struct result r;
    if (!record("churn_many.db", argv, NULL, &r)) return;
    const char *k = strstr(r.out, "rss_kb=");
    long rss = k ? atol(k + 7) : -1;
    CHECK_MSG(rss > 0 && rss < 80000, "resident memory after 6000 threads: %ld kB (under 80 MB expected)", rss);
    CHECK_MSG(qi("SELECT count(*) FROM threads") == 6001, "6001 threads, got %lld", (long long)qi("SELECT count(*) FROM threads"));
    CHECK_MSG(qi("SELECT sum(temp_count) FROM sites WHERE alloc_bytes = 6000 * 64") == 6000, "6000 temporaries");
}

int preload_scenario(const char *mode, char *prog, char *extra) {
    (void)extra;
    if (strcmp(mode, "churn_many") == 0) test_thread_churn_memory(prog);
    else return -1;
    return check_failures;
}
