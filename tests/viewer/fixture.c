// fixture.c: writes synthetic recordings for the viewer tests (see fixture.h).
// It follows docs/schema.md, not the recorder's code: if the two disagree,
// the schema document is the contract.
#define _GNU_SOURCE
#include "fixture.h"

#include <elf.h>
#include <link.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// ---------------------------------------------------------------------------
// Schema (docs/schema.md, version 1)

static const char schema_sql[] =
    "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);"
    "CREATE TABLE kinds(id INTEGER PRIMARY KEY, name TEXT NOT NULL);"
    "CREATE TABLE modules(id INTEGER PRIMARY KEY, path TEXT NOT NULL, build_id TEXT, "
    "  base INTEGER NOT NULL, lo INTEGER NOT NULL, hi INTEGER NOT NULL, loaded_ns INTEGER, "
    "  unloaded_ns INTEGER);"
    "CREATE TABLE stack_nodes(id INTEGER PRIMARY KEY, parent INTEGER NOT NULL, ip INTEGER NOT NULL);"
    "CREATE TABLE symbols(ip INTEGER NOT NULL, idx INTEGER NOT NULL, function TEXT, file TEXT, "
    "  line INTEGER, module TEXT, PRIMARY KEY (ip, idx)) WITHOUT ROWID;"
    "CREATE TABLE threads(tid INTEGER PRIMARY KEY, name TEXT, first_ns INTEGER, last_ns INTEGER);"
    "CREATE TABLE sites(stack_id INTEGER NOT NULL, kind INTEGER NOT NULL, alloc_count INTEGER, "
    "  alloc_bytes INTEGER, free_count INTEGER, freed_bytes INTEGER, temp_count INTEGER, "
    "  temp_bytes INTEGER, peak_count INTEGER, peak_bytes INTEGER, PRIMARY KEY (stack_id, kind));"
    "CREATE TABLE live_blocks(address INTEGER PRIMARY KEY, size INTEGER NOT NULL, "
    "  kind INTEGER NOT NULL, stack_id INTEGER NOT NULL, tid INTEGER, time_ns INTEGER, "
    "  reachability INTEGER NOT NULL);"
    "CREATE INDEX live_blocks_by_stack ON live_blocks(stack_id);"
    "CREATE TABLE timeline(time_ns INTEGER PRIMARY KEY, heap_bytes INTEGER, heap_blocks INTEGER, "
    "  mmap_bytes INTEGER, alloc_calls INTEGER, free_calls INTEGER, rss_bytes INTEGER);"
    "CREATE TABLE events(seq INTEGER PRIMARY KEY, time_ns INTEGER NOT NULL, tid INTEGER NOT NULL, "
    "  op INTEGER NOT NULL, kind INTEGER, address INTEGER, size INTEGER, stack_id INTEGER, "
    "  old_address INTEGER);"
    "INSERT INTO kinds VALUES (1,'malloc'),(2,'calloc'),(3,'realloc'),(4,'reallocarray'),"
    "  (5,'posix_memalign'),(6,'aligned_alloc'),(7,'memalign'),(8,'valloc'),(9,'pvalloc'),"
    "  (10,'mmap'),(11,'mmap_file');";

static int exec_sql(sqlite3 *db, const char *sql) {
    char *err = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &err) != SQLITE_OK) {
        fprintf(stderr, "fixture: %s\n  in: %.200s\n", err ? err : "?", sql);
        sqlite3_free(err);
        return -1;
    }
    return 0;
}

// sqlite3_vmprintf formats: printf plus %Q (quoted SQL string or NULL), so no
// format attribute: the compiler would reject %Q.
static int exec_fmt(sqlite3 *db, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *sql = sqlite3_vmprintf(fmt, ap);
    va_end(ap);
    int rc = exec_sql(db, sql);
    sqlite3_free(sql);
    return rc;
}

