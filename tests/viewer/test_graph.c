// test_graph.c: `tpprof graph` on the synthetic tensor recording of
// fixture.h: which storages and tensors each moment holds, views under
// their base, the edges in JSON and DOT, and the errors (--at on an
// aggregate recording, bad times, unknown formats).
#define _POSIX_C_SOURCE 200809L
#include "fixture.h"
#include "harness.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *tensor_db, *full_db, *plain_db;

static void test_text_graph_at_exit_hangs_views_under_their_base(void) {
    run_result r = harness_tpprof("graph", tensor_db, NULL);
    CHECK(r.status == 0, "status %d: %s", r.status, r.err);
    CHECK(strstr(r.out, "Storage-sharing graph at exit: 6 storages, 6 tensors\n"), "%s", r.out);
    CHECK(strstr(r.out, "  storage #3  4.00 KiB  cpu on cpu  strong 3, weak 1  (unmatched retain)\n"
                        "    tensor #10 [16, 64] float32, strides [64, 1], offset 0\n"
                        "      view #11 [64] float32, strides [1], offset 64\n"),
          "%s", r.out);
    CHECK(strstr(r.out, "storage #4  32.0 KiB  cpu on cpu  strong 0, weak 1  (data released)\n"
                        "    (no tensor)\n"),
          "%s", r.out);
    CHECK(strstr(r.out, "    tensor #19 [1024, 1024] float32, strides [1024, 1], offset 0\n"
                        "      view #20 [1024] float32, strides [1], offset 0\n"),
          "%s", r.out);
    harness_result_free(&r);
}

static void test_json_graph_nodes_and_edges_at_exit(void) {
    run_result r = harness_tpprof("graph", tensor_db, "--at-exit", "--format", "json", NULL);
    CHECK(r.status == 0, "status %d: %s", r.status, r.err);
    CHECK(harness_json_valid(r.out), "invalid JSON:\n%s", r.out);
    char *j = harness_json_squash(r.out);
    CHECK(strstr(j, "\"format\":\"tpprof-graph\",\"version\":1,"), "%s", j);
    CHECK(harness_count(j, "\"nbytes\":") == 6, "6 storage nodes: %s", j);
    CHECK(harness_count(j, "\"views\":") == 6, "6 tensor nodes: %s", j);
    CHECK(strstr(j, "\"edges\":[{\"from\":\"s3\",\"to\":\"t10\",\"kind\":\"storage\"},"
                    "{\"from\":\"t10\",\"to\":\"t11\",\"kind\":\"view\"},"
                    "{\"from\":\"s5\",\"to\":\"t19\",\"kind\":\"storage\"},"
                    "{\"from\":\"t19\",\"to\":\"t20\",\"kind\":\"view\"},"
                    "{\"from\":\"s7\",\"to\":\"t40\",\"kind\":\"storage\"},"
                    "{\"from\":\"t40\",\"to\":\"t41\",\"kind\":\"view\"}]"),
          "%s", j);
    CHECK(strstr(j, "{\"id\":40,\"offset\":0,\"sizes\":[524288],\"strides\":[1],\"dtype\":\"float32\","
                    "\"base\":null,\"views\":[{\"id\":41,\"offset\":0,\"sizes\":[1024,512],"),
          "views nest under their base: %s", j);
    free(j);
    harness_result_free(&r);
}

static void test_graph_at_peak_uses_the_peak_flags(void) {
    run_result r = harness_tpprof("graph", tensor_db, "--at-peak", "--format=json", NULL);
    CHECK(r.status == 0, "status %d: %s", r.status, r.err);
    char *j = harness_json_squash(r.out);
    CHECK(strstr(j, "\"at\":\"peak\",\"time_ns\":null,"), "%s", j);
    CHECK(harness_count(j, "\"nbytes\":") == 2 && strstr(j, "{\"id\":6,\"nbytes\":2097152,"),
          "storages 5 and 6 were live at the peak: %s", j);
    CHECK(strstr(j, "\"edges\":[{\"from\":\"s5\",\"to\":\"t19\",\"kind\":\"storage\"},"
                    "{\"from\":\"t19\",\"to\":\"t20\",\"kind\":\"view\"},"
                    "{\"from\":\"s6\",\"to\":\"t30\",\"kind\":\"storage\"}]"),
          "%s", j);
    free(j);
    harness_result_free(&r);
}

