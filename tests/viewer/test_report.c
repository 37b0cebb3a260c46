// test_report.c: `tpprof report` on synthetic recordings: the text a person
// reads and the JSON contract of docs/report-json.md.
#define _POSIX_C_SOURCE 200809L
#include "fixture.h"
#include "harness.h"

#include <sqlite3.h>

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *app_db;

// ---------------------------------------------------------------------------
// Text

static void test_text_summary_states_totals_in_human_units(void) {
    run_result r = harness_tpprof("report", app_db, NULL);
    CHECK(r.status == 0, "status %d, stderr: %s", r.status, r.err);
    CHECK(strstr(r.out, "5,112 allocations, 5,108 frees, 4,000 temporary"), "%s", r.out);
    CHECK(strstr(r.out, "peak        22.5 KiB"), "%s", r.out);
    CHECK(strstr(r.out, "at exit     12.2 KiB in 4 blocks still allocated: lost 12.0 KiB in 2, reachable 200 B in 2"),
          "%s", r.out);
    CHECK(strstr(r.out, "/opt/fake/app (pid 4242)"), "%s", r.out);
    CHECK(r.err[0] == 0, "nothing on stderr expected: %s", r.err);
    harness_result_free(&r);
}

// The summary opens with the verdict (lost or not), then what is still
// reachable and which library allocated most of it, as memcheck and LSan
// separate "definitely lost" from "still reachable".
static void test_text_summary_leads_with_the_verdict_then_what_is_reachable(void) {
    run_result r = harness_tpprof("report", app_db, NULL);
    CHECK(r.status == 0, "status %d, stderr: %s", r.status, r.err);
    const char *verdict = strstr(r.out, "  verdict     LEAK: 12.0 KiB lost in 2 blocks\n");
    const char *reach = strstr(r.out, "  reachable   200 B in 2 blocks still reachable at exit (referenced, not lost); "
                                      "most of it allocated by app: 200 B (100%)\n");
    const char *program = strstr(r.out, "  program ");
    CHECK(verdict && reach && program && verdict < reach && reach < program,
          "verdict, then reachable, then the program line:\n%s", r.out);
    CHECK(!strstr(r.out, "leaked "), "no 'leaked' figure that mixes lost and reachable:\n%s", r.out);
    harness_result_free(&r);

    const char *clean = harness_path("verdict_clean.db");
    CHECK(fixture_write(clean, &(fixture_options){.no_leaks = true}) == 0, "fixture");
    r = harness_tpprof("report", clean, NULL);
    CHECK(strstr(r.out, "  verdict     no leak: 0 B lost\n  reachable   nothing still reachable at exit\n"),
          "%s", r.out);
    harness_result_free(&r);

    // Only reachable blocks (the README's MLP: OpenBLAS's buffers): no leak.
    const char *reachable = harness_path("verdict_reachable.db");
    CHECK(fixture_write_edited(reachable, &(fixture_options){0}, "DELETE FROM live_blocks WHERE reachability = 1") == 0,
          "fixture");
    r = harness_tpprof("report", reachable, NULL);
    CHECK(strstr(r.out, "  verdict     no leak: 0 B lost\n  reachable   200 B in 2 blocks still reachable"), "%s",
          r.out);
    harness_result_free(&r);
    r = harness_tpprof("report", reachable, "--format", "json", NULL);
    char *sq = harness_json_squash(r.out);
    CHECK(sq && strstr(sq, "\"verdict\":\"no_leak\",\"verdict_lost_bytes\":0,\"verdict_lost_count\":0,"
                           "\"reachable_top_module\":\"app\",\"reachable_top_module_bytes\":200"),
          "%s", r.out);
    free(sq);
    harness_result_free(&r);
}

static void test_text_leaks_list_lost_first_then_by_bytes_with_frames(void) {
    run_result r = harness_tpprof("report", app_db, "--leaks", NULL);
    CHECK(r.status == 0, "status %d", r.status);
    const char *arena = strstr(r.out, "map_arena (arena.c:30)");
    const char *once = strstr(r.out, "leak_once (leak.c:12)");
    const char *buffer = strstr(r.out, "make_buffer (buffer.c:20)");
    CHECK(arena && once && buffer, "all three leak stacks shown:\n%s", r.out);
    CHECK(arena < once && once < buffer, "order: lost 8 KiB, lost 4 KiB, then reachable:\n%s", r.out);
    CHECK(strstr(r.out, "8.00 KiB in      1 block   lost       mmap"), "%s", r.out);
    CHECK(strstr(r.out, "200 B in      2 blocks  reachable  calloc"), "%s", r.out);
    CHECK(strstr(r.out, "main (app.c:50)"), "outer frames shown: %s", r.out);
    CHECK(!strstr(r.out, "tpprof_malloc_hook"), "libtpprof.so frames are dropped: %s", r.out);
    CHECK(!strstr(r.out, "Top "), "--leaks alone shows no top section: %s", r.out);
    harness_result_free(&r);
}

