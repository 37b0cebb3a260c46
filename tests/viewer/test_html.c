// test_html.c: `tpprof report --format html -o FILE` on the synthetic
// recordings of fixture.h: one self-contained page with every section, the
// verdict first, the data the script draws (timeline, what was live, flame
// graph), names escaped whatever bytes they hold, a section that says so
// when its tables are missing, and the errors (an unwritable path).
// test_html_browser.c opens the same pages in a real browser.
#define _POSIX_C_SOURCE 200809L
#include "fixture.h"
#include "harness.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *tensor_db, *full_db, *plain_db, *evil_db;

// Write the page of db to harness_dir()/name and return its text (caller frees).
static char *page_of(const char *db, const char *name) {
    const char *out = harness_path(name);
    run_result r = harness_tpprof("report", db, "--format", "html", "-o", out, NULL);
    CHECK(r.status == 0, "status %d: %s", r.status, r.err);
    CHECK(r.out[0] == 0, "nothing on stdout with -o: %s", r.out);
    CHECK(r.err[0] == 0, "nothing on stderr: %s", r.err);
    harness_result_free(&r);
    char *text = harness_read_file(out);
    CHECK(text != NULL, "page written to %s", out);
    return text ? text : calloc(1, 1);
}

// The JSON the page's script reads (#tp-data), as a new string.
static char *data_of(const char *page) {
    const char *open = "<script type=\"application/json\" id=\"tp-data\">";
    const char *a = strstr(page, open);
    const char *b = a ? strstr(a, "</script>") : NULL;
    if (!a || !b)
        return calloc(1, 1);
    a += strlen(open);
    char *s = malloc((size_t)(b - a) + 1);
    memcpy(s, a, (size_t)(b - a));
    s[b - a] = 0;
    return s;
}

static bool valid_utf8(const unsigned char *s) {
    while (*s) {
        int n = *s < 0x80 ? 1 : (*s >> 5) == 6 ? 2 : (*s >> 4) == 14 ? 3 : (*s >> 3) == 30 ? 4 : 0;
        if (!n)
            return false;
        for (int i = 1; i < n; i++)
            if ((s[i] & 0xc0) != 0x80)
                return false;
        s += n;
    }
    return true;
}

// ---------------------------------------------------------------------------

static void test_page_is_one_self_contained_file_with_every_section(void) {
    char *page = page_of(tensor_db, "tensors.html");
    CHECK(strncmp(page, "<!DOCTYPE html>", 15) == 0, "%.80s", page);
    static const char *const sections[] = {"id=\"summary\"", "id=\"timeline\"", "id=\"flame\"", "id=\"leaks\"",
                                           "id=\"storages\"", "id=\"graph\"", "id=\"fragmentation\""};
    for (size_t i = 0; i < sizeof sections / sizeof *sections; i++)
        CHECK(strstr(page, sections[i]), "section %s present", sections[i]);
    // Nothing fetched at view time: no external script, style, image or font.
    CHECK(!strstr(page, "<link") && !strstr(page, " src=") && !strstr(page, "@import") && !strstr(page, "url(http"),
          "no external resource");
    // The only URLs are XML namespaces of inline SVG, never fetched.
    const char *u = page;
    while ((u = strstr(u, "http")) != NULL) {
        CHECK(strncmp(u, "http://www.w3.org/", 18) == 0, "only namespace URLs: %.60s", u);
        u += 4;
    }
    CHECK(strstr(page, "</html>\n"), "the page is complete");
    free(page);
}

static void test_page_leads_with_the_verdict(void) {
    char *page = page_of(plain_db, "plain.html");
    const char *verdict = strstr(page, "<p id=\"verdict\" class=\"verdict leak\" data-verdict=\"leak\">"
                                       "LEAK: 12.0 KiB lost in 2 blocks</p>");
    const char *reach = strstr(page, "200 B in 2 blocks still reachable at exit (referenced, not lost); most of it "
                                     "allocated by app: 200 B (100%)");
    const char *timeline = strstr(page, "id=\"timeline\"");
    CHECK(verdict && reach && timeline && verdict < reach && reach < timeline, "verdict, reachable, then the rest");
    CHECK(strstr(page, "<td>12.2 KiB in 4 blocks still allocated: lost 12.0 KiB in 2, reachable 200 B in 2, "
                       "not scanned 0 B</td>"), "the figures at exit");
    free(page);
}

