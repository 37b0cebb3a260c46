// stacks.c: the stack trie and its symbols, held in memory for the length of
// one command.
//
// A recording of a busy program has tens of thousands of trie nodes; asking
// SQLite once per frame would make `report` take seconds. Instead the whole
// trie is read with one query into flat arrays sorted by id, and every
// lookup after that is a binary search. This file does not decide what is
// shown; it only answers "what are the frames of stack N".
#include "viewer.h"

#include <inttypes.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

// ---------------------------------------------------------------------------
// Model

struct tpprof_stacks {
    int64_t *ids;     // sorted ascending
    int64_t *parents;
    int64_t *ips;
    size_t n;
    tpprof_symtab symbols; // sorted by (ip, idx)
};

// ---------------------------------------------------------------------------
// Reading the nodes: stack_chunks (the recorder's, schema 3 on) or stack_nodes
// rows (older recordings, merged ones). A chunk is a JSON array whose element
// k is node first + k: a number (its ip; its parent the node before it) or
// [parent, ip] (docs/schema.md). Decoded here rather than through the
// stack_nodes view: json_each and ->> cost SQLite several times this.

// The chunks' text, read by hand (a report of a PyTorch run reads 3.7 M
// numbers): skips blanks at *p; reads a decimal number at *p (no exponent;
// a leading '-' only where the name says so), advancing *p past it, or
// returns false.
static void scan_space(const char **p) {
    while (**p == ' ' || **p == '\n' || **p == '\t' || **p == '\r')
        (*p)++;
}

static bool scan_u64(const char **p, uint64_t *out) {
    const char *s = *p;
    uint64_t v = 0;
    if (*s < '0' || *s > '9')
        return false;
    for (; *s >= '0' && *s <= '9'; s++) {
        if (v > (UINT64_MAX - (uint64_t)(*s - '0')) / 10)
            return false;
        v = v * 10 + (uint64_t)(*s - '0');
    }
    *p = s;
    *out = v;
    return true;
}

static bool scan_i64(const char **p, int64_t *out) {
    const char *s = *p;
    bool minus = *s == '-';
    uint64_t v;
    if (minus)
        s++;
    if (!scan_u64(&s, &v) || v > (minus ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX))
        return false;
    *p = s;
    *out = minus ? (int64_t)(0 - v) : (int64_t)v;
    return true;
}

#define CHUNK_DAMAGED (-2)

// The count nodes of one chunk text to fn: 0, fn's non-zero return, or
// CHUNK_DAMAGED when the text is not such an array of count nodes.
static int decode_chunk(const char *s, int64_t first, int64_t count, tpprof_node_fn fn, void *arg) {
    scan_space(&s);
    if (*s++ != '[')
        return CHUNK_DAMAGED;
    scan_space(&s);
    int64_t k = 0;
    while (*s != ']') {
        if (k > 0 && *s++ != ',')
            return CHUNK_DAMAGED;
        scan_space(&s);
        // (A merged recording's ips carry their input's number above bit
        // 48: past 32,767 inputs, a negative number, as SQLite's integers.)
        uint64_t parent = (uint64_t)(first + k - 1);
        int64_t ip;
        if (*s == '[') {
            s++;
            scan_space(&s);
            if (!scan_u64(&s, &parent))
                return CHUNK_DAMAGED;
            scan_space(&s);
            if (*s++ != ',')
                return CHUNK_DAMAGED;
            scan_space(&s);
            if (!scan_i64(&s, &ip))
                return CHUNK_DAMAGED;
            scan_space(&s);
            if (*s++ != ']')
                return CHUNK_DAMAGED;
        } else if (!scan_i64(&s, &ip)) {
            return CHUNK_DAMAGED;
        }
        if (k >= count)
            return CHUNK_DAMAGED;
        int rc = fn(arg, first + k, (int64_t)parent, ip);
        if (rc)
            return rc;
        k++;
        scan_space(&s);
    }
    s++;
    scan_space(&s);
    return *s || k != count ? CHUNK_DAMAGED : 0;
}

static bool has_chunks(tpprof_db *db) { return tpprof_db_has_table(db, "stack_chunks"); }

