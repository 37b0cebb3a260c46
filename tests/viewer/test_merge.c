// test_merge.c: `tpprof merge OUT.db IN.db...`: two recordings of one job
// in one database that report and check read as one program (the leaks of
// both, each with its own stacks and names), a processes table and a
// process column that answer "which process leaks" in one query; an
// existing OUT is never overwritten; a bad input is one line and exit 2.
#define _POSIX_C_SOURCE 200809L
#include "fixture.h"
#include "harness.h"

#include <dirent.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char *a_db, *b_db;

static void test_merged_recording_reads_as_one_program_with_its_processes(void) {
    const char *out = harness_path("job.db");
    run_result r = harness_tpprof("merge", out, a_db, b_db, NULL);
    CHECK(r.status == 0, "status %d: %s", r.status, r.err);
    CHECK(strstr(r.err, "tpprof merge: 2 recordings into"), "%s", r.err);
    harness_result_free(&r);
    // Both recordings' leaks: 12 KiB lost in each, and 1 MiB more in b.
    r = harness_tpprof("report", out, "--leaks", NULL);
    CHECK(r.status == 0, "status %d: %s", r.status, r.err);
    CHECK(strstr(r.out, "verdict     LEAK: 1.02 MiB lost in 5 blocks"), "%s", r.out);
    CHECK(strstr(r.out, "1.00 MiB in      1 block   lost       malloc\n      grow_leak (grow.c:70)"),
          "b's own stack, by name:\n%s", r.out);
    // The same stack in both processes is stored once: its leaks are one
    // group (each process's share is in live_blocks.process).
    CHECK(strstr(r.out, "16.0 KiB in      2 blocks  lost       mmap\n      map_arena (arena.c:30)"),
          "one group of both processes' blocks:\n%s", r.out);
    harness_result_free(&r);
    r = harness_tpprof("check", out, "--max-lost-bytes", "100k", NULL);
    CHECK(r.status == 1, "the gate sees every process's leaks: %d %s", r.status, r.out);
    harness_result_free(&r);
    // Which process leaks: one query.
    char *rows = harness_db_rows(out, "SELECT p.id, p.pid, SUM(l.size) FROM live_blocks l JOIN processes p ON p.id = l.process "
                            "WHERE l.reachability = 1 GROUP BY p.id ORDER BY 3 DESC");
    CHECK(rows && strcmp(rows, "2|4242|1060864\n1|4242|12288\n") == 0, "%s", rows ? rows : "");
    free(rows);
    rows = harness_db_rows(out, "SELECT id, path = '' FROM processes ORDER BY id");
    CHECK(rows && strcmp(rows, "1|0\n2|0\n") == 0, "a row per input with its path: %s", rows ? rows : "");
    free(rows);
}

// Move input db's /opt/fake/app (and its frames and symbols) by delta, as
// ASLR loads a program at another address in another process; without_id
// also forgets its build id.
static void load_app_elsewhere(const char *db, long long delta, bool without_id) {
    sqlite3 *h = NULL;
    char sql[600];
    snprintf(sql, sizeof sql,
             "UPDATE stack_nodes SET ip = ip + %lld WHERE ip >= 4194304 AND ip < 5242880;"
             "UPDATE symbols SET ip = ip + %lld WHERE ip >= 4194304 AND ip < 5242880;"
             "UPDATE modules SET base = base + %lld, lo = lo + %lld, hi = hi + %lld%s WHERE path = '/opt/fake/app';",
             delta, delta, delta, delta, delta, without_id ? ", build_id = NULL" : "");
    CHECK(sqlite3_open(db, &h) == SQLITE_OK && sqlite3_exec(h, sql, NULL, NULL, NULL) == SQLITE_OK, "moving %s", db);
    sqlite3_close(h);
}

// The report of a merged recording, less its first line (the path).
static char *merged_report(const char *out) {
    run_result r = harness_tpprof("report", out, "--leaks", NULL);
    CHECK(r.status == 0, "status %d: %s", r.status, r.err);
    char *nl = r.out ? strchr(r.out, '\n') : NULL;
    char *body = strdup(nl ? nl : "");
    harness_result_free(&r);
    return body;
}

