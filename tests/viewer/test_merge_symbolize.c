// test_merge_symbolize.c: recordings merged as they are, unsymbolized, are
// symbolized once in the merged recording (tpprof merge, and `tpprof run`
// folding a run's many recordings): the frames read as symbolizing each
// recording first would have named them, and a frame that several
// processes share is looked up once. Real recordings: fork_leak (a parent
// and its forked child) and leak_once, under the preload.
//
// Usage: test_merge_symbolize TPPROF LIBTPPROF FORK_LEAK LEAK_ONCE SCENARIO
#define _GNU_SOURCE
#include "harness.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char preload[4096], fork_leak[4096], leak_once[4096];

// Runs prog under the preload, recording into dir/name.db (a forked child
// into dir/name.<pid>.db); the recordings stay unsymbolized.
static void record(const char *prog, const char *db) {
    char env_preload[4200], env_out[4200];
    snprintf(env_preload, sizeof env_preload, "LD_PRELOAD=%s", preload);
    snprintf(env_out, sizeof env_out, "TPPROF_OUTPUT=%s", db);
    char *env[] = {env_preload, env_out, NULL};
    char *argv[] = {(char *)prog, NULL};
    run_result r = harness_run(argv, env, NULL);
    CHECK(r.status == 0, "%s: status %d: %s", prog, r.status, r.err);
    harness_result_free(&r);
}

// The recordings of dir (a glob's words, in order), into v; how many.
static size_t recordings(const char *dir, char v[][4200], size_t cap) {
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "ls %s/*.db", dir);
    FILE *f = popen(cmd, "r");
    size_t n = 0;
    while (f && n < cap && fgets(v[n], 4200, f)) {
        v[n][strcspn(v[n], "\n")] = 0;
        n++;
    }
    if (f)
        pclose(f);
    return n;
}

static void shell(const char *cmd) {
    char *argv[] = {(char *)"/bin/sh", (char *)"-c", (char *)cmd, NULL};
    run_result r = harness_run(argv, NULL, NULL);
    CHECK(r.status == 0, "%s: %s", cmd, r.err);
    harness_result_free(&r);
}

// `tpprof merge out inputs...`; the addresses it says it looked up (0 when
// it says none), -1 when it failed.
static long merge(const char *out, char v[][4200], size_t n) {
    char *argv[16] = {(char *)harness_tpprof_path(), (char *)"merge", (char *)out};
    for (size_t i = 0; i < n && i < 12; i++)
        argv[3 + i] = v[i];
    run_result r = harness_run(argv, NULL, NULL);
    CHECK(r.status == 0, "merge: %d %s", r.status, r.err);
    long lookups = r.status == 0 ? 0 : -1;
    const char *said = strstr(r.err, "recordings into");
    const char *paren = said ? strchr(said, '(') : NULL;
    if (paren)
        lookups = strtol(paren + 1, NULL, 10);
    harness_result_free(&r);
    return lookups;
}

static const char symbols_sql[] = "SELECT ip, idx, function, file, line, module FROM symbols ORDER BY ip, idx";

