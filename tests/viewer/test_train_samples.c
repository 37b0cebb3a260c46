// test_train_samples.c: what the autograd graph keeps alive, end to end
// (suite 'preload'): the samples of samples/train run under `tpprof run`,
// and `tpprof report --storages` and `check --max-graph-held-bytes` must
// name the graph node that keeps each storage (the leak samples) or find
// none (the training samples, which must also end with no lost byte and no
// storage alive).
//
// usage: test_train_samples TPPROF MODE SAMPLE
// MODE: loss_history | retain_graph | grads_never_zeroed | model_kept |
// clean (one meson test each).
#define _GNU_SOURCE
#include "harness.h"

#include <stdlib.h>
#include <string.h>

static char prog[4096];

// Records prog with `steps` under tpprof into db; false (a failure noted)
// when the run did not exit as the sample does (0).
static bool record(const char *db, const char *steps) {
    char *argv[] = {(char *)harness_tpprof_path(), (char *)"run", (char *)"-o", (char *)db, (char *)"--", prog,
                    (char *)steps, NULL};
    run_result r = harness_run(argv, NULL, NULL);
    bool ok = r.status == 0;
    CHECK(ok, "recording %s %s: status %d\n%s", prog, steps, r.status, r.err);
    harness_result_free(&r);
    return ok;
}

// A leak sample: report and check name the node and why its graph lives.
// fn, file: where the loss's node (the graphs' root) was made; why:
// "backward never ran" or "retain_graph".
static void expect_graph_leak(const char *fn, const char *file, const char *why, int ran) {
    const char *db = harness_path("leak.db");
    if (!record(db, "5"))
        return;
    // Five steps keep five graphs of four nodes (Addmm, Relu, Addmm, NllLoss).
    CHECK(harness_db_int(db, "SELECT count(*) FROM graph_nodes WHERE freed_ns IS NULL") == 20, "20 nodes alive, got %lld",
          harness_db_int(db, "SELECT count(*) FROM graph_nodes"));
    CHECK(harness_db_int(db, "SELECT count(*) FROM graph_nodes WHERE name = 'NllLossBackward0'") == 5, "five loss nodes");
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM graph_nodes WHERE backward_ran = %d AND retained = %d", ran, ran);
    CHECK(harness_db_int(db, sql) == 20, "every node alive: backward_ran %d, retained %d", ran, ran);
    CHECK(harness_db_int(db, "SELECT count(*) FROM saved_tensors s JOIN storages t ON t.id = s.storage_id "
                     "WHERE s.released_ns IS NULL AND t.freed_ns IS NULL") > 0,
          "saved tensors kept on storages alive at exit");
    CHECK(harness_db_int(db, "SELECT count(*) FROM graph_edges WHERE leaf = 0") == 15, "three node edges a graph (%lld)",
          harness_db_int(db, "SELECT count(*) FROM graph_edges WHERE leaf = 0"));
    // and four leaf inputs: the two Addmm nodes' weight and bias
    CHECK(harness_db_int(db, "SELECT count(*) FROM graph_edges WHERE leaf = 1") == 20, "four leaf edges a graph (%lld)",
          harness_db_int(db, "SELECT count(*) FROM graph_edges WHERE leaf = 1"));

    run_result r = harness_tpprof("report", "--storages", "--top", "0", db, NULL);
    CHECK(r.status == 0, "report --storages: status %d: %s", r.status, r.err);
    char want[256];
    snprintf(want, sizeof want, "saved by NllLossBackward0 created in %s (%s:", fn, file);
    CHECK(strstr(r.out, want) != NULL, "a storage saved by the loss node: %s\n%s", want, r.out);
    snprintf(want, sizeof want, "graph alive: %s", why);
    CHECK(harness_count(r.out, want) >= 22, "each graph-held storage says '%s'", want);
    CHECK(strstr(r.out, "saved by ReluBackward0 created in small_forward (leak_common.h:") != NULL,
          "the ReLU node's activation, named where the forward made it");
    // 22 storages of saved tensors and the two biases the nodes hold as leaf
    // inputs; the sample freed its model, so only the graphs keep all 24.
    CHECK(strstr(r.out, "5 graphs, 20 nodes, 24 storages") != NULL, "one group: the five graphs\n%s", r.out);
    CHECK(strstr(r.out, " in 24 storages only autograd graphs keep alive at exit") &&
              strstr(r.out, "graphs keep 24 storages") && !strstr(r.out, "(also kept otherwise)"),
          "24 storages, all graph-held\n%s", r.out);
    CHECK(strstr(r.out, " a leaf input of AddmmBackward0 created in small_forward (leak_common.h:") &&
              strstr(r.out, " is a leaf input of 5 graph nodes alive at exit, such as AddmmBackward0"),
          "the biases, held as leaf inputs\n%s", r.out);
    harness_result_free(&r);

    r = harness_tpprof("report", "--storages", "--format", "json", db, NULL);
    CHECK(r.status == 0 && harness_json_valid(r.out), "report --storages JSON: status %d", r.status);
    char *sq = harness_json_squash(r.out);
    CHECK(sq && strstr(sq, "\"graph_held\":{\"recorded\":true,\"bytes\":") != NULL, "graph_held in the JSON");
    CHECK(sq && strstr(sq, "\"saved_by\":[{\"node\":") != NULL, "a storage's saved_by");
    snprintf(want, sizeof want, "\"root_name\":\"NllLossBackward0\",\"graph_alive\":\"%s\",\"graphs\":5", why);
    CHECK(sq && strstr(sq, want) != NULL, "graphs_by_stack: %s", want);
    free(sq);
    harness_result_free(&r);

    // tpprof graph marks the nodes' own tensors on those storages.
    r = harness_tpprof("graph", db, NULL);
    snprintf(want, sizeof want, "for backward; graph alive: %s)", why);
    CHECK(r.status == 0 && strstr(r.out, "(saved by ReluBackward0 #") && harness_count(r.out, want) >= 22,
          "graph names the saving nodes: status %d\n%s", r.status, r.out);
    harness_result_free(&r);
    r = harness_tpprof("graph", db, "--format", "json", NULL);
    sq = r.status == 0 && harness_json_valid(r.out) ? harness_json_squash(r.out) : NULL;
    CHECK(sq && strstr(sq, "\"saved_by\":{\"node\":") && strstr(sq, "\"name\":\"NllLossBackward0\""),
          "graph JSON names the saving nodes");
    free(sq);
    harness_result_free(&r);

    r = harness_tpprof("check", db, "--max-graph-held-bytes", "0", NULL);
    CHECK(r.status == 1, "check --max-graph-held-bytes 0 fails: status %d\n%s", r.status, r.out);
    snprintf(want, sizeof want, "kept by 5 graphs whose root NllLossBackward0 was made in %s (%s:", fn, file);
    CHECK(strstr(r.out, "FAIL graph-held bytes") && strstr(r.out, want) && strstr(r.out, file) && strstr(r.out, why),
          "the FAIL line names the root, where it was made and why: %s", r.out);
    harness_result_free(&r);
    r = harness_tpprof("check", db, "--max-graph-held-bytes", "1G", NULL);
    CHECK(r.status == 0 && strstr(r.out, "PASS graph-held bytes"), "1G holds: status %d\n%s", r.status, r.out);
    harness_result_free(&r);
}