// Two processes of one program, loaded at different addresses: each stack
// they share is one node chain in the merged recording (frames compared as
// module + offset), named by the symbols; each process keeps its own sites
// on it, and the report reads as when the program sat at one address. A
// module without a build id cannot be known to be the same file: its
// frames stay each process's own.
static void test_a_stack_shared_by_two_processes_is_stored_once(void) {
    const char *moved = harness_path("b-moved.db");
    CHECK(fixture_write(moved, &(fixture_options){.extra_lost_bytes = 1048576}) == 0, "fixture");
    load_app_elsewhere(moved, 0x10000000, false);
    const char *same = harness_path("same-address.db"), *apart = harness_path("apart.db");
    run_result r = harness_tpprof("merge", same, a_db, b_db, NULL);
    CHECK(r.status == 0, "%s", r.err);
    harness_result_free(&r);
    r = harness_tpprof("merge", apart, a_db, moved, NULL);
    CHECK(r.status == 0, "%s", r.err);
    harness_result_free(&r);
    // 8 nodes each; all but the innermost libtpprof.so frame (a module
    // without a build id) of b are a's.
    long long each = harness_db_int(a_db, "SELECT COUNT(*) FROM stack_nodes");
    CHECK(each == 8 && harness_db_int(moved, "SELECT COUNT(*) FROM stack_nodes") == 8, "fixture nodes %lld", each);
    CHECK(harness_db_int(apart, "SELECT COUNT(*) FROM stack_nodes") == 9, "%lld nodes",
          harness_db_int(apart, "SELECT COUNT(*) FROM stack_nodes"));
    CHECK(harness_db_int(apart, "SELECT COUNT(*) FROM stack_nodes WHERE ip NOT IN (SELECT ip FROM symbols)") == 0,
          "every merged frame has its symbols");
    // Each process's sites, on shared stacks: every site of b sits on a
    // stack a has a site of the same kind on, and the sums are the inputs'.
    CHECK(harness_db_int(apart, "SELECT COUNT(*) FROM sites") ==
              harness_db_int(a_db, "SELECT COUNT(*) FROM sites") + harness_db_int(moved, "SELECT COUNT(*) FROM sites"),
          "a site row per input's site");
    CHECK(harness_db_int(apart, "SELECT COUNT(*) FROM sites b WHERE b.process = 2 AND NOT EXISTS (SELECT 1 FROM sites a"
                                "  WHERE a.process = 1 AND a.stack_id = b.stack_id AND a.kind = b.kind)") == 2,
          "all of b's sites but the one on its own innermost frame and grow_leak's (a has none) share a's stacks");
    CHECK(harness_db_int(apart, "SELECT SUM(alloc_bytes) FROM sites") ==
              harness_db_int(a_db, "SELECT SUM(alloc_bytes) FROM sites") +
                  harness_db_int(moved, "SELECT SUM(alloc_bytes) FROM sites"),
          "bytes summed");
    char *want = merged_report(same), *got = merged_report(apart);
    CHECK(strcmp(want, got) == 0, "report at one address:\n%s\nat two:\n%s", want, got);
    free(want);
    free(got);
    // Without a build id the app's frames are each process's.
    const char *anon = harness_path("b-no-id.db"), *kept = harness_path("kept-apart.db");
    CHECK(fixture_write(anon, &(fixture_options){.extra_lost_bytes = 1048576}) == 0, "fixture");
    load_app_elsewhere(anon, 0x10000000, true);
    r = harness_tpprof("merge", kept, a_db, anon, NULL);
    CHECK(r.status == 0, "%s", r.err);
    harness_result_free(&r);
    CHECK(harness_db_int(kept, "SELECT COUNT(*) FROM stack_nodes") == 16, "%lld nodes",
          harness_db_int(kept, "SELECT COUNT(*) FROM stack_nodes"));
    r = harness_tpprof("report", kept, "--leaks", NULL);
    CHECK(harness_count(r.out, "map_arena (arena.c:30)") == 2, "each process's groups apart:\n%s", r.out);
    harness_result_free(&r);
}

