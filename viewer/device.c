// device.c: device (CUDA) memory as the recording has it: device_blocks,
// device_events and device_timeline (docs/schema.md, "Device memory"), read
// into per-device figures, leak groups, the stacks live at each device's
// peak, allocation sites and bad frees.
//
// What counts as memory: device, async (stream-ordered), managed and pitched
// allocations and VMM physical handles. Pinned host memory is counted on its
// own. VMM reservations and mappings are address space over physical
// handles: shown (how many, how big) but never added to bytes, so a mapped
// handle is not counted twice.
//
// A recording without the tables reads as "not recorded", never an error.
// This file only reads and computes; it does not print (cmd_report.c,
// cmd_check.c, perfetto.c and html_data.c do).
#define _POSIX_C_SOURCE 200809L
#include "viewer.h"

#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

// ---------------------------------------------------------------------------
// Kinds

static const struct {
    const char *name;
    int cls;
} kind_classes[] = {
    {"cuda_device", TPPROF_DEV_MEMORY},        {"cuda_async", TPPROF_DEV_MEMORY},
    {"cuda_managed", TPPROF_DEV_MEMORY},       {"cuda_pitch", TPPROF_DEV_MEMORY},
    {"cuda_vmm_physical", TPPROF_DEV_MEMORY},  {"cuda_pinned_host", TPPROF_DEV_PINNED},
    {"cuda_vmm_reserve", TPPROF_DEV_ADDRESS},  {"cuda_vmm_mapping", TPPROF_DEV_ADDRESS},
};

int tpprof_device_kind_class(const tpprof_profile *p, int64_t kind) {
    const char *name = tpprof_profile_kind(p, kind);
    for (size_t i = 0; i < sizeof kind_classes / sizeof *kind_classes; i++)
        if (strcmp(name, kind_classes[i].name) == 0)
            return kind_classes[i].cls;
    // An id the kinds table does not name: counted as memory, as the
    // recorder writes only the kinds above into device_blocks.
    return TPPROF_DEV_MEMORY;
}

const char *tpprof_device_flag_name(int64_t flag) {
    switch (flag) {
    case TPPROF_DEV_FLAG_DOUBLE_FREE: return "double_free";
    case TPPROF_DEV_FLAG_UNKNOWN_POINTER: return "unknown_pointer";
    case TPPROF_DEV_FLAG_HOST_POINTER: return "host_pointer";
    case TPPROF_DEV_FLAG_OUT_OF_MEMORY: return "out_of_memory";
    default: return "ok";
    }
}

// ---------------------------------------------------------------------------
// Loading

static void block_free(tpprof_dev_block *b) {
    free(b->api);
    free(b->ended_by);
}

static char *column_text(sqlite3_stmt *st, int col) {
    const unsigned char *s = sqlite3_column_text(st, col);
    return s ? strdup((const char *)s) : NULL;
}

static int64_t column_time(sqlite3_stmt *st, int col) {
    return sqlite3_column_type(st, col) == SQLITE_NULL ? TPPROF_NO_TIME : sqlite3_column_int64(st, col);
}

static int load_blocks(const tpprof_profile *p, tpprof_devices *d) {
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(p->db->sql,
                           "SELECT address, device, kind, size, api, stack_id, alloc_ns, free_ns, ended_by "
                           "FROM device_blocks WHERE ?1 = 0 OR device = ?2 ORDER BY alloc_ns, rowid",
                           -1, &st, NULL) != SQLITE_OK)
        return tpprof_db_error(p->db, "reading device_blocks");
    sqlite3_bind_int(st, 1, d->filtered);
    sqlite3_bind_int(st, 2, d->filter_device);
    size_t cap = 0;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        tpprof_dev_block *v = tpprof_grow(d->blocks, d->nblocks, &cap, sizeof *v);
        if (!v) {
            sqlite3_finalize(st);
            return -1;
        }
        d->blocks = v;
        tpprof_dev_block *b = &v[d->nblocks++];
        *b = (tpprof_dev_block){
            .address = sqlite3_column_int64(st, 0),
            .device = (int32_t)sqlite3_column_int64(st, 1),
            .kind = sqlite3_column_int64(st, 2),
            .size = sqlite3_column_int64(st, 3) > 0 ? (uint64_t)sqlite3_column_int64(st, 3) : 0,
            .api = column_text(st, 4),
            .stack_id = sqlite3_column_int64(st, 5),
            .alloc_ns = sqlite3_column_int64(st, 6),
            .free_ns = column_time(st, 7),
            .ended_by = column_text(st, 8),
        };
        b->cls = tpprof_device_kind_class(p, b->kind);
    }
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? 0 : tpprof_db_error(p->db, "reading device_blocks");
}