static void test_text_top_orders_by_bytes_and_by_calls(void) {
    run_result r = harness_tpprof("report", app_db, "--top", "2", NULL);
    CHECK(r.status == 0, "status %d", r.status);
    const char *bytes = strstr(r.out, "Top 2 sites by bytes allocated");
    const char *calls = strstr(r.out, "Top 2 sites by allocation calls");
    CHECK(bytes && calls, "%s", r.out);
    if (bytes && calls) {
        const char *first = strstr(bytes, "inner_helper (helpers.h:7)  < outer_fn (app.c:40)");
        const char *second = strstr(bytes, "parse_token (parse.c:60)");
        CHECK(first && second && first < second && second < calls,
              "by bytes: 1 MiB inlined site, then parse_token:\n%s", r.out);
        const char *c1 = strstr(calls, "parse_token");
        const char *c2 = strstr(calls, "inner_helper");
        CHECK(c1 && c2 && c1 < c2, "by calls: parse_token (5000) first:\n%s", r.out);
        CHECK(!strstr(calls, "map_arena"), "--top 2 caps the list:\n%s", r.out);
        CHECK(strstr(bytes, "1.00 MiB         100  malloc"), "%s", r.out);
    }
    harness_result_free(&r);
}

// The top lists pick their first --top sites out of many without sorting
// them all (cmd_report.c, first_k): on 400 sites in a scrambled order the
// first 5 by bytes, by calls and live at the peak are SQL's ORDER BY's.
static void test_top_lists_of_many_sites_are_the_first_in_order(void) {
    char *db = fixture_write_copy(harness_path("many_sites.db"), &(fixture_options){0});
    sqlite3 *h = NULL;
    bool ok = db && sqlite3_open(db, &h) == SQLITE_OK &&
              sqlite3_exec(h, "BEGIN", NULL, NULL, NULL) == SQLITE_OK;
    for (int i = 0; ok && i < 400; i++) {
        // Values scrambled by a multiplier mod a prime; every 50th site ties
        // on bytes (broken by calls), and peaks tie often.
        long long bytes = (long long)((i * 7919) % 401) * 1000;
        long long calls = (long long)((i * 104729) % 389) + 1;
        if (i % 50 == 0)
            bytes = 399000; // several sites with the same bytes
        char sql[512];
        snprintf(sql, sizeof sql,
                 "INSERT INTO stack_nodes VALUES (%d, 0, %d);"
                 "INSERT INTO sites VALUES (%d, 1, %lld, %lld, 0, 0, 0, 0, %lld, %lld);",
                 5000 + i, 0x7000 + i, 5000 + i, calls, bytes, calls % 7, (bytes * 3) % 5003);
        ok = sqlite3_exec(h, sql, NULL, NULL, NULL) == SQLITE_OK;
    }
    ok = ok && sqlite3_exec(h, "COMMIT", NULL, NULL, NULL) == SQLITE_OK;
    CHECK(ok, "extra sites: %s", h ? sqlite3_errmsg(h) : "no db");
    sqlite3_close(h);
    if (!ok) {
        free(db);
        return;
    }
    run_result r = harness_tpprof("report", db, "--format", "json", "--top", "5", NULL);
    run_result peak = harness_tpprof("report", db, "--format", "json", "--top", "5", "--peak", NULL);
    CHECK(r.status == 0 && peak.status == 0, "status %d %d: %s", r.status, peak.status, r.err);
    static const struct {
        const char *key, *field, *order;
    } lists[] = {
        {"\"top\": [", "\"alloc_bytes\": ", "alloc_bytes DESC, alloc_count DESC, stack_id"},
        {"\"top_by_calls\": [", "\"alloc_count\": ", "alloc_count DESC, alloc_bytes DESC, stack_id"},
        {"\"sites\": [", "\"peak_bytes\": ", "peak_bytes DESC, alloc_bytes DESC, alloc_count DESC, stack_id"},
    };
    for (size_t l = 0; l < sizeof lists / sizeof *lists && r.status == 0 && peak.status == 0; l++) {
        char sql[256];
        const char *col = strstr(lists[l].order, "peak") ? "peak_bytes" : strstr(lists[l].order, "alloc_count DESC, alloc_bytes") ? "alloc_count" : "alloc_bytes";
        snprintf(sql, sizeof sql, "SELECT group_concat(v, ' ') FROM (SELECT %s AS v FROM sites%s ORDER BY %s LIMIT 5)",
                 col, strcmp(col, "peak_bytes") == 0 ? " WHERE peak_bytes > 0 OR peak_count > 0" : "", lists[l].order);
        char *want = harness_db_rows(db, sql);
        char got[256] = "";
        const char *at = strstr(strcmp(col, "peak_bytes") == 0 ? peak.out : r.out, lists[l].key);
        for (int k = 0; at && k < 5; k++) {
            at = strstr(at, lists[l].field);
            if (!at)
                break;
            at += strlen(lists[l].field);
            size_t len = strlen(got);
            snprintf(got + len, sizeof got - len, "%s%lld", k ? " " : "", atoll(at));
        }
        strcat(got, "\n");
        CHECK(want && strcmp(want, got) == 0, "%s: want %s got %s", lists[l].key, want ? want : "?", got);
        free(want);
    }
    harness_result_free(&peak);
    harness_result_free(&r);
    free(db);
}