static sqlite3 *create(const char *path) {
    unlink(path);
    sqlite3 *db = NULL;
    if (sqlite3_open(path, &db) != SQLITE_OK) {
        fprintf(stderr, "fixture: cannot create %s\n", path);
        sqlite3_close(db);
        return NULL;
    }
    if (exec_sql(db, "BEGIN") || exec_sql(db, schema_sql)) {
        sqlite3_close(db);
        return NULL;
    }
    return db;
}

static int finish(sqlite3 *db, int rc) {
    if (rc == 0)
        rc = exec_sql(db, "COMMIT");
    sqlite3_close(db);
    return rc;
}

static int write_meta(sqlite3 *db, int64_t version, bool foreign, bool complete, uint64_t peak) {
    int rc = exec_fmt(db,
                      "INSERT INTO meta VALUES ('schema_version','%lld'),('tool_version','0.1.0'),"
                      "('mode','aggregate'),('depth','64'),('pid','4242'),('ppid','1'),"
                      "('exe','/opt/fake/app'),('cmdline','[\"/opt/fake/app\"]'),"
                      "('start_unix_ns','1700000000000000000'),('end_unix_ns','1700000000250000000'),"
                      "('duration_ns','250000000'),('complete','%d'),('peak_bytes','%llu'),"
                      "('peak_time_ns','5000000')",
                      (long long)version, complete ? 1 : 0, (unsigned long long)peak);
    if (rc == 0 && complete)
        rc = exec_sql(db, "INSERT INTO meta VALUES ('end_reason','exit'), ('leak_scan','1')");
    if (rc == 0 && !foreign)
        rc = exec_sql(db, "INSERT INTO meta VALUES ('tool','tpprof')");
    return rc;
}

// ---------------------------------------------------------------------------
// The "app" recording

enum {
    IP_MAIN = 0x401010,
    IP_LEAK_ONCE = 0x401110,
    IP_MAKE_BUFFER = 0x401210,
    IP_MAP_ARENA = 0x401310,
    IP_INLINED = 0x401410,
    IP_PARSE = 0x401510,
    IP_GROW = 0x401610,
    IP_OWN = 0x700100,
    IP_CACHE_PUT = 0x401710,
    IP_EXTRA_HOLD = 0x401810,
    IP_MEMO = 0x401910,
    IP_KEEP_ROW = 0x401a10,
    IP_MAKE_TENSOR = 0x401b10,
    IP_TP_RETAIN = 0x800110, // in the fake libtensorplay.so.0
};

// The tables of docs/schema-tensors.md.
static const char tensor_schema_sql[] =
    "CREATE TABLE storages(id INTEGER PRIMARY KEY, data INTEGER, nbytes INTEGER NOT NULL, "
    "  allocator TEXT, device TEXT NOT NULL, resizable INTEGER NOT NULL, created_ns INTEGER, "
    "  created_stack INTEGER NOT NULL, last_release_ns INTEGER, data_released_ns INTEGER, "
    "  freed_ns INTEGER, strong INTEGER NOT NULL, weak INTEGER NOT NULL, block_address INTEGER, "
    "  block_size INTEGER, block_kind INTEGER, block_freed_ns INTEGER, at_peak INTEGER NOT NULL, "
    "  version_bumps INTEGER NOT NULL);"
    "CREATE TABLE storage_refs(storage_id INTEGER NOT NULL, op INTEGER NOT NULL, "
    "  stack_id INTEGER NOT NULL, tensor_id INTEGER NOT NULL, count INTEGER NOT NULL);"
    "CREATE TABLE tensors(id INTEGER PRIMARY KEY, storage_id INTEGER NOT NULL, "
    "  base_id INTEGER NOT NULL, storage_offset INTEGER NOT NULL, sizes TEXT NOT NULL, "
    "  strides TEXT NOT NULL, dtype TEXT NOT NULL, itemsize INTEGER NOT NULL, created_ns INTEGER, "
    "  created_stack INTEGER NOT NULL, freed_ns INTEGER, version INTEGER NOT NULL, "
    "  at_peak INTEGER NOT NULL);"
    "CREATE TABLE refcount_sites(op INTEGER NOT NULL, stack_id INTEGER NOT NULL, "
    "  count INTEGER NOT NULL, PRIMARY KEY (op, stack_id));"
    "CREATE TABLE storage_lifetimes(allocator TEXT NOT NULL PRIMARY KEY, count INTEGER, "
    "  live_ns_sum INTEGER, live_ns_max INTEGER, release_delay_ns_sum INTEGER, "
    "  release_delay_ns_max INTEGER);"
    "CREATE TABLE allocator_events(seq INTEGER PRIMARY KEY, time_ns INTEGER NOT NULL, tid INTEGER, "
    "  allocator TEXT NOT NULL, action INTEGER NOT NULL, device TEXT, segment INTEGER, "
    "  segment_size INTEGER, block INTEGER, block_size INTEGER, requested INTEGER, "
    "  stream INTEGER, stack_id INTEGER NOT NULL);"
    "CREATE INDEX allocator_events_by_time ON allocator_events(time_ns);";

