// test_symbolize.c: tpprof symbolizes a recording whose `symbols` table is
// empty, with libdw, from real return addresses into this very executable:
// function, file and line; kept in memory for a read-only file, saved into a
// writable one; and refused (left as addresses) when the build-id differs.
#define _POSIX_C_SOURCE 200809L
#include "fixture.h"
#include "harness.h"

#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static long long count_symbols(const char *path) {
    sqlite3 *db = NULL;
    long long n = -1;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK) {
        sqlite3_stmt *st = NULL;
        if (sqlite3_prepare_v2(db, "SELECT COUNT(*) FROM symbols", -1, &st, NULL) == SQLITE_OK &&
            sqlite3_step(st) == SQLITE_ROW)
            n = sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
    }
    sqlite3_close(db);
    return n;
}

static void test_frames_resolve_to_function_file_and_line(void) {
    const char *db = harness_path("self.db");
    int lines[3] = {0};
    CHECK(fixture_write_self(db, false, lines) == 0, "fixture");
    CHECK(count_symbols(db) == 0, "starts unsymbolized");
    run_result r = harness_tpprof("report", db, "--leaks", NULL);
    CHECK(r.status == 0, "status %d: %s", r.status, r.err);
    char want[256];
    snprintf(want, sizeof want,
             "      fixture_inlined (fixture.c:%d)\n      fixture_leaker (fixture.c:%d)\n"
             "      fixture_outer (fixture.c:%d)\n",
             lines[0], lines[2], lines[1]);
    CHECK(strstr(r.out, want), "want:\n%s\ngot:\n%s", want, r.out);
    CHECK(strstr(r.out, "symbols     resolved now and saved into the database"), "%s", r.out);
    CHECK(r.err[0] == 0, "no warnings: %s", r.err);
    harness_result_free(&r);
    CHECK(count_symbols(db) == 3, "inlined + containing + outer saved: %lld", count_symbols(db));

    // The second report reads the saved symbols.
    r = harness_tpprof("report", db, "--leaks", "--format", "json", NULL);
    CHECK(r.status == 0, "status %d", r.status);
    snprintf(want, sizeof want, "\"function\": \"fixture_inlined\", \"file\": ");
    CHECK(strstr(r.out, want), "%s", r.out);
    snprintf(want, sizeof want, "fixture.c\", \"line\": %d, \"module\": \"/", lines[2]);
    CHECK(strstr(r.out, want), "%s", r.out);
    CHECK(!strstr(r.out, "resolved now"), "not symbolized twice");
    harness_result_free(&r);
}

static void test_read_only_file_is_symbolized_in_memory_only(void) {
    const char *db = harness_path("self-ro.db");
    int lines[3] = {0};
    CHECK(fixture_write_self(db, false, lines) == 0, "fixture");
    CHECK(chmod(db, 0444) == 0, "chmod");
    run_result r = harness_tpprof("check", db, NULL);
    CHECK(r.status == 1, "status %d: %s", r.status, r.err);
    char want[128];
    snprintf(want, sizeof want, "FAIL lost bytes 64 > 0: 64 B in fixture_inlined (fixture.c:%d)\n",
             lines[0]);
    CHECK(strcmp(r.out, want) == 0, "want %s got %s", want, r.out);
    harness_result_free(&r);
    // root writes a 0444 file anyway (access(W_OK) succeeds), so only others can check this.
    if (geteuid() != 0)
        CHECK(count_symbols(db) == 0, "read-only file untouched");
}

static void test_rebuilt_binary_is_not_trusted(void) {
    const char *db = harness_path("self-stale.db");
    int lines[3] = {0};
    CHECK(fixture_write_self(db, true, lines) == 0, "fixture");
    run_result r = harness_tpprof("report", db, "--leaks", NULL);
    CHECK(r.status == 0, "status %d", r.status);
    CHECK(!strstr(r.out, "fixture_"), "no names from a mismatched build:\n%s", r.out);
    CHECK(strstr(r.out, " (test_symbolize)\n"), "address + module instead:\n%s", r.out);
    CHECK(strstr(r.err, "was rebuilt since the recording") && harness_lines(r.err) == 1, "%s", r.err);
    harness_result_free(&r);
}

int main(int argc, char **argv) {
    harness_init(argc, argv);
    RUN_TEST(test_frames_resolve_to_function_file_and_line);
    RUN_TEST(test_read_only_file_is_symbolized_in_memory_only);
    RUN_TEST(test_rebuilt_binary_is_not_trusted);
    return harness_finish();
}
