// main_exit.c: a scenario of the preload suite (tests/tpprof/meson.build gives
// each mode its test; harness.h runs the program under libtpprof.so).
// Modes: mainexit, mainexit_fork, mainexit_fork_return, mainexit_alone.
#include "harness.h"

// main's pthread_exit (progs/mainexit.c): the process still ends, status 0,
// with its last thread, and the recording is complete.
// With `mode` "fork" the worker forks a child that must run to its end;
// "fork_return": one whose main thread then returns from its thread function
// (glibc's exit(0) as the last thread ends; it hung, the writer left).
static void test_main_exit(char *prog, const char *mode) {
    char *argv[] = {prog, (char *)mode, NULL};
    char name[64];
    snprintf(name, sizeof name, "mainexit-%s.db", mode ? mode : "worker");
    struct result r;
    if (!record(name, argv, NULL, &r)) return;
    char v[64];
    qs(v, sizeof v, "SELECT value FROM meta WHERE key = 'end_reason'");
    CHECK_MSG(strcmp(v, "exit") == 0, "ended by exit: '%s'", v);
    if (mode && strcmp(mode, "alone") == 0) return;
    CHECK_MSG(r.status == 0, "status %d (3: the child failed, 4: it never ended)", r.status);
    const char *want = mode ? "mainexit: child done\nmainexit: worker done\n" : "mainexit: worker done\n";
    CHECK_MSG(strcmp(r.out, want) == 0, "stdout '%s'", r.out);
    CHECK_MSG(count_blocks(1, 5555, 1, "worker_leak", 0) + count_blocks(2, 5555, 1, "worker_leak", 0) == 1,
          "the worker's block, recorded after main was gone");
    CHECK_MSG(qi("SELECT sum(alloc_count) FROM sites") > 10000, "the worker's allocations");
}

int preload_scenario(const char *mode, char *prog, char *extra) {
    (void)extra;
    if (strcmp(mode, "mainexit") == 0) test_main_exit(prog, NULL);
    else if (strcmp(mode, "mainexit_fork") == 0) test_main_exit(prog, "fork");
    else if (strcmp(mode, "mainexit_fork_return") == 0) test_main_exit(prog, "fork_return");
    else if (strcmp(mode, "mainexit_alone") == 0) test_main_exit(prog, "alone");
    else return -1;
    return check_failures;
}
