// test_speed.c: `tpprof report` and `tpprof check --baseline` on a recording
// the size of alloc_heavy's (75,000 stack nodes, 18,750 sites, 70 leaks)
// finish in under 2 s each: the trie is loaded once, never queried per frame.
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

int main(int argc, char **argv) {
    harness_init(argc, argv);
    RUN_TEST(test_report_on_75k_nodes_takes_under_2_seconds);
    return harness_finish();
}
