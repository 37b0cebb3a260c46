// device.c: applying device memory records (record/device.c's) to the
// writer's device state: which blocks are alive, what each device holds,
// bad frees, device resets. No SQL (store/device.c writes it). Runs in the
// writer with its lock held.
//
// Four kinds of thing live at once and are kept apart, each looked up by
// its own key: allocations (device, async, managed, pitch, pinned host: by
// address), VMM reservations (by address), VMM physical handles (by handle)
// and VMM mappings (by address). A device's allocated bytes count
// allocations on it and physical handles, never mappings or reservations,
// so memory mapped into a reservation is counted once.
#include <string.h>

#include "writer/device.h"
#include "base/mem.h"
#include "record/device.h"
#include "record/format.h"

struct tpprof_dev_state tpprof_dev;

enum { MAP_ALLOC, MAP_RESERVE, MAP_PHYS, MAP_MAPPING, NMAPS };
static struct tpprof_map live[NMAPS]; // key -> block index + 1
// Keys freed and not allocated again -> 1, for telling a double free from a
// free of a pointer never given out: the last FREED_KEEP frees only (a
// ring), so a program that frees millions of addresses keeps this small.
#define FREED_KEEP 65536
static struct tpprof_map freed;
static uint64_t freed_ring[FREED_KEEP];
static uint32_t freed_next;

static void freed_note(uint64_t key) {
    uint64_t old = freed_ring[freed_next];
    if (old && old != key) tpprof_map_take(&freed, old);
    freed_ring[freed_next] = key;
    freed_next = (freed_next + 1) % FREED_KEEP;
    tpprof_map_put(&freed, key, 1);
}
// Pools' reserved bytes, last sampled (few pools: a small array).
#define MAX_POOLS 256
static struct {
    uint64_t pool;
    int32_t device;
    int64_t reserved;
} pools[MAX_POOLS];
static uint32_t npools;

static bool grow(void **arr, uint64_t *cap, uint64_t n, size_t elem) {
    if (n < *cap) return true;
    uint64_t ncap = *cap ? *cap * 2 : 256;
    void *p = tpprof_mem_grow(*arr, *cap * elem, ncap * elem);
    if (!p) return false;
    *arr = p;
    *cap = ncap;
    return true;
}

static int map_of_kind(int kind) {
    switch (kind) {
    case TPPROF_DEV_KIND_VMM_RESERVE: return MAP_RESERVE;
    case TPPROF_DEV_KIND_VMM_PHYSICAL: return MAP_PHYS;
    case TPPROF_DEV_KIND_VMM_MAPPING: return MAP_MAPPING;
    default: return MAP_ALLOC;
    }
}

// Whether a block of this kind counts in its device's allocated bytes.
static bool counts(int kind) {
    return kind == TPPROF_DEV_KIND_DEVICE || kind == TPPROF_DEV_KIND_ASYNC || kind == TPPROF_DEV_KIND_MANAGED ||
           kind == TPPROF_DEV_KIND_PITCH || kind == TPPROF_DEV_KIND_VMM_PHYSICAL;
}

// ---------------------------------------------------------------------------
// Sites (device_sites): per (stack, kind, device) totals, and each site's
// live blocks at its scope's peak and at all devices' peak, as the host
// sites keep theirs. In aggregate mode a site's first DETAIL_ROWS
// allocations get a device_blocks row as made; later ones are "quiet": a
// row only if still alive at the end or ended by a reset (a leak), so a
// program allocating and freeing in a loop writes a row per site, not per
// allocation (docs/device.md, "Cost"). Full mode writes every block.
#define DETAIL_ROWS 1024
static struct tpprof_map site_at; // (stack, kind, device) -> index + 1

static int scope_of(int kind, int32_t dev) {
    if (kind == TPPROF_DEV_KIND_PINNED_HOST) return TPPROF_DEV_SCOPE_PINNED;
    if (!counts(kind)) return -1;
    return dev >= 0 && dev < TPPROF_DEV_MAX ? dev : TPPROF_DEV_SCOPE_OTHER;
}