// A recording of the fixture with one Python frame under main: code object
// code, instruction offset, line (docs/schema.md, py_frames), and a site on it.
static void with_python_frame(const char *db, long long code, long long offset, int line) {
    CHECK(fixture_write(db, &(fixture_options){0}) == 0, "fixture");
    long long ip = (1LL << 47) | (code << 24) | offset;
    sqlite3 *h = NULL;
    char sql[800];
    snprintf(sql, sizeof sql,
             "CREATE TABLE py_frames(id INTEGER PRIMARY KEY, function TEXT NOT NULL, file TEXT NOT NULL,"
             "  line INTEGER NOT NULL);"
             "INSERT INTO py_frames VALUES (%lld, 'hoard', 'leaky.py', %d);"
             "INSERT INTO symbols VALUES (%lld, 0, 'hoard', 'leaky.py', %d, NULL);"
             "INSERT INTO stack_nodes VALUES (9, 1, %lld);"
             "INSERT INTO sites VALUES (9, 1, 3, 300, 0, 0, 0, 0, 3, 300);",
             ip, line, ip, line, ip);
    CHECK(sqlite3_open(db, &h) == SQLITE_OK && sqlite3_exec(h, sql, NULL, NULL, NULL) == SQLITE_OK, "%s",
          sqlite3_errmsg(h));
    sqlite3_close(h);
}

// Python frames of two processes are the same frame when their function,
// file and line are (what every command prints of them), whatever numbers
// each interpreter gave its code objects; another line is another frame.
static void test_python_frames_of_the_same_line_are_stored_once(void) {
    const char *a = harness_path("py-a.db"), *b = harness_path("py-b.db"), *c = harness_path("py-c.db");
    with_python_frame(a, 3, 2, 12);
    with_python_frame(b, 7, 40, 12);
    with_python_frame(c, 7, 44, 13);
    const char *same = harness_path("py-same.db"), *other = harness_path("py-other.db");
    run_result r = harness_tpprof("merge", same, a, b, NULL);
    CHECK(r.status == 0, "%s", r.err);
    harness_result_free(&r);
    r = harness_tpprof("merge", other, a, c, NULL);
    CHECK(r.status == 0, "%s", r.err);
    harness_result_free(&r);
    // 9 nodes each; b's libtpprof.so frame is its own (no build id).
    CHECK(harness_db_int(same, "SELECT COUNT(*) FROM stack_nodes") == 10, "%lld nodes",
          harness_db_int(same, "SELECT COUNT(*) FROM stack_nodes"));
    CHECK(harness_db_int(other, "SELECT COUNT(*) FROM stack_nodes") == 11, "%lld nodes",
          harness_db_int(other, "SELECT COUNT(*) FROM stack_nodes"));
    CHECK(harness_db_int(same, "SELECT COUNT(DISTINCT stack_id) FROM sites WHERE alloc_bytes = 300") == 1 &&
              harness_db_int(same, "SELECT COUNT(*) FROM sites WHERE alloc_bytes = 300") == 2,
          "both processes' sites on the one frame");
    r = harness_tpprof("report", same, NULL);
    CHECK(r.status == 0 && strstr(r.out, "hoard (leaky.py:12)"), "named: %s", r.out);
    harness_result_free(&r);
}

