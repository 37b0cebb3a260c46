// test_export.c: `tpprof export DB --format perfetto`: Chrome trace-event
// JSON that Python's json module loads and that check_trace.py finds true to
// the Trace Event Format (counters for heap, mmap, RSS and the caching
// allocator; allocation events with stacks in --full recordings; storage
// lifetimes as async slices), names escaped whatever bytes they hold, and
// the errors. argv: tpprof, python3, check_trace.py.
#define _POSIX_C_SOURCE 200809L
#include "fixture.h"
#include "harness.h"

#include <stdlib.h>
#include <string.h>

static const char *python, *checker;
static char *full_db, *plain_db, *evil_db, *busy_db;

static run_result check_trace(const char *trace, const char *a, const char *b, const char *c, const char *d) {
    char *argv[] = {(char *)python, (char *)checker, (char *)trace, (char *)a, (char *)b, (char *)c, (char *)d, NULL};
    return harness_run(argv, NULL, NULL);
}

static char *export_of(const char *db, const char *name) {
    const char *out = harness_path(name);
    run_result r = harness_tpprof("export", db, "--format", "perfetto", "-o", out, NULL);
    CHECK(r.status == 0 && r.out[0] == 0 && r.err[0] == 0, "status %d: %s%s", r.status, r.out, r.err);
    harness_result_free(&r);
    char *text = harness_read_file(out);
    CHECK(text != NULL, "trace written");
    return text ? text : calloc(1, 1);
}

static void test_full_recording_gives_counters_events_with_stacks_and_storage_slices(void) {
    char *text = export_of(full_db, "full.json");
    CHECK(harness_json_valid(text), "JSON");
    const char *trace = harness_path("full.json");
    run_result r = check_trace(trace, "--full", "--storages", "7", NULL);
    CHECK(r.status == 0, "check_trace.py:\n%s%s", r.out, r.err);
    harness_result_free(&r);
    r = check_trace(trace, "--full", "--allocator", "allocator caching (cpu)", NULL);
    CHECK(r.status == 0, "allocator counters:\n%s%s", r.out, r.err);
    harness_result_free(&r);
    char *j = harness_json_squash(text);
    CHECK(strstr(j, "{\"ph\":\"i\",\"name\":\"malloc\",\"pid\":4242,\"ts\":2000.000,\"tid\":100,\"s\":\"t\","
                    "\"cat\":\"memory\",\"args\":{\"address\":\"0x900000\",\"size\":1048576,"
                    "\"stack\":[\"inner_helper (helpers.h:7)\",\"outer_fn (app.c:40)\",\"main (app.c:50)\"]}}"),
          "the 1 MiB malloc on thread 100 with its stack: %s", j);
    CHECK(strstr(j, "{\"ph\":\"i\",\"name\":\"free\",\"pid\":4242,\"ts\":4000.000,\"tid\":100,"), "its free");
    CHECK(strstr(j, "{\"ph\":\"C\",\"name\":\"heap\",\"pid\":4242,\"ts\":5000.000,\"args\":{\"bytes\":14836}}"),
          "heap counter: %s", j);
    // The peak of the allocator (7 ms): C (4 MiB) reserved on top of A and B, and all of it allocated.
    CHECK(strstr(j, "\"name\":\"allocatorcaching(cpu)\"") == NULL, "names keep their spaces");
    CHECK(strstr(j, "{\"ph\":\"C\",\"name\":\"allocator caching (cpu)\",\"pid\":4242,\"ts\":7000.000,"
                    "\"args\":{\"reserved\":27262976,\"allocated\":14689280}}"), "allocator counter: %s", j);
    // Storage 6 lived from 6 us to 20 us.
    CHECK(strstr(j, "{\"ph\":\"b\",\"name\":\"storage (cpu)\",\"pid\":4242,\"ts\":6.000,\"cat\":\"storage\",\"id\":6,"),
          "storage 6 begins: %s", j);
    CHECK(strstr(j, "{\"ph\":\"e\",\"name\":\"storage (cpu)\",\"pid\":4242,\"ts\":20.000,\"cat\":\"storage\",\"id\":6,"),
          "and ends: %s", j);
    free(j);
    free(text);
}

