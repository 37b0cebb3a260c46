// test_tensor_samples.c: the tensor and allocator reports end to end (suite
// 'preload'): the samples of samples/tensors and samples/alloc run under
// `tpprof run`, and what each sample's header comment promises must show in
// `tpprof report --storages`, `graph`, `check` and `fragmentation`.
//
// usage: test_tensor_samples TPPROF CACHE_LEAK WEAK_REFS SMALL_VIEWS TRAIN_LOOP
//                            CAT_STORAGE SEQ_BATCHES LIFETIMES
//
// A recorder that did not attach to the runtime (meta.tensors absent) fails
// the whole test at once: every sample links libtensorplay, so tpprof must
// attach with no change to the program.
#define _GNU_SOURCE
#include "harness.h"

#include <stdlib.h>
#include <string.h>

enum { CACHE_LEAK, WEAK_REFS, SMALL_VIEWS, TRAIN_LOOP, CAT_STORAGE, SEQ_BATCHES, LIFETIMES, HANDLE_LEAK, NPROGS };
static char progs[NPROGS][4096];

// Run prog (with up to two arguments) under tpprof into db.
static run_result record(const char *db, int prog, const char *arg1, const char *arg2) {
    char *argv[] = {(char *)harness_tpprof_path(), (char *)"run", (char *)"-o", (char *)db,
                    (char *)"--", progs[prog], (char *)arg1, (char *)arg2, NULL};
    return harness_run(argv, NULL, NULL);
}

// Record prog under tpprof into db and expect the run to succeed.
static void record_ok(const char *db, int prog, const char *arg1, const char *arg2) {
    run_result r = record(db, prog, arg1, arg2);
    CHECK(r.status == 0, "recording %s: status %d: %s\n%s", progs[prog], r.status, r.out, r.err);
    harness_result_free(&r);
}

// The text of the stack array that starts at the first '[' after p, up to
// its ']' (frames hold no arrays), as a new string.
static char *stack_after(const char *p) {
    const char *open = p ? strchr(p, '[') : NULL;
    const char *close = open ? strchr(open, ']') : NULL;
    if (!close)
        return strdup("");
    return strndup(open, (size_t)(close - open + 1));
}

// ---------------------------------------------------------------------------

