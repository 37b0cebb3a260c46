// test_storages.c: `tpprof report --storages/--lifetimes` and the tensor
// gates of `tpprof check` on the synthetic tensor recording of fixture.h:
// unmatched retains by stack, weak holders, pinned views, DataPtr
// lifetimes, in text and in the JSON contract of docs/report-json.md.
#define _POSIX_C_SOURCE 200809L
#include "fixture.h"
#include "harness.h"

#include <stdlib.h>
#include <string.h>

static const char *tensor_db, *plain_db;

// ---------------------------------------------------------------------------
// Text

static void test_storages_text_names_the_site_of_each_unmatched_retain(void) {
    run_result r = harness_tpprof("report", tensor_db, "--storages", NULL);
    CHECK(r.status == 0, "status %d: %s", r.status, r.err);
    CHECK(strstr(r.out, "Storages alive at exit: 5 holding 6.50 MiB of data, 1 more with data released"),
          "%s", r.out);
    // Grouped by stack: cache_put took one reference on each of two 256 KiB storages.
    const char *groups = strstr(r.out, "Unmatched references by stack");
    CHECK(groups, "%s", r.out);
    if (groups) {
        // The runtime's own frame (tp_storage_retain) is skipped in text.
        const char *cache = strstr(groups, "2 storages (512 KiB), 2 references  retain\n"
                                           "      cache_put (cache.c:27)  (called into the runtime)\n"
                                           "      main (app.c:50)\n");
        const char *hold = strstr(groups, "1 storage (4.00 KiB), 1 reference  retain\n"
                                          "      extra_hold (hold.c:15)");
        CHECK(cache && hold && cache < hold, "most storages first:\n%s", groups);
    }
    // The per-storage diagnosis: the count says 3, two tensors explain 2.
    // Each live tensor says where it was made, and a base that its live
    // views hold says so.
    CHECK(strstr(r.out, "storage #3  4.00 KiB  cpu on cpu  strong 3, weak 1; 2 tensors\n"
                        "      tensor #10 [16, 64] float32, strides [64, 1], offset 0\n"
                        "        created in make_tensor (tensor.c:9)\n"
                        "        held by its view #11\n"
                        "      tensor #11 [64] float32, strides [1], offset 64, view of #10\n"
                        "        created in make_tensor (tensor.c:9)\n"
                        "      strong count is 3 but tensors hold 2: 1 reference no release matched"),
          "%s", r.out);
    CHECK(strstr(r.out, "      tensor #20 [1024] float32, strides [1], offset 0, view of #19\n"
                        "        created in keep_row (views.c:18)\n"),
          "%s", r.out);
    CHECK(!strstr(r.out, "  storage #6  "), "a storage freed before exit is not listed: %s", r.out);
    CHECK(!strstr(r.out, "Leaks:"), "--storages alone shows no leak section: %s", r.out);
    harness_result_free(&r);
}

static void test_storages_text_lists_structs_held_by_weak_references(void) {
    run_result r = harness_tpprof("report", tensor_db, "--storages", NULL);
    const char *weak = strstr(r.out, "Data released, struct still held by weak references: 1 storage");
    CHECK(weak, "%s", r.out);
    if (weak) {
        CHECK(strstr(weak, "storage #4  32.0 KiB  cpu, data released at 9.0 us, weak 1\n"
                           "      1 weak reference taken in memo_remember (memo.c:22)\n"),
              "%s", weak);
        CHECK(strstr(weak, "1 storage (32.0 KiB), 1 reference  weak_retain\n"
                           "      memo_remember (memo.c:22)"),
              "%s", weak);
    }
    harness_result_free(&r);
}