static void test_a_merge_of_unsymbolized_recordings_names_frames_as_symbolizing_each_would(void) {
    char raw[4200];
    snprintf(raw, sizeof raw, "%s", harness_path("raw"));
    char cmd[9000];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", raw);
    shell(cmd);
    char db[4300];
    snprintf(db, sizeof db, "%s/fork.db", raw);
    record(fork_leak, db);
    snprintf(db, sizeof db, "%s/once.db", raw);
    record(leak_once, db);
    const char *each = harness_path("each"), *asis = harness_path("asis");
    snprintf(cmd, sizeof cmd, "cp -r '%s' '%s' && cp -r '%s' '%s'", raw, each, raw, asis);
    shell(cmd);
    static char in_each[8][4200], in_asis[8][4200];
    size_t n = recordings(each, in_each, 8);
    CHECK(n == 3 && recordings(asis, in_asis, 8) == 3, "3 recordings (fork_leak's two, leak_once): %zu", n);
    for (size_t i = 0; i < n; i++)
        CHECK(harness_db_int(in_asis[i], "SELECT COUNT(*) FROM symbols") == 0, "%s starts unsymbolized", in_asis[i]);
    // Each symbolized first (report saves its symbols), then merged: the
    // way merges were made before.
    for (size_t i = 0; i < n; i++) {
        run_result r = harness_tpprof("report", in_each[i], NULL);
        CHECK(r.status == 0, "report %s: %s", in_each[i], r.err);
        harness_result_free(&r);
        CHECK(harness_db_int(in_each[i], "SELECT COUNT(*) FROM symbols") > 0, "%s symbolized", in_each[i]);
    }
    const char *out_each = harness_path("each.db"), *out_asis = harness_path("asis.db");
    CHECK(merge(out_each, in_each, n) == 0, "symbolized inputs: nothing left to look up");
    long lookups = merge(out_asis, in_asis, n);
    CHECK(lookups > 0, "the merged recording was symbolized: %ld", lookups);
    for (size_t i = 0; i < n; i++)
        CHECK(harness_db_int(in_asis[i], "SELECT COUNT(*) FROM symbols") == 0, "merge left %s as it was", in_asis[i]);
    char *a = harness_db_rows(out_each, symbols_sql), *b = harness_db_rows(out_asis, symbols_sql);
    CHECK(a && b && strcmp(a, b) == 0, "symbols differ:\nsymbolized each:\n%s\nmerged as they were:\n%s", a, b);
    CHECK(a && strstr(a, "|lose|") && strstr(a, "fork_leak.c|"), "real names: %s", a ? a : "");
    char *a0 = a;
    free(b);
    // Every frame of the merged trie is named.
    CHECK(harness_db_int(out_asis, "SELECT COUNT(*) FROM (SELECT DISTINCT ip FROM stack_nodes)"
                                   " WHERE ip NOT IN (SELECT ip FROM symbols)") == 0, "unnamed frames");
    // Mixed: a symbolized input's own symbols are kept, the others named.
    static char mixed[3][4200];
    memcpy(mixed[0], in_each[0], sizeof mixed[0]);
    memcpy(mixed[1], in_asis[1], sizeof mixed[1]);
    memcpy(mixed[2], in_asis[2], sizeof mixed[2]);
    const char *out_mixed = harness_path("mixed.db");
    CHECK(merge(out_mixed, mixed, 3) >= 0, "mixed merge");
    char *c = harness_db_rows(out_mixed, symbols_sql);
    CHECK(c && a0 && strcmp(a0, c) == 0, "symbols differ:\nsymbolized each:\n%s\nmixed:\n%s", a0, c);
    free(c);
    free(a0);
    // A symbolized input with more frames than a small set holds (a Python
    // start: some 900), with an unsymbolized copy of itself.
    if (access("/usr/bin/python3", X_OK) == 0) {
        const char *py = harness_path("py.db"), *py2 = harness_path("py2.db"), *pym = harness_path("pym.db");
        record("/usr/bin/python3", py); // (reads a script from stdin: none)
        snprintf(cmd, sizeof cmd, "cp '%s' '%s'", py, py2);
        shell(cmd);
        run_result r = harness_tpprof("report", py, NULL);
        harness_result_free(&r);
        static char pys[2][4200];
        snprintf(pys[0], sizeof pys[0], "%s", py);
        snprintf(pys[1], sizeof pys[1], "%s", py2);
        CHECK(harness_db_int(py, "SELECT COUNT(DISTINCT ip) FROM symbols") > 512, "a big enough recording");
        CHECK(merge(pym, pys, 2) >= 0, "python merge");
        CHECK(harness_db_int(pym, "SELECT COUNT(*) FROM (SELECT DISTINCT ip FROM stack_nodes)"
                                  " WHERE ip NOT IN (SELECT ip FROM symbols)") == 0, "unnamed frames");
    }
    run_result ra = harness_tpprof("report", out_each, "--leaks", NULL), rb = harness_tpprof("report", out_asis, "--leaks", NULL);
    const char *ta = strchr(ra.out, '\n'), *tb = strchr(rb.out, '\n'); // past the file's name
    CHECK(ta && tb && strcmp(ta, tb) == 0, "reports differ:\n%s\n%s", ra.out, rb.out);
    harness_result_free(&ra);
    harness_result_free(&rb);
}

// Distinct (module file, offset) of the merged recording's frames, and
// distinct frames: several processes' frames at one offset of one file are
// several tagged addresses (each under its own parent in the trie).
static const char frames_sql[] =
    " FROM (SELECT DISTINCT ip FROM stack_nodes) n JOIN modules m ON m.process = (n.ip >> 48)"
    " AND (n.ip & 281474976710655) - 1 >= m.lo AND (n.ip & 281474976710655) - 1 < m.hi";

