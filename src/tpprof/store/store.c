// store.c: writing the recording into SQLite (the contract is docs/schema.md).
//
// Called by the writer only (its mutex held, re-entry guard set, so SQLite's
// own allocations are never recorded). The file is opened in WAL mode with
// synchronous=OFF and written in one transaction per flush: after a crash,
// _exit or kill -9 it opens and holds every committed flush. A normal end
// switches it back to a single self-contained file (journal_mode=DELETE).
// Any SQLite error disables recording with one line on stderr.
#define _GNU_SOURCE
#include <fcntl.h>
#include "base/sqlite_api.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <errno.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/store.h"
#include "writer/state.h"
#include "base/base.h"
#include "base/mem.h"
#include "base/modules.h"
#include "base/fdguard.h"
#include "record/format.h"
#include "record/rings.h"
#include "record/early.h"

static sqlite3 *db;
static char db_path[4096];
static bool reopened; // the file open now was a recording already (store.h)

bool tpprof_store_reopened(void) { return reopened; }

// ---------------------------------------------------------------------------
// Small helpers.

static bool fail(const char *doing) {
    char why[512];
    snprintf(why, sizeof why, "%s (%s)", db ? sqlite3_errmsg(db) : "out of memory", doing);
    tpprof_disable(db_path, why);
    return false;
}

static bool exec_sql(const char *sql) { return sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK; }

// meta's one statement, prepared once per file: a process writes some
// thirty keys (its start, then every flush), each of which prepared it
// anew (the start's keys: 95 -> 76 us of /bin/true's CPU). Finalized
// before the handle closes (close_db); a forked child drops it with the
// handle.
static sqlite3_stmt *meta_st;

static void close_db(void) {
    sqlite3_finalize(meta_st);
    meta_st = NULL;
    sqlite3_close(db);
    db = NULL;
}

static bool meta_set(const char *key, const char *value) {
    if (!meta_st &&
        sqlite3_prepare_v2(db, "INSERT OR REPLACE INTO meta(key, value) VALUES(?, ?)", -1, &meta_st, NULL) != SQLITE_OK)
        return false;
    sqlite3_bind_text(meta_st, 1, key, -1, SQLITE_STATIC);
    sqlite3_bind_text(meta_st, 2, value, -1, SQLITE_TRANSIENT);
    int rc = sqlite3_step(meta_st);
    sqlite3_reset(meta_st);
    return rc == SQLITE_DONE;
}

static bool meta_int(const char *key, int64_t v) {
    char buf[32];
    snprintf(buf, sizeof buf, "%lld", (long long)v);
    return meta_set(key, buf);
}

static bool meta_del(const char *key) {
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, "DELETE FROM meta WHERE key = ?", -1, &st, NULL) != SQLITE_OK) return false;
    sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    return rc == SQLITE_DONE;
}

// /proc/self/cmdline as a JSON array of strings.
static void cmdline_json(char *out, size_t cap) {
    char buf[8192];
    ssize_t n = 0;
    int fd = tpprof_fd_open("/proc/self/cmdline");
    if (fd >= 0) {
        n = read(fd, buf, sizeof buf - 1);
        tpprof_fd_close(fd);
    }
    if (n < 0) n = 0;
    size_t k = 0;
    out[k++] = '[';
    for (ssize_t i = 0; i < n && k + 8 < cap;) {
        if (k > 1) out[k++] = ',';
        out[k++] = '"';
        for (; i < n && buf[i] && k + 8 < cap; i++) {
            unsigned char c = (unsigned char)buf[i];
            if (c == '"' || c == '\\') {
                out[k++] = '\\';
                out[k++] = (char)c;
            } else if (c < 0x20) {
                k += (size_t)snprintf(out + k, cap - k, "\\u%04x", c);
            } else {
                out[k++] = (char)c;
            }
        }
        out[k++] = '"';
        i++;
    }
    out[k++] = ']';
    out[k] = 0;
}

// Removes a recording's files; keep_main: not the database itself (this
// process's claimed file, whose lock stays with its inode).
static void remove_files(const char *path, bool keep_main) {
    static const char *const suffix[] = {"", "-wal", "-shm", "-journal"};
    char p[4200];
    for (int i = keep_main ? 1 : 0; i < 4; i++) {
        snprintf(p, sizeof p, "%s%s", path, suffix[i]);
        unlink(p);
    }
}

static int tool_row(void *arg, int n, char **vals, char **names) {
    (void)names;
    if (n > 0 && vals[0] && strcmp(vals[0], "tpprof") == 0) *(bool *)arg = true;
    return 0;
}

// Whether a new recording may replace what is at path: nothing, an empty
// file (what a run that could not write leaves), or a tpprof recording.
// Anything else TPPROF_OUTPUT names (a text file, a database of the
// program's, a directory) is the user's, and is never destroyed. (`tpprof
// run` refuses such a path before the program starts; this covers a preload
// set up by hand, and a forked child's name.)
static bool replaceable(const char *path) {
    struct stat st;
    if (lstat(path, &st) != 0) return errno == ENOENT;
    if (!S_ISREG(st.st_mode)) return false;
    if (st.st_size == 0) return true;
    char head[16] = {0};
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    ssize_t got = read(fd, head, sizeof head);
    close(fd);
    if (got != (ssize_t)sizeof head || memcmp(head, "SQLite format 3", sizeof head) != 0) return false;
    sqlite3 *probe = NULL;
    bool ours = false;
    if (sqlite3_open_v2(path, &probe, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, NULL) == SQLITE_OK)
        sqlite3_exec(probe, "SELECT value FROM meta WHERE key = 'tool'", tool_row, &ours, NULL);
    sqlite3_close(probe);
    return ours;
}

