// test_speed.c: `tpprof report` and `tpprof check --baseline` on a recording
// the size of alloc_heavy's (75,000 stack nodes, 18,750 sites, 70 leaks)
// finish in under 2 s each: the trie is loaded once, never queried per frame;
// and a report on 300,000 leaked blocks too (grouped while streaming); and
// the tensor commands on 20,000 storages and 100,000 allocator events.
#define _POSIX_C_SOURCE 200809L
#include "fixture.h"
#include "harness.h"

#include <string.h>
#include <time.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void test_report_on_75k_nodes_takes_under_2_seconds(void) {
    const char *db = harness_path("heavy.db");
    CHECK(fixture_write_big(db, 75000, 70) == 0, "fixture");
    const char *formats[] = {"text", "json"};
    for (int i = 0; i < 2; i++) {
        double t0 = now_s();
        run_result r = harness_tpprof("report", db, "--format", formats[i], NULL);
        double dt = now_s() - t0;
        CHECK(r.status == 0, "status %d: %s", r.status, r.err);
        CHECK(strstr(r.out, "70") != NULL, "leak count shown");
        CHECK(dt < 2.0, "report --format %s took %.2f s", formats[i], dt);
        fprintf(stderr, "report --format %s: %.3f s\n", formats[i], dt);
        if (i == 1)
            CHECK(harness_json_valid(r.out), "valid JSON");
        harness_result_free(&r);
    }
    double t0 = now_s();
    run_result r = harness_tpprof("check", db, "--baseline", db, "--max-peak-bytes", "1G", NULL);
    double dt = now_s() - t0;
    CHECK(r.status == 0 && harness_lines(r.out) == 4, "status %d: %s", r.status, r.out);
    CHECK(dt < 2.0, "check --baseline took %.2f s", dt);
    fprintf(stderr, "check --baseline: %.3f s\n", dt);
    harness_result_free(&r);
}

static void test_report_on_300k_leaked_blocks_takes_under_2_seconds(void) {
    const char *db = harness_path("leaky.db");
    CHECK(fixture_write_edited(db, &(fixture_options){0},
                               "WITH RECURSIVE k(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM k WHERE i < 300000) "
                               "INSERT INTO live_blocks SELECT 1000000000 + 64 * i, 48, 1, 3 + i % 6, 1, i, "
                               "1 + i % 2 FROM k") == 0,
          "fixture");
    double t0 = now_s();
    run_result r = harness_tpprof("report", db, "--leaks", "--format", "json", NULL);
    double dt = now_s() - t0;
    CHECK(r.status == 0 && harness_json_valid(r.out), "status %d: %s", r.status, r.err);
    // 12488 B of the fixture + 300000 x 48 B.
    CHECK(strstr(r.out, "\"leaked_bytes\": 14412488,") && strstr(r.out, "\"leaked_count\": 300004,"),
          "%.600s", r.out);
    CHECK(dt < 2.0, "report on 300k blocks took %.2f s", dt);
    fprintf(stderr, "report on 300k live blocks: %.3f s\n", dt);
    harness_result_free(&r);
}