static void test_cache_leak_names_cache_put_for_two_storages(void) {
    const char *db = harness_path("cache_leak.db");
    run_result r = record(db, CACHE_LEAK, NULL, NULL);
    CHECK(r.status == 0, "status %d: %s", r.status, r.err);
    CHECK(strstr(r.err, "tpprof: tensors: 2 storages alive at exit (512 KiB); 2 held by a retain no "
                        "release matched in cache_put ("),
          "tpprof run's summary: %s", r.err);
    CHECK(strstr(r.err, "tpprof: biggest leak: 512 KiB in main (cache_leak.c:") &&
              strstr(r.err, "), the data of 2 storages (tpprof report --leaks names them)\n"),
          "the biggest leak is the two storages' data: %s", r.err);
    harness_result_free(&r);
    r = harness_tpprof("report", db, "--storages", "--format", "json", NULL);
    CHECK(r.status == 0, "status %d: %s", r.status, r.err);
    char *j = harness_json_squash(r.out);
    const char *group = strstr(j, "\"unmatched_by_stack\":[{\"op\":\"retain\",\"storages\":2,\"count\":2,"
                                  "\"bytes\":524288,\"stack\":");
    CHECK(group, "two 256 KiB storages, one retain each:\n%s", r.out);
    char *stack = stack_after(group ? strstr(group, "\"stack\":") : NULL);
    CHECK(strstr(stack, "\"function\":\"cache_put\""), "the retain's stack names cache_put: %s", stack);
    free(stack);
    CHECK(harness_count(j, "\"nbytes\":262144,") == 2 && !strstr(j, "\"data_released\":true"),
          "exactly the two leaked storages are alive at exit:\n%s", r.out);
    free(j);
    harness_result_free(&r);
    r = harness_tpprof("report", db, "--storages", NULL);
    CHECK(strstr(r.out, "2 storages (512 KiB), 2 references  retain") && strstr(r.out, "cache_put ("),
          "%s", r.out);
    harness_result_free(&r);
    // The leaked data blocks are shown as the storages they back, with the
    // retain that keeps each.
    r = harness_tpprof("report", db, "--leaks", NULL);
    CHECK(harness_count(r.out, "backs storage #") == 2 &&
              harness_count(r.out, "(256 KiB, cpu): strong 1; no tensor; 1 reference no release matched, the first a "
                                   "retain in cache_put (cache_leak.c:") == 2,
          "%s", r.out);
    harness_result_free(&r);
    r = harness_tpprof("report", db, "--leaks", "--format", "json", NULL);
    j = harness_json_squash(r.out);
    CHECK(harness_count(j, "\"storages\":[") >= 1 && strstr(j, "\"kind\":\"posix_memalign\""), "%s", r.out);
    const char *big = strstr(j, "{\"bytes\":524288,");
    const char *ids = big ? strstr(big, "\"storages\":[") : NULL;
    const char *list = ids ? ids + strlen("\"storages\":[") : NULL; // "4,7]..."
    CHECK(list && *list != ']' && strchr(list, ',') && strchr(list, ',') < strchr(list, ']'),
          "the 512 KiB leak names its two storages: %s", r.out);
    free(j);
    harness_result_free(&r);
    r = harness_tpprof("check", db, "--max-leaked-storages", "1", NULL);
    CHECK(r.status == 1 && strstr(r.out, "FAIL leaked storages 2 > 1"), "%d %s %s", r.status, r.out,
          r.err);
    harness_result_free(&r);
    /* The cache dropped its only pointers to the two storages, so their
     * structs and the 256 KiB data blocks behind them are lost: nothing in
     * the runtime (e.g. the CPU allocator's bookkeeping) may make them look
     * reachable to the scan. */
    r = harness_tpprof("check", db, "--max-lost-bytes", "524287", NULL);
    CHECK(r.status == 1 && strstr(r.out, "FAIL lost bytes "), "%d %s %s", r.status, r.out, r.err);
    harness_result_free(&r);
    /* A site inside a library (here the runtime's CPU allocator) names the
     * program's own frame that led there as its caller, not the library's
     * internal caller. */
    r = harness_tpprof("report", db, "--top", "1", NULL);
    CHECK(strstr(r.out, "tp__cpu_allocate (allocator.c:") && strstr(r.out, "  < main (cache_leak.c:"),
          "top site line: %s", r.out);
    harness_result_free(&r);
}

static void test_weak_refs_lists_structs_held_by_memo_remember(void) {
    const char *db = harness_path("weak_refs.db");
    run_result r = record(db, WEAK_REFS, NULL, NULL);
    CHECK(r.status == 0, "status %d: %s", r.status, r.err);
    CHECK(strstr(r.err, "tpprof: tensors: 5 storages alive at exit (") &&
              strstr(r.err, "; 5 with data released, held by weak references taken in memo_remember (weak_refs.c:"),
          "tpprof run's summary: %s", r.err);
    harness_result_free(&r);
    r = harness_tpprof("report", db, "--storages", "--format=json", NULL);
    char *j = harness_json_squash(r.out);
    CHECK(harness_count(j, "\"data_released\":true") == 5 && !strstr(j, "\"data_released\":false"),
          "five structs held after their data went:\n%s", r.out);
    const char *group = strstr(j, "\"weak_by_stack\":[{\"op\":\"weak_retain\",\"storages\":5,\"count\":5,");
    CHECK(group, "%s", r.out);
    char *stack = stack_after(group ? strstr(group, "\"stack\":") : NULL);
    CHECK(strstr(stack, "\"function\":\"memo_remember\""), "%s", stack);
    free(stack);
    CHECK(strstr(j, "\"unmatched_by_stack\":[]"), "no strong reference is left: %s", r.out);
    free(j);
    harness_result_free(&r);
}