static struct tpprof_dev_site *site_of(int kind, int32_t dev, uint32_t stack, const char *api, uint32_t *index) {
    struct tpprof_dev_state *d = &tpprof_dev;
    uint64_t key = (uint64_t)stack << 32 | (uint64_t)(kind & 0xff) << 24 | ((uint32_t)dev & 0xffffff);
    uint32_t k = tpprof_map_get(&site_at, key);
    if (k && d->sites[k - 1].device == dev) {
        *index = k - 1;
        return &d->sites[k - 1];
    }
    if (k) return NULL; // an ordinal past 2^24 colliding: not kept
    if (d->nsites >= UINT32_MAX - 1 || !grow((void **)&d->sites, &d->capsites, d->nsites, sizeof *d->sites)) return NULL;
    struct tpprof_dev_site *s = &d->sites[d->nsites];
    int sc = scope_of(kind, dev);
    // Made after its scopes' last peaks: it held nothing then.
    *s = (struct tpprof_dev_site){.api = api, .stack = stack, .device = dev, .kind = (uint8_t)kind, .scope = (int8_t)sc,
                                  .dirty = true, .peak_epoch = sc >= 0 ? d->scope_epoch[sc] : 0,
                                  .total_peak_epoch = d->scope_epoch[TPPROF_DEV_SCOPE_TOTAL]};
    if (!tpprof_map_put(&site_at, key, (uint32_t)(d->nsites + 1))) return NULL;
    *index = (uint32_t)d->nsites++;
    return s;
}

// Before a site's live blocks change: keep what it held at its scopes'
// last peaks, if not kept since.
static void site_keep_peak(struct tpprof_dev_site *s) {
    const uint64_t *ep = tpprof_dev.scope_epoch;
    if (s->peak_epoch != ep[s->scope]) {
        s->peak_epoch = ep[s->scope];
        s->peak_count = s->live_count, s->peak_bytes = s->live_bytes;
    }
    if (s->scope != TPPROF_DEV_SCOPE_PINNED && s->total_peak_epoch != ep[TPPROF_DEV_SCOPE_TOTAL]) {
        s->total_peak_epoch = ep[TPPROF_DEV_SCOPE_TOTAL];
        s->total_peak_count = s->live_count, s->total_peak_bytes = s->live_bytes;
    }
}

static void scope_add(int sc, int64_t bytes, uint64_t time) {
    struct tpprof_dev_state *d = &tpprof_dev;
    d->scope_live[sc] += bytes;
    if (bytes > 0 && d->scope_live[sc] > d->scope_peak[sc]) {
        d->scope_peak[sc] = d->scope_live[sc];
        d->scope_peak_ns[sc] = time;
        d->scope_epoch[sc]++; // every site's live value is now its peak value
    }
}

// A site's live blocks change by `count` blocks of `bytes` at `time`.
static void site_live(struct tpprof_dev_site *s, int64_t count, int64_t bytes, uint64_t time) {
    s->dirty = true;
    if (s->scope < 0) return;
    site_keep_peak(s);
    s->live_count += count;
    s->live_bytes += bytes;
    scope_add(s->scope, bytes, time);
    if (s->scope != TPPROF_DEV_SCOPE_PINNED) scope_add(TPPROF_DEV_SCOPE_TOTAL, bytes, time);
}


static int64_t reserved_of(int32_t dev) {
    int64_t sum = 0;
    bool known = false;
    for (uint32_t i = 0; i < npools; i++)
        if (pools[i].device == dev && pools[i].reserved >= 0) sum += pools[i].reserved, known = true;
    return known ? sum : -1;
}

// The device timeline: a row when a device's allocated bytes reach a new
// high (so its peak is exact), else at most one a millisecond per device;
// a change held back is written at the writer's next timeline tick
// (tpprof_device_timeline_tick). A program that allocates and frees in a
// loop would otherwise write a row per call.
#define SAMPLE_EVERY_NS 1000000
static struct {
    uint64_t last_ns, held_ns;
    int64_t peak;
    bool held;
} tl[TPPROF_DEV_MAX];