// report takes several recordings, or a quoted glob, and reports them merged.
static void test_report_takes_several_recordings_or_a_glob(void) {
    run_result r = harness_tpprof("report", a_db, b_db, "--leaks", NULL);
    CHECK(r.status == 0, "status %d: %s", r.status, r.err);
    CHECK(strstr(r.out, "tpprof report: 2 recordings: ") && strstr(r.out, "verdict     LEAK: 1.02 MiB lost in 5 blocks"),
          "%s", r.out);
    // Under the total, each recording's own verdict.
    char want[1200];
    snprintf(want, sizeof want, "  recording   %s: LEAK: 12.0 KiB lost in 2 blocks\n  recording   %s: LEAK: 1.01 MiB lost in 3 blocks\n",
             a_db, b_db);
    CHECK(strstr(r.out, want), "want\n%s\nin\n%s", want, r.out);
    harness_result_free(&r);
    char pattern[600];
    snprintf(pattern, sizeof pattern, "%s/?.db", harness_dir());
    r = harness_tpprof("report", pattern, "--format", "json", NULL);
    CHECK(r.status == 0 && harness_json_valid(r.out), "status %d: %s", r.status, r.err);
    CHECK(strstr(r.out, "\"lost_bytes\": 1073152,"), "a.db and b.db: %s", r.out);
    CHECK(strstr(r.out, "\"verdict\": \"leak\", \"lost_bytes\": 1060864,"), "b.db's own verdict: %s", r.out);
    harness_result_free(&r);
    snprintf(pattern, sizeof pattern, "%s/none-*.db", harness_dir());
    harness_expect_usage_error("a glob matching nothing", harness_tpprof("report", pattern, NULL), "no recording matches");
    // The temporary merged copy is made in $TMPDIR and gone afterwards.
    char tmpdir[600], env[700];
    snprintf(tmpdir, sizeof tmpdir, "%s", harness_path("tmpdir"));
    CHECK(mkdir(tmpdir, 0755) == 0, "mkdir %s", tmpdir);
    snprintf(env, sizeof env, "TMPDIR=%s", tmpdir);
    char *argv[] = {(char *)harness_tpprof_path(), "report", a_db, b_db, NULL};
    char *extra[] = {env, NULL};
    r = harness_run(argv, extra, NULL);
    CHECK(r.status == 0, "%s", r.err);
    harness_result_free(&r);
    DIR *d = opendir(tmpdir);
    size_t entries = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        entries += e->d_name[0] != '.';
    if (d)
        closedir(d);
    CHECK(d && entries == 0, "%zu entries left in %s", entries, tmpdir);
}

// check takes several recordings, or a glob: a FAIL line per failing
// recording (its failed gates joined), then each gate over the sum.
static void test_check_gates_each_recording_and_their_total(void) {
    const char *clean = harness_path("clean.db");
    CHECK(fixture_write_edited(clean, &(fixture_options){0}, "DELETE FROM live_blocks") == 0, "fixture");
    run_result r = harness_tpprof("check", a_db, b_db, clean, "--max-lost-bytes", "100k", NULL);
    char want[2000];
    snprintf(want, sizeof want,
             "FAIL %s: lost bytes 1060864 > 102400: 1048576 B in grow_leak (grow.c:70)\n"
             "FAIL total lost bytes 1073152 > 102400 over 3 recordings (1 failing): 1060864 in %s\n",
             b_db, b_db);
    CHECK(r.status == 1 && strcmp(r.out, want) == 0, "status %d:\n%s\nwanted\n%s", r.status, r.out, want);
    harness_result_free(&r);
    // The JUnit file: a testcase per failing recording, named by it, and one per total.
    const char *junit = harness_path("several.xml");
    r = harness_tpprof("check", a_db, b_db, clean, "--max-lost-bytes", "100k", "--junit", junit, NULL);
    harness_result_free(&r);
    char *xml = harness_read_file(junit);
    snprintf(want, sizeof want, "<testcase classname=\"tpprof.check\" name=\"%s\">\n      <failure message=\"%s: lost bytes",
             b_db, b_db);
    CHECK(xml && strstr(xml, "<testsuites tests=\"2\" failures=\"2\">") && strstr(xml, want) &&
              strstr(xml, "name=\"max-lost-bytes\">\n      <failure message=\"total lost bytes 1073152 &gt; 102400"),
          "%s", xml ? xml : "(none)");
    free(xml);
    // Each passes 2M, but not their total 1.02 MiB under 1M.
    r = harness_tpprof("check", a_db, b_db, "--max-lost-bytes", "1M", "--max-leaked-bytes", "2M", NULL);
    CHECK(r.status == 1, "status %d: %s", r.status, r.out);
    CHECK(strstr(r.out, "FAIL total lost bytes 1073152 > 1048576 over 2 recordings (1 failing)") &&
              strstr(r.out, "PASS total leaked bytes "),
          "%s", r.out);
    harness_result_free(&r);
    char pattern[600];
    snprintf(pattern, sizeof pattern, "%s/?.db", harness_dir());
    r = harness_tpprof("check", pattern, "--max-lost-bytes", "2M", NULL);
    CHECK(r.status == 0 && strcmp(r.out, "PASS total lost bytes 1073152 <= 2097152 over 2 recordings (0 failing)\n") == 0,
          "a glob: status %d: %s", r.status, r.out);
    harness_result_free(&r);
    // Bad input among them: one line naming it, exit 2.
    harness_expect_usage_error("a missing file", harness_tpprof("check", a_db, harness_path("missing.db"), NULL),
                               "missing.db");
    harness_expect_usage_error("not a database", harness_tpprof("check", a_db, "/etc/hostname", NULL), "/etc/hostname");
    harness_expect_usage_error("a directory", harness_tpprof("check", a_db, harness_dir(), NULL), harness_dir());
    harness_expect_usage_error("a baseline for several", harness_tpprof("check", a_db, b_db, "--baseline", a_db, NULL),
                               "--baseline compares one recording");
    harness_expect_usage_error("a glob matching nothing",
                               harness_tpprof("check", harness_path("none-*.db"), NULL), "no recording matches");
    // report of several: the same bad inputs, the same one line.
    harness_expect_usage_error("report: a missing file", harness_tpprof("report", a_db, harness_path("missing.db"), NULL),
                               "missing.db");
    harness_expect_usage_error("report: not a database", harness_tpprof("report", a_db, "/etc/hostname", NULL),
                               "/etc/hostname");
    harness_expect_usage_error("report: a directory", harness_tpprof("report", a_db, harness_dir(), NULL), harness_dir());
}

