// pyframes.c: the Python frames of a recording (docs/schema.md, py_frames).
//
// The recorder puts a Python program's functions, files and lines into its
// stacks as pseudo return addresses (bit 47 set, which no user-space
// address has) and resolves each one into a row of py_frames.
// Symbolizing turns those rows into symbols rows like any frame's (module
// NULL), so every command prints "hoard (leaky.py:12)"; this file reads the
// table and tells Python frames apart. It does not decide what is shown.
#include "viewer.h"

#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

struct tpprof_py_table {
    int64_t *ids; // sorted
    char **function, **file;
    int64_t *line;
    size_t n;
};

// Bit 47 of the address (no user-space address has it; kernel addresses are
// never recorded); `tpprof merge` keeps the low 48 bits and puts the
// process above them.
bool tpprof_ip_is_python(int64_t ip) { return ((uint64_t)ip & 0xffffffffffffu) >> 47 == 1; }

bool tpprof_frame_is_python(const tpprof_frame *f) { return tpprof_ip_is_python(f->ip) && f->function; }

bool tpprof_frame_is_python_library(const tpprof_frame *f) {
    const char *file = f->file ? f->file : "";
    // "<frozen importlib._bootstrap>", "<string>"; the standard library and
    // installed packages (/usr/lib/python3.11/, /usr/lib/python3/dist-packages/,
    // a venv's lib/python3.11/site-packages/).
    return file[0] == '<' || strstr(file, "/lib/python") || strstr(file, "/site-packages/") ||
           strstr(file, "/dist-packages/");
}

size_t tpprof_frames_first_python(const tpprof_frame *frames, size_t n, size_t from) {
    size_t any = n;
    for (size_t i = from; i < n; i++) {
        if (!tpprof_frame_is_python(&frames[i]))
            continue;
        if (!tpprof_frame_is_python_library(&frames[i]))
            return i;
        if (any == n)
            any = i;
    }
    return any;
}

void tpprof_py_table_free(tpprof_py_table *t) {
    if (!t)
        return;
    for (size_t i = 0; i < t->n; i++) {
        free(t->function[i]);
        free(t->file[i]);
    }
    free(t->ids);
    free(t->function);
    free(t->file);
    free(t->line);
    free(t);
}

int tpprof_py_table_load(tpprof_db *db, tpprof_py_table **out) {
    *out = NULL;
    if (!tpprof_db_has_table(db, "py_frames"))
        return 0; // not a Python program, or recorded before Python frames
    int64_t count = 0;
    if (tpprof_db_scalar(db, "SELECT COUNT(*) FROM py_frames", &count) != 0)
        return -1;
    tpprof_py_table *t = calloc(1, sizeof *t);
    size_t cap = (size_t)count + 1;
    if (t) {
        t->ids = malloc(cap * sizeof *t->ids);
        t->function = calloc(cap, sizeof *t->function);
        t->file = calloc(cap, sizeof *t->file);
        t->line = malloc(cap * sizeof *t->line);
    }
    if (!t || !t->ids || !t->function || !t->file || !t->line) {
        tpprof_py_table_free(t);
        return tpprof_error_set("out of memory reading py_frames");
    }
    sqlite3_stmt *q = NULL;
    if (sqlite3_prepare_v2(db->sql, "SELECT id, function, file, line FROM py_frames ORDER BY id", -1, &q, NULL) !=
        SQLITE_OK) {
        tpprof_py_table_free(t);
        return tpprof_db_error(db, "reading py_frames");
    }
    int rc;
    while ((rc = sqlite3_step(q)) == SQLITE_ROW && t->n < cap) {
        t->ids[t->n] = sqlite3_column_int64(q, 0);
        t->function[t->n] = tpprof_strdup((const char *)sqlite3_column_text(q, 1));
        t->file[t->n] = tpprof_strdup((const char *)sqlite3_column_text(q, 2));
        t->line[t->n] = sqlite3_column_int64(q, 3);
        t->n++;
    }
    sqlite3_finalize(q);
    if (rc != SQLITE_DONE && rc != SQLITE_ROW) {
        tpprof_py_table_free(t);
        return tpprof_db_error(db, "reading py_frames");
    }
    *out = t;
    return 0;
}

bool tpprof_py_table_find(const tpprof_py_table *t, int64_t ip, const char **function, const char **file,
                          int64_t *line) {
    if (!t || !tpprof_ip_is_python(ip))
        return false;
    ptrdiff_t i = tpprof_ids_index(t->ids, t->n, ip);
    if (i < 0)
        return false;
    *function = t->function[i];
    *file = t->file[i];
    *line = t->line[i];
    return true;
}
