// harness.h: what the viewer tests share: running the built `tpprof` binary
// and capturing its exit status, stdout and stderr; a scratch directory;
// a tiny JSON syntax checker; assertion macros that count failures.
//
// Tests call tpprof as a user would (fork + exec), never its functions.
#ifndef TPPROF_TEST_HARNESS_H
#define TPPROF_TEST_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

extern int harness_failures;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            harness_failures++;                                                                    \
            fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond);              \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
        }                                                                                          \
    } while (0)

// Output of one run. Strings are NUL-terminated, owned by the result.
typedef struct run_result {
    int status;  // exit status, or 128 + signal
    char *out;   // stdout
    char *err;   // stderr
} run_result;

// Run argv (argv[0] a path) with optional extra environment "K=V" entries
// (NULL-terminated, may be NULL) in directory cwd (NULL: current).
run_result harness_run(char *const argv[], char *const extra_env[], const char *cwd);
void harness_result_free(run_result *r);

// Run `tpprof ARGS...` (NULL-terminated) with the binary given to the test.
run_result harness_tpprof(const char *first, ...);

// The absolute path of the tpprof binary under test.
const char *harness_tpprof_path(void);

// Expect r to be a refusal: exit status 2, nothing on stdout, exactly one
// line on stderr and `message` in it. `what` names the case in failure
// messages, and a failure names the caller's line. Frees r.
#define harness_expect_usage_error(what, r, message)                                               \
    harness_expect_usage_error_at(__FILE__, __LINE__, what, r, message)
void harness_expect_usage_error_at(const char *file, int line, const char *what, run_result r,
                                   const char *message);

// Run `tpprof check ARGS...` and expect exit status `want_status` and
// exactly `want_out` on stdout (a failure names the caller's line).
#define HARNESS_EXPECT_CHECK(want_status, want_out, ...)                                          \
    do {                                                                                           \
        run_result r_ = harness_tpprof("check", __VA_ARGS__, NULL);                                \
        CHECK(r_.status == (want_status), "status %d: %s%s", r_.status, r_.out, r_.err);           \
        CHECK(strcmp(r_.out, want_out) == 0, "got: %s", r_.out);                                   \
        harness_result_free(&r_);                                                                  \
    } while (0)

// Count lines in s (a trailing newline ends the last line).
size_t harness_lines(const char *s);

// true if s is one syntactically valid JSON value (RFC 8259), whitespace around allowed.
bool harness_json_valid(const char *s);

// A copy of JSON text s without the whitespace outside strings (caller
// frees), so tests can match '{"id":1,"nbytes":4096' whatever the layout.
char *harness_json_squash(const char *s);

// How many times needle occurs in s.
size_t harness_count(const char *s, const char *needle);

// One integer from a recording: the first column of the first row sql
// returns from database file db, opened read-only; -1 when the file, the
// query or the row is missing.
long long harness_db_int(const char *db, const char *sql);
// The rows of sql on the database at db, one line each, columns joined by
// '|' (NULL as empty); "error: ..." when it cannot be read. Caller frees.
char *harness_db_rows(const char *db, const char *sql);

// A fresh scratch directory (removed by harness_finish) and paths inside it.
const char *harness_dir(void);
// harness_dir()/name into a static rotating buffer (8 slots).
const char *harness_path(const char *name);

// Read a whole file (caller frees) or NULL.
char *harness_read_file(const char *path);

// Set up from main's argv: argv[1] is the tpprof binary. Returns argv[1].
const char *harness_init(int argc, char **argv);
// Remove the scratch dir, print a verdict, return main's exit status.
int harness_finish(void);

// Run one test function, printing its name.
#define RUN_TEST(fn)                                                                               \
    do {                                                                                           \
        int before_ = harness_failures;                                                            \
        fn();                                                                                      \
        fprintf(stderr, "%s %s\n", harness_failures == before_ ? "ok  " : "FAIL", #fn);            \
    } while (0)

#endif