// The tensor scenario of fixture.h.
static int write_tensors(sqlite3 *db, bool full) {
    int rc = exec_sql(db, tensor_schema_sql);
    if (rc == 0)
        rc = exec_fmt(db,
                      "INSERT INTO stack_nodes VALUES (9,1,%d),(10,1,%d),(11,1,%d),(12,1,%d),(13,1,%d),"
                      "  (14,9,%d);"
                      "INSERT INTO modules VALUES (3,'/opt/fake/libtensorplay.so.0',NULL, 8388608, "
                      "  8388608, 8454144, 0, NULL);"
                      "INSERT INTO symbols VALUES "
                      "(%d,0,'tp_storage_retain','/src/core/storage.c',88,'/opt/fake/libtensorplay.so.0'),"
                      "(%d,0,'cache_put','/src/app/cache.c',27,'/opt/fake/app'),"
                      "(%d,0,'extra_hold','/src/app/hold.c',15,'/opt/fake/app'),"
                      "(%d,0,'memo_remember','/src/app/memo.c',22,'/opt/fake/app'),"
                      "(%d,0,'keep_row','/src/app/views.c',18,'/opt/fake/app'),"
                      "(%d,0,'make_tensor','/src/app/tensor.c',9,'/opt/fake/app');"
                      "INSERT INTO meta VALUES ('tensors','1'),('peak_storage_bytes','6295552'),"
                      "('peak_storage_time_ns','6000')",
                      IP_CACHE_PUT, IP_EXTRA_HOLD, IP_MEMO, IP_KEEP_ROW, IP_MAKE_TENSOR, IP_TP_RETAIN,
                      IP_TP_RETAIN, IP_CACHE_PUT, IP_EXTRA_HOLD, IP_MEMO, IP_KEEP_ROW, IP_MAKE_TENSOR);
    // storages(id, data, nbytes, allocator, device, resizable, created_ns, created_stack,
    //   last_release_ns, data_released_ns, freed_ns, strong, weak, block_address, block_size,
    //   block_kind, block_freed_ns, at_peak, version_bumps)
    if (rc == 0)
        rc = exec_sql(db,
                      "INSERT INTO storages VALUES "
                      "(1, 268435456, 262144, 'cpu', 'cpu', 0, 1000, 13, NULL, NULL, NULL, 1, 1, "
                      "  268435456, 262144, 1, NULL, 0, 0),"
                      "(2, 268697600, 262144, 'cpu', 'cpu', 0, 2000, 13, NULL, NULL, NULL, 1, 1, "
                      "  268697600, 262144, 1, NULL, 0, 0),"
                      "(3, 268959744, 4096, 'cpu', 'cpu', 0, 3000, 13, NULL, NULL, NULL, 3, 1, "
                      "  268959744, 4096, 1, NULL, 0, 2),"
                      "(4, 269025280, 32768, 'cpu', 'cpu', 0, 4000, 13, 9000, 9000, NULL, 0, 1, "
                      "  269025280, 32768, 1, 12500, 0, 0),"
                      "(5, 285212672, 4194304, 'cpu', 'cpu', 0, 5000, 12, NULL, NULL, NULL, 2, 1, "
                      "  285212672, 4194304, 10, NULL, 1, 0),"
                      "(6, 301989888, 2097152, 'cpu', 'cpu', 0, 6000, 12, 20000, 20000, 20000, 0, 0, "
                      "  301989888, 2097152, 10, 20000, 1, 0),"
                      "(7, 318767104, 2097152, 'cpu', 'cpu', 0, 7000, 13, NULL, NULL, NULL, 2, 1, "
                      "  318767104, 2097152, 10, NULL, 0, 0);"
                      "INSERT INTO tensors VALUES "
                      "(10, 3, 0, 0, '[16, 64]', '[64, 1]', 'float32', 4, 3000, 13, NULL, 0, 0),"
                      "(11, 3, 10, 64, '[64]', '[1]', 'float32', 4, 3100, 13, NULL, 0, 0),"
                      "(19, 5, 0, 0, '[1024, 1024]', '[1024, 1]', 'float32', 4, 5000, 13, NULL, 0, 1),"
                      "(20, 5, 19, 0, '[1024]', '[1]', 'float32', 4, 5100, 12, NULL, 0, 1),"
                      "(30, 6, 0, 0, '[2, 256]', '[1024, 1]', 'float32', 4, 6000, 12, 20000, 0, 1),"
                      "(40, 7, 0, 0, '[524288]', '[1]', 'float32', 4, 7000, 13, NULL, 0, 0),"
                      "(41, 7, 40, 0, '[1024, 512]', '[512, 1]', 'float32', 4, 7100, 12, NULL, 0, 0);"
                      "INSERT INTO storage_refs VALUES "
                      "(1, 1, 14, 0, 1), (2, 1, 14, 0, 1),"
                      "(3, 0, 13, 10, 1), (3, 1, 13, 11, 1), (3, 1, 10, 0, 1),"
                      "(4, 3, 11, 0, 1),"
                      "(5, 0, 13, 19, 1), (5, 1, 12, 20, 1),"
                      "(7, 0, 13, 40, 1), (7, 1, 12, 41, 1);"
                      "INSERT INTO refcount_sites VALUES (1, 9, 8), (2, 0, 20), (3, 11, 1), (1, 10, 1);"
                      "INSERT INTO storage_lifetimes VALUES ('cpu', 3, 3000, 2000, 0, 0),"
                      "  ('deferred', 2, 10000, 6000, 4000, 3000);");
    if (rc == 0 && full)
        rc = exec_sql(db, "UPDATE meta SET value = 'full' WHERE key = 'mode';"
                          "INSERT INTO events VALUES (1, 1500, 100, 11, 1, 1, 2, 9, 1),"
                          "  (2, 8000, 100, 11, 2, 1, 1, 0, 1)");
    // allocator_events(seq, time_ns, tid, allocator, action, device, segment, segment_size,
    //   block, block_size, requested, stream, stack_id); A, B, C as in fixture.h.
    const long long A = 0x100000, B = 0x800000, C = 0x2000000, MS = 1000000;
    struct { long long t; int action; long long seg, seg_size, block, size, req; int stack; } ev[] = {
        {1, 1, A, 2097152, A, 2097152, 0, 4},
        {2, 5, A, 2097152, A + 1024, 2096128, 0, 4},
        {2, 3, A, 2097152, A, 1024, 1000, 4},
        {3, 5, A, 2097152, A + 5120, 2092032, 0, 7},
        {3, 3, A, 2097152, A + 1024, 4096, 4000, 7},
        {4, 5, A, 2097152, A + 13312, 2083840, 0, 4},
        {4, 3, A, 2097152, A + 5120, 8192, 8192, 4},
        {5, 4, A, 2097152, A + 1024, 4096, 4000, 7},
        {6, 1, B, 20971520, B, 20971520, 0, 5},
        {6, 5, B, 20971520, B + 10485760, 10485760, 0, 5},
        {6, 3, B, 20971520, B, 10485760, 10000000, 5},
        {7, 1, C, 4194304, C, 4194304, 0, 7},
        {7, 3, C, 4194304, C, 4194304, 4194304, 7},
        {8, 4, C, 4194304, C, 4194304, 4194304, 7},
        {9, 2, C, 4194304, C, 4194304, 0, 7},
        {10, 4, A, 2097152, A + 5120, 8192, 8192, 4},
        {10, 6, A, 2097152, A + 1024, 12288, 0, 4},
        {10, 6, A, 2097152, A + 1024, 2096128, 0, 4},
    };
    for (size_t i = 0; rc == 0 && i < sizeof ev / sizeof *ev; i++)
        rc = exec_fmt(db,
                      "INSERT INTO allocator_events VALUES (%d, %lld, 100, 'caching', %d, 'cpu', "
                      "%lld, %lld, %lld, %lld, %lld, 0, %d)",
                      (int)i + 1, ev[i].t * MS, ev[i].action, ev[i].seg, ev[i].seg_size,
                      ev[i].block, ev[i].size, ev[i].req, ev[i].stack);
    return rc;
}