// Is b still holding memory at the end (never freed, or ended by a reset)?
bool tpprof_dev_block_leaked(const tpprof_dev_block *b) { return b->free_ns == TPPROF_NO_TIME || b->ended_by; }

// The stats of `device` in d->devices (added, in ordinal order, when new).
static tpprof_dev_stats *stats_of(tpprof_devices *d, int32_t device) {
    for (size_t i = 0; i < d->ndevices; i++)
        if (d->devices[i].device == device)
            return &d->devices[i];
    tpprof_dev_stats *v = tpprof_grow(d->devices, d->ndevices, &d->cap_devices, sizeof *v);
    if (!v)
        return NULL;
    d->devices = v;
    size_t at = d->ndevices;
    while (at > 0 && v[at - 1].device > device)
        at--;
    memmove(&v[at + 1], &v[at], (d->ndevices - at) * sizeof *v);
    v[at] = (tpprof_dev_stats){.device = device, .pool_reserved_peak = -1};
    d->ndevices++;
    return &v[at];
}

// Failed calls and bad frees, from device_events (absent: none listed).
static int load_events(const tpprof_profile *p, tpprof_devices *d) {
    if (!tpprof_db_has_table(p->db, "device_events"))
        return 0;
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(p->db->sql,
                           "SELECT device, result, flag, api, stack_id, address, kind FROM device_events "
                           "WHERE (result != 0 OR flag != 0) AND (?1 = 0 OR device = ?2) ORDER BY seq",
                           -1, &st, NULL) != SQLITE_OK)
        return tpprof_db_error(p->db, "reading device_events");
    sqlite3_bind_int(st, 1, d->filtered);
    sqlite3_bind_int(st, 2, d->filter_device);
    size_t cap = 0;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        int32_t device = (int32_t)sqlite3_column_int64(st, 0);
        int64_t result = sqlite3_column_int64(st, 1), flag = sqlite3_column_int64(st, 2);
        int cls = tpprof_device_kind_class(p, sqlite3_column_int64(st, 6));
        tpprof_dev_stats *s = cls == TPPROF_DEV_PINNED ? &d->pinned : stats_of(d, device);
        if (!s) {
            sqlite3_finalize(st);
            return -1;
        }
        if (result != 0) {
            s->failed_calls++;
            d->failed_calls++;
            if (flag == TPPROF_DEV_FLAG_OUT_OF_MEMORY)
                s->oom_calls++;
        }
        if (flag < TPPROF_DEV_FLAG_DOUBLE_FREE || flag > TPPROF_DEV_FLAG_HOST_POINTER)
            continue;
        s->bad_frees++;
        d->bad_frees++;
        const char *api = (const char *)sqlite3_column_text(st, 3);
        int64_t stack = sqlite3_column_int64(st, 4);
        tpprof_dev_bad *b = NULL;
        for (size_t i = 0; i < d->nbad && !b; i++)
            if (d->bad[i].flag == flag && d->bad[i].device == device && d->bad[i].stack_id == stack &&
                strcmp(d->bad[i].api ? d->bad[i].api : "", api ? api : "") == 0)
                b = &d->bad[i];
        if (!b) {
            tpprof_dev_bad *v = tpprof_grow(d->bad, d->nbad, &cap, sizeof *v);
            if (!v) {
                sqlite3_finalize(st);
                return -1;
            }
            d->bad = v;
            b = &v[d->nbad++];
            *b = (tpprof_dev_bad){.flag = flag, .device = device, .stack_id = stack, .api = api ? strdup(api) : NULL,
                                  .address = sqlite3_column_int64(st, 5)};
        }
        b->count++;
    }
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? 0 : tpprof_db_error(p->db, "reading device_events");
}