static void test_loss_history_graphs_never_ran_backward(void) {
    expect_graph_leak("main", "leak_loss_history.c", "backward never ran", 0);
}

static void test_retain_graph_graphs_kept_their_saved_tensors(void) {
    expect_graph_leak("run", "leak_retain_graph.c", "retain_graph", 1);
}

// A graph kept while the program keeps its weight too: the graph keeps the
// weight's storage (a leaf input), but only the saved input and activation
// are graph-held.
static void test_model_kept_too_is_not_graph_held(void) {
    const char *db = harness_path("kept.db");
    char *argv[] = {(char *)harness_tpprof_path(), (char *)"run", (char *)"-o", (char *)db, (char *)"--", prog, NULL};
    run_result r = harness_run(argv, NULL, NULL);
    CHECK(r.status == 0, "recording %s: status %d\n%s", prog, r.status, r.err);
    harness_result_free(&r);
    r = harness_tpprof("report", "--storages", db, NULL);
    CHECK(r.status == 0 && strstr(r.out, "Graph-held: 2.00 KiB in 2 storages only autograd graphs keep") &&
              strstr(r.out, "graphs keep 3 storages (3.00 KiB) in all"),
          "2 of 3 graph-held\n%s", r.out);
    CHECK(strstr(r.out, "a leaf input of MmBackward0 created in main (graph_kept.c:") &&
              strstr(r.out, "(also kept otherwise)") &&
              strstr(r.out, "saved by ReluBackward0 created in main (graph_kept.c:"),
          "the weight kept otherwise, the activation graph-held\n%s", r.out);
    harness_result_free(&r);
    r = harness_tpprof("report", "--storages", "--format", "json", db, NULL);
    char *sq = r.status == 0 && harness_json_valid(r.out) ? harness_json_squash(r.out) : NULL;
    CHECK(sq && strstr(sq, "\"graph_held\":{\"recorded\":true,\"bytes\":2048,\"storages\":2,\"kept_bytes\":3072,"
                           "\"kept_storages\":3,\"nodes_alive\":3,\"nodes_created\":3}"),
          "graph_held in JSON: %s", sq ? sq : r.out);
    CHECK(sq && strstr(sq, "\"only_graphs_keep\":false") && strstr(sq, "\"leaf_input_of\":[{\"node\":"),
          "the weight's storage: a leaf input, kept otherwise");
    free(sq);
    harness_result_free(&r);
    r = harness_tpprof("check", db, "--max-graph-held-bytes", "2k", NULL);
    CHECK(r.status == 0 && strstr(r.out, "PASS graph-held bytes 2048 <= 2048"), "2k holds: %s", r.out);
    harness_result_free(&r);
    r = harness_tpprof("check", db, "--max-graph-held-bytes", "2047", NULL);
    CHECK(r.status == 1 && strstr(r.out, "FAIL graph-held bytes 2048 > 2047: 2 storages (2048 B) kept by 1 graph whose "
                                         "root SumBackward1 was made in main (graph_kept.c:"),
          "2047 fails: %s", r.out);
    harness_result_free(&r);
}

