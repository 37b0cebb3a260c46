// test_check.c: `tpprof check`, the CI gate: every outcome (pass, each gate
// failing with the worst stack named, baseline growth, the JUnit file) and
// its exit status (0 pass, 1 fail, 2 usage).
#define _POSIX_C_SOURCE 200809L
#include "fixture.h"
#include "harness.h"

#include <stdlib.h>
#include <string.h>

static const char *app_db;

static void test_default_gate_fails_on_lost_bytes_naming_the_biggest_lost_stack(void) {
    HARNESS_EXPECT_CHECK(1, "FAIL lost bytes 12288 > 0: 8192 B in map_arena (arena.c:30)\n", app_db);
}

static void test_all_gates_pass_when_limits_hold(void) {
    run_result r = harness_tpprof("check", app_db, "--max-lost-bytes", "12288", "--max-leaked-bytes",
                                  "13k", "--max-peak-bytes", "1M", NULL);
    CHECK(r.status == 0, "status %d: %s%s", r.status, r.out, r.err);
    CHECK(strstr(r.out, "PASS lost bytes 12288 <= 12288\n"), "%s", r.out);
    CHECK(strstr(r.out, "PASS leaked bytes 12488 <= 13312\n"), "%s", r.out);
    CHECK(strstr(r.out, "PASS peak bytes 23028 <= 1048576\n"), "%s", r.out);
    CHECK(!strstr(r.out, "FAIL"), "%s", r.out);
    harness_result_free(&r);
}

static void test_leaked_gate_counts_reachable_blocks_too(void) {
    HARNESS_EXPECT_CHECK(1, "FAIL leaked bytes 12488 > 12288: 8192 B in map_arena (arena.c:30)\n",
                         app_db, "--max-leaked-bytes", "12288");
}

static void test_peak_gate_names_the_largest_site_live_at_the_peak(void) {
    HARNESS_EXPECT_CHECK(1, "FAIL peak bytes 23028 > 20480: 10240 B in inner_helper (helpers.h:7)\n",
                         app_db, "--max-peak-bytes", "20k");
}

static void test_one_fail_line_per_violated_gate(void) {
    run_result r = harness_tpprof("check", app_db, "--max-lost-bytes=4k", "--max-leaked-bytes=1G",
                                  "--max-peak-bytes=1k", NULL);
    CHECK(r.status == 1, "status %d", r.status);
    CHECK(strstr(r.out, "FAIL lost bytes 12288 > 4096: 8192 B in map_arena (arena.c:30)\n"), "%s",
          r.out);
    CHECK(strstr(r.out, "PASS leaked bytes 12488 <= 1073741824\n"), "%s", r.out);
    CHECK(strstr(r.out, "FAIL peak bytes 23028 > 1024: 10240 B in inner_helper (helpers.h:7)\n"),
          "%s", r.out);
    CHECK(harness_lines(r.out) == 3, "%s", r.out);
    harness_result_free(&r);
}

static void test_baseline_growth_fails_and_names_the_stack_that_grew(void) {
    const char *grown = harness_path("grown.db");
    fixture_options o = {.extra_lost_bytes = 6144};
    CHECK(fixture_write(grown, &o) == 0, "fixture");
    run_result r = harness_tpprof("check", grown, "--baseline", app_db, "--max-growth", "10", NULL);
    CHECK(r.status == 1, "status %d: %s", r.status, r.err);
    // leaked 12488 -> 18632 (+49.2%), lost 12288 -> 18432 (+50.0%), peak unchanged
    CHECK(strstr(r.out, "FAIL leaked bytes 18632 vs baseline 12488 (+49.2%) > 10%: +6144 B in grow_leak (grow.c:70)\n"),
          "%s", r.out);
    CHECK(strstr(r.out, "FAIL lost bytes 18432 vs baseline 12288 (+50.0%) > 10%: +6144 B in grow_leak (grow.c:70)\n"),
          "%s", r.out);
    CHECK(strstr(r.out, "PASS peak bytes 23028 vs baseline 23028 (+0.0%) <= 10%\n"), "%s", r.out);
    harness_result_free(&r);

    // Within the allowed growth: pass.
    r = harness_tpprof("check", grown, "--baseline", app_db, "--max-growth", "60%", NULL);
    CHECK(r.status == 0, "status %d: %s", r.status, r.out);
    harness_result_free(&r);

    // A shrinking recording passes against a larger baseline.
    r = harness_tpprof("check", app_db, "--baseline", grown, NULL);
    CHECK(r.status == 0, "status %d: %s", r.status, r.out);
    CHECK(strstr(r.out, "PASS lost bytes 12288 vs baseline 18432 (-33.3%) <= 0%\n"), "%s", r.out);
    harness_result_free(&r);
}