int fixture_write(const char *path, const fixture_options *o) {
    sqlite3 *db = create(path);
    if (!db)
        return -1;
    int64_t version = o->schema_version ? o->schema_version : 1;
    int reach_lost = o->incomplete ? 0 : 1, reach_reachable = o->incomplete ? 0 : 2;
    int rc = write_meta(db, version, o->foreign, !o->incomplete, FIX_PEAK_BYTES + o->extra_peak_bytes);
    if (rc == 0)
        rc = exec_sql(db,
                      "INSERT INTO modules VALUES (1,'/opt/fake/app','00112233445566778899aabbccddeeff00112233',"
                      "  4194304, 4194304, 5242880, 0, NULL),"
                      "(2,'/opt/fake/libtpprof.so',NULL, 7340032, 7340032, 7405568, 0, NULL);");
    if (rc == 0)
        rc = exec_fmt(db,
                      "INSERT INTO stack_nodes VALUES (1,0,%d),(2,1,%d),(3,2,%d),(4,1,%d),(5,1,%d),"
                      "(6,1,%d),(7,1,%d),(8,1,%d)",
                      IP_MAIN, IP_LEAK_ONCE, IP_OWN, IP_MAKE_BUFFER, IP_MAP_ARENA, IP_INLINED,
                      IP_PARSE, IP_GROW);
    if (rc == 0 && !o->no_symbols)
        rc = exec_fmt(db,
                      "INSERT INTO symbols VALUES "
                      "(%d,0,'main','/src/app/app.c',50,'/opt/fake/app'),"
                      "(%d,0,'leak_once','/src/app/leak.c',12,'/opt/fake/app'),"
                      "(%d,0,'tpprof_malloc_hook','/src/tpprof/hooks.c',99,'/opt/fake/libtpprof.so'),"
                      "(%d,0,'make_buffer','/src/app/buffer.c',20,'/opt/fake/app'),"
                      "(%d,0,'map_arena','/src/app/arena.c',30,'/opt/fake/app'),"
                      "(%d,0,'inner_helper','/src/app/helpers.h',7,'/opt/fake/app'),"
                      "(%d,1,'outer_fn','/src/app/app.c',40,'/opt/fake/app'),"
                      "(%d,0,'parse_token','/src/app/parse.c',60,'/opt/fake/app'),"
                      "(%d,0,'grow_leak','/src/app/grow.c',70,'/opt/fake/app');"
                      "INSERT INTO meta VALUES ('symbolized','1')",
                      IP_MAIN, IP_LEAK_ONCE, IP_OWN, IP_MAKE_BUFFER, IP_MAP_ARENA, IP_INLINED,
                      IP_INLINED, IP_PARSE, IP_GROW);
    // sites(stack_id, kind, alloc_count, alloc_bytes, free_count, freed_bytes,
    //       temp_count, temp_bytes, peak_count, peak_bytes)
    if (rc == 0)
        rc = exec_sql(db, "INSERT INTO sites VALUES "
                          "(3,1, 1,4096, 0,0, 0,0, 1,4096),"
                          "(4,2, 10,1000, 8,800, 0,0, 5,500),"
                          "(5,10, 1,8192, 0,0, 0,0, 1,8192),"
                          "(6,1, 100,1048576, 100,1048576, 0,0, 1,10240),"
                          "(7,1, 5000,80000, 5000,80000, 4000,64000, 0,0)");
    if (rc == 0 && !o->no_leaks)
        rc = exec_fmt(db,
                      "INSERT INTO live_blocks VALUES "
                      "(65536, 4096, 1, 3, 100, 1000, %d),"
                      "(131072, 100, 2, 4, 100, 2000, %d),"
                      "(131328, 100, 2, 4, 100, 2100, %d),"
                      "(139637976727552, 8192, 10, 5, 100, 3000, %d)",
                      reach_lost, reach_reachable, reach_reachable, reach_lost);
    if (rc == 0 && (o->extra_lost_bytes || o->extra_peak_bytes))
        rc = exec_fmt(db, "INSERT INTO sites VALUES (8,1, 1,%llu, 0,0, 0,0, %d,%llu)",
                      (unsigned long long)o->extra_lost_bytes, o->extra_peak_bytes ? 1 : 0,
                      (unsigned long long)o->extra_peak_bytes);
    if (rc == 0 && o->extra_lost_bytes)
        rc = exec_fmt(db, "INSERT INTO live_blocks VALUES (196608, %llu, 1, 8, 100, 4000, %d)",
                      (unsigned long long)o->extra_lost_bytes, reach_lost);
    if (rc == 0)
        rc = exec_sql(db, "INSERT INTO timeline VALUES (5000000, 14836, 8, 8192, 5112, 5108, 1048576)");
    if (rc == 0 && o->tensors)
        rc = write_tensors(db, o->full_mode);
    return finish(db, rc);
}