static void test_text_peak_lists_sites_live_at_the_peak(void) {
    run_result r = harness_tpprof("report", app_db, "--peak", NULL);
    CHECK(r.status == 0, "status %d", r.status);
    CHECK(strstr(r.out, "Peak: 22.5 KiB at 0.005 s"), "%s", r.out);
    const char *a = strstr(r.out, "10.0 KiB in      1 block   malloc");
    const char *b = strstr(r.out, "8.00 KiB in      1 block   mmap");
    CHECK(a && b && a < b, "largest live site first:\n%s", r.out);
    CHECK(!strstr(r.out, "parse_token"), "a site with nothing live at the peak is left out:\n%s",
          r.out);
    harness_result_free(&r);
}

static void test_text_temporary_counts_and_sites(void) {
    run_result r = harness_tpprof("report", app_db, "--temporary", NULL);
    CHECK(r.status == 0, "status %d", r.status);
    CHECK(strstr(r.out, "Temporary allocations: 4,000 of 5,112 calls (78.2%), 62.5 KiB"), "%s",
          r.out);
    CHECK(strstr(r.out, "62.5 KiB       4,000  malloc          parse_token (parse.c:60)"), "%s",
          r.out);
    harness_result_free(&r);
}

// meta.malloc_replaced_by (the program brought its own malloc): report,
// JSON and check all say its allocations are not in the recording.
static void test_own_malloc_is_warned_about(void) {
    const char *db = harness_path("ownmalloc.db");
    CHECK(fixture_write_edited(db, &(fixture_options){0},
                               "INSERT INTO meta VALUES ('malloc_replaced_by', '/opt/p/server')") == 0,
          "fixture");
    const char *want = "/opt/p/server defines its own malloc (a jemalloc or mimalloc linked in?): the allocations "
                       "made through it were not recorded";
    run_result r = harness_tpprof("report", db, NULL);
    CHECK(strstr(r.out, "  MISSING     ") && strstr(r.out, want), "%s", r.out);
    harness_result_free(&r);
    r = harness_tpprof("report", db, "--format", "json", NULL);
    CHECK(strstr(r.out, "\"malloc_replaced_by\": \"/opt/p/server\","), "%s", r.out);
    harness_result_free(&r);
    // check cannot vouch for it: one FAIL line in the same words, unless
    // --allow-incomplete makes that a warning.
    r = harness_tpprof("check", db, "--max-lost-bytes", "1M", NULL);
    CHECK(r.status == 1 && strstr(r.out, "FAIL recording cannot be vouched for: ") && strstr(r.out, want),
          "status %d: %s", r.status, r.out);
    CHECK(harness_count(r.out, "FAIL") == 1, "%s", r.out);
    harness_result_free(&r);
    r = harness_tpprof("check", db, "--max-lost-bytes", "1M", "--allow-incomplete", NULL);
    CHECK(r.status == 0 && strstr(r.err, "tpprof check: warning: cannot vouch for ") && strstr(r.err, want),
          "status %d: %s", r.status, r.err);
    CHECK(!strstr(r.out, "FAIL"), "%s", r.out);
    harness_result_free(&r);
    r = harness_tpprof("report", app_db, "--format", "json", NULL);
    CHECK(strstr(r.out, "\"malloc_replaced_by\": null,"), "an ordinary recording: %s", r.out);
    harness_result_free(&r);
}

// Anonymous PROT_NONE mappings (kind mmap_reserved) are address space: the
// totals, the leaks and the top sites leave them out, a line says how much.
static void test_reserved_address_space_is_not_memory(void) {
    const char *db = harness_path("reserved.db");
    CHECK(fixture_write_edited(db, &(fixture_options){0},
                               "INSERT INTO kinds VALUES (12, 'mmap_reserved');"
                               "INSERT INTO sites VALUES (2,12, 3,6442450944, 1,1073741824, 0,0, 2,5368709120);"
                               "INSERT INTO live_blocks VALUES (1099511627776, 4294967296, 12, 2, 1, 5, 1),"
                               "  (1103806595072, 1073741824, 12, 2, 1, 6, 2)") == 0,
          "fixture");
    run_result r = harness_tpprof("report", db, "--leaks", "--top", "5", NULL);
    CHECK(r.status == 0, "status %d: %s", r.status, r.err);
    CHECK(strstr(r.out, "5,112 allocations, 5,108 frees"), "the reservations are not allocations:\n%s", r.out);
    CHECK(strstr(r.out, "at exit     12.2 KiB in 4 blocks still allocated: lost 12.0 KiB in 2, reachable 200 B in 2"),
          "nor leaks:\n%s", r.out);
    CHECK(strstr(r.out, "  reserved    6.00 GiB in 3 PROT_NONE mappings (address space, not memory; not counted "
                        "above), 5.00 GiB of it still reserved at exit"),
          "%s", r.out);
    CHECK(!strstr(r.out, "mmap_reserved"), "no leak or site of theirs:\n%s", r.out);
    harness_result_free(&r);
    r = harness_tpprof("report", db, "--format", "json", NULL);
    CHECK(strstr(r.out, "\"reserved_total_bytes\": 6442450944,") && strstr(r.out, "\"reserved_count\": 3,") &&
              strstr(r.out, "\"reserved_bytes\": 5368709120,"),
          "%s", r.out);
    char want[64];
    snprintf(want, sizeof want, "\"total_bytes\": %llu,", (unsigned long long)FIX_TOTAL_BYTES);
    CHECK(strstr(r.out, want) && !strstr(r.out, "mmap_reserved"), "%s", r.out);
    harness_result_free(&r);
    r = harness_tpprof("check", db, "--max-leaked-bytes", "20000", NULL);
    CHECK(r.status == 0, "the gate holds: the reservations are not leaks (status %d): %s", r.status, r.err);
    harness_result_free(&r);
}

