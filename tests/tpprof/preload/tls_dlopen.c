// tls_dlopen.c: a scenario of the preload suite (tests/tpprof/meson.build gives
// each mode its test; harness.h runs the program under libtpprof.so).
// Mode: tls_dlopen.
//
// Modules with TLS loaded after the start: the loader grows each thread's
// TLS vector with malloc/realloc, inside dlopen or at the thread's next TLS
// access. A hook that unwound such a call with libunwind (which reaches its
// own TLS through __tls_get_addr) made the loader grow the vector again
// inside the first growth: one allocation went unrecorded (the recording
// incomplete) and ld.so lost the other (a leak tpprof caused; PyTorch's
// import hit it). Each such call is recorded, with a stack, and nothing is
// lost.
#include "harness.h"

static void test_tls_dlopen(char *prog, char *libs) {
    char *argv[40] = {prog};
    int n = 1;
    for (char *save = NULL, *l = strtok_r(libs, ":", &save); l && n < 39; l = strtok_r(NULL, ":", &save))
        argv[n++] = l;
    argv[n] = NULL;
    struct result r;
    if (!record("tls.db", argv, NULL, &r)) return;
    CHECK_MSG(r.status == 0, "the program ran as natively (status %d)", r.status);
    expect_complete("a program loading TLS modules");
    CHECK_MSG(qi("SELECT count(*) FROM meta WHERE key = 'events_unrecorded' AND CAST(value AS INTEGER) > 0") == 0,
              "no allocation or free was left unrecorded");
    CHECK_MSG(qi("SELECT count(*) FROM live_blocks WHERE reachability = 1") == 0, "nothing is lost");
    CHECK_MSG(qi("SELECT count(*) FROM sites WHERE stack_id = 0") == 0, "every allocation has a stack");
    CHECK_MSG(qi("SELECT count(*) FROM sites") > 0, "the loader's and the modules' allocations are recorded");
}

int preload_scenario(const char *mode, char *prog, char *extra) {
    if (strcmp(mode, "tls_dlopen") == 0 && extra) test_tls_dlopen(prog, extra);
    else return -1;
    return check_failures;
}