// ---------------------------------------------------------------------------
// The "self" recording: real addresses in this executable

static __attribute__((noinline)) void *caller_address(void) {
    void *ra = __builtin_return_address(0);
    __asm__ volatile("" : : "r"(ra) : "memory");
    return ra;
}

__attribute__((noinline)) void fixture_leaker(int64_t ips[2], int lines[3]);
__attribute__((noinline)) void fixture_outer(int64_t ips[2], int lines[3]);

// Inlined into fixture_leaker: its return address expands to two frames.
static inline __attribute__((always_inline)) void fixture_inlined(int64_t ips[2], int lines[3]) {
    ips[0] = (int64_t)(intptr_t)caller_address(); lines[0] = __LINE__;
}

__attribute__((noinline)) void fixture_leaker(int64_t ips[2], int lines[3]) {
    ips[1] = (int64_t)(intptr_t)__builtin_return_address(0);
    fixture_inlined(ips, lines); lines[2] = __LINE__;
    __asm__ volatile("" : : : "memory");
}

__attribute__((noinline)) void fixture_outer(int64_t ips[2], int lines[3]) {
    fixture_leaker(ips, lines); lines[1] = __LINE__;
    __asm__ volatile("" : : : "memory");
}

typedef struct self_module {
    uint64_t base, lo, hi;
    char build_id[2 * 64 + 1];
} self_module;