static void test_leaks_are_grouped_by_stack_lost_first(void) {
    char *page = page_of(plain_db, "plain.html");
    const char *leaks = strstr(page, "id=\"leaks\"");
    CHECK(leaks != NULL, "leaks section");
    if (leaks) {
        CHECK(harness_count(leaks, "<tr class=\"leak\">") == 3, "3 groups");
        const char *arena = strstr(leaks, "map_arena (arena.c:30)");
        const char *once = strstr(leaks, "leak_once (leak.c:12)");
        const char *buffer = strstr(leaks, "make_buffer (buffer.c:20)");
        CHECK(arena && once && buffer && arena < once && once < buffer, "lost 8 KiB, lost 4 KiB, reachable");
        CHECK(strstr(leaks, "<td class=\"lost\">lost</td>") && strstr(leaks, "<td class=\"reach\">reachable</td>"),
              "lost and reachable told apart");
    }
    free(page);
}

static void test_storages_with_an_unmatched_reference_are_listed(void) {
    char *page = page_of(tensor_db, "tensors.html");
    const char *st = strstr(page, "id=\"storages\"");
    CHECK(st && strstr(st, "2 stacks took a strong reference no release matched"), "unmatched groups");
    CHECK(st && strstr(st, "cache_put (cache.c:27)") && strstr(st, "extra_hold (hold.c:15)"),
          "the stacks that took them");
    CHECK(st && strstr(st, "<tr class=\"unmatched\"><td class=\"num\">2</td>"), "cache_put: 2 storages first");
    // The graph: laid out as SVG by libgvc, or its DOT source.
    const char *graph = strstr(page, "id=\"graph\"");
    CHECK(graph && (strstr(graph, "<svg") || strstr(graph, "digraph tpprof_storages")), "the sharing graph");
    CHECK(graph && strstr(graph, "storage #3"), "with its nodes");
    const char *frag = strstr(page, "id=\"fragmentation\"");
    CHECK(frag && strstr(frag, "<svg") && strstr(frag, "caching"), "the block map of allocator 'caching'");
    free(page);
}

static void test_data_has_timeline_flame_and_the_live_set_at_the_peak(void) {
    char *page = page_of(plain_db, "plain.html");
    char *data = data_of(page);
    CHECK(harness_json_valid(data), "the page's data is JSON: %s", data);
    char *j = harness_json_squash(data);
    CHECK(strstr(j, "\"timeline\":{\"t\":[5000000],\"heap\":[14836],\"mmap\":[8192],\"rss\":[1048576],"
                    "\"peak_t\":5000000,\"peak_bytes\":23028}"), "%s", j);
    // Aggregate: the live set is the peak's, by site, largest first.
    CHECK(strstr(j, "\"live\":{\"full\":false,") && strstr(j, "\"rows\":[[10240,1,\"inner_helper (helpers.h:7)\"],"
                                                               "[8192,1,\"map_arena (arena.c:30)\"]"), "%s", j);
    // The flame graph: root, then main; its values are the sites' sums.
    CHECK(strstr(j, "\"names\":[\"all\",\"main\","), "%s", j);
    CHECK(strstr(j, "\"parent\":[-1,0,"), "%s", j);
    CHECK(strstr(j, "\"v\":{\"bytes\":[1141864,1141864,"), "root and main hold every byte: %s", j);
    CHECK(strstr(j, "\"leaked\":[12488,12488,") && strstr(j, "\"lost\":[12288,12288,"), "%s", j);
    CHECK(!strstr(j, "tpprof_malloc_hook"), "the recorder's frames are dropped");
    free(j);
    free(data);
    free(page);
}