static void emit(uint64_t time, int32_t dev) {
    struct tpprof_dev_state *d = &tpprof_dev;
    if (!grow((void **)&d->samples, &d->capsamples, d->nsamples, sizeof *d->samples)) return;
    d->samples[d->nsamples++] = (struct tpprof_dev_sample){time, dev, d->allocated[dev], reserved_of(dev)};
    tl[dev].last_ns = time;
    tl[dev].held = false;
    if (d->allocated[dev] > tl[dev].peak) tl[dev].peak = d->allocated[dev];
}

static void sample(uint64_t time, int32_t dev) {
    if (dev < 0 || dev >= TPPROF_DEV_MAX) return;
    if (tpprof_dev.allocated[dev] > tl[dev].peak || !tl[dev].last_ns || time >= tl[dev].last_ns + SAMPLE_EVERY_NS) {
        emit(time, dev);
    } else {
        tl[dev].held = true;
        tl[dev].held_ns = time;
    }
}

void tpprof_device_timeline_tick(void) {
    if (!tpprof_dev.any) return;
    for (int32_t dev = 0; dev < TPPROF_DEV_MAX; dev++)
        if (tl[dev].held) emit(tl[dev].held_ns, dev), tpprof_dev.changed = true;
}

static void pool_set(uint64_t pool, int32_t dev, int64_t reserved) {
    if (!pool) return;
    uint32_t i = 0;
    while (i < npools && pools[i].pool != pool) i++;
    if (i == npools) {
        if (npools == MAX_POOLS) return;
        npools++;
        pools[i].pool = pool;
        pools[i].device = dev;
    }
    if (dev >= 0) pools[i].device = dev;
    pools[i].reserved = reserved;
}

static void pool_drop(uint64_t pool) {
    for (uint32_t i = 0; i < npools; i++)
        if (pools[i].pool == pool) {
            pools[i] = pools[--npools];
            return;
        }
}

// Ends block i (freed or reset); its device's total goes down.
static void end_block(uint32_t i, uint64_t time, uint32_t stack, const char *api, const char *ended_by) {
    struct tpprof_dev_block *b = &tpprof_dev.blocks[i];
    if (b->backs) { // a tensor storage's data goes with it
        b->backs = false;
        tpprof_obs_block_freed(b->address, time ? time : 1);
        b = &tpprof_dev.blocks[i];
    }
    b->free_ns = time ? time : 1;
    b->free_stack = stack;
    b->free_api = api;
    b->ended_by = ended_by;
    if (b->quiet && !ended_by) {
        b->stored = true, b->dirty = false; // freed: no row (its site counts it)
    } else {
        if (b->quiet || (b->stored && !b->dirty)) tpprof_dev.unwritten++; // else counted when it was made
        b->dirty = true;
    }
    if (b->site < tpprof_dev.nsites) {
        struct tpprof_dev_site *s = &tpprof_dev.sites[b->site];
        if (!ended_by) s->free_count++, s->freed_bytes += b->size;
        site_live(s, -1, -(int64_t)b->size, b->free_ns);
    }
    if (counts(b->kind) && b->device >= 0 && b->device < TPPROF_DEV_MAX) tpprof_dev.allocated[b->device] -= (int64_t)b->size;
}

// Drops the blocks that ended and are written (their rows are final); the
// live ones move down, and their map entries with them.
static void compact(void) {
    struct tpprof_dev_state *d = &tpprof_dev;
    uint64_t k = 0;
    for (uint64_t i = 0; i < d->nblocks; i++) {
        struct tpprof_dev_block *b = &d->blocks[i];
        if (b->free_ns && b->stored && !b->dirty) continue;
        if (k != i) {
            d->blocks[k] = *b;
            if (!d->blocks[k].free_ns) tpprof_map_put(&live[map_of_kind(d->blocks[k].kind)], d->blocks[k].address, (uint32_t)(k + 1));
        }
        k++;
    }
    d->nblocks = k;
}

