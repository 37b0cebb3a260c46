// test_run.c: `tpprof run` end to end (suite 'preload'): real programs of
// progs/ run under libtpprof.so; the report must name the right function,
// file and line with exact byte counts, and tpprof's exit status must be the
// program's.
//
// usage: test_run TPPROF LEAK_ONCE FORK_LEAK [CPP_LEAK]
#define _GNU_SOURCE
#include "fixture.h"
#include "harness.h"

#include <fcntl.h>
#include <glob.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static char leak_once[4096], fork_leak[4096], cpp_leak[4096], other_malloc[4096], rust_names[4096], odd_names[4096];

// "lost leak_once.c:27" in the program's output -> 27 (0 if absent).
static int printed_line(const char *out, const char *what) {
    char key[64];
    snprintf(key, sizeof key, "%s leak_once.c:", what);
    const char *p = strstr(out, key);
    return p ? atoi(p + strlen(key)) : 0;
}

static run_result run_under_tpprof(const char *db, const char *arg) {
    char *argv[] = {(char *)"tpprof", (char *)"run", (char *)"-o", (char *)db, (char *)"--",
                    leak_once, (char *)arg, NULL};
    argv[0] = (char *)harness_tpprof_path();
    if (!arg)
        argv[6] = NULL;
    return harness_run(argv, NULL, NULL);
}

// n with thousands separators, as the summary prints counts.
static const char *fmt_count(long long n, char buf[32]) {
    char digits[32];
    int len = snprintf(digits, sizeof digits, "%lld", n), o = 0;
    for (int i = 0; i < len; i++) {
        if (i && (len - i) % 3 == 0)
            buf[o++] = ',';
        buf[o++] = digits[i];
    }
    buf[o] = 0;
    return buf;
}

// `run` takes a complete recording's totals from its meta.site_totals
// instead of loading its sites (profile.c, load_site_totals): its totals,
// the reserved address space taken out of them, are still the report's.
static void test_summary_totals_are_the_reports(void) {
    const char *prog = getenv("TPPROF_TEST_RESERVED_PROG");
    if (!prog || !*prog) {
        printf("  skip: no reserved program\n");
        return;
    }
    const char *db = harness_path("totals.db");
    char *argv[] = {(char *)harness_tpprof_path(), (char *)"run", (char *)"-o", (char *)db, (char *)"--", (char *)prog, NULL};
    run_result r = harness_run(argv, NULL, NULL);
    CHECK(r.status == 0, "status %d: %s", r.status, r.err);
    const char *a = strstr(r.err, "tpprof: ");
    a = a ? strstr(a, " allocations (") : NULL;
    while (a && a > r.err && a[-1] != ' ')
        a--;
    const char *res = strstr(r.err, "tpprof: reserved ");
    CHECK(a && res, "a totals line and a reserved line:\n%s", r.err);
    run_result j = harness_tpprof("report", db, "--format", "json", NULL);
    CHECK(j.status == 0, "report: %s", j.err);
    if (a && res && j.status == 0) {
        long long allocs = 0, frees = 0, reserved = 0;
        const char *k;
        CHECK((k = strstr(j.out, "\"allocations\": ")) && sscanf(k, "\"allocations\": %lld", &allocs) == 1, "%s", j.out);
        CHECK((k = strstr(j.out, "\"frees\": ")) && sscanf(k, "\"frees\": %lld", &frees) == 1, "%s", j.out);
        CHECK((k = strstr(j.out, "\"reserved_count\": ")) && sscanf(k, "\"reserved_count\": %lld", &reserved) == 1, "%s", j.out);
        CHECK(reserved > 0 && allocs > 0, "reserved %lld, allocations %lld", reserved, allocs);
        char want[64], n1[32], n2[32];
        snprintf(want, sizeof want, "%s allocations (", fmt_count(allocs, n1));
        CHECK(strncmp(a, want, strlen(want)) == 0, "run says '%.60s', the report %lld allocations", a, allocs);
        snprintf(want, sizeof want, " %s frees,", fmt_count(frees, n2));
        CHECK(strstr(a, want) && strstr(a, want) < strchr(a, '\n'), "run says '%.80s', the report %lld frees", a, frees);
    }
    harness_result_free(&j);
    harness_result_free(&r);
}

static void test_exit_status_is_the_programs(void) {
    const char *db = harness_path("status.db");
    run_result r = run_under_tpprof(db, "3");
    CHECK(r.status == 3, "status %d, stderr:\n%s", r.status, r.err);
    CHECK(strstr(r.err, "exited with status 3"), "%s", r.err);
    harness_result_free(&r);
}

// A program that SIGTERM ends (it left the signal at its default) still
// dies of it, and its recording was written on the way, scanned.
static void test_killed_program_gives_128_plus_signal(void) {
    const char *db = harness_path("killed.db");
    run_result r = run_under_tpprof(db, "kill");
    CHECK(r.status == 128 + 15, "status %d, stderr:\n%s", r.status, r.err);
    CHECK(strstr(r.err, "was killed by signal 15"), "%s", r.err);
    CHECK(!strstr(r.err, "the recording is incomplete") && strstr(r.err, "tpprof: LEAK: 12.0 KiB lost"),
          "written with the scanned live set:\n%s", r.err);
    harness_result_free(&r);
    r = harness_tpprof("report", db, NULL);
    CHECK(strstr(r.out, ", complete, died of signal 15 (Terminated)\n"), "%s", r.out);
    harness_result_free(&r);
}