static int find_main_object(struct dl_phdr_info *info, size_t size, void *arg) {
    (void)size;
    self_module *m = arg;
    m->base = info->dlpi_addr;
    m->lo = UINT64_MAX;
    m->hi = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_LOAD) {
            uint64_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
            if (lo < m->lo)
                m->lo = lo;
            if (hi > m->hi)
                m->hi = hi;
        } else if (ph->p_type == PT_NOTE) {
            const char *p = (const char *)(info->dlpi_addr + ph->p_vaddr);
            const char *end = p + ph->p_memsz;
            while (p + sizeof(ElfW(Nhdr)) <= end) {
                const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)p;
                const char *name = p + sizeof *nh;
                const unsigned char *desc = (const unsigned char *)name + ((nh->n_namesz + 3) & ~3u);
                if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 && !memcmp(name, "GNU", 4) &&
                    nh->n_descsz <= 64) {
                    for (unsigned j = 0; j < nh->n_descsz; j++)
                        sprintf(m->build_id + 2 * j, "%02x", desc[j]);
                }
                p = (const char *)desc + ((nh->n_descsz + 3) & ~3u);
            }
        }
    }
    return 1; // the first object is the executable
}

static int write_self(const char *path, const char *module_path, bool wrong_build_id, int lines[3]);

