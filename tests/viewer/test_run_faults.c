// test_run_faults.c: `tpprof run` and `tpprof check` under real faults
// (suite 'preload'): a full file system, kill -9, output paths that are not
// a recording's, a statically linked program, ".exec" in an output path.
// The rule pinned here: a recording says what it is missing, `check` fails
// (exit 1, one line) on any recording it cannot vouch for, and nothing of
// the user's is destroyed.
//
// usage: test_run_faults TPPROF LEAK_ONCE
// A test that needs root (mount) or a static C library skips itself, saying
// so; the whole program exits 77 only when none of it could run.
#define _GNU_SOURCE
#include "harness.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

static char leak_once[4096];
static int skipped, ran;

#define SKIP(why)                                                                                  \
    do {                                                                                           \
        fprintf(stderr, "skip %s: %s\n", __func__, why);                                           \
        skipped++;                                                                                 \
        return;                                                                                    \
    } while (0)

static run_result run_argv(const char *const *argv) {
    ran++;
    return harness_run((char *const *)argv, NULL, NULL);
}

// A fresh tmpfs of `size` (e.g. "64k") at harness_dir()/name, into out; false
// when it cannot be mounted (not root).
static bool mount_small(const char *name, const char *size, char *out, size_t cap) {
    snprintf(out, cap, "%s", harness_path(name));
    char opts[64];
    snprintf(opts, sizeof opts, "size=%s,mode=0777", size);
    if (mkdir(out, 0777) != 0 && errno != EEXIST)
        return false;
    return mount("tpprof-test", out, "tmpfs", 0, opts) == 0;
}

static void unmount_small(const char *dir) {
    umount2(dir, MNT_DETACH);
}

static size_t count_of(const char *hay, const char *needle) {
    return harness_count(hay, needle);
}

// ---------------------------------------------------------------------------
// A full file system

// Nothing fits: the recorder cannot even write its schema. The program is
// not affected; run says so in one line; check fails with the cause.
static void test_a_full_disk_fails_check_with_its_cause(void) {
    char dir[512], db[600];
    if (!mount_small("full", "64k", dir, sizeof dir))
        SKIP("cannot mount a tmpfs (not root?)");
    snprintf(db, sizeof db, "%s/x.db", dir);
    const char *argv[] = {harness_tpprof_path(), "run", "-o", db, "--", leak_once, NULL};
    run_result r = run_argv(argv);
    CHECK(r.status == 0, "the program is unaffected: status %d: %s", r.status, r.err);
    CHECK(count_of(r.err, "tpprof: nothing was recorded: tpprof could not write it (the file system holding it is full: ") == 1,
          "%s", r.err);
    CHECK(!strstr(r.err, "did not end normally") && !strstr(r.err, "cannot read") && !strstr(r.err, "symbolize"),
          "no blame on the program, no second line for the same cause:\n%s", r.err);
    harness_result_free(&r);
    const char *check[] = {harness_tpprof_path(), "check", db, NULL};
    r = run_argv(check);
    CHECK(r.status == 1, "status %d: %s%s", r.status, r.out, r.err);
    CHECK(harness_lines(r.out) == 1 && strstr(r.out, "FAIL recording cannot be vouched for: nothing was recorded: tpprof "
                                                     "could not write it (the file system holding it is full: "),
          "%s", r.out);
    CHECK(harness_lines(r.err) == 0, "%s", r.err);
    harness_result_free(&r);
    // --allow-incomplete cannot make a gate of nothing.
    const char *allow[] = {harness_tpprof_path(), "check", db, "--allow-incomplete", NULL};
    r = run_argv(allow);
    CHECK(r.status == 1, "status %d: %s", r.status, r.out);
    harness_result_free(&r);
    unmount_small(dir);
}

// A script of many processes on a full file system: the recorder's own
// line ("cannot write ...") comes once for the run, not once per process.
static void test_many_processes_on_a_full_disk_warn_once(void) {
    char dir[512], db[600], script[16384];
    if (!mount_small("fullmany", "64k", dir, sizeof dir))
        SKIP("cannot mount a tmpfs (not root?)");
    snprintf(db, sizeof db, "%s/m.db", dir);
    int k = snprintf(script, sizeof script, "true");
    for (int i = 0; i < 8; i++)
        k += snprintf(script + k, sizeof script - (size_t)k, "; '%s' >/dev/null", leak_once);
    const char *argv[] = {harness_tpprof_path(), "run", "-o", db, "--", "/bin/sh", "-c", script, NULL};
    run_result r = run_argv(argv);
    CHECK(r.status == 0, "the programs are unaffected: status %d: %s", r.status, r.err);
    CHECK(count_of(r.err, "tpprof: cannot write ") == 1, "one recorder line for 9 processes:\n%s", r.err);
    harness_result_free(&r);
    unmount_small(dir);
}

