// test_fragmentation.c: `tpprof fragmentation` replays the scripted
// allocator_events of fixture.h; every figure below is computed by hand
// from that script (segments A = 2 MiB at 0x100000, B = 20 MiB at 0x800000,
// C = 4 MiB at 0x2000000).
#define _POSIX_C_SOURCE 200809L
#include "fixture.h"
#include "harness.h"

#include <stdlib.h>
#include <string.h>

static const char *tensor_db, *plain_db;

static void test_at_exit_figures_match_the_hand_computed_state(void) {
    run_result r = harness_tpprof("fragmentation", tensor_db, NULL);
    CHECK(r.status == 0, "status %d: %s", r.status, r.err);
    // A: 1024 B allocated for 1000, then one free block of 2096128 (the
    // 4096 and 8192 blocks merged with the tail). B: 10 MiB for 10000000,
    // 10 MiB free. C was released. Internal: 24 + 485760. Inactive split:
    // both free blocks (both segments are split).
    CHECK(strstr(r.out, "Allocator 'caching' on cpu at exit: 10.0 ms (after 18 of 18 events)\n"
                        "  figures: segments=2 reserved_bytes=23068672 allocated_bytes=10486784 "
                        "requested_bytes=10001000 internal_bytes=485784 inactive_split_bytes=12581888 "
                        "inactive_split=2 free_bytes=12581888 largest_free_bytes=10485760\n"),
          "%s", r.out);
    CHECK(strstr(r.out, "segment 0x100000  2.00 MiB  2 blocks\n"
                        "      0x100000       1.00 KiB  allocated, requested 1000 B  make_buffer (buffer.c:20)\n"
                        "      0x100400       2.00 MiB  free (inactive split)\n"),
          "%s", r.out);
    // The biggest split segment is B; its block belongs to map_arena.
    const char *owners = strstr(r.out, "Who splits the biggest segments");
    CHECK(owners && strstr(owners, "segment 0x800000 (20.0 MiB): 10.0 MiB in 1 block\n"
                                   "        map_arena (arena.c:30)"),
          "%s", r.out);
    harness_result_free(&r);
}

static void test_at_peak_is_the_largest_allocated_total(void) {
    run_result r = harness_tpprof("fragmentation", tensor_db, "--at-peak", NULL);
    CHECK(r.status == 0, "status %d: %s", r.status, r.err);
    // After event 13 (7 ms): C wholly allocated; A still has the freed
    // 4096-byte hole next to the 2083840-byte tail.
    CHECK(strstr(r.out, "at peak: 7.0 ms (after 13 of 18 events)\n"
                        "  figures: segments=3 reserved_bytes=27262976 allocated_bytes=14689280 "
                        "requested_bytes=14203496 internal_bytes=485784 inactive_split_bytes=12573696 "
                        "inactive_split=3 free_bytes=12573696 largest_free_bytes=10485760\n"),
          "%s", r.out);
    CHECK(strstr(r.out, "segment 0x2000000  4.00 MiB  1 block\n"
                        "      0x2000000      4.00 MiB  allocated, requested 4194304 B  parse_token"),
          "an unsplit segment is no inactive split: %s", r.out);
    harness_result_free(&r);
}

static void test_at_time_and_at_event_replay_a_prefix(void) {
    run_result r = harness_tpprof("fragmentation", tensor_db, "--at", "5ms", NULL);
    CHECK(r.status == 0, "status %d: %s", r.status, r.err);
    // Only A: 1024 + 8192 allocated for 1000 + 8192, a 4096 hole and the tail.
    CHECK(strstr(r.out, "  figures: segments=1 reserved_bytes=2097152 allocated_bytes=9216 "
                        "requested_bytes=9192 internal_bytes=24 inactive_split_bytes=2087936 "
                        "inactive_split=2 free_bytes=2087936 largest_free_bytes=2083840\n"),
          "%s", r.out);
    harness_result_free(&r);
    r = harness_tpprof("fragmentation", tensor_db, "--at=4999999", NULL);
    CHECK(strstr(r.out, "allocated_bytes=13312 "), "before the free at 5 ms: %s", r.out);
    harness_result_free(&r);
    r = harness_tpprof("fragmentation", tensor_db, "--at-event", "11", NULL);
    CHECK(strstr(r.out, "after 11 of 18 events") && strstr(r.out, "segments=2 reserved_bytes=23068672 "
                                                                  "allocated_bytes=10494976 "),
          "%s", r.out);
    harness_result_free(&r);
    r = harness_tpprof("fragmentation", tensor_db, "--at", "0", NULL);
    CHECK(strstr(r.out, "segments=0 reserved_bytes=0 allocated_bytes=0 "), "before anything: %s", r.out);
    harness_result_free(&r);
}