static void test_full_recording_gives_the_live_set_at_every_point(void) {
    char *page = page_of(full_db, "full.html");
    char *data = data_of(page);
    CHECK(harness_json_valid(data), "JSON");
    char *j = harness_json_squash(data);
    // At 3 ms the 1 MiB block of inner_helper was live; freed at 4 ms.
    CHECK(strstr(j, "{\"t\":3000000,\"total\":1052672,\"blocks\":2,\"rows\":[[1048576,1,\"inner_helper (helpers.h:7)\"],"
                    "[4096,1,\"leak_once (leak.c:12)\"]]}"), "%s", j);
    CHECK(strstr(j, "{\"t\":5000000,\"total\":4096,\"blocks\":1,"), "%s", j);
    CHECK(strstr(j, "\"live\":{\"full\":true,"), "%s", j);
    free(j);
    free(data);
    free(page);
}

// Names with <, &, quotes and bytes that are not UTF-8 are escaped in the
// HTML and in the script's JSON; the page stays valid UTF-8.
static void test_names_are_escaped_whatever_they_hold(void) {
    char *page = page_of(evil_db, "evil.html");
    CHECK(valid_utf8((const unsigned char *)page), "the page is UTF-8");
    CHECK(!strstr(page, "<b>") && !strstr(page, "</script><i>"), "no markup from names");
    CHECK(strstr(page, "evil&lt;b&gt;&amp;&quot;&#39;\xef\xbf\xbd"), "escaped in HTML");
    char *data = data_of(page);
    CHECK(harness_json_valid(data), "JSON: %s", data);
    CHECK(strstr(data, "\"evil\\u003cb\\u003e\\u0026\\\"'\\ufffd\\u003c/\""), "escaped in JSON, '</' included: %s", data);
    CHECK(!strstr(data, "</script"), "nothing ends the data's script element");
    free(data);
    free(page);
    // The report's JSON too: valid UTF-8, the byte as U+FFFD.
    run_result r = harness_tpprof("report", evil_db, "--format", "json", NULL);
    CHECK(r.status == 0 && harness_json_valid(r.out) && valid_utf8((const unsigned char *)r.out), "%s", r.err);
    CHECK(strstr(r.out, "\"function\": \"evil<b>&\\\"'\\ufffd</\""), "%s", r.out);
    harness_result_free(&r);
}

static void test_missing_tables_are_said_in_their_section(void) {
    char *page = page_of(plain_db, "plain.html");
    CHECK(strstr(page, "This recording has no tensor tables"), "storages: no tables");
    CHECK(strstr(page, "This recording has no caching allocator events"), "fragmentation: no events");
    CHECK(strstr(page, "id=\"flame-chart\""), "the rest renders");
    free(page);
    const char *bare = harness_path("bare.db");
    CHECK(fixture_write_edited(bare, &(fixture_options){0}, "DROP TABLE timeline") == 0, "fixture");
    page = page_of(bare, "bare.html");
    CHECK(strstr(page, "This recording has no timeline samples"), "timeline: none");
    CHECK(strstr(page, "\"timeline\":null"), "and no data for it");
    free(page);
}

static void test_unwritable_output_is_one_line_and_exit_2(void) {
    run_result r = harness_tpprof("report", plain_db, "--format", "html", "-o", "/nonexistent-dir/r.html", NULL);
    harness_expect_usage_error("unwritable -o", r, "cannot write /nonexistent-dir/r.html");
    r = harness_tpprof("report", plain_db, "--format", "pdf", NULL);
    harness_expect_usage_error("unknown format", r, "expected text, json, folded or html");
    r = harness_tpprof("report", plain_db, "-o", NULL);
    harness_expect_usage_error("-o without a file", r, "-o");
}

