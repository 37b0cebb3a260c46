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

static char *query(const char *db, const char *sql) {
    sqlite3 *h = NULL;
    char *out = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&out, &len);
    sqlite3_stmt *st = NULL;
    if (sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(h, sql, -1, &st, NULL) == SQLITE_OK)
        while (sqlite3_step(st) == SQLITE_ROW) {
            for (int c = 0; c < sqlite3_column_count(st); c++)
                fprintf(m, "%s%s", c ? "|" : "", sqlite3_column_text(st, c) ? (const char *)sqlite3_column_text(st, c) : "");
            fputc('\n', m);
        }
    sqlite3_finalize(st);
    sqlite3_close(h);
    fclose(m);
    return out;
}

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
    CHECK(harness_count(r.out, "map_arena (arena.c:30)") == 2, "each process's groups apart:\n%s", r.out);
    harness_result_free(&r);
    r = harness_tpprof("check", out, "--max-lost-bytes", "100k", NULL);
    CHECK(r.status == 1, "the gate sees every process's leaks: %d %s", r.status, r.out);
    harness_result_free(&r);
    // Which process leaks: one query.
    char *rows = query(out, "SELECT p.id, p.pid, SUM(l.size) FROM live_blocks l JOIN processes p ON p.id = l.process "
                            "WHERE l.reachability = 1 GROUP BY p.id ORDER BY 3 DESC");
    CHECK(rows && strcmp(rows, "2|4242|1060864\n1|4242|12288\n") == 0, "%s", rows ? rows : "");
    free(rows);
    rows = query(out, "SELECT id, path = '' FROM processes ORDER BY id");
    CHECK(rows && strcmp(rows, "1|0\n2|0\n") == 0, "a row per input with its path: %s", rows ? rows : "");
    free(rows);
}

// report takes several recordings, or a quoted glob, and reports them merged.
static void test_report_takes_several_recordings_or_a_glob(void) {
    run_result r = harness_tpprof("report", a_db, b_db, "--leaks", NULL);
    CHECK(r.status == 0, "status %d: %s", r.status, r.err);
    CHECK(strstr(r.out, "tpprof report: 2 recordings: ") && strstr(r.out, "verdict     LEAK: 1.02 MiB lost in 5 blocks"),
          "%s", r.out);
    harness_result_free(&r);
    char pattern[600];
    snprintf(pattern, sizeof pattern, "%s/?.db", harness_dir());
    r = harness_tpprof("report", pattern, "--format", "json", NULL);
    CHECK(r.status == 0 && harness_json_valid(r.out), "status %d: %s", r.status, r.err);
    CHECK(strstr(r.out, "\"lost_bytes\": 1073152,"), "a.db and b.db: %s", r.out);
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

static void test_merge_never_overwrites_and_refuses_bad_inputs(void) {
    harness_expect_usage_error("existing OUT", harness_tpprof("merge", a_db, b_db, NULL), "exists; merge writes a new file");
    harness_expect_usage_error("no input", harness_tpprof("merge", harness_path("x.db"), NULL), "at least one IN.db");
    harness_expect_usage_error("not a recording", harness_tpprof("merge", harness_path("y.db"), a_db, "/dev/null", NULL),
                               "is not a SQLite database");
    CHECK(access(harness_path("y.db"), F_OK) != 0, "nothing left behind");
    const char *job = harness_path("job2.db");
    run_result r = harness_tpprof("merge", job, a_db, b_db, NULL);
    CHECK(r.status == 0, "%s", r.err);
    harness_result_free(&r);
    harness_expect_usage_error("a merged input", harness_tpprof("merge", harness_path("z.db"), job, a_db, NULL),
                               "is a merged recording: merge the recordings it was made of");
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
    RUN_TEST(test_report_takes_several_recordings_or_a_glob);
    RUN_TEST(test_merge_never_overwrites_and_refuses_bad_inputs);
    free(a_db);
    free(b_db);
    return harness_finish();
}