// The largest reserved_bytes each device's pools held (device_timeline).
static int load_pool_peaks(const tpprof_profile *p, tpprof_devices *d) {
    if (!tpprof_db_has_table(p->db, "device_timeline"))
        return 0;
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(p->db->sql,
                           "SELECT device, MAX(reserved_bytes) FROM device_timeline WHERE reserved_bytes IS NOT NULL "
                           "AND (?1 = 0 OR device = ?2) GROUP BY device",
                           -1, &st, NULL) != SQLITE_OK)
        return tpprof_db_error(p->db, "reading device_timeline");
    sqlite3_bind_int(st, 1, d->filtered);
    sqlite3_bind_int(st, 2, d->filter_device);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        tpprof_dev_stats *s = stats_of(d, (int32_t)sqlite3_column_int64(st, 0));
        if (!s) {
            sqlite3_finalize(st);
            return -1;
        }
        s->pool_reserved_peak = sqlite3_column_int64(st, 1);
    }
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? 0 : tpprof_db_error(p->db, "reading device_timeline");
}

// device_sites (recordings since the site totals: docs/schema.md). In
// aggregate mode device_blocks then holds only each site's first blocks,
// the leaks and the resets, so counts, sites and peaks come from here.
static int load_sites(const tpprof_profile *p, tpprof_devices *d) {
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(p->db->sql,
                           "SELECT stack_id, kind, device, api, alloc_count, alloc_bytes, free_count, peak_count, peak_bytes,"
                           " total_peak_count, total_peak_bytes FROM device_sites WHERE ?1 = 0 OR device = ?2"
                           " ORDER BY device, stack_id, kind",
                           -1, &st, NULL) != SQLITE_OK)
        return tpprof_db_error(p->db, "reading device_sites");
    sqlite3_bind_int(st, 1, d->filtered);
    sqlite3_bind_int(st, 2, d->filter_device);
    size_t cap = 0;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        tpprof_dev_site *v = tpprof_grow(d->site_rows, d->nsite_rows, &cap, sizeof *v);
        if (!v) {
            sqlite3_finalize(st);
            return -1;
        }
        d->site_rows = v;
        tpprof_dev_site *r = &v[d->nsite_rows++];
        uint64_t c[7];
        for (int i = 0; i < 7; i++)
            c[i] = sqlite3_column_int64(st, 4 + i) > 0 ? (uint64_t)sqlite3_column_int64(st, 4 + i) : 0;
        *r = (tpprof_dev_site){.stack_id = sqlite3_column_int64(st, 0), .kind = sqlite3_column_int64(st, 1),
                               .device = (int32_t)sqlite3_column_int64(st, 2), .api = column_text(st, 3),
                               .alloc_count = c[0], .alloc_bytes = c[1], .free_count = c[2], .peak_count = c[3],
                               .peak_bytes = c[4], .total_peak_count = c[5], .total_peak_bytes = c[6]};
        r->cls = tpprof_device_kind_class(p, r->kind);
        r->is_mapping = strcmp(tpprof_profile_kind(p, r->kind), "cuda_vmm_mapping") == 0;
    }
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? 0 : tpprof_db_error(p->db, "reading device_sites");
}

// ---------------------------------------------------------------------------
// Figures

// Add b to s's counts (what it allocated, freed, still holds at the end).
static void count_block(tpprof_dev_stats *s, const tpprof_dev_block *b) {
    if (b->cls == TPPROF_DEV_ADDRESS) {
        if (b->is_mapping) {
            s->vmm_mappings++;
            s->vmm_mapped_bytes += b->size;
        } else {
            s->vmm_reservations++;
            s->vmm_reserved_bytes += b->size;
        }
        return;
    }
    s->allocations++;
    s->allocated_bytes += b->size;
    if (!tpprof_dev_block_leaked(b)) {
        s->frees++;
        return;
    }
    s->leaked_bytes += b->size;
    s->leaked_count++;
    if (b->ended_by) {
        s->reset_bytes += b->size;
        s->reset_count++;
    }
}

