// html_data.c: the JSON the HTML report's script draws (#tp-data): the
// timeline (heap, mmap, RSS; at most TIMELINE_POINTS samples, each the
// largest of its span so short peaks survive), each caching allocator's
// reserved/allocated series, what was live at moments of the run, and the
// flame graph (html_flame.c).
//
// "What was live": a --full recording has every event, so one pass over
// `events` in seq order replays the live blocks and takes, at each timeline
// point and at the peak, the sites holding the most bytes. An aggregate
// recording keeps only the peak (sites.peak_*), so it gives that moment.
// The replay is close, not exact, for mappings: a munmap that cuts a
// mapping's head shrinks it, one inside or at its tail is not followed
// (docs/schema.md: such splits are recorded as two blocks in `sites`).
#define _POSIX_C_SOURCE 200809L
#include "viewer.h"

#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#define TIMELINE_POINTS 400
#define DEVICE_POINTS 400
#define LIVE_ROWS 12

// ---------------------------------------------------------------------------
// Timeline and allocators

static void write_u64s(FILE *out, const char *key, const tpprof_sample *v, size_t n, size_t offset) {
    fprintf(out, "\"%s\":[", key);
    for (size_t i = 0; i < n; i++) {
        uint64_t x;
        memcpy(&x, (const char *)&v[i] + offset, sizeof x);
        fprintf(out, i ? ",%llu" : "%llu", (unsigned long long)x);
    }
    fputc(']', out);
}

static int write_timeline(FILE *out, const tpprof_profile *p, tpprof_sample **samples, size_t *n) {
    if (tpprof_timeline_load(p->db, TIMELINE_POINTS, samples, n) != 0)
        return -1;
    if (*n == 0) {
        fputs("\"timeline\":null", out);
        return 0;
    }
    const tpprof_sample *v = *samples;
    fputs("\"timeline\":{\"t\":[", out);
    for (size_t i = 0; i < *n; i++)
        fprintf(out, i ? ",%lld" : "%lld", (long long)v[i].time_ns);
    fputs("],", out);
    write_u64s(out, "heap", v, *n, offsetof(tpprof_sample, heap_bytes));
    fputc(',', out);
    write_u64s(out, "mmap", v, *n, offsetof(tpprof_sample, mmap_bytes));
    fputc(',', out);
    write_u64s(out, "rss", v, *n, offsetof(tpprof_sample, rss_bytes));
    fprintf(out, ",\"peak_t\":%lld,\"peak_bytes\":%llu}", (long long)p->summary.peak_time_ns,
            (unsigned long long)p->summary.peak_bytes);
    return 0;
}

// One CUDA device's line of the timeline: its device_timeline samples (at
// most DEVICE_POINTS, evenly picked); "reserved" only when every sample has it.
static int write_cuda_device(FILE *out, const tpprof_profile *p, int64_t device, bool comma) {
    int64_t count = 0, unknown = 0;
    char sql[160];
    snprintf(sql, sizeof sql, "SELECT COUNT(*) FROM device_timeline WHERE device = %lld", (long long)device);
    if (tpprof_db_scalar(p->db, sql, &count) != 0)
        return -1;
    snprintf(sql, sizeof sql, "SELECT COUNT(*) FROM device_timeline WHERE device = %lld AND reserved_bytes IS NULL",
             (long long)device);
    if (tpprof_db_scalar(p->db, sql, &unknown) != 0)
        return -1;
    size_t step = (size_t)count / DEVICE_POINTS + 1;
    fprintf(out, "%s{\"name\":\"CUDA device %lld\"", comma ? "," : "", (long long)device);
    for (int pass = 0; pass < 3; pass++) {
        if (pass == 2 && unknown)
            break;
        fputs(pass == 0 ? ",\"t\":[" : pass == 1 ? ",\"allocated\":[" : ",\"reserved\":[", out);
        sqlite3_stmt *st = NULL;
        if (sqlite3_prepare_v2(p->db->sql,
                               "SELECT time_ns, allocated_bytes, reserved_bytes FROM device_timeline "
                               "WHERE device = ? ORDER BY time_ns",
                               -1, &st, NULL) != SQLITE_OK)
            return tpprof_db_error(p->db, "reading device_timeline");
        sqlite3_bind_int64(st, 1, device);
        size_t i = 0, w = 0;
        while (sqlite3_step(st) == SQLITE_ROW) {
            if (i++ % step != 0 && (int64_t)i != count)
                continue;
            fprintf(out, w++ ? ",%lld" : "%lld", (long long)sqlite3_column_int64(st, pass));
        }
        sqlite3_finalize(st);
        fputc(']', out);
    }
    fputc('}', out);
    return 0;
}

