// profile.c: everything `report` and `check` show, read from a recording in a
// handful of aggregate queries: the summary, the leaks grouped by (stack,
// kind, reachability), the per-site totals, the kind names.
//
// The database is opened read-only. When `symbols` is empty the stacks are
// symbolized here; the result is written back only through a second,
// read-write connection when the file is writable, and otherwise stays in
// memory. Nothing here prints except symbolize.c's warnings.
#define _POSIX_C_SOURCE 200809L
#include "viewer.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// ---------------------------------------------------------------------------
// Kinds

static const char *builtin_kinds[] = {
    NULL, "malloc", "calloc", "realloc", "reallocarray", "posix_memalign", "aligned_alloc",
    "memalign", "valloc", "pvalloc", "mmap", "mmap_file", "mmap_reserved",
};

// Whether kind is the recorder's mmap_reserved (found by name in
// load_kinds: ids are the database's).
static bool kind_reserved(const tpprof_profile *p, int64_t kind) { return kind != 0 && kind == p->reserved_kind; }

static void find_reserved_kind(tpprof_profile *p) {
    p->reserved_kind = 0;
    for (size_t i = 1; i < p->nkinds; i++)
        if (p->kind_names[i] && strcmp(p->kind_names[i], "mmap_reserved") == 0)
            p->reserved_kind = (int64_t)i;
}

static int load_kinds(tpprof_profile *p) {
    int64_t has = 0;
    if (tpprof_db_scalar(p->db, "SELECT COUNT(*) FROM sqlite_master WHERE name = 'kinds'", &has))
        return -1;
    int64_t max_id = 0;
    if (has && tpprof_db_scalar(p->db, "SELECT COALESCE(MAX(id), 0) FROM kinds", &max_id))
        return -1;
    size_t n = sizeof builtin_kinds / sizeof *builtin_kinds;
    if (max_id >= (int64_t)n && max_id < 4096)
        n = (size_t)max_id + 1;
    p->kind_names = calloc(n, sizeof *p->kind_names);
    if (!p->kind_names)
        return tpprof_error_set("out of memory");
    p->nkinds = n;
    for (size_t i = 1; i < sizeof builtin_kinds / sizeof *builtin_kinds; i++)
        p->kind_names[i] = strdup(builtin_kinds[i]);
    if (!has)
        return 0;
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(p->db->sql, "SELECT id, name FROM kinds", -1, &st, NULL) != SQLITE_OK)
        return tpprof_db_error(p->db, "reading kinds");
    while (sqlite3_step(st) == SQLITE_ROW) {
        int64_t id = sqlite3_column_int64(st, 0);
        const char *name = (const char *)sqlite3_column_text(st, 1);
        if (id > 0 && (size_t)id < n && name) {
            free(p->kind_names[id]);
            p->kind_names[id] = strdup(name);
        }
    }
    sqlite3_finalize(st);
    return 0;
}

const char *tpprof_profile_kind(const tpprof_profile *p, int64_t kind) {
    static _Thread_local char unknown[32];
    if (kind > 0 && (size_t)kind < p->nkinds && p->kind_names[kind])
        return p->kind_names[kind];
    snprintf(unknown, sizeof unknown, "kind%lld", (long long)kind);
    return unknown;
}

const char *tpprof_reach_name(int reachability) {
    switch (reachability) {
    case TPPROF_REACH_LOST: return "lost";
    case TPPROF_REACH_REACHABLE: return "reachable";
    default: return "unscanned";
    }
}

// ---------------------------------------------------------------------------
// Symbols

