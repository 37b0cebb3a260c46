// schema.c: the recording's schema (docs/schema.md): the statements that
// make an empty recording, and the copy of what they make that a new
// recording starts from.
//
// Running some forty CREATE statements cost every recorded process about a
// millisecond of CPU (SQLite parsing them, then writing the b-tree pages
// and sqlite_master one statement at a time), a third of what /bin/true
// pays for being recorded. So the build runs them once (schema_gen.c, a
// meson custom_target) and keeps the empty database's bytes
// (tpprof_store_schema_db, generated); a new recording is those bytes
// written to its file, opened as any recording. The statements stay the one
// definition: the generator and a reopened recording (an exec'd image, a
// forked child) run them, and a test compares the copy with a database made
// statement by statement. This file must not write anything but the schema
// and the kinds table (the same for every process): meta is store.c's.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "base/sqlite_api.h"
#include "store/store.h"
#include "record/format.h"
#include "record/device.h"

static const char *const kind_names[TPPROF_KIND_COUNT] = {
    "", "malloc", "calloc", "realloc", "reallocarray", "posix_memalign", "aligned_alloc",
    "memalign", "valloc", "pvalloc", "mmap", "mmap_file", "mmap_reserved",
};

static const char schema_sql[] =
    "CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);"
    "CREATE TABLE IF NOT EXISTS kinds(id INTEGER PRIMARY KEY, name TEXT NOT NULL);"
    "CREATE TABLE IF NOT EXISTS modules(id INTEGER PRIMARY KEY, path TEXT NOT NULL, build_id TEXT,"
    " base INTEGER NOT NULL, lo INTEGER NOT NULL, hi INTEGER NOT NULL, loaded_ns INTEGER, unloaded_ns INTEGER);"
    // The stack trie in chunks (docs/schema.md): one row per up to
    // CHUNK_NODES nodes, not one per node; stack_nodes is a view of them.
    "CREATE TABLE IF NOT EXISTS stack_chunks(first INTEGER PRIMARY KEY, count INTEGER NOT NULL, nodes TEXT NOT NULL);"
    "CREATE VIEW IF NOT EXISTS stack_nodes(id, parent, ip) AS SELECT c.first + j.key,"
    " CASE j.type WHEN 'array' THEN j.value ->> 0 ELSE c.first + j.key - 1 END,"
    " CASE j.type WHEN 'array' THEN j.value ->> 1 ELSE j.value END FROM stack_chunks c, json_each(c.nodes) j;"
    "CREATE TABLE IF NOT EXISTS symbols(ip INTEGER NOT NULL, idx INTEGER NOT NULL, function TEXT, file TEXT,"
    " line INTEGER, module TEXT, PRIMARY KEY (ip, idx)) WITHOUT ROWID;"
    "CREATE TABLE IF NOT EXISTS threads(tid INTEGER PRIMARY KEY, name TEXT, first_ns INTEGER, last_ns INTEGER);"
    // Sites in chunks too (store.c put_sites): one row per up to 256 sites,
    // element k of a chunk being site first + k, or null where that number
    // has none; sites is a view of them (docs/schema.md).
    "CREATE TABLE IF NOT EXISTS site_chunks(first INTEGER PRIMARY KEY, count INTEGER NOT NULL, sites TEXT NOT NULL);"
    "CREATE VIEW IF NOT EXISTS sites(stack_id, kind, alloc_count, alloc_bytes, free_count, freed_bytes, temp_count,"
    " temp_bytes, peak_count, peak_bytes) AS SELECT j.value ->> 0, j.value ->> 1, j.value ->> 2, j.value ->> 3,"
    " j.value ->> 4, j.value ->> 5, j.value ->> 6, j.value ->> 7, j.value ->> 8, j.value ->> 9"
    " FROM site_chunks c, json_each(c.sites) j WHERE j.type = 'array';"
    // The blocks alive at the end in chunks (store.c put_live): one row per
    // up to 256 blocks in address order; live_blocks is a view of them.
    "CREATE TABLE IF NOT EXISTS live_chunks(first INTEGER PRIMARY KEY, count INTEGER NOT NULL, blocks TEXT NOT NULL);"
    "CREATE VIEW IF NOT EXISTS live_blocks(address, size, kind, stack_id, tid, time_ns, reachability) AS SELECT"
    " j.value ->> 0, j.value ->> 1, j.value ->> 2, j.value ->> 3, j.value ->> 4, j.value ->> 5, j.value ->> 6"
    " FROM live_chunks c, json_each(c.blocks) j;"
    "CREATE TABLE IF NOT EXISTS timeline(time_ns INTEGER PRIMARY KEY, heap_bytes INTEGER, heap_blocks INTEGER,"
    " mmap_bytes INTEGER, alloc_calls INTEGER, free_calls INTEGER, rss_bytes INTEGER);"
    "CREATE TABLE IF NOT EXISTS events(seq INTEGER PRIMARY KEY, time_ns INTEGER NOT NULL, tid INTEGER NOT NULL,"
    " op INTEGER NOT NULL, kind INTEGER, address INTEGER, size INTEGER, stack_id INTEGER, old_address INTEGER);"
    // Tensor and allocator tables (docs/schema-tensors.md).
    "CREATE TABLE IF NOT EXISTS storages(id INTEGER PRIMARY KEY, data INTEGER, nbytes INTEGER NOT NULL, allocator TEXT,"
    " device TEXT NOT NULL, resizable INTEGER NOT NULL, created_ns INTEGER, created_stack INTEGER NOT NULL,"
    " last_release_ns INTEGER, data_released_ns INTEGER, freed_ns INTEGER, strong INTEGER NOT NULL,"
    " weak INTEGER NOT NULL, block_address INTEGER, block_size INTEGER, block_kind INTEGER, block_freed_ns INTEGER,"
    " at_peak INTEGER NOT NULL, version_bumps INTEGER NOT NULL);"
    "CREATE TABLE IF NOT EXISTS storage_refs(storage_id INTEGER NOT NULL, op INTEGER NOT NULL,"
    " stack_id INTEGER NOT NULL, tensor_id INTEGER NOT NULL, count INTEGER NOT NULL);"
    "CREATE TABLE IF NOT EXISTS tensors(id INTEGER PRIMARY KEY, storage_id INTEGER NOT NULL, base_id INTEGER NOT NULL,"
    " storage_offset INTEGER NOT NULL, sizes TEXT NOT NULL, strides TEXT NOT NULL, dtype TEXT NOT NULL,"
    " itemsize INTEGER NOT NULL, created_ns INTEGER, created_stack INTEGER NOT NULL, freed_ns INTEGER,"
    " version INTEGER NOT NULL, at_peak INTEGER NOT NULL);"
    "CREATE TABLE IF NOT EXISTS tensor_refs(tensor_id INTEGER NOT NULL, op INTEGER NOT NULL,"
    " stack_id INTEGER NOT NULL, count INTEGER NOT NULL);"
    "CREATE TABLE IF NOT EXISTS refcount_sites(op INTEGER NOT NULL, stack_id INTEGER NOT NULL, count INTEGER NOT NULL,"
    " PRIMARY KEY (op, stack_id));"
    "CREATE TABLE IF NOT EXISTS storage_lifetimes(allocator TEXT NOT NULL PRIMARY KEY, count INTEGER,"
    " live_ns_sum INTEGER, live_ns_max INTEGER, release_delay_ns_sum INTEGER, release_delay_ns_max INTEGER,"
    " release_delay_count INTEGER, live_count INTEGER);"
    "CREATE TABLE IF NOT EXISTS allocator_events(seq INTEGER PRIMARY KEY, time_ns INTEGER NOT NULL, tid INTEGER,"
    " allocator TEXT NOT NULL, action INTEGER NOT NULL, device TEXT, segment INTEGER, segment_size INTEGER,"
    " block INTEGER, block_size INTEGER, requested INTEGER, stream INTEGER, stack_id INTEGER NOT NULL);"
    "CREATE INDEX IF NOT EXISTS allocator_events_by_time ON allocator_events(time_ns);"
    // The autograd graph (observer ABI 3; docs/schema-tensors.md).
    "CREATE TABLE IF NOT EXISTS graph_nodes(id INTEGER PRIMARY KEY, name TEXT NOT NULL, created_ns INTEGER,"
    " created_stack INTEGER NOT NULL, freed_ns INTEGER, backward_ran INTEGER NOT NULL, retained INTEGER NOT NULL,"
    " ran_ns INTEGER);"
    "CREATE TABLE IF NOT EXISTS graph_edges(node_id INTEGER NOT NULL, next_id INTEGER NOT NULL, leaf INTEGER NOT NULL);"
    "CREATE TABLE IF NOT EXISTS saved_tensors(node_id INTEGER NOT NULL, slot INTEGER NOT NULL,"
    " storage_id INTEGER NOT NULL, tensor_id INTEGER NOT NULL, saved_ns INTEGER, released_ns INTEGER,"
    " PRIMARY KEY (node_id, slot));"
    "CREATE TABLE IF NOT EXISTS tensor_grads(tensor_id INTEGER PRIMARY KEY, grad_id INTEGER NOT NULL,"
    " grad_storage_id INTEGER NOT NULL, set_ns INTEGER);";