// Three rows (views) kept by a history that is never cleared: no storage
// reference is unmatched, the activations are alive because their views
// hold them, and the run and the report name the views' creation.
static void test_handle_leak_names_the_live_views_and_where_they_were_made(void) {
    const char *db = harness_path("handle_leak.db");
    run_result r = record(db, HANDLE_LEAK, NULL, NULL);
    CHECK(r.status == 0 && strstr(r.out, "3 kept"), "status %d: %s %s", r.status, r.out, r.err);
    CHECK(strstr(r.err, "tpprof: tensors: 3 storages alive at exit (384 KiB); 3 held by tensors alive at exit, "
                        "such as #") &&
              strstr(r.err, " [1, 256] created in history_row (handle_leak.c:") &&
              strstr(r.err, ", kept by a tp_tensor_retain no release matched in history_push (handle_leak.c:") &&
              !strstr(r.err, "held by a retain"),
          "tpprof run's summary: the view and the handle retain that keeps it (no storage reference is unmatched): %s",
          r.err);
    harness_result_free(&r);
    r = harness_tpprof("report", db, "--storages", NULL);
    CHECK(r.status == 0, "status %d: %s", r.status, r.err);
    CHECK(harness_count(r.out, "created in history_row (handle_leak.c:") == 3 &&
              harness_count(r.out, "created in main (handle_leak.c:") == 3 && harness_count(r.out, "held by its view #") == 3,
          "%s", r.out);
    // Each view's handle that history_push took; the batch-2 row, released
    // by main and never pushed, is gone; the bases' own handles were
    // released by main (their views hold them).
    CHECK(harness_count(r.out, "1 handle retain no release matched, in history_push (handle_leak.c:") == 3 &&
              harness_count(r.out, "handle retain") == 3,
          "%s", r.out);
    CHECK(strstr(r.out, "Tensor handles by stack (tp_tensor_retain, never released; they keep their tensors alive): 1 "
                        "stack\n  3 storages (384 KiB), 3 handles\n      history_push (handle_leak.c:"),
          "the handle retains grouped: %s", r.out);
    CHECK(strstr(r.out, "Unmatched references by stack (taken, never released; no tensor holds them): 0 stacks"),
          "%s", r.out);
    harness_result_free(&r);
    r = harness_tpprof("graph", db, NULL);
    CHECK(r.status == 0 && harness_count(r.out, "  (kept by a handle retain)") == 3, "the graph marks the kept views: %s",
          r.out);
    harness_result_free(&r);
    r = harness_tpprof("graph", db, "--format", "dot", NULL);
    CHECK(r.status == 0 && harness_count(r.out, "style=filled, fillcolor=\"#f4cccc\", label=\"tensor #") == 3 &&
              harness_count(r.out, "\\nkept by a handle retain\"];") == 3,
          "and so does its DOT: %s", r.out);
    harness_result_free(&r);
    r = harness_tpprof("check", db, "--max-leaked-storages", "0", NULL);
    CHECK(r.status == 1 && strstr(r.out, "FAIL leaked storages 3 > 0: 3 storages held by tensors a tp_tensor_retain no "
                                         "release matched keeps, in history_push (handle_leak.c:"),
          "the gate names the handle retain: %d %s", r.status, r.out);
    harness_result_free(&r);
    r = harness_tpprof("report", db, "--leaks", NULL);
    CHECK(harness_count(r.out, "backs storage #") == 3 && harness_count(r.out, "(128 KiB, cpu): strong 2; tensors #") == 3 &&
              harness_count(r.out, " [1, 256] (view of #") == 3 &&
              harness_count(r.out, " kept by 1 tp_tensor_retain no release matched, in history_push (handle_leak.c:") == 3,
          "the activations' blocks are shown with the tensors that hold them, and the retain that keeps each: %s", r.out);
    harness_result_free(&r);
    r = harness_tpprof("report", db, "--storages", "--format", "json", NULL);
    char *j = harness_json_squash(r.out);
    CHECK(harness_count(j, "\"function\":\"history_row\"") == 3, "each live view's stack: %s", r.out);
    // history_push appears only in the stacks of the handles it took (each
    // view's, and their group's in handles_by_stack).
    CHECK(harness_count(j, "\"handle_retains\":[{\"count\":1,\"stack\":[{") == 3 &&
              harness_count(j, "\"function\":\"history_push\"") == 4,
          "the views' handle retains in JSON: %s", r.out);
    CHECK(strstr(j, "\"handles_by_stack\":[{\"op\":\"retain\",\"storages\":3,\"count\":3,\"bytes\":393216,\"stack\":["),
          "grouped in JSON: %s", r.out);
    free(j);
    harness_result_free(&r);
}