static void test_a_full_stack_table_is_warned_about(void) {
    const char *db = harness_path("stacksfull.db");
    CHECK(fixture_write_edited(db, &(fixture_options){0}, "INSERT INTO meta VALUES ('stacks_full', '725')") == 0,
          "fixture");
    run_result r = harness_tpprof("report", db, NULL);
    CHECK(strstr(r.out, "  MISSING     725 allocations have no stack (tpprof ran out of memory for the stack table)"), "%s", r.out);
    harness_result_free(&r);
    r = harness_tpprof("report", db, "--format", "json", NULL);
    CHECK(strstr(r.out, "\"stacks_full\": 725,"), "%s", r.out);
    harness_result_free(&r);
    r = harness_tpprof("report", app_db, NULL);
    CHECK(!strstr(r.out, "stack table"), "no warning where none was full:\n%s", r.out);
    harness_result_free(&r);
    r = harness_tpprof("check", db, "--max-lost-bytes", "1M", NULL);
    CHECK(r.status == 1 && strstr(r.out, "FAIL recording cannot be vouched for: 725 allocations have no stack"),
          "status %d: %s", r.status, r.out);
    harness_result_free(&r);
}

static void test_dropped_events_are_warned_about(void) {
    const char *db = harness_path("dropped.db");
    CHECK(fixture_write_edited(db, &(fixture_options){0},
                               "INSERT INTO meta VALUES ('dropped_events', '17');"
                               "INSERT INTO meta VALUES ('bypassing_modules', '[\"/opt/p/deep.so\",\"/opt/p/q\\\\\\\"x.so\"]')") == 0,
          "fixture");
    run_result r = harness_tpprof("report", db, "--leaks", NULL);
    CHECK(strstr(r.out, "  MISSING     17 events were dropped while recording"), "%s", r.out);
    CHECK(strstr(r.out, "  MISSING     /opt/p/deep.so called the C library's allocator directly") &&
              strstr(r.out, "  MISSING     /opt/p/q\\\"x.so called"),
          "%s", r.out);
    harness_result_free(&r);
    r = harness_tpprof("report", db, "--leaks", "--format", "json", NULL);
    CHECK(strstr(r.out, "\"dropped_events\": 17,\n"), "%s", r.out);
    CHECK(strstr(r.out, "\"bypassing_modules\": [\"/opt/p/deep.so\", \"/opt/p/q\\\\\\\"x.so\"]"), "%s", r.out);
    CHECK(strstr(r.out, "\"missing\": [\n      \"17 events were dropped while recording"), "%s", r.out);
    harness_result_free(&r);
    // One FAIL line with every reason, even when the leak gate holds.
    r = harness_tpprof("check", db, "--max-lost-bytes", "1M", NULL);
    CHECK(r.status == 1 && strstr(r.out, "FAIL recording cannot be vouched for: 17 events were dropped"), "%s", r.out);
    CHECK(strstr(r.out, "; /opt/p/deep.so called the C library's allocator directly"), "%s", r.out);
    CHECK(strstr(r.out, "PASS lost bytes"), "%s", r.out);
    CHECK(harness_lines(r.err) == 0, "nothing more on stderr: %s", r.err);
    harness_result_free(&r);
    r = harness_tpprof("report", app_db, "--leaks", NULL);
    CHECK(!strstr(r.out, "WARNING"), "no warning without dropped events: %s", r.out);
    harness_result_free(&r);
}

static void test_text_incomplete_run_is_flagged_and_blocks_unscanned(void) {
    fixture_options o = {.incomplete = true};
    const char *db = harness_path("incomplete.db");
    CHECK(fixture_write(db, &o) == 0, "fixture");
    run_result r = harness_tpprof("report", db, "--leaks", NULL);
    CHECK(r.status == 0, "status %d", r.status);
    CHECK(strstr(r.out, "INCOMPLETE"), "%s", r.out);
    CHECK(strstr(r.out, "not scanned 12.2 KiB in 4"), "%s", r.out);
    CHECK(strstr(r.out, "unscanned"), "%s", r.out);
    harness_result_free(&r);
}