int tpprof_stack_nodes_each(tpprof_db *db, tpprof_node_fn fn, void *arg) {
    bool chunks = has_chunks(db);
    sqlite3_stmt *q = NULL;
    if (sqlite3_prepare_v2(db->sql,
                           chunks ? "SELECT first, count, nodes FROM stack_chunks ORDER BY first"
                                  : "SELECT id, parent, ip FROM stack_nodes ORDER BY id",
                           -1, &q, NULL) != SQLITE_OK)
        return tpprof_db_error(db, chunks ? "reading stack_chunks" : "reading stack_nodes");
    int rc, status = 0;
    while (status == 0 && (rc = sqlite3_step(q)) == SQLITE_ROW) {
        int64_t a = sqlite3_column_int64(q, 0), b = sqlite3_column_int64(q, 1);
        if (!chunks) {
            status = fn(arg, a, b, sqlite3_column_int64(q, 2));
            continue;
        }
        const char *text = (const char *)sqlite3_column_text(q, 2);
        status = text ? decode_chunk(text, a, b, fn, arg) : CHUNK_DAMAGED;
        if (status == CHUNK_DAMAGED)
            status = tpprof_error_set("'%s': stack_chunks row %" PRId64 " is damaged (not a %" PRId64
                                      "-node JSON array): not a tpprof recording's",
                                      db->path, a, b);
    }
    sqlite3_finalize(q);
    if (status == 0 && rc != SQLITE_DONE)
        return tpprof_db_error(db, chunks ? "reading stack_chunks" : "reading stack_nodes");
    return status;
}

// What a chunk's elements are: arrays of min to max integers, those of the
// bits in `nullable` possibly null; `gaps`: an element may be null (no row
// of that number); fn gets the values whose bits are in `given`.
typedef struct {
    int min, max;
    unsigned nullable, given;
    bool gaps;
} row_shape;

// A site_chunks row's elements (docs/schema.md): null (no site of that
// number) or the site's ten values (in a merged recording, any of the eight
// totals null where its input had none, and an eleventh, the process, not
// given to fn).
static const row_shape site_shape = {10, 11, 0x3fcu, 0x3ffu, true};
// A live_chunks row's elements: [address, size, kind, stack_id, tid,
// time_ns, reachability], tid and time_ns possibly null (in a merged
// recording an eighth, the process, not given to fn).
static const row_shape live_shape = {7, 8, 0x30u, 0x7fu, false};

// Whether t starts with null (past it then). Tested by its first byte
// first: a PyTorch run's 700,000 sites have 8 nullable values each, and a
// strncmp call for each was a sixth of reading them.
static inline bool scan_null(const char **t) {
    if (**t != 'n' || strncmp(*t, "null", 4) != 0)
        return false;
    *t += 4;
    return true;
}

// A chunk's text: a JSON array of count elements of the shape, each to fn;
// 0, fn's non-zero return, or CHUNK_DAMAGED.
static int decode_row_chunk(const char *t, int64_t count, const row_shape *shape, tpprof_row_fn fn, void *arg) {
    scan_space(&t);
    if (*t++ != '[')
        return CHUNK_DAMAGED;
    int64_t k = 0;
    for (scan_space(&t); *t != ']'; k++, scan_space(&t)) {
        if ((k > 0 && *t++ != ',') || k >= count)
            return CHUNK_DAMAGED;
        scan_space(&t);
        if (shape->gaps && scan_null(&t))
            continue;
        if (*t++ != '[')
            return CHUNK_DAMAGED;
        int64_t v[16];
        unsigned have = 0;
        for (int i = 0;; i++) {
            scan_space(&t);
            if (*t == ']' && i >= shape->min)
                break;
            if (i == shape->max || (i > 0 && *t++ != ','))
                return CHUNK_DAMAGED;
            scan_space(&t);
            if ((shape->nullable >> i & 1) && scan_null(&t)) {
                v[i] = 0;
                continue;
            }
            if (!scan_i64(&t, &v[i]))
                return CHUNK_DAMAGED;
            have |= 1u << i;
        }
        t++;
        int rc = fn(arg, v, have & shape->given);
        if (rc)
            return rc;
    }
    t++;
    scan_space(&t);
    return *t || k != count ? CHUNK_DAMAGED : 0;
}