// Room for the schema, then the file system fills while the program runs:
// the recording is incomplete, and the words say it is tpprof's failure.
// A script of several processes gives one line per recording.
static void test_a_disk_that_fills_during_the_run_is_named_as_the_cause(void) {
    char dir[512], db[600], script[16384];
    if (!mount_small("filling", "256k", dir, sizeof dir))
        SKIP("cannot mount a tmpfs (not root?)");
    snprintf(db, sizeof db, "%s/y.db", dir);
    snprintf(script, sizeof script,
             "'%s' >/dev/null; '%s' >/dev/null; '%s' >/dev/null; dd if=/dev/zero of='%s/fill' bs=4k 2>/dev/null; true",
             leak_once, leak_once, leak_once, dir);
    const char *argv[] = {harness_tpprof_path(), "run", "-o", db, "--", "/bin/sh", "-c", script, NULL};
    run_result r = run_argv(argv);
    CHECK(r.status == 0, "status %d: %s", r.status, r.err);
    CHECK(strstr(r.err, "tpprof: warning: missing: incomplete: tpprof stopped writing before the program ended (a "
                        "write failed: the file system holding it is full: "),
          "%s", r.err);
    CHECK(!strstr(r.err, "did not end normally"), "%s", r.err);
    // Each other recording: one line ("also recorded"), none unreadable.
    CHECK(count_of(r.err, "tpprof: also recorded: ") == 4 && !strstr(r.err, "unreadable"), "%s", r.err);
    CHECK(!strstr(r.err, "tpprof: warning: could not symbolize"), "%s", r.err);
    harness_result_free(&r);
    const char *check[] = {harness_tpprof_path(), "check", db, NULL};
    r = run_argv(check);
    CHECK(r.status == 1 && strstr(r.out, "FAIL recording cannot be vouched for: incomplete: tpprof could not finish "
                                         "writing it: the file system holding it is full: "),
          "status %d: %s%s", r.status, r.out, r.err);
    harness_result_free(&r);
    unmount_small(dir);
}

// ---------------------------------------------------------------------------
// kill -9

static void test_a_program_killed_by_sigkill_fails_check(void) {
    const char *db = harness_path("killed9.db");
    char script[4200];
    snprintf(script, sizeof script, "'%s' >/dev/null; kill -9 $$", leak_once);
    const char *argv[] = {harness_tpprof_path(), "run", "-o", db, "--", "/bin/sh", "-c", script, NULL};
    run_result r = run_argv(argv);
    CHECK(r.status == 128 + 9, "status %d: %s", r.status, r.err);
    CHECK(strstr(r.err, "tpprof: warning: missing: incomplete: the program was killed by signal 9 (Killed), which "
                        "tpprof cannot catch"),
          "%s", r.err);
    harness_result_free(&r);
    const char *check[] = {harness_tpprof_path(), "check", db, NULL};
    r = run_argv(check);
    CHECK(r.status == 1 && strstr(r.out, "FAIL recording cannot be vouched for: incomplete: it ends before the program did"),
          "status %d: %s%s", r.status, r.out, r.err);
    harness_result_free(&r);
    // A gate the blocks live at the last flush fit: whether a periodic flush
    // came before the kill (with the shell's blocks, unscanned, counted as
    // lost) is the scheduler's, and not what this checks.
    const char *allow[] = {harness_tpprof_path(), "check", db, "--allow-incomplete", "--max-lost-bytes", "1000000",
                           NULL};
    r = run_argv(allow);
    CHECK(r.status == 0 && !strstr(r.out, "FAIL") &&
              strstr(r.err, "tpprof check: warning: cannot vouch for ") && strstr(r.err, ": incomplete: it ends"),
          "a warning only: status %d: %s%s", r.status, r.out, r.err);
    harness_result_free(&r);
    const char *report[] = {harness_tpprof_path(), "report", db, NULL};
    r = run_argv(report);
    CHECK(strstr(r.out, "  MISSING     incomplete: it ends before the program did"), "the same words: %s", r.out);
    harness_result_free(&r);
}