// Rows waiting that make a flush due (tpprof_device_flush_due): about 0.25
// s of SQLite, ~36 MB of blocks. 65,536 kept the writer at 54 MB instead
// of 100 but took 25% longer than no bound (the flush's fixed costs, and
// the program waiting while the writer flushes) on bench/device_overhead's
// 3,000,000 pairs.
#define FLUSH_DUE_ROWS 262144

bool tpprof_device_flush_due(void) { return tpprof_dev.unwritten + tpprof_dev.nevents >= FLUSH_DUE_ROWS; }

// Adds a block; its index + 1, or 0 when it could not be kept.
static uint64_t add_block(struct tpprof_thread *t, int kind, int32_t dev, uint64_t addr, uint64_t size, uint64_t stream,
                          uint32_t stack, const char *api, uint64_t time) {
    struct tpprof_dev_state *d = &tpprof_dev;
    int m = map_of_kind(kind);
    uint32_t old = tpprof_map_take(&live[m], addr);
    if (old) end_block(old - 1, time, 0, NULL, NULL); // its free was never seen
    if (d->nblocks == d->capblocks) compact();
    if (!grow((void **)&d->blocks, &d->capblocks, d->nblocks, sizeof *d->blocks)) return 0;
    if (d->nblocks >= UINT32_MAX - 1) return 0;
    uint32_t si = UINT32_MAX;
    struct tpprof_dev_site *s = site_of(kind, dev, stack, api, &si);
    // Only plain allocations go quiet: VMM calls are device_calls rows, and
    // their blocks' rows say what was mapped where.
    bool quiet = !tpprof_cfg.full && s && m == MAP_ALLOC && s->rows >= DETAIL_ROWS;
    struct tpprof_dev_block *b = &d->blocks[d->nblocks];
    *b = (struct tpprof_dev_block){.rowid = ++d->next_rowid, .address = addr, .size = size, .alloc_ns = time, .stream = stream, .api = api,
                                   .device = dev, .stack = stack, .thread = (uint32_t)t->index, .kind = (uint8_t)kind,
                                   .dirty = !quiet, .quiet = quiet, .site = si};
    if (!tpprof_map_put(&live[m], addr, (uint32_t)(d->nblocks + 1))) return 0;
    d->nblocks++;
    if (!quiet) d->unwritten++;
    if (s) {
        if (!quiet) s->rows++;
        s->alloc_count++;
        s->alloc_bytes += size;
        site_live(s, 1, (int64_t)size, time);
    }
    if (m == MAP_ALLOC) tpprof_map_take(&freed, addr);
    if (counts(kind) && dev >= 0 && dev < TPPROF_DEV_MAX) d->allocated[dev] += (int64_t)size;
    return d->nblocks;
}

// A free, release, unmap or address free: the block's end, or a bad free's
// flag (1 double, 2 unknown, 3 a host pointer). *ended: the index + 1 of
// the block it ended (0: none).
static int free_block(int kind, uint64_t addr, int32_t result, uint32_t stack, const char *api, uint64_t time,
                      int32_t *dev_out, uint64_t *ended) {
    int m = map_of_kind(kind);
    uint32_t k = tpprof_map_get(&live[m], addr);
    if (k) {
        struct tpprof_dev_block *b = &tpprof_dev.blocks[k - 1];
        *dev_out = b->device;
        bool pinned = b->kind == TPPROF_DEV_KIND_PINNED_HOST, want_pinned = kind == TPPROF_DEV_KIND_PINNED_HOST;
        if (m == MAP_ALLOC && pinned != want_pinned) return pinned ? 3 : 2; // cudaFree of pinned host memory, or the reverse
        if (result == 0) {
            tpprof_map_take(&live[m], addr);
            end_block(k - 1, time, stack, api, NULL);
            *ended = k;
            if (m == MAP_ALLOC) freed_note(addr);
        }
        return 0;
    }
    if (m != MAP_ALLOC) return tpprof_map_get(&freed, addr ^ ((uint64_t)m << 60)) ? 1 : 2;
    if (tpprof_map_get(&freed, addr)) return 1;
    // A host pointer: a live heap block of the program's.
    struct tpprof_wstate *w = &tpprof_w;
    if (w->live.cap && tpprof_live_probe(&w->live, addr)->addr == addr) return 3;
    return 2;
}