typedef struct sweep_point {
    int64_t time_ns, delta;
} sweep_point;

static int by_time_frees_first(const void *a, const void *b) {
    const sweep_point *x = a, *y = b;
    if (x->time_ns != y->time_ns)
        return x->time_ns < y->time_ns ? -1 : 1;
    return (x->delta > y->delta) - (x->delta < y->delta); // frees (negative) first
}

// Whether b counts toward the sweep for (cls, device; device
// TPPROF_DEV_ALL: every device).
static bool in_sweep(const tpprof_dev_block *b, int cls, int32_t device) {
    return b->cls == cls && (device == TPPROF_DEV_ALL || b->device == device);
}

// Is b live at time t (allocated at or before it, not ended by then)?
static bool live_at(const tpprof_dev_block *b, int64_t t) {
    return b->alloc_ns <= t && (b->free_ns == TPPROF_NO_TIME || b->free_ns > t);
}

static int by_group_bytes(const void *a, const void *b) {
    const tpprof_dev_group *x = a, *y = b;
    if (x->bytes != y->bytes)
        return x->bytes > y->bytes ? -1 : 1;
    if (x->count != y->count)
        return x->count > y->count ? -1 : 1;
    return (x->stack_id > y->stack_id) - (x->stack_id < y->stack_id);
}

static int cmp_text(const char *a, const char *b) { return strcmp(a ? a : "", b ? b : ""); }

// Blocks in group order: (device, stack, kind, ended_by).
static int by_group_key(const void *a, const void *b) {
    const tpprof_dev_block *x = *(const tpprof_dev_block *const *)a, *y = *(const tpprof_dev_block *const *)b;
    if (x->device != y->device)
        return x->device < y->device ? -1 : 1;
    if (x->stack_id != y->stack_id)
        return x->stack_id < y->stack_id ? -1 : 1;
    if (x->kind != y->kind)
        return x->kind < y->kind ? -1 : 1;
    return cmp_text(x->ended_by, y->ended_by);
}

// The blocks keep(b, t) takes, grouped by (device, stack, kind, and with
// with_ended what ended them), by sorting pointers to them: O(n log n)
// however many stacks. *out: a new array (NULL when empty). 0 or -1 + error.
static int group_blocks(const tpprof_devices *d, bool (*keep)(const tpprof_dev_block *, int64_t), int64_t t,
                        bool with_ended, tpprof_dev_group **out, size_t *nout) {
    *out = NULL;
    *nout = 0;
    const tpprof_dev_block **v = malloc((d->nblocks ? d->nblocks : 1) * sizeof *v);
    if (!v)
        return tpprof_error_set("out of memory");
    size_t n = 0;
    for (size_t i = 0; i < d->nblocks; i++)
        if (keep(&d->blocks[i], t))
            v[n++] = &d->blocks[i];
    if (n > 1)
        qsort(v, n, sizeof *v, by_group_key);
    size_t cap = 0;
    for (size_t i = 0; i < n; i++) {
        const tpprof_dev_block *b = v[i];
        tpprof_dev_group *g = *nout ? &(*out)[*nout - 1] : NULL;
        if (g && g->device == b->device && g->stack_id == b->stack_id && g->kind == b->kind &&
            (!with_ended || cmp_text(g->ended_by, b->ended_by) == 0)) {
            g->bytes += b->size;
            g->count++;
            continue;
        }
        tpprof_dev_group *w = tpprof_grow(*out, *nout, &cap, sizeof *w);
        if (!w) {
            free(v);
            free(*out);
            *out = NULL;
            *nout = 0;
            return -1;
        }
        *out = w;
        w[(*nout)++] = (tpprof_dev_group){.device = b->device, .stack_id = b->stack_id, .kind = b->kind,
                                          .cls = b->cls, .ended_by = with_ended ? b->ended_by : NULL,
                                          .api = b->api, .bytes = b->size, .count = 1};
    }
    free(v);
    return 0;
}