// A plain successful allocation and its free are the block's row (alloc_seq,
// free_seq and the free_* columns), not rows of their own: one row per pair
// instead of three, which was most of what tpprof added to a program that
// allocates and frees device memory in a loop (docs/device.md, "Cost").
// device_events is the view that shows every call as before.
static const char device_schema[] =
    "CREATE TABLE IF NOT EXISTS device_calls(seq INTEGER PRIMARY KEY, time_ns INTEGER NOT NULL, tid INTEGER NOT NULL,"
    " op INTEGER NOT NULL, api TEXT NOT NULL, kind INTEGER NOT NULL, device INTEGER NOT NULL, stream INTEGER,"
    " pool INTEGER, address INTEGER, size INTEGER, stack_id INTEGER NOT NULL, result INTEGER NOT NULL,"
    " flag INTEGER NOT NULL DEFAULT 0);"
    "CREATE TABLE IF NOT EXISTS device_blocks(address INTEGER NOT NULL, device INTEGER NOT NULL, kind INTEGER NOT NULL,"
    " size INTEGER NOT NULL, api TEXT NOT NULL, stream INTEGER, stack_id INTEGER NOT NULL, tid INTEGER,"
    " alloc_ns INTEGER NOT NULL, free_ns INTEGER, free_stack_id INTEGER, free_api TEXT, ended_by TEXT,"
    " pool INTEGER, alloc_seq INTEGER, free_seq INTEGER, free_tid INTEGER, free_kind INTEGER, free_device INTEGER);"
    "CREATE VIEW IF NOT EXISTS device_events AS"
    " SELECT seq, time_ns, tid, op, api, kind, device, stream, pool, address, size, stack_id, result, flag"
    " FROM device_calls"
    " UNION ALL SELECT alloc_seq, alloc_ns, tid, 1, api, kind, device, stream, pool, address, NULLIF(size, 0),"
    " stack_id, 0, 0 FROM device_blocks WHERE alloc_seq IS NOT NULL"
    " UNION ALL SELECT free_seq, free_ns, free_tid, 2, free_api, free_kind, free_device, NULL, NULL, address, NULL,"
    " free_stack_id, 0, 0 FROM device_blocks WHERE free_seq IS NOT NULL;"
    "CREATE TABLE IF NOT EXISTS device_sites(stack_id INTEGER NOT NULL, kind INTEGER NOT NULL, device INTEGER NOT NULL,"
    " api TEXT NOT NULL, alloc_count INTEGER NOT NULL, alloc_bytes INTEGER NOT NULL, free_count INTEGER NOT NULL,"
    " freed_bytes INTEGER NOT NULL, peak_count INTEGER NOT NULL, peak_bytes INTEGER NOT NULL,"
    " total_peak_count INTEGER NOT NULL, total_peak_bytes INTEGER NOT NULL, PRIMARY KEY (stack_id, kind, device));"
    "CREATE TABLE IF NOT EXISTS device_peaks(scope TEXT NOT NULL, device INTEGER NOT NULL, peak_bytes INTEGER NOT NULL,"
    " peak_time_ns INTEGER NOT NULL, PRIMARY KEY (scope, device));"
    "CREATE TABLE IF NOT EXISTS device_timeline(time_ns INTEGER NOT NULL, device INTEGER NOT NULL,"
    " allocated_bytes INTEGER NOT NULL, reserved_bytes INTEGER, PRIMARY KEY (time_ns, device));";