static int load_symbols(tpprof_profile *p, const char *path, tpprof_symtab *tab, bool symbolize) {
    int64_t has_table = 0, have = 0;
    if (tpprof_db_scalar(p->db, "SELECT COUNT(*) FROM sqlite_master WHERE name = 'symbols'",
                         &has_table))
        return -1;
    if (has_table && tpprof_db_scalar(p->db, "SELECT COUNT(*) FROM symbols", &have))
        return -1;
    if (have > 0)
        return tpprof_symtab_load(p->db, tab);
    if (!symbolize)
        return 0;
    size_t nodes = 0;
    const int64_t *ips = tpprof_stacks_ips(p->stacks, &nodes);
    if (nodes == 0)
        return 0;
    if (tpprof_symbolize_ips(p->db, ips, nodes, tab) != 0)
        return -1;
    p->symbolized_now = true;
    // Save for next time when we may; a read-only file keeps them in memory.
    if (access(path, W_OK) == 0) {
        tpprof_db *rw = tpprof_db_open(path, true);
        if (rw && tpprof_symtab_save(rw, tab) == 0)
            p->symbols_saved = true;
        else
            p->symbols_unsaved = tpprof_strdup(tpprof_error());
        tpprof_db_close(rw);
    }
    return 0;
}

// ---------------------------------------------------------------------------
// Leaks and sites

static int leak_rank(int reachability) {
    return reachability == TPPROF_REACH_LOST ? 0 : reachability == TPPROF_REACH_UNSCANNED ? 1 : 2;
}

static int cmp_leak(const void *a, const void *b) {
    const tpprof_leak *x = a, *y = b;
    int rx = leak_rank(x->reachability), ry = leak_rank(y->reachability);
    if (rx != ry)
        return rx - ry;
    if (x->bytes != y->bytes)
        return x->bytes > y->bytes ? -1 : 1;
    if (x->count != y->count)
        return x->count > y->count ? -1 : 1;
    if (x->stack_id != y->stack_id)
        return x->stack_id < y->stack_id ? -1 : 1;
    return (x->kind > y->kind) - (x->kind < y->kind);
}

// Group live blocks by (stack, kind, reachability) in a hash table while
// streaming the rows: SQLite's GROUP BY would sort a leaky program's million
// blocks first, twice as slow.
typedef struct leak_table {
    size_t *slots; // index + 1 into p->leaks; 0 = empty
    size_t mask;
} leak_table;

static size_t leak_hash(int64_t stack, int64_t kind, int reach) {
    uint64_t h = (uint64_t)stack * 0x9E3779B97F4A7C15ull ^ (uint64_t)kind * 0xC2B2AE3D27D4EB4Full ^
                 (uint64_t)reach;
    return (size_t)(h ^ (h >> 29));
}

static int leak_table_grow(leak_table *t, const tpprof_profile *p) {
    size_t size = t->slots ? (t->mask + 1) * 2 : 1024;
    size_t *slots = calloc(size, sizeof *slots);
    if (!slots)
        return tpprof_error_set("out of memory");
    for (size_t i = 0; i < p->nleaks; i++) {
        const tpprof_leak *l = &p->leaks[i];
        size_t h = leak_hash(l->stack_id, l->kind, l->reachability) & (size - 1);
        while (slots[h])
            h = (h + 1) & (size - 1);
        slots[h] = i + 1;
    }
    free(t->slots);
    t->slots = slots;
    t->mask = size - 1;
    return 0;
}

// The group for (stack, kind, reach), created if new; NULL when out of memory.
static tpprof_leak *leak_group(tpprof_profile *p, leak_table *t, size_t *cap, int64_t stack,
                               int64_t kind, int reach) {
    if (!t->slots || 2 * (p->nleaks + 1) > t->mask + 1)
        if (leak_table_grow(t, p) != 0)
            return NULL;
    size_t h = leak_hash(stack, kind, reach) & t->mask;
    for (; t->slots[h]; h = (h + 1) & t->mask) {
        tpprof_leak *l = &p->leaks[t->slots[h] - 1];
        if (l->stack_id == stack && l->kind == kind && l->reachability == reach)
            return l;
    }
    tpprof_leak *grown = tpprof_grow(p->leaks, p->nleaks, cap, sizeof *grown);
    if (!grown)
        return NULL;
    p->leaks = grown;
    tpprof_leak *l = &p->leaks[p->nleaks++];
    *l = (tpprof_leak){.stack_id = stack, .kind = kind, .reachability = reach};
    t->slots[h] = p->nleaks;
    return l;
}

