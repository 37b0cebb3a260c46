// cmd_merge.c: `tpprof merge OUT.db IN.db...`: the recordings of one job
// (ranks of a training run, the processes of a build) combined into one
// database that every command reads as one program, with a `processes`
// table and a `process` column on `sites`, `live_blocks` and `threads`, so
// "which process leaks" is one query (docs/schema.md, "Merged recordings").
//
// The inputs' stack tries are folded into one (merge_trie.c): a stack the
// processes share is stored once, its frames compared as module + offset
// since ASLR puts the same code at other addresses in each process. A
// node's raw return address is its first input's, tagged with that input's
// number in the bits above 48 (x86-64 user addresses fit in 47), and only
// those addresses' symbols are copied from an input that has them. The
// frames no input named (inputs merged as they are: `tpprof merge`, `run`'s
// fold) are symbolized once in the merged recording, each (module,
// offset) once for all the processes (tpprof_symbolize_merged); `report`'s
// merge of several recordings symbolizes each input first, in place, so
// that the next report reads their saved symbols. Device memory
// (device_blocks, device_events) is merged with a process column, as the
// host's live blocks are, when an input has it. The merged stack nodes and
// sites are kept in chunks, as a recording keeps them (schema 5), written
// here a chunk row at a time. Left out: timelines (the device timeline too), full-mode events and
// tensor tables, whose times and ids belong to one process; a process's own
// recording has them.
#define _POSIX_C_SOURCE 200809L
#include "viewer.h"
#include "merge_trie.h"

#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char tpprof_usage_merge[] =
    "usage: tpprof merge OUT.db IN.db...\n"
    "\n"
    "Combine the recordings of one job (its ranks, its processes) into OUT.db, a new\n"
    "file, which report and check read as one program: the leaks, sites and peaks of\n"
    "all of them, and a processes table (pid, parent, exe, command line, rank) with a\n"
    "process column on sites, live_blocks and threads for per-process questions.\n"
    "Device memory (CUDA blocks and calls) is merged too; timelines, full-mode events\n"
    "and tensor tables are not.\n";

static const char merged_schema[] =
    "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);"
    "CREATE TABLE kinds(id INTEGER PRIMARY KEY, name TEXT NOT NULL);"
    "CREATE TABLE modules(id INTEGER PRIMARY KEY, path TEXT NOT NULL, build_id TEXT, base INTEGER NOT NULL,"
    "  lo INTEGER NOT NULL, hi INTEGER NOT NULL, loaded_ns INTEGER, unloaded_ns INTEGER, process INTEGER);"
    // The stack trie and the sites in chunks, as a recording keeps them
    // (docs/schema.md), stack_nodes and sites views of them; a site's
    // process is its array's eleventh element. One row a node and a site
    // was most of a merge's time: 8.5 of the 11.9 s of one PyTorch run's
    // (3.7 M nodes, each a row and a row of a temp table of new ips, and
    // 700,000 sites).
    "CREATE TABLE stack_chunks(first INTEGER PRIMARY KEY, count INTEGER NOT NULL, nodes TEXT NOT NULL);"
    "CREATE VIEW stack_nodes(id, parent, ip) AS SELECT c.first + j.key,"
    "  CASE j.type WHEN 'array' THEN j.value ->> 0 ELSE c.first + j.key - 1 END,"
    "  CASE j.type WHEN 'array' THEN j.value ->> 1 ELSE j.value END FROM stack_chunks c, json_each(c.nodes) j;"
    "CREATE TABLE symbols(ip INTEGER NOT NULL, idx INTEGER NOT NULL, function TEXT, file TEXT, line INTEGER,"
    "  module TEXT, PRIMARY KEY (ip, idx)) WITHOUT ROWID;"
    "CREATE TABLE threads(tid INTEGER, name TEXT, first_ns INTEGER, last_ns INTEGER, process INTEGER);"
    "CREATE TABLE site_chunks(first INTEGER PRIMARY KEY, count INTEGER NOT NULL, sites TEXT NOT NULL);"
    "CREATE VIEW sites(stack_id, kind, alloc_count, alloc_bytes, free_count, freed_bytes, temp_count, temp_bytes,"
    "  peak_count, peak_bytes, process) AS SELECT j.value ->> 0, j.value ->> 1, j.value ->> 2, j.value ->> 3,"
    "  j.value ->> 4, j.value ->> 5, j.value ->> 6, j.value ->> 7, j.value ->> 8, j.value ->> 9, j.value ->> 10"
    "  FROM site_chunks c, json_each(c.sites) j WHERE j.type = 'array';"
    "CREATE TABLE live_chunks(first INTEGER PRIMARY KEY, count INTEGER NOT NULL, blocks TEXT NOT NULL);"
    "CREATE VIEW live_blocks(address, size, kind, stack_id, tid, time_ns, reachability, process) AS SELECT"
    "  j.value ->> 0, j.value ->> 1, j.value ->> 2, j.value ->> 3, j.value ->> 4, j.value ->> 5, j.value ->> 6,"
    "  j.value ->> 7 FROM live_chunks c, json_each(c.blocks) j;"
    "CREATE TABLE processes(id INTEGER PRIMARY KEY, path TEXT NOT NULL, pid INTEGER, parent_pid INTEGER,"
    "  exe TEXT, cmdline TEXT, rank INTEGER, complete INTEGER, peak_bytes INTEGER, duration_ns INTEGER);"
    // Each input's device meta, for the merged meta (write_meta).
    "CREATE TEMP TABLE device_meta(process INTEGER, capture TEXT, calls_failed INTEGER, bad_frees INTEGER);";


