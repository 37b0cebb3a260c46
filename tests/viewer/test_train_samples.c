// test_train_samples.c: what the autograd graph keeps alive, end to end
// (suite 'preload'): the samples of samples/train run under `tpprof run`,
// and `tpprof report --storages` and `check --max-graph-held-bytes` must
// name the graph node that keeps each storage (the leak samples) or find
// none (the training samples, which must also end with no lost byte and no
// storage alive).
//
// usage: test_train_samples TPPROF MODE SAMPLE
// MODE: loss_history | retain_graph | grads_never_zeroed | model_kept |
// grad_dropped | grad_kept | full (SAMPLE: progs/graph_grad) | wide
// (progs/graph_wide) | clean (one meson test each).
#define _GNU_SOURCE
#include "harness.h"

#include <stdlib.h>
#include <string.h>

static char prog[4096];

// The storages the leak samples' five graphs keep alone: 22 saved tensors',
// the two biases the nodes hold as leaf inputs, and the four gradients of
// the weights and biases (a parameter holds its .grad; the sample freed its
// model, so only the graphs hold the parameters).
#define GRAPH_HELD_STORAGES 28

// Records prog with `steps` under tpprof into db; false (a failure noted)
// when the run did not exit as the sample does (0). summary: run's summary
// (its stderr) copied there, when not NULL.
static bool record_mode(const char *db, const char *steps, bool full, char *summary, size_t size) {
    char *argv[] = {(char *)harness_tpprof_path(), (char *)"run", (char *)"-o", (char *)db, (char *)"--", prog,
                    (char *)steps, NULL, NULL};
    if (full) { // tpprof run --full -o DB -- PROG STEPS
        memmove(&argv[3], &argv[2], 5 * sizeof *argv);
        argv[2] = (char *)"--full";
    }
    run_result r = harness_run(argv, NULL, NULL);
    bool ok = r.status == 0;
    CHECK(ok, "recording %s %s: status %d\n%s", prog, steps, r.status, r.err);
    if (summary)
        snprintf(summary, size, "%s", r.err ? r.err : "");
    harness_result_free(&r);
    return ok;
}

static bool record(const char *db, const char *steps, char *summary, size_t size) {
    return record_mode(db, steps, false, summary, size);
}

// The line of run's summary that starts with `start` ("" if none), copied.
static const char *summary_line(const char *summary, const char *start, char *buf, size_t size) {
    const char *at = strstr(summary, start);
    buf[0] = 0;
    if (at) {
        size_t n = strcspn(at, "\n");
        snprintf(buf, size, "%.*s", (int)(n < size ? n : size - 1), at);
    }
    return buf;
}

// The HTML page's summary row named `name` ("" if none), copied.
static const char *html_fact(const char *db, const char *name, char *buf, size_t size) {
    const char *out = harness_path("page.html");
    run_result r = harness_tpprof("report", db, "--format", "html", "-o", out, NULL);
    CHECK(r.status == 0, "report --format html: status %d: %s", r.status, r.err);
    harness_result_free(&r);
    buf[0] = 0;
    FILE *f = fopen(out, "r");
    if (!f)
        return buf;
    static char page[1 << 22];
    size_t n = fread(page, 1, sizeof page - 1, f);
    page[n] = 0;
    fclose(f);
    char key[64];
    snprintf(key, sizeof key, "<tr><td>%s</td><td>", name);
    const char *at = strstr(page, key);
    if (at) {
        at += strlen(key);
        const char *end = strstr(at, "</td>");
        size_t len = end ? (size_t)(end - at) : strlen(at);
        snprintf(buf, size, "%.*s", (int)(len < size ? len : size - 1), at);
    }
    return buf;
}