// The summary's leak totals from the groups, which it then sorts.
static void sum_leaks(tpprof_profile *p) {
    tpprof_summary *s = &p->summary;
    for (size_t i = 0; i < p->nleaks; i++) {
        const tpprof_leak *l = &p->leaks[i];
        s->leaked_bytes += l->bytes;
        s->leaked_count += l->count;
        if (l->reachability == TPPROF_REACH_LOST) {
            s->lost_bytes += l->bytes;
            s->lost_count += l->count;
        } else if (l->reachability == TPPROF_REACH_REACHABLE) {
            s->reachable_bytes += l->bytes;
            s->reachable_count += l->count;
        } else {
            s->unscanned_bytes += l->bytes;
            s->unscanned_count += l->count;
        }
    }
    if (p->nleaks)
        qsort(p->leaks, p->nleaks, sizeof *p->leaks, cmp_leak);
}

struct leaking {
    tpprof_profile *p;
    leak_table table;
    size_t cap;
};

// One live block into its group (tpprof_live_each).
static int take_block(void *arg, const int64_t v[7], unsigned have) {
    (void)have;
    struct leaking *g = arg;
    tpprof_profile *p = g->p;
    // A damaged file may hold negative sizes: count them as nothing.
    uint64_t bytes = v[1] > 0 ? (uint64_t)v[1] : 0;
    if (kind_reserved(p, v[2])) { // address space, not a leak
        p->summary.reserved_bytes += bytes;
        p->summary.reserved_live_count++;
        return 0;
    }
    if (v[6] == TPPROF_REACH_STORED_LIBC) { // the C library's, not a leak
        p->summary.libc_bytes += bytes;
        p->summary.libc_count++;
        return 0;
    }
    tpprof_leak *l = leak_group(p, &g->table, &g->cap, v[3], v[2], tpprof_reach_of(v[6]));
    if (!l)
        return tpprof_error_set("out of memory");
    l->bytes += bytes;
    l->count++;
    return 0;
}

static int load_leaks(tpprof_profile *p) {
    struct leaking g = {p, {0}, 0};
    int status = tpprof_live_each(p->db->sql, "main", p->db->path, take_block, &g);
    free(g.table.slots);
    if (status != 0)
        return -1;
    sum_leaks(p);
    return 0;
}

// Whether process pid exists and started within 2 s of unix_ns (a pid the
// system has since given to another process started later).
static bool process_started_at(pid_t pid, int64_t unix_ns) {
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    const char *p = strrchr(buf, ')'); // the name may hold spaces and parentheses
    unsigned long long start_ticks = 0;
    // After ") ": state, then fields 4 to 21; the start time is field 22.
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu",
                     &start_ticks) != 1)
        return false;
    f = fopen("/proc/stat", "r");
    if (!f)
        return false;
    unsigned long long btime = 0;
    char line[256];
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "btime %llu", &btime) == 1)
            break;
    fclose(f);
    long hz = sysconf(_SC_CLK_TCK);
    if (!btime || hz <= 0)
        return false;
    double started = (double)btime + (double)start_ticks / (double)hz;
    double diff = started - (double)unix_ns / 1e9;
    return diff > -2.0 && diff < 2.0;
}

// A recording cut short has no live_blocks (they are written at the end):
// each site's allocations minus its frees at the last flush stand in, as
// unscanned leaks. A program the OOM killer ended is the one most in need.
static int leaks_from_sites(tpprof_profile *p) {
    leak_table table = {0};
    size_t cap = 0;
    for (size_t i = 0; i < p->nsites; i++) {
        const tpprof_site *site = &p->sites[i];
        if (site->alloc_count <= site->free_count || site->alloc_bytes <= site->freed_bytes)
            continue;
        tpprof_leak *l = leak_group(p, &table, &cap, site->stack_id, site->kind, TPPROF_REACH_UNSCANNED);
        if (!l) {
            free(table.slots);
            return -1;
        }
        l->bytes += site->alloc_bytes - site->freed_bytes;
        l->count += site->alloc_count - site->free_count;
    }
    free(table.slots);
    p->summary.live_from_sites = p->nleaks > 0;
    sum_leaks(p);
    return 0;
}