// The sweep group_blocks takes the peak's blocks from (sweep_peak sets it:
// the viewer is single-threaded).
static int sweep_cls;
static int32_t sweep_device;
static bool live_in_sweep(const tpprof_dev_block *b, int64_t t) {
    return in_sweep(b, sweep_cls, sweep_device) && live_at(b, t);
}
static bool leaked(const tpprof_dev_block *b, int64_t t) {
    (void)t;
    return tpprof_dev_block_leaked(b);
}
static bool any(const tpprof_dev_block *b, int64_t t) {
    (void)b;
    (void)t;
    return true;
}

// The peak of the live bytes of (cls, device) over the run, when it was
// (first reached), and the groups live then. 0 or -1 + error.
static int sweep_peak(const tpprof_devices *d, int cls, int32_t device, tpprof_dev_stats *s) {
    size_t n = 0;
    sweep_point *pts = malloc((2 * d->nblocks + 1) * sizeof *pts);
    if (!pts)
        return tpprof_error_set("out of memory");
    for (size_t i = 0; i < d->nblocks; i++) {
        const tpprof_dev_block *b = &d->blocks[i];
        if (!in_sweep(b, cls, device))
            continue;
        pts[n++] = (sweep_point){b->alloc_ns, (int64_t)b->size};
        if (b->free_ns != TPPROF_NO_TIME)
            pts[n++] = (sweep_point){b->free_ns, -(int64_t)b->size};
    }
    if (n > 1)
        qsort(pts, n, sizeof *pts, by_time_frees_first);
    int64_t live = 0, peak = 0, when = 0;
    for (size_t i = 0; i < n; i++) {
        live += pts[i].delta;
        // At a time with several allocations the peak is after the last.
        bool last_of_time = i + 1 == n || pts[i + 1].time_ns != pts[i].time_ns;
        if (last_of_time && live > peak) {
            peak = live;
            when = pts[i].time_ns;
        }
    }
    free(pts);
    s->peak_bytes = (uint64_t)peak;
    s->peak_time_ns = when;
    if (peak == 0)
        return 0;
    sweep_cls = cls;
    sweep_device = device;
    if (group_blocks(d, live_in_sweep, when, false, &s->peak_sites, &s->npeak_sites) != 0)
        return -1;
    if (s->npeak_sites > 1)
        qsort(s->peak_sites, s->npeak_sites, sizeof *s->peak_sites, by_group_bytes);
    return 0;
}

// Leaks: memory and pinned host first by bytes, then the address space
// (reservations, mappings) never released.
static int by_leak_order(const void *a, const void *b) {
    const tpprof_dev_group *x = a, *y = b;
    bool xa = x->cls == TPPROF_DEV_ADDRESS, ya = y->cls == TPPROF_DEV_ADDRESS;
    if (xa != ya)
        return xa ? 1 : -1;
    return by_group_bytes(a, b);
}

static int compute(tpprof_devices *d) {
    d->total = (tpprof_dev_stats){.device = TPPROF_DEV_ALL, .pool_reserved_peak = -1};
    for (size_t i = 0; i < d->nblocks; i++) {
        const tpprof_dev_block *b = &d->blocks[i];
        if (b->cls == TPPROF_DEV_PINNED) {
            count_block(&d->pinned, b);
        } else {
            tpprof_dev_stats *s = stats_of(d, b->device);
            if (!s)
                return -1;
            count_block(s, b);
            count_block(&d->total, b);
        }
    }
    if (group_blocks(d, leaked, 0, true, &d->leaks, &d->nleaks) != 0 ||
        group_blocks(d, any, 0, false, &d->sites, &d->nsites) != 0)
        return -1;
    // (qsort is not to be given the NULL of an empty list.)
    if (d->nleaks > 1)
        qsort(d->leaks, d->nleaks, sizeof *d->leaks, by_leak_order);
    if (d->nsites > 1)
        qsort(d->sites, d->nsites, sizeof *d->sites, by_leak_order);
    for (size_t i = 0; i < d->ndevices; i++) {
        tpprof_dev_stats *s = &d->devices[i];
        d->total.failed_calls += s->failed_calls;
        d->total.oom_calls += s->oom_calls;
        d->total.bad_frees += s->bad_frees;
        if (s->pool_reserved_peak > d->total.pool_reserved_peak)
            d->total.pool_reserved_peak = s->pool_reserved_peak;
        if (sweep_peak(d, TPPROF_DEV_MEMORY, s->device, s) != 0)
            return -1;
    }
    if (sweep_peak(d, TPPROF_DEV_MEMORY, TPPROF_DEV_ALL, &d->total) != 0 ||
        sweep_peak(d, TPPROF_DEV_PINNED, TPPROF_DEV_ALL, &d->pinned) != 0)
        return -1;
    return 0;
}