// Gradients never zeroed grow in value, not in memory: no graph is kept.
static void test_grads_never_zeroed_keep_no_graph(void) {
    const char *db = harness_path("grads.db");
    if (!record(db, "5"))
        return;
    CHECK(harness_db_int(db, "SELECT count(*) FROM graph_nodes") == 0, "no node alive at exit");
    CHECK(harness_db_int(db, "SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'graph_nodes_created'") == 20,
          "20 nodes made");
    run_result r = harness_tpprof("check", db, "--max-graph-held-bytes", "0", NULL);
    CHECK(r.status == 0 && strstr(r.out, "PASS graph-held bytes 0 <= 0"), "status %d\n%s", r.status, r.out);
    harness_result_free(&r);
}

// A training sample: no lost byte, no storage alive, no graph node left.
static void test_training_sample_ends_with_nothing_alive(void) {
    const char *db = harness_path("train.db");
    char *argv[] = {(char *)harness_tpprof_path(), (char *)"run", (char *)"-o", (char *)db, (char *)"--", prog,
                    (char *)"10", NULL};
    run_result r = harness_run(argv, NULL, NULL);
    // 10 steps is too few for the samples' own loss check (exit 1); the run must end normally.
    CHECK(r.status == 0 || r.status == 1, "recording %s: status %d\n%s", prog, r.status, r.err);
    harness_result_free(&r);
    long long made = harness_db_int(db, "SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'graph_nodes_created'");
    CHECK(made > 0 && made == harness_db_int(db, "SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'graph_nodes_freed'"),
          "every node made (%lld) is freed", made);
    r = harness_tpprof("check", db, "--max-lost-bytes", "0", "--max-leaked-storages", "0", "--max-graph-held-bytes",
                       "0", NULL);
    CHECK(r.status == 0, "check: status %d\n%s%s", r.status, r.out, r.err);
    CHECK(strstr(r.out, "PASS lost bytes 0 <= 0") && strstr(r.out, "PASS leaked storages 0 <= 0") &&
              strstr(r.out, "PASS graph-held bytes 0 <= 0"),
          "three passes: %s", r.out);
    harness_result_free(&r);
}

int main(int argc, char **argv) {
    harness_init(argc, argv);
    if (argc < 4) {
        fprintf(stderr, "usage: %s TPPROF MODE SAMPLE\n", argv[0]);
        return 2;
    }
    if (!realpath(argv[3], prog))
        snprintf(prog, sizeof prog, "%s", argv[3]);
    const char *mode = argv[2];
    if (strcmp(mode, "loss_history") == 0)
        RUN_TEST(test_loss_history_graphs_never_ran_backward);
    else if (strcmp(mode, "retain_graph") == 0)
        RUN_TEST(test_retain_graph_graphs_kept_their_saved_tensors);
    else if (strcmp(mode, "grads_never_zeroed") == 0)
        RUN_TEST(test_grads_never_zeroed_keep_no_graph);
    else if (strcmp(mode, "model_kept") == 0)
        RUN_TEST(test_model_kept_too_is_not_graph_held);
    else if (strcmp(mode, "clean") == 0)
        RUN_TEST(test_training_sample_ends_with_nothing_alive);
    else {
        fprintf(stderr, "unknown mode %s\n", mode);
        return 2;
    }
    return harness_finish();
}