// What the flushes of this file did (meta.flushes_*, docs/schema.md): the
// periodic ones' number, site rows and time (their steps' own, not the
// drains' between them), and the final one's site rows.
static struct {
    uint64_t count, site_rows, ns, final_site_rows;
    uint64_t t0; // the flush under way: its steps' time so far
} stats;

// ---------------------------------------------------------------------------
// Claim and open.

// This process's claim (tpprof_store_claim): the locked descriptor, and the
// file's identity, so that a file put in its place since is not mistaken
// for it.
static int claim_fd = -1;
static dev_t claim_dev;
static ino_t claim_ino;

int tpprof_store_claim(const char *path) {
    if (claim_fd >= 0) { // a forked child's copy: the parent's lock stays the parent's
        tpprof_fd_close(claim_fd);
        claim_fd = -1;
    }
    // Created if missing (an empty file is what a new recording may
    // replace); whatever else is there is only opened for reading.
    int c = open(path, O_RDONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (c < 0) return -1;
    close(c);
    int fd = tpprof_fd_open(path);
    struct stat st;
    if (fd < 0) return -1;
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        tpprof_fd_close(fd);
        return e == EWOULDBLOCK ? 0 : -1;
    }
    if (fstat(fd, &st) != 0) {
        tpprof_fd_close(fd);
        return -1;
    }
    claim_fd = fd;
    claim_dev = st.st_dev;
    claim_ino = st.st_ino;
    return 1;
}

// Whether path is the file this process claimed.
static bool claimed(const char *path) {
    struct stat st;
    return claim_fd >= 0 && stat(path, &st) == 0 && st.st_dev == claim_dev && st.st_ino == claim_ino;
}

bool tpprof_store_open(const char *path) {
    struct tpprof_wstate *w = &tpprof_w;
    bool reopen = w->exec_pending || w->end_reason != NULL || w->nodes_written > 0;
    reopened = reopen;
    snprintf(db_path, sizeof db_path, "%s", path);
    tpprof_store_py_reset();
    if (!reopen) memset(&stats, 0, sizeof stats);
    const char *why = NULL;
    if (!tpprof_sqlite_load(&why)) {
        tpprof_disable(path, why);
        return false;
    }
    tpprof_fdguard_install();
    if (!reopen && !replaceable(path)) {
        tpprof_disable(path, "it exists and is not a tpprof recording: left as it is, nothing recorded");
        return false;
    }
    // A new recording starts as the build's copy of the empty one
    // (schema.c); a reopened one has the schema, or is made to.
    bool copied = false;
    if (!reopen) {
        // (A forked child's new name is claimed here; its pid makes it its own.)
        if (!claimed(path)) tpprof_store_claim(path);
        bool mine = claimed(path);
        remove_files(path, mine);
        copied = tpprof_store_schema_copy(path, mine);
    }
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK) {
        fail("opening");
        close_db();
        return false;
    }
    sqlite3_busy_timeout(db, 2000);
    // synchronous first: switching a new file to WAL otherwise syncs it, the
    // journal and the directory (four fdatasyncs a process, on a real disk
    // milliseconds each, for every process of a traced shell script).
    // A 4 MiB page cache (SQLite's default is 2): every table is written in
    // rowid order (sites by number, live blocks by address, stack chunks
    // appended), so a page is loaded once per flush whatever the cache. 16
    // MiB cost the PyTorch loop 13 MiB of RSS for no CPU or time measured
    // (nor with 600,000 or 3 million live blocks at exit, or a million sites).
    if (!exec_sql("PRAGMA synchronous=OFF; PRAGMA journal_mode=WAL; PRAGMA cache_size=-4096;") || !exec_sql("BEGIN") ||
        (!copied && !tpprof_store_schema_current(db) && !tpprof_store_schema_make(db)))
        goto bad;
    char exe[1024];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = 0;
    char cmd[8192];
    cmdline_json(cmd, sizeof cmd);
    char pid[32];
    snprintf(pid, sizeof pid, "%d", (int)getpid());
    if (!meta_int("schema_version", TPPROF_SCHEMA_VERSION) || !meta_set("tool", "tpprof") ||
        !meta_set("tool_version", TPPROF_VERSION) || !meta_set("mode", tpprof_cfg.full ? "full" : "aggregate") ||
        !meta_int("depth", tpprof_cfg.depth) || !meta_set("unwind", tpprof_cfg.unwind_fp ? "fp" : tpprof_cfg.unwind_unw ? "libunwind-only" : tpprof_cfg.unwind_nocfi ? "fp+libunwind" : "fp+cfi+libunwind") ||
        !meta_int("interval_ms", tpprof_cfg.interval_ms) || !meta_set("pid", pid) ||
        !meta_int("ppid", getppid()) || !meta_set("exe", exe) || !meta_set("cmdline", cmd) ||
        !meta_int("start_unix_ns", (int64_t)w->start_unix_ns) || !meta_set("complete", "0"))
        goto bad;
    if (w->parent_pid && !meta_int("parent_pid", w->parent_pid)) goto bad;
    if (tpprof_malloc_owner[0] && !meta_set("malloc_replaced_by", tpprof_malloc_owner)) goto bad;
    if (tpprof_malloc_skipped[0] && !meta_set("malloc_skipped", tpprof_malloc_skipped)) goto bad;
    if (!meta_set("sqlite_version", sqlite3_libversion()) || !meta_set("sqlite_shared", tpprof_sqlite_shared ? "1" : "0"))
        goto bad;
    if (!exec_sql("COMMIT")) goto bad;
    return true;