static const char *const dev_kind_names[TPPROF_DEV_KIND_COUNT] = {
    "", "cuda_device", "cuda_async", "cuda_managed", "cuda_pitch", "cuda_pinned_host", "cuda_vmm_reserve",
    "cuda_vmm_physical", "cuda_vmm_mapping",
};

// The schema's identity: a hash (FNV-1a, 31 bits: user_version is a
// signed 32-bit integer) of everything _make runs, kept in the file's
// user_version. A recording reopened by the same recorder (the image an
// exec started: every `env VAR=... prog` of a traced script) has it and is
// not made again: running the statements, IF NOT EXISTS, cost as much
// parsing as making it.
static int schema_id(void) {
    uint32_t h = 2166136261u;
    const char *parts[2 + TPPROF_KIND_COUNT + TPPROF_DEV_KIND_COUNT];
    int n = 0;
    parts[n++] = schema_sql;
    parts[n++] = device_schema;
    for (int k = 0; k < TPPROF_KIND_COUNT; k++) parts[n++] = kind_names[k];
    for (int k = 0; k < TPPROF_DEV_KIND_COUNT; k++) parts[n++] = dev_kind_names[k];
    for (int i = 0; i < n; i++)
        for (const char *c = parts[i];; c++) {
            h = (h ^ (unsigned char)*c) * 16777619u;
            if (!*c) break;
        }
    return (int)(h & 0x7fffffff) | 1; // never 0, a new file's user_version
}