int fixture_write_self(const char *path, bool wrong_build_id, int lines[3]) {
    return write_self(path, NULL, wrong_build_id, lines);
}

int fixture_write_self_as(const char *path, const char *module_path, int lines[3]) {
    return write_self(path, module_path, false, lines);
}

static int write_self(const char *path, const char *module_path, bool wrong_build_id, int lines[3]) {
    int64_t ips[2];
    fixture_outer(ips, lines);
    self_module m = {0};
    dl_iterate_phdr(find_main_object, &m);
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0 || !m.build_id[0]) {
        fprintf(stderr, "fixture: cannot describe this executable (build-id missing?)\n");
        return -1;
    }
    exe[n] = 0;
    if (module_path)
        snprintf(exe, sizeof exe, "%s", module_path);
    if (wrong_build_id)
        memset(m.build_id, 'a', strlen(m.build_id));
    sqlite3 *db = create(path);
    if (!db)
        return -1;
    int rc = write_meta(db, 1, false, true, 64);
    if (rc == 0)
        rc = exec_fmt(db, "INSERT INTO modules VALUES (1, %Q, %Q, %lld, %lld, %lld, 0, NULL)", exe,
                      m.build_id, (long long)m.base, (long long)m.lo, (long long)m.hi);
    if (rc == 0)
        rc = exec_fmt(db, "INSERT INTO stack_nodes VALUES (1, 0, %lld), (2, 1, %lld)",
                      (long long)ips[1], (long long)ips[0]);
    if (rc == 0)
        rc = exec_sql(db, "INSERT INTO sites VALUES (2,1, 1,64, 0,0, 0,0, 1,64);"
                          "INSERT INTO live_blocks VALUES (65536, 64, 1, 2, 1, 10, 1)");
    return finish(db, rc);
}

// ---------------------------------------------------------------------------
// A big recording