static void test_small_views_pin_big_activations_at_the_peak(void) {
    const char *db = harness_path("small_views.db");
    record_ok(db, SMALL_VIEWS, NULL, NULL);
    run_result r = harness_tpprof("report", db, "--storages", "--format=json", NULL);
    char *j = harness_json_squash(r.out);
    // Everything is released at exit; at the peak (step 5's relu) the views
    // kept at steps 0-4 each pin a 4 MiB activation through 4 KiB.
    CHECK(!strstr(j, "{\"when\":\"exit\""), "nothing pinned at exit: %s", r.out);
    size_t peak = harness_count(j, "{\"when\":\"peak\"");
    CHECK(peak == 5, "5 pinned at the peak, got %zu:\n%s", peak, r.out);
    // The released activation's tensor is alive as the view's base: named, not counted.
    CHECK(harness_count(j, "\"storage_bytes\":4194304,\"covered_bytes\":4096,\"pinned_bytes\":4190208,"
                           "\"held_base\":") == peak &&
              harness_count(j, "\"sizes\":[1024],\"strides\":[1],\"dtype\":\"float32\"") == peak,
          "%s", r.out);
    const char *first = strstr(j, "{\"when\":\"peak\"");
    char *stack = stack_after(first ? strstr(first, "\"stack\":") : NULL);
    CHECK(strstr(stack, "\"function\":\"keep_row\""), "created in keep_row: %s", stack);
    free(stack);
    free(j);
    harness_result_free(&r);
}

static void test_train_loop_leaks_no_storage_and_no_byte(void) {
    const char *db = harness_path("train_loop.db");
    record_ok(db, TRAIN_LOOP, "20", NULL);
    run_result r =
        harness_tpprof("check", db, "--max-leaked-storages", "0", "--max-lost-bytes", "0", NULL);
    CHECK(r.status == 0, "the false-positive check: %d\n%s%s", r.status, r.out, r.err);
    CHECK(strstr(r.out, "PASS leaked storages 0 <= 0") && strstr(r.out, "PASS lost bytes 0 <= 0"),
          "%s", r.out);
    harness_result_free(&r);
    r = harness_tpprof("report", db, "--storages", "--format=json", NULL);
    char *j = harness_json_squash(r.out);
    CHECK(strstr(j, "\"storages\":[],\"unmatched_by_stack\":[],\"weak_by_stack\":[]"), "%s", r.out);
    CHECK(harness_db_int(db, "SELECT COUNT(*) FROM storages") > 0, "the peak rows are there");
    free(j);
    harness_result_free(&r);
    // 200 steps: past the allocator's first 64, its small storages' lifetimes
    // are a sample, and the report says how many were timed and how.
    const char *longer = harness_path("train_loop_200.db");
    record_ok(longer, TRAIN_LOOP, "200", NULL);
    int64_t timed = harness_db_int(longer, "SELECT live_count FROM storage_lifetimes WHERE allocator = 'cpu'");
    r = harness_tpprof("report", longer, "--lifetimes", NULL);
    char line[64];
    snprintf(line, sizeof line, "  cpu               1405  %8lld ", (long long)timed);
    CHECK(timed > 64 && timed < 1405 && strstr(r.out, line), "1405 released, %lld timed:\n%s", (long long)timed,
          r.out);
    CHECK(strstr(r.out, "(live times of the timed storages: all of 64 KiB or more, each thread's first 64 of each "
                        "allocator, 1 in 8 of the rest; TPPROF_LIFETIMES=all times every one)"),
          "the sampling is said:\n%s", r.out);
    harness_result_free(&r);
    r = harness_tpprof("report", longer, "--lifetimes", "--format", "json", NULL);
    j = harness_json_squash(r.out);
    snprintf(line, sizeof line, "\"count\":1405,\"live_count\":%lld,", (long long)timed);
    CHECK(strstr(j, line), "JSON live_count %lld:\n%s", (long long)timed, r.out);
    free(j);
    harness_result_free(&r);
}