// One site's row (v: stack_id, kind, then the eight counts of the sites
// columns, in order) into p.
static int take_site(tpprof_profile *p, const int64_t v[10], size_t *cap) {
    tpprof_summary *s = &p->summary;
    if (kind_reserved(p, v[1])) { // address space: no site of memory
        s->reserved_count += v[2] > 0 ? (uint64_t)v[2] : 0;
        s->reserved_total_bytes += v[3] > 0 ? (uint64_t)v[3] : 0;
        return 0;
    }
    tpprof_site *grown = tpprof_grow(p->sites, p->nsites, cap, sizeof *grown);
    if (!grown)
        return -1;
    p->sites = grown;
    tpprof_site *x = &p->sites[p->nsites++];
    x->stack_id = v[0];
    x->kind = v[1];
    uint64_t *fields[] = {&x->alloc_count, &x->alloc_bytes, &x->free_count, &x->freed_bytes,
                          &x->temp_count,  &x->temp_bytes,  &x->peak_count, &x->peak_bytes};
    for (int i = 0; i < 8; i++)
        *fields[i] = v[2 + i] > 0 ? (uint64_t)v[2 + i] : 0;
    s->allocations += x->alloc_count;
    s->total_bytes += x->alloc_bytes;
    s->frees += x->free_count;
    s->temporary_count += x->temp_count;
    s->temporary_bytes += x->temp_bytes;
    return 0;
}

// One site's row into p (tpprof_sites_each).
struct taking {
    tpprof_profile *p;
    size_t cap;
};

static int take_one(void *arg, const int64_t v[10], unsigned have) {
    (void)have; // (NULL reads as 0)
    struct taking *t = arg;
    return take_site(t->p, v, &t->cap);
}

static int load_sites(tpprof_profile *p) {
    struct taking t = {p, 0};
    return tpprof_sites_each(p->db->sql, "main", p->db->path, take_one, &t);
}

// The totals load_sites adds up, without a row kept (tpprof_sites_each):
// into all, and the reserved kind's into reserved too.
struct summing {
    const tpprof_profile *p;
    uint64_t *const *all, *const *reserved;
};

static int sum_site(void *arg, const int64_t v[10], unsigned have) {
    (void)have; // (NULL reads as 0)
    const struct summing *m = arg;
    const int64_t x[5] = {v[2], v[3], v[4], v[6], v[7]}; // alloc_count, alloc_bytes, free_count, temp_*
    bool reserved = kind_reserved(m->p, v[1]);
    for (int i = 0; i < 5; i++) {
        uint64_t u = x[i] > 0 ? (uint64_t)x[i] : 0;
        *m->all[i] += u;
        if (reserved)
            *m->reserved[i] += u;
    }
    return 0;
}

// The recorder's own totals of the rows (meta.site_totals and
// site_totals_reserved, written with the final flush's rows; docs/schema.md)
// into all and reserved, as sum_site would; false when the recording has
// none, or not for the reserved kind this reader found.
static bool meta_site_totals(tpprof_profile *p, uint64_t *const *all, uint64_t *const *reserved) {
    char *a = tpprof_db_meta(p->db, "site_totals"), *r = tpprof_db_meta(p->db, "site_totals_reserved");
    long long v[5], w[5], kind = -1;
    bool ok = a && r && sscanf(a, "%lld %lld %lld %lld %lld", &v[0], &v[1], &v[2], &v[3], &v[4]) == 5 &&
              sscanf(r, "%lld %lld %lld %lld %lld %lld", &kind, &w[0], &w[1], &w[2], &w[3], &w[4]) == 6 &&
              (!p->reserved_kind || kind == p->reserved_kind);
    for (int i = 0; ok && i < 5; i++) {
        *all[i] += v[i] > 0 ? (uint64_t)v[i] : 0;
        *reserved[i] += w[i] > 0 && p->reserved_kind ? (uint64_t)w[i] : 0;
    }
    free(a);
    free(r);
    return ok;
}