static void test_graph_at_peak_of_a_full_recording_replays_the_counts(void) {
    // Aggregate: storage 5's final counts (2, 1). Full: no refcount event
    // before the peak (6000 ns) touches it, so the counts of a new storage.
    run_result r = harness_tpprof("graph", tensor_db, "--at-peak", NULL);
    CHECK(strstr(r.out, "storage #5  4.00 MiB  cpu on cpu  strong 2, weak 1\n") &&
              strstr(r.out, "(counts as at exit or when freed"),
          "%s", r.out);
    harness_result_free(&r);
    r = harness_tpprof("graph", full_db, "--at-peak", NULL);
    CHECK(strstr(r.out, "storage #5  4.00 MiB  cpu on cpu  strong 1, weak 1\n") &&
              !strstr(r.out, "(counts as at exit"),
          "%s", r.out);
    harness_result_free(&r);
}

// At the peak of a full recording every figure is of one moment, the
// peak's last (until the first tensor free or data release after the peak
// at 6 us: storage 4's data release at 9 us): the storages and tensors alive
// then, with the counts then. Tensor 30 is flagged at_peak but was made at
// 9.5 us; storage 1's count went to 2 at 1.5 us and back to 1 at 8 us.
static void test_graph_at_peak_of_a_full_recording_is_one_moment(void) {
    const char *db = harness_path("late.db");
    CHECK(fixture_write_edited(db, &(fixture_options){.tensors = true, .full_mode = true},
                               "UPDATE tensors SET created_ns = 9500, at_peak = 1 WHERE id = 30") == 0,
          "fixture");
    run_result r = harness_tpprof("graph", db, "--at-peak", "--format", "json", NULL);
    CHECK(r.status == 0, "status %d: %s", r.status, r.err);
    char *j = harness_json_squash(r.out);
    if (!j)
        j = strdup("");
    CHECK(!strstr(j, "{\"id\":30,"), "made after the peak: %s", j);
    CHECK(strstr(j, "{\"id\":6,\"nbytes\":2097152,") && strstr(j, "\"tensors\":[]"),
          "storage 6 was there, its tensor not yet: %s", j);
    CHECK(strstr(j, "{\"id\":1,\"nbytes\":262144,\"allocator\":\"cpu\",\"device\":\"cpu\",\"strong\":1,"),
          "storage 1's count at the peak's last moment: %s", j);
    CHECK(strstr(j, "{\"id\":40,") && strstr(j, "{\"id\":41,"), "made during the peak: %s", j);
    free(j);
    harness_result_free(&r);
}

static void test_graph_at_time_in_full_mode_takes_counts_from_events(void) {
    run_result r = harness_tpprof("graph", full_db, "--at", "6.5us", "--format", "json", NULL);
    CHECK(r.status == 0, "status %d: %s", r.status, r.err);
    char *j = harness_json_squash(r.out);
    CHECK(strstr(j, "\"at\":\"time\",\"time_ns\":6500,"), "%s", j);
    // Created by 6500 ns and not freed yet: storages 1-6 (7 comes at 7000);
    // tensors 10, 11, 19, 20, 30.
    CHECK(harness_count(j, "\"nbytes\":") == 6 && !strstr(j, "{\"id\":7,"), "%s", j);
    CHECK(harness_count(j, "\"views\":") == 5, "%s", j);
    CHECK(strstr(j, "{\"id\":1,\"nbytes\":262144,\"allocator\":\"cpu\",\"device\":\"cpu\",\"strong\":2,"),
          "the refcount event at 1500 ns set strong 2: %s", j);
    free(j);
    harness_result_free(&r);
    // After the second event (8000 ns) storage 1 is back to 1; 7 exists.
    r = harness_tpprof("graph", full_db, "--at", "9000", NULL);
    CHECK(strstr(r.out, "storage #1  256 KiB  cpu on cpu  strong 1, weak 1") &&
              strstr(r.out, "storage #7"),
          "%s", r.out);
    harness_result_free(&r);
}