// When a peak was first reached (device_peaks; 0 when the row is absent).
static int64_t peak_time(const tpprof_profile *p, const char *scope, int32_t device) {
    sqlite3_stmt *st = NULL;
    int64_t t = 0;
    if (!tpprof_db_has_table(p->db, "device_peaks") ||
        sqlite3_prepare_v2(p->db->sql, "SELECT peak_time_ns FROM device_peaks WHERE scope = ?1 AND device = ?2", -1, &st,
                           NULL) != SQLITE_OK)
        return 0;
    sqlite3_bind_text(st, 1, scope, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 2, device);
    if (sqlite3_step(st) == SQLITE_ROW)
        t = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return t;
}

// s's peak from the sites of (cls, device; TPPROF_DEV_ALL: every device,
// at the all-devices peak): its bytes, and the sites live then.
static int sites_peak(const tpprof_devices *d, int cls, int32_t device, tpprof_dev_stats *s) {
    size_t cap = 0;
    s->peak_bytes = 0;
    for (size_t i = 0; i < d->nsite_rows; i++) {
        const tpprof_dev_site *r = &d->site_rows[i];
        if (r->cls != cls || (device != TPPROF_DEV_ALL && r->device != device))
            continue;
        bool all = device == TPPROF_DEV_ALL && cls == TPPROF_DEV_MEMORY;
        uint64_t count = all ? r->total_peak_count : r->peak_count, bytes = all ? r->total_peak_bytes : r->peak_bytes;
        if (!count)
            continue;
        tpprof_dev_group *v = tpprof_grow(s->peak_sites, s->npeak_sites, &cap, sizeof *v);
        if (!v)
            return -1;
        s->peak_sites = v;
        v[s->npeak_sites++] = (tpprof_dev_group){.device = r->device, .stack_id = r->stack_id, .kind = r->kind,
                                                 .cls = r->cls, .api = r->api, .bytes = bytes, .count = count};
        s->peak_bytes += bytes;
    }
    if (s->peak_bytes == 0) {
        free(s->peak_sites);
        s->peak_sites = NULL;
        s->npeak_sites = 0;
    } else if (s->npeak_sites > 1) {
        qsort(s->peak_sites, s->npeak_sites, sizeof *s->peak_sites, by_group_bytes);
    }
    return 0;
}