bad:
    fail("creating the schema");
    close_db();
    return false;
}

// ---------------------------------------------------------------------------
// Flush: everything new since the last one, in one transaction.

// A periodic flush with tens of thousands of new stacks or busy sites takes
// a few hundred ms of SQLite work, long enough for a busy thread to fill its
// ring and give up on events. So the big parts (stack nodes, sites, full
// mode's events) go in steps of STEP_ROWS rows, and between steps the writer
// drains the rings (writer.c's flush loop; the store never calls it). What
// a drain adds to the tables being written is picked up by the next step,
// which re-reads them: a row added now is written now or marked for the next
// flush. The final flush runs after the rings are drained for good, and in
// one go.
#define STEP_ROWS 256

// The flush under way: its part, the cursor within it and the statements
// the part holds across steps.
enum flush_part { PART_NODES, PART_THREADS, PART_SITES, PART_SAMPLES, PART_EVENTS, PART_REST, PART_DONE };
static struct {
    bool final;
    enum flush_part part;
    uint64_t row, end; // end: PART_EVENTS's batch, fixed when the part starts
    sqlite3_stmt *st, *st2;
} fl;

// Ends the current part: its statements go; the next part starts at row 0.
static void part_done(void) {
    sqlite3_finalize(fl.st);
    sqlite3_finalize(fl.st2);
    fl.st = fl.st2 = NULL;
    fl.row = fl.end = 0;
    fl.part++;
}

static bool put_modules(void) {
    struct tpprof_module *mods;
    size_t bytes;
    int n = tpprof_modules_take(&mods, &bytes);
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, "INSERT OR REPLACE INTO modules(id, path, build_id, base, lo, hi, loaded_ns, unloaded_ns)"
                               " VALUES(?,?,?,?,?,?,?,?)", -1, &st, NULL) != SQLITE_OK) {
        tpprof_mem_unmap(mods, bytes);
        return false;
    }
    bool ok = true;
    for (int i = 0; i < n && ok; i++) {
        const struct tpprof_module *m = &mods[i];
        if (!m->dirty) continue;
        sqlite3_bind_int(st, 1, i + 1);
        sqlite3_bind_text(st, 2, m->path, -1, SQLITE_STATIC);
        if (m->build_id[0]) sqlite3_bind_text(st, 3, m->build_id, -1, SQLITE_STATIC);
        else sqlite3_bind_null(st, 3);
        sqlite3_bind_int64(st, 4, (sqlite3_int64)m->base);
        sqlite3_bind_int64(st, 5, (sqlite3_int64)m->lo);
        sqlite3_bind_int64(st, 6, (sqlite3_int64)m->hi);
        sqlite3_bind_int64(st, 7, (sqlite3_int64)m->loaded_ns);
        if (m->loaded) sqlite3_bind_null(st, 8);
        else sqlite3_bind_int64(st, 8, (sqlite3_int64)m->unloaded_ns);
        ok = sqlite3_step(st) == SQLITE_DONE;
        sqlite3_reset(st);
    }
    sqlite3_finalize(st);
    tpprof_mem_unmap(mods, bytes);
    return ok;
}

// Stack nodes go in chunks: a row holds up to CHUNK_NODES consecutive nodes
// as a JSON array, element k being node first + k: its ip alone when its
// parent is the node before it (a new stack's new frames come in a row, each
// the child of the last), else [parent, ip]. One row per node cost SQLite
// ~0.45 us a row (a PyTorch run's 2.8 M nodes: 1.3 s of the writer, the
// bottleneck of the program's wall time); JSON and not a binary encoding so
// that the stack_nodes view can decode it in plain SQL (json_each).
#define CHUNK_NODES 8192

// Appends v in decimal at p; returns the end.
static char *put_u64(char *p, uint64_t v) {
    char tmp[20];
    int n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n) *p++ = tmp[--n];
    return p;
}

// Appends v in decimal, with its sign; returns the end.
static char *put_i64(char *p, int64_t v) {
    if (v < 0) {
        *p++ = '-';
        return put_u64(p, -(uint64_t)v);
    }
    return put_u64(p, (uint64_t)v);
}

// Node id as a chunk's [parent, ip] element; returns the end.
static char *put_pair(char *p, uint32_t id) {
    *p++ = '[';
    p = put_u64(p, tpprof_w.nodes[id].parent);
    *p++ = ',';
    p = put_u64(p, tpprof_node_ip(id));
    *p++ = ']';
    return p;
}

// In a forked child (writer.c fork_own_history): the nodes of the stack
// that ends at `node` which the child inherited and has not written yet,
// one stack_chunks row each (the nodes made since the fork go by
// put_nodes). A path shares its outer part with others: it stops at the
// first node written.
static bool put_inherited_path(sqlite3_stmt **st, uint32_t node) {
    struct tpprof_wstate *w = &tpprof_w;
    for (; node; node = w->nodes[node].parent) {
        if (node > w->fork_nodes) continue;
        uint64_t *word = &w->fork_written[node >> 6], bit = UINT64_C(1) << (node & 63);
        if (*word & bit) return true;
        if (!*st && sqlite3_prepare_v2(db, "INSERT INTO stack_chunks(first, count, nodes) VALUES(?,1,?)", -1, st,
                                       NULL) != SQLITE_OK)
            return false;
        char text[64], *p = text;
        *p++ = '[';
        p = put_pair(p, node);
        *p++ = ']';
        sqlite3_bind_int64(*st, 1, node);
        sqlite3_bind_text(*st, 2, text, (int)(p - text), SQLITE_TRANSIENT);
        bool ok = sqlite3_step(*st) == SQLITE_DONE;
        sqlite3_reset(*st);
        if (!ok || !tpprof_store_py_node(db, tpprof_node_ip(node))) return false;
        *word |= bit;
    }
    return true;
}