// cudaDeviceReset and cuDevicePrimaryCtxReset end every allocation on the
// device; cuCtxDestroy those a context owns (not stream-ordered or VMM
// memory: cuda.h, cuCtxDestroy).
static void reset_device(int32_t dev, const char *api, uint64_t time) {
    struct tpprof_dev_state *d = &tpprof_dev;
    bool ctx = strcmp(api, "cuCtxDestroy_v2") == 0;
    const char *why = ctx ? "context_destroyed" : "device_reset";
    for (uint64_t i = 0; i < d->nblocks; i++) {
        struct tpprof_dev_block *b = &d->blocks[i];
        if (b->free_ns || b->device != dev || map_of_kind(b->kind) != MAP_ALLOC || b->kind == TPPROF_DEV_KIND_PINNED_HOST)
            continue;
        if (ctx && b->kind == TPPROF_DEV_KIND_ASYNC) continue;
        if (tpprof_map_get(&live[MAP_ALLOC], b->address) == i + 1) tpprof_map_take(&live[MAP_ALLOC], b->address);
        end_block((uint32_t)i, time, 0, NULL, why);
    }
    if (!ctx)
        for (uint32_t i = 0; i < npools; i++)
            if (pools[i].device == dev) pools[i].reserved = 0;
}

void tpprof_device_apply(struct tpprof_thread *t, const uint64_t *r, uint64_t seq) {
    struct tpprof_dev_state *d = &tpprof_dev;
    int op = (int)(r[1] & 0xff), kind = (int)(r[1] >> 8 & 0xff);
    int32_t dev = (int32_t)(uint32_t)(r[1] >> 32);
    uint64_t stream = r[2], pool = r[3], addr = r[4], size = r[5], time = r[8], reserved = r[9];
    int32_t result = (int32_t)(uint32_t)r[6];
    uint32_t sid = (uint32_t)(r[6] >> 32);
    const char *api = (const char *)(uintptr_t)r[7];
    uint32_t stack = sid ? tpprof_writer_leaf_of(sid) : 0;
    uint8_t flag = 0;
    d->any = true;
    d->changed = true;
    if (result != 0) d->calls_failed++;
    int32_t sample_dev = dev;
    // A plain successful allocation or free is written as part of its
    // block's row, not as a device_calls row (store/device.c: one row per
    // pair instead of three; the device_events view shows both calls).
    bool in_block = false;
    switch (op) {
    case TPPROF_DEV_OP_ALLOC:
    case TPPROF_DEV_OP_VA_RESERVE:
    case TPPROF_DEV_OP_PHYS_CREATE:
    case TPPROF_DEV_OP_MAP:
        if (result == 0 && addr) {
            uint64_t k = add_block(t, kind, dev, addr, size, stream, stack, api, time);
            if (k && op == TPPROF_DEV_OP_ALLOC) {
                struct tpprof_dev_block *b = &d->blocks[k - 1];
                b->alloc_seq = seq;
                b->pool = pool;
                in_block = true;
            }
        } else if (result == 2) {
            flag = 4; // cudaErrorMemoryAllocation, CUDA_ERROR_OUT_OF_MEMORY
        }
        break;
    case TPPROF_DEV_OP_FREE:
    case TPPROF_DEV_OP_VA_FREE:
    case TPPROF_DEV_OP_PHYS_RELEASE:
    case TPPROF_DEV_OP_UNMAP: {
        int32_t bdev = dev;
        uint64_t k = 0;
        flag = (uint8_t)free_block(kind, addr, result, stack, api, time, &bdev, &k);
        // Only what the block's columns hold: a free naming a stream, a pool
        // or a size (stream-ordered frees, CUPTI's records) keeps its row.
        // A quiet block's plain free is in its site's totals only.
        if (k && op == TPPROF_DEV_OP_FREE && !flag && d->blocks[k - 1].quiet) {
            in_block = true;
        } else if (k && op == TPPROF_DEV_OP_FREE && !flag && !stream && !pool && !size) {
            struct tpprof_dev_block *b = &d->blocks[k - 1];
            b->free_seq = seq;
            b->free_thread = (uint32_t)t->index;
            b->free_kind = (uint8_t)kind;
            b->free_device = dev;
            in_block = true;
        }
        if (flag) d->bad_frees++;
        else if (result == 0 && map_of_kind(kind) != MAP_ALLOC) freed_note(addr ^ ((uint64_t)map_of_kind(kind) << 60));
        sample_dev = bdev;
        break;
    }
    case TPPROF_DEV_OP_POOL_DESTROY:
        if (result == 0) pool_drop(pool);
        break;
    case TPPROF_DEV_OP_DEVICE_RESET:
        if (result == 0 && dev >= 0) reset_device(dev, api, time);
        break;
    default:
        break;
    }
    if (reserved != UINT64_MAX && result == 0) pool_set(pool, dev, (int64_t)reserved);
    if (result == 0 && op != TPPROF_DEV_OP_MAP && op != TPPROF_DEV_OP_UNMAP && op != TPPROF_DEV_OP_VA_RESERVE &&
        op != TPPROF_DEV_OP_VA_FREE)
        sample(time, sample_dev);
    if (in_block) return;
    if (!grow((void **)&d->events, &d->capevents, d->nevents, sizeof *d->events)) return;
    d->events[d->nevents++] = (struct tpprof_dev_event){
        .seq = seq, .time_ns = time, .stream = stream, .pool = pool, .address = addr, .size = size, .api = api,
        .device = dev, .result = result, .thread = (uint32_t)t->index, .stack = stack, .op = (uint8_t)op,
        .kind = (uint8_t)kind, .flag = flag};
}