int fixture_write_big(const char *path, int nodes, int leaks) {
    sqlite3 *db = create(path);
    if (!db)
        return -1;
    int rc = write_meta(db, 1, false, true, 9500000);
    if (rc == 0)
        rc = exec_sql(db, "INSERT INTO modules VALUES (1,'/opt/fake/heavy',NULL, 4194304, 4194304, "
                          "5242880, 0, NULL); INSERT INTO meta VALUES ('symbolized','1')");
    sqlite3_stmt *node = NULL, *sym = NULL, *site = NULL, *live = NULL;
    if (rc == 0 &&
        (sqlite3_prepare_v2(db, "INSERT INTO stack_nodes VALUES (?1, ?2, ?3)", -1, &node, NULL) ||
         sqlite3_prepare_v2(db, "INSERT INTO symbols VALUES (?1, 0, ?2, ?3, ?4, '/opt/fake/heavy')",
                            -1, &sym, NULL) ||
         sqlite3_prepare_v2(db, "INSERT INTO sites VALUES (?1, 1, ?2, ?3, ?2, ?3, ?4, ?5, 1, ?6)",
                            -1, &site, NULL) ||
         sqlite3_prepare_v2(db, "INSERT INTO live_blocks VALUES (?1, ?2, 1, ?3, 1, 5, 1)", -1,
                            &live, NULL)))
        rc = -1;
    // Deterministic pseudo-random trie: node i hangs under an earlier node,
    // but never deeper than 20 frames.
    int *depth = calloc((size_t)nodes + 1, sizeof *depth);
    uint64_t x = 88172645463325252ull;
    for (int ip = 0; rc == 0 && ip < 2000; ip++) {
        char fn[32], file[32];
        snprintf(fn, sizeof fn, "fn_%d", ip);
        snprintf(file, sizeof file, "/src/heavy/file_%d.c", ip % 97);
        sqlite3_bind_int64(sym, 1, 0x401000 + 16 * ip);
        sqlite3_bind_text(sym, 2, fn, -1, SQLITE_TRANSIENT);
        sqlite3_bind_text(sym, 3, file, -1, SQLITE_TRANSIENT);
        sqlite3_bind_int(sym, 4, 10 + ip);
        rc = sqlite3_step(sym) == SQLITE_DONE ? 0 : -1;
        sqlite3_reset(sym);
    }
    for (int i = 1; rc == 0 && depth && i <= nodes; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        int parent = i == 1 ? 0 : (int)(x % (uint64_t)(i - 1)) + 1;
        while (parent && depth[parent] >= 20)
            parent = parent / 2;
        depth[i] = parent ? depth[parent] + 1 : 1;
        sqlite3_bind_int(node, 1, i);
        sqlite3_bind_int(node, 2, parent);
        sqlite3_bind_int64(node, 3, 0x401000 + 16 * (int64_t)(x % 2000));
        rc = sqlite3_step(node) == SQLITE_DONE ? 0 : -1;
        sqlite3_reset(node);
        if (rc == 0 && i % 4 == 0) {
            sqlite3_bind_int(site, 1, i);
            sqlite3_bind_int(site, 2, 50 + i % 1000);
            sqlite3_bind_int(site, 3, 64 * (50 + i % 1000));
            sqlite3_bind_int(site, 4, i % 7);
            sqlite3_bind_int(site, 5, 64 * (i % 7));
            sqlite3_bind_int(site, 6, 64 + i % 512);
            rc = sqlite3_step(site) == SQLITE_DONE ? 0 : -1;
            sqlite3_reset(site);
        }
    }
    for (int k = 0; rc == 0 && k < leaks; k++) {
        sqlite3_bind_int64(live, 1, 0x100000 + 4096 * (int64_t)k);
        sqlite3_bind_int(live, 2, 100 + k);
        sqlite3_bind_int(live, 3, 4 * (1 + k * 97 % (nodes / 4)));
        rc = sqlite3_step(live) == SQLITE_DONE ? 0 : -1;
        sqlite3_reset(live);
    }
    free(depth);
    sqlite3_finalize(node);
    sqlite3_finalize(sym);
    sqlite3_finalize(site);
    sqlite3_finalize(live);
    if (rc != 0)
        fprintf(stderr, "fixture: %s\n", sqlite3_errmsg(db));
    return finish(db, rc);
}

char *fixture_write_copy(const char *path, const fixture_options *o) {
    char *copy = strdup(path);
    if (copy && fixture_write(copy, o) == 0)
        return copy;
    free(copy);
    return NULL;
}

int fixture_write_edited(const char *path, const fixture_options *o, const char *sql) {
    if (fixture_write(path, o) != 0)
        return -1;
    sqlite3 *db = NULL;
    if (sqlite3_open(path, &db) != SQLITE_OK) {
        fprintf(stderr, "fixture: cannot reopen %s: %s\n", path, sqlite3_errmsg(db));
        sqlite3_close(db);
        return -1;
    }
    int rc = exec_sql(db, sql);
    sqlite3_close(db);
    return rc;
}

int fixture_write_foreign_sqlite(const char *path) {
    unlink(path);
    sqlite3 *db = NULL;
    if (sqlite3_open(path, &db) != SQLITE_OK) {
        sqlite3_close(db);
        return -1;
    }
    int rc = exec_sql(db, "CREATE TABLE people(name TEXT, age INTEGER);"
                          "INSERT INTO people VALUES ('ada', 36)");
    sqlite3_close(db);
    return rc;
}
