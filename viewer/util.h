// util.h: the base every viewer file stands on: the error message, exit statuses, sizes and numbers (util.c).
// Private to viewer/; viewer.h includes every header of the viewer.
#ifndef TPPROF_VIEWER_UTIL_H
#define TPPROF_VIEWER_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct sqlite3 sqlite3;

// The newest schema this viewer reads (docs/schema.md): TPPROF_SCHEMA_VERSION,
// defined by the build (meson.build), as for the recorder that writes it.
#ifndef TPPROF_SCHEMA_VERSION
#error "TPPROF_SCHEMA_VERSION is defined by the build (meson.build)"
#endif

// Exit statuses of report/check: 0 ok, 1 a gate failed, 2 usage or input error.
enum {
    TPPROF_EXIT_OK = 0,
    TPPROF_EXIT_FAIL = 1,
    TPPROF_EXIT_USAGE = 2,
};

// ---------------------------------------------------------------------------
// util.c

// Set the thread-local error message (printf-style). Returns -1 for `return
// tpprof_error_set(...)` convenience.
int tpprof_error_set(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
// The last message; borrowed, valid until the next tpprof_error_set on this thread.
const char *tpprof_error(void);

// Parse a byte size: digits with an optional suffix k, M, G, T (powers of
// 1024, any case, optional trailing "B"/"iB"). Returns 0, or -1 with an error
// naming `what` (e.g. "--max-lost-bytes").
int tpprof_parse_size(const char *what, const char *s, uint64_t *out);
// Parse a non-negative decimal integer (no suffix).
int tpprof_parse_count(const char *what, const char *s, uint64_t *out);
// Parse a non-negative decimal number, possibly fractional, optional '%'.
int tpprof_parse_percent(const char *what, const char *s, double *out);

// Human-readable size: "512 B", "4.0 KiB", "1.25 MiB". Writes into buf, returns buf.
char *tpprof_format_size(uint64_t bytes, char buf[32]);
// Integer with thousands separators: "1,234,567". Writes into buf, returns buf.
char *tpprof_format_count(uint64_t n, char buf[32]);

// Basename of a path (borrowed pointer into path).
const char *tpprof_basename(const char *path);

// Command-line option with a value: if argv[*i] is `name` (value in the next
// argument, *i advanced) or `name=VALUE`, set *value and return 1; return 0
// if argv[*i] is another argument; -1 + error when the value is missing.
int tpprof_opt(int argc, char **argv, int *i, const char *name, const char **value);
// An argument that no option of `command` took: an unknown option (it starts
// with '-' and is not "-") or the database, which may be named once (*path
// is set). 0, or -1 + error.
int tpprof_opt_database(const char *command, const char *arg, const char **path);

// strdup that returns NULL for NULL.
char *tpprof_strdup(const char *s);

// Room for one more element in an array v of n elements of `size` bytes with
// *cap allocated: v while n < *cap, else v reallocated to twice *cap (16 at
// first) and *cap updated. Returns the array to use from now on, or NULL +
// error, v then untouched and still the caller's to free.
void *tpprof_grow(void *v, size_t n, size_t *cap, size_t size);

// A set of 64-bit keys, 0 never one (open addressing, doubled at half
// full): the distinct ips of stack nodes (symbolize.c), a merge input's new
// ones (cmd_merge.c). Zero-initialized empty; tpprof_u64_set_free releases.
typedef struct tpprof_u64_set {
    uint64_t *slots;
    size_t cap, n;
} tpprof_u64_set;
// 1 when key was added, 0 when it was there already, -1 out of memory.
int tpprof_u64_set_add(tpprof_u64_set *s, uint64_t key);
bool tpprof_u64_set_has(const tpprof_u64_set *s, uint64_t key);
void tpprof_u64_set_clear(tpprof_u64_set *s); // empty, its memory kept
void tpprof_u64_set_free(tpprof_u64_set *s);

#endif