// The device tables, made once an input has them (a merge of host-only
// recordings has none, and reads as before).
static const char device_schema[] =
    "CREATE TABLE IF NOT EXISTS device_events(seq INTEGER PRIMARY KEY, time_ns INTEGER NOT NULL, tid INTEGER NOT NULL,"
    "  op INTEGER NOT NULL, api TEXT NOT NULL, kind INTEGER NOT NULL, device INTEGER NOT NULL, stream INTEGER,"
    "  pool INTEGER, address INTEGER, size INTEGER, stack_id INTEGER NOT NULL, result INTEGER NOT NULL,"
    "  flag INTEGER NOT NULL DEFAULT 0, process INTEGER NOT NULL);"
    "CREATE TABLE IF NOT EXISTS device_blocks(address INTEGER NOT NULL, device INTEGER NOT NULL, kind INTEGER NOT NULL,"
    "  size INTEGER NOT NULL, api TEXT NOT NULL, stream INTEGER, stack_id INTEGER NOT NULL, tid INTEGER,"
    "  alloc_ns INTEGER NOT NULL, free_ns INTEGER, free_stack_id INTEGER, free_api TEXT, ended_by TEXT,"
    "  process INTEGER NOT NULL);";
// Device site totals (aggregate recordings since device_sites: their blocks
// past a site's first 1,024 are not rows), made once an input has them.
// Each process keeps its rows (the process column), on shared stacks; a
// device's peak read from them is the sum of the processes' peaks, as the
// host peak of a merge is.
static const char device_sites_schema[] =
    "CREATE TABLE IF NOT EXISTS device_sites(stack_id INTEGER NOT NULL, kind INTEGER NOT NULL, device INTEGER NOT NULL,"
    "  api TEXT NOT NULL, alloc_count INTEGER NOT NULL, alloc_bytes INTEGER NOT NULL, free_count INTEGER NOT NULL,"
    "  freed_bytes INTEGER NOT NULL, peak_count INTEGER NOT NULL, peak_bytes INTEGER NOT NULL,"
    "  total_peak_count INTEGER NOT NULL, total_peak_bytes INTEGER NOT NULL, process INTEGER NOT NULL);";

// Rows a chunk: the recorder's sizes (store.c).
#define CHUNK_NODES 8192
#define CHUNK_SITES 256
#define CHUNK_BLOCKS 256

// A stack id of the input as the merged trie's (merged_stack(), below);
// 0, and an id no node has, read as no stack.
#define STACK(col) "merged_stack(" col ")"