static void test_interrupt_stops_the_program_and_tpprof_still_reports(void) {
    const char *db = harness_path("interrupted.db");
    run_result r = run_under_tpprof(db, "interrupt");
    CHECK(r.status == 128 + 2, "status %d, stderr:\n%s", r.status, r.err);
    CHECK(strstr(r.err, "was killed by signal 2"), "%s", r.err);
    char want[512];
    snprintf(want, sizeof want, "recording: %s", db);
    CHECK(strstr(r.err, want), "tpprof survived the ^C and summarized:\n%s", r.err);
    harness_result_free(&r);
}

// LD_PRELOAD=liballoc.so tpprof run ...: tpprof's preload goes first, its
// hooks call glibc's allocator, and the report says the preloaded one was
// passed over (meta.malloc_skipped), with every allocation still recorded.
static void test_an_allocator_preloaded_after_tpprof_is_named(void) {
    const char *db = harness_path("skipped.db");
    char env[4096 + 16];
    snprintf(env, sizeof env, "LD_PRELOAD=%s", other_malloc);
    char *extra[] = {env, NULL};
    char *argv[] = {(char *)harness_tpprof_path(), (char *)"run", (char *)"-o", (char *)db, leak_once, NULL};
    run_result r = harness_run(argv, extra, NULL);
    CHECK(r.status == 0, "status %d: %s", r.status, r.err);
    CHECK(strstr(r.err, "libother_malloc.so was preloaded after tpprof: the program ran on glibc's malloc"), "%s", r.err);
    CHECK(strstr(r.err, "1,004 allocations"), "the allocations are recorded:\n%s", r.err);
    harness_result_free(&r);
    r = harness_tpprof("report", db, "--format", "json", NULL);
    CHECK(strstr(r.out, "\"malloc_skipped\": \"") && strstr(r.out, "other_malloc.so\""), "%s", r.out);
    harness_result_free(&r);
}

static void test_a_signal_handlers_frame_names_the_signal(void) {
    const char *db = harness_path("handler.db");
    run_result r = run_under_tpprof(db, "handler");
    CHECK(r.status == 0, "status %d, stderr:\n%s", r.status, r.err);
    harness_result_free(&r);
    r = harness_tpprof("report", db, "--leaks", NULL);
    CHECK(r.status == 0, "report status %d: %s", r.status, r.err);
    const char *at = strstr(r.out, "      handler_leak (leak_once.c:");
    const char *mark = at ? strstr(at, "\n      on_usr1 (leak_once.c:") : NULL;
    const char *sig = mark ? strstr(mark, "\n      <signal handler called> (libc.so") : NULL;
    CHECK(sig && strstr(sig, "\n      main (leak_once.c:"), "the handler, the signal, then main:\n%s", r.out);
    harness_result_free(&r);
}

static void test_report_names_function_file_line_and_exact_bytes(void) {
    const char *db = harness_path("leak.db");
    run_result r = run_under_tpprof(db, NULL);
    CHECK(r.status == 0, "status %d, stderr:\n%s", r.status, r.err);
    int lost_line = printed_line(r.out, "lost");
    int kept_line = printed_line(r.out, "reachable");
    int mapped_line = printed_line(r.out, "mapped");
    CHECK(lost_line > 0 && kept_line > 0 && mapped_line > 0, "program output: %s", r.out);
    char want[256];
    snprintf(want, sizeof want, "recording: %s", db);
    CHECK(strstr(r.err, want), "summary names the database: %s", r.err);
    CHECK(strstr(r.err, "allocations") && strstr(r.err, "peak") && strstr(r.err, "lost"),
          "summary: %s", r.err);
    harness_result_free(&r);

    r = harness_tpprof("report", db, "--leaks", "--format", "json", NULL);
    CHECK(r.status == 0 && harness_json_valid(r.out), "status %d: %s", r.status, r.err);
    const char *lost = strstr(r.out, "\"bytes\": 4096,\n      \"count\": 1,\n      \"kind\": \"malloc\",\n"
                                     "      \"reachability\": \"lost\",\n      \"stack\": [\n"
                                     "        {\"function\": \"leak_once\", \"file\": \"");
    CHECK(lost, "a lost 4096 B malloc block whose innermost frame is leak_once:\n%s", r.out);
    if (lost) {
        snprintf(want, sizeof want, "leak_once.c\", \"line\": %d,", lost_line);
        const char *eol = strchr(lost + 160, '\n');
        const char *at = strstr(lost, want);
        CHECK(at && (!eol || at < eol), "at leak_once.c:%d:\n%.400s", lost_line, lost);
    }
    const char *kept = strstr(r.out, "\"bytes\": 100,\n      \"count\": 1,\n      \"kind\": \"calloc\",\n"
                                     "      \"reachability\": \"reachable\",\n      \"stack\": [\n"
                                     "        {\"function\": \"keep_some\"");
    CHECK(kept, "a reachable 100 B calloc block from keep_some:\n%s", r.out);
    const char *mapped = strstr(r.out, "\"bytes\": 8192,\n      \"count\": 1,\n      \"kind\": \"mmap\",\n");
    CHECK(mapped && strstr(mapped, "{\"function\": \"map_some\""), "the 8192 B mapping:\n%s", r.out);
    harness_result_free(&r);

    // The program printed to a pipe: stdout's buffer, still open at exit, is
    // the C library's, counted apart and in no leak figure.
    r = harness_tpprof("report", db, "--leaks", "--format", "json", NULL);
    CHECK(r.status == 0 && harness_json_valid(r.out), "status %d: %s", r.status, r.err);
    CHECK(strstr(r.out, "\"libc_bytes\": 4096,\n    \"libc_count\": 1,\n"), "stdout's buffer apart:\n%s", r.out);
    CHECK(!strstr(r.out, "_IO_file_doallocate"), "and not among the leaks:\n%s", r.out);
    harness_result_free(&r);
    r = harness_tpprof("report", db, NULL);
    CHECK(r.status == 0 && strstr(r.out, "\n  libc        4.00 KiB in 1 blocks the C library keeps to the end"),
          "the summary says so:\n%s", r.out);
    harness_result_free(&r);

    r = harness_tpprof("check", db, "--max-lost-bytes", "0", NULL);
    CHECK(r.status == 1, "status %d", r.status);
    // Lost: the 4096 B block and the 8192 B mapping; the mapping is the worst.
    snprintf(want, sizeof want, "FAIL lost bytes 12288 > 0: 8192 B in map_some (leak_once.c:%d)\n",
             mapped_line);
    CHECK(strcmp(r.out, want) == 0, "want %s got %s", want, r.out);
    harness_result_free(&r);

    r = harness_tpprof("report", db, "--temporary", NULL);
    CHECK(r.status == 0, "status %d", r.status);
    CHECK(strstr(r.out, "churn (leak_once.c:"), "temporary allocations from churn:\n%s", r.out);
    harness_result_free(&r);
}