static void test_merge_never_overwrites_and_refuses_bad_inputs(void) {
    harness_expect_usage_error("existing OUT", harness_tpprof("merge", a_db, b_db, NULL), "exists; merge writes a new file");
    harness_expect_usage_error("no input", harness_tpprof("merge", harness_path("x.db"), NULL), "at least one IN.db");
    harness_expect_usage_error("not a recording", harness_tpprof("merge", harness_path("y.db"), a_db, "/dev/null", NULL),
                               "is not a SQLite database");
    CHECK(access(harness_path("y.db"), F_OK) != 0, "nothing left behind");
    // A stack node that is its own ancestor (a damaged file): one line, no hang.
    const char *loop = harness_path("loop.db");
    CHECK(fixture_write(loop, &(fixture_options){0}) == 0, "fixture");
    sqlite3 *h = NULL;
    CHECK(sqlite3_open(loop, &h) == SQLITE_OK &&
              sqlite3_exec(h, "UPDATE stack_nodes SET parent = 2 WHERE id = 1", NULL, NULL, NULL) == SQLITE_OK,
          "damaging %s", loop);
    sqlite3_close(h);
    harness_expect_usage_error("a stack loop", harness_tpprof("merge", harness_path("w.db"), a_db, loop, NULL),
                               "is its own ancestor: a damaged recording");
    CHECK(access(harness_path("w.db"), F_OK) != 0, "nothing left behind");
    const char *job = harness_path("job2.db");
    run_result r = harness_tpprof("merge", job, a_db, b_db, NULL);
    CHECK(r.status == 0, "%s", r.err);
    harness_result_free(&r);
    harness_expect_usage_error("a merged input", harness_tpprof("merge", harness_path("z.db"), job, a_db, NULL),
                               "is a merged recording: merge the recordings it was made of");
}