// A full-mode recording keeps every storage and tensor: 20,000 storages
// (half alive at exit, each with a tensor and a view, every 10th with an
// unmatched retain), and 100,000 allocator events cycling 2,000 blocks
// through 100 segments.
static void test_tensor_commands_on_20k_storages_take_under_2_seconds(void) {
    const char *db = harness_path("tensors_big.db");
    const char *sql =
        "BEGIN;"
        "WITH RECURSIVE k(i) AS (SELECT 100 UNION ALL SELECT i + 1 FROM k WHERE i < 20099) "
        "INSERT INTO storages SELECT i, 4096 * i, 4096, 'cpu', 'cpu', 0, i, 13, NULL, NULL, "
        "  CASE WHEN i % 2 THEN NULL ELSE 2 * i END, 2 + (i % 10 = 0), 1, 4096 * i, 4096, 1, NULL, "
        "  i % 3 = 0, 0 FROM k;"
        "WITH RECURSIVE k(i) AS (SELECT 100 UNION ALL SELECT i + 1 FROM k WHERE i < 20099) "
        "INSERT INTO tensors SELECT 2 * i, i, 0, 0, '[32, 32]', '[32, 1]', 'float32', 4, i, 13, "
        "  CASE WHEN i % 2 THEN NULL ELSE 2 * i END, 0, i % 3 = 0 FROM k;"
        "WITH RECURSIVE k(i) AS (SELECT 100 UNION ALL SELECT i + 1 FROM k WHERE i < 20099) "
        "INSERT INTO tensors SELECT 2 * i + 1, i, 2 * i, 32, '[32]', '[1]', 'float32', 4, i, 12, "
        "  CASE WHEN i % 2 THEN NULL ELSE 2 * i END, 0, 0 FROM k;"
        "WITH RECURSIVE k(i) AS (SELECT 101 UNION ALL SELECT i + 2 FROM k WHERE i < 20099) "
        "INSERT INTO storage_refs SELECT i, 0, 13, 2 * i, 1 FROM k "
        "  UNION ALL SELECT i, 1, 12, 2 * i + 1, 1 FROM k "
        "  UNION ALL SELECT i, 1, 9, 0, 1 FROM k WHERE i % 10 = 0;"
        "WITH RECURSIVE k(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM k WHERE i < 99999) "
        "INSERT INTO allocator_events SELECT 1000 + i, 20000000 + i, 1, 'big', "
        "  CASE WHEN i < 100 THEN 1 WHEN i % 2 THEN 4 ELSE 3 END, 'cpu', "
        "  1073741824 + 2097152 * (i % 100), 2097152, "
        "  1073741824 + 2097152 * (i % 100) + CASE WHEN i < 100 THEN 0 ELSE 1024 * ((i / 100) % 20) END, "
        "  CASE WHEN i < 100 THEN 2097152 ELSE 1024 END, 1000, 0, 4 FROM k;"
        "COMMIT;";
    CHECK(fixture_write_edited(db, &(fixture_options){.tensors = true, .full_mode = true}, sql) == 0,
          "fixture");
    struct { const char *what; const char *args[8]; } runs[] = {
        {"report --storages json", {"report", db, "--storages", "--format", "json", NULL}},
        {"report --storages text", {"report", db, "--storages", "--top", "0", NULL}},
        {"graph dot", {"graph", db, "--format", "dot", NULL}},
        {"graph --at json", {"graph", db, "--at", "60us", "--format", "json", NULL}},
        {"fragmentation --at-peak svg", {"fragmentation", db, "--at-peak", "--format", "svg", NULL}},
        {"check tensor gates", {"check", db, "--max-leaked-storages", "1000000", "--max-inactive-split-bytes", "1G", NULL}},
    };
    for (size_t i = 0; i < sizeof runs / sizeof *runs; i++) {
        const char **a = runs[i].args;
        double t0 = now_s();
        run_result r = harness_tpprof(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]);
        double dt = now_s() - t0;
        CHECK(r.status == 0, "%s: status %d: %s", runs[i].what, r.status, r.err);
        CHECK(dt < 2.0, "%s took %.2f s", runs[i].what, dt);
        fprintf(stderr, "%s: %.3f s, %zu bytes out\n", runs[i].what, dt, strlen(r.out));
        harness_result_free(&r);
    }
}

int main(int argc, char **argv) {
    harness_init(argc, argv);
    RUN_TEST(test_tensor_commands_on_20k_storages_take_under_2_seconds);
    RUN_TEST(test_report_on_75k_nodes_takes_under_2_seconds);
    RUN_TEST(test_report_on_300k_leaked_blocks_takes_under_2_seconds);
    return harness_finish();
}