static int write_devices(FILE *out, const tpprof_profile *p) {
    tpprof_alloc_state *s = NULL;
    size_t n = 0;
    if (tpprof_alloc_load(p->db, &s, &n) != 0)
        return -1;
    fputs("\"devices\":[", out);
    for (size_t a = 0; a < n; a++) {
        char name[512];
        snprintf(name, sizeof name, "%s (%s)", s[a].allocator, s[a].device ? s[a].device : "?");
        fputs(a ? ",{\"name\":" : "{\"name\":", out);
        tpprof_html_json_string(out, name);
        // Reserved and allocated after each event, one point per span kept.
        size_t step = s[a].nevents / DEVICE_POINTS + 1;
        for (int pass = 0; pass < 3; pass++) {
            fputs(pass == 0 ? ",\"t\":[" : pass == 1 ? "],\"reserved\":[" : "],\"allocated\":[", out);
            int64_t reserved = 0, allocated = 0;
            size_t w = 0;
            for (size_t i = 0; i < s[a].nevents; i++) {
                const tpprof_alloc_event *e = &s[a].events[i];
                switch (e->action) {
                case TPPROF_ALLOC_SEGMENT_RESERVE: reserved += e->segment_size; break;
                case TPPROF_ALLOC_SEGMENT_RELEASE: reserved -= e->segment_size; break;
                case TPPROF_ALLOC_BLOCK_ALLOC: allocated += e->block_size; break;
                case TPPROF_ALLOC_BLOCK_FREE: allocated -= e->block_size; break;
                default: break;
                }
                if (i % step != step - 1 && i + 1 != s[a].nevents && i != s[a].peak_index)
                    continue;
                int64_t x = pass == 0 ? e->time_ns : pass == 1 ? reserved : allocated;
                fprintf(out, w++ ? ",%lld" : "%lld", (long long)x);
            }
        }
        fputs("]}", out);
    }
    tpprof_alloc_states_free(s, n);
    // CUDA devices (device_timeline): allocated, and reserved where recorded.
    if (tpprof_db_has_table(p->db, "device_timeline")) {
        sqlite3_stmt *st = NULL;
        if (sqlite3_prepare_v2(p->db->sql, "SELECT DISTINCT device FROM device_timeline ORDER BY device", -1, &st,
                               NULL) != SQLITE_OK)
            return tpprof_db_error(p->db, "reading device_timeline");
        while (sqlite3_step(st) == SQLITE_ROW) {
            if (write_cuda_device(out, p, sqlite3_column_int64(st, 0), n++ > 0) != 0) {
                sqlite3_finalize(st);
                return -1;
            }
        }
        sqlite3_finalize(st);
    }
    fputc(']', out);
    return 0;
}

// ---------------------------------------------------------------------------
// Live at a moment

// A moment's top sites: bytes, blocks, stack.
typedef struct live_row {
    uint64_t bytes, count;
    int64_t stack_id;
} live_row;

typedef struct snapshot {
    int64_t time_ns;
    uint64_t total, blocks;
    live_row rows[LIVE_ROWS];
    size_t nrows;
} snapshot;

static void write_snapshot(FILE *out, const tpprof_profile *p, const snapshot *s, bool first) {
    fprintf(out, "%s{\"t\":%lld,\"total\":%llu,\"blocks\":%llu,\"rows\":[", first ? "" : ",", (long long)s->time_ns,
            (unsigned long long)s->total, (unsigned long long)s->blocks);
    for (size_t i = 0; i < s->nrows; i++) {
        char where[1024];
        fprintf(out, "%s[%llu,%llu,", i ? "," : "", (unsigned long long)s->rows[i].bytes,
                (unsigned long long)s->rows[i].count);
        tpprof_html_json_string(out, tpprof_stacks_describe_caller(p->stacks, s->rows[i].stack_id, where, sizeof where));
        fputc(']', out);
    }
    fputs("]}", out);
}