static bool schema_has_table(sqlite3 *sql, const char *schema, const char *name) {
    char q[256];
    snprintf(q, sizeof q, "SELECT 1 FROM %s.sqlite_master WHERE type = 'table' AND name = '%s'", schema, name);
    sqlite3_stmt *st = NULL;
    bool found = sqlite3_prepare_v2(sql, q, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW;
    sqlite3_finalize(st);
    return found;
}

// The rows of `table` in the recording attached as `schema`, from its
// chunked form where it has one (`chunk`: first, count and the elements, of
// the shape, in column `text`), else from the table before it (its `cols`,
// the shape's min of them) one by one, to fn; `unit` says what an element
// is, for the messages.
static int chunked_rows_each(sqlite3 *sql, const char *schema, const char *path, const row_shape *shape,
                             const char *chunk, const char *text, const char *table, const char *cols,
                             const char *unit, tpprof_row_fn fn, void *arg) {
    char q[512];
    bool chunks = schema_has_table(sql, schema, chunk);
    if (chunks)
        snprintf(q, sizeof q, "SELECT first, count, %s FROM %s.%s ORDER BY first", text, schema, chunk);
    else
        snprintf(q, sizeof q, "SELECT %s FROM %s.%s", cols, schema, table);
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(sql, q, -1, &st, NULL) != SQLITE_OK)
        return tpprof_error_set("'%s': reading %s: %s", path, table, sqlite3_errmsg(sql));
    int rc, status = 0;
    while (status == 0 && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (chunks) {
            const char *t = (const char *)sqlite3_column_text(st, 2);
            status = t ? decode_row_chunk(t, sqlite3_column_int64(st, 1), shape, fn, arg) : CHUNK_DAMAGED;
            if (status == CHUNK_DAMAGED)
                status = tpprof_error_set("'%s': %s row %lld is damaged (not a JSON array of %lld %s):"
                                          " not a tpprof recording's",
                                          path, chunk, (long long)sqlite3_column_int64(st, 0),
                                          (long long)sqlite3_column_int64(st, 1), unit);
            continue;
        }
        int64_t v[16];
        unsigned have = 0;
        for (int i = 0; i < shape->min; i++) {
            v[i] = sqlite3_column_int64(st, i);
            have |= sqlite3_column_type(st, i) != SQLITE_NULL ? 1u << i : 0;
        }
        status = fn(arg, v, have);
    }
    sqlite3_finalize(st);
    if (status == 0 && rc != SQLITE_DONE)
        return tpprof_error_set("'%s': reading %s: %s", path, table, sqlite3_errmsg(sql));
    return status;
}

int tpprof_sites_each(sqlite3 *sql, const char *schema, const char *path, tpprof_site_fn fn, void *arg) {
    return chunked_rows_each(sql, schema, path, &site_shape, "site_chunks", "sites", "sites",
                             "stack_id, kind, alloc_count, alloc_bytes, free_count, freed_bytes, temp_count,"
                             " temp_bytes, peak_count, peak_bytes",
                             "sites", fn, arg);
}

int tpprof_live_each(sqlite3 *sql, const char *schema, const char *path, tpprof_live_fn fn, void *arg) {
    return chunked_rows_each(sql, schema, path, &live_shape, "live_chunks", "blocks", "live_blocks",
                             "address, size, kind, stack_id, tid, time_ns, reachability", "blocks", fn, arg);
}

int tpprof_stack_nodes_count(tpprof_db *db, int64_t *count, int64_t *max_id) {
    bool chunks = has_chunks(db);
    if (count && tpprof_db_scalar(db, chunks ? "SELECT COALESCE(SUM(count), 0) FROM stack_chunks"
                                             : "SELECT COUNT(*) FROM stack_nodes", count) != 0)
        return -1;
    if (max_id && tpprof_db_scalar(db, chunks ? "SELECT COALESCE(MAX(first + count - 1), 0) FROM stack_chunks"
                                              : "SELECT COALESCE(MAX(id), 0) FROM stack_nodes", max_id) != 0)
        return -1;
    return 0;
}

// One node into the arrays (no more than they hold: a count read before).
struct loading {
    tpprof_stacks *st;
    size_t cap;
};