bool tpprof_device_block_at(uint64_t addr, uint64_t *size, uint16_t *kind_id) {
    uint32_t k = addr ? tpprof_map_get(&live[MAP_ALLOC], addr) : 0;
    if (!k) return false;
    struct tpprof_dev_block *b = &tpprof_dev.blocks[k - 1];
    b->backs = true;
    *size = b->size;
    *kind_id = (uint16_t)(TPPROF_DEV_KIND_BASE + b->kind);
    return true;
}

void tpprof_device_fork_child(void) {
    struct tpprof_dev_state *d = &tpprof_dev;
    d->changed = true;
    // The parent's calls are not the child's (their device_calls rows are
    // dropped below): its blocks carry no allocation or free event.
    for (uint64_t i = 0; i < d->nblocks; i++) {
        struct tpprof_dev_block *b = &d->blocks[i];
        b->stored = false, b->dirty = true, b->alloc_seq = 0, b->free_seq = 0;
    }
    d->unwritten = d->nblocks;
    // Its sites start from the blocks it has (the parent's live ones, each
    // written again as a block of its own).
    for (uint64_t i = 0; i < d->nsites; i++) {
        struct tpprof_dev_site *s = &d->sites[i];
        s->alloc_count = (uint64_t)s->live_count, s->alloc_bytes = (uint64_t)s->live_bytes;
        s->free_count = s->freed_bytes = 0;
        s->rows = (uint32_t)s->live_count;
        s->dirty = true;
    }
    for (int sc = 0; sc < TPPROF_DEV_SCOPES; sc++)
        d->scope_peak[sc] = d->scope_live[sc], d->scope_peak_ns[sc] = 0, d->scope_epoch[sc]++;
    for (uint64_t i = 0; i < d->nblocks; i++) d->blocks[i].quiet = false;
    d->nevents = 0;
    d->nsamples = 0;
}