static void test_baseline_matches_stacks_by_function_across_line_changes(void) {
    // The new build moved every line down by 3: the stacks are the same.
    const char *moved = harness_path("moved.db");
    CHECK(fixture_write_edited(moved, &(fixture_options){.extra_lost_bytes = 6144},
                               "UPDATE symbols SET line = line + 3") == 0,
          "fixture");
    run_result r = harness_tpprof("check", moved, "--baseline", app_db, NULL);
    CHECK(r.status == 1, "status %d", r.status);
    CHECK(strstr(r.out, "FAIL lost bytes 18432 vs baseline 12288 (+50.0%) > 0%: +6144 B in grow_leak (grow.c:73)\n"),
          "only grow_leak grew:\n%s", r.out);
    harness_result_free(&r);
}

static void test_baseline_peak_growth_is_gated(void) {
    const char *peaky = harness_path("peaky.db");
    fixture_options o = {.extra_peak_bytes = 23028};
    CHECK(fixture_write(peaky, &o) == 0, "fixture");
    run_result r = harness_tpprof("check", peaky, "--baseline", app_db, "--max-growth", "50", NULL);
    CHECK(r.status == 1, "status %d", r.status);
    CHECK(strstr(r.out, "FAIL peak bytes 46056 vs baseline 23028 (+100.0%) > 50%: +23028 B in grow_leak (grow.c:70)\n"),
          "%s", r.out);
    CHECK(strstr(r.out, "PASS lost bytes"), "%s", r.out);
    harness_result_free(&r);
}

