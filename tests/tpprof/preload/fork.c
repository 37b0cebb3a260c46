// fork.c: a scenario of the preload suite (tests/tpprof/meson.build gives
// each mode its test; harness.h runs the program under libtpprof.so).
// Mode: fork.
#include "harness.h"

static void test_fork(char *prog) {
    char out[600];
    db_path(out, sizeof out, "fork.db");
    char *argv[] = {prog, NULL};
    struct result r = run(out, argv, NULL);
    CHECK_MSG(r.status == 0, "exit status %d", r.status);
    int child = 0;
    const char *c = strstr(r.out, "child=");
    if (c) child = atoi(c + 6);
    CHECK_MSG(child > 0, "child pid printed: %s", r.out);
    if (!open_db(out)) {
        CHECK_MSG(false, "no parent database");
        return;
    }
    expect_complete("parent");
    int64_t parent_pid = qi("SELECT value FROM meta WHERE key = 'pid'");
    CHECK_MSG(count_blocks(1, 555, 1, "parent_leak", 0) == 1, "parent leak in parent db");
    CHECK_MSG(count_blocks(1, 777, -1, NULL, 0) == 0, "child leak not in parent db");
    CHECK_MSG(count_blocks(1, 111, 1, "pre_fork_leak", 0) == 1, "pre-fork leak in parent db");
    if (!open_child_db("fork", child, "child")) return;
    CHECK_MSG(qi("SELECT value FROM meta WHERE key = 'parent_pid'") == parent_pid, "child meta.parent_pid");
    CHECK_MSG(qi("SELECT value FROM meta WHERE key = 'pid'") == child, "child meta.pid");
    CHECK_MSG(count_blocks(1, 777, 1, "child_leak", 0) == 1, "child leak in child db");
    CHECK_MSG(count_blocks(1, 555, -1, NULL, 0) == 0, "parent's later leak not in child db");
    // What it inherited is the parent's (its own recording has it): not the
    // child's leak, and none of the parent's allocations counted again.
    CHECK_MSG(count_blocks(1, 111, -1, NULL, 0) == 0, "the inherited leak is not in the child db");
    CHECK_MSG(qi("SELECT count(*) FROM sites WHERE alloc_bytes = 111") == 0, "no site of the parent's allocation");
    CHECK_MSG(qi("SELECT count(*) FROM sites WHERE alloc_bytes = 777 AND alloc_count = 1") == 1, "the child's own");
}

int preload_scenario(const char *mode, char *prog, char *extra) {
    (void)extra;
    if (strcmp(mode, "fork") == 0) test_fork(prog);
    else return -1;
    return check_failures;
}