// One input copied into the attached output. ?1 = the input's number,
// ?3 = its module id offset.
static const char *const copy_sql[] = {
    // Only the symbols of the nodes this input added (new_ip()): a stack it
    // shares with an earlier input is named by that input's.
    "INSERT INTO main.symbols SELECT (?1 << 48) | (ip & 281474976710655), idx, function, file, line, module"
    "  FROM src.symbols WHERE new_ip(ip & 281474976710655) ON CONFLICT DO NOTHING",
    // An input merged unsymbolized (tpprof_merge's symbolize_inputs false):
    // its Python frames' names, which only its py_frames has (what
    // tpprof_symbolize would have written for them); its native frames are
    // named with the merged recording's (tpprof_symbolize_merged).
    "INSERT INTO main.symbols SELECT (?1 << 48) | (id & 281474976710655), 0, function, file, line, NULL"
    "  FROM src.py_frames WHERE new_ip(id & 281474976710655)"
    "  AND NOT EXISTS (SELECT 1 FROM src.symbols) ON CONFLICT DO NOTHING",
    "INSERT INTO main.modules SELECT id + ?3, path, build_id, base, lo, hi, loaded_ns, unloaded_ns, ?1"
    "  FROM src.modules",
    "INSERT OR IGNORE INTO main.kinds SELECT id, name FROM src.kinds",
    "INSERT INTO main.threads SELECT tid, name, first_ns, last_ns, ?1 FROM src.threads",
    "INSERT INTO main.processes SELECT ?1, ?4,"
    "  (SELECT value FROM src.meta WHERE key = 'pid'), (SELECT value FROM src.meta WHERE key = 'ppid'),"
    "  (SELECT value FROM src.meta WHERE key = 'exe'), (SELECT value FROM src.meta WHERE key = 'cmdline'),"
    "  (SELECT value FROM src.meta WHERE key = 'rank'), (SELECT value FROM src.meta WHERE key = 'complete'),"
    "  (SELECT value FROM src.meta WHERE key = 'peak_bytes'), (SELECT value FROM src.meta WHERE key = 'duration_ns')",
    "INSERT INTO main.device_events(time_ns, tid, op, api, kind, device, stream, pool, address, size, stack_id, result,"
    "  flag, process) SELECT time_ns, tid, op, api, kind, device, stream, pool, address, size,"
    "  " STACK("stack_id") ", result, flag, ?1 FROM src.device_events ORDER BY seq",
    "INSERT INTO main.device_blocks SELECT address, device, kind, size, api, stream,"
    "  " STACK("stack_id") ", tid, alloc_ns, free_ns,"
    "  CASE WHEN free_stack_id IS NULL OR free_stack_id = 0 THEN free_stack_id ELSE " STACK("free_stack_id") " END,"
    "  free_api, ended_by, ?1 FROM src.device_blocks",
    "INSERT INTO main.device_sites SELECT " STACK("stack_id") ", kind, device, api,"
    "  alloc_count, alloc_bytes, free_count, freed_bytes, peak_count, peak_bytes, total_peak_count, total_peak_bytes,"
    "  ?1 FROM src.device_sites",
    "INSERT INTO temp.device_meta SELECT ?1, (SELECT value FROM src.meta WHERE key = 'device_capture'),"
    "  (SELECT value FROM src.meta WHERE key = 'device_calls_failed'),"
    "  (SELECT value FROM src.meta WHERE key = 'device_bad_frees')"
    "  WHERE EXISTS (SELECT 1 FROM src.meta WHERE key = 'device_capture')",
};

static int exec(sqlite3 *db, const char *sql, const char *doing) {
    char *msg = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK) {
        tpprof_error_set("%s: %s", doing, msg ? msg : sqlite3_errmsg(db));
        sqlite3_free(msg);
        return -1;
    }
    return 0;
}

static int64_t scalar(sqlite3 *db, const char *sql) {
    sqlite3_stmt *st = NULL;
    int64_t v = 0;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
        v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
}

struct tpprof_merging {
    sqlite3 *out;
    char *path; // owned
    tpprof_trie *trie;
    tpprof_trie_input in; // the input being copied: merged_stack()'s data
    tpprof_u64_set new_ips; // its new nodes' raw ips + 1 (whose symbols are copied): new_ip()'s data
    int64_t sites;        // the site rows written (the next is number sites + 1)
    int64_t blocks;       // the live blocks written (the next is number blocks + 1)
    int64_t last;         // the highest process number given
    size_t n;             // inputs copied
};

// new_ip(ip): whether ip is the raw ip of a node the input being copied added.
static void new_ip(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
    (void)argc;
    const tpprof_u64_set *t = sqlite3_user_data(ctx);
    sqlite3_result_int(ctx, tpprof_u64_set_has(t, (uint64_t)sqlite3_value_int64(argv[0]) + 1));
}

// Chunk rows' text (the recorder's format, docs/schema.md): a growing buffer.
typedef struct text_buf {
    char *p;
    size_t len, cap;
} text_buf;

static bool text_room(text_buf *b, size_t more) {
    if (b->len + more + 1 <= b->cap)
        return true;
    size_t cap = b->cap ? b->cap : 4096;
    while (b->len + more + 1 > cap)
        cap *= 2;
    char *n = realloc(b->p, cap);
    if (!n)
        return false;
    b->p = n;
    b->cap = cap;
    return true;
}

