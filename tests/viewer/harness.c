// harness.c: see harness.h. Runs child processes with stdout/stderr sent to
// files in the scratch directory (no pipes, so no deadlock on large output).
#define _GNU_SOURCE
#include "harness.h"

#include <sqlite3.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int harness_failures;
static const char *tpprof_bin;
static char scratch[256];

// ---------------------------------------------------------------------------
// Files

char *harness_read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += got;
        if (cap - n - 1 == 0) {
            char *grown = realloc(buf, cap * 2);
            if (!grown) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = grown;
            cap *= 2;
        }
    }
    fclose(f);
    if (buf)
        buf[n] = 0;
    return buf;
}

const char *harness_dir(void) {
    if (!scratch[0]) {
        snprintf(scratch, sizeof scratch, "/tmp/tpprof-test-XXXXXX");
        if (!mkdtemp(scratch)) {
            perror("mkdtemp");
            exit(2);
        }
    }
    return scratch;
}

void harness_expect_usage_error_at(const char *file, int line, const char *what, run_result r,
                                   const char *message) {
    int before = harness_failures;
    CHECK(r.status == 2, "%s: status %d (want 2), stderr: %s", what, r.status, r.err);
    CHECK(r.out[0] == 0, "%s: nothing on stdout: %s", what, r.out);
    CHECK(harness_lines(r.err) == 1, "%s: one line on stderr: %s", what, r.err);
    CHECK(strstr(r.err, message), "%s: '%s' expected in: %s", what, message, r.err);
    if (harness_failures != before)
        fprintf(stderr, "  (expected at %s:%d)\n", file, line);
    harness_result_free(&r);
}

const char *harness_path(const char *name) {
    static char slots[8][512];
    static int next;
    char *p = slots[next++ % 8];
    snprintf(p, 512, "%s/%s", harness_dir(), name);
    return p;
}

static int remove_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

// ---------------------------------------------------------------------------
// Processes

run_result harness_run(char *const argv[], char *const extra_env[], const char *cwd) {
    static int serial;
    char out_path[512], err_path[512];
    snprintf(out_path, sizeof out_path, "%s/.out.%d", harness_dir(), serial);
    snprintf(err_path, sizeof err_path, "%s/.err.%d", harness_dir(), serial++);
    run_result r = {.status = -1};
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        // Its own process group: a ^C sent to "the terminal's group" by a
        // test program reaches tpprof and the program, not this driver.
        setpgid(0, 0);
        int o = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int e = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (o < 0 || e < 0)
            _exit(126);
        dup2(o, 1);
        dup2(e, 2);
        if (cwd && chdir(cwd) != 0)
            _exit(126);
        for (size_t i = 0; extra_env && extra_env[i]; i++)
            putenv(extra_env[i]);
        execv(argv[0], argv);
        _exit(127);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) < 0) {
        perror("fork/waitpid");
        exit(2);
    }
    r.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r.out = harness_read_file(out_path);
    r.err = harness_read_file(err_path);
    if (!r.out)
        r.out = strdup("");
    if (!r.err)
        r.err = strdup("");
    unlink(out_path);
    unlink(err_path);
    return r;
}

run_result harness_tpprof(const char *first, ...) {
    char *argv[64];
    size_t n = 0;
    argv[n++] = (char *)tpprof_bin;
    va_list ap;
    va_start(ap, first);
    for (const char *a = first; a && n < 63; a = va_arg(ap, const char *))
        argv[n++] = (char *)a;
    va_end(ap);
    argv[n] = NULL;
    return harness_run(argv, NULL, NULL);
}

const char *harness_tpprof_path(void) {
    return tpprof_bin;
}

void harness_result_free(run_result *r) {
    free(r->out);
    free(r->err);
    r->out = r->err = NULL;
}

size_t harness_lines(const char *s) {
    size_t n = 0;
    for (; *s; s++)
        if (*s == '\n')
            n++;
    return n;
}

// ---------------------------------------------------------------------------
// JSON syntax (RFC 8259), recursive descent; depth-limited.

static const char *json_value(const char *p, int depth);

static const char *ws(const char *p) {
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
        p++;
    return p;
}

static const char *json_string(const char *p) {
    if (*p++ != '"')
        return NULL;
    while (*p != '"') {
        if ((unsigned char)*p < 0x20)
            return NULL;
        if (*p == '\\') {
            p++;
            if (*p == 'u') {
                for (int i = 1; i <= 4; i++)
                    if (!strchr("0123456789abcdefABCDEF", p[i]) || !p[i])
                        return NULL;
                p += 4;
            } else if (!*p || !strchr("\"\\/bfnrt", *p)) {
                return NULL;
            }
        }
        p++;
    }
    return p + 1;
}