// compute() for a recording with device_sites: counts, sites and peaks
// from the sites, leaks from the blocks (every leaked block is a row).
static int compute_sites(const tpprof_profile *p, tpprof_devices *d) {
    d->total = (tpprof_dev_stats){.device = TPPROF_DEV_ALL, .pool_reserved_peak = -1};
    size_t cap = 0;
    for (size_t i = 0; i < d->nsite_rows; i++) {
        const tpprof_dev_site *r = &d->site_rows[i];
        tpprof_dev_stats *s = r->cls == TPPROF_DEV_PINNED ? &d->pinned : stats_of(d, r->device);
        if (!s)
            return -1;
        for (int k = 0; k < 2; k++, s = &d->total) {
            if (r->cls == TPPROF_DEV_ADDRESS) {
                if (r->is_mapping) {
                    s->vmm_mappings += r->alloc_count;
                    s->vmm_mapped_bytes += r->alloc_bytes;
                } else {
                    s->vmm_reservations += r->alloc_count;
                    s->vmm_reserved_bytes += r->alloc_bytes;
                }
            } else {
                s->allocations += r->alloc_count;
                s->allocated_bytes += r->alloc_bytes;
                s->frees += r->free_count;
            }
            if (r->cls == TPPROF_DEV_PINNED)
                break;
        }
        tpprof_dev_group *v = tpprof_grow(d->sites, d->nsites, &cap, sizeof *v);
        if (!v)
            return -1;
        d->sites = v;
        v[d->nsites++] = (tpprof_dev_group){.device = r->device, .stack_id = r->stack_id, .kind = r->kind,
                                            .cls = r->cls, .api = r->api, .bytes = r->alloc_bytes,
                                            .count = r->alloc_count};
    }
    for (size_t i = 0; i < d->nblocks; i++) {
        const tpprof_dev_block *b = &d->blocks[i];
        if (b->cls == TPPROF_DEV_ADDRESS || !tpprof_dev_block_leaked(b))
            continue;
        tpprof_dev_stats *s = b->cls == TPPROF_DEV_PINNED ? &d->pinned : stats_of(d, b->device);
        if (!s)
            return -1;
        for (int k = 0; k < 2; k++, s = &d->total) {
            s->leaked_bytes += b->size;
            s->leaked_count++;
            if (b->ended_by) {
                s->reset_bytes += b->size;
                s->reset_count++;
            }
            if (b->cls == TPPROF_DEV_PINNED)
                break;
        }
    }
    if (group_blocks(d, leaked, 0, true, &d->leaks, &d->nleaks) != 0)
        return -1;
    if (d->nleaks > 1)
        qsort(d->leaks, d->nleaks, sizeof *d->leaks, by_leak_order);
    if (d->nsites > 1)
        qsort(d->sites, d->nsites, sizeof *d->sites, by_leak_order);
    for (size_t i = 0; i < d->ndevices; i++) {
        tpprof_dev_stats *s = &d->devices[i];
        d->total.failed_calls += s->failed_calls;
        d->total.oom_calls += s->oom_calls;
        d->total.bad_frees += s->bad_frees;
        if (s->pool_reserved_peak > d->total.pool_reserved_peak)
            d->total.pool_reserved_peak = s->pool_reserved_peak;
        if (sites_peak(d, TPPROF_DEV_MEMORY, s->device, s) != 0)
            return -1;
        s->peak_time_ns = s->peak_bytes ? peak_time(p, "device", s->device >= 0 && s->device < 64 ? s->device : -1) : 0;
    }
    // Filtered to one device, the total is that device's.
    if (sites_peak(d, TPPROF_DEV_MEMORY, d->filtered ? d->filter_device : TPPROF_DEV_ALL, &d->total) != 0 ||
        sites_peak(d, TPPROF_DEV_PINNED, TPPROF_DEV_ALL, &d->pinned) != 0)
        return -1;
    d->total.peak_time_ns = !d->total.peak_bytes ? 0
                            : d->filtered        ? peak_time(p, "device", d->filter_device)
                                                 : peak_time(p, "total", -1);
    d->pinned.peak_time_ns = d->pinned.peak_bytes ? peak_time(p, "pinned", -1) : 0;
    return 0;
}