// Appends v in decimal (room for 21 characters made by the caller).
static void text_i64(text_buf *b, int64_t v) {
    char tmp[24];
    uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    int n = 0;
    do {
        tmp[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        b->p[b->len++] = '-';
    while (n)
        b->p[b->len++] = tmp[--n];
}

static int put_chunk(sqlite3_stmt *st, int64_t first, int64_t count, const text_buf *b) {
    sqlite3_bind_int64(st, 1, first);
    sqlite3_bind_int64(st, 2, count);
    sqlite3_bind_text(st, 3, b->p, (int)b->len, SQLITE_STATIC);
    int rc = sqlite3_step(st);
    sqlite3_reset(st);
    return rc == SQLITE_DONE ? 0 : -1;
}

// merged_stack(id): the merged id of the input's stack id (the function's
// data: the tpprof_trie_input of the input being copied), 0 when no node of
// the input has it. A function rather than a temp table of the map: a
// build's million node ids inserted one by one cost more than the lookups.
static void merged_stack(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
    (void)argc;
    const tpprof_trie_input *in = sqlite3_user_data(ctx);
    ptrdiff_t i = tpprof_ids_index(in->old_ids, in->n, sqlite3_value_int64(argv[0]));
    sqlite3_result_int64(ctx, i < 0 ? 0 : in->new_ids[i]);
}

// Fold input k's stack trie into m's: its new nodes into main.stack_chunks,
// their raw ips into m->new_ips, the map of its ids into m->in (the output
// is in a transaction). open: the input, open already (borrowed), or NULL.
static int fold_stacks(tpprof_merging *m, const char *path, int64_t k, tpprof_db *open) {
    sqlite3 *out = m->out;
    tpprof_trie *trie = m->trie;
    tpprof_trie_input *in = &m->in;
    tpprof_db *db = open ? open : tpprof_db_open(path, false);
    if (!db)
        return -1;
    // Its addresses already carry process tags, which a second merge would
    // overwrite: two of its processes' stacks would read as one.
    char *merged = tpprof_db_meta(db, "merged");
    free(merged);
    int status = merged ? tpprof_error_set("%s is a merged recording: merge the recordings it was made of", path)
                        : tpprof_trie_add(trie, db, k, in);
    if (db != open)
        tpprof_db_close(db);
    if (merged)
        return status;
    if (status != 0) { // say which input
        char *why = strdup(tpprof_error());
        tpprof_error_set("%s: %s", path, why ? why : "out of memory");
        free(why);
    }
    // Its new nodes (consecutive ids, from the merged trie's count on) as
    // stack_chunks rows of up to CHUNK_NODES, each node its ip alone when
    // its parent is the node before it, else [parent, ip].
    tpprof_u64_set_clear(&m->new_ips);
    sqlite3_stmt *st = NULL;
    text_buf b = {0};
    if (status == 0 && sqlite3_prepare_v2(out, "INSERT INTO main.stack_chunks VALUES (?1, ?2, ?3)", -1, &st, NULL) !=
                           SQLITE_OK)
        status = tpprof_error_set("folding the stacks of %s: %s", path, sqlite3_errmsg(out));
    for (size_t i = 0; i < in->nnodes && status == 0;) {
        int64_t first = in->nodes[i].id, count = 0;
        b.len = 0;
        if (!text_room(&b, 1)) {
            status = tpprof_error_set("out of memory folding the stacks of %s", path);
            break;
        }
        b.p[b.len++] = '[';
        for (; i < in->nnodes && count < CHUNK_NODES && in->nodes[i].id == first + count; i++, count++) {
            const tpprof_trie_node *n = &in->nodes[i];
            if (!text_room(&b, 48) || tpprof_u64_set_add(&m->new_ips, n->raw + 1) < 0) {
                status = tpprof_error_set("out of memory folding the stacks of %s", path);
                break;
            }
            if (count)
                b.p[b.len++] = ',';
            if (n->parent == n->id - 1) {
                text_i64(&b, n->ip);
            } else {
                b.p[b.len++] = '[';
                text_i64(&b, n->parent);
                b.p[b.len++] = ',';
                text_i64(&b, n->ip);
                b.p[b.len++] = ']';
            }
        }
        if (status != 0)
            break;
        b.p[b.len++] = ']';
        if (put_chunk(st, first, count, &b) != 0)
            status = tpprof_error_set("folding the stacks of %s: %s", path, sqlite3_errmsg(out));
    }
    sqlite3_finalize(st);
    free(b.p);
    return status;
}

// ---------------------------------------------------------------------------
// Sites

// Two of an input's stacks may fold into one (a module loaded twice at two
// addresses): their sites are summed, as SQL's SUM would (NULL when every
// value is). Summed here in a hash keyed (merged stack, kind), then written
// in (stack, kind) order: a GROUP BY on merged_stack() in SQL sorted every
// row and the rows went into the (stack_id, kind, process) key in random
// places, half of a build's merge (169 recordings, 299,000 sites: 0.68 of
// 1.34 s). The table has no key, as the recorder's has none: each
// (process, stack_id, kind) is one row by construction (one input, summed
// here), and readers scan it whole; keyed (process, stack_id, kind), its
// index was 0.12 of the 0.82 s of CPU left.
#define SITE_COLS 8
typedef struct site_sum {
    int64_t stack, kind; // stack 0: empty slot (a site of no stack is stack -1 here)
    int64_t v[SITE_COLS];
    unsigned have; // bit c: column c had a value
} site_sum;

typedef struct site_sums {
    site_sum *slots;
    size_t cap, used;
} site_sums;

static uint64_t site_hash(int64_t stack, int64_t kind) {
    uint64_t h = (uint64_t)stack * UINT64_C(0x9E3779B97F4A7C15) ^ (uint64_t)kind * UINT64_C(0xC2B2AE3D27D4EB4F);
    return h ^ (h >> 31);
}

static site_sum *site_slot(site_sums *t, int64_t stack, int64_t kind) {
    if ((t->used + 1) * 2 > t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 1024;
        site_sum *s = calloc(cap, sizeof *s);
        if (!s)
            return NULL;
        for (size_t i = 0; i < t->cap; i++) {
            if (!t->slots[i].stack)
                continue;
            size_t j = site_hash(t->slots[i].stack, t->slots[i].kind) & (cap - 1);
            while (s[j].stack)
                j = (j + 1) & (cap - 1);
            s[j] = t->slots[i];
        }
        free(t->slots);
        t->slots = s;
        t->cap = cap;
    }
    size_t j = site_hash(stack, kind) & (t->cap - 1);
    for (; t->slots[j].stack; j = (j + 1) & (t->cap - 1))
        if (t->slots[j].stack == stack && t->slots[j].kind == kind)
            return &t->slots[j];
    t->slots[j] = (site_sum){.stack = stack, .kind = kind};
    t->used++;
    return &t->slots[j];
}

static int cmp_site(const void *a, const void *b) {
    const site_sum *x = a, *y = b;
    int64_t xs = x->stack < 0 ? 0 : x->stack, ys = y->stack < 0 ? 0 : y->stack; // -1 is stack 0
    if (xs != ys)
        return xs < ys ? -1 : 1;
    return (x->kind > y->kind) - (x->kind < y->kind);
}

// copy_sites' sums under way, a site at a time (tpprof_sites_each).
struct summing {
    site_sums t;
    const tpprof_trie_input *in;
};

static int sum_site(void *arg, const int64_t v[10], unsigned have) {
    struct summing *m = arg;
    ptrdiff_t i = tpprof_ids_index(m->in->old_ids, m->in->n, v[0]);
    int64_t stack = i < 0 ? 0 : m->in->new_ids[i];
    site_sum *s = site_slot(&m->t, stack ? stack : -1, v[1]);
    if (!s)
        return tpprof_error_set("out of memory merging sites");
    for (int c = 0; c < SITE_COLS; c++)
        if (have & (1u << (2 + c))) {
            s->v[c] += v[2 + c];
            s->have |= 1u << c;
        }
    return 0;
}

// Input k's sites (attached as src) into main.sites, their stacks mapped by in.
static int copy_sites(tpprof_merging *mg, const char *path, int64_t k) {
    sqlite3 *out = mg->out;
    sqlite3_stmt *wr = NULL;
    struct summing m = {.in = &mg->in};
    int status = tpprof_sites_each(out, "src", path, sum_site, &m);
    if (status == 0 &&
        sqlite3_prepare_v2(out, "INSERT INTO main.site_chunks VALUES (?1, ?2, ?3)", -1, &wr, NULL) != SQLITE_OK)
        status = tpprof_error_set("merging the sites of %s: %s", path, sqlite3_errmsg(out));
    site_sums *t = &m.t;
    // Packed to the front, written in (stack, kind) order, as site_chunks
    // rows of up to CHUNK_SITES, numbered on from the inputs before: each
    // site [stack_id, kind, the eight totals (null where the input had
    // none), process].
    size_t n = 0;
    for (size_t i = 0; i < t->cap && status == 0; i++)
        if (t->slots[i].stack)
            t->slots[n++] = t->slots[i];
    if (n)
        qsort(t->slots, n, sizeof *t->slots, cmp_site);
    text_buf b = {0};
    for (size_t i = 0; i < n && status == 0;) {
        int64_t first = mg->sites + 1 + (int64_t)i, count = 0;
        b.len = 0;
        for (; i < n && count < CHUNK_SITES; i++, count++) {
            const site_sum *x = &t->slots[i];
            if (!text_room(&b, 12 * 22)) {
                status = tpprof_error_set("out of memory merging the sites of %s", path);
                break;
            }
            b.p[b.len++] = count ? ',' : '[';
            b.p[b.len++] = '[';
            text_i64(&b, x->stack < 0 ? 0 : x->stack);
            b.p[b.len++] = ',';
            text_i64(&b, x->kind);
            for (int c = 0; c < SITE_COLS; c++) {
                b.p[b.len++] = ',';
                if (x->have & (1u << c)) {
                    text_i64(&b, x->v[c]);
                } else {
                    memcpy(b.p + b.len, "null", 4);
                    b.len += 4;
                }
            }
            b.p[b.len++] = ',';
            text_i64(&b, k);
            b.p[b.len++] = ']';
        }
        if (status != 0)
            break;
        b.p[b.len++] = ']';
        if (put_chunk(wr, first, count, &b) != 0)
            status = tpprof_error_set("merging the sites of %s: %s", path, sqlite3_errmsg(out));
    }
    if (status == 0)
        mg->sites += (int64_t)n;
    free(b.p);
    sqlite3_finalize(wr);
    free(t->slots);
    return status;
}

// copy_live's chunk under way, a block at a time (tpprof_live_each).
struct living {
    tpprof_merging *mg;
    sqlite3_stmt *wr;
    text_buf b;
    int64_t process, count;
    const char *path;
};

// The chunk under way into main.live_chunks, numbered on from the blocks before.
static int put_live_chunk(struct living *l) {
    if (!l->count)
        return 0;
    l->b.p[l->b.len++] = ']';
    if (put_chunk(l->wr, l->mg->blocks + 1, l->count, &l->b) != 0)
        return tpprof_error_set("merging the live blocks of %s: %s", l->path, sqlite3_errmsg(l->mg->out));
    l->mg->blocks += l->count;
    l->count = 0;
    l->b.len = 0;
    return 0;
}

static int put_live(void *arg, const int64_t v[7], unsigned have) {
    struct living *l = arg;
    const tpprof_trie_input *in = &l->mg->in;
    if (!text_room(&l->b, 9 * 22))
        return tpprof_error_set("out of memory merging the live blocks of %s", l->path);
    text_buf *b = &l->b;
    b->p[b->len++] = l->count ? ',' : '[';
    b->p[b->len++] = '[';
    for (int c = 0; c < 7; c++) {
        if (c)
            b->p[b->len++] = ',';
        if (c == 3) {
            ptrdiff_t i = tpprof_ids_index(in->old_ids, in->n, v[3]);
            text_i64(b, i < 0 ? 0 : in->new_ids[i]);
        } else if (have & (1u << c)) {
            text_i64(b, v[c]);
        } else {
            memcpy(b->p + b->len, "null", 4);
            b->len += 4;
        }
    }
    b->p[b->len++] = ',';
    text_i64(b, l->process);
    b->p[b->len++] = ']';
    return ++l->count == CHUNK_BLOCKS ? put_live_chunk(l) : 0;
}

// Input k's blocks alive at the end (attached as src) into main.live_chunks,
// in its order, their stacks mapped by the input's map, each [the seven
// values of a recording's, process] (a row per block, from the view's
// json_each and seven ->>, doubled a build's fold; a row per block from C
// cost a third more than the table copy before).
static int copy_live(tpprof_merging *mg, const char *path, int64_t k) {
    struct living l = {.mg = mg, .process = k, .path = path};
    if (sqlite3_prepare_v2(mg->out, "INSERT INTO main.live_chunks VALUES (?1, ?2, ?3)", -1, &l.wr, NULL) != SQLITE_OK)
        return tpprof_error_set("merging the live blocks of %s: %s", path, sqlite3_errmsg(mg->out));
    int status = tpprof_live_each(mg->out, "src", path, put_live, &l);
    if (status == 0)
        status = put_live_chunk(&l);
    free(l.b.p);
    sqlite3_finalize(l.wr);
    return status;
}

// ---------------------------------------------------------------------------
// One input

// Copy input number k (1-based) at path into m's output, its stacks folded
// into m's trie. open: the input, open already (borrowed), or NULL.
static int copy_input(tpprof_merging *m, const char *path, int64_t k, tpprof_db *open) {
    sqlite3 *out = m->out;
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(out, "ATTACH DATABASE ?1 AS src", -1, &st, NULL) != SQLITE_OK)
        return tpprof_error_set("attaching %s: %s", path, sqlite3_errmsg(out));
    sqlite3_bind_text(st, 1, path, -1, SQLITE_STATIC);
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE)
        return tpprof_error_set("attaching %s: %s", path, sqlite3_errmsg(out));
    int64_t module_off = scalar(out, "SELECT COALESCE(MAX(id), 0) FROM main.modules");
    // One transaction per input: SQLite detaches a database only outside one.
    int status = exec(out, "BEGIN", "starting");
    if (status == 0)
        status = fold_stacks(m, path, k, open);
    if (status == 0)
        status = copy_sites(m, path, k);
    if (status == 0)
        status = copy_live(m, path, k);
    if (status == 0 && scalar(out, "SELECT count(*) FROM src.sqlite_master WHERE name = 'device_blocks'") > 0)
        status = exec(out, device_schema, "creating the device tables");
    if (status == 0 && scalar(out, "SELECT count(*) FROM src.sqlite_master WHERE name = 'device_sites'") > 0)
        status = exec(out, device_sites_schema, "creating the device site table");
    for (size_t i = 0; i < sizeof copy_sql / sizeof *copy_sql && status == 0; i++) {
        // Tables an older or smaller recording lacks are skipped (kinds, threads).
        if (sqlite3_prepare_v2(out, copy_sql[i], -1, &st, NULL) != SQLITE_OK) {
            if (strstr(sqlite3_errmsg(out), "no such table"))
                continue;
            status = tpprof_error_set("merging %s: %s", path, sqlite3_errmsg(out));
            break;
        }
        sqlite3_bind_int64(st, 1, k);
        sqlite3_bind_int64(st, 3, module_off);
        if (sqlite3_bind_parameter_count(st) >= 4)
            sqlite3_bind_text(st, 4, path, -1, SQLITE_STATIC);
        if (sqlite3_step(st) != SQLITE_DONE)
            status = tpprof_error_set("merging %s: %s", path, sqlite3_errmsg(out));
        sqlite3_finalize(st);
    }
    if (exec(out, status == 0 ? "COMMIT" : "ROLLBACK", "committing") != 0)
        status = -1;
    if (exec(out, "DETACH DATABASE src", "detaching") != 0 && status == 0)
        status = -1;
    return status;
}