static const char *json_number(const char *p) {
    if (*p == '-')
        p++;
    if (*p == '0')
        p++;
    else if (*p >= '1' && *p <= '9')
        while (*p >= '0' && *p <= '9')
            p++;
    else
        return NULL;
    if (*p == '.') {
        p++;
        if (!(*p >= '0' && *p <= '9'))
            return NULL;
        while (*p >= '0' && *p <= '9')
            p++;
    }
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-')
            p++;
        if (!(*p >= '0' && *p <= '9'))
            return NULL;
        while (*p >= '0' && *p <= '9')
            p++;
    }
    return p;
}

static const char *json_value(const char *p, int depth) {
    if (depth > 64)
        return NULL;
    p = ws(p);
    if (*p == '{' || *p == '[') {
        char close = *p == '{' ? '}' : ']';
        bool object = *p == '{';
        p = ws(p + 1);
        if (*p == close)
            return p + 1;
        for (;;) {
            if (object) {
                p = json_string(ws(p));
                if (!p)
                    return NULL;
                p = ws(p);
                if (*p++ != ':')
                    return NULL;
            }
            p = json_value(p, depth + 1);
            if (!p)
                return NULL;
            p = ws(p);
            if (*p == ',') {
                p++;
                continue;
            }
            return *p == close ? p + 1 : NULL;
        }
    }
    if (*p == '"')
        return json_string(p);
    if (!strncmp(p, "true", 4))
        return p + 4;
    if (!strncmp(p, "false", 5))
        return p + 5;
    if (!strncmp(p, "null", 4))
        return p + 4;
    return json_number(p);
}

bool harness_json_valid(const char *s) {
    const char *end = json_value(s, 0);
    return end && *ws(end) == 0;
}

// ---------------------------------------------------------------------------
// Lifecycle

const char *harness_init(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s PATH/TO/tpprof [...]\n", argv[0]);
        exit(2);
    }
    // Absolute, so that runs in another working directory still find it.
    static char resolved[4096];
    tpprof_bin = realpath(argv[1], resolved) ? resolved : argv[1];
    harness_dir();
    return tpprof_bin;
}

int harness_finish(void) {
    if (scratch[0])
        nftw(scratch, remove_one, 16, FTW_DEPTH | FTW_PHYS);
    fprintf(stderr, "%s: %d failure%s\n", harness_failures ? "FAILED" : "PASSED", harness_failures,
            harness_failures == 1 ? "" : "s");
    return harness_failures ? 1 : 0;
}

// ---------------------------------------------------------------------------
// Matching JSON and text

char *harness_json_squash(const char *s) {
    char *out = malloc(strlen(s) + 1), *o = out;
    if (!out)
        return NULL;
    bool in_string = false;
    for (const char *p = s; *p; p++) {
        if (in_string) {
            *o++ = *p;
            if (*p == '\\' && p[1])
                *o++ = *++p;
            else if (*p == '"')
                in_string = false;
        } else if (*p == '"') {
            in_string = true;
            *o++ = *p;
        } else if (*p != ' ' && *p != '\n' && *p != '\t' && *p != '\r') {
            *o++ = *p;
        }
    }
    *o = 0;
    return out;
}

size_t harness_count(const char *s, const char *needle) {
    size_t n = 0, len = strlen(needle);
    for (const char *p = s; len && (p = strstr(p, needle)) != NULL; p += len)
        n++;
    return n;
}

long long harness_db_int(const char *db, const char *sql) {
    sqlite3 *h = NULL;
    long long v = -1;
    if (sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK) {
        sqlite3_stmt *st = NULL;
        if (sqlite3_prepare_v2(h, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
            v = sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
    }
    sqlite3_close(h);
    return v;
}

char *harness_db_rows(const char *db, const char *sql) {
    sqlite3 *h = NULL;
    char *out = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&out, &len);
    if (!m)
        return strdup("error: open_memstream");
    sqlite3_stmt *st = NULL;
    if (sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(h, sql, -1, &st, NULL) == SQLITE_OK)
        while (sqlite3_step(st) == SQLITE_ROW) {
            for (int c = 0; c < sqlite3_column_count(st); c++)
                fprintf(m, "%s%s", c ? "|" : "",
                        sqlite3_column_text(st, c) ? (const char *)sqlite3_column_text(st, c) : "");
            fputc('\n', m);
        }
    else
        fprintf(m, "error: %s\n", h ? sqlite3_errmsg(h) : "open");
    sqlite3_finalize(st);
    sqlite3_close(h);
    fclose(m);
    return out;
}