static int user_version_row(void *arg, int n, char **vals, char **names) {
    (void)names;
    if (n > 0 && vals[0]) *(int *)arg = atoi(vals[0]);
    return 0;
}

bool tpprof_store_schema_current(sqlite3 *db) {
    int v = 0;
    if (sqlite3_exec(db, "PRAGMA user_version", user_version_row, &v, NULL) != SQLITE_OK) return false;
    return v == schema_id();
}

bool tpprof_store_schema_make(sqlite3 *db) {
    char sql[160];
    snprintf(sql, sizeof sql, "PRAGMA user_version = %d", schema_id());
    if (sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK) return false;
    if (sqlite3_exec(db, schema_sql, NULL, NULL, NULL) != SQLITE_OK) return false;
    if (sqlite3_exec(db, device_schema, NULL, NULL, NULL) != SQLITE_OK) return false;
    for (int k = 1; k < TPPROF_KIND_COUNT; k++) {
        char sql[128];
        snprintf(sql, sizeof sql, "INSERT OR REPLACE INTO kinds(id, name) VALUES(%d, '%s')", k, kind_names[k]);
        if (sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK) return false;
    }
    for (int k = 1; k < TPPROF_DEV_KIND_COUNT; k++) {
        char sql[160];
        snprintf(sql, sizeof sql, "INSERT OR REPLACE INTO kinds(id, name) VALUES(%d, '%s')", TPPROF_DEV_KIND_BASE + k,
                 dev_kind_names[k]);
        if (sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK) return false;
    }
    return true;
}

// The generated copy (schema_db.c, from schema_gen.c). Absent in the
// generator itself, which is what makes it.
#ifndef TPPROF_SCHEMA_GEN
extern const unsigned char tpprof_store_schema_db[];
extern const unsigned long tpprof_store_schema_db_size;

bool tpprof_store_schema_copy(const char *path, bool in_place) {
    // O_EXCL: the caller removed what was there (a recording it may
    // replace); anything that appeared since is not overwritten. In place:
    // the caller's claimed file (the claim's lock stays with its inode),
    // empty when the claim made it. Not opened with O_TRUNC, nor cut to
    // nothing: on ext4 a file truncated to size 0 has its blocks allocated
    // and its pages written back when it is closed (auto_da_alloc), which
    // each process paid for its recording, and `tpprof run` again when it
    // removed the files it folded (a build's 169: 0.26-0.41 s, against
    // ~0.02 s for files never truncated). An earlier recording there is
    // overwritten and cut to the copy's size instead.
    int fd = open(path, in_place ? O_WRONLY | O_NOFOLLOW | O_CLOEXEC : O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) return false;
    struct stat st;
    bool longer = in_place && fstat(fd, &st) == 0 && (unsigned long)st.st_size > tpprof_store_schema_db_size;
    const unsigned char *p = tpprof_store_schema_db;
    size_t left = tpprof_store_schema_db_size;
    while (left > 0) {
        ssize_t n = write(fd, p, left);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        p += n;
        left -= (size_t)n;
    }
    if (left == 0 && longer && ftruncate(fd, (off_t)tpprof_store_schema_db_size) != 0) left = 1;
    if (left > 0 && in_place && ftruncate(fd, 0) != 0) { /* SQLite reads what is there; its error says it */ }
    close(fd);
    if (left > 0 && !in_place) unlink(path);
    return left == 0;
}
#endif