static int write_meta(sqlite3 *out, int n) {
    char sql[2048];
    snprintf(sql, sizeof sql,
             "INSERT INTO meta VALUES ('schema_version', '%d'), ('tool', 'tpprof'), ('tool_version', '%s'),"
             " ('mode', 'aggregate'), ('symbolized', '1'), ('merged', '%d'),"
             " ('exe', 'merged: %d recordings (tpprof report lists them as processes)'),"
             " ('pid', (SELECT pid FROM processes ORDER BY id LIMIT 1)),"
             " ('complete', (SELECT CASE WHEN MIN(complete) = 1 THEN '1' ELSE '0' END FROM processes)),"
             " ('leak_scan', '1'),"
             " ('duration_ns', (SELECT COALESCE(MAX(duration_ns), 0) FROM processes)),"
             // Each process's peak, summed: an upper bound of the job's, reached
             // only if all peaked at once; the sites' peak figures add up to it.
             " ('peak_bytes', (SELECT COALESCE(SUM(peak_bytes), 0) FROM processes)), ('peak_time_ns', '0')",
             TPPROF_SCHEMA_VERSION,
#ifdef TPPROF_VERSION
             TPPROF_VERSION,
#else
             "unknown",
#endif
             n, n);
    if (exec(out, sql, "writing meta") != 0)
        return -1;
    // Device capture: the inputs' way when they agree, else 'mixed';
    // failed calls and bad frees summed. Absent when no input had device memory.
    return exec(out,
                "INSERT INTO meta SELECT 'device_capture', CASE WHEN COUNT(DISTINCT capture) = 1 THEN MIN(capture)"
                "  ELSE 'mixed' END FROM temp.device_meta HAVING COUNT(*) > 0;"
                "INSERT INTO meta SELECT 'device_calls_failed', SUM(COALESCE(calls_failed, 0)) FROM temp.device_meta"
                "  HAVING COUNT(*) > 0;"
                "INSERT INTO meta SELECT 'device_bad_frees', SUM(COALESCE(bad_frees, 0)) FROM temp.device_meta"
                "  HAVING COUNT(*) > 0;",
                "writing the device meta");
}