static void test_dot_output_has_every_node_and_edge_and_renders(void) {
    run_result r = harness_tpprof("graph", tensor_db, "--format", "dot", NULL);
    CHECK(r.status == 0, "status %d: %s", r.status, r.err);
    CHECK(strncmp(r.out, "digraph tpprof_storages {\n", 26) == 0, "%s", r.out);
    CHECK(harness_count(r.out, "[shape=box") == 6 && harness_count(r.out, "[shape=ellipse") == 6,
          "%s", r.out);
    CHECK(harness_count(r.out, " -> ") == 6, "%s", r.out);
    CHECK(strstr(r.out, "  t10 -> t11 [style=dashed, label=\"view\"];\n") &&
              strstr(r.out, "  s3 -> t10;\n"),
          "%s", r.out);
    CHECK(strstr(r.out, "s1 [shape=box, style=filled, fillcolor=\"#f4cccc\""),
          "a storage with an unmatched retain stands out: %s", r.out);
    // Render it when Graphviz is installed; the test does not need it.
    if (access("/usr/bin/dot", X_OK) == 0) {
        const char *dot_file = harness_path("graph.dot");
        FILE *f = fopen(dot_file, "w");
        if (f) {
            fputs(r.out, f);
            fclose(f);
        }
        char *argv[] = {"/usr/bin/dot", "-Tsvg", (char *)dot_file, NULL};
        run_result d = harness_run(argv, NULL, NULL);
        CHECK(d.status == 0 && strstr(d.out, "<svg"), "dot -Tsvg: %d %s", d.status, d.err);
        harness_result_free(&d);
    }
    harness_result_free(&r);
}

static void test_graph_of_a_recording_without_tensors_is_empty(void) {
    run_result r = harness_tpprof("graph", plain_db, "--format=json", NULL);
    CHECK(r.status == 0, "status %d: %s", r.status, r.err);
    char *j = harness_json_squash(r.out);
    CHECK(strstr(j, "\"storages\":[],\"edges\":[]"), "%s", j);
    free(j);
    harness_result_free(&r);
}

static void test_graph_bad_inputs_exit_2_with_one_line(void) {
    harness_expect_usage_error("--at on aggregate", harness_tpprof("graph", tensor_db, "--at", "5ms", NULL),
                               "--at TIME needs a full-mode recording");
    harness_expect_usage_error("bad time", harness_tpprof("graph", full_db, "--at", "5 ms", NULL),
                               "--at: unknown unit in '5 ms'");
    harness_expect_usage_error("negative time", harness_tpprof("graph", full_db, "--at", "-5", NULL),
                               "--at: expected a time like 20ms");
    harness_expect_usage_error("missing time", harness_tpprof("graph", full_db, "--at", NULL),
                               "--at needs a value");
    harness_expect_usage_error("format", harness_tpprof("graph", tensor_db, "--format", "png", NULL),
                               "--format: expected text, dot or json, got 'png'");
    harness_expect_usage_error("two moments", harness_tpprof("graph", tensor_db, "--at-peak", "--at-exit", NULL),
                               "choose one moment");
    harness_expect_usage_error("unknown flag", harness_tpprof("graph", tensor_db, "--peak", NULL),
                               "unknown option '--peak'");
    harness_expect_usage_error("no database", harness_tpprof("graph", NULL), "missing the database");
    harness_expect_usage_error("missing file", harness_tpprof("graph", harness_path("nope.db"), NULL),
                               "cannot open");
}

int main(int argc, char **argv) {
    harness_init(argc, argv);
    tensor_db = fixture_write_copy(harness_path("tensors.db"), &(fixture_options){.tensors = true});
    full_db = fixture_write_copy(harness_path("full.db"),
                                 &(fixture_options){.tensors = true, .full_mode = true});
    plain_db = fixture_write_copy(harness_path("plain.db"), &(fixture_options){0});
    if (!tensor_db || !full_db || !plain_db)
        return 1;
    RUN_TEST(test_text_graph_at_exit_hangs_views_under_their_base);
    RUN_TEST(test_json_graph_nodes_and_edges_at_exit);
    RUN_TEST(test_graph_at_peak_uses_the_peak_flags);
    RUN_TEST(test_graph_at_peak_of_a_full_recording_replays_the_counts);
    RUN_TEST(test_graph_at_peak_of_a_full_recording_is_one_moment);
    RUN_TEST(test_graph_at_time_in_full_mode_takes_counts_from_events);
    RUN_TEST(test_dot_output_has_every_node_and_edge_and_renders);
    RUN_TEST(test_graph_of_a_recording_without_tensors_is_empty);
    RUN_TEST(test_graph_bad_inputs_exit_2_with_one_line);
    free((void *)tensor_db);
    free((void *)full_db);
    free((void *)plain_db);
    return harness_finish();
}
