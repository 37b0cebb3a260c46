// test_speed.c: `tpprof report` and `tpprof check --baseline` on a recording
// the size of alloc_heavy's (75,000 stack nodes, 18,750 sites, 70 leaks)
// finish in under 2 s each: the trie is loaded once, never queried per frame;
// and a report on 300,000 leaked blocks too (grouped while streaming).
#define _POSIX_C_SOURCE 200809L
#include "fixture.h"
#include "harness.h"

#include <sqlite3.h>
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
    fixture_options o = {0};
    CHECK(fixture_write(db, &o) == 0, "fixture");
    sqlite3 *h = NULL;
    CHECK(sqlite3_open(db, &h) == SQLITE_OK, "open");
    CHECK(sqlite3_exec(h,
                       "WITH RECURSIVE k(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM k WHERE i < 300000) "
                       "INSERT INTO live_blocks SELECT 1000000000 + 64 * i, 48, 1, 3 + i % 6, 1, i, "
                       "1 + i % 2 FROM k",
                       NULL, NULL, NULL) == SQLITE_OK,
          "%s", sqlite3_errmsg(h));
    sqlite3_close(h);
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

int main(int argc, char **argv) {
    harness_init(argc, argv);
    RUN_TEST(test_report_on_75k_nodes_takes_under_2_seconds);
    RUN_TEST(test_report_on_300k_leaked_blocks_takes_under_2_seconds);
    return harness_finish();
}