static void test_cat_output_is_its_own_storage_node(void) {
    const char *db = harness_path("cat_storage.db");
    record_ok(db, CAT_STORAGE, NULL, NULL);
    run_result r = harness_tpprof("graph", db, "--at-peak", "--format", "json", NULL);
    CHECK(r.status == 0, "status %d: %s", r.status, r.err);
    char *j = harness_json_squash(r.out);
    // a (6 floats) with its narrow view, b (4), and the cat result (13 = 52 B)
    // alone on its own storage.
    CHECK(strstr(j, "\"nbytes\":52,") &&
              strstr(j, "\"tensors\":[{\"id\":") &&
              strstr(j, "\"sizes\":[13],\"strides\":[1],\"dtype\":\"float32\",\"base\":null,\"views\":[]}]}"),
          "the cat output has a storage node of its own:\n%s", r.out);
    CHECK(harness_count(j, "\"kind\":\"view\"") == 1 &&
              strstr(j, "\"sizes\":[3],\"strides\":[1],\"dtype\":\"float32\",\"base\":"),
          "the narrow view hangs under a:\n%s", r.out);
    free(j);
    harness_result_free(&r);
    // A full recording also gives the counts at the peak: a and its view hold a's storage.
    const char *full = harness_path("cat_full.db");
    char *argv[] = {(char *)harness_tpprof_path(), (char *)"run", (char *)"--full", (char *)"-o",
                    (char *)full, (char *)"--", progs[CAT_STORAGE], NULL};
    r = harness_run(argv, NULL, NULL);
    harness_result_free(&r);
    r = harness_tpprof("graph", full, "--at-peak", NULL);
    CHECK(strstr(r.out, "24 B  cpu on cpu  strong 2, weak 1\n") &&
              strstr(r.out, "52 B  cpu on cpu  strong 1, weak 1\n"),
          "%s", r.out);
    harness_result_free(&r);
    r = harness_tpprof("graph", db, "--at-peak", "--format", "dot", NULL);
    CHECK(r.status == 0 && strstr(r.out, "[13] float32") && strstr(r.out, "label=\"view\""), "%s",
          r.out);
    harness_result_free(&r);
}

// "key=123" in the program's stats line.
static long long stat_of(const char *out, const char *key) {
    const char *line = strstr(out, "stats: ");
    char k[64];
    snprintf(k, sizeof k, " %s=", key);
    const char *p = line ? strstr(line, k) : NULL;
    return p ? atoll(p + strlen(k)) : -1;
}

// The program prints its allocator's stats, then releases the `kept`
// activations (one block free each) and destroys the allocator: the stats
// describe the state just before the kept-th last block free.
static void check_seq_batches(const char *name, const char *fixed) {
    char dbname[64];
    snprintf(dbname, sizeof dbname, "%s.db", name);
    const char *db = harness_path(dbname);
    run_result r = record(db, SEQ_BATCHES, fixed, NULL);
    CHECK(r.status == 0, "%s: status %d: %s", name, r.status, r.err);
    const char *kept_text = strstr(r.out, "kept ");
    int kept = kept_text ? atoi(kept_text + 5) : 0;
    long long want[5] = {stat_of(r.out, "allocated_bytes"), stat_of(r.out, "reserved_bytes"),
                         stat_of(r.out, "inactive_split_bytes"), stat_of(r.out, "inactive_split"),
                         stat_of(r.out, "segments")};
    CHECK(kept > 0 && want[0] > 0, "%s: the program's stats line: %s", name, r.out);
    harness_result_free(&r);
    char sql[256];
    snprintf(sql, sizeof sql,
             "SELECT seq FROM allocator_events WHERE allocator = 'caching' AND action = 4 "
             "ORDER BY seq DESC LIMIT 1 OFFSET %d",
             kept - 1);
    long long first_cleanup = harness_db_int(db, sql);
    CHECK(first_cleanup > 0, "%s: the cleanup's first free", name);
    char at[32];
    snprintf(at, sizeof at, "%lld", first_cleanup - 1);
    r = harness_tpprof("fragmentation", db, "--allocator", "caching", "--at-event", at, NULL);
    CHECK(r.status == 0, "%s: status %d: %s", name, r.status, r.err);
    char expect[512];
    snprintf(expect, sizeof expect, "figures: segments=%lld reserved_bytes=%lld allocated_bytes=%lld ",
             want[4], want[1], want[0]);
    CHECK(strstr(r.out, expect), "%s: '%s' expected in:\n%s", name, expect, r.out);
    snprintf(expect, sizeof expect, " inactive_split_bytes=%lld inactive_split=%lld ", want[2], want[3]);
    CHECK(strstr(r.out, expect), "%s: '%s' expected in:\n%s", name, expect, r.out);
    harness_result_free(&r);
    // At exit everything went back: no segment is left.
    r = harness_tpprof("check", db, "--max-inactive-split-bytes", "0", NULL);
    CHECK(r.status == 0, "%s: at exit nothing is stranded: %s", name, r.out);
    harness_result_free(&r);
    if (fixed)
        CHECK(want[2] == 0, "--fixed strands nothing: %lld", want[2]);
    else
        CHECK(want[2] > 0, "variable lengths strand free blocks: %lld", want[2]);
}