static void test_small_views_pinning_big_storages_at_exit_and_at_peak(void) {
    run_result r = harness_tpprof("report", tensor_db, "--storages", NULL);
    // 4 MiB storage, a [1024] float32 view: 4096 B covered, the rest pinned.
    // Its base #19 is alive too, but a view keeps its base: named, not counted.
    const char *exit_ = strstr(r.out, "at exit: 4.00 MiB pinned in 1 storage\n"
                                      "    tensor #20 [1024] float32 covers 4.00 KiB of storage #5 "
                                      "(4.00 MiB, 0.1%): 4190208 B pinned\n"
                                      "      its base #19 [1024, 1024] is alive only as far as the "
                                      "view keeps it (a view holds its base): pinned unless #19 is "
                                      "still used\n"
                                      "        keep_row (views.c:18)");
    CHECK(exit_, "%s", r.out);
    // At the peak also storage 6: [2, 256] with row stride 1024 reaches 512
    // elements (2 KiB) of 2 MiB. Storage 7's [524288] covers all of it.
    CHECK(strstr(r.out, "at the peak: 5.99 MiB pinned in 2 storages"), "%s", r.out);
    CHECK(strstr(r.out, "tensor #30 [2, 256] float32 covers 2.00 KiB of storage #6 (2.00 MiB, 0.1%): "
                        "2095104 B pinned"),
          "%s", r.out);
    CHECK(!strstr(r.out, "of storage #7"), "a view covering all of its storage pins nothing: %s",
          r.out);
    harness_result_free(&r);
}

static void test_lifetimes_text_gives_mean_and_max_per_allocator(void) {
    run_result r = harness_tpprof("report", tensor_db, "--lifetimes", NULL);
    CHECK(r.status == 0, "status %d", r.status);
    // (The fixture's table is of before live_count: every live time measured.)
    CHECK(strstr(r.out, "  cpu                  3         3      1.0 us      2.0 us        0 ns        0 ns\n"),
          "%s", r.out);
    CHECK(strstr(r.out, "  deferred             2         2      5.0 us      6.0 us      2.0 us      3.0 us\n"),
          "%s", r.out);
    CHECK(strstr(r.out, "  longest release delays (of the storages the recording kept):\n"
                        "    storage #4  32.0 KiB  cpu: block freed 3.5 us after the deleter ran\n"),
          "storage 4's block went 3500 ns after its deleter: %s", r.out);
    CHECK(!strstr(r.out, "storage #6"), "storage 6's block went at once: %s", r.out);
    CHECK(!strstr(r.out, "Storages alive"), "--lifetimes alone: %s", r.out);
    harness_result_free(&r);
}

static void test_default_report_shows_tensor_sections_only_when_there_are_tensors(void) {
    run_result r = harness_tpprof("report", tensor_db, NULL);
    CHECK(strstr(r.out, "Storages alive at exit") && strstr(r.out, "DataPtr lifetimes"), "%s", r.out);
    harness_result_free(&r);
    r = harness_tpprof("report", plain_db, NULL);
    CHECK(r.status == 0, "a recording without tensor tables still works: %s", r.err);
    CHECK(!strstr(r.out, "Storages alive"), "%s", r.out);
    harness_result_free(&r);
    r = harness_tpprof("report", plain_db, "--storages", "--lifetimes", NULL);
    CHECK(r.status == 0, "missing tables read as empty: %s", r.err);
    CHECK(strstr(r.out, "Storages alive at exit: 0 holding 0 B of data"), "%s", r.out);
    CHECK(strstr(r.out, "(no storage released its data in this recording)"), "%s", r.out);
    harness_result_free(&r);
}

// ---------------------------------------------------------------------------
// JSON