// Keep the LIVE_ROWS largest in s->rows (insertion into a short sorted list).
static void offer(snapshot *s, live_row r) {
    if (r.bytes == 0)
        return;
    size_t i = s->nrows < LIVE_ROWS ? s->nrows++ : LIVE_ROWS;
    if (i == LIVE_ROWS) {
        if (r.bytes <= s->rows[LIVE_ROWS - 1].bytes)
            return;
        i = LIVE_ROWS - 1;
    }
    while (i > 0 && s->rows[i - 1].bytes < r.bytes) {
        s->rows[i] = s->rows[i - 1];
        i--;
    }
    s->rows[i] = r;
}

// Blocks live during the replay: address -> (size, site slot), linear probing
// with backward-shift deletion; sites: stack id -> slot, their live totals.
// A free slot holds NO_ADDRESS: 24 bytes an entry, not 32 with a flag (the
// table outgrows the caches; a quarter less to fetch per probe).
#define NO_ADDRESS INT64_MIN
typedef struct block { int64_t address; uint64_t size; uint32_t site; } block;
typedef struct replay {
    block *blocks;
    size_t bcap, bn;
    int64_t *site_stack;
    uint64_t *site_bytes, *site_count;
    size_t nsites, scap;
    int64_t *skeys;
    uint32_t *sslots;
    size_t shcap;
    uint64_t total, count;
} replay;

static uint64_t mix(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return x;
}

static int site_of(replay *r, int64_t stack) {
    if (r->nsites * 2 >= r->shcap) {
        size_t cap = r->shcap ? r->shcap * 2 : 1024;
        int64_t *keys = calloc(cap, sizeof *keys);
        uint32_t *slots = calloc(cap, sizeof *slots);
        if (!keys || !slots) {
            free(keys);
            free(slots);
            return -1;
        }
        for (size_t i = 0; i < r->nsites; i++) {
            size_t h = mix((uint64_t)r->site_stack[i]) & (cap - 1);
            while (slots[h])
                h = (h + 1) & (cap - 1);
            keys[h] = r->site_stack[i];
            slots[h] = (uint32_t)i + 1;
        }
        free(r->skeys);
        free(r->sslots);
        r->skeys = keys;
        r->sslots = slots;
        r->shcap = cap;
    }
    size_t h = mix((uint64_t)stack) & (r->shcap - 1);
    while (r->sslots[h]) {
        if (r->skeys[h] == stack)
            return (int)r->sslots[h] - 1;
        h = (h + 1) & (r->shcap - 1);
    }
    if (r->nsites == r->scap) {
        size_t cap = r->scap ? r->scap * 2 : 1024;
        int64_t *st = realloc(r->site_stack, cap * sizeof *st);
        if (!st)
            return -1;
        r->site_stack = st;
        uint64_t *b = realloc(r->site_bytes, cap * sizeof *b);
        if (!b)
            return -1;
        r->site_bytes = b;
        uint64_t *c = realloc(r->site_count, cap * sizeof *c);
        if (!c)
            return -1;
        r->site_count = c;
        r->scap = cap;
    }
    r->site_stack[r->nsites] = stack;
    r->site_bytes[r->nsites] = r->site_count[r->nsites] = 0;
    r->skeys[h] = stack;
    r->sslots[h] = (uint32_t)r->nsites + 1;
    return (int)r->nsites++;
}

static size_t block_find(const replay *r, int64_t address) {
    size_t h = mix((uint64_t)address) & (r->bcap - 1);
    while (r->blocks[h].address != NO_ADDRESS && r->blocks[h].address != address)
        h = (h + 1) & (r->bcap - 1);
    return h;
}

