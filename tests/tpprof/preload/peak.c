// peak.c: a scenario of the preload suite (tests/tpprof/meson.build gives
// each mode its test; harness.h runs the program under libtpprof.so).
// Modes: peak, full.
#include "harness.h"

static void test_peak(char *prog, bool full) {
    char out[600];
    db_path(out, sizeof out, full ? "peak-full.db" : "peak.db");
    char *argv[] = {prog, NULL};
    struct result r = run(out, argv, full ? "TPPROF_MODE=full" : NULL);
    CHECK_MSG(r.status == 0, "exit status %d", r.status);
    if (!open_db(out)) {
        CHECK_MSG(false, "no database");
        return;
    }
    expect_complete("peak");
    int64_t peak = qi("SELECT value FROM meta WHERE key = 'peak_bytes'");
    CHECK_MSG(peak >= 3 << 20 && peak < (3 << 20) + (64 << 10), "peak %lld ~ 3 MiB", (long long)peak);
    CHECK_MSG(qi("SELECT sum(peak_bytes) FROM sites") == peak, "site peaks add up to the peak");
    CHECK_MSG(qi("SELECT peak_bytes FROM sites WHERE alloc_bytes = %d", 1 << 20) == 1 << 20, "A live at the peak");
    CHECK_MSG(qi("SELECT peak_bytes FROM sites WHERE alloc_bytes = %d", 2 << 20) == 2 << 20, "B live at the peak");
    CHECK_MSG(qi("SELECT peak_bytes FROM sites WHERE alloc_bytes = %d", 512 << 10) == 0, "C not live at the peak");
    CHECK_MSG(qi("SELECT temp_count FROM sites WHERE alloc_bytes = 6400") == 100, "100 temporaries in temp_loop");
    // nontemp_loop: p is followed by another allocation before its free (not a
    // temporary); q is freed with no allocation in between (a temporary).
    CHECK_MSG(qi("SELECT min(temp_count) FROM sites WHERE alloc_bytes = 9600") == 0, "p in nontemp_loop: not temporaries");
    CHECK_MSG(qi("SELECT max(temp_count) FROM sites WHERE alloc_bytes = 9600") == 100, "q in nontemp_loop: temporaries");
    CHECK_MSG(qi("SELECT count(*) FROM timeline") >= 1, "timeline sampled");
    CHECK_MSG(qi("SELECT max(alloc_calls) FROM timeline") >= 303, "timeline counts calls");
    if (full) {
        CHECK_MSG(qi("SELECT count(*) FROM events WHERE op = 1 AND size = %d", 2 << 20) == 1, "full: the 2 MiB alloc");
        int64_t a = qi("SELECT seq FROM events WHERE op = 1 AND size = %d", 1 << 20);
        int64_t b = qi("SELECT seq FROM events WHERE op = 1 AND size = %d", 2 << 20);
        int64_t fa = qi("SELECT min(e.seq) FROM events e WHERE e.op = 2 AND e.address ="
                        " (SELECT address FROM events WHERE op = 1 AND size = %d)", 1 << 20);
        CHECK_MSG(a < b && b < fa, "full: events in order (%lld %lld %lld)", (long long)a, (long long)b, (long long)fa);
        CHECK_MSG(qi("SELECT count(*) FROM events WHERE op = 2") >= 303, "full: frees");
    } else {
        CHECK_MSG(qi("SELECT count(*) FROM events") == 0, "aggregate mode keeps no events");
    }
}

// The peak moves after periodic flushes wrote the sites of the first one
// with their shares of it: A and B, not changed since, are in no row of the
// new peak (the final flush rewrites their rows: store/store.c).
static void test_peak_moves(char *prog) {
    char out[600];
    db_path(out, sizeof out, "peak-moves.db");
    char *argv[] = {prog, "moves", NULL};
    struct result r = run(out, argv, "TPPROF_TEST_FLUSH_MS=20");
    CHECK_MSG(r.status == 0, "exit status %d", r.status);
    if (!open_db(out)) {
        CHECK_MSG(false, "no database");
        return;
    }
    expect_complete("peak moves");
    CHECK_MSG(qi("SELECT value FROM meta WHERE key = 'flushes_count'") >= 2, "flushes while it ran: %lld",
              (long long)qi("SELECT value FROM meta WHERE key = 'flushes_count'"));
    int64_t peak = qi("SELECT value FROM meta WHERE key = 'peak_bytes'");
    CHECK_MSG(peak >= 4 << 20 && peak < (4 << 20) + (64 << 10), "peak %lld ~ 4 MiB", (long long)peak);
    CHECK_MSG(qi("SELECT sum(peak_bytes) FROM sites") == peak, "site peaks add up to the peak (%lld, %lld)",
              (long long)qi("SELECT sum(peak_bytes) FROM sites"), (long long)peak);
    CHECK_MSG(qi("SELECT peak_bytes FROM sites WHERE alloc_bytes = %d", 4 << 20) == 4 << 20, "D live at the peak");
    CHECK_MSG(qi("SELECT peak_count + peak_bytes FROM sites WHERE alloc_bytes = %d", 1 << 20) == 0, "A not live at it");
    CHECK_MSG(qi("SELECT peak_count + peak_bytes FROM sites WHERE alloc_bytes = %d", 2 << 20) == 0, "B not live at it");
}

int preload_scenario(const char *mode, char *prog, char *extra) {
    (void)extra;
    if (strcmp(mode, "peak") == 0) test_peak(prog, false);
    else if (strcmp(mode, "full") == 0) test_peak(prog, true);
    else if (strcmp(mode, "peak_moves") == 0) test_peak_moves(prog);
    else return -1;
    return check_failures;
}