static void test_json_storages_carry_tensors_unmatched_retains_and_weak_holders(void) {
    run_result r = harness_tpprof("report", tensor_db, "--storages", "--format", "json", NULL);
    CHECK(r.status == 0, "status %d: %s", r.status, r.err);
    CHECK(harness_json_valid(r.out), "invalid JSON:\n%s", r.out);
    char *j = harness_json_squash(r.out);
    CHECK(strstr(j, "{\"id\":3,\"nbytes\":4096,\"allocator\":\"cpu\",\"device\":\"cpu\",\"strong\":3,"
                    "\"weak\":1,\"data_released\":false,\"tensors\":["
                    "{\"id\":10,\"offset\":0,\"sizes\":[16,64],\"strides\":[64,1],\"dtype\":\"float32\","
                    "\"base\":null,\"stack\":[{\"function\":\"make_tensor\",\"file\":\"/src/app/tensor.c\","
                    "\"line\":9,\"module\":\"/opt/fake/app\",\"ip\":\"0x401b10\"},{\"function\":\"main\","
                    "\"file\":\"/src/app/app.c\",\"line\":50,\"module\":\"/opt/fake/app\",\"ip\":\"0x401010\"}],"
                    "\"handle_retains\":[]},{\"id\":11,\"offset\":64,\"sizes\":[64],\"strides\":[1],\"dtype\":\"float32\","
                    "\"base\":10,\"stack\":[{\"function\":\"make_tensor\""),
          "%s", j);
    CHECK(strstr(j, "\"ip\":\"0x401010\"}],\"handle_retains\":[]}],\"unmatched_retains\":[{\"count\":1,\"op\":\"retain\",\"stack\":[{\"function\":"
                    "\"extra_hold\""),
          "%s", j);
    CHECK(strstr(j, "{\"id\":4,\"nbytes\":32768,\"allocator\":\"cpu\",\"device\":\"cpu\",\"strong\":0,"
                    "\"weak\":1,\"data_released\":true,\"tensors\":[],\"unmatched_retains\":[],"
                    "\"weak_holders\":[{\"count\":1,\"op\":\"weak_retain\",\"stack\":[{\"function\":"
                    "\"memo_remember\""),
          "%s", j);
    CHECK(harness_count(j, "\"nbytes\":262144,") == 2, "two cache storages: %s", j);
    // JSON keeps every frame, the runtime's too.
    CHECK(strstr(j, "\"unmatched_by_stack\":[{\"op\":\"retain\",\"storages\":2,\"count\":2,"
                    "\"bytes\":524288,\"stack\":[{\"function\":\"tp_storage_retain\",\"file\":"
                    "\"/src/core/storage.c\",\"line\":88,\"module\":\"/opt/fake/libtensorplay.so.0\","
                    "\"ip\":\"0x800110\"},{\"function\":\"cache_put\""),
          "%s", j);
    CHECK(strstr(j, "\"weak_by_stack\":[{\"op\":\"weak_retain\",\"storages\":1,\"count\":1,"
                    "\"bytes\":32768,\"stack\":[{\"function\":\"memo_remember\""),
          "%s", j);
    CHECK(!strstr(j, "{\"id\":6,"), "storage 6 was freed: %s", j);
    free(j);
    harness_result_free(&r);
}

static void test_json_pinned_views_and_lifetimes(void) {
    run_result r = harness_tpprof("report", tensor_db, "--format=json", NULL);
    CHECK(harness_json_valid(r.out), "invalid JSON:\n%s", r.out);
    char *j = harness_json_squash(r.out);
    CHECK(strstr(j, "\"pinned_views\":[{\"when\":\"exit\",\"tensor\":20,\"storage\":5,"
                    "\"storage_bytes\":4194304,\"covered_bytes\":4096,\"pinned_bytes\":4190208,"
                    "\"held_base\":19,\"sizes\":[1024],\"strides\":[1],\"dtype\":\"float32\",\"stack\":[{\"function\":"
                    "\"keep_row\""),
          "%s", j);
    CHECK(strstr(j, "{\"when\":\"peak\",\"tensor\":30,\"storage\":6,\"storage_bytes\":2097152,"
                    "\"covered_bytes\":2048,\"pinned_bytes\":2095104,\"held_base\":null"),
          "%s", j);
    CHECK(harness_count(j, "\"when\":\"peak\"") == 2, "two at the peak: %s", j);
    CHECK(strstr(j, "\"lifetimes\":[{\"allocator\":\"cpu\",\"count\":3,\"live_count\":3,\"live_ns_mean\":1000,"
                    "\"live_ns_max\":2000,\"release_delay_ns_mean\":0,\"release_delay_ns_max\":0,\"release_delay_count\":3,"
                    "\"storages\":[{\"id\":4,\"nbytes\":32768,\"live_ns\":5000,\"release_delay_ns\":3500},"
                    "{\"id\":6,\"nbytes\":2097152,\"live_ns\":14000,\"release_delay_ns\":0}]},"
                    "{\"allocator\":\"deferred\",\"count\":2,\"live_count\":2,\"live_ns_mean\":5000,\"live_ns_max\":6000,"
                    "\"release_delay_ns_mean\":2000,\"release_delay_ns_max\":3000,\"release_delay_count\":2,\"storages\":[]}]"),
          "%s", j);
    free(j);
    harness_result_free(&r);
    // Without tensor tables the keys are still there, empty (the graph's:
    // not recorded).
    r = harness_tpprof("report", plain_db, "--format=json", NULL);
    j = harness_json_squash(r.out);
    CHECK(strstr(j, "\"storages\":[],\"unmatched_by_stack\":[],\"weak_by_stack\":[],"
                    "\"handles_by_stack\":[],\"pinned_views\":[],"
                    "\"graph_held\":{\"recorded\":false,\"bytes\":0,\"storages\":0,\"kept_bytes\":0,"
                    "\"kept_storages\":0,\"nodes_alive\":0,"
                    "\"nodes_created\":0},\"graphs_by_stack\":[],\"lifetimes\":[]"),
          "%s", j);
    free(j);
    harness_result_free(&r);
}