static int block_add(replay *r, int64_t address, uint64_t size, int64_t stack) {
    if ((r->bn + 1) * 2 >= r->bcap) {
        size_t cap = r->bcap ? r->bcap * 2 : 65536;
        block *old = r->blocks;
        size_t ocap = r->bcap;
        r->blocks = malloc(cap * sizeof *r->blocks);
        if (!r->blocks) {
            r->blocks = old;
            return -1;
        }
        for (size_t i = 0; i < cap; i++)
            r->blocks[i].address = NO_ADDRESS;
        r->bcap = cap;
        for (size_t i = 0; i < ocap; i++)
            if (old[i].address != NO_ADDRESS)
                r->blocks[block_find(r, old[i].address)] = old[i];
        free(old);
    }
    int site = site_of(r, stack);
    if (site < 0)
        return -1;
    size_t h = block_find(r, address);
    if (r->blocks[h].address != NO_ADDRESS) { // an address reused without its free seen: replace
        r->site_bytes[r->blocks[h].site] -= r->blocks[h].size;
        r->site_count[r->blocks[h].site]--;
        r->total -= r->blocks[h].size;
        r->count--;
        r->bn--;
    }
    r->blocks[h] = (block){address, size, (uint32_t)site};
    r->bn++;
    r->site_bytes[site] += size;
    r->site_count[site]++;
    r->total += size;
    r->count++;
    return 0;
}

// Remove the block at address (if live): returns it in *out.
static bool block_remove(replay *r, int64_t address, block *out) {
    if (!r->bcap)
        return false;
    size_t h = block_find(r, address);
    if (r->blocks[h].address == NO_ADDRESS)
        return false;
    *out = r->blocks[h];
    r->site_bytes[out->site] -= out->size;
    r->site_count[out->site]--;
    r->total -= out->size;
    r->count--;
    r->bn--;
    // Backward-shift deletion keeps every probe chain unbroken.
    size_t i = h, j = h;
    for (;;) {
        j = (j + 1) & (r->bcap - 1);
        if (r->blocks[j].address == NO_ADDRESS)
            break;
        size_t k = mix((uint64_t)r->blocks[j].address) & (r->bcap - 1);
        if ((j > i && (k <= i || k > j)) || (j < i && (k <= i && k > j))) {
            r->blocks[i] = r->blocks[j];
            i = j;
        }
    }
    r->blocks[i].address = NO_ADDRESS;
    return true;
}

static void take(const replay *r, snapshot *s) {
    s->total = r->total;
    s->blocks = r->count;
    s->nrows = 0;
    for (size_t i = 0; i < r->nsites; i++)
        offer(s, (live_row){r->site_bytes[i], r->site_count[i], r->site_stack[i]});
}

static int kind_id(const tpprof_profile *p, const char *name) {
    for (size_t i = 1; i < p->nkinds; i++)
        if (p->kind_names[i] && strcmp(p->kind_names[i], name) == 0)
            return (int)i;
    return -1;
}