// kill -9 at several points of a run (while it starts, while it loops,
// after periodic flushes): whatever was written, check never passes it.
static void test_kill_9_anywhere_never_passes_check(void) {
    static const char *const delays[] = {"0", "0.01", "0.05", "0.3", "0.7"};
    for (size_t i = 0; i < sizeof delays / sizeof *delays; i++) {
        char name[64], script[4200];
        snprintf(name, sizeof name, "cut%zu.db", i);
        const char *db = harness_path(name);
        snprintf(script, sizeof script,
                 "(sleep %s; kill -9 $$) & while :; do '%s' >/dev/null; done", delays[i], leak_once);
        const char *argv[] = {harness_tpprof_path(), "run", "-o", db, "--", "/bin/sh", "-c", script, NULL};
        run_result r = run_argv(argv);
        CHECK(r.status == 128 + 9, "after %s s: status %d: %s", delays[i], r.status, r.err);
        harness_result_free(&r);
        const char *check[] = {harness_tpprof_path(), "check", db, NULL};
        r = run_argv(check);
        CHECK(r.status != 0, "cut after %s s passed: %s%s", delays[i], r.out, r.err);
        CHECK(r.status == 2 || strstr(r.out, "FAIL recording cannot be vouched for: "), "after %s s: %s", delays[i],
              r.out);
        harness_result_free(&r);
    }
}

// ---------------------------------------------------------------------------
// -o: only a recording is overwritten; what cannot be written is refused
// before the program starts.

// `tpprof run -o out -- sh -c 'touch MARK'`: refused (2, one line holding
// `message`), and the program did not run.
static void expect_refused(const char *what, const char *out, const char *message) {
    const char *mark = harness_path("ran.mark");
    unlink(mark);
    char script[1024];
    snprintf(script, sizeof script, "touch '%s'", mark);
    const char *argv[] = {harness_tpprof_path(), "run", "-o", out, "--", "/bin/sh", "-c", script, NULL};
    run_result r = run_argv(argv);
    CHECK(r.status == 2 && harness_lines(r.err) == 1 && strstr(r.err, message), "%s: status %d: %s", what, r.status,
          r.err);
    struct stat sb;
    CHECK(stat(mark, &sb) != 0, "%s: the program must not run", what);
    harness_result_free(&r);
}

static bool write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (!f)
        return false;
    fputs(text, f);
    return fclose(f) == 0;
}

static void test_output_that_is_not_a_recording_is_refused(void) {
    const char *notes = harness_path("notes.txt");
    CHECK(write_text(notes, "my notes\n"), "write");
    expect_refused("a text file", notes, "refusing to overwrite");
    char *kept = harness_read_file(notes);
    CHECK(kept && strcmp(kept, "my notes\n") == 0, "the text file is intact: %s", kept ? kept : "(gone)");
    free(kept);

    const char *dir = harness_path("a.dir");
    CHECK(mkdir(dir, 0777) == 0, "mkdir");
    expect_refused("a directory", dir, "it is a directory");

    char longname[600];
    snprintf(longname, sizeof longname, "%s/", harness_dir());
    size_t k = strlen(longname);
    for (int i = 0; i < 256; i++)
        longname[k++] = 'n';
    snprintf(longname + k, sizeof longname - k, ".db");
    expect_refused("a 259-byte name", longname, "longer than 255 bytes");

    const char *inside_file[] = {"notes.txt/x.db"};
    char under[600];
    snprintf(under, sizeof under, "%s/%s", harness_dir(), inside_file[0]);
    expect_refused("a file where a folder should be", under, "not a directory");

    // The recorder deletes the -wal, -shm and -journal beside its file.
    const char *db = harness_path("sib.db");
    const char *wal = harness_path("sib.db-wal");
    CHECK(write_text(wal, "not a WAL\n"), "write");
    expect_refused("a -wal sibling that is not SQLite's", db, "sib.db-wal: it is not SQLite's file");
    kept = harness_read_file(wal);
    CHECK(kept && strcmp(kept, "not a WAL\n") == 0, "the -wal file is intact");
    free(kept);
    unlink(wal);
    const char *journal = harness_path("sib.db-journal");
    CHECK(write_text(journal, "a journal of mine\n"), "write");
    expect_refused("a -journal sibling that is not SQLite's", db, "sib.db-journal");
    unlink(journal);
}

// What tpprof wrote before, it may write again: a recording (with its -shm
// and -wal), and the empty file a failed recording left.
static void test_an_earlier_recording_is_overwritten(void) {
    const char *db = harness_path("again.db");
    const char *argv[] = {harness_tpprof_path(), "run", "-o", db, "--", leak_once, NULL};
    for (int i = 0; i < 2; i++) {
        run_result r = run_argv(argv);
        CHECK(r.status == 0 && strstr(r.err, "tpprof: LEAK: 12.0 KiB lost"), "run %d: status %d: %s", i, r.status, r.err);
        harness_result_free(&r);
    }
    CHECK(write_text(db, ""), "truncate");
    run_result r = run_argv(argv);
    CHECK(r.status == 0 && strstr(r.err, "tpprof: LEAK: 12.0 KiB lost"), "over an empty file: status %d: %s", r.status, r.err);
    harness_result_free(&r);
}