// One chunk of the nodes new since the last flush per call (the step's
// whole budget in a periodic flush); true when no error (the part is done
// when fl.part moved on).
static bool put_nodes(uint32_t *budget) {
    struct tpprof_wstate *w = &tpprof_w;
    // 2 + 45 bytes a node at most: "[", "]", and "[4294967295,18446744073709551615],".
    static char *text;
    if (!text && !(text = tpprof_mem_map(2 + (size_t)CHUNK_NODES * 45))) return false;
    if (!fl.st && sqlite3_prepare_v2(db, "INSERT INTO stack_chunks(first, count, nodes) VALUES(?,?,?)", -1, &fl.st,
                                     NULL) != SQLITE_OK)
        return false;
    uint32_t first = w->nodes_written + 1;
    if (first > w->nnodes) {
        part_done();
        return true;
    }
    uint32_t end = w->nnodes - first + 1 > CHUNK_NODES ? first + CHUNK_NODES : w->nnodes + 1;
    // A forked child's new nodes may hang below inherited ones: those go in
    // first, so that no row names a parent the file lacks.
    if (w->fork_nodes) {
        sqlite3_stmt *path = NULL;
        bool ok = true;
        for (uint32_t id = first; id < end && ok; id++)
            if (w->nodes[id].parent <= w->fork_nodes) ok = put_inherited_path(&path, w->nodes[id].parent);
        sqlite3_finalize(path);
        if (!ok) return false;
    }
    char *p = text;
    *p++ = '[';
    for (uint32_t id = first; id < end; id++) {
        const struct tpprof_node *n = &w->nodes[id];
        if (id > first) *p++ = ',';
        if (n->parent == id - 1) {
            p = put_u64(p, tpprof_node_ip(id));
            continue;
        }
        p = put_pair(p, id);
    }
    *p++ = ']';
    sqlite3_bind_int64(fl.st, 1, first);
    sqlite3_bind_int64(fl.st, 2, end - first);
    sqlite3_bind_text(fl.st, 3, text, (int)(p - text), SQLITE_STATIC);
    bool ok = sqlite3_step(fl.st) == SQLITE_DONE;
    sqlite3_reset(fl.st);
    if (!ok) return false;
    w->nodes_written = end - 1;
    *budget = fl.final ? *budget - 1 : 0;
    return true;
}

static void thread_name(pid_t tid, char *out, size_t cap) {
    char p[64];
    snprintf(p, sizeof p, "/proc/self/task/%d/comm", (int)tid);
    int fd = tpprof_fd_open(p);
    if (fd < 0) return;
    ssize_t n = read(fd, out, cap - 1);
    tpprof_fd_close(fd);
    if (n <= 0) return;
    if (out[n - 1] == '\n') n--;
    out[n] = 0;
}

// One row of the threads table (name NULL when it has none).
static bool put_thread_row(sqlite3_stmt *st, pid_t tid, const char *name, uint64_t first_ns, uint64_t last_ns) {
    sqlite3_bind_int64(st, 1, tid);
    if (name[0]) sqlite3_bind_text(st, 2, name, -1, SQLITE_STATIC);
    else sqlite3_bind_null(st, 2);
    sqlite3_bind_int64(st, 3, (sqlite3_int64)first_ns);
    sqlite3_bind_int64(st, 4, (sqlite3_int64)last_ns);
    bool ok = sqlite3_step(st) == SQLITE_DONE;
    sqlite3_reset(st);
    return ok;
}

// A live thread's name is read from /proc at the end only, not at every
// flush: each read opens a descriptor, and a program's dup2 onto that number
// at that moment would fail with EBUSY (a thread that ended was named then).
// Threads gone since the last flush, whose structs serve others now, come
// from the writer's kept rows (tpprof_w.gone).
static bool put_threads(bool final) {
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, "INSERT OR REPLACE INTO threads(tid, name, first_ns, last_ns) VALUES(?,?,?,?)", -1,
                           &st, NULL) != SQLITE_OK)
        return false;
    bool ok = true;
    for (struct tpprof_thread *t = atomic_load(&tpprof_threads); t && ok; t = t->next) {
        if (!t->w_dirty) continue;
        if (!atomic_load(&t->exited)) {
            if (final) thread_name(t->tid, t->w_name, sizeof t->w_name);
        }
        else if (t->name[0]) snprintf(t->w_name, sizeof t->w_name, "%s", t->name);
        ok = put_thread_row(st, t->tid, t->w_name, t->w_first_ns, t->w_last_ns);
        t->w_dirty = false;
    }
    struct tpprof_wstate *w = &tpprof_w;
    for (uint32_t i = 0; i < w->ngone && ok; i++)
        ok = put_thread_row(st, w->gone[i].tid, w->gone[i].name, w->gone[i].first_ns, w->gone[i].last_ns);
    if (ok) w->ngone = 0;
    sqlite3_finalize(st);
    return ok;
}