// A recording cut short before its final flush (kill -9, the OOM killer)
// has sites but no live_blocks: the leaks are each site's allocated minus
// freed, unscanned, and the report says where they come from.
static void test_killed_run_leaks_come_from_the_sites_at_the_last_flush(void) {
    fixture_options o = {.incomplete = true};
    const char *db = harness_path("killed.db");
    CHECK(fixture_write_edited(db, &o,
                               "DELETE FROM live_blocks;"
                               "UPDATE sites SET alloc_count = free_count + 3, alloc_bytes = freed_bytes + 3000 "
                               "WHERE rowid = (SELECT min(rowid) FROM sites);"
                               "UPDATE sites SET alloc_count = free_count, alloc_bytes = freed_bytes "
                               "WHERE rowid > (SELECT min(rowid) FROM sites)") == 0,
          "fixture");
    run_result r = harness_tpprof("report", db, "--leaks", NULL);
    CHECK(r.status == 0, "status %d: %s", r.status, r.err);
    CHECK(strstr(r.out, "at exit     2.93 KiB in 3 blocks still allocated: lost 0 B in 0, reachable 0 B in 0, not scanned 2.93 KiB in 3"),
          "%s", r.out);
    CHECK(strstr(r.out, "  verdict     POSSIBLE LEAK: 2.93 KiB in 3 blocks still allocated at exit, not scanned"),
          "no scan ran: the verdict says so:\n%s", r.out);
    CHECK(strstr(r.out, "the recording has no live set"), "%s", r.out);
    CHECK(strstr(r.out, "2.93 KiB in      3 blocks  unscanned"), "%s", r.out);
    harness_result_free(&r);
    r = harness_tpprof("report", db, "--format", "json", NULL);
    CHECK(strstr(r.out, "\"live_from_sites\": true") && strstr(r.out, "\"unscanned_bytes\": 3000"), "%s", r.out);
    harness_result_free(&r);
    // A complete recording keeps its own live set and says nothing of sites.
    r = harness_tpprof("report", app_db, "--format", "json", NULL);
    CHECK(strstr(r.out, "\"live_from_sites\": false"), "%s", r.out);
    harness_result_free(&r);
}

// An incomplete recording whose process is still alive (same pid, started
// when the recording did) is said to be one still being written.
static void test_recording_of_a_running_process_says_so(void) {
    pid_t child = fork();
    if (child == 0) {
        execl("/bin/sleep", "sleep", "5", (char *)NULL);
        _exit(127);
    }
    CHECK(child > 0, "fork");
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    char sql[512];
    snprintf(sql, sizeof sql,
             "INSERT OR REPLACE INTO meta(key, value) VALUES ('pid', '%d');"
             "INSERT OR REPLACE INTO meta(key, value) VALUES ('start_unix_ns', '%lld')",
             (int)child, (long long)now.tv_sec * 1000000000LL + now.tv_nsec);
    fixture_options o = {.incomplete = true};
    const char *db = harness_path("running.db");
    CHECK(fixture_write_edited(db, &o, sql) == 0, "fixture");
    run_result r = harness_tpprof("report", db, NULL);
    CHECK(strstr(r.out, "INCOMPLETE (still running)") &&
              strstr(r.out, "  MISSING     incomplete: the program is still running"),
          "%s", r.out);
    harness_result_free(&r);
    r = harness_tpprof("report", db, "--format", "json", NULL);
    CHECK(strstr(r.out, "\"still_running\": true"), "%s", r.out);
    harness_result_free(&r);
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    r = harness_tpprof("report", db, NULL);
    CHECK(strstr(r.out, ", INCOMPLETE\n") && strstr(r.out, "  MISSING     incomplete: it ends before the program did") &&
              !strstr(r.out, "did not end normally"),
          "once it is gone: %s", r.out);
    harness_result_free(&r);
}

// ---------------------------------------------------------------------------
// JSON

static void test_json_is_valid_and_has_the_documented_summary(void) {
    run_result r = harness_tpprof("report", app_db, "--format", "json", NULL);
    CHECK(r.status == 0, "status %d: %s", r.status, r.err);
    CHECK(harness_json_valid(r.out), "invalid JSON:\n%s", r.out);
    char want[128];
    struct { const char *key; unsigned long long v; } fields[] = {
        {"allocations", FIX_ALLOCATIONS},       {"frees", FIX_FREES},
        {"total_bytes", FIX_TOTAL_BYTES},       {"peak_bytes", FIX_PEAK_BYTES},
        {"leaked_bytes", FIX_LEAKED_BYTES},     {"leaked_count", FIX_LEAKED_COUNT},
        {"lost_bytes", FIX_LOST_BYTES},         {"lost_count", FIX_LOST_COUNT},
        {"reachable_bytes", FIX_REACHABLE_BYTES}, {"reachable_count", FIX_REACHABLE_COUNT},
        {"temporary_count", FIX_TEMP_COUNT},
    };
    for (size_t i = 0; i < sizeof fields / sizeof *fields; i++) {
        snprintf(want, sizeof want, "\"%s\": %llu,", fields[i].key, fields[i].v);
        CHECK(strstr(r.out, want), "missing %s in:\n%s", want, r.out);
    }
    CHECK(strstr(r.out, "\"summary\": {"), "%s", r.out);
    CHECK(strstr(r.out, "\"format\": \"tpprof-report\""), "%s", r.out);
    harness_result_free(&r);
}

