// closer.c: a scenario of the preload suite (tests/tpprof/meson.build gives
// each mode its test; harness.h runs the program under libtpprof.so).
// Mode: closer_.
#include "harness.h"

// A program that closes or takes over every descriptor above 2 (`mode`, see
// progs/closer.c), with `fork` in a forked child first: its files hold only
// what it wrote, and the recording goes on, complete, in both processes.
static void test_closer(char *prog, const char *mode, bool fork) {
    char name[64];
    snprintf(name, sizeof name, "closer-%s%s.db", mode, fork ? "-fork" : "");
    char *argv[] = {prog, (char *)mode, tmpdir, fork ? (char *)"fork" : NULL, NULL};
    struct result r;
    if (!record(name, argv, NULL, &r)) return;
    const char *ok = strstr(r.out, "closer ok\n");
    CHECK_MSG(ok && !strstr(r.err, "tpprof:"), "%s: stdout '%s', stderr '%s'", name, r.out, r.err);
    CHECK_MSG(count_blocks(1, 4321, 1, "lose_after_closing", 0) + count_blocks(2, 4321, 1, "lose_after_closing", 0) == 1,
          "%s: the block lost after the descriptors were closed", name);
    CHECK_MSG(qi("SELECT sum(alloc_count) FROM sites") > 20000, "%s: the allocations after it", name);
    if (!fork) return;
    const char *c = strstr(r.out, "child=");
    int child = c ? atoi(c + 6) : 0;
    char stem[64];
    snprintf(stem, sizeof stem, "closer-%s-fork", mode);
    if (!open_child_db(stem, child, "closer's child")) return;
    CHECK_MSG(count_blocks(1, 4321, 1, "lose_after_closing", 0) + count_blocks(2, 4321, 1, "lose_after_closing", 0) == 1,
          "%s: the child's block lost after closing", name);
    CHECK_MSG(qi("SELECT sum(alloc_count) FROM sites") > 20000, "%s: the child's allocations", name);
}

int preload_scenario(const char *mode, char *prog, char *extra) {
    (void)extra;
    if (strncmp(mode, "closer_", 7) == 0) {
        const char *m = mode + 7;
        bool fork = strncmp(m, "fork_", 5) == 0;
        test_closer(prog, fork ? m + 5 : m, fork);
    }
    else return -1;
    return check_failures;
}