static void test_seq_batches_fragmentation_equals_the_allocators_own_stats(void) {
    check_seq_batches("seq_variable", NULL);
    check_seq_batches("seq_fixed", "--fixed");
}

// samples/alloc/lifetimes: 4 storages of a deferred-free allocator whose
// blocks are freed by a flush 30 ms after their deleters ran, and 2 storages
// of a mmap'd safetensors file, one of which lives 30 ms.
static void test_deferred_and_mmap_lifetimes_show_in_the_report(void) {
    const char *db = harness_path("lifetimes.db");
    const char *dir = harness_path("");
    record_ok(db, LIFETIMES, dir, NULL);
    run_result r = harness_tpprof("report", db, "--lifetimes", "--format", "json", NULL);
    CHECK(r.status == 0, "status %d: %s", r.status, r.err);
    char *j = harness_json_squash(r.out);
    const char *d = strstr(j, "{\"allocator\":\"deferred\",\"count\":4,");
    CHECK(d, "four deferred storages:\n%s", r.out);
    const char *dmax = d ? strstr(d, "\"release_delay_ns_max\":") : NULL;
    long long delay_max = dmax ? atoll(dmax + strlen("\"release_delay_ns_max\":")) : 0;
    /* Aggregate-mode times are the writer's merge time, a few ms off. */
    CHECK(delay_max >= 20000000LL, "a deferred block was freed ~30 ms after its deleter: %lld",
          delay_max);
    /* The mean is over the delays that were measured, not diluted by the
     * storages whose records the recording had already dropped. */
    const char *dmean = d ? strstr(d, "\"release_delay_ns_mean\":") : NULL;
    long long delay_mean = dmean ? atoll(dmean + strlen("\"release_delay_ns_mean\":")) : 0;
    CHECK(delay_mean >= 20000000LL, "mean release delay of the deferred blocks: %lld", delay_mean);
    const char *m = strstr(j, "{\"allocator\":\"mmap\",\"count\":2,\"live_count\":2,"); // (an allocator's first 64: timed)
    CHECK(m, "two storages of the mapped file, named mmap:\n%s", r.out);
    const char *mlive = m ? strstr(m, "\"live_ns_max\":") : NULL;
    long long live_max = mlive ? atoll(mlive + strlen("\"live_ns_max\":")) : 0;
    CHECK(live_max >= 20000000LL, "the mapped tensor kept for 30 ms lived that long: %lld", live_max);
    free(j);
    harness_result_free(&r);
    r = harness_tpprof("report", db, "--lifetimes", NULL);
    CHECK(strstr(r.out, "  deferred             4 ") && strstr(r.out, "  mmap                 2 "),
          "%s", r.out);
    harness_result_free(&r);
}

int main(int argc, char **argv) {
    harness_init(argc, argv);
    if (argc < 2 + NPROGS) {
        fprintf(stderr, "usage: %s TPPROF CACHE_LEAK WEAK_REFS SMALL_VIEWS TRAIN_LOOP CAT_STORAGE "
                        "SEQ_BATCHES LIFETIMES HANDLE_LEAK\n", argv[0]);
        return 2;
    }
    for (int i = 0; i < NPROGS; i++)
        if (!realpath(argv[2 + i], progs[i]))
            snprintf(progs[i], sizeof progs[i], "%s", argv[2 + i]);
    // Does this recorder write the tensor tables yet?
    const char *probe = harness_path("probe.db");
    run_result r = record(probe, CAT_STORAGE, NULL, NULL);
    long long attached = harness_db_int(probe, "SELECT value FROM meta WHERE key = 'tensors'");
    harness_result_free(&r);
    if (attached != 1) {
        fprintf(stderr, "FAIL: tpprof did not attach to the runtime (meta.tensors is not 1)\n");
        harness_finish();
        return 1;
    }
    RUN_TEST(test_cache_leak_names_cache_put_for_two_storages);
    RUN_TEST(test_weak_refs_lists_structs_held_by_memo_remember);
    RUN_TEST(test_handle_leak_names_the_live_views_and_where_they_were_made);
    RUN_TEST(test_small_views_pin_big_activations_at_the_peak);
    RUN_TEST(test_train_loop_leaks_no_storage_and_no_byte);
    RUN_TEST(test_cat_output_is_its_own_storage_node);
    RUN_TEST(test_seq_batches_fragmentation_equals_the_allocators_own_stats);
    RUN_TEST(test_deferred_and_mmap_lifetimes_show_in_the_report);
    return harness_finish();
}