// Sites go in chunks too: a site_chunks row holds the sites numbered first
// to first + count - 1 (a site's number is its index + 1) as a JSON array,
// element k being site first + k: [stack_id, kind, alloc_count,
// alloc_bytes, free_count, freed_bytes, temp_count, temp_bytes, peak_count,
// peak_bytes], or null where that number has no site row (the early
// allocations' site, a forked child's inherited sites it did not use); the
// sites view shows them as rows (docs/schema.md). A flush rewrites each
// chunk holding a changed site, all of it. One row per site cost SQLite
// ~1.7 us a row, 1.2 s of the writer's CPU on the PyTorch loop (700,000
// sites, most of them written once, and 184,000 rewritten by the final
// flush, in the program's exit); a chunk's text costs a tenth of that per
// site, even where most of its sites are unchanged.
#define CHUNK_SITES 256

// The site's values, in the order of a chunk's arrays, as they are now
// (its share of the peak now: tpprof_site_peak_count).
static char *put_site(char *p, struct tpprof_site *s) {
    int64_t peak_count = tpprof_site_peak_count(s), peak_bytes = tpprof_site_peak_bytes(s);
    s->row_peak_live = peak_count == s->live_count && peak_bytes == s->live_bytes;
    int64_t v[10] = {s->stack, s->kind, s->alloc_count, s->alloc_bytes, tpprof_site_free_count(s),
                     tpprof_site_freed_bytes(s), tpprof_site_temp_count(s), s->temp_bytes, peak_count, peak_bytes};
    *p++ = '[';
    for (int i = 0; i < 10; i++) {
        if (i) *p++ = ',';
        p = put_i64(p, v[i]); // (negative never expected: counts and bytes; kept exact if so)
    }
    *p++ = ']';
    return p;
}

// The next chunk holding a changed site per call (a few in a periodic
// flush's step: CHUNK_SITES / 8 of its budget each); true when no error.
static bool put_sites(uint32_t *budget) {
    struct tpprof_wstate *w = &tpprof_w;
    // "[", "]", and per site 10 numbers of up to 20 digits and a sign, 9 commas, "[]" and a comma.
    enum { SITE_TEXT = 10 * 21 + 12 };
    static char *text;
    if (!text && !(text = tpprof_mem_map(2 + (size_t)CHUNK_SITES * SITE_TEXT))) return false;
    if (!fl.st && sqlite3_prepare_v2(db, "INSERT OR REPLACE INTO site_chunks(first, count, sites) VALUES(?,?,?)", -1,
                                     &fl.st, NULL) != SQLITE_OK)
        return false;
    // The dirty bits (state.h) of a chunk are CHUNK_SITES / 64 whole words.
    enum { WORDS = CHUNK_SITES / 64 };
    for (; fl.row < w->nsites; fl.row += CHUNK_SITES) {
        const uint64_t *bits = &w->dirty_bits[fl.row / 64];
        uint64_t any = 0;
        for (int k = 0; k < WORDS && fl.row + 64u * k < w->nsites; k++) any |= bits[k];
        if (any) break;
    }
    if (fl.row >= w->nsites) {
        part_done();
        return true;
    }
    uint32_t first = (uint32_t)fl.row, end = w->nsites - first > CHUNK_SITES ? first + CHUNK_SITES : w->nsites;
    sqlite3_stmt *path = NULL; // (put_inherited_path's)
    bool ok = true;
    char *p = text;
    *p++ = '[';
    for (uint32_t i = first; i < end && ok; i++) {
        struct tpprof_site *s = &w->sites[i]; // the array may have moved since the last step
        if (i > first) *p++ = ',';
        // No row: the early allocations' site, and a forked child's
        // inherited site never written nor changed (writer.c).
        if (s->kind == TPPROF_KIND_EARLY || (!s->stored && !s->dirty)) {
            memcpy(p, "null", 4);
            p += 4;
            tpprof_site_clean(s);
            continue;
        }
        if (s->dirty) {
            if (w->fork_nodes) ok = put_inherited_path(&path, s->stack);
            if (fl.final) stats.final_site_rows++;
            else stats.site_rows++;
        }
        p = put_site(p, s);
        s->stored = true;
        // A site's peak share changes with every new peak, not only with its
        // own events, so sites stay dirty; the final flush writes the true value.
        tpprof_site_clean(s);
    }
    *p++ = ']';
    sqlite3_finalize(path);
    if (!ok) return false;
    sqlite3_bind_int64(fl.st, 1, first + 1);
    sqlite3_bind_int64(fl.st, 2, end - first);
    sqlite3_bind_text(fl.st, 3, text, (int)(p - text), SQLITE_STATIC);
    ok = sqlite3_step(fl.st) == SQLITE_DONE;
    sqlite3_reset(fl.st);
    if (!ok) return false;
    fl.row = first + CHUNK_SITES; // (chunks stay whole: sites made since go in the next flush)
    *budget = *budget > CHUNK_SITES / 8 ? *budget - CHUNK_SITES / 8 : 0;
    return true;
}

static bool put_samples(void) {
    struct tpprof_wstate *w = &tpprof_w;
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, "INSERT OR REPLACE INTO timeline(time_ns, heap_bytes, heap_blocks, mmap_bytes,"
                               " alloc_calls, free_calls, rss_bytes) VALUES(?,?,?,?,?,?,?)", -1, &st, NULL) != SQLITE_OK)
        return false;
    bool ok = true;
    for (uint32_t i = 0; i < w->nsamples && ok; i++) {
        const struct tpprof_sample *s = &w->samples[i];
        sqlite3_bind_int64(st, 1, (sqlite3_int64)s->time_ns);
        sqlite3_bind_int64(st, 2, s->heap_bytes);
        sqlite3_bind_int64(st, 3, s->heap_blocks);
        sqlite3_bind_int64(st, 4, s->mmap_bytes);
        sqlite3_bind_int64(st, 5, s->alloc_calls);
        sqlite3_bind_int64(st, 6, s->free_calls);
        sqlite3_bind_int64(st, 7, s->rss_bytes);
        ok = sqlite3_step(st) == SQLITE_DONE;
        sqlite3_reset(st);
    }
    sqlite3_finalize(st);
    if (ok) w->nsamples = 0;
    return ok;
}