// Sites that land on one (stack, kind) in the merged recording are one row,
// summed: those of two stacks of one process that fold into one (its app
// loaded twice, at two addresses: one file, one build id, so one frame), and
// those of no stack (0, or one no node has). The rest are copied row for row.
static void test_sites_that_land_on_one_stack_are_one_row(void) {
    const char *twice = harness_path("twice.db"), *plain = harness_path("no-stack.db");
    CHECK(fixture_write(twice, &(fixture_options){0}) == 0 && fixture_write(plain, &(fixture_options){0}) == 0,
          "fixture");
    // Sites of no stack, in both: stack 0, and 99 (no node).
    const char *no_stack = "INSERT INTO sites VALUES (0,1, 2,20, 0,0, 0,0, 2,20), (99,1, 3,30, 1,10, 0,0, 2,20),"
                           "  (99,2, 4,40, 0,0, 0,0, 4,40);";
    // The app again, 256 MiB above, and make_buffer's stack (node 4, under
    // main) through it: node 20, with a calloc site as node 4 has.
    char sql[1200];
    snprintf(sql, sizeof sql,
             "%sINSERT INTO modules SELECT 3, path, build_id, base + 268435456, lo + 268435456, hi + 268435456,"
             "  loaded_ns, unloaded_ns FROM modules WHERE id = 1;"
             "INSERT INTO stack_nodes SELECT 20, 1, ip + 268435456 FROM stack_nodes WHERE id = 4;"
             "INSERT INTO sites VALUES (20,2, 7,700, 7,700, 0,0, 3,300);",
             no_stack);
    const char *const setup[][2] = {{twice, sql}, {plain, no_stack}};
    for (int i = 0; i < 2; i++) {
        sqlite3 *h = NULL;
        CHECK(sqlite3_open(setup[i][0], &h) == SQLITE_OK && sqlite3_exec(h, setup[i][1], NULL, NULL, NULL) == SQLITE_OK,
              "%s: %s", setup[i][0], sqlite3_errmsg(h));
        sqlite3_close(h);
    }
    const char *out = harness_path("twice-merged.db");
    run_result r = harness_tpprof("merge", out, plain, twice, NULL);
    CHECK(r.status == 0, "%s", r.err);
    harness_result_free(&r);
    // 8 nodes, and the second input's libtpprof.so frame (no build id): node 20 is node 4.
    CHECK(harness_db_int(out, "SELECT COUNT(*) FROM stack_nodes") == 9, "%lld nodes",
          harness_db_int(out, "SELECT COUNT(*) FROM stack_nodes"));
    // make_buffer's calloc site in the second process: node 4's and node 20's, summed.
    char *rows = harness_db_rows(out, "SELECT process, alloc_count, alloc_bytes, free_count, peak_bytes FROM sites"
                                      " WHERE kind = 2 AND stack_id <> 0 ORDER BY process");
    CHECK(rows && strcmp(rows, "1|10|1000|8|500\n2|17|1700|15|800\n") == 0, "%s", rows ? rows : "");
    free(rows);
    // No stack: one row a kind in each process, whichever way its sites came.
    rows = harness_db_rows(out, "SELECT process, kind, alloc_count, freed_bytes, peak_count FROM sites WHERE stack_id = 0"
                                " ORDER BY process, kind");
    CHECK(rows && strcmp(rows, "1|1|5|10|4\n1|2|4|0|4\n2|1|5|10|4\n2|2|4|0|4\n") == 0, "%s", rows ? rows : "");
    free(rows);
    CHECK(harness_db_int(out, "SELECT COUNT(*) FROM sites") == 2 * 5 + 2 * 2, "%lld site rows",
          harness_db_int(out, "SELECT COUNT(*) FROM sites"));
    CHECK(harness_db_int(out, "SELECT SUM(alloc_bytes) FROM sites") ==
              harness_db_int(plain, "SELECT SUM(alloc_bytes) FROM sites") +
                  harness_db_int(twice, "SELECT SUM(alloc_bytes) FROM sites"),
          "bytes summed");
}

int main(int argc, char **argv) {
    harness_init(argc, argv);
    const char *p = harness_path("a.db");
    if (fixture_write(p, &(fixture_options){0}) == 0)
        a_db = strdup(p);
    p = harness_path("b.db");
    if (fixture_write(p, &(fixture_options){.extra_lost_bytes = 1048576}) == 0)
        b_db = strdup(p);
    if (!a_db || !b_db)
        return 1;
    RUN_TEST(test_merged_recording_reads_as_one_program_with_its_processes);
    RUN_TEST(test_a_stack_shared_by_two_processes_is_stored_once);
    RUN_TEST(test_python_frames_of_the_same_line_are_stored_once);
    RUN_TEST(test_sites_that_land_on_one_stack_are_one_row);
    RUN_TEST(test_report_takes_several_recordings_or_a_glob);
    RUN_TEST(test_check_gates_each_recording_and_their_total);
    RUN_TEST(test_merge_never_overwrites_and_refuses_bad_inputs);
    free(a_db);
    free(b_db);
    return harness_finish();
}