static void test_default_output_name_is_program_and_pid_in_cwd(void) {
    char *argv[] = {(char *)harness_tpprof_path(), (char *)"run", leak_once, NULL};
    run_result r = harness_run(argv, NULL, harness_dir());
    CHECK(r.status == 0, "status %d: %s", r.status, r.err);
    glob_t g;
    char pattern[512];
    snprintf(pattern, sizeof pattern, "%s/tpprof.leak_once.[0-9]*.db", harness_dir());
    CHECK(glob(pattern, 0, NULL, &g) == 0 && g.gl_pathc == 1, "one tpprof.leak_once.<pid>.db");
    if (g.gl_pathc == 1)
        CHECK(strstr(r.err, g.gl_pathv[0]), "summary names %s: %s", g.gl_pathv[0], r.err);
    globfree(&g);
    harness_result_free(&r);
}

static void test_percent_p_in_output_becomes_the_pid(void) {
    run_result r = run_under_tpprof(harness_path("pid-%p.db"), "0");
    CHECK(r.status == 0, "status %d: %s", r.status, r.err);
    glob_t g;
    char pattern[512];
    snprintf(pattern, sizeof pattern, "%s/pid-[0-9]*.db", harness_dir());
    CHECK(glob(pattern, 0, NULL, &g) == 0 && g.gl_pathc == 1, "pid-<pid>.db written");
    globfree(&g);
    harness_result_free(&r);
}

static void test_forked_child_recording_is_mentioned(void) {
    const char *db = harness_path("fork.db");
    char *argv[] = {(char *)harness_tpprof_path(), (char *)"run", (char *)"-o", (char *)db,
                    fork_leak, NULL};
    run_result r = harness_run(argv, NULL, NULL);
    CHECK(r.status == 0, "status %d: %s", r.status, r.err);
    const char *c = strstr(r.out, "child ");
    int child = c ? atoi(c + 6) : 0;
    char want[512];
    snprintf(want, sizeof want, "also recorded: %s/fork.%d.db (pid %d: ", harness_dir(), child, child);
    CHECK(child > 0 && strstr(r.err, want), "want '%s' in:\n%s", want, r.err);
    harness_result_free(&r);
    snprintf(want, sizeof want, "%s/fork.%d.db", harness_dir(), child);
    r = harness_tpprof("check", want, NULL);
    CHECK(r.status == 1 && strstr(r.out, ": 2000 B in lose (fork_leak.c:"), "child's leak: %s%s",
          r.out, r.err);
    harness_result_free(&r);
}

static void test_summary_is_of_the_program_the_process_exec_d_into(void) {
    // dash execs leak_once: the recording worth reading is the second image's.
    const char *db = harness_path("chain.db");
    char script[4200];
    snprintf(script, sizeof script, "exec '%s'", leak_once);
    char *argv[] = {(char *)harness_tpprof_path(), (char *)"run", (char *)"-o", (char *)db, (char *)"/bin/sh",
                    (char *)"-c", script, NULL};
    run_result r = harness_run(argv, NULL, NULL);
    CHECK(r.status == 0, "status %d: %s", r.status, r.err);
    char want[4200];
    snprintf(want, sizeof want, "after 1 exec it ran %s;", leak_once);
    CHECK(strstr(r.err, want), "want '%s' in:\n%s", want, r.err);
    snprintf(want, sizeof want, "recording: %s/chain.exec1.db ", harness_dir());
    CHECK(strstr(r.err, want), "want '%s' in:\n%s", want, r.err);
    // leak_once's biggest lost block is the 8 KiB it maps and never unmaps.
    int mapped_line = printed_line(r.out, "mapped");
    snprintf(want, sizeof want, "biggest leak: 8.00 KiB in map_some (leak_once.c:%d)", mapped_line);
    CHECK(mapped_line > 0 && strstr(r.err, want), "want '%s' in:\n%s", want, r.err);
    snprintf(want, sizeof want, "also recorded: %s (pid ", db);
    CHECK(strstr(r.err, want), "the shell's own recording is listed after: want '%s' in:\n%s", want, r.err);
    harness_result_free(&r);
}