static void test_a_folded_runs_frames_are_named_once_for_all_its_processes(void) {
    char dir[4200], cmd[13000], db[4300];
    snprintf(dir, sizeof dir, "%s", harness_path("tree"));
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", dir);
    shell(cmd);
    // A shell, two fork_leaks (each a parent and a child), a leak_once.
    snprintf(db, sizeof db, "%s/t.db", dir);
    char env_preload[4200], env_out[4400];
    snprintf(env_preload, sizeof env_preload, "LD_PRELOAD=%s", preload);
    snprintf(env_out, sizeof env_out, "TPPROF_OUTPUT=%s", db);
    char *env[] = {env_preload, env_out, NULL};
    snprintf(cmd, sizeof cmd, "'%s'; '%s'; '%s'", fork_leak, leak_once, fork_leak);
    char *sh[] = {(char *)"/bin/sh", (char *)"-c", cmd, NULL};
    run_result r = harness_run(sh, env, NULL);
    CHECK(r.status == 0, "status %d: %s", r.status, r.err);
    harness_result_free(&r);
    static char in[8][4200];
    size_t n = recordings(dir, in, 8);
    CHECK(n == 6, "6 processes: %zu", n);
    const char *out = harness_path("tree.db");
    long lookups = merge(out, in, n);
    char sql[600];
    snprintf(sql, sizeof sql, "SELECT COUNT(*) FROM (SELECT DISTINCT m.path, m.build_id, (n.ip & 281474976710655) - m.base%s)",
             frames_sql);
    long long offsets = harness_db_int(out, sql);
    snprintf(sql, sizeof sql, "SELECT COUNT(DISTINCT n.ip)%s", frames_sql);
    long long frames = harness_db_int(out, sql);
    CHECK(offsets > 0 && offsets < frames, "frames shared by processes at other places: %lld offsets, %lld frames",
          offsets, frames);
    CHECK(lookups == offsets, "each offset looked up once: %ld lookups, %lld offsets, %lld frames", lookups, offsets,
          frames);
    CHECK(harness_db_int(out, "SELECT COUNT(*) FROM (SELECT DISTINCT ip FROM stack_nodes)"
                              " WHERE ip NOT IN (SELECT ip FROM symbols)") == 0, "unnamed frames");

    // A run of 13 processes is folded (more than the summary lists) and
    // every frame of the one recording it leaves is named.
    char run_db[4300];
    snprintf(run_db, sizeof run_db, "%s/run.db", harness_path("run"));
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", harness_path("run"));
    shell(cmd);
    snprintf(cmd, sizeof cmd, "for i in 1 2 3 4 5 6; do '%s' >/dev/null; done", fork_leak);
    char *argv[] = {(char *)harness_tpprof_path(), (char *)"run", (char *)"-o", run_db, (char *)"/bin/sh", (char *)"-c",
                    cmd, NULL};
    r = harness_run(argv, NULL, NULL);
    CHECK(r.status == 0 && strstr(r.err, "recordings are folded into"), "status %d: %s", r.status, r.err);
    harness_result_free(&r);
    CHECK(harness_db_int(run_db, "SELECT COUNT(*) FROM processes") == 13, "13 processes folded");
    CHECK(harness_db_int(run_db, "SELECT COUNT(*) FROM (SELECT DISTINCT ip FROM stack_nodes)"
                              " WHERE ip NOT IN (SELECT ip FROM symbols)") == 0, "unnamed frames");
    r = harness_tpprof("report", run_db, "--leaks", NULL);
    CHECK(strstr(r.out, "lose (fork_leak.c:"), "%s", r.out);
    harness_result_free(&r);
}

int main(int argc, char **argv) {
    harness_init(argc, argv);
    if (argc < 6 || !realpath(argv[2], preload) || !realpath(argv[3], fork_leak) || !realpath(argv[4], leak_once)) {
        fprintf(stderr, "usage: %s TPPROF LIBTPPROF FORK_LEAK LEAK_ONCE SCENARIO\n", argv[0]);
        return 2;
    }
    if (strcmp(argv[5], "as_each") == 0)
        RUN_TEST(test_a_merge_of_unsymbolized_recordings_names_frames_as_symbolizing_each_would);
    else if (strcmp(argv[5], "once") == 0)
        RUN_TEST(test_a_folded_runs_frames_are_named_once_for_all_its_processes);
    else
        return 2;
    return harness_finish();
}