static void test_aggregate_recording_has_counters_and_no_events(void) {
    free(export_of(plain_db, "plain.json"));
    run_result r = check_trace(harness_path("plain.json"), "--storages", "0", NULL, NULL);
    CHECK(r.status == 0, "check_trace.py:\n%s%s", r.out, r.err);
    harness_result_free(&r);
}

static void test_names_that_are_not_utf8_still_load(void) {
    char *text = export_of(evil_db, "evil.json");
    run_result r = check_trace(harness_path("evil.json"), "--full", NULL, NULL, NULL);
    CHECK(r.status == 0, "strict UTF-8 JSON:\n%s%s", r.out, r.err);
    harness_result_free(&r);
    CHECK(strstr(text, "\"evil\\u003cb\\u003e\\u0026\\\"'\\ufffd (leak.c:12)\""), "escaped: %s", text);
    free(text);
}

static void test_bad_inputs_exit_2_with_one_line(void) {
    harness_expect_usage_error("unknown format", harness_tpprof("export", plain_db, "--format", "pprof", NULL),
                               "--format: expected perfetto, got 'pprof'");
    harness_expect_usage_error("unwritable", harness_tpprof("export", plain_db, "-o", "/nonexistent-dir/t.json", NULL),
                               "cannot write /nonexistent-dir/t.json");
    harness_expect_usage_error("no database", harness_tpprof("export", NULL), "missing the database");
    harness_expect_usage_error("not a database", harness_tpprof("export", "/dev/null", NULL), "is not a SQLite database");
    run_result r = harness_tpprof("export", "--help", NULL);
    CHECK(r.status == 0 && strstr(r.out, "usage: tpprof export DB"), "%s", r.out);
    harness_result_free(&r);
}

static size_t file_size(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fclose(f);
    return n > 0 ? (size_t)n : 0;
}

// Past --max-events-per-thread N a thread's events are counted, not written:
// thread 100 (3,005 events) shows 1,000 and a note for the other 2,005,
// whose counter track adds up to them; thread 101 (10) shows all of its.
static void test_events_past_the_cap_are_counted_with_a_note(void) {
    const char *capped = harness_path("capped.json"), *whole = harness_path("whole.json");
    run_result r = harness_tpprof("export", busy_db, "--max-events-per-thread", "1000", "-o", capped, NULL);
    CHECK(r.status == 0 && r.err[0] == 0, "status %d: %s", r.status, r.err);
    harness_result_free(&r);
    r = check_trace(capped, "--full", "--cap", "1000", NULL);
    CHECK(r.status == 0, "check_trace.py:\n%s%s", r.out, r.err);
    harness_result_free(&r);
    r = check_trace(capped, "--full", "--events-on", "100", "3000");
    CHECK(r.status != 0 && strstr(r.out, "thread 100: 1000 shown + 2005 not shown, expected 3000"),
          "the checker counts:\n%s", r.out);
    harness_result_free(&r);
    char *argv[] = {(char *)python, (char *)checker, (char *)capped, "--full", "--events-on", "100", "3005", NULL};
    r = harness_run(argv, NULL, NULL);
    CHECK(r.status == 0, "3,002 busy events and the fixture's 3 on thread 100:\n%s%s", r.out, r.err);
    harness_result_free(&r);
    char *text = harness_read_file(capped);
    CHECK(text && harness_count(text, "\"name\":\"tpprof: events not shown\"") == 1, "one note (thread 100)");
    CHECK(text && strstr(text, "\"not_shown\":2005}"), "2,005 left out");
    // Left out: the busy events 997 to 2999 (1,001 mallocs of 64 B, 1,002
    // frees) and the two reallocs, each an allocation and a free.
    CHECK(text && strstr(text, "\"args\":{\"events\":2005,\"allocations\":1003,\"frees\":1004,\"bytes_allocated\":64448}}"),
          "the last counter point of 'tid 100: not shown'");
    free(text);
    // 0: every event.
    r = harness_tpprof("export", busy_db, "--max-events-per-thread", "0", "-o", whole, NULL);
    CHECK(r.status == 0, "status %d: %s", r.status, r.err);
    harness_result_free(&r);
    r = check_trace(whole, "--full", "--cap", "100000", NULL);
    CHECK(r.status == 0 && strstr(r.out, " 3015 instants"), "all of them:\n%s%s", r.out, r.err);
    harness_result_free(&r);
    CHECK(file_size(capped) * 2 < file_size(whole), "capped %zu B, whole %zu B", file_size(capped), file_size(whole));
    harness_expect_usage_error("a bad cap", harness_tpprof("export", busy_db, "--max-events-per-thread", "-3", NULL),
                               "--max-events-per-thread");
}