static void test_json_leaks_carry_kind_reachability_and_innermost_first_stack(void) {
    run_result r = harness_tpprof("report", app_db, "--leaks", "--format=json", NULL);
    CHECK(r.status == 0 && harness_json_valid(r.out), "status %d:\n%s", r.status, r.out);
    const char *first = strstr(r.out, "\"leaks\": [");
    CHECK(first, "%s", r.out);
    if (!first) {
        harness_result_free(&r);
        return;
    }
    const char *mmap = strstr(first, "\"bytes\": 8192,\n      \"count\": 1,\n      \"kind\": \"mmap\",\n"
                                     "      \"reachability\": \"lost\"");
    const char *once = strstr(first, "\"bytes\": 4096,\n      \"count\": 1,\n      \"kind\": \"malloc\",\n"
                                     "      \"reachability\": \"lost\"");
    const char *buf = strstr(first, "\"bytes\": 200,\n      \"count\": 2,\n      \"kind\": \"calloc\",\n"
                                    "      \"reachability\": \"reachable\"");
    CHECK(mmap && once && buf && mmap < once && once < buf, "leak order and fields:\n%s", r.out);
    const char *frame = strstr(first, "{\"function\": \"leak_once\", \"file\": \"/src/app/leak.c\", "
                                      "\"line\": 12, \"module\": \"/opt/fake/app\", \"ip\": \"0x401110\"}");
    const char *outer = frame ? strstr(frame, "{\"function\": \"main\"") : NULL;
    CHECK(frame && outer, "leak_once frame, then main:\n%s", r.out);
    CHECK(!strstr(r.out, "tpprof_malloc_hook"), "own frames dropped:\n%s", r.out);
    CHECK(!strstr(r.out, "\"top\""), "sections not asked for are left out");
    harness_result_free(&r);
}

static void test_json_expands_inlined_frames_innermost_first(void) {
    run_result r = harness_tpprof("report", app_db, "--top", "1", "--format", "json", NULL);
    CHECK(r.status == 0 && harness_json_valid(r.out), "status %d:\n%s", r.status, r.out);
    const char *top = strstr(r.out, "\"top\": [");
    const char *inner = top ? strstr(top, "\"function\": \"inner_helper\", \"file\": \"/src/app/helpers.h\", \"line\": 7") : NULL;
    const char *outer = inner ? strstr(inner, "\"function\": \"outer_fn\", \"file\": \"/src/app/app.c\", \"line\": 40") : NULL;
    const char *main_frame = outer ? strstr(outer, "\"function\": \"main\"") : NULL;
    CHECK(main_frame, "inner_helper, outer_fn, main in that order:\n%s", r.out);
    CHECK(strstr(r.out, "\"alloc_bytes\": 1048576,"), "%s", r.out);
    const char *by_calls = strstr(r.out, "\"top_by_calls\": [");
    CHECK(by_calls && strstr(by_calls, "\"alloc_count\": 5000,"), "%s", r.out);
    harness_result_free(&r);
}

static void test_json_peak_and_temporary_sections(void) {
    run_result r = harness_tpprof("report", app_db, "--peak", "--temporary", "--format", "json", NULL);
    CHECK(r.status == 0 && harness_json_valid(r.out), "status %d:\n%s", r.status, r.out);
    CHECK(strstr(r.out, "\"peak\": {\n    \"bytes\": 23028,\n    \"time_ns\": 5000000,"), "%s", r.out);
    const char *temp = strstr(r.out, "\"temporary\": [");
    CHECK(temp && strstr(temp, "\"temp_count\": 4000,") && strstr(temp, "parse_token"), "%s", r.out);
    harness_result_free(&r);
}

static void test_unsymbolized_frames_print_as_addresses_with_module(void) {
    fixture_options o = {.no_symbols = true};
    const char *db = harness_path("nosyms.db");
    CHECK(fixture_write(db, &o) == 0, "fixture");
    run_result r = harness_tpprof("report", db, "--leaks", NULL);
    CHECK(r.status == 0, "status %d: %s", r.status, r.err);
    CHECK(strstr(r.out, "0x401310 (app)"), "address + module for a missing file:\n%s", r.out);
    CHECK(strstr(r.err, "cannot read /opt/fake/app"), "one warning per unreadable module: %s", r.err);
    harness_result_free(&r);
}

