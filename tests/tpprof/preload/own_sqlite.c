// own_sqlite.c: a scenario of the preload suite (tests/tpprof/meson.build gives
// each mode its test; harness.h runs the program under libtpprof.so).
// Mode: ownsqlite.
#include "harness.h"

// A program that configures, shuts down and reconfigures its own SQLite
// (progs/ownsqlite.c) sees every call succeed as natively (the recorder's
// SQLite is another copy), and the recording goes on past its shutdown.
static void test_own_sqlite(char *prog) {
    char *argv[] = {prog, NULL};
    struct result native = run(NULL, argv, NULL);
    struct result r;
    if (!record("ownsqlite.db", argv, NULL, &r)) return;
    CHECK_MSG(native.status == 0 && strstr(native.out, "config multithread 0\n"), "native run: %s", native.out);
    CHECK_MSG(strcmp(r.out, native.out) == 0, "the same return codes as natively:\n%s\nnatively:\n%s", r.out, native.out);
    CHECK_MSG(qi("SELECT value FROM meta WHERE key = 'sqlite_shared'") == 0, "the recorder's SQLite is its own");
    // Lost, or reachable from a stale copy in exit's stack frames (the scan is conservative).
    CHECK_MSG(count_blocks(1, 3333, 1, "lost_after_shutdown", 0) + count_blocks(2, 3333, 1, "lost_after_shutdown", 0) == 1,
          "the block lost after the program's sqlite3_shutdown");
    CHECK_MSG(qi("SELECT sum(alloc_count) FROM sites") > 100, "the program's SQLite allocations are recorded: %lld",
          (long long)qi("SELECT sum(alloc_count) FROM sites"));
}

int preload_scenario(const char *mode, char *prog, char *extra) {
    (void)extra;
    if (strcmp(mode, "ownsqlite") == 0) test_own_sqlite(prog);
    else return -1;
    return check_failures;
}