// ---------------------------------------------------------------------------
// A leaked block that a caching allocator reused (a segment never freed)
// once held storage 2's data, freed long before exit, and holds storage 1's
// now: the leak names storage 1 only, in text and in JSON alike.
static void test_a_leak_lists_only_the_storages_alive_at_exit(void) {
    const char *db = harness_path("reused.db");
    CHECK(fixture_write_edited(db, &(fixture_options){.tensors = true},
                               "UPDATE storages SET block_address = 65536, block_freed_ns = NULL WHERE id IN (1, 2);"
                               "UPDATE storages SET freed_ns = 15000, data_released_ns = 15000, strong = 0 WHERE id = 2;"
                               "DELETE FROM storage_refs WHERE storage_id = 2") == 0,
          "fixture");
    run_result r = harness_tpprof("report", db, "--leaks", NULL);
    CHECK(r.status == 0, "status %d: %s", r.status, r.err);
    CHECK(harness_count(r.out, "backs storage #") == 1 && strstr(r.out, "backs storage #1 (256 KiB, cpu)"),
          "%s", r.out);
    harness_result_free(&r);
    r = harness_tpprof("report", db, "--leaks", "--format", "json", NULL);
    char *j = harness_json_squash(r.out);
    CHECK(j && strstr(j, "\"storages\":[1]") && !strstr(j, "\"storages\":[1,2]"), "%s", r.out);
    free(j);
    harness_result_free(&r);
}

// check

static void test_check_max_leaked_storages_counts_structs_alive_at_exit(void) {
    run_result r = harness_tpprof("check", tensor_db, "--max-leaked-storages", "6", NULL);
    CHECK(r.status == 0, "6 <= 6: status %d\n%s%s", r.status, r.out, r.err);
    CHECK(strstr(r.out, "PASS leaked storages 6 <= 6"), "%s", r.out);
    harness_result_free(&r);
    r = harness_tpprof("check", tensor_db, "--max-leaked-storages=5", NULL);
    CHECK(r.status == 1, "6 > 5 fails: status %d", r.status);
    CHECK(strstr(r.out, "FAIL leaked storages 6 > 5: 2 storages held by a retain no release matched "
                        "in cache_put (cache.c:27)"),
          "%s", r.out);
    CHECK(!strstr(r.out, "lost bytes"), "an explicit gate replaces the default lost gate: %s", r.out);
    harness_result_free(&r);
    r = harness_tpprof("check", plain_db, "--max-leaked-storages", "0", NULL);
    CHECK(r.status == 0 && strstr(r.out, "PASS leaked storages 0 <= 0"),
          "no tables: no storages; status %d %s %s", r.status, r.out, r.err);
    harness_result_free(&r);
}

// No reference or handle retain is left unmatched: the storages are held by
// tensors alive at exit, and the gate names one as the run summary does (a
// view, since a view holds its base) with where it was made.
static void test_check_max_leaked_storages_names_the_tensor_that_holds_them(void) {
    const char *db = harness_path("held.db");
    CHECK(fixture_write_edited(db, &(fixture_options){.tensors = true},
                               "DELETE FROM storage_refs") == 0,
          "fixture");
    run_result r = harness_tpprof("check", db, "--max-leaked-storages", "0", NULL);
    CHECK(r.status == 1 && strstr(r.out, "FAIL leaked storages 6 > 0: 3 storages held by tensors alive at exit, "
                                         "such as #20 [1024] (a view of #19) created in keep_row (views.c:18)"),
          "status %d: %s%s", r.status, r.out, r.err);
    harness_result_free(&r);
}