static void test_json_escapes_quotes_backslashes_and_control_characters(void) {
    const char *db = harness_path("escapes.db");
    CHECK(fixture_write_edited(db, &(fixture_options){0},
                               "UPDATE symbols SET function = 'op\"<\\>' || char(10) || 'x', "
                               "file = '/src/tab' || char(9) || 'bell' || char(7) || '.c' "
                               "WHERE function = 'map_arena'") == 0,
          "fixture");
    run_result r = harness_tpprof("report", db, "--leaks", "--format", "json", NULL);
    CHECK(r.status == 0 && harness_json_valid(r.out), "status %d:\n%s", r.status, r.out);
    CHECK(strstr(r.out, "{\"function\": \"op\\\"<\\\\>\\nx\", \"file\": \"/src/tab\\tbell\\u0007.c\""),
          "%s", r.out);
    harness_result_free(&r);
}

static void test_timeline_keeps_the_spike_when_cut_down(void) {
    const char *db = harness_path("timeline.db");
    // 1000 samples of 1 MiB heap, one of 5 MiB at sample 517.
    CHECK(fixture_write_edited(db, &(fixture_options){0},
                               "DELETE FROM timeline;"
                               "WITH RECURSIVE k(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM k WHERE i < 999) "
                               "INSERT INTO timeline SELECT 10000000 * (i + 1), "
                               "  CASE WHEN i = 517 THEN 5242880 ELSE 1048576 END, 10, 4096, i, i, 8388608 FROM k") == 0,
          "fixture");
    run_result r = harness_tpprof("report", db, "--timeline", NULL);
    CHECK(r.status == 0, "status %d: %s", r.status, r.err);
    const char *t = strstr(r.out, "Timeline: heap + mmap over time (24 points;");
    CHECK(t, "%s", r.out);
    CHECK(t && strstr(t, "  5.180 s    5.00 MiB    4.00 KiB    8.00 MiB  ################################\n"),
          "the 5 MiB spike at 5.18 s survives with a full bar:\n%s", r.out);
    CHECK(t && harness_lines(t) == 1 + 1 + 24, "header + 24 points:\n%s", t ? t : "");
    CHECK(!strstr(r.out, "Leaks:"), "--timeline alone shows only the timeline");
    harness_result_free(&r);

    r = harness_tpprof("report", db, "--timeline", "--format", "json", NULL);
    CHECK(r.status == 0 && harness_json_valid(r.out), "status %d", r.status);
    CHECK(strstr(r.out, "{\"time_ns\": 5180000000, \"heap_bytes\": 5242880, \"heap_blocks\": 10, "
                        "\"mmap_bytes\": 4096, \"rss_bytes\": 8388608, \"alloc_calls\": 517, "
                        "\"free_calls\": 517}"),
          "%s", r.out);
    const char *tl = strstr(r.out, "\"timeline\": [");
    CHECK(tl && harness_lines(tl) == 1 + 200 + 2, "200 points in JSON");
    harness_result_free(&r);
}

static void test_diff_shows_what_grew_and_what_is_gone(void) {
    const char *grown = harness_path("grown.db");
    fixture_options o = {.extra_lost_bytes = 6144};
    CHECK(fixture_write(grown, &o) == 0, "fixture");
    run_result r = harness_tpprof("report", grown, "--leaks", "--diff", app_db, NULL);
    CHECK(r.status == 0, "status %d: %s", r.status, r.err);
    const char *d = strstr(r.out, "Changes against ");
    CHECK(d, "%s", r.out);
    if (d) {
        CHECK(strstr(d, "  allocations          5,112         5,113            +1\n"), "%s", d);
        CHECK(strstr(d, "  lost              12.0 KiB      18.0 KiB     +6.00 KiB\n"), "%s", d);
        CHECK(strstr(d, "  Leaked at exit by stack (1 changed)\n"
                        "     +6.00 KiB         0 B -> 6.00 KiB    grow_leak (grow.c:70)  < main (app.c:50)\n"),
              "%s", d);
    }
    harness_result_free(&r);

    // The other way round: the stack is gone, shown from the baseline.
    r = harness_tpprof("report", app_db, "--leaks", "--diff", grown, "--format", "json", NULL);
    CHECK(r.status == 0 && harness_json_valid(r.out), "status %d", r.status);
    const char *j = strstr(r.out, "\"diff\": {");
    CHECK(j && strstr(j, "\"lost_bytes\": {\"old\": 18432, \"new\": 12288, \"delta\": -6144}"), "%s",
          r.out);
    CHECK(j && strstr(j, "\"bytes_old\": 6144,\n        \"bytes_new\": 0,\n        \"delta\": -6144,"),
          "%s", r.out);
    CHECK(j && strstr(j, "\"in_new\": false,\n        \"stack\": [\n          {\"function\": \"grow_leak\""),
          "%s", r.out);
    harness_result_free(&r);

    harness_expect_usage_error("missing baseline",
                               harness_tpprof("report", app_db, "--diff", harness_path("missing.db"), NULL),
                               "--diff: cannot open");
}

