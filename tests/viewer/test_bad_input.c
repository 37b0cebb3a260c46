// test_bad_input.c: every way to hand tpprof a bad file or bad arguments
// ends in exit status 2 and exactly one line on stderr naming the problem,
// never a crash and never output on stdout.
#define _POSIX_C_SOURCE 200809L
#include "fixture.h"
#include "harness.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *app_db;

// Run tpprof with the given args and expect a one-line refusal containing `needle`.
#define EXPECT_REFUSED(needle, ...)                                                                \
    harness_expect_usage_error(#__VA_ARGS__, harness_tpprof(__VA_ARGS__, NULL), needle)

static int write_bytes(const char *path, const void *data, size_t n) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        return -1;
    ssize_t w = write(fd, data, n);
    close(fd);
    return w == (ssize_t)n ? 0 : -1;
}

static int copy_prefix(const char *from, const char *to, size_t n) {
    char *all = harness_read_file(from);
    if (!all)
        return -1;
    int rc = write_bytes(to, all, n);
    free(all);
    return rc;
}

// ---------------------------------------------------------------------------
// Files

static void test_missing_file_is_refused(void) {
    const char *p = harness_path("does-not-exist.db");
    EXPECT_REFUSED("No such file or directory", "report", p);
    EXPECT_REFUSED("No such file or directory", "check", p);
}

static void test_directory_is_refused(void) {
    EXPECT_REFUSED("is a directory", "report", harness_dir());
}

// An empty file, or a SQLite database without a table, is what the recorder
// leaves when its first write fails (a full disk): report refuses it in one
// line, and check fails on it (1, not 2: a recording that lost everything).
static void test_empty_recording_is_refused_and_fails_check(void) {
    const char *p = harness_path("empty.db");
    CHECK(write_bytes(p, "", 0) == 0, "write");
    EXPECT_REFUSED("nothing was recorded: tpprof could not write it", "report", p);
    const char *tables = harness_path("no_tables.db");
    sqlite3 *db = NULL;
    CHECK(sqlite3_open(tables, &db) == SQLITE_OK &&
              sqlite3_exec(db, "PRAGMA journal_mode=WAL; PRAGMA user_version=1", NULL, NULL, NULL) == SQLITE_OK,
          "sqlite");
    sqlite3_close(db);
    const char *files[] = {p, tables};
    for (int i = 0; i < 2; i++) {
        run_result r = harness_tpprof("check", files[i], NULL);
        CHECK(r.status == 1 && harness_lines(r.out) == 1 &&
                  strstr(r.out, "FAIL recording cannot be vouched for: nothing was recorded: tpprof could not write it"),
              "%s: status %d: %s%s", files[i], r.status, r.out, r.err);
        harness_result_free(&r);
    }
}

static void test_text_file_is_not_sqlite(void) {
    const char *p = harness_path("notes.txt");
    const char text[] = "these are not the bytes you are looking for, and there are more than one "
                        "hundred of them so that the header check has something to read at all.\n";
    CHECK(write_bytes(p, text, sizeof text - 1) == 0, "write");
    EXPECT_REFUSED("is not a SQLite database", "report", p);
    EXPECT_REFUSED("is not a SQLite database", "check", p);
}

static void test_truncated_file_is_named_truncated(void) {
    const char *half = harness_path("half.db");
    CHECK(copy_prefix(app_db, half, 2 * 4096) == 0, "copy");
    EXPECT_REFUSED("is truncated", "report", half);
    EXPECT_REFUSED("is truncated", "check", half);
    const char *ragged = harness_path("ragged.db");
    CHECK(copy_prefix(app_db, ragged, 4096 + 1000) == 0, "copy");
    EXPECT_REFUSED("is truncated", "report", ragged);
}

static void test_corrupt_pages_are_an_error_not_a_crash(void) {
    const char *p = harness_path("corrupt.db");
    char *all = harness_read_file(app_db);
    CHECK(all != NULL, "read");
    if (!all)
        return;
    // Keep the header page, scribble over everything after it.
    FILE *f = fopen(app_db, "rb");
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fclose(f);
    for (long i = 4096; i < size; i++)
        all[i] = (char)(i * 131 + 7);
    CHECK(write_bytes(p, all, (size_t)size) == 0, "write");
    free(all);
    EXPECT_REFUSED("corrupt", "report", p);
    EXPECT_REFUSED("corrupt", "check", p);
}

static void test_foreign_sqlite_database_is_refused(void) {
    const char *p = harness_path("people.db");
    CHECK(fixture_write_foreign_sqlite(p) == 0, "fixture");
    EXPECT_REFUSED("not a tpprof recording (no meta table)", "report", p);
    const char *q = harness_path("notool.db");
    fixture_options o = {.foreign = true};
    CHECK(fixture_write(q, &o) == 0, "fixture");
    EXPECT_REFUSED("not a tpprof recording (meta.tool is not 'tpprof')", "check", q);
}

static void test_newer_schema_version_is_refused(void) {
    const char *p = harness_path("future.db");
    fixture_options o = {.schema_version = TPPROF_SCHEMA_VERSION + 1};
    CHECK(fixture_write(p, &o) == 0, "fixture");
    char both[128], newer[64];
    snprintf(both, sizeof both, "uses schema version %d; this tpprof reads version %d or older",
             TPPROF_SCHEMA_VERSION + 1, TPPROF_SCHEMA_VERSION);
    snprintf(newer, sizeof newer, "uses schema version %d", TPPROF_SCHEMA_VERSION + 1);
    EXPECT_REFUSED(both, "report", p);
    EXPECT_REFUSED(newer, "check", p);
}