static bool put_events(uint32_t *budget) {
    struct tpprof_wstate *w = &tpprof_w;
    if (!fl.st) {
        if (!w->nevents) {
            part_done();
            return true;
        }
        if (sqlite3_prepare_v2(db, "INSERT OR REPLACE INTO events(seq, time_ns, tid, op, kind, address, size, stack_id,"
                                   " old_address) VALUES(?,?,?,?,?,?,?,?,?)", -1, &fl.st, NULL) != SQLITE_OK)
            return false;
        // The batch is what is there now. Full mode keeps every event, and a
        // commit of hundreds of thousands of them took long enough for a
        // busy thread's ring to stay full and drop events: what the drains
        // between steps apply is appended behind the batch and waits for the
        // next commit (a program can make events faster than SQLite takes them).
        fl.end = w->nevents;
    }
    sqlite3_stmt *st = fl.st;
    bool ok = true;
    for (; fl.row < fl.end && ok && *budget; fl.row++, --*budget) {
        const struct tpprof_event *e = &w->events[fl.row]; // the array may have moved since the last step
        sqlite3_bind_int64(st, 1, (sqlite3_int64)e->seq);
        sqlite3_bind_int64(st, 2, (sqlite3_int64)e->time_ns);
        sqlite3_bind_int64(st, 3, tpprof_wstate_tid_of(e->tid));
        sqlite3_bind_int64(st, 4, e->op);
        if (e->kind) sqlite3_bind_int64(st, 5, e->kind);
        else sqlite3_bind_null(st, 5);
        sqlite3_bind_int64(st, 6, (sqlite3_int64)e->addr);
        if (e->op == TPPROF_OP_FREE) sqlite3_bind_null(st, 7);
        else sqlite3_bind_int64(st, 7, (sqlite3_int64)e->size);
        if (e->op == TPPROF_OP_FREE || e->op == TPPROF_OP_MUNMAP) sqlite3_bind_null(st, 8);
        else sqlite3_bind_int64(st, 8, e->stack);
        if (e->old_addr) sqlite3_bind_int64(st, 9, (sqlite3_int64)e->old_addr);
        else sqlite3_bind_null(st, 9);
        ok = sqlite3_step(st) == SQLITE_DONE;
        sqlite3_reset(st);
    }
    if (ok && fl.row >= fl.end) {
        uint64_t batch = fl.end;
        w->nevents -= batch;
        memmove(w->events, w->events + batch, w->nevents * sizeof *w->events);
        part_done();
    }
    return ok;
}

// A block as a live_chunks element: [address, size, kind, stack_id, tid,
// time_ns, reachability]; returns the end.
static char *put_block(char *p, const struct tpprof_block *b) {
    const struct tpprof_site *s = &tpprof_w.sites[b->site];
    int64_t v[7] = {(int64_t)b->addr, (int64_t)b->size, s->kind, s->stack, tpprof_wstate_tid_of(b->thread),
                    (int64_t)b->time_ns, b->reach};
    *p++ = '[';
    for (int i = 0; i < 7; i++) {
        if (i) *p++ = ',';
        p = put_i64(p, v[i]);
    }
    *p++ = ']';
    return p;
}

// A block from before the start (writer.c adopt_early): scanned, not written.
static bool early_block(const struct tpprof_block *b) { return tpprof_w.sites[b->site].kind == TPPROF_KIND_EARLY; }

// Whether b is one of the program's mappings (not a heap block).
static bool is_map(const struct tpprof_block *b) {
    uintptr_t at = (uintptr_t)b, maps = (uintptr_t)tpprof_w.maps;
    return at >= maps && at < maps + tpprof_w.nmaps * sizeof *b;
}

// By address, and at one address the heap block before the mapping (put_live keeps the last).
static int cmp_block_addr(const void *a, const void *b) {
    const struct tpprof_block *x = *(const struct tpprof_block *const *)a, *y = *(const struct tpprof_block *const *)b;
    if (x->addr != y->addr) return (x->addr > y->addr) - (x->addr < y->addr);
    return (int)is_map(x) - (int)is_map(y);
}

// The blocks alive at the end go in chunks as well (the final flush only):
// a live_chunks row holds up to CHUNK_BLOCKS of them, in address order, as a
// JSON array of put_block's elements; live_blocks is a view of them
// (docs/schema.md). A row and an index entry per block cost SQLite ~1 us a
// block in the program's exit: a small cc1's 3,000 blocks were a tenth of
// what it paid for being recorded, the PyTorch loop's 45,000 took 125 ms.
#define CHUNK_BLOCKS 256

static bool put_chunk(sqlite3_stmt *st, char *text, char *end, uint64_t first, uint64_t count) {
    *end++ = ']';
    sqlite3_bind_int64(st, 1, (sqlite3_int64)first);
    sqlite3_bind_int64(st, 2, (sqlite3_int64)count);
    sqlite3_bind_text(st, 3, text, (int)(end - text), SQLITE_STATIC);
    bool ok = sqlite3_step(st) == SQLITE_DONE;
    sqlite3_reset(st);
    return ok;
}