// -o works for the other formats too.
static void test_output_file_takes_any_format(void) {
    const char *out = harness_path("report.json");
    run_result r = harness_tpprof("report", plain_db, "--format", "json", "-o", out, NULL);
    CHECK(r.status == 0 && r.out[0] == 0, "status %d, stdout %s", r.status, r.out);
    harness_result_free(&r);
    char *text = harness_read_file(out);
    CHECK(text && harness_json_valid(text) && strstr(text, "\"verdict\": \"leak\""), "%s", text ? text : "");
    free(text);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

// A recording the size of alloc_heavy's (75,000 stack nodes, 18,750 sites):
// the flame graph keeps at most 20,000 nodes, the page stays small, fast.
static void test_a_big_stack_tree_is_pruned_to_a_small_page(void) {
    const char *db = harness_path("heavy.db");
    CHECK(fixture_write_big(db, 75000, 70) == 0, "fixture");
    double t0 = now_s();
    char *page = page_of(db, "heavy.html");
    double dt = now_s() - t0;
    fprintf(stderr, "html of 75k nodes: %.3f s, %zu bytes\n", dt, strlen(page));
    CHECK(dt < 5.0, "took %.2f s", dt);
    CHECK(strlen(page) < 5u << 20, "%zu bytes", strlen(page));
    char *data = data_of(page);
    CHECK(harness_json_valid(data), "JSON");
    const char *parent = strstr(data, "\"parent\":[");
    const char *end = parent ? strchr(parent, ']') : NULL;
    size_t nodes = 0;
    for (const char *c = parent; c && c < end; c++)
        nodes += *c == ',';
    nodes++;
    unsigned long total = 0;
    const char *t = strstr(data, "\"total_nodes\":");
    if (t)
        total = strtoul(t + 14, NULL, 10);
    CHECK(parent && nodes <= 20000 && total > nodes, "%zu nodes kept of %lu", nodes, total);
    free(data);
    free(page);
}

int main(int argc, char **argv) {
    harness_init(argc, argv);
    tensor_db = fixture_write_copy(harness_path("tensors.db"), &(fixture_options){.tensors = true});
    plain_db = fixture_write_copy(harness_path("plain.db"), &(fixture_options){0});
    // A full recording with allocation events: a 1 MiB block live from 2 to 4 ms.
    const char *full = harness_path("full.db");
    if (fixture_write_edited(full, &(fixture_options){.tensors = true, .full_mode = true},
                             "INSERT INTO events VALUES (100, 1000000, 100, 1, 1, 65536, 4096, 3, NULL),"
                             "(101, 2000000, 100, 1, 1, 9437184, 1048576, 6, NULL),"
                             "(102, 4000000, 100, 2, NULL, 9437184, NULL, NULL, NULL);"
                             "INSERT INTO timeline VALUES (1000000, 4096, 1, 0, 1, 0, 900000),"
                             "(3000000, 1052672, 2, 0, 2, 0, 2000000), (7000000, 4096, 1, 0, 2, 1, 1000000)") == 0)
        full_db = strdup(full);
    // Names a page must escape: markup, an ampersand, quotes, a byte that is
    // not UTF-8, and "</" (which would end a script element).
    const char *evil = harness_path("evil.db");
    if (fixture_write_edited(evil, &(fixture_options){0},
                             "UPDATE symbols SET function = 'evil<b>&\"''' || CAST(X'FF' AS TEXT) || '</' "
                             "WHERE function = 'leak_once';"
                             "UPDATE symbols SET function = '</script><i>x' WHERE function = 'parse_token'") == 0)
        evil_db = strdup(evil);
    if (!tensor_db || !full_db || !plain_db || !evil_db)
        return 1;
    RUN_TEST(test_page_is_one_self_contained_file_with_every_section);
    RUN_TEST(test_page_leads_with_the_verdict);
    RUN_TEST(test_leaks_are_grouped_by_stack_lost_first);
    RUN_TEST(test_storages_with_an_unmatched_reference_are_listed);
    RUN_TEST(test_data_has_timeline_flame_and_the_live_set_at_the_peak);
    RUN_TEST(test_full_recording_gives_the_live_set_at_every_point);
    RUN_TEST(test_names_are_escaped_whatever_they_hold);
    RUN_TEST(test_missing_tables_are_said_in_their_section);
    RUN_TEST(test_unwritable_output_is_one_line_and_exit_2);
    RUN_TEST(test_output_file_takes_any_format);
    RUN_TEST(test_a_big_stack_tree_is_pruned_to_a_small_page);
    free((void *)tensor_db);
    free((void *)full_db);
    free((void *)plain_db);
    free((void *)evil_db);
    return harness_finish();
}