static int count_of(const char *hay, const char *needle) {
    int n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

static void test_many_recordings_are_listed_most_lost_first_then_counted(void) {
    // 12 runs of fork_leak, each with a forked child: 24 recordings besides
    // the shell's. A parent loses 1000 B, its child 2000 B of its own (the
    // block it inherited is the parent's).
    const char *db = harness_path("many.db");
    char script[4200];
    snprintf(script, sizeof script, "for i in 1 2 3 4 5 6 7 8 9 10 11 12; do '%s' >/dev/null; done", fork_leak);
    char *argv[] = {(char *)harness_tpprof_path(), (char *)"run", (char *)"-o", (char *)db, (char *)"/bin/sh",
                    (char *)"-c", script, NULL};
    run_result r = harness_run(argv, NULL, NULL);
    CHECK(r.status == 0, "status %d: %s", r.status, r.err);
    CHECK(count_of(r.err, "also recorded: ") == 8, "8 listed:\n%s", r.err);
    CHECK(count_of(r.err, "lost 1.95 KiB)") == 8, "the 8 listed are children (lost 2000 B):\n%s", r.err);
    char want[4200];
    snprintf(want, sizeof want, "16 more recordings of this run are not listed (24 in all, 35.2 KiB lost among them): %s/many.*.db",
             harness_dir());
    CHECK(strstr(r.err, want), "want '%s' in:\n%s", want, r.err);
    harness_result_free(&r);
}

// Debian's ldconfig is statically linked (static-pie): LD_PRELOAD cannot
// reach it, and run says so before starting it (test_run_faults.c builds a
// static program of its own).
static void test_static_program_is_refused_and_no_recording_is_said(void) {
    struct stat sb;
    if (stat("/sbin/ldconfig", &sb) == 0) {
        run_result r = harness_tpprof("run", "-o", harness_path("static.db"), "/sbin/ldconfig", "--version", NULL);
        CHECK(r.status == 2 && harness_lines(r.err) == 1 && r.out[0] == 0, "status %d: %s%s", r.status, r.out, r.err);
        CHECK(strstr(r.err, "tpprof run: /sbin/ldconfig is statically linked"), "%s", r.err);
        harness_result_free(&r);
    }
    // A program that writes no recording (a script whose interpreter is the
    // static program): an old recording under that name is not passed off
    // as this run's.
    const char *old = harness_path("old.db");
    fixture_options o = {0};
    CHECK(fixture_write(old, &o) == 0, "fixture");
    struct timespec hour_ago[2];
    clock_gettime(CLOCK_REALTIME, &hour_ago[0]);
    hour_ago[0].tv_sec -= 3600;
    hour_ago[1] = hour_ago[0];
    CHECK(utimensat(AT_FDCWD, old, hour_ago, 0) == 0, "utimensat");
    const char *script = harness_path("static.sh");
    FILE *f = fopen(script, "w");
    CHECK(f != NULL, "create");
    if (!f)
        return;
    fputs("#!/sbin/ldconfig --version\n", f);
    fclose(f);
    chmod(script, 0755);
    run_result r = harness_tpprof("run", "-o", old, script, NULL);
    CHECK(r.status == 0, "status %d: %s", r.status, r.err);
    CHECK(strstr(r.err, "no recording was written;") && !strstr(r.err, "allocations"), "%s", r.err);
    harness_result_free(&r);
}

static void test_stale_child_recordings_of_an_earlier_run_are_not_listed(void) {
    const char *db = harness_path("again.db");
    const char *stale = harness_path("again.424242.db");
    FILE *f = fopen(stale, "w");
    CHECK(f != NULL, "create");
    if (f)
        fclose(f);
    struct timespec hour_ago[2];
    clock_gettime(CLOCK_REALTIME, &hour_ago[0]);
    hour_ago[0].tv_sec -= 3600;
    hour_ago[1] = hour_ago[0];
    CHECK(utimensat(AT_FDCWD, stale, hour_ago, 0) == 0, "utimensat");
    char *argv[] = {(char *)harness_tpprof_path(), (char *)"run", (char *)"-o", (char *)db, fork_leak,
                    NULL};
    run_result r = harness_run(argv, NULL, NULL);
    CHECK(r.status == 0, "status %d: %s", r.status, r.err);
    CHECK(!strstr(r.err, "again.424242.db"), "stale file listed:\n%s", r.err);
    CHECK(strstr(r.err, "also recorded: "), "this run's child still listed:\n%s", r.err);
    harness_result_free(&r);
}

static void test_unwritable_output_directory_is_2_before_the_program_runs(void) {
    const char *mark = harness_path("ran.mark");
    char script[4200];
    snprintf(script, sizeof script, "touch '%s'", mark);
    char *argv[] = {(char *)harness_tpprof_path(), (char *)"run", (char *)"-o", (char *)"/nonexistent-tpprof-dir/x.db",
                    (char *)"/bin/sh", (char *)"-c", script, NULL};
    run_result r = harness_run(argv, NULL, NULL);
    CHECK(r.status == 2, "status %d: %s", r.status, r.err);
    CHECK(strstr(r.err, "tpprof run: cannot write the recording into /nonexistent-tpprof-dir: No such file or directory"),
          "%s", r.err);
    struct stat sb;
    CHECK(stat(mark, &sb) != 0, "the program did not run");
    harness_result_free(&r);
}

static void test_missing_program_is_127_with_one_line(void) {
    run_result r = harness_tpprof("run", "-o", harness_path("none.db"), "/nonexistent/program", NULL);
    CHECK(r.status == 127, "status %d", r.status);
    CHECK(harness_lines(r.err) == 1 && strstr(r.err, "cannot run '/nonexistent/program'"), "%s", r.err);
    harness_result_free(&r);
}

// A program built with -fsanitize=address (its runtime linked dynamically)
// stops at once with tpprof ahead of its runtime: `tpprof run` says so in
// one line and does not start it (exit 2), found through PATH too.
static void test_sanitizer_built_program_is_refused_in_one_line(void) {
    const char *asan = getenv("TPPROF_TEST_ASAN_PROG");
    if (!asan || !*asan) {
        fprintf(stderr, "note: no -fsanitize=address program was built; the case is not run\n");
        return;
    }
    const char *db = harness_path("asan.db");
    run_result r = harness_tpprof("run", "-o", db, asan, NULL);
    CHECK(r.status == 2, "status %d: %s", r.status, r.err);
    CHECK(harness_lines(r.err) == 1 && strstr(r.err, "is built with AddressSanitizer: its runtime (libasan.so") &&
              strstr(r.err, "build it without -fsanitize"),
          "%s", r.err);
    CHECK(!strstr(r.out, "lost") && access(db, F_OK) != 0, "the program did not run: %s", r.out);
    harness_result_free(&r);
    // By name, through PATH.
    char dir[4096], path[8192];
    snprintf(dir, sizeof dir, "%s", asan);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = 0;
    snprintf(path, sizeof path, "PATH=%s:/usr/bin:/bin", dir);
    char *argv[] = {(char *)harness_tpprof_path(), (char *)"run", (char *)"-o", (char *)db, (char *)"asan_prog", NULL};
    char *extra[] = {path, NULL};
    r = harness_run(argv, extra, NULL);
    CHECK(r.status == 2 && strstr(r.err, "asan_prog is built with AddressSanitizer"), "status %d: %s", r.status, r.err);
    harness_result_free(&r);
}

static char *query_text(const char *db, const char *sql) {
    sqlite3 *h = NULL;
    char *value = NULL;
    if (sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK) {
        sqlite3_stmt *st = NULL;
        if (sqlite3_prepare_v2(h, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW &&
            sqlite3_column_text(st, 0))
            value = strdup((const char *)sqlite3_column_text(st, 0));
        sqlite3_finalize(st);
    }
    sqlite3_close(h);
    return value ? value : strdup("(none)");
}

static void test_full_mode_and_depth_reach_the_recorder(void) {
    const char *db = harness_path("full.db");
    char *argv[] = {(char *)harness_tpprof_path(), (char *)"run", (char *)"--full", (char *)"--depth",
                    (char *)"2", (char *)"-o", (char *)db, (char *)"--", leak_once, NULL};
    run_result r = harness_run(argv, NULL, NULL);
    CHECK(r.status == 0, "status %d: %s", r.status, r.err);
    harness_result_free(&r);
    char *mode = query_text(db, "SELECT value FROM meta WHERE key = 'mode'");
    char *depth = query_text(db, "SELECT value FROM meta WHERE key = 'depth'");
    char *events = query_text(db, "SELECT COUNT(*) >= 2000 FROM events");
    // No stack is longer than 2 frames: no node has a grandparent.
    char *deep = query_text(db, "SELECT COUNT(*) FROM stack_nodes a JOIN stack_nodes b ON a.parent = b.id "
                                "WHERE b.parent != 0");
    CHECK(strcmp(mode, "full") == 0, "mode %s", mode);
    CHECK(strcmp(depth, "2") == 0, "depth %s", depth);
    CHECK(strcmp(events, "1") == 0, "every event kept: %s", events);
    CHECK(strcmp(deep, "0") == 0, "stacks cut at 2 frames: %s deeper nodes", deep);
    free(mode);
    free(depth);
    free(events);
    free(deep);
}

// `tpprof run -o NAME prog`, whose summary must hold `said`, then `tpprof
// report NAME --leaks`.
static run_result run_then_leaks(const char *name, char *prog, const char *said) {
    const char *db = harness_path(name);
    char *argv[] = {(char *)harness_tpprof_path(), (char *)"run", (char *)"-o", (char *)db, prog, NULL};
    run_result r = harness_run(argv, NULL, NULL);
    CHECK(r.status == 0, "status %d: %s", r.status, r.err);
    CHECK(strstr(r.err, said), "'%s' in:\n%s", said, r.err);
    harness_result_free(&r);
    r = harness_tpprof("report", db, "--leaks", NULL);
    CHECK(r.status == 0, "status %d", r.status);
    return r;
}

static void test_cpp_names_are_demangled(void) {
    if (!cpp_leak[0]) {
        fprintf(stderr, "(no C++ compiler: skipped)\n");
        return;
    }
    run_result r = run_then_leaks("cpp.db", cpp_leak, "tpprof: biggest leak: 640 B in ns::Widget::make(int) (cpp_leak.cpp:");
    const char *lost = strstr(r.out, "640 B in      1 block   lost       malloc\n");
    CHECK(lost && strstr(lost, "ns::Widget::make(int) (cpp_leak.cpp:"), "demangled:\n%s", r.out);
    harness_result_free(&r);
}

// Rust's names, in both of its schemes, read as Rust (progs/rust_names.c);
// the standard library's frames between the allocation and the program's
// code are said in one line, and the site's caller is the program's.
static void test_rust_names_are_demangled(void) {
    run_result r = run_then_leaks("rust.db", rust_names, "tpprof: biggest leak: 777 B in mycrate::cache::put (rust_names.c:");
    const char *lost = strstr(r.out, " 777 B in      1 block   lost       malloc\n");
    const char *alloc = lost ? strstr(lost, "alloc::alloc::alloc (rust_names.c:") : NULL;
    const char *folded = alloc ? strstr(alloc, "(2 frames of the standard library)") : NULL;
    const char *put = folded ? strstr(folded, "mycrate::cache::put") : NULL;
    const char *insert = put ? strstr(put, "mycrate::cache::Store::insert") : NULL;
    CHECK(put && insert, "v0 then legacy, demangled, the library's frames folded:\n%s", r.out);
    CHECK(!strstr(r.out, "17h0123456789abcdef") && !strstr(r.out, "_RNv"), "no mangled name or hash left:\n%s", r.out);
    CHECK(!strstr(r.out, "raw_vec::grow"), "the folded frames are not listed:\n%s", r.out);
    harness_result_free(&r);
    r = harness_tpprof("report", harness_path("rust.db"), "--top", "3", NULL);
    CHECK(strstr(r.out, "alloc::alloc::alloc (rust_names.c:") && strstr(r.out, "  < mycrate::cache::put (rust_names.c:"),
          "the site's caller is the program's own frame:\n%s", r.out);
    harness_result_free(&r);
}

// tpprof run OPTIONS -- leak_once [ARG]: up to 8 options before "--".
static run_result run_gated(const char *const *opts, const char *arg) {
    char *argv[16];
    int n = 0;
    argv[n++] = (char *)harness_tpprof_path();
    argv[n++] = (char *)"run";
    for (; *opts && n < 12; opts++)
        argv[n++] = (char *)*opts;
    argv[n++] = (char *)"--";
    argv[n++] = leak_once;
    if (arg)
        argv[n++] = (char *)arg;
    argv[n] = NULL;
    return harness_run(argv, NULL, NULL);
}

// As Valgrind's --error-exitcode: a program that exits 0 but fails a gate
// makes tpprof exit N, the failing gate in one line; with no gate given,
// the lost gate at 0 (leak_once loses 4096 B of malloc and an 8192 B mapping).
static void test_a_failing_gate_makes_run_exit_with_the_error_exitcode(void) {
    const char *db = harness_path("gated.db");
    run_result r = run_gated((const char *[]){"-o", db, "--error-exitcode", "99", NULL}, NULL);
    CHECK(r.status == 99, "status %d:\n%s", r.status, r.err);
    CHECK(strstr(r.err, "\ntpprof: FAIL lost bytes 12288 > 0: 8192 B in map_some (leak_once.c:"), "%s", r.err);
    CHECK(!strstr(r.err, "PASS"), "%s", r.err);
    harness_result_free(&r);
    // The limit holds: the program's 0.
    r = run_gated((const char *[]){"-o", db, "--error-exitcode", "99", "--max-lost-bytes", "12k", NULL}, NULL);
    CHECK(r.status == 0 && strstr(r.err, "\ntpprof: PASS 1 gate\n"), "status %d:\n%s", r.status, r.err);
    harness_result_free(&r);
    // A gate without --error-exitcode exits 1; --check takes several gates
    // in one argument, each failing one its own line.
    r = run_gated((const char *[]){"-o", db, "--check", "--max-leaked-bytes 100 --max-peak-bytes=1G", NULL}, NULL);
    CHECK(r.status == 1, "status %d:\n%s", r.status, r.err);
    CHECK(strstr(r.err, "\ntpprof: FAIL leaked bytes 12388 > 100: 8192 B in map_some"), "%s", r.err);
    CHECK(!strstr(r.err, "FAIL peak") && !strstr(r.err, "FAIL lost"), "only the gates given:\n%s", r.err);
    // The gates read the recording the summary loaded whole: the summary
    // says what a run without gates says.
    run_result plain = run_gated((const char *[]){"-o", db, NULL}, NULL);
    const char *a = strstr(r.err, "tpprof: recording:"), *b = strstr(plain.err, "tpprof: recording:");
    CHECK(a && b && a - r.err == b - plain.err && memcmp(r.err, plain.err, (size_t)(a - r.err)) == 0,
          "gated:\n%s\nnot gated:\n%s", r.err, plain.err);
    harness_result_free(&plain);
    harness_result_free(&r);
}

// The program's own failure is its status, gates or not.
static void test_a_programs_own_nonzero_status_passes_through_the_gates(void) {
    const char *db = harness_path("gated3.db");
    run_result r = run_gated((const char *[]){"-o", db, "--error-exitcode", "99", NULL}, "3");
    CHECK(r.status == 3, "status %d:\n%s", r.status, r.err);
    CHECK(strstr(r.err, "tpprof: FAIL lost bytes 12288 > 0"), "the gate still says why:\n%s", r.err);
    harness_result_free(&r);
    r = run_gated((const char *[]){"-o", db, "--error-exitcode", "99", NULL}, "kill");
    CHECK(r.status == 128 + 15, "status %d:\n%s", r.status, r.err);
    harness_result_free(&r);
}

// run --suppressions reads LeakSanitizer's files; a note per rule says
// what it matched, and the suppressed leaks fail no gate.
static void test_run_suppressions_take_known_leaks_out_of_the_gates(void) {
    const char *db = harness_path("suppressed.db"), *rules = harness_path("run.supp");
    FILE *f = fopen(rules, "w");
    CHECK(f != NULL, "create");
    if (!f)
        return;
    fputs("# known\nleak:map_some\nleak:leak_once.c\n", f);
    fclose(f);
    run_result r = run_gated((const char *[]){"-o", db, "--error-exitcode", "99", "--suppressions", rules, NULL}, NULL);
    CHECK(r.status == 0, "status %d:\n%s", r.status, r.err);
    CHECK(strstr(r.err, "tpprof: note: suppressed leak:map_some matched 8.00 KiB in 1 block (1 stack)\n"), "%s",
          r.err);
    // leak_once.c names every frame of the program: the first rule took the
    // mapping, this one the malloc'd block and the reachable one.
    CHECK(strstr(r.err, "tpprof: note: suppressed leak:leak_once.c matched "), "%s", r.err);
    CHECK(strstr(r.err, "tpprof: PASS 1 gate\n"), "%s", r.err);
    harness_result_free(&r);
}

// run takes check's device gates, as options and in --check, DEV:N and
// repeats included. A program without CUDA records no device tables: each
// device gate passes, its own line saying so; only the gates given apply
// (leak_once's lost bytes fail no gate).
static void test_run_device_gates_pass_a_cpu_only_program_and_say_not_recorded(void) {
    const char *db = harness_path("device_gated.db");
    run_result r = run_gated((const char *[]){"-o", db, "--error-exitcode", "99", "--max-device-peak-bytes", "1M",
                                              "--check", "--max-device-leaked-bytes 0:0 --max-device-leaked-bytes=1:2k",
                                              NULL},
                             NULL);
    CHECK(r.status == 0, "status %d:\n%s", r.status, r.err);
    CHECK(strstr(r.err, "\ntpprof: PASS device 0 leaked bytes 0 <= 0 (device memory was not recorded)\n"
                        "tpprof: PASS device 1 leaked bytes 0 <= 2048 (device memory was not recorded)\n"
                        "tpprof: PASS device peak bytes 0 <= 1048576 (device memory was not recorded)\n"
                        "tpprof: PASS 3 gates\n"),
          "%s", r.err);
    CHECK(!strstr(r.err, "FAIL") && !strstr(r.err, "bad device free"), "%s", r.err);
    harness_result_free(&r);
    // With a host gate beside them, the host gate still fails.
    r = run_gated((const char *[]){"-o", db, "--max-device-leaked-bytes", "0", "--max-lost-bytes", "0", NULL}, NULL);
    CHECK(r.status == 1, "status %d:\n%s", r.status, r.err);
    CHECK(strstr(r.err, "\ntpprof: FAIL lost bytes 12288 > 0: 8192 B in map_some (leak_once.c:") &&
              strstr(r.err, "\ntpprof: PASS device leaked bytes 0 <= 0 (device memory was not recorded)\n"),
          "%s", r.err);
    harness_result_free(&r);
}

// Bad gate options are refused before the program runs: 2, one line.
static void test_bad_gate_options_are_refused_before_the_program_runs(void) {
    const char *db = harness_path("never.db");
    const char *bad[][5] = {
        {"--error-exitcode", "0", NULL},
        {"--error-exitcode", "256", NULL},
        {"--check", "--max-lost-bytes lots", NULL},
        {"--check", "--frobnicate 3", NULL},
        {"--max-growth", "5", NULL},
        {"--suppressions", "/nonexistent/x.supp", NULL},
        {"--max-device-peak-bytes", "x:1", NULL},
        {"--check", "--max-device-leaked-bytes 0:", NULL},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        const char *opts[8] = {"-o", db, bad[i][0], bad[i][1], NULL};
        run_result r = run_gated(opts, NULL);
        CHECK(r.status == 2 && harness_lines(r.err) == 1 && strncmp(r.err, "tpprof run: ", 12) == 0,
              "%s %s: status %d: %s", bad[i][0], bad[i][1], r.status, r.err);
        CHECK(r.out[0] == 0, "the program did not run: %s", r.out);
        harness_result_free(&r);
    }
    CHECK(access(db, F_OK) != 0, "nothing recorded");
}

static bool valid_utf8(const unsigned char *s) {
    while (*s) {
        int n = *s < 0x80 ? 0 : (*s & 0xE0) == 0xC0 ? 1 : (*s & 0xF0) == 0xE0 ? 2 : (*s & 0xF8) == 0xF0 ? 3 : -1;
        if (n < 0)
            return false;
        for (s++; n > 0; n--, s++)
            if ((*s & 0xC0) != 0x80)
                return false;
    }
    return true;
}

// A real program with names HTML and JSON must escape (hold<int&>(int&),
// operator"" _kib) run from a file whose name has '<', '&', quotes and a
// byte that is not UTF-8: the HTML page, its data, the report's JSON and
// the Perfetto trace escape them and stay valid UTF-8.
static void test_odd_names_are_escaped_in_html_and_json(void) {
    if (!odd_names[0]) {
        fprintf(stderr, "(no C++ compiler: skipped)\n");
        return;
    }
    char prog[4200];
    snprintf(prog, sizeof prog, "%s", harness_path("odd\xff<&\"'.bin"));
    char *cp[] = {(char *)"/bin/cp", odd_names, prog, NULL};
    run_result r = harness_run(cp, NULL, NULL);
    CHECK(r.status == 0, "cp: %s", r.err);
    harness_result_free(&r);
    const char *db = harness_path("odd.db"), *page = harness_path("odd.html"), *trace = harness_path("odd.json");
    char *argv[] = {(char *)harness_tpprof_path(), (char *)"run", (char *)"--full", (char *)"-o", (char *)db, prog, NULL};
    r = harness_run(argv, NULL, NULL);
    CHECK(r.status == 0 && strstr(r.err, "LEAK: 2.09 KiB lost in 2 blocks"), "status %d:\n%s", r.status, r.err);
    harness_result_free(&r);

    r = harness_tpprof("report", db, "--format", "html", "-o", page, NULL);
    CHECK(r.status == 0, "html: %s", r.err);
    harness_result_free(&r);
    char *html = harness_read_file(page);
    CHECK(html && valid_utf8((const unsigned char *)html), "the page is UTF-8");
    CHECK(html && strstr(html, "hold&lt;int&amp;&gt;(int&amp;)"), "the template's name escaped in the HTML");
    CHECK(html && strstr(html, "operator&quot;&quot; _kib(unsigned long long)"), "the literal's quotes escaped");
    CHECK(html && strstr(html, "hold\\u003cint\\u0026\\u003e(int\\u0026)"), "and in the page's data");
    CHECK(html && strstr(html, "odd\xef\xbf\xbd&lt;&amp;&quot;&#39;.bin"), "the program's name: U+FFFD and escapes");
    CHECK(html && !strstr(html, "<int&>"), "no raw name in the page");
    free(html);

    r = harness_tpprof("report", db, "--format", "json", NULL);
    CHECK(r.status == 0 && harness_json_valid(r.out) && valid_utf8((const unsigned char *)r.out), "json: %s", r.err);
    CHECK(strstr(r.out, "hold<int&>(int&)") && strstr(r.out, "operator\\\"\\\" _kib"), "names in JSON:\n%.2000s", r.out);
    CHECK(strstr(r.out, "odd\\ufffd<&\\\"'.bin"), "the path in JSON");
    harness_result_free(&r);

    r = harness_tpprof("export", db, "-o", trace, NULL);
    CHECK(r.status == 0, "export: %s", r.err);
    harness_result_free(&r);
    char *json = harness_read_file(trace);
    CHECK(json && harness_json_valid(json) && valid_utf8((const unsigned char *)json), "the trace is JSON in UTF-8");
    CHECK(json && strstr(json, "hold\\u003cint\\u0026\\u003e(int\\u0026)"), "the stack argument escaped");
    CHECK(json && strstr(json, "odd\\ufffd\\u003c\\u0026\\\"'.bin (pid "), "the process name");
    free(json);
}

int main(int argc, char **argv) {
    harness_init(argc, argv);
    if (argc < 6 || !realpath(argv[2], leak_once) || !realpath(argv[3], fork_leak) || !realpath(argv[4], other_malloc) ||
        !realpath(argv[5], rust_names)) {
        fprintf(stderr, "usage: %s TPPROF LEAK_ONCE FORK_LEAK OTHER_MALLOC RUST_NAMES [CPP_LEAK]\n", argv[0]);
        return 2;
    }
    if (argc > 6 && !realpath(argv[6], cpp_leak))
        cpp_leak[0] = 0;
    if (argc > 7 && !realpath(argv[7], odd_names))
        odd_names[0] = 0;
    RUN_TEST(test_exit_status_is_the_programs);
    RUN_TEST(test_summary_totals_are_the_reports);
    RUN_TEST(test_a_failing_gate_makes_run_exit_with_the_error_exitcode);
    RUN_TEST(test_a_programs_own_nonzero_status_passes_through_the_gates);
    RUN_TEST(test_run_suppressions_take_known_leaks_out_of_the_gates);
    RUN_TEST(test_run_device_gates_pass_a_cpu_only_program_and_say_not_recorded);
    RUN_TEST(test_bad_gate_options_are_refused_before_the_program_runs);
    RUN_TEST(test_a_signal_handlers_frame_names_the_signal);
    RUN_TEST(test_an_allocator_preloaded_after_tpprof_is_named);
    RUN_TEST(test_killed_program_gives_128_plus_signal);
    RUN_TEST(test_interrupt_stops_the_program_and_tpprof_still_reports);
    RUN_TEST(test_report_names_function_file_line_and_exact_bytes);
    RUN_TEST(test_default_output_name_is_program_and_pid_in_cwd);
    RUN_TEST(test_percent_p_in_output_becomes_the_pid);
    RUN_TEST(test_forked_child_recording_is_mentioned);
    RUN_TEST(test_summary_is_of_the_program_the_process_exec_d_into);
    RUN_TEST(test_many_recordings_are_listed_most_lost_first_then_counted);
    RUN_TEST(test_stale_child_recordings_of_an_earlier_run_are_not_listed);
    RUN_TEST(test_missing_program_is_127_with_one_line);
    RUN_TEST(test_unwritable_output_directory_is_2_before_the_program_runs);
    RUN_TEST(test_static_program_is_refused_and_no_recording_is_said);
    RUN_TEST(test_sanitizer_built_program_is_refused_in_one_line);
    RUN_TEST(test_full_mode_and_depth_reach_the_recorder);
    RUN_TEST(test_cpp_names_are_demangled);
    RUN_TEST(test_odd_names_are_escaped_in_html_and_json);
    RUN_TEST(test_rust_names_are_demangled);
    return harness_finish();
}