static void test_junit_file_has_one_testcase_per_gate(void) {
    const char *xml = harness_path("gates.xml");
    run_result r = harness_tpprof("check", app_db, "--max-lost-bytes", "0", "--max-peak-bytes", "1M",
                                  "--junit", xml, NULL);
    CHECK(r.status == 1, "status %d", r.status);
    char *text = harness_read_file(xml);
    CHECK(text != NULL, "junit file written");
    if (text) {
        CHECK(strstr(text, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>"), "%s", text);
        CHECK(strstr(text, "tests=\"2\" failures=\"1\" errors=\"0\""), "%s", text);
        CHECK(strstr(text, "<testcase classname=\"tpprof.check\" name=\"max-lost-bytes\">\n"
                           "      <failure message=\"lost bytes 12288 &gt; 0: 8192 B in map_arena (arena.c:30)\"/>"),
              "%s", text);
        CHECK(strstr(text, "<testcase classname=\"tpprof.check\" name=\"max-peak-bytes\"/>"), "%s",
              text);
        free(text);
    }
    harness_result_free(&r);
}

static void test_junit_to_an_unwritable_path_is_an_error(void) {
    run_result r = harness_tpprof("check", app_db, "--junit", "/nonexistent-dir/x.xml", NULL);
    CHECK(r.status == 2, "status %d", r.status);
    CHECK(strstr(r.err, "cannot write '/nonexistent-dir/x.xml'") && harness_lines(r.err) == 1, "%s",
          r.err);
    // Found out before any gate ran: no PASS line to be taken for the verdict.
    CHECK(r.out[0] == 0, "nothing on stdout: %s", r.out);
    harness_result_free(&r);
    r = harness_tpprof("check", app_db, "--max-lost-bytes", "1M", "--junit", harness_dir(), NULL);
    CHECK(r.status == 2 && r.out[0] == 0 && harness_lines(r.err) == 1 && strstr(r.err, "Is a directory"),
          "a directory: status %d: %s%s", r.status, r.out, r.err);
    harness_result_free(&r);
}

static void test_unscanned_blocks_of_a_crashed_run_count_as_lost(void) {
    const char *db = harness_path("crashed.db");
    fixture_options o = {.incomplete = true};
    CHECK(fixture_write(db, &o) == 0, "fixture");
    run_result r = harness_tpprof("check", db, "--max-lost-bytes", "12288", NULL);
    CHECK(r.status == 1, "status %d", r.status);
    CHECK(strstr(r.out, "FAIL lost bytes 12488 > 12288: 8192 B in map_arena (arena.c:30)\n"), "%s",
          r.out);
    CHECK(strstr(r.err, "never scanned and count as lost"), "%s", r.err);
    CHECK(strstr(r.out, "FAIL recording cannot be vouched for: incomplete: it ends before the program did"),
          "%s", r.out);
    harness_result_free(&r);
}

// Cut during the final write (kill -9 after the leak scan): a periodic flush
// said "scan done" but the live set never came. The recording is
// incomplete, and even with --allow-incomplete what each site still had is
// counted as lost, not passed as scanned.
static void test_a_scan_without_its_live_set_counts_nothing_as_scanned(void) {
    const char *db = harness_path("cut.db");
    fixture_options o = {.incomplete = true};
    CHECK(fixture_write_edited(db, &o,
                               "DELETE FROM live_blocks;"
                               "INSERT OR REPLACE INTO meta VALUES ('leak_scan', '1')") == 0,
          "fixture");
    run_result r = harness_tpprof("check", db, NULL);
    CHECK(r.status == 1 && strstr(r.out, "FAIL recording cannot be vouched for: incomplete"), "%s", r.out);
    harness_result_free(&r);
    r = harness_tpprof("check", db, "--allow-incomplete", NULL);
    CHECK(r.status == 1 && strstr(r.out, "FAIL lost bytes "), "the sites' leftovers count as lost: %s%s", r.out,
          r.err);
    harness_result_free(&r);
}

// A program that a fault ended: its live set was written unscanned by the
// preload's stand-in handler (meta.end_signal), so it counts as lost, and
// check says how the program ended.
static void test_a_program_that_died_of_a_signal_is_named_so(void) {
    const char *db = harness_path("signalled.db");
    fixture_options o = {0};
    CHECK(fixture_write_edited(db, &o,
                               "UPDATE live_blocks SET reachability = 0;"
                               "INSERT OR REPLACE INTO meta VALUES ('leak_scan', '0');"
                               "INSERT OR REPLACE INTO meta VALUES ('end_reason', 'signal');"
                               "INSERT OR REPLACE INTO meta VALUES ('end_signal', '11')") == 0,
          "fixture");
    run_result r = harness_tpprof("check", db, "--max-lost-bytes", "12288", NULL);
    CHECK(r.status == 1, "status %d: %s", r.status, r.err);
    CHECK(strstr(r.err, "died of signal 11 (Segmentation fault)"), "%s", r.err);
    CHECK(strstr(r.err, "never scanned and count as lost"), "%s", r.err);
    CHECK(!strstr(r.err, "is incomplete"), "complete: %s", r.err);
    harness_result_free(&r);
    r = harness_tpprof("report", db, NULL);
    CHECK(strstr(r.out, ", complete, died of signal 11 (Segmentation fault): the live set at that moment, not scanned\n"),
          "%s", r.out);
    harness_result_free(&r);
}

static void test_blocks_allocated_after_the_scan_are_not_lost(void) {
    // A normal exit: the scan ran; a block made later (in an exit handler)
    // is unscanned, counts as leaked, but not as lost.
    const char *db = harness_path("late.db");
    CHECK(fixture_write_edited(db, &(fixture_options){0},
                               "INSERT INTO live_blocks VALUES (262144, 500, 1, 7, 1, 9000, 0)") == 0,
          "fixture");
    run_result r = harness_tpprof("check", db, "--max-lost-bytes", "12288", "--max-leaked-bytes",
                                  "12988", NULL);
    CHECK(r.status == 0, "status %d: %s", r.status, r.out);
    CHECK(strstr(r.out, "PASS lost bytes 12288 <= 12288\n") &&
              strstr(r.out, "PASS leaked bytes 12988 <= 12988\n"),
          "%s", r.out);
    CHECK(!strstr(r.err, "count as lost"), "%s", r.err);
    harness_result_free(&r);
}

static void test_clean_recording_passes_the_default_gate(void) {
    const char *db = harness_path("clean.db");
    fixture_options o = {.no_leaks = true};
    CHECK(fixture_write(db, &o) == 0, "fixture");
    run_result r = harness_tpprof("check", db, NULL);
    CHECK(r.status == 0, "status %d: %s", r.status, r.out);
    CHECK(strcmp(r.out, "PASS lost bytes 0 <= 0\n") == 0, "%s", r.out);
    CHECK(r.err[0] == 0, "%s", r.err);
    harness_result_free(&r);
}

static void test_suppressed_stacks_leave_the_leak_gates(void) {
    run_result r = harness_tpprof("check", app_db, "--suppress", "map_*", NULL);
    CHECK(r.status == 1, "status %d", r.status);
    CHECK(strcmp(r.out, "FAIL lost bytes 4096 > 0: 4096 B in leak_once (leak.c:12)\n") == 0, "%s",
          r.out);
    CHECK(strstr(r.err, "note: 8192 B in 1 blocks suppressed"), "%s", r.err);
    harness_result_free(&r);

    r = harness_tpprof("check", app_db, "--suppress", "map_*", "--suppress=leak_once",
                       "--max-lost-bytes=0", "--max-leaked-bytes", "200", NULL);
    CHECK(r.status == 0, "status %d: %s", r.status, r.out);
    CHECK(strstr(r.out, "PASS lost bytes 0 <= 0\n") && strstr(r.out, "PASS leaked bytes 200 <= 200\n"),
          "%s", r.out);
    harness_result_free(&r);
}

static void test_suppression_by_module_file_name(void) {
    // Every frame of the fixture lies in /opt/fake/app.
    run_result r = harness_tpprof("check", app_db, "--suppress", "ap?", "--max-leaked-bytes", "0", NULL);
    CHECK(r.status == 0, "status %d: %s", r.status, r.out);
    CHECK(strstr(r.err, "note: 12488 B in 4 blocks suppressed"), "%s", r.err);
    harness_result_free(&r);
}

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    CHECK(f != NULL, "create %s", path);
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

// check reads LeakSanitizer's format, as report does: leak:PATTERN lines,
// '#' comments; several files add up; each rule says what it matched.
static void test_suppressions_files_in_lsan_format_with_comments(void) {
    const char *file = harness_path("supp.txt"), *second = harness_path("supp2.txt");
    write_file(file, "# third-party leaks we live with\n\n  leak:map_arena   # the arena is never unmapped\n");
    write_file(second, "leak:^leak_on*$\nleak:no_such_function\n");
    run_result r = harness_tpprof("check", app_db, "--suppressions", file, "--suppressions", second, NULL);
    CHECK(r.status == 0 && strcmp(r.out, "PASS lost bytes 0 <= 0\n") == 0, "status %d: %s%s", r.status, r.out, r.err);
    CHECK(strstr(r.err, "tpprof check: note: 12288 B in 2 blocks suppressed\n"
                        "tpprof check: note: suppressed leak:map_arena matched 8.00 KiB in 1 block (1 stack)\n"
                        "tpprof check: note: suppressed leak:^leak_on*$ matched 4.00 KiB in 1 block (1 stack)\n"
                        "tpprof check: note: suppressed leak:no_such_function matched 0 B in 0 blocks (0 stacks)\n"),
          "%s", r.err);
    harness_result_free(&r);
    // Only the first file: leak_once still fails the gate.
    r = harness_tpprof("check", app_db, "--suppressions", file, NULL);
    CHECK(r.status == 1 && strstr(r.out, "FAIL lost bytes 4096 > 0: 4096 B in leak_once"), "status %d: %s", r.status,
          r.out);
    harness_result_free(&r);
    r = harness_tpprof("check", app_db, "--suppressions", harness_path("no-such-file"), NULL);
    CHECK(r.status == 2 && harness_lines(r.err) == 1 && strstr(r.err, "--suppressions: cannot open"),
          "status %d: %s", r.status, r.err);
    harness_result_free(&r);
    // A bare glob line (the format check read before) names its line.
    write_file(file, "# old style\nmap_arena\n");
    harness_expect_usage_error("a line without leak:", harness_tpprof("check", app_db, "--suppressions", file, NULL),
                               "supp.txt:2: expected leak:PATTERN");
}

static void test_suppressions_apply_to_the_baseline_too(void) {
    const char *grown = harness_path("grown2.db");
    fixture_options o = {.extra_lost_bytes = 6144};
    CHECK(fixture_write(grown, &o) == 0, "fixture");
    run_result r = harness_tpprof("check", grown, "--baseline", app_db, "--suppress", "grow_leak", NULL);
    CHECK(r.status == 0, "status %d: %s", r.status, r.out);
    CHECK(strstr(r.out, "PASS lost bytes 12288 vs baseline 12288 (+0.0%) <= 0%\n"), "%s", r.out);
    harness_result_free(&r);
}

int main(int argc, char **argv) {
    harness_init(argc, argv);
    app_db = fixture_write_copy(harness_path("app.db"), &(fixture_options){0});
    if (!app_db)
        return 1;
    RUN_TEST(test_default_gate_fails_on_lost_bytes_naming_the_biggest_lost_stack);
    RUN_TEST(test_all_gates_pass_when_limits_hold);
    RUN_TEST(test_leaked_gate_counts_reachable_blocks_too);
    RUN_TEST(test_peak_gate_names_the_largest_site_live_at_the_peak);
    RUN_TEST(test_one_fail_line_per_violated_gate);
    RUN_TEST(test_baseline_growth_fails_and_names_the_stack_that_grew);
    RUN_TEST(test_baseline_matches_stacks_by_function_across_line_changes);
    RUN_TEST(test_baseline_peak_growth_is_gated);
    RUN_TEST(test_junit_file_has_one_testcase_per_gate);
    RUN_TEST(test_junit_to_an_unwritable_path_is_an_error);
    RUN_TEST(test_unscanned_blocks_of_a_crashed_run_count_as_lost);
    RUN_TEST(test_a_program_that_died_of_a_signal_is_named_so);
    RUN_TEST(test_a_scan_without_its_live_set_counts_nothing_as_scanned);
    RUN_TEST(test_blocks_allocated_after_the_scan_are_not_lost);
    RUN_TEST(test_clean_recording_passes_the_default_gate);
    RUN_TEST(test_suppressed_stacks_leave_the_leak_gates);
    RUN_TEST(test_suppression_by_module_file_name);
    RUN_TEST(test_suppressions_files_in_lsan_format_with_comments);
    RUN_TEST(test_suppressions_apply_to_the_baseline_too);
    free((void *)app_db);
    return harness_finish();
}