static bool put_live(void) {
    struct tpprof_wstate *w = &tpprof_w;
    // "[", "]", and per block 7 numbers of up to 20 digits and a sign, 6 commas, "[]" and a comma.
    enum { BLOCK_TEXT = 7 * 21 + 9 };
    static char *text;
    if (!text && !(text = tpprof_mem_map(2 + (size_t)CHUNK_BLOCKS * BLOCK_TEXT))) return false;
    sqlite3_stmt *st;
    if (!exec_sql("DELETE FROM live_chunks")) return false;
    if (sqlite3_prepare_v2(db, "INSERT INTO live_chunks(first, count, blocks) VALUES(?,?,?)", -1, &st, NULL) !=
        SQLITE_OK)
        return false;
    // In address order, one element an address: the heap's blocks and the
    // program's own mappings (a mapping at a heap block's address, which
    // the writer should never hold, is the one kept, as the rows' INSERT OR
    // REPLACE did before the chunks). Without memory for the order, as the
    // live table holds them.
    uint64_t n = w->live.count + w->nmaps, k = 0;
    const struct tpprof_block **order = n ? tpprof_mem_map(n * sizeof *order) : NULL;
    if (order) {
        for (uint64_t i = 0; i < w->live.cap; i++)
            if (w->live.slots[i].addr && !early_block(&w->live.slots[i])) order[k++] = &w->live.slots[i];
        for (uint64_t i = 0; i < w->nmaps; i++)
            if (!early_block(&w->maps[i])) order[k++] = &w->maps[i];
        qsort(order, k, sizeof *order, cmp_block_addr);
    }
    bool ok = true;
    uint64_t first = 1, count = 0;
    char *p = text;
    *p++ = '[';
    for (uint64_t i = 0; ok && (order ? i < k : i < w->live.cap + w->nmaps); i++) {
        const struct tpprof_block *b;
        if (order) {
            b = order[i];
            if (i + 1 < k && order[i + 1]->addr == b->addr) continue;
        } else {
            b = i < w->live.cap ? &w->live.slots[i] : &w->maps[i - w->live.cap];
            if (!b->addr || early_block(b)) continue;
        }
        if (count) *p++ = ',';
        p = put_block(p, b);
        if (++count == CHUNK_BLOCKS) {
            ok = put_chunk(st, text, p, first, count);
            first += count;
            count = 0;
            p = text + 1;
        }
    }
    if (ok && count) ok = put_chunk(st, text, p, first, count);
    if (order) tpprof_mem_unmap(order, n * sizeof *order);
    sqlite3_finalize(st);
    return ok;
}

// meta.site_totals (final write only, docs/schema.md): what SUM() over the
// sites rows gives once the final flush has written them (their chunks), every
// site's row, for readers that need only the totals (`tpprof run`'s
// summary and its list of a build's recordings added every row up:
// 300,000 sites of 169 recordings, 55 ms; the PyTorch loop's 700,000).
// "alloc_count alloc_bytes free_count temp_count temp_bytes", then the same
// for the reserved kind's rows (address space, which readers take out).
static bool put_site_totals(void) {
    struct tpprof_wstate *w = &tpprof_w;
    int64_t all[5] = {0}, reserved[5] = {0};
    for (uint32_t i = 0; i < w->nsites; i++) {
        const struct tpprof_site *s = &w->sites[i];
        if (s->kind == TPPROF_KIND_EARLY) continue; // (no row)
        int64_t v[5] = {s->alloc_count, s->alloc_bytes, tpprof_site_free_count(s), tpprof_site_temp_count(s),
                        s->temp_bytes};
        int64_t *to = s->kind == TPPROF_KIND_MMAP_RESERVED ? reserved : all;
        for (int k = 0; k < 5; k++) {
            to[k] += v[k];
            if (to != all) all[k] += v[k];
        }
    }
    char buf[256];
    snprintf(buf, sizeof buf, "%lld %lld %lld %lld %lld", (long long)all[0], (long long)all[1], (long long)all[2],
             (long long)all[3], (long long)all[4]);
    if (!meta_set("site_totals", buf)) return false;
    snprintf(buf, sizeof buf, "%d %lld %lld %lld %lld %lld", TPPROF_KIND_MMAP_RESERVED, (long long)reserved[0],
             (long long)reserved[1], (long long)reserved[2], (long long)reserved[3], (long long)reserved[4]);
    return meta_set("site_totals_reserved", buf);
}