// The merged recording's frames that no input named (those merged
// unsymbolized), named once for all its processes; *lookups: how many
// addresses that looked up.
static int symbolize_merged(sqlite3 *out, const char *out_path, size_t *lookups) {
    tpprof_db view = {.sql = out, .path = (char *)out_path, .writable = true, .schema_version = TPPROF_SCHEMA_VERSION};
    tpprof_symtab tab = {0};
    int status = tpprof_symbolize_merged(&view, &tab, lookups);
    if (status == 0)
        status = tpprof_symtab_save(&view, &tab);
    tpprof_symtab_free(&tab);
    return status;
}

// ---------------------------------------------------------------------------
// A merge input by input (inputs.h)

static void merging_free(tpprof_merging *m) {
    tpprof_trie_input_free(&m->in);
    tpprof_u64_set_free(&m->new_ips);
    tpprof_trie_free(m->trie);
    sqlite3_close(m->out);
    free(m->path);
    free(m);
}

tpprof_merging *tpprof_merge_begin(const char *out_path) {
    // Never overwrite: `merge IN.db OUT.db` by mistake must not destroy a recording.
    if (access(out_path, F_OK) == 0) {
        tpprof_error_set("%s exists; merge writes a new file (remove it first)", out_path);
        return NULL;
    }
    tpprof_merging *m = calloc(1, sizeof *m);
    if (!m || !(m->path = strdup(out_path))) {
        free(m);
        tpprof_error_set("out of memory");
        return NULL;
    }
    if (sqlite3_open_v2(out_path, &m->out, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK) {
        tpprof_error_set("cannot write %s: %s", out_path, m->out ? sqlite3_errmsg(m->out) : "out of memory");
        merging_free(m);
        return NULL;
    }
    // No journal, no fsync: a merge that fails is removed whole (below), and
    // one committed transaction per input cost two fsyncs each (a build's
    // hundreds of recordings: most of the merge's time).
    int status = exec(m->out, "PRAGMA synchronous=OFF; PRAGMA journal_mode=OFF;", "setting up");
    if (status == 0)
        status = exec(m->out, merged_schema, "creating the tables");
    if (status == 0 && !(m->trie = tpprof_trie_new()))
        status = -1;
    if (status == 0 && (sqlite3_create_function(m->out, "merged_stack", 1, SQLITE_UTF8 | SQLITE_DETERMINISTIC, &m->in,
                                                merged_stack, NULL, NULL) != SQLITE_OK ||
                        sqlite3_create_function(m->out, "new_ip", 1, SQLITE_UTF8, &m->new_ips, new_ip, NULL, NULL) !=
                            SQLITE_OK))
        status = tpprof_error_set("setting up the merge: %s", sqlite3_errmsg(m->out));
    if (status != 0) {
        tpprof_merge_abandon(m);
        return NULL;
    }
    return m;
}

int tpprof_merge_add(tpprof_merging *m, const char *input, int64_t process, tpprof_db *open) {
    if (process <= 0)
        process = m->last + 1;
    if (process > 65535)
        return tpprof_error_set("more than 65535 recordings to merge");
    if (copy_input(m, input, process, open) != 0)
        return -1;
    if (process > m->last)
        m->last = process;
    m->n++;
    return 0;
}

size_t tpprof_merge_count(const tpprof_merging *m) { return m ? m->n : 0; }

void tpprof_merge_abandon(tpprof_merging *m) {
    if (!m)
        return;
    char *path = m->path;
    m->path = NULL;
    merging_free(m);
    if (path)
        unlink(path);
    free(path);
}

int tpprof_merge_end(tpprof_merging *m, size_t *lookups) {
    if (lookups)
        *lookups = 0;
    // The trie is done with: its memory goes before the symbols take theirs.
    tpprof_trie_input_free(&m->in);
    memset(&m->in, 0, sizeof m->in);
    tpprof_trie_free(m->trie);
    m->trie = NULL;
    int status = write_meta(m->out, (int)m->n);
    // (After the meta: the symbols' save sets meta.symbolized, as the merged
    // meta does.)
    if (status == 0)
        status = symbolize_merged(m->out, m->path, lookups);
    if (status != 0) {
        tpprof_merge_abandon(m);
        return -1;
    }
    merging_free(m);
    return 0;
}

int tpprof_merge(const char *out_path, char *const *inputs, size_t n, bool quiet, bool symbolize_inputs,
                 size_t *lookups) {
    if (lookups)
        *lookups = 0;
    if (access(out_path, F_OK) == 0)
        return tpprof_error_set("%s exists; merge writes a new file (remove it first)", out_path);
    // Each input is opened (a clear refusal of what is no recording, or a
    // merged one) as its stacks are folded (fold_stacks); here only to
    // symbolize it, where asked.
    for (size_t i = 0; i < n && symbolize_inputs; i++) {
        tpprof_db *db = tpprof_db_open(inputs[i], false);
        if (!db)
            return -1;
        char *merged = tpprof_db_meta(db, "merged");
        tpprof_db_close(db);
        free(merged);
        if (merged)
            return tpprof_error_set("%s is a merged recording: merge the recordings it was made of", inputs[i]);
        if (tpprof_symbolize_file(inputs[i]) != 0 && !quiet)
            fprintf(stderr, "tpprof merge: warning: %s stays unsymbolized (%s): its frames show addresses\n",
                    inputs[i], tpprof_error());
    }
    tpprof_merging *m = tpprof_merge_begin(out_path);
    if (!m)
        return -1;
    for (size_t i = 0; i < n; i++)
        if (tpprof_merge_add(m, inputs[i], (int64_t)i + 1, NULL) != 0) {
            tpprof_merge_abandon(m);
            return -1;
        }
    return tpprof_merge_end(m, lookups);
}

int tpprof_cmd_merge(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(tpprof_usage_merge, stdout);
            return TPPROF_EXIT_OK;
        }
    if (argc < 3) {
        fprintf(stderr, "tpprof merge: expected OUT.db and at least one IN.db (usage: tpprof merge OUT.db IN.db...)\n");
        return TPPROF_EXIT_USAGE;
    }
    size_t lookups = 0;
    if (tpprof_merge(argv[1], argv + 2, (size_t)argc - 2, false, false, &lookups) != 0) {
        fprintf(stderr, "tpprof merge: %s\n", tpprof_error());
        return TPPROF_EXIT_USAGE;
    }
    if (lookups)
        fprintf(stderr, "tpprof merge: %d recordings into %s (%zu addresses symbolized once for all of them)\n",
                argc - 2, argv[1], lookups);
    else
        fprintf(stderr, "tpprof merge: %d recordings into %s\n", argc - 2, argv[1]);
    return TPPROF_EXIT_OK;
}