static void test_json_has_block_maps_figures_owners_and_series(void) {
    run_result r = harness_tpprof("fragmentation", tensor_db, "--format", "json", NULL);
    CHECK(r.status == 0, "status %d: %s", r.status, r.err);
    CHECK(harness_json_valid(r.out), "invalid JSON:\n%s", r.out);
    char *j = harness_json_squash(r.out);
    CHECK(strstr(j, "\"allocators\":[{\"allocator\":\"caching\",\"device\":\"cpu\",\"at\":\"exit\","
                    "\"time_ns\":10000000,\"events_replayed\":18,\"events_total\":18,"
                    "\"figures\":{\"segments\":2,\"reserved_bytes\":23068672,\"allocated_bytes\":10486784,"
                    "\"requested_bytes\":10001000,\"internal_fragmentation_bytes\":485784,"
                    "\"inactive_split_bytes\":12581888,\"inactive_split\":2,\"free_bytes\":12581888,"
                    "\"largest_free_bytes\":10485760,\"allocated_blocks\":2,\"free_blocks\":2}"),
          "%s", j);
    CHECK(strstr(j, "{\"address\":\"0x800000\",\"size\":20971520,\"blocks\":["
                    "{\"address\":\"0x800000\",\"size\":10485760,\"state\":\"allocated\","
                    "\"requested\":10000000,\"stack\":[{\"function\":\"map_arena\""),
          "%s", j);
    CHECK(strstr(j, "{\"address\":\"0x1200000\",\"size\":10485760,\"state\":\"inactive_split\","
                    "\"requested\":0}"),
          "%s", j);
    CHECK(strstr(j, "\"split_owners\":[{\"segment\":\"0x800000\",\"segment_size\":20971520,"
                    "\"bytes\":10485760,\"count\":1,\"stack\":[{\"function\":\"map_arena\""),
          "%s", j);
    CHECK(harness_count(j, "{\"time_ns\":") == 18, "one point per event: %s", j);
    CHECK(strstr(j, "{\"time_ns\":7000000,\"reserved_bytes\":27262976,\"allocated_bytes\":14689280}"),
          "the peak point: %s", j);
    free(j);
    harness_result_free(&r);
}

static void test_svg_draws_segments_legend_and_timeline(void) {
    run_result r = harness_tpprof("fragmentation", tensor_db, "--at-peak", "--format", "svg", NULL);
    CHECK(r.status == 0, "status %d: %s", r.status, r.err);
    CHECK(strncmp(r.out, "<svg xmlns=\"http://www.w3.org/2000/svg\"", 39) == 0, "%s", r.out);
    CHECK(strstr(r.out, "</svg>\n"), "closed");
    // Three segments of 4, 2 and 1 blocks = 7 block rectangles with a title.
    CHECK(harness_count(r.out, "<title>") == 7, "%s", r.out);
    CHECK(harness_count(r.out, "fill=\"url(#hatch)\" stroke=\"#333\" stroke-width=\"0.5\"><title>") == 3,
          "three free blocks hatched: %s", r.out);
    CHECK(strstr(r.out, "map_arena (arena.c:30)") && strstr(r.out, "parse_token (parse.c:60)"),
          "owner legend: %s", r.out);
    CHECK(harness_count(r.out, "<polyline") == 2 && strstr(r.out, ">reserved</text>") &&
              strstr(r.out, ">allocated</text>") && strstr(r.out, "time (ms)"),
          "two lines, legend and axis: %s", r.out);
    harness_result_free(&r);
}

static void test_allocator_filter_and_recordings_without_events(void) {
    run_result r = harness_tpprof("fragmentation", tensor_db, "--allocator", "caching", "--format=json", NULL);
    CHECK(r.status == 0 && harness_count(r.out, "\"allocator\":") == 1, "%d %s", r.status, r.err);
    harness_result_free(&r);
    r = harness_tpprof("fragmentation", tensor_db, "--allocator", "cuda", NULL);
    CHECK(r.status == 2 && harness_lines(r.err) == 1 && strstr(r.err, "no allocator named 'cuda'"),
          "%d %s", r.status, r.err);
    harness_result_free(&r);
    r = harness_tpprof("fragmentation", plain_db, NULL);
    CHECK(r.status == 0 && strstr(r.out, "No allocator events in"), "%d %s %s", r.status, r.out, r.err);
    harness_result_free(&r);
    r = harness_tpprof("fragmentation", plain_db, "--format", "svg", NULL);
    CHECK(r.status == 0 && strstr(r.out, "No allocator events") && strstr(r.out, "</svg>"), "%s", r.out);
    harness_result_free(&r);
}

static void test_fragmentation_bad_inputs_exit_2_with_one_line(void) {
    harness_expect_usage_error("bad time", harness_tpprof("fragmentation", tensor_db, "--at", "1.5h", NULL),
                               "--at: unknown unit in '1.5h'");
    harness_expect_usage_error("empty time", harness_tpprof("fragmentation", tensor_db, "--at=", NULL),
                               "--at: expected a time");
    harness_expect_usage_error("bad seq", harness_tpprof("fragmentation", tensor_db, "--at-event", "x", NULL),
                               "--at-event: expected a non-negative integer");
    harness_expect_usage_error("two moments",
                               harness_tpprof("fragmentation", tensor_db, "--at-peak", "--at", "1ms", NULL),
                               "choose one moment");
    harness_expect_usage_error("format", harness_tpprof("fragmentation", tensor_db, "--format", "png", NULL),
                               "--format: expected text, json or svg, got 'png'");
    harness_expect_usage_error("unknown flag", harness_tpprof("fragmentation", tensor_db, "--at-start", NULL),
                               "unknown option '--at-start'");
    harness_expect_usage_error("no database", harness_tpprof("fragmentation", NULL), "missing the database");
}

int main(int argc, char **argv) {
    harness_init(argc, argv);
    tensor_db = fixture_write_copy(harness_path("tensors.db"), &(fixture_options){.tensors = true});
    plain_db = fixture_write_copy(harness_path("plain.db"), &(fixture_options){0});
    if (!tensor_db || !plain_db)
        return 1;
    RUN_TEST(test_at_exit_figures_match_the_hand_computed_state);
    RUN_TEST(test_at_peak_is_the_largest_allocated_total);
    RUN_TEST(test_at_time_and_at_event_replay_a_prefix);
    RUN_TEST(test_json_has_block_maps_figures_owners_and_series);
    RUN_TEST(test_svg_draws_segments_legend_and_timeline);
    RUN_TEST(test_allocator_filter_and_recordings_without_events);
    RUN_TEST(test_fragmentation_bad_inputs_exit_2_with_one_line);
    free((void *)tensor_db);
    free((void *)plain_db);
    return harness_finish();
}