// meta.leak_scan says 1 only in the final write, which brings the live set
// the scan classified in the same transaction: a periodic flush between the
// scan and the end (a recording cut there by kill -9) must not claim it.
static bool put_meta(bool final) {
    struct tpprof_wstate *w = &tpprof_w;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t end = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    bool ok = meta_int("peak_bytes", w->peak_bytes) && meta_int("peak_time_ns", (int64_t)w->peak_time_ns) &&
              meta_int("end_unix_ns", (int64_t)end) && meta_int("duration_ns", (int64_t)(end - w->start_unix_ns)) &&
              meta_set("complete", w->complete ? "1" : "0");
    if (ok) ok = w->end_reason ? meta_set("end_reason", w->end_reason) : meta_del("end_reason");
    if (ok && w->end_signal) ok = meta_int("end_signal", w->end_signal);
    if (ok) ok = meta_set("leak_scan", w->scanned && final ? "1" : "0");
    if (ok) ok = meta_int("dropped_events", (int64_t)atomic_load(&tpprof_dropped));
    uint64_t cfi_walks, unw_walks;
    tpprof_walk_counts(&cfi_walks, &unw_walks);
    if (ok) ok = meta_int("libunwind_walks", (int64_t)unw_walks);
    if (ok) ok = meta_int("cfi_walks", (int64_t)cfi_walks);
    if (ok) ok = meta_int("stacks_full", (int64_t)atomic_load(&tpprof_stacks_full));
    if (ok) ok = meta_int("events_unrecorded", (int64_t)atomic_load(&tpprof_unrecorded_events));
    if (ok) ok = meta_int("threads_unrecorded", (int64_t)atomic_load(&tpprof_unrecorded_threads));
    if (ok) ok = meta_int("rings", (int64_t)atomic_load(&tpprof_rings_mapped));
    if (ok) ok = meta_int("flushes_count", (int64_t)stats.count) && meta_int("flushes_site_rows", (int64_t)stats.site_rows) &&
                 meta_int("flushes_ms", (int64_t)(stats.ns / 1000000u));
    if (ok && final) ok = meta_int("final_flush_site_rows", (int64_t)stats.final_site_rows) && put_site_totals();
    if (ok && atomic_load(&tpprof_obs_attached)) {
        ok = meta_set("tensors", "1") && meta_int("peak_storage_bytes", tpprof_ledger.peak_bytes) &&
             meta_int("peak_storage_time_ns", (int64_t)tpprof_ledger.peak_ns);
    }
    return ok;
}

bool tpprof_store_flush_begin(bool final) {
    if (!db) return false;
    uint64_t t0 = tpprof_now_ns();
    stats.t0 = 0;
    if (final) stats.final_site_rows = 0;
    fl.final = final;
    fl.part = PART_NODES;
    fl.row = fl.end = 0;
    if (!exec_sql("BEGIN")) return fail("writing");
    // Any site's share of the peak may have changed since its last write (a
    // new peak since): the final flush rewrites those whose row holds
    // another value than the peak's now (rewriting all 600,000 sites of a
    // PyTorch run took longer than everything else in the final flush).
    // A site not changed since its row was written (not dirty) has not
    // snapped since either: if it has snapped at the current peak, the row
    // was written in that peak's epoch and holds the snapshot; if not, its
    // share now is its live_*, which the row holds if it held them then.
    if (final)
        for (uint32_t i = 0; i < tpprof_w.nsites; i++) {
            struct tpprof_site *s = &tpprof_w.sites[i];
            if (!s->alloc_count && !s->stored) continue; // (a forked child's inherited site: writer.c fork_own_history)
            if (!s->stored || (!tpprof_site_snapped(s) && !s->row_peak_live)) tpprof_site_dirty(s);
        }
    // Modules that call the C library's allocator directly (modules.c): looked
    // at once more before the modules are written.
    static char bypassing[8192];
    // (Not in a process a signal is ending: it walks the loader's lists, which
    // the thread that got the signal may have been changing.)
    int nbypass = final && !tpprof_w.end_signal ? tpprof_modules_bypassing(bypassing, sizeof bypassing) : 0;
    if ((!nbypass || meta_set("bypassing_modules", bypassing)) && put_modules()) {
        stats.t0 = tpprof_now_ns() - t0;
        return true;
    }
    fail("writing");
    exec_sql("ROLLBACK");
    return false;
}

// The parts after the steps, and the commit.
static bool flush_end(void) {
    bool final = fl.final;
    bool ok = tpprof_store_tensors_put(db, final) && tpprof_store_device_put(db, final) && tpprof_store_py_put(db) &&
              put_meta(final) && (!final || put_live());
    if (ok && final && tpprof_cfg.full) ok = exec_sql("CREATE INDEX IF NOT EXISTS events_by_address ON events(address)");
    if (!ok) return false;
    fl.part = PART_DONE;
    return true;
}

int tpprof_store_flush_step(void) {
    uint64_t t0 = tpprof_now_ns();
    uint32_t budget = fl.final ? UINT32_MAX : STEP_ROWS;
    bool ok = true;
    while (ok && budget && fl.part < PART_DONE) {
        switch (fl.part) {
        case PART_NODES: ok = put_nodes(&budget); break;
        case PART_THREADS: ok = put_threads(fl.final); if (ok) part_done(); break;
        case PART_SITES: ok = put_sites(&budget); break;
        case PART_SAMPLES: ok = put_samples(); if (ok) part_done(); break;
        case PART_EVENTS: ok = put_events(&budget); break;
        default: ok = flush_end(); break;
        }
    }
    if (ok && fl.part < PART_DONE) {
        stats.t0 += tpprof_now_ns() - t0;
        return 1;
    }
    sqlite3_finalize(fl.st);
    sqlite3_finalize(fl.st2);
    fl.st = fl.st2 = NULL;
    if (!ok) {
        fail("writing");
        exec_sql("ROLLBACK");
        return -1;
    }
    if (!exec_sql("COMMIT")) {
        fail("committing");
        return -1;
    }
    if (!fl.final) { // (its meta holds the flushes before it)
        stats.count++;
        stats.ns += stats.t0 + (tpprof_now_ns() - t0);
    }
    return 0;
}

bool tpprof_store_flush(bool final) {
    if (!tpprof_store_flush_begin(final)) return false;
    int r;
    while ((r = tpprof_store_flush_step()) > 0) {}
    return r == 0;
}

void tpprof_store_close(bool final) {
    if (!db) return;
    if (final) exec_sql("PRAGMA journal_mode=DELETE");
    close_db();
}

void tpprof_store_abandon(void) {
    db = NULL;
    meta_st = NULL;
}