static void test_bad_baseline_is_an_input_error(void) {
    EXPECT_REFUSED("baseline: cannot open", "check", app_db, "--baseline",
                   harness_path("nope.db"));
}

static void test_hostile_rows_are_reported_without_crashing(void) {
    // A valid tpprof file whose rows make no sense: a cycle in the trie, a
    // stack id that names no node, a negative size, NULL counters, an
    // unknown kind, an ip in no module.
    const char *p = harness_path("hostile.db");
    CHECK(fixture_write_edited(p, &(fixture_options){0},
                               "INSERT INTO stack_nodes VALUES (100, 101, 1), (101, 100, 2);"
                               "INSERT INTO live_blocks VALUES (1, 64, 1, 100, 1, 1, 1),"
                               "  (2, -5, 42, 999, 1, 1, 1), (3, 7, 1, 0, NULL, NULL, 7);"
                               "INSERT INTO sites VALUES (100, 42, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),"
                               "  (999, 1, 5, -10, 1, 1, 1, 1, 1, -1)") == 0,
          "fixture");
    const char *formats[] = {"text", "json"};
    for (int i = 0; i < 2; i++) {
        run_result r = harness_tpprof("report", p, "--format", formats[i], NULL);
        CHECK(r.status == 0, "status %d: %s", r.status, r.err);
        CHECK(strstr(r.out, "kind42"), "unknown kinds are named by number:\n%s", r.out);
        if (i == 1)
            CHECK(harness_json_valid(r.out), "%s", r.out);
        harness_result_free(&r);
    }
    run_result r = harness_tpprof("check", p, NULL);
    CHECK(r.status == 1 && strncmp(r.out, "FAIL lost bytes ", 16) == 0, "status %d: %s", r.status,
          r.out);
    harness_result_free(&r);
}

// ---------------------------------------------------------------------------
// Arguments

static void test_unknown_commands_and_flags_are_refused(void) {
    EXPECT_REFUSED("unknown command 'frobnicate'", "frobnicate");
    EXPECT_REFUSED("unknown option '--leak'", "report", app_db, "--leak");
    EXPECT_REFUSED("unknown option '--max-lost'", "check", app_db, "--max-lost", "1");
    EXPECT_REFUSED("unknown option '--bogus'", "run", "--bogus", "true");
}

static void test_bad_numbers_are_refused(void) {
    EXPECT_REFUSED("--top: expected a non-negative integer, got 'ten'", "report", app_db, "--top",
                   "ten");
    EXPECT_REFUSED("--top: expected a non-negative integer, got '-1'", "report", app_db, "--top",
                   "-1");
    EXPECT_REFUSED("--max-lost-bytes: expected a size like 4096, 4k, 10M or 1G, got '12q'", "check",
                   app_db, "--max-lost-bytes", "12q");
    EXPECT_REFUSED("--max-peak-bytes: '99999999999999999999' is too large", "check", app_db,
                   "--max-peak-bytes", "99999999999999999999");
    EXPECT_REFUSED("--max-leaked-bytes: '20000000000T' is too large", "check", app_db,
                   "--max-leaked-bytes", "20000000000T");
    EXPECT_REFUSED("--max-growth: expected a percentage", "check", app_db, "--baseline", app_db,
                   "--max-growth", "lots");
    EXPECT_REFUSED("--depth: expected 1 to 128, got 0", "run", "--depth", "0", "true");
    EXPECT_REFUSED("--depth: expected 1 to 128, got 129", "run", "--depth", "129", "true");
}

static void test_missing_values_and_arguments_are_refused(void) {
    EXPECT_REFUSED("--top needs a value", "report", app_db, "--top");
    EXPECT_REFUSED("--format: expected text, json, folded or html, got 'xml'", "report", app_db, "--format", "xml");
    EXPECT_REFUSED("missing the database", "report");
    EXPECT_REFUSED("missing the database", "check", "--max-lost-bytes", "0");
    EXPECT_REFUSED("is named twice", "report", app_db, app_db);
    EXPECT_REFUSED("--max-growth needs --baseline", "check", app_db, "--max-growth", "5");
    EXPECT_REFUSED("missing the command to run", "run", "-o", "x.db");
    EXPECT_REFUSED("-o needs a value", "run", "-o");
}

int main(int argc, char **argv) {
    harness_init(argc, argv);
    app_db = fixture_write_copy(harness_path("app.db"), &(fixture_options){0});
    if (!app_db)
        return 1;
    RUN_TEST(test_missing_file_is_refused);
    RUN_TEST(test_directory_is_refused);
    RUN_TEST(test_empty_recording_is_refused_and_fails_check);
    RUN_TEST(test_text_file_is_not_sqlite);
    RUN_TEST(test_truncated_file_is_named_truncated);
    RUN_TEST(test_corrupt_pages_are_an_error_not_a_crash);
    RUN_TEST(test_foreign_sqlite_database_is_refused);
    RUN_TEST(test_newer_schema_version_is_refused);
    RUN_TEST(test_bad_baseline_is_an_input_error);
    RUN_TEST(test_hostile_rows_are_reported_without_crashing);
    RUN_TEST(test_unknown_commands_and_flags_are_refused);
    RUN_TEST(test_bad_numbers_are_refused);
    RUN_TEST(test_missing_values_and_arguments_are_refused);
    free((void *)app_db);
    return harness_finish();
}