// A leak sample: report and check name the node and why its graph lives.
// fn, file: where the loss's node (the graphs' root) was made; why:
// "backward never ran" or "retain_graph".
static void expect_graph_leak(const char *fn, const char *file, const char *why, int ran) {
    const char *db = harness_path("leak.db");
    static char summary[1 << 16];
    if (!record(db, "5", summary, sizeof summary))
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

    // run's summary says it in one line, the HTML page's summary too.
    char line[1024], want[256];
    summary_line(summary, "tpprof: graphs: ", line, sizeof line);
    snprintf(want, sizeof want, " in %d storages kept by 5 autograd graphs (root NllLossBackward0 made in %s (%s:",
             GRAPH_HELD_STORAGES, fn, file);
    CHECK(strstr(line, want) && strstr(line, why) && !strstr(line, "also keep"), "run's graph line: %s\n%s", want,
          summary);
    html_fact(db, "graphs", line, sizeof line);
    CHECK(strstr(line, want) && strstr(line, why), "the HTML summary's graphs row: %s", line);

    run_result r = harness_tpprof("report", "--storages", "--top", "0", db, NULL);
    CHECK(r.status == 0, "report --storages: status %d: %s", r.status, r.err);
    snprintf(want, sizeof want, "saved by NllLossBackward0 created in %s (%s:", fn, file);
    CHECK(strstr(r.out, want) != NULL, "a storage saved by the loss node: %s\n%s", want, r.out);
    snprintf(want, sizeof want, "graph alive: %s", why);
    CHECK(harness_count(r.out, want) >= 22, "each graph-held storage says '%s'", want);
    CHECK(strstr(r.out, "saved by ReluBackward0 created in small_forward (leak_common.h:") != NULL,
          "the ReLU node's activation, named where the forward made it");
    // 22 storages of saved tensors, the two biases the nodes hold as leaf
    // inputs and the four parameters' grads; the sample freed its model, so
    // only the graphs keep all 28.
    CHECK(strstr(r.out, "5 graphs, 20 nodes, 28 storages") != NULL, "one group: the five graphs\n%s", r.out);
    CHECK(strstr(r.out, " in 28 storages only autograd graphs keep alive at exit") &&
              strstr(r.out, "graphs keep 28 storages") && !strstr(r.out, "(also kept otherwise)"),
          "28 storages, all graph-held\n%s", r.out);
    CHECK(harness_db_int(db, "SELECT count(*) FROM tensor_grads g JOIN tensors t ON t.id = g.tensor_id "
                     "WHERE t.freed_ns IS NULL") == 4,
          "the four parameters' grad links");
    CHECK(harness_count(r.out, " the grad of a leaf input of AddmmBackward0 created in small_forward (leak_common.h:") ==
                  4 &&
              harness_count(r.out, " is the grad of tensor #") == 4,
          "each parameter's grad named with the node that holds the parameter\n%s", r.out);
    CHECK(strstr(r.out, " a leaf input of AddmmBackward0 created in small_forward (leak_common.h:") &&
              strstr(r.out, " is a leaf input of 5 graph nodes alive at exit, such as AddmmBackward0"),
          "the biases, held as leaf inputs\n%s", r.out);
    harness_result_free(&r);

    r = harness_tpprof("report", "--storages", "--format", "json", db, NULL);
    CHECK(r.status == 0 && harness_json_valid(r.out), "report --storages JSON: status %d", r.status);
    char *sq = harness_json_squash(r.out);
    CHECK(sq && strstr(sq, "\"graph_held\":{\"recorded\":true,\"bytes\":") != NULL, "graph_held in the JSON");
    CHECK(sq && strstr(sq, "\"saved_by\":[{\"node\":") != NULL, "a storage's saved_by");
    CHECK(sq && strstr(sq, "\"saved_by\":[],\"leaf_input_of\":[],\"grad_of_leaf_input_of\":[{\"node\":"),
          "a grad's storage: grad_of_leaf_input_of");
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
    char line[1024];
    summary_line(r.err, "tpprof: graphs: ", line, sizeof line);
    CHECK(strstr(line, "graphs: 2.00 KiB in 2 storages kept by 1 autograd graph (root SumBackward1 made in main "
                       "(graph_kept.c:") &&
              strstr(line, "backward never ran; they also keep 1.00 KiB in 1 storage the program still holds"),
          "run's graph line names the graph and the weight the program keeps: %s", line);
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
    static char summary[1 << 16];
    if (!record(db, "5", summary, sizeof summary))
        return;
    CHECK(!strstr(summary, "tpprof: graphs:"), "no graph line in run's summary:\n%s", summary);
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
    CHECK(!strstr(r.err, "tpprof: graphs:"), "no graph alive, no graph line:\n%s", r.err);
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

// A parameter's .grad goes with the parameter (tensor_grads): graph-held
// when only the graph holds the parameter ("drop"), kept but not
// graph-held when the program holds it too ("keep").
static void test_grad_goes_with_its_parameter(bool drop) {
    const char *db = harness_path("grad.db");
    static char summary[1 << 16];
    if (!record(db, drop ? "drop" : "keep", summary, sizeof summary))
        return;
    CHECK(harness_db_int(db, "SELECT count(*) FROM tensor_grads") == 1, "one grad link (w's)");
    CHECK(harness_db_int(db, "SELECT count(*) FROM tensor_grads g JOIN tensors t ON t.id = g.grad_id "
                     "WHERE t.storage_id = g.grad_storage_id AND t.sizes = '[16, 16]'") == 1,
          "the link names w.grad and its storage");
    char line[1024];
    summary_line(summary, "tpprof: graphs: ", line, sizeof line);
    if (drop)
        CHECK(strstr(line, "graphs: 4.00 KiB in 4 storages kept by 1 autograd graph (root SumBackward") &&
                  strstr(line, "(graph_grad.c:") && strstr(line, "; retain_graph") && !strstr(line, "also keep"),
              "x and h saved, w the leaf input, and w.grad: all graph-held: %s", line);
    else
        CHECK(strstr(line, "graphs: 2.00 KiB in 2 storages kept by 1 autograd graph (root SumBackward") &&
                  strstr(line, "; retain_graph; they also keep 2.00 KiB in 2 storages the program still holds"),
              "w and its grad kept by the program too: %s", line);
    run_result r = harness_tpprof("report", "--storages", "--top", "0", db, NULL);
    CHECK(r.status == 0 && strstr(r.out, " the grad of a leaf input of MmBackward0 created in main (graph_grad.c:") &&
              strstr(r.out, " is the grad of tensor #"),
          "report names the grad by its parameter's node\n%s", r.out);
    CHECK(drop == !strstr(r.out, "(also kept otherwise)"), "kept otherwise only when the program keeps w\n%s", r.out);
    harness_result_free(&r);
    r = harness_tpprof("check", db, "--max-graph-held-bytes", drop ? "4095" : "2047", NULL);
    CHECK(r.status == 1 && strstr(r.out, drop ? "FAIL graph-held bytes 4096 > 4095" : "FAIL graph-held bytes 2048 > 2047"),
          "the gate counts the grad only when the graph alone keeps w: %s", r.out);
    harness_result_free(&r);
}

static void test_grad_of_a_dropped_parameter_is_graph_held(void) { test_grad_goes_with_its_parameter(true); }
static void test_grad_of_a_kept_parameter_is_not_graph_held(void) { test_grad_goes_with_its_parameter(false); }

// A cat of 40 inputs: every edge recorded, one graph.
static void test_wide_cat_is_one_graph(void) {
    const char *db = harness_path("wide.db");
    static char summary[1 << 16];
    if (!record(db, "0", summary, sizeof summary))
        return;
    CHECK(harness_db_int(db, "SELECT count(*) FROM graph_nodes WHERE freed_ns IS NULL") == 42, "42 nodes alive");
    CHECK(harness_db_int(db, "SELECT count(*) FROM graph_edges e JOIN graph_nodes n ON n.id = e.node_id "
                     "WHERE n.name = 'CatBackward0' AND e.leaf = 0") == 40,
          "the cat's 40 node edges (%lld)",
          harness_db_int(db, "SELECT count(*) FROM graph_edges e JOIN graph_nodes n ON n.id = e.node_id "
                     "WHERE n.name = 'CatBackward0'"));
    CHECK(harness_db_int(db, "SELECT count(*) FROM graph_edges WHERE leaf = 1") == 40, "40 leaf edges");
    char line[1024];
    summary_line(summary, "tpprof: graphs: ", line, sizeof line);
    CHECK(strstr(line, " in 40 storages kept by 1 autograd graph (root SumBackward") && strstr(line, "(graph_wide.c:"),
          "one graph keeps the 40 inputs: %s", line);
    run_result r = harness_tpprof("report", "--storages", db, NULL);
    CHECK(r.status == 0 && strstr(r.out, "1 graph, 42 nodes, 40 storages"), "one group of one graph\n%s", r.out);
    harness_result_free(&r);
}

// Full mode: the graph's events are rows of `events` (ops 18-23).
static void test_full_mode_graph_events(void) {
    const char *db = harness_path("full.db");
    if (!record_mode(db, "drop", true, NULL, 0))
        return;
    // Mm, Relu, Sum: made (18), each ran once (19, size = flags: 1 retain_graph)
    CHECK(harness_db_int(db, "SELECT count(*) FROM events e JOIN graph_nodes n ON n.id = e.address WHERE e.op = 18") == 3,
          "three nodes made (%lld)", harness_db_int(db, "SELECT count(*) FROM events WHERE op = 18"));
    CHECK(harness_db_int(db, "SELECT count(*) FROM events WHERE op = 19 AND size = 1") == 3, "three ran, retaining");
    CHECK(harness_db_int(db, "SELECT count(*) FROM events WHERE op = 20") == 0, "none freed: the graph is alive at exit");
    // saved (21): address = node, size = the alias, old_address = its
    // storage, kind = slot (NULL for 0); Mm saves x (w's gradient needs it)
    CHECK(harness_db_int(db, "SELECT count(*) FROM events e JOIN saved_tensors s ON s.node_id = e.address AND "
                     "s.tensor_id = e.size AND s.storage_id = e.old_address AND s.slot = ifnull(e.kind, 0) "
                     "WHERE e.op = 21") == 2,
          "x and h saved (%lld)", harness_db_int(db, "SELECT count(*) FROM events WHERE op = 21"));
    CHECK(harness_db_int(db, "SELECT count(*) FROM events WHERE op = 22") == 0, "nothing released (retain_graph)");
    // grad set (23): address = w, size = w.grad, old_address = its storage
    CHECK(harness_db_int(db, "SELECT count(*) FROM events e JOIN tensor_grads g ON g.tensor_id = e.address AND "
                     "g.grad_id = e.size AND g.grad_storage_id = e.old_address WHERE e.op = 23") == 1,
          "w's grad set (%lld)", harness_db_int(db, "SELECT count(*) FROM events WHERE op = 23"));
    // Order: the first node made before the first ran, the grad set between.
    CHECK(harness_db_int(db, "SELECT (SELECT min(seq) FROM events WHERE op = 18) < (SELECT min(seq) FROM events WHERE op = 19)"
                     " AND (SELECT min(seq) FROM events WHERE op = 19) < (SELECT seq FROM events WHERE op = 23)") == 1,
          "made, ran, then the grad set");
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
    else if (strcmp(mode, "grad_dropped") == 0)
        RUN_TEST(test_grad_of_a_dropped_parameter_is_graph_held);
    else if (strcmp(mode, "grad_kept") == 0)
        RUN_TEST(test_grad_of_a_kept_parameter_is_not_graph_held);
    else if (strcmp(mode, "wide") == 0)
        RUN_TEST(test_wide_cat_is_one_graph);
    else if (strcmp(mode, "full") == 0)
        RUN_TEST(test_full_mode_graph_events);
    else if (strcmp(mode, "clean") == 0)
        RUN_TEST(test_training_sample_ends_with_nothing_alive);
    else {
        fprintf(stderr, "unknown mode %s\n", mode);
        return 2;
    }
    return harness_finish();
}