// Replay `events` and take a snapshot at each of times[0..n) (sorted).
static int replay_full(const tpprof_profile *p, const int64_t *times, snapshot *snaps, size_t n) {
    replay r = {0};
    sqlite3_stmt *st = NULL;
    int rc = -1;
    // Read the table through a mapping, not a pread and a copy per page (a
    // tenth of the pass). Only for a whole recording: a file that a running
    // recorder still writes stays on pread (a mapping of a file that
    // changes under it is a risk SQLite takes only when asked).
    if (p->summary.complete)
        sqlite3_exec(p->db->sql, "PRAGMA mmap_size = 1099511627776", NULL, NULL, NULL);
    int file_kind = kind_id(p, "mmap_file"), reserved_kind = kind_id(p, "mmap_reserved");
    // One pass in seq order (the table's own order: no sort), every row:
    // ops past 7 (tensor events in other tables' terms) fall through the
    // switch, cheaper than a WHERE the engine evaluates per row. The pass
    // is the page's whole cost on a big --full recording.
    if (sqlite3_prepare_v2(p->db->sql,
                           "SELECT time_ns, op, address, size, stack_id, old_address, kind FROM events "
                           "ORDER BY seq", -1, &st, NULL) != SQLITE_OK)
        return tpprof_db_error(p->db, "reading events");
    size_t k = 0;
    int step;
    // Columns are read only where the op has them: a free is two thirds of
    // the cost of an allocation to read, and only a mapping's kind can be
    // one that counts for nothing (a file, a reservation).
    while ((step = sqlite3_step(st)) == SQLITE_ROW) {
        int64_t t = sqlite3_column_int64(st, 0), op = sqlite3_column_int64(st, 1);
        int64_t address = sqlite3_column_int64(st, 2), kind = 0, size = 0, stack = 0, old = 0;
        if (op != 2) {
            size = sqlite3_column_int64(st, 3);
            stack = sqlite3_column_int64(st, 4);
            if (op == 3 || op == 6)
                old = sqlite3_column_int64(st, 5);
            if (op >= 4)
                kind = sqlite3_column_int64(st, 6);
        }
        while (k < n && t > times[k])
            take(&r, &snaps[k++]);
        block b;
        bool counted = kind != file_kind && kind != reserved_kind;
        switch (op) {
        case 1: // alloc
        case 4: // mmap
        case 7: // commit
            if (counted && size > 0 && block_add(&r, address, (uint64_t)size, stack) != 0)
                goto oom;
            break;
        case 2: // free
            block_remove(&r, address, &b);
            break;
        case 3: // realloc
        case 6: // mremap
            block_remove(&r, old, &b);
            if (counted && size > 0 && block_add(&r, address, (uint64_t)size, stack) != 0)
                goto oom;
            break;
        case 5: // munmap: the whole mapping, or its head
            if (block_remove(&r, address, &b) && size > 0 && (uint64_t)size < b.size &&
                block_add(&r, address + size, b.size - (uint64_t)size, r.site_stack[b.site]) != 0)
                goto oom;
            break;
        default: break;
        }
    }
    if (step != SQLITE_DONE) {
        tpprof_db_error(p->db, "reading events");
        goto out;
    }
    while (k < n)
        take(&r, &snaps[k++]);
    rc = 0;
    goto out;
oom:
    tpprof_error_set("out of memory replaying events");
out:
    sqlite3_finalize(st);
    free(r.blocks);
    free(r.site_stack);
    free(r.site_bytes);
    free(r.site_count);
    free(r.skeys);
    free(r.sslots);
    return rc;
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static int write_live(FILE *out, const tpprof_profile *p, const tpprof_sample *samples, size_t nsamples) {
    bool full = p->mode && strcmp(p->mode, "full") == 0 && tpprof_db_has_table(p->db, "events");
    if (!full) {
        // Aggregate: only the peak is kept, by site.
        snapshot s = {.time_ns = p->summary.peak_time_ns, .total = p->summary.peak_bytes};
        for (size_t i = 0; i < p->nsites; i++) {
            s.blocks += p->sites[i].peak_count;
            offer(&s, (live_row){p->sites[i].peak_bytes, p->sites[i].peak_count, p->sites[i].stack_id});
        }
        char note[128];
        snprintf(note, sizeof note, "Aggregate recording: what was live at the peak (%.3f s; "
                 "tpprof run --full records every moment)", (double)p->summary.peak_time_ns / 1e9);
        fputs("\"live\":{\"full\":false,\"note\":", out);
        tpprof_html_json_string(out, note);
        fputs(",\"snaps\":[", out);
        write_snapshot(out, p, &s, true);
        fputs("]}", out);
        return 0;
    }
    // Full: a snapshot at every timeline point and at the peak.
    size_t n = nsamples + 1;
    int64_t *times = malloc(n * sizeof *times);
    snapshot *snaps = calloc(n, sizeof *snaps);
    if (!times || !snaps) {
        free(times);
        free(snaps);
        return tpprof_error_set("out of memory");
    }
    for (size_t i = 0; i < nsamples; i++)
        times[i] = samples[i].time_ns;
    times[nsamples] = p->summary.peak_time_ns;
    qsort(times, n, sizeof *times, cmp_i64);
    int rc = replay_full(p, times, snaps, n);
    if (rc == 0) {
        fputs("\"live\":{\"full\":true,\"note\":null,\"snaps\":[", out);
        for (size_t i = 0; i < n; i++) {
            snaps[i].time_ns = times[i];
            write_snapshot(out, p, &snaps[i], i == 0);
        }
        fputs("]}", out);
    }
    free(times);
    free(snaps);
    return rc;
}

int tpprof_html_data(FILE *out, const tpprof_profile *p) {
    tpprof_sample *samples = NULL;
    size_t n = 0;
    fputc('{', out);
    int rc = write_timeline(out, p, &samples, &n);
    if (rc == 0) {
        fputc(',', out);
        rc = write_devices(out, p);
    }
    if (rc == 0) {
        fputc(',', out);
        rc = write_live(out, p, samples, n);
    }
    if (rc == 0) {
        fputs(",\"flame\":", out);
        rc = tpprof_html_flame(out, p);
    }
    fputc('}', out);
    free(samples);
    return rc;
}