static void test_folded_stacks_feed_flame_graphs(void) {
    run_result r = harness_tpprof("report", app_db, "--format", "folded", NULL);
    CHECK(r.status == 0, "status %d: %s", r.status, r.err);
    // Outermost first, inlined frames expanded, libtpprof.so frames dropped.
    CHECK(strcmp(r.out, "main;leak_once 4096\n"
                        "main;make_buffer 1000\n"
                        "main;map_arena 8192\n"
                        "main;outer_fn;inner_helper 1048576\n"
                        "main;parse_token 80000\n") == 0,
          "%s", r.out);
    harness_result_free(&r);
    r = harness_tpprof("report", app_db, "--format=folded", "--leaks", NULL);
    CHECK(strcmp(r.out, "main;map_arena 8192\nmain;leak_once 4096\nmain;make_buffer 200\n") == 0,
          "leaked bytes: %s", r.out);
    harness_result_free(&r);
    r = harness_tpprof("report", app_db, "--format=folded", "--peak", NULL);
    CHECK(strstr(r.out, "main;outer_fn;inner_helper 10240\n") && !strstr(r.out, "parse_token"),
          "bytes at the peak: %s", r.out);
    harness_result_free(&r);
    r = harness_tpprof("report", app_db, "--format=folded", "--temporary", NULL);
    CHECK(strcmp(r.out, "main;parse_token 4000\n") == 0, "temporary calls: %s", r.out);
    harness_result_free(&r);
}

// Every folded line parses as flamegraph.pl and speedscope read the format:
// the count after the last space (digits), frames split at ';', none
// empty; names with ';', a newline or spaces (C++ templates) keep that shape.
static void test_folded_lines_parse_as_flamegraph_pl_and_speedscope_read_them(void) {
    const char *db = harness_path("folded_names.db");
    CHECK(fixture_write_edited(db, &(fixture_options){0},
                               "UPDATE symbols SET function = 'ns::f<int, char>(a;b)' WHERE function = 'leak_once';"
                               "UPDATE symbols SET function = 'two' || char(10) || 'lines' WHERE function = 'parse_token'") == 0,
          "fixture");
    run_result r = harness_tpprof("report", db, "--format", "folded", NULL);
    CHECK(r.status == 0, "status %d: %s", r.status, r.err);
    size_t lines = 0;
    for (char *line = r.out, *end; *line; line = end + 1) {
        end = strchr(line, '\n');
        if (!end)
            break;
        lines++;
        char *space = NULL;
        for (char *c = line; c < end; c++)
            if (*c == ' ')
                space = c;
        CHECK(space && space + 1 < end && strspn(space + 1, "0123456789") == (size_t)(end - space - 1),
              "count after the last space: %.*s", (int)(end - line), line);
        for (char *c = line, *frame = line; space && c <= space; c++)
            if (c == space || *c == ';') {
                CHECK(c > frame, "no empty frame: %.*s", (int)(end - line), line);
                frame = c + 1;
            }
    }
    CHECK(lines == 5, "one line per site: %s", r.out);
    CHECK(strstr(r.out, "main;ns::f<int, char>(a_b) 4096\n"), "';' in a name becomes '_': %s", r.out);
    CHECK(strstr(r.out, "main;two_lines 80000\n"), "so does a newline: %s", r.out);
    harness_result_free(&r);
}

int main(int argc, char **argv) {
    harness_init(argc, argv);
    app_db = fixture_write_copy(harness_path("app.db"), &(fixture_options){0});
    if (!app_db)
        return 1;
    RUN_TEST(test_text_summary_states_totals_in_human_units);
    RUN_TEST(test_text_summary_leads_with_the_verdict_then_what_is_reachable);
    RUN_TEST(test_text_leaks_list_lost_first_then_by_bytes_with_frames);
    RUN_TEST(test_text_top_orders_by_bytes_and_by_calls);
    RUN_TEST(test_top_lists_of_many_sites_are_the_first_in_order);
    RUN_TEST(test_text_peak_lists_sites_live_at_the_peak);
    RUN_TEST(test_text_temporary_counts_and_sites);
    RUN_TEST(test_text_incomplete_run_is_flagged_and_blocks_unscanned);
    RUN_TEST(test_killed_run_leaks_come_from_the_sites_at_the_last_flush);
    RUN_TEST(test_own_malloc_is_warned_about);
    RUN_TEST(test_recording_of_a_running_process_says_so);
    RUN_TEST(test_dropped_events_are_warned_about);
    RUN_TEST(test_reserved_address_space_is_not_memory);
    RUN_TEST(test_a_full_stack_table_is_warned_about);
    RUN_TEST(test_json_is_valid_and_has_the_documented_summary);
    RUN_TEST(test_json_leaks_carry_kind_reachability_and_innermost_first_stack);
    RUN_TEST(test_json_expands_inlined_frames_innermost_first);
    RUN_TEST(test_json_peak_and_temporary_sections);
    RUN_TEST(test_unsymbolized_frames_print_as_addresses_with_module);
    RUN_TEST(test_json_escapes_quotes_backslashes_and_control_characters);
    RUN_TEST(test_timeline_keeps_the_spike_when_cut_down);
    RUN_TEST(test_diff_shows_what_grew_and_what_is_gone);
    RUN_TEST(test_folded_stacks_feed_flame_graphs);
    RUN_TEST(test_folded_lines_parse_as_flamegraph_pl_and_speedscope_read_them);
    free((void *)app_db);
    return harness_finish();
}