static int load_one(void *arg, int64_t id, int64_t parent, int64_t ip) {
    struct loading *l = arg;
    tpprof_stacks *st = l->st;
    if (st->n == l->cap)
        return 0;
    st->ids[st->n] = id;
    st->parents[st->n] = parent;
    st->ips[st->n] = ip;
    st->n++;
    return 0;
}

static int load_nodes(tpprof_db *db, tpprof_stacks *st) {
    int64_t count = 0;
    if (tpprof_stack_nodes_count(db, &count, NULL) != 0)
        return -1;
    size_t cap = (size_t)count + 1;
    st->ids = malloc(cap * sizeof *st->ids);
    st->parents = malloc(cap * sizeof *st->parents);
    st->ips = malloc(cap * sizeof *st->ips);
    if (!st->ids || !st->parents || !st->ips)
        return tpprof_error_set("out of memory loading %" PRId64 " stack nodes", count);
    struct loading l = {st, cap};
    return tpprof_stack_nodes_each(db, load_one, &l);
}

tpprof_stacks *tpprof_stacks_load(tpprof_db *db, tpprof_symtab *symbols) {
    tpprof_stacks *st = calloc(1, sizeof *st);
    if (!st) {
        tpprof_error_set("out of memory");
        return NULL;
    }
    if (load_nodes(db, st) != 0) {
        tpprof_stacks_free(st);
        return NULL;
    }
    st->symbols = *symbols;
    memset(symbols, 0, sizeof *symbols);
    return st;
}

const int64_t *tpprof_stacks_ips(const tpprof_stacks *st, size_t *n) {
    *n = st->n;
    return st->ips;
}

void tpprof_stacks_take_symbols(tpprof_stacks *st, tpprof_symtab *symbols) {
    tpprof_symtab_free(&st->symbols);
    st->symbols = *symbols;
    memset(symbols, 0, sizeof *symbols);
}

void tpprof_stacks_free(tpprof_stacks *st) {
    if (!st)
        return;
    free(st->ids);
    free(st->parents);
    free(st->ips);
    tpprof_symtab_free(&st->symbols);
    free(st);
}

// ---------------------------------------------------------------------------
// Lookups

ptrdiff_t tpprof_ids_index(const int64_t *ids, size_t n, int64_t id) {
    // Recorders number nodes 1, 2, 3, ... (a merge's inputs too): where the
    // ids are dense from the first, id's slot is its distance from it, and
    // the search is left for the rest (a merge's stack map was looked up so
    // for every node, site and live block: a sixth of a build's merge).
    if (n && id >= ids[0]) {
        uint64_t d = (uint64_t)id - (uint64_t)ids[0];
        if (d < n && ids[d] == id)
            return (ptrdiff_t)d;
    }
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ids[mid] < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && ids[lo] == id ? (ptrdiff_t)lo : -1;
}

// Index of the first symbol row of ip, or -1.
static ptrdiff_t find_symbol(const tpprof_stacks *st, int64_t ip) {
    size_t i = tpprof_symtab_first(&st->symbols, ip);
    return i < st->symbols.n && st->symbols.rows[i].ip == ip ? (ptrdiff_t)i : -1;
}

static bool is_own_frame(const char *module) {
    return module && strcmp(tpprof_basename(module), "libtpprof.so") == 0;
}

size_t tpprof_stacks_frames(const tpprof_stacks *st, int64_t stack_id, tpprof_frame *out,
                            size_t cap, size_t *total) {
    size_t n = 0, all = 0;
    // A damaged trie could loop; no real stack is longer than the node count.
    size_t guard = st->n + 1;
    while (stack_id != 0 && guard-- > 0) {
        ptrdiff_t node = tpprof_ids_index(st->ids, st->n, stack_id);
        if (node < 0)
            break;
        int64_t ip = st->ips[node];
        ptrdiff_t s = find_symbol(st, ip);
        if (s < 0) {
            if (n < cap)
                out[n++] = (tpprof_frame){.ip = ip};
            all++;
        } else {
            for (size_t i = (size_t)s; i < st->symbols.n && st->symbols.rows[i].ip == ip; i++) {
                const tpprof_symbol *sym = &st->symbols.rows[i];
                if (is_own_frame(sym->module))
                    continue;
                if (n < cap)
                    out[n++] = (tpprof_frame){
                        .ip = ip,
                        .function = sym->function,
                        .file = sym->file,
                        .line = sym->line,
                        .module = sym->module,
                    };
                all++;
            }
        }
        stack_id = st->parents[node];
    }
    if (total)
        *total = all;
    return n;
}