// A complete recording's totals (brief loads): the recorder's (meta), else
// every site's, then the reserved kind's taken out (address space: no site
// of memory).
static int load_site_totals(tpprof_profile *p) {
    tpprof_summary *s = &p->summary, r = {0};
    uint64_t *const all[] = {&s->allocations, &s->total_bytes, &s->frees, &s->temporary_count,
                             &s->temporary_bytes};
    uint64_t *const reserved[] = {&r.allocations, &r.total_bytes, &r.frees, &r.temporary_count,
                                  &r.temporary_bytes};
    struct summing m = {p, all, reserved};
    if (!meta_site_totals(p, all, reserved) && tpprof_sites_each(p->db->sql, "main", p->db->path, sum_site, &m) != 0)
        return -1;
    for (int i = 0; i < 5; i++)
        *all[i] -= *reserved[i] < *all[i] ? *reserved[i] : *all[i];
    s->reserved_count += r.allocations;
    s->reserved_total_bytes += r.total_bytes;
    return 0;
}

// ---------------------------------------------------------------------------
// Load

// The JSON array of strings the recorder writes for bypassing_modules
// (modules.c: only \" and \\ escaped). Anything else ends the list.
static void parse_paths(const char *json, char ***out, size_t *n) {
    *out = NULL;
    *n = 0;
    const char *c = json;
    if (*c++ != '[')
        return;
    while (*c == '"') {
        c++;
        size_t len = 0;
        char *path = malloc(strlen(c) + 1);
        if (!path)
            return;
        while (*c && *c != '"') {
            if (*c == '\\' && c[1])
                c++;
            path[len++] = *c++;
        }
        path[len] = 0;
        if (*c != '"') {
            free(path);
            return;
        }
        c++;
        char **grown = realloc(*out, (*n + 1) * sizeof **out);
        if (!grown) {
            free(path);
            return;
        }
        *out = grown;
        (*out)[(*n)++] = path;
        if (*c == ',')
            c++;
    }
}

// What profile_load reads: everything, symbolized or not (symbolize); brief, a complete
// recording's sites only added up (load_site_totals); without the stacks
// (and symbols: stacks NULL), `run`'s figures of its other recordings.
static tpprof_profile *profile_load(const char *path, bool symbolize, bool brief, bool stacks);

tpprof_profile *tpprof_profile_load(const char *path) { return profile_load(path, true, false, true); }

tpprof_profile *tpprof_profile_load_brief(const char *path) { return profile_load(path, true, true, true); }

tpprof_profile *tpprof_profile_load_figures(const char *path) { return profile_load(path, false, true, false); }