static void test_check_max_inactive_split_bytes_replays_to_exit(void) {
    run_result r = harness_tpprof("check", tensor_db, "--max-inactive-split-bytes", "12581888", NULL);
    CHECK(r.status == 0, "status %d\n%s%s", r.status, r.out, r.err);
    CHECK(strstr(r.out, "PASS inactive split bytes 12581888 <= 12581888"), "%s", r.out);
    harness_result_free(&r);
    r = harness_tpprof("check", tensor_db, "--max-inactive-split-bytes", "8M", "--junit",
                       harness_path("split.xml"), NULL);
    CHECK(r.status == 1, "status %d", r.status);
    CHECK(strstr(r.out, "FAIL inactive split bytes 12581888 > 8388608: 12581888 B in allocator "
                        "'caching'"),
          "%s", r.out);
    char *xml = harness_read_file(harness_path("split.xml"));
    CHECK(xml && strstr(xml, "name=\"max-inactive-split-bytes\">"), "junit testcase: %s",
          xml ? xml : "(none)");
    free(xml);
    harness_result_free(&r);
    r = harness_tpprof("check", tensor_db, "--max-inactive-split-bytes", "lots", NULL);
    CHECK(r.status == 2 && harness_lines(r.err) == 1 && r.out[0] == 0, "bad size: %d %s", r.status,
          r.err);
    harness_result_free(&r);
}

// A recording from before the graph tables keeps no graph: 0 bytes; a bad
// size is a usage error; the gate has its JUnit testcase.
static void test_check_max_graph_held_bytes_reads_an_older_recording_as_zero(void) {
    run_result r = harness_tpprof("check", tensor_db, "--max-graph-held-bytes", "0", "--junit",
                                  harness_path("graph.xml"), NULL);
    CHECK(r.status == 0 && strstr(r.out, "PASS graph-held bytes 0 <= 0"), "status %d\n%s%s", r.status, r.out,
          r.err);
    char *xml = harness_read_file(harness_path("graph.xml"));
    CHECK(xml && strstr(xml, "name=\"max-graph-held-bytes\""), "junit testcase: %s", xml ? xml : "(none)");
    free(xml);
    harness_result_free(&r);
    r = harness_tpprof("check", tensor_db, "--max-graph-held-bytes", "lots", NULL);
    CHECK(r.status == 2 && harness_lines(r.err) == 1 && r.out[0] == 0 && strstr(r.err, "--max-graph-held-bytes"),
          "bad size: %d %s", r.status, r.err);
    harness_result_free(&r);
    r = harness_tpprof("check", tensor_db, "--max-graph-held-bytes", NULL);
    CHECK(r.status == 2 && harness_lines(r.err) == 1, "missing value: %d %s", r.status, r.err);
    harness_result_free(&r);
}

static void test_check_gates_combine_with_the_leak_gates(void) {
    run_result r = harness_tpprof("check", tensor_db, "--max-lost-bytes", "1M",
                                  "--max-leaked-storages", "10", "--max-inactive-split-bytes",
                                  "1k", NULL);
    CHECK(r.status == 1, "one of three fails: %d", r.status);
    CHECK(strstr(r.out, "PASS lost bytes") && strstr(r.out, "PASS leaked storages 6 <= 10") &&
              strstr(r.out, "FAIL inactive split bytes"),
          "%s", r.out);
    harness_result_free(&r);
}