// ---------------------------------------------------------------------------
// ".exec" elsewhere in the output path is not the exec tag.

static void test_exec_in_an_output_name_is_not_the_exec_tag(void) {
    char script[4200], want[1024];
    snprintf(script, sizeof script, "exec '%s'", leak_once);
    const char *db = harness_path("app.exec_test.db");
    const char *argv[] = {harness_tpprof_path(), "run", "-o", db, "--", "/bin/sh", "-c", script, NULL};
    run_result r = run_argv(argv);
    snprintf(want, sizeof want, "tpprof: recording: %s/app.exec_test.exec1.db ", harness_dir());
    CHECK(r.status == 0 && strstr(r.err, want), "want '%s' in:\n%s", want, r.err);
    snprintf(want, sizeof want, "also recorded: %s/app.exec_test.db (pid ", harness_dir());
    CHECK(strstr(r.err, want) && !strstr(r.err, "after exec"), "the shell's, not after an exec:\n%s", r.err);
    harness_result_free(&r);

    const char *dir = harness_path("x.exec_dir");
    CHECK(mkdir(dir, 0777) == 0, "mkdir");
    char out[600];
    snprintf(out, sizeof out, "%s/out.db", dir);
    const char *argv2[] = {harness_tpprof_path(), "run", "-o", out, "--", "/bin/sh", "-c", script, NULL};
    r = run_argv(argv2);
    snprintf(want, sizeof want, "tpprof: recording: %s/out.exec1.db ", dir);
    CHECK(r.status == 0 && strstr(r.err, want) && strstr(r.err, "biggest leak: 8.00 KiB in map_some"),
          "want '%s' in:\n%s", want, r.err);
    harness_result_free(&r);
}

// ---------------------------------------------------------------------------
// A statically linked program: LD_PRELOAD cannot reach it.

static void test_a_static_program_is_refused_before_it_starts(void) {
    const char *src = harness_path("static.c"), *exe = harness_path("static_prog");
    const char *mark = harness_path("static.mark");
    char text[1024];
    snprintf(text, sizeof text,
             "#include <stdio.h>\nint main(void) { FILE *f = fopen(\"%s\", \"w\"); return f ? 0 : 1; }\n", mark);
    CHECK(write_text(src, text), "write");
    struct stat sb;
    if (stat("/usr/lib/x86_64-linux-gnu/libc.a", &sb) != 0 && stat("/usr/lib/libc.a", &sb) != 0 &&
        stat("/usr/lib64/libc.a", &sb) != 0)
        SKIP("no libc.a to link a static program with");
    const char *cc[] = {"/usr/bin/cc", "-static", "-o", exe, src, NULL};
    run_result r = harness_run((char *const *)cc, NULL, NULL);
    bool built = r.status == 0;
    harness_result_free(&r);
    if (!built)
        SKIP("cc -static failed");
    const char *argv[] = {harness_tpprof_path(), "run", "-o", harness_path("static.db"), "--", exe, NULL};
    r = run_argv(argv);
    CHECK(r.status == 2 && harness_lines(r.err) == 1 && strstr(r.err, "is statically linked"), "status %d: %s",
          r.status, r.err);
    CHECK(stat(mark, &sb) != 0, "the program did not run");
    harness_result_free(&r);
}

int main(int argc, char **argv) {
    harness_init(argc, argv);
    if (argc < 3 || !realpath(argv[2], leak_once)) {
        fprintf(stderr, "usage: %s TPPROF LEAK_ONCE\n", argv[0]);
        return 2;
    }
    RUN_TEST(test_a_full_disk_fails_check_with_its_cause);
    RUN_TEST(test_a_disk_that_fills_during_the_run_is_named_as_the_cause);
    RUN_TEST(test_many_processes_on_a_full_disk_warn_once);
    RUN_TEST(test_a_program_killed_by_sigkill_fails_check);
    RUN_TEST(test_kill_9_anywhere_never_passes_check);
    RUN_TEST(test_output_that_is_not_a_recording_is_refused);
    RUN_TEST(test_an_earlier_recording_is_overwritten);
    RUN_TEST(test_exec_in_an_output_name_is_not_the_exec_tag);
    RUN_TEST(test_a_static_program_is_refused_before_it_starts);
    int status = harness_finish();
    if (status == 0 && ran == 0 && skipped)
        return 77;
    return status;
}
