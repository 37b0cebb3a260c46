// quick.c: a scenario of the preload suite (tests/tpprof/meson.build gives
// each mode its test; harness.h runs the program under libtpprof.so).
// Modes: _exit, abort, quick_exit, kill9.
#include "harness.h"

static void test_quick(char *prog, const char *how) {
    char out[600];
    db_path(out, sizeof out, "quick.db");
    char *argv[] = {prog, (char *)how, NULL};
    struct result r = run(out, argv, NULL);
    bool is_abort = strcmp(how, "abort") == 0, is_kill = strcmp(how, "hang") == 0;
    CHECK_MSG(r.status == (is_abort ? 128 + 6 : is_kill ? 128 + 9 : 7), "exit status %d", r.status);
    CHECK_MSG(open_db(out), "database opens after %s", how);
    if (!db) return;
    char v[64];
    qs(v, sizeof v, "SELECT value FROM meta WHERE key = 'tool'");
    CHECK_MSG(strcmp(v, "tpprof") == 0, "meta readable after %s", how);
    qs(v, sizeof v, "SELECT coalesce((SELECT value FROM meta WHERE key = 'complete'), '0')");
    bool is_exit = !is_abort && !is_kill;
    // _exit is how shells and forked children end: a complete, scanned
    // recording; so is an abort, written by the recorder's SIGABRT handler.
    CHECK_MSG(strcmp(v, is_kill ? "0" : "1") == 0, "complete is '%s' after %s", v, how);
    CHECK_MSG(qi("SELECT count(*) FROM sites WHERE alloc_bytes >= 3333") >= 1, "the flushed allocation is there");
    if (is_exit) {
        CHECK_MSG(qi("SELECT count(*) FROM live_blocks WHERE size = 3333 AND reachability IN (1, 2)") == 1,
              "_exit writes the live set, scanned");
        qs(v, sizeof v, "SELECT coalesce((SELECT value FROM meta WHERE key = 'leak_scan'), '0')");
        CHECK_MSG(strcmp(v, "1") == 0, "the leak scan ran before _exit");
    }
    if (strcmp(how, "quick_exit") == 0)
        CHECK_MSG(qi("SELECT count(*) FROM live_blocks WHERE size = 2222 AND reachability IN (1, 2)") == 1,
              "the at_quick_exit handler's block, recorded and scanned");
}

int preload_scenario(const char *mode, char *prog, char *extra) {
    (void)extra;
    if (strcmp(mode, "_exit") == 0 || strcmp(mode, "abort") == 0 || strcmp(mode, "quick_exit") == 0) test_quick(prog, mode);
    else if (strcmp(mode, "kill9") == 0) {
        kill_after_ms = 300;
        kill_when_sql = "SELECT count(*) FROM sites WHERE alloc_bytes >= 3333";
        test_quick(prog, "hang");
    }
    else return -1;
    return check_failures;
}