// Each generation of storage_lifetimes reads: the fixture's oldest (no
// release_delay_count, no live_count: every delay and live time measured),
// the last stop's (release_delay_count), and today's (live_count too).
static void test_lifetimes_of_each_schema_generation_read(void) {
    static const struct {
        const char *name, *sql, *expect;
    } gens[] = {
        {"lifetimes_v1.db", "SELECT 1", "\"count\":3,\"live_count\":3,\"live_ns_mean\":1000,"},
        {"lifetimes_v2.db", "ALTER TABLE storage_lifetimes ADD COLUMN release_delay_count INTEGER; "
                            "UPDATE storage_lifetimes SET release_delay_count = 1",
         "\"count\":3,\"live_count\":3,\"live_ns_mean\":1000,"},
        {"lifetimes_v3.db", "ALTER TABLE storage_lifetimes ADD COLUMN release_delay_count INTEGER; "
                            "ALTER TABLE storage_lifetimes ADD COLUMN live_count INTEGER; "
                            "UPDATE storage_lifetimes SET release_delay_count = 1, live_count = 2",
         "\"count\":3,\"live_count\":2,\"live_ns_mean\":1500,"},
    };
    for (size_t i = 0; i < sizeof gens / sizeof gens[0]; i++) {
        const char *db = harness_path(gens[i].name);
        CHECK(fixture_write_edited(db, &(fixture_options){.tensors = true}, gens[i].sql) == 0, "fixture");
        run_result r = harness_tpprof("report", db, "--lifetimes", "--format", "json", NULL);
        char *j = harness_json_squash(r.out);
        CHECK(r.status == 0 && strstr(j, gens[i].expect), "%s: %s\n%s", gens[i].name, gens[i].expect, r.out);
        if (i > 0)
            CHECK(strstr(j, "\"release_delay_count\":1,"), "%s: release_delay_count read\n%s", gens[i].name, r.out);
        free(j);
        harness_result_free(&r);
    }
}

static void test_a_damaged_tensor_table_is_one_clear_error(void) {
    const char *db = harness_path("damaged.db");
    CHECK(fixture_write_edited(db, &(fixture_options){.tensors = true},
                               "DROP TABLE tensors; CREATE TABLE tensors(id INTEGER PRIMARY KEY)") == 0,
          "fixture");
    const char *cmds[][4] = {{"report", "--storages", NULL, NULL},
                             {"graph", NULL, NULL, NULL},
                             {"check", "--max-leaked-storages", "9", NULL}};
    for (size_t i = 0; i < 3; i++) {
        run_result r = harness_tpprof(cmds[i][0], db, cmds[i][1], cmds[i][2], NULL);
        CHECK(r.status == 2 && harness_lines(r.err) == 1 && strstr(r.err, "reading tensors") &&
                  (i == 2 || r.out[0] == 0),
              "%s: status %d, stderr: %s", cmds[i][0], r.status, r.err);
        harness_result_free(&r);
    }
}

int main(int argc, char **argv) {
    harness_init(argc, argv);
    tensor_db = fixture_write_copy(harness_path("tensors.db"), &(fixture_options){.tensors = true});
    plain_db = fixture_write_copy(harness_path("plain.db"), &(fixture_options){0});
    if (!tensor_db || !plain_db)
        return 1;
    RUN_TEST(test_storages_text_names_the_site_of_each_unmatched_retain);
    RUN_TEST(test_storages_text_lists_structs_held_by_weak_references);
    RUN_TEST(test_small_views_pinning_big_storages_at_exit_and_at_peak);
    RUN_TEST(test_lifetimes_text_gives_mean_and_max_per_allocator);
    RUN_TEST(test_default_report_shows_tensor_sections_only_when_there_are_tensors);
    RUN_TEST(test_json_storages_carry_tensors_unmatched_retains_and_weak_holders);
    RUN_TEST(test_json_pinned_views_and_lifetimes);
    RUN_TEST(test_a_leak_lists_only_the_storages_alive_at_exit);
    RUN_TEST(test_check_max_leaked_storages_counts_structs_alive_at_exit);
    RUN_TEST(test_check_max_leaked_storages_names_the_tensor_that_holds_them);
    RUN_TEST(test_check_max_inactive_split_bytes_replays_to_exit);
    RUN_TEST(test_check_max_graph_held_bytes_reads_an_older_recording_as_zero);
    RUN_TEST(test_check_gates_combine_with_the_leak_gates);
    RUN_TEST(test_lifetimes_of_each_schema_generation_read);
    RUN_TEST(test_a_damaged_tensor_table_is_one_clear_error);
    free((void *)tensor_db);
    free((void *)plain_db);
    return harness_finish();
}