// ---------------------------------------------------------------------------
// Formatting

char *tpprof_frame_format(const tpprof_frame *f, char *buf, size_t size) {
    if (f->function && f->file && f->line > 0)
        snprintf(buf, size, "%s (%s:%" PRId64 ")", f->function, tpprof_basename(f->file), f->line);
    else if (f->function && f->module)
        snprintf(buf, size, "%s (%s)", f->function, tpprof_basename(f->module));
    else if (f->function)
        snprintf(buf, size, "%s", f->function);
    else if (f->module)
        snprintf(buf, size, "0x%" PRIx64 " (%s)", (uint64_t)f->ip, tpprof_basename(f->module));
    else
        snprintf(buf, size, "0x%" PRIx64, (uint64_t)f->ip);
    return buf;
}

char *tpprof_stacks_describe(const tpprof_stacks *st, int64_t stack_id, char *buf, size_t size) {
    tpprof_frame f;
    if (tpprof_stacks_frames(st, stack_id, &f, 1, NULL) == 0) {
        snprintf(buf, size, "(no stack)");
        return buf;
    }
    return tpprof_frame_format(&f, buf, size);
}

// ---------------------------------------------------------------------------
// The tensor runtime's own frames
//
// A reference, tensor or allocator event is recorded from inside the
// runtime (tp_storage_retain, the caching allocator's helpers...): the frame
// a reader wants is the first one outside it. The runtime is recognized by
// its library's name or its tp_ prefix (STYLE.md), not by any header.

bool tpprof_frame_is_runtime(const tpprof_frame *f) {
    if (f->module && strncmp(tpprof_basename(f->module), "libtensorplay", 13) == 0)
        return true;
    return f->function && strncmp(f->function, "tp_", 3) == 0;
}

bool tpprof_frame_is_stdlib(const tpprof_frame *f) {
    static const char *const prefixes[] = {"alloc::", "core::", "std::", "<alloc::", "<core::", "<std::",
                                           "__rust_", "__rdl_", "__gnu_cxx::", "operator new"};
    const char *fn = f->function;
    if (!fn)
        return false;
    for (size_t i = 0; i < sizeof prefixes / sizeof *prefixes; i++)
        if (strncmp(fn, prefixes[i], strlen(prefixes[i])) == 0)
            return true;
    // Rust's "<T as alloc::...::Trait>::method" (a standard trait's impl).
    return fn[0] == '<' && (strstr(fn, " as alloc::") || strstr(fn, " as core::") || strstr(fn, " as std::"));
}

size_t tpprof_frames_past_stdlib(const tpprof_frame *frames, size_t n, size_t from) {
    while (from < n && tpprof_frame_is_stdlib(&frames[from]))
        from++;
    return from;
}

size_t tpprof_stacks_first_caller(const tpprof_frame *frames, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!tpprof_frame_is_runtime(&frames[i]))
            return i;
    return 0; // all inside the runtime: show them all
}

char *tpprof_stacks_describe_caller(const tpprof_stacks *st, int64_t stack_id, char *buf,
                                    size_t size) {
    static tpprof_frame frames[256];
    size_t n = tpprof_stacks_frames(st, stack_id, frames, 256, NULL);
    if (n == 0) {
        snprintf(buf, size, "(no stack)");
        return buf;
    }
    // Past the runtime's frames, and past a standard library's (operator new,
    // Rust's alloc::): "the biggest leak is in" the program's own code.
    size_t py = tpprof_frames_first_python(frames, n, 0);
    if (py < n) // a Python program: its innermost line of its own (pyframes.c)
        return tpprof_frame_format(&frames[py], buf, size);
    size_t i = tpprof_stacks_first_caller(frames, n), j = tpprof_frames_past_stdlib(frames, n, i);
    return tpprof_frame_format(&frames[j < n ? j : i], buf, size);
}