int tpprof_devices_load(const tpprof_profile *p, bool filtered, int32_t device, tpprof_devices *out) {
    *out = (tpprof_devices){.filtered = filtered, .filter_device = device};
    out->pinned = (tpprof_dev_stats){.device = -1, .pool_reserved_peak = -1};
    out->total = (tpprof_dev_stats){.device = TPPROF_DEV_ALL, .pool_reserved_peak = -1};
    out->capture = tpprof_db_meta(p->db, "device_capture");
    out->meta_calls_failed = -1;
    out->meta_bad_frees = -1;
    tpprof_db_meta_i64(p->db, "device_calls_failed", &out->meta_calls_failed);
    tpprof_db_meta_i64(p->db, "device_bad_frees", &out->meta_bad_frees);
    out->recorded = tpprof_db_has_table(p->db, "device_blocks");
    // The recorder makes the device tables in every recording; a program
    // that made no CUDA call tpprof saw (device_capture 'none', no rows)
    // has no device memory to show, as a recording without the tables.
    if (out->recorded && out->capture && strcmp(out->capture, "none") == 0) {
        int64_t rows = 0;
        if (tpprof_db_scalar(p->db, "SELECT (SELECT count(*) FROM device_blocks) + (SELECT count(*) FROM device_events)",
                                &rows) == 0 && rows == 0)
            out->recorded = false;
    }
    if (!out->recorded)
        return 0;
    // Mappings are told from reservations by kind name (both are address space).
    int rc = load_blocks(p, out);
    for (size_t i = 0; rc == 0 && i < out->nblocks; i++)
        out->blocks[i].is_mapping = strcmp(tpprof_profile_kind(p, out->blocks[i].kind), "cuda_vmm_mapping") == 0;
    if (rc == 0)
        rc = load_events(p, out);
    if (rc == 0)
        rc = load_pool_peaks(p, out);
    bool sites = rc == 0 && tpprof_db_has_table(p->db, "device_sites");
    if (sites)
        rc = load_sites(p, out);
    if (rc == 0)
        rc = sites ? compute_sites(p, out) : compute(out);
    if (rc != 0)
        tpprof_devices_free(out);
    return rc;
}

void tpprof_devices_free(tpprof_devices *d) {
    for (size_t i = 0; i < d->nblocks; i++)
        block_free(&d->blocks[i]);
    free(d->blocks);
    for (size_t i = 0; i < d->nsite_rows; i++)
        free(d->site_rows[i].api);
    free(d->site_rows);
    for (size_t i = 0; i < d->ndevices; i++)
        free(d->devices[i].peak_sites);
    free(d->devices);
    free(d->total.peak_sites);
    free(d->pinned.peak_sites);
    free(d->leaks);
    free(d->sites);
    for (size_t i = 0; i < d->nbad; i++)
        free(d->bad[i].api);
    free(d->bad);
    free(d->capture);
    *d = (tpprof_devices){0};
}

const tpprof_dev_stats *tpprof_devices_find(const tpprof_devices *d, int32_t device) {
    if (device == TPPROF_DEV_ALL)
        return &d->total;
    for (size_t i = 0; i < d->ndevices; i++)
        if (d->devices[i].device == device)
            return &d->devices[i];
    return NULL;
}

uint64_t tpprof_devices_calls_failed(const tpprof_devices *d) {
    return !d->filtered && d->meta_calls_failed > (int64_t)d->failed_calls ? (uint64_t)d->meta_calls_failed
                                                                            : d->failed_calls;
}

uint64_t tpprof_devices_bad_frees(const tpprof_devices *d) {
    return !d->filtered && d->meta_bad_frees > (int64_t)d->bad_frees ? (uint64_t)d->meta_bad_frees : d->bad_frees;
}

int tpprof_parse_device_size(const char *what, const char *s, int32_t *device, uint64_t *bytes) {
    *device = TPPROF_DEV_ALL;
    const char *colon = strchr(s, ':');
    if (!colon)
        return tpprof_parse_size(what, s, bytes);
    char ordinal[32];
    size_t len = (size_t)(colon - s);
    if (len == 0 || len >= sizeof ordinal)
        return tpprof_error_set("%s: expected N or DEV:N (a device ordinal, a colon, a size), got '%s'", what, s);
    memcpy(ordinal, s, len);
    ordinal[len] = 0;
    uint64_t dev = 0;
    if (tpprof_parse_count(what, ordinal, &dev) != 0 || dev > INT32_MAX)
        return tpprof_error_set("%s: '%s' is not a device ordinal (0, 1, ...) in '%s'", what, ordinal, s);
    *device = (int32_t)dev;
    return tpprof_parse_size(what, colon + 1, bytes);
}
