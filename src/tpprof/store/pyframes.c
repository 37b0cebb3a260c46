// pyframes.c (store): the Python frames of the stacks (record/pyframes.h)
// as rows of py_frames (docs/schema.md), and meta.python. Written inside the
// store's flush transaction, after the stack nodes: each node whose ip is a
// Python pseudo frame gets its row (function, file, line resolved here, on
// the writer thread, from the code object's copies). Reads the writer's
// nodes (writer/state.h, data only); calls nothing in writer/.
#define _GNU_SOURCE
#include "base/sqlite_api.h"
#include <stdio.h>

#include "base/mem.h"
#include "record/pyframes.h"
#include "store/store.h"
#include "writer/state.h"

// Nodes up to this one were looked at, in the file open now; `made`: the
// table is there; `said`: what meta.python says (it changes once, if the
// interpreter's layout turns out not to be the expected one).
static uint32_t scanned;
static bool made;
static const char *said;

// The pseudo frames (ips) with a row in the file open now. One Python line
// is a node in every stack through it: a PyTorch run's 3.7 million nodes
// hold a few tens of thousands of lines, and each node was resolved and
// inserted (OR IGNORE) at every flush. Open addressing, at most half full;
// ips are never 0.
static uint64_t *done;
static uint64_t done_cap, done_count;

static uint64_t *done_slot(uint64_t *tab, uint64_t cap, uint64_t ip) {
    uint64_t h = ip * 0x9E3779B97F4A7C15ULL, j = (h >> 20) & (cap - 1);
    while (tab[j] && tab[j] != ip) j = (j + 1) & (cap - 1);
    return &tab[j];
}

static bool done_has(uint64_t ip) { return done && *done_slot(done, done_cap, ip) == ip; }

// ip has its row now (out of memory: not kept, so written again, OR IGNORE).
static void done_put(uint64_t ip) {
    if ((done_count + 1) * 2 > done_cap) {
        uint64_t ncap = done_cap ? done_cap * 2 : 4096;
        uint64_t *n = tpprof_mem_map(ncap * sizeof *n);
        if (!n) return;
        for (uint64_t i = 0; i < done_cap; i++)
            if (done[i]) *done_slot(n, ncap, done[i]) = done[i];
        if (done) tpprof_mem_unmap(done, done_cap * sizeof *done);
        done = n;
        done_cap = ncap;
    }
    uint64_t *e = done_slot(done, done_cap, ip);
    if (!*e) done_count++;
    *e = ip;
}

void tpprof_store_py_reset(void) {
    scanned = 0;
    made = false;
    said = NULL;
    if (done) tpprof_mem_unmap(done, done_cap * sizeof *done);
    done = NULL;
    done_cap = done_count = 0;
}

static bool make(sqlite3 *db) {
    return sqlite3_exec(db, "CREATE TABLE IF NOT EXISTS py_frames(id INTEGER PRIMARY KEY, function TEXT NOT NULL,"
                            " file TEXT NOT NULL, line INTEGER NOT NULL);", NULL, NULL, NULL) == SQLITE_OK;
}

static bool say(sqlite3 *db, const char *key, const char *note) {
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, "INSERT OR REPLACE INTO meta(key, value) VALUES(?, ?)", -1, &st, NULL) != SQLITE_OK)
        return false;
    sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, note, -1, SQLITE_STATIC);
    bool ok = sqlite3_step(st) == SQLITE_DONE;
    sqlite3_finalize(st);
    return ok;
}

static sqlite3_stmt *prepare(sqlite3 *db) {
    sqlite3_stmt *st = NULL;
    sqlite3_prepare_v2(db, "INSERT OR IGNORE INTO py_frames(id, function, file, line) VALUES(?,?,?,?)", -1, &st, NULL);
    return st;
}

// ip's row, when it is a Python frame without one; false on an SQLite error.
static bool put_frame(sqlite3_stmt *st, uint64_t ip) {
    struct tpprof_py_frame f;
    if (!tpprof_py_is_frame(ip) || done_has(ip) || !tpprof_py_resolve(ip, &f)) return true;
    sqlite3_bind_int64(st, 1, (sqlite3_int64)ip);
    sqlite3_bind_text(st, 2, f.function, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, f.file, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 4, f.line);
    bool ok = sqlite3_step(st) == SQLITE_DONE;
    sqlite3_reset(st);
    if (ok) done_put(ip);
    return ok;
}

bool tpprof_store_py_put(sqlite3 *db) {
    const char *note = tpprof_py_meta();
    if (!note) return true; // not a Python program: no table, no meta
    if (!made && !make(db)) return false;
    made = true;
    if (note != said && !say(db, "python", note)) return false;
    said = note;
    uint64_t lost = atomic_load(&tpprof_py_frames_lost);
    if (lost) {
        char n[32];
        snprintf(n, sizeof n, "%llu", (unsigned long long)lost);
        if (!say(db, "python_frames_lost", n)) return false;
    }
    const struct tpprof_wstate *w = &tpprof_w;
    if (!tpprof_py_on || scanned >= w->nodes_written) {
        scanned = w->nodes_written;
        return true;
    }
    sqlite3_stmt *st = prepare(db);
    if (!st) return false;
    bool ok = true;
    // (A forked child's inherited nodes: only those its file has, which
    // tpprof_store_py_node did as they were written.)
    uint32_t from = (scanned > w->fork_nodes ? scanned : w->fork_nodes) + 1;
    for (uint32_t id = from; id <= w->nodes_written && ok; id++) ok = put_frame(st, tpprof_node_ip(id));
    sqlite3_finalize(st);
    if (ok) scanned = w->nodes_written;
    return ok;
}

bool tpprof_store_py_node(sqlite3 *db, uint64_t ip) {
    if (!tpprof_py_on || !tpprof_py_is_frame(ip) || done_has(ip)) return true;
    if (!made && !make(db)) return false;
    made = true;
    sqlite3_stmt *st = prepare(db);
    bool ok = st && put_frame(st, ip);
    sqlite3_finalize(st);
    return ok;
}