static tpprof_profile *profile_load(const char *path, bool symbolize, bool brief, bool stacks) {
    tpprof_profile *p = calloc(1, sizeof *p);
    if (!p) {
        tpprof_error_set("out of memory");
        return NULL;
    }
    p->db = tpprof_db_open(path, false);
    if (!p->db)
        goto fail;
    if (stacks) {
        // The nodes first: symbolizing takes their ips from memory.
        tpprof_symtab tab = {0};
        p->stacks = tpprof_stacks_load(p->db, &tab);
        if (!p->stacks)
            goto fail;
        if (load_symbols(p, path, &tab, symbolize) != 0) {
            tpprof_symtab_free(&tab);
            goto fail;
        }
        tpprof_stacks_take_symbols(p->stacks, &tab);
    }
    if (load_kinds(p) != 0)
        goto fail;
    find_reserved_kind(p);
    tpprof_summary *s = &p->summary;
    int64_t v = 0;
    // Without its rows, a recording's leaks come from its sites unless it
    // is complete (leaks_from_sites).
    bool complete = tpprof_db_meta_i64(p->db, "complete", &v) && v == 1;
    if (load_leaks(p) != 0 || (brief && complete ? load_site_totals(p) : load_sites(p)) != 0)
        goto fail;
    if (tpprof_db_meta_i64(p->db, "peak_bytes", &v) && v > 0)
        s->peak_bytes = (uint64_t)v;
    if (tpprof_db_meta_i64(p->db, "peak_time_ns", &v))
        s->peak_time_ns = v;
    s->complete = tpprof_db_meta_i64(p->db, "complete", &v) && v == 1;
    // A scan counts only with the live set it classified, which the final
    // write brings with complete = 1: a periodic flush after the scan (a
    // recording cut during the final write) may say leak_scan = 1 without it.
    s->leak_scanned = s->complete && tpprof_db_meta_i64(p->db, "leak_scan", &v) && v == 1;
    if (tpprof_db_meta_i64(p->db, "dropped_events", &v) && v > 0)
        s->dropped_events = v;
    if (tpprof_db_meta_i64(p->db, "stacks_full", &v) && v > 0)
        s->stacks_full = v;
    if (tpprof_db_meta_i64(p->db, "pid", &v))
        s->pid = v;
    if (tpprof_db_meta_i64(p->db, "duration_ns", &v))
        s->duration_ns = v;
    if (tpprof_db_meta_i64(p->db, "threads_unrecorded", &v) && v > 0)
        s->threads_unrecorded = v;
    if (tpprof_db_meta_i64(p->db, "events_unrecorded", &v) && v > 0)
        s->events_unrecorded = v;
    if (tpprof_db_meta_i64(p->db, "end_signal", &v) && v > 0 && v < 128)
        s->end_signal = (int)v;
    if (!s->complete && p->nleaks == 0 && leaks_from_sites(p) != 0)
        goto fail;
    int64_t started = 0;
    if (!s->complete && s->pid > 0 && tpprof_db_meta_i64(p->db, "start_unix_ns", &started))
        s->still_running = process_started_at((pid_t)s->pid, started);
    char *bypassing = tpprof_db_meta(p->db, "bypassing_modules");
    if (bypassing) {
        parse_paths(bypassing, &p->bypassing, &p->nbypassing);
        free(bypassing);
    }
    p->mode = tpprof_db_meta(p->db, "mode");
    p->exe = tpprof_db_meta(p->db, "exe");
    p->tool_version = tpprof_db_meta(p->db, "tool_version");
    p->malloc_owner = tpprof_db_meta(p->db, "malloc_replaced_by");
    p->malloc_skipped = tpprof_db_meta(p->db, "malloc_skipped");
    p->end_reason = tpprof_db_meta(p->db, "end_reason");
    return p;
fail:
    tpprof_profile_free(p);
    return NULL;
}

void tpprof_profile_warn_skipped(const tpprof_profile *p, FILE *out, const char *prefix) {
    if (p->malloc_skipped)
        fprintf(out,
                "%s%s was preloaded after tpprof: the program ran on glibc's malloc instead (its "
                "allocations are all here; its heap's layout and RSS were glibc's)\n",
                prefix, p->malloc_skipped);
}

void tpprof_profile_free(tpprof_profile *p) {
    if (!p)
        return;
    for (size_t i = 0; i < p->nbypassing; i++)
        free(p->bypassing[i]);
    free(p->bypassing);
    tpprof_stacks_free(p->stacks);
    tpprof_db_close(p->db);
    free(p->symbols_unsaved);
    free(p->mode);
    free(p->exe);
    free(p->tool_version);
    free(p->malloc_owner);
    free(p->malloc_skipped);
    free(p->end_reason);
    free(p->leaks);
    free(p->sites);
    for (size_t i = 0; i < p->nkinds; i++)
        free(p->kind_names[i]);
    free(p->kind_names);
    free(p);
}