int main(int argc, char **argv) {
    harness_init(argc, argv);
    if (argc < 4) {
        fprintf(stderr, "usage: test_export TPPROF PYTHON3 CHECK_TRACE.PY\n");
        return 2;
    }
    python = argv[2];
    checker = argv[3];
    static const char events[] =
        "INSERT INTO events VALUES (100, 1000000, 100, 1, 1, 65536, 4096, 3, NULL),"
        "(101, 2000000, 100, 1, 1, 9437184, 1048576, 6, NULL),"
        "(102, 4000000, 100, 2, NULL, 9437184, NULL, NULL, NULL);"
        "INSERT INTO threads VALUES (100, 'main', 0, 5000000)";
    const char *p = harness_path("full.db");
    if (fixture_write_edited(p, &(fixture_options){.tensors = true, .full_mode = true}, events) == 0)
        full_db = strdup(p);
    p = harness_path("plain.db");
    if (fixture_write(p, &(fixture_options){0}) == 0)
        plain_db = strdup(p);
    p = harness_path("evil.db");
    char sql[1024];
    snprintf(sql, sizeof sql,
             "%s; UPDATE meta SET value = 'full' WHERE key = 'mode';"
             "UPDATE symbols SET function = 'evil<b>&\"''' || CAST(X'FF' AS TEXT) WHERE function = 'leak_once'",
             events);
    if (fixture_write_edited(p, &(fixture_options){0}, sql) == 0)
        evil_db = strdup(p);
    // 3,000 more events on thread 100 (malloc and free by turns, 64 B),
    // then 2 reallocs (each one event, an allocation and a free), and 10
    // on thread 101.
    p = harness_path("busy.db");
    snprintf(sql, sizeof sql,
             "%s; INSERT INTO threads VALUES (101, 'worker', 0, 5000000);"
             "WITH RECURSIVE k(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM k WHERE i < 3009) "
             "INSERT INTO events SELECT 1000 + i, 5000000 + 1000 * i, CASE WHEN i < 3000 THEN 100 ELSE 101 END, "
             "1 + i %% 2, CASE WHEN i %% 2 = 0 THEN 1 END, 1048576 + 64 * (i / 2), CASE WHEN i %% 2 = 0 THEN 64 END, "
             "CASE WHEN i %% 2 = 0 THEN 3 END, NULL FROM k;"
             "INSERT INTO events VALUES (5000, 9000000, 100, 3, 1, 8388608, 128, 3, 1048576),"
             "(5001, 9000001, 100, 3, 1, 8388736, 256, 3, 8388608)",
             events);
    if (fixture_write_edited(p, &(fixture_options){.tensors = true, .full_mode = true}, sql) == 0)
        busy_db = strdup(p);
    if (!full_db || !plain_db || !evil_db || !busy_db)
        return 1;
    RUN_TEST(test_full_recording_gives_counters_events_with_stacks_and_storage_slices);
    RUN_TEST(test_aggregate_recording_has_counters_and_no_events);
    RUN_TEST(test_names_that_are_not_utf8_still_load);
    RUN_TEST(test_bad_inputs_exit_2_with_one_line);
    RUN_TEST(test_events_past_the_cap_are_counted_with_a_note);
    free(full_db);
    free(plain_db);
    free(busy_db);
    free(evil_db);
    return harness_finish();
}
