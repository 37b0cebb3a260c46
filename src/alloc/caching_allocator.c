/*
 * src/alloc/caching_allocator.c - the caching allocator: segments from a raw
 * tp_allocator carved into blocks, freed blocks cached in two best-fit pools.
 *
 * The policy is PyTorch's CUDACachingAllocator (see the public header and
 * /work/shared/notes/c10-semantics.md §3).  Every public entry takes the
 * allocator's one mutex; helpers whose names end in _locked expect it held.
 * Observer events are sent with the mutex held, so an observer sees the
 * events of one allocator in the order they happened.
 *
 * Stream events (record_stream) come through tp_caching_event_ops: a block
 * freed while other streams used it waits on a list of (block, event) pairs
 * until its events complete.  What this file leaves out: garbage collection
 * thresholds, expandable segments and per-pool stat breakdowns.
 * It never touches memory it hands out; the raw allocator owns the bytes.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/internal.h"
#include "tensorplay/caching_allocator.h"

#define KIB ((size_t)1 << 10)
#define MIB ((size_t)1 << 20)
#define MIN_BLOCK_SIZE ((size_t)512)      /* every request rounds to a multiple of this */
#define SMALL_SIZE MIB                    /* largest request served by the small pool */
#define SMALL_BUFFER (2 * MIB)            /* small pool segment size */
#define LARGE_BUFFER (20 * MIB)           /* segment size for 1-10 MiB requests; oversize slack */
#define MIN_LARGE_ALLOC (10 * MIB)        /* from here segments are the request rounded ... */
#define ROUND_LARGE (2 * MIB)             /* ... up to this */
#define MIN_POWER2_STEP ((size_t)64)      /* keeps every block 64-byte aligned */

// ----------------------------------------------------------------------------
// data structures

typedef struct ca_segment ca_segment;

typedef struct ca_block {
    uintptr_t ptr;
    size_t size;      /* rounded, a part of the segment */
    size_t requested; /* 0 while free */
    uint64_t stream;
    bool allocated;   /* out of the pools: handed out, or awaiting its events */
    bool awaiting;    /* freed, waiting for event_count events */
    uint32_t event_count;
    uint32_t nuses, capuses;
    uint64_t *uses;   /* other streams it was used on (record_stream) */
    struct ca_block *prev, *next; /* address-order neighbours in the segment */
    ca_segment *segment;
} ca_block;

struct ca_segment {
    tp_data_ptr raw; /* what the raw allocator gave us */
    uintptr_t base;
    size_t size;
    uint64_t stream;
    bool small;
    ca_block *head; /* lowest-address block */
    ca_segment *prev_seg, *next_seg;
    tp_caching_allocator *owner;
};

/* Free blocks ordered by (stream, size, address): best fit is a lower bound.
 * cap never drops below `blocks` (all blocks, free or not, of the pool's
 * segments), so returning a block to its pool in a deleter cannot fail. */
typedef struct ca_pool {
    ca_block **v;
    size_t n, cap;
    size_t blocks;
} ca_pool;

struct tp_caching_allocator {
    tp_allocator vtable; /* vtable.state == this */
    tp_allocator *raw;
    tp_caching_allocator_config cfg;
    pthread_mutex_t mu;
    ca_pool small, large;
    ca_segment *segments;
    ca_block *spare_blocks; /* recycled block records, linked through next */
    tp_caching_allocator_stats stats;
    size_t live_blocks;
    tp_caching_event_ops events; /* record == NULL: no stream events */
    struct ca_pending { ca_block *block; void *event; } *pending;
    size_t npending, cappending;
    bool destroyed; /* destroy() ran; the last free finishes the job */
};

// ----------------------------------------------------------------------------
// stats and events

static void stat_add(tp_caching_stat *s, int64_t delta) {
    s->current += delta;
    if (delta > 0) s->allocated += (uint64_t)delta;
    else s->freed += (uint64_t)-delta;
    if (s->current > s->peak) s->peak = s->current;
}

static bool block_is_split(const ca_block *b) { return b->prev != NULL || b->next != NULL; }

static void emit_locked(const ca_segment *seg, tp_obs_alloc_action action, uintptr_t block,
                        size_t block_size, size_t requested) {
    TP__OBSERVE({
        tp__ev_.kind = TP_OBS_ALLOCATOR;
        tp_obs_allocator_event *e = &tp__ev_.u.allocator;
        e->allocator = "caching";
        e->action = (uint32_t)action;
        e->device_type = seg->raw.device.type;
        e->device_index = seg->raw.device.index;
        e->segment = (uint64_t)seg->base;
        e->segment_size = seg->size;
        e->block = (uint64_t)block;
        e->block_size = block_size;
        e->requested = requested;
        e->stream = seg->stream;
    });
}

static void annotate_locked(const tp_caching_allocator *ca, const ca_segment *seg,
                            tp_obs_alloc_action action, uintptr_t block, size_t size);

// ----------------------------------------------------------------------------
// pools

static int block_cmp_key(const ca_block *b, uint64_t stream, size_t size, uintptr_t ptr) {
    if (b->stream != stream) return b->stream < stream ? -1 : 1;
    if (b->size != size) return b->size < size ? -1 : 1;
    if (b->ptr != ptr) return b->ptr < ptr ? -1 : 1;
    return 0;
}

/* First index whose block is >= (stream, size, ptr). */
static size_t pool_lower_bound(const ca_pool *p, uint64_t stream, size_t size, uintptr_t ptr) {
    size_t lo = 0, hi = p->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (block_cmp_key(p->v[mid], stream, size, ptr) < 0) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* Makes room for one more block in the pool's segments. */
static bool pool_reserve_block(ca_pool *p) {
    if (p->blocks + 1 > p->cap) {
        size_t cap = p->cap ? 2 * p->cap : 16;
        ca_block **v = realloc(p->v, cap * sizeof *v);
        if (!v) return false;
        p->v = v, p->cap = cap;
    }
    p->blocks++;
    return true;
}

static void pool_insert(ca_pool *p, ca_block *b) {
    if (p->n >= p->cap) abort(); /* broken invariant: pool_reserve_block was skipped */
    size_t i = pool_lower_bound(p, b->stream, b->size, b->ptr);
    memmove(p->v + i + 1, p->v + i, (p->n - i) * sizeof *p->v);
    p->v[i] = b;
    p->n++;
}

static void pool_remove(ca_pool *p, ca_block *b) {
    size_t i = pool_lower_bound(p, b->stream, b->size, b->ptr);
    if (i >= p->n || p->v[i] != b) abort(); /* broken invariant: a free block not in its pool */
    memmove(p->v + i, p->v + i + 1, (p->n - i - 1) * sizeof *p->v);
    p->n--;
}

static ca_pool *pool_of(tp_caching_allocator *ca, const ca_segment *seg) {
    return seg->small ? &ca->small : &ca->large;
}

// ----------------------------------------------------------------------------
// block records: every split needs one and every merge drops one, so a pool
// hit would otherwise pay a malloc/free pair on top of its own work

static ca_block *block_record_new_locked(tp_caching_allocator *ca) {
    ca_block *b = ca->spare_blocks;
    if (!b) return calloc(1, sizeof *b);
    ca->spare_blocks = b->next;
    memset(b, 0, sizeof *b);
    return b;
}

static void block_record_free_locked(tp_caching_allocator *ca, ca_block *b) {
    free(b->uses);
    b->uses = NULL;
    b->next = ca->spare_blocks;
    ca->spare_blocks = b;
}

// ----------------------------------------------------------------------------
// sizes

size_t tp_caching_allocator_round_size(const tp_caching_allocator *ca, size_t n) {
    if (n < MIN_BLOCK_SIZE) return MIN_BLOCK_SIZE;
    uint32_t div = ca ? ca->cfg.roundup_power2_divisions : 0;
    if (div > 0) {
        size_t floor2 = (size_t)1 << (63 - __builtin_clzll((unsigned long long)n));
        if (floor2 == n) return n;
        size_t step = floor2 / div;
        if (step < MIN_POWER2_STEP) step = MIN_POWER2_STEP;
        return (n + step - 1) / step * step;
    }
    return (n + MIN_BLOCK_SIZE - 1) / MIN_BLOCK_SIZE * MIN_BLOCK_SIZE;
}

static size_t segment_size_for(size_t size) {
    if (size <= SMALL_SIZE) return SMALL_BUFFER;
    if (size < MIN_LARGE_ALLOC) return LARGE_BUFFER;
    return (size + ROUND_LARGE - 1) / ROUND_LARGE * ROUND_LARGE;
}

static bool should_split(const tp_caching_allocator *ca, const ca_block *b, size_t size) {
    size_t remaining = b->size - size;
    if (b->segment->small) return remaining >= MIN_BLOCK_SIZE;
    return size < ca->cfg.max_split_size && remaining > SMALL_SIZE;
}

// ----------------------------------------------------------------------------
// segments

static void segment_release_locked(tp_caching_allocator *ca, ca_segment *seg) {
    ca_block *b = seg->head;
    pool_remove(pool_of(ca, seg), b);
    pool_of(ca, seg)->blocks--;
    emit_locked(seg, TP_OBS_ALLOC_SEGMENT_RELEASE, seg->base, seg->size, 0);
    annotate_locked(ca, seg, TP_OBS_ALLOC_SEGMENT_RELEASE, seg->base, seg->size);
    stat_add(&ca->stats.segment, -1);
    stat_add(&ca->stats.reserved_bytes, -(int64_t)seg->size);
    if (seg->prev_seg) seg->prev_seg->next_seg = seg->next_seg;
    else ca->segments = seg->next_seg;
    if (seg->next_seg) seg->next_seg->prev_seg = seg->prev_seg;
    tp_data_ptr_clear(&seg->raw);
    block_record_free_locked(ca, b);
    free(seg);
}

static bool segment_is_free(const ca_segment *seg) {
    return !seg->head->allocated && seg->head->next == NULL;
}

/* Releases wholly free segments; only those of at least min_size when
 * min_size > 0.  Returns how many went back. */
static size_t release_free_segments_locked(tp_caching_allocator *ca, size_t min_size) {
    size_t released = 0;
    ca_segment *seg = ca->segments;
    while (seg) {
        ca_segment *next = seg->next_seg;
        if (segment_is_free(seg) && seg->size >= min_size) {
            segment_release_locked(ca, seg);
            released++;
        }
        seg = next;
    }
    return released;
}

/* A new segment holding one free block that is in no pool yet, or NULL with
 * the error set (the raw allocator's message kept in raw_msg). */
static ca_block *segment_new_locked(tp_caching_allocator *ca, size_t seg_size, uint64_t stream,
                                    bool small, char *raw_msg, size_t raw_msg_len) {
    ca_pool *pool = small ? &ca->small : &ca->large;
    ca_segment *seg = calloc(1, sizeof *seg);
    ca_block *b = block_record_new_locked(ca);
    if (!seg || !b || !pool_reserve_block(pool)) {
        free(seg);
        if (b) block_record_free_locked(ca, b);
        snprintf(raw_msg, raw_msg_len, "no host memory for the segment record");
        return NULL;
    }
    if (tp_allocator_allocate(ca->raw, seg_size, &seg->raw) != TP_STATUS_OK) {
        snprintf(raw_msg, raw_msg_len, "%s", tp_last_error());
        pool->blocks--;
        free(seg);
        block_record_free_locked(ca, b);
        return NULL;
    }
    seg->base = (uintptr_t)seg->raw.ptr;
    seg->size = seg_size;
    seg->stream = stream;
    seg->small = small;
    seg->head = b;
    seg->owner = ca;
    seg->next_seg = ca->segments;
    if (ca->segments) ca->segments->prev_seg = seg;
    ca->segments = seg;
    b->ptr = seg->base;
    b->size = seg_size;
    b->stream = stream;
    b->segment = seg;
    stat_add(&ca->stats.segment, 1);
    stat_add(&ca->stats.reserved_bytes, (int64_t)seg_size);
    emit_locked(seg, TP_OBS_ALLOC_SEGMENT_RESERVE, seg->base, seg_size, 0);
    annotate_locked(ca, seg, TP_OBS_ALLOC_SEGMENT_RESERVE, seg->base, seg_size);
    return b;
}

// ----------------------------------------------------------------------------
// allocation

/* Best fit on the same stream, honouring the max_split rules; the block
 * returned has left its pool. */
static ca_block *take_free_block_locked(tp_caching_allocator *ca, ca_pool *p, uint64_t stream,
                                        size_t size) {
    size_t i = pool_lower_bound(p, stream, size, 0);
    if (i == p->n || p->v[i]->stream != stream) return NULL;
    ca_block *b = p->v[i];
    uint64_t max_split = ca->cfg.max_split_size;
    if (size < max_split && b->size >= max_split) return NULL;
    if (size >= max_split && b->size >= size + LARGE_BUFFER) return NULL;
    pool_remove(p, b);
    if (block_is_split(b)) {
        stat_add(&ca->stats.inactive_split, -1);
        stat_add(&ca->stats.inactive_split_bytes, -(int64_t)b->size);
    }
    return b;
}

static void process_events_locked(tp_caching_allocator *ca);
static void synchronize_events_locked(tp_caching_allocator *ca);

static ca_block *alloc_segment_with_retries_locked(tp_caching_allocator *ca, size_t size,
                                                   size_t nbytes, uint64_t stream, bool small) {
    size_t seg_size = segment_size_for(size);
    char raw_msg[256] = "";
    ca_block *b = segment_new_locked(ca, seg_size, stream, small, raw_msg, sizeof raw_msg);
    if (b) return b;
    ca->stats.num_alloc_retries++;
    /* First the cheap fix: cached oversize segments nobody can split. */
    if (ca->cfg.max_split_size != TP_CACHING_UNLIMITED &&
        release_free_segments_locked(ca, ca->cfg.max_split_size) > 0) {
        b = segment_new_locked(ca, seg_size, stream, small, raw_msg, sizeof raw_msg);
        if (b) return b;
    }
    if (ca->npending > 0) synchronize_events_locked(ca);
    if (release_free_segments_locked(ca, 0) > 0) {
        b = segment_new_locked(ca, seg_size, stream, small, raw_msg, sizeof raw_msg);
        if (b) return b;
    }
    ca->stats.num_ooms++;
    tp__error(TP_STATUS_OUT_OF_MEMORY,
              "caching allocator: out of memory allocating %zu bytes (rounded to %zu, segment of "
              "%zu) on stream %llu: %lld bytes reserved, %lld allocated; the raw allocator '%s' "
              "failed: %s",
              nbytes, size, seg_size, (unsigned long long)stream,
              (long long)ca->stats.reserved_bytes.current,
              (long long)ca->stats.allocated_bytes.current,
              ca->raw->name ? ca->raw->name : "?", raw_msg);
    return NULL;
}

static void annotate_locked(const tp_caching_allocator *ca, const ca_segment *seg,
                            tp_obs_alloc_action action, uintptr_t block, size_t size) {
    if (ca->events.annotate)
        ca->events.annotate(ca->events.user, (uint32_t)action, seg->base, seg->size, block, size);
}

static void block_free(void *ctx);

tp_status tp_caching_allocator_allocate(tp_caching_allocator *ca, size_t nbytes, uint64_t stream,
                                        tp_data_ptr *out) {
    if (!out) return tp__error(TP_STATUS_INVALID_ARGUMENT, "caching allocator: NULL output");
    memset(out, 0, sizeof *out);
    if (!ca) return tp__error(TP_STATUS_INVALID_ARGUMENT, "caching allocator: NULL allocator");
    out->device = tp_device_cpu();
    if (nbytes == 0) return TP_STATUS_OK;
    if (nbytes > SIZE_MAX / 2) {
        pthread_mutex_lock(&ca->mu);
        ca->stats.num_ooms++;
        pthread_mutex_unlock(&ca->mu);
        return tp__error(TP_STATUS_OUT_OF_MEMORY,
                         "caching allocator: out of memory: %zu bytes is more than any segment",
                         nbytes);
    }
    size_t size = tp_caching_allocator_round_size(ca, nbytes);
    bool small = size <= SMALL_SIZE;

    pthread_mutex_lock(&ca->mu);
    if (ca->npending > 0) process_events_locked(ca);
    ca_pool *pool = small ? &ca->small : &ca->large;
    ca_block *b = take_free_block_locked(ca, pool, stream, size);
    if (!b) b = alloc_segment_with_retries_locked(ca, size, nbytes, stream, small);
    if (!b) {
        pthread_mutex_unlock(&ca->mu);
        memset(out, 0, sizeof *out);
        return TP_STATUS_OUT_OF_MEMORY;
    }
    ca_segment *seg = b->segment;
    if (should_split(ca, b, size)) {
        /* Without host memory for the record the block stays whole: less
         * reuse, never a wrong answer. */
        ca_block *rest = block_record_new_locked(ca);
        if (rest && !pool_reserve_block(pool)) block_record_free_locked(ca, rest), rest = NULL;
        if (rest) {
            rest->ptr = b->ptr + size;
            rest->size = b->size - size;
            rest->stream = stream;
            rest->segment = seg;
            rest->prev = b;
            rest->next = b->next;
            if (b->next) b->next->prev = rest;
            b->next = rest;
            b->size = size;
            pool_insert(pool, rest);
            stat_add(&ca->stats.inactive_split, 1);
            stat_add(&ca->stats.inactive_split_bytes, (int64_t)rest->size);
            emit_locked(seg, TP_OBS_ALLOC_BLOCK_SPLIT, rest->ptr, rest->size, 0);
        }
    }
    b->allocated = true;
    b->requested = nbytes;
    ca->live_blocks++;
    stat_add(&ca->stats.allocation, 1);
    stat_add(&ca->stats.active, 1);
    stat_add(&ca->stats.allocated_bytes, (int64_t)b->size);
    stat_add(&ca->stats.active_bytes, (int64_t)b->size);
    stat_add(&ca->stats.requested_bytes, (int64_t)nbytes);
    emit_locked(seg, TP_OBS_ALLOC_BLOCK_ALLOC, b->ptr, b->size, nbytes);
    annotate_locked(ca, seg, TP_OBS_ALLOC_BLOCK_ALLOC, b->ptr, b->size);
    out->ptr = (void *)b->ptr;
    out->ctx = b;
    out->deleter = block_free;
    out->device = seg->raw.device;
    pthread_mutex_unlock(&ca->mu);
    return TP_STATUS_OK;
}

// ----------------------------------------------------------------------------
// free and merge

/* Folds the free neighbour `other` (removed from its pool here) into b. */
static void merge_locked(tp_caching_allocator *ca, ca_block *b, ca_block *other) {
    ca_segment *seg = b->segment;
    pool_remove(pool_of(ca, seg), other);
    /* other had b as a neighbour, so it was counted as inactive split. */
    stat_add(&ca->stats.inactive_split, -1);
    stat_add(&ca->stats.inactive_split_bytes, -(int64_t)other->size);
    if (other == b->prev) {
        b->ptr = other->ptr;
        b->prev = other->prev;
        if (b->prev) b->prev->next = b;
        else seg->head = b;
    } else {
        b->next = other->next;
        if (b->next) b->next->prev = b;
    }
    b->size += other->size;
    pool_of(ca, seg)->blocks--;
    block_record_free_locked(ca, other);
    emit_locked(seg, TP_OBS_ALLOC_BLOCK_MERGE, b->ptr, b->size, 0);
}

static void destroy_now(tp_caching_allocator *ca);

/* The block goes back to its pool: no longer active, merged with free
 * neighbours (PyTorch's free_block). */
static void free_block_locked(tp_caching_allocator *ca, ca_block *b) {
    ca_segment *seg = b->segment;
    annotate_locked(ca, seg, TP_OBS_ALLOC_BLOCK_FREE, b->ptr, b->size);
    stat_add(&ca->stats.active, -1);
    stat_add(&ca->stats.active_bytes, -(int64_t)b->size);
    b->allocated = false;
    b->awaiting = false;
    b->nuses = 0;
    ca->live_blocks--;
    if (b->prev && !b->prev->allocated) merge_locked(ca, b, b->prev);
    if (b->next && !b->next->allocated) merge_locked(ca, b, b->next);
    pool_insert(pool_of(ca, seg), b);
    if (block_is_split(b)) {
        stat_add(&ca->stats.inactive_split, 1);
        stat_add(&ca->stats.inactive_split_bytes, (int64_t)b->size);
    }
}

/* One pending event done: its block is freed with its last event. */
static void pending_done_locked(tp_caching_allocator *ca, size_t i) {
    ca_block *b = ca->pending[i].block;
    ca->events.destroy(ca->events.user, ca->pending[i].event);
    ca->pending[i] = ca->pending[--ca->npending];
    if (--b->event_count == 0) free_block_locked(ca, b);
}

/* Frees the blocks whose events have all completed (PyTorch's
 * process_events); never waits. */
static void process_events_locked(tp_caching_allocator *ca) {
    for (size_t i = 0; i < ca->npending;) {
        if (ca->events.query(ca->events.user, ca->pending[i].event) != 0)
            pending_done_locked(ca, i); /* the last entry moved into i */
        else
            i++;
    }
}

/* Waits for every pending event and frees their blocks (PyTorch's
 * synchronize_and_free_events). */
static void synchronize_events_locked(tp_caching_allocator *ca) {
    while (ca->npending > 0) {
        ca->events.synchronize(ca->events.user, ca->pending[ca->npending - 1].event);
        pending_done_locked(ca, ca->npending - 1);
    }
}

/* Records an event on each stream that used b; false if none was made. */
static bool insert_events_locked(tp_caching_allocator *ca, ca_block *b) {
    for (uint32_t i = 0; i < b->nuses; i++) {
        if (ca->npending == ca->cappending) {
            size_t cap = ca->cappending ? 2 * ca->cappending : 16;
            struct ca_pending *v = realloc(ca->pending, cap * sizeof *v);
            if (!v) continue; /* no room to wait: less safety, never a leak */
            ca->pending = v, ca->cappending = cap;
        }
        void *ev = ca->events.record(ca->events.user, b->uses[i]);
        if (!ev) continue;
        ca->pending[ca->npending++] = (struct ca_pending){b, ev};
        b->event_count++;
    }
    b->nuses = 0;
    return b->event_count > 0;
}

static void block_free(void *ctx) {
    ca_block *b = ctx;
    ca_segment *seg = b->segment;
    tp_caching_allocator *ca = seg->owner;
    pthread_mutex_lock(&ca->mu);
    emit_locked(seg, TP_OBS_ALLOC_BLOCK_FREE, b->ptr, b->size, b->requested);
    stat_add(&ca->stats.allocation, -1);
    stat_add(&ca->stats.allocated_bytes, -(int64_t)b->size);
    stat_add(&ca->stats.requested_bytes, -(int64_t)b->requested);
    b->requested = 0;
    /* Once destroyed nothing would process the events: free at once (the
     * owner's destroy already waited for the device's work). */
    if (b->nuses > 0 && ca->events.record && !ca->destroyed && insert_events_locked(ca, b))
        b->awaiting = true;
    else free_block_locked(ca, b);
    bool finish = false;
    if (ca->destroyed) {
        release_free_segments_locked(ca, 0);
        finish = ca->live_blocks == 0;
    }
    pthread_mutex_unlock(&ca->mu);
    if (finish) destroy_now(ca);
}

// ----------------------------------------------------------------------------
// record_stream

tp_status tp_caching_allocator_record_stream(tp_caching_allocator *ca, const tp_data_ptr *dp,
                                             uint64_t stream) {
    if (!ca || !dp) return tp__error(TP_STATUS_INVALID_ARGUMENT, "record_stream: NULL argument");
    if (!ca->events.record)
        return tp__error(TP_STATUS_INVALID_ARGUMENT,
                         "record_stream: this caching allocator has no stream events");
    if (dp->deleter != block_free || !dp->ctx || ((ca_block *)dp->ctx)->segment->owner != ca)
        return tp__error(TP_STATUS_INVALID_ARGUMENT,
                         "record_stream: the memory is not a block of this caching allocator");
    ca_block *b = dp->ctx;
    pthread_mutex_lock(&ca->mu);
    tp_status st = TP_STATUS_OK;
    bool known = b->stream == stream;
    for (uint32_t i = 0; i < b->nuses && !known; i++) known = b->uses[i] == stream;
    if (!known) {
        if (b->nuses == b->capuses) {
            uint32_t cap = b->capuses ? 2 * b->capuses : 2;
            uint64_t *v = realloc(b->uses, cap * sizeof *v);
            if (!v) st = tp__error(TP_STATUS_OUT_OF_MEMORY, "record_stream: no memory");
            else b->uses = v, b->capuses = cap;
        }
        if (st == TP_STATUS_OK) b->uses[b->nuses++] = stream;
    }
    pthread_mutex_unlock(&ca->mu);
    return st;
}

size_t tp_caching_allocator_pending_frees(tp_caching_allocator *ca) {
    if (!ca) return 0;
    pthread_mutex_lock(&ca->mu);
    size_t n = 0;
    for (ca_segment *s = ca->segments; s; s = s->next_seg)
        for (ca_block *b = s->head; b; b = b->next) n += b->awaiting;
    pthread_mutex_unlock(&ca->mu);
    return n;
}

// ----------------------------------------------------------------------------
// the tp_allocator face

static tp_status vt_allocate(tp_allocator *self, size_t nbytes, tp_data_ptr *out) {
    return tp_caching_allocator_allocate(self->state, nbytes, 0, out);
}

static void vt_get_stats(tp_allocator *self, tp_allocator_stats *out) {
    tp_caching_allocator_stats s;
    tp_caching_allocator_get_stats(self->state, &s);
    out->current_bytes = (uint64_t)s.allocated_bytes.current;
    out->peak_bytes = (uint64_t)s.allocated_bytes.peak;
    out->current_count = (uint64_t)s.allocation.current;
    out->alloc_count = s.allocation.allocated;
    out->free_count = s.allocation.freed;
}

// ----------------------------------------------------------------------------
// lifetime

tp_caching_allocator *tp_caching_allocator_new(tp_allocator *raw,
                                               const tp_caching_allocator_config *config) {
    return tp_caching_allocator_new_with_events(raw, config, NULL);
}

tp_caching_allocator *tp_caching_allocator_new_with_events(tp_allocator *raw,
                                                           const tp_caching_allocator_config *config,
                                                           const tp_caching_event_ops *ops) {
    if (ops && (!ops->record || !ops->query || !ops->synchronize || !ops->destroy)) {
        tp__error(TP_STATUS_INVALID_ARGUMENT, "caching allocator: event ops need all four functions");
        return NULL;
    }
    if (!raw || !raw->allocate) {
        tp__error(TP_STATUS_INVALID_ARGUMENT, "caching allocator: the raw allocator is NULL");
        return NULL;
    }
    tp_caching_allocator_config cfg;
    if (config) {
        cfg = *config;
        if (cfg.max_split_size <= 20 * MIB) {
            tp__error(TP_STATUS_INVALID_ARGUMENT,
                      "caching allocator: max_split_size %llu too small, must be > 20 MiB",
                      (unsigned long long)cfg.max_split_size);
            return NULL;
        }
        uint32_t d = cfg.roundup_power2_divisions;
        if (d > 64 || (d & (d - 1)) != 0) {
            tp__error(TP_STATUS_INVALID_ARGUMENT,
                      "caching allocator: roundup_power2_divisions must be 0 or a power of 2 up "
                      "to 64, got %u", d);
            return NULL;
        }
    } else if (tp_caching_allocator_config_from_env(&cfg) != TP_STATUS_OK) {
        return NULL;
    }
    tp_caching_allocator *ca = calloc(1, sizeof *ca);
    if (!ca) {
        tp__error(TP_STATUS_OUT_OF_MEMORY, "caching allocator: no memory for the allocator");
        return NULL;
    }
    ca->vtable = (tp_allocator){
        .name = "caching",
        .allocate = vt_allocate,
        .get_stats = vt_get_stats,
        .state = ca,
    };
    ca->raw = raw;
    ca->cfg = cfg;
    if (ops) ca->events = *ops;
    pthread_mutex_init(&ca->mu, NULL);
    return ca;
}

static void destroy_now(tp_caching_allocator *ca) {
    while (ca->spare_blocks) {
        ca_block *next = ca->spare_blocks->next;
        free(ca->spare_blocks);
        ca->spare_blocks = next;
    }
    free(ca->small.v);
    free(ca->large.v);
    free(ca->pending);
    pthread_mutex_destroy(&ca->mu);
    free(ca);
}

void tp_caching_allocator_destroy(tp_caching_allocator *ca) {
    if (!ca) return;
    pthread_mutex_lock(&ca->mu);
    ca->destroyed = true;
    if (ca->npending > 0) synchronize_events_locked(ca);
    release_free_segments_locked(ca, 0);
    bool finish = ca->live_blocks == 0;
    pthread_mutex_unlock(&ca->mu);
    if (finish) destroy_now(ca);
}

tp_allocator *tp_caching_allocator_as_allocator(tp_caching_allocator *ca) {
    return ca ? &ca->vtable : NULL;
}

void tp_caching_allocator_empty_cache(tp_caching_allocator *ca) {
    if (!ca) return;
    pthread_mutex_lock(&ca->mu);
    if (ca->npending > 0) synchronize_events_locked(ca);
    release_free_segments_locked(ca, 0);
    pthread_mutex_unlock(&ca->mu);
}

// ----------------------------------------------------------------------------
// stats and snapshot

void tp_caching_allocator_get_stats(tp_caching_allocator *ca, tp_caching_allocator_stats *out) {
    if (!out) return;
    memset(out, 0, sizeof *out);
    if (!ca) return;
    pthread_mutex_lock(&ca->mu);
    *out = ca->stats;
    pthread_mutex_unlock(&ca->mu);
}

void tp_caching_allocator_reset_peak_stats(tp_caching_allocator *ca) {
    if (!ca) return;
    pthread_mutex_lock(&ca->mu);
    tp_caching_stat *all[] = {
        &ca->stats.allocation,      &ca->stats.segment,        &ca->stats.active,
        &ca->stats.inactive_split,  &ca->stats.allocated_bytes, &ca->stats.reserved_bytes,
        &ca->stats.active_bytes,    &ca->stats.inactive_split_bytes, &ca->stats.requested_bytes,
    };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) all[i]->peak = all[i]->current;
    pthread_mutex_unlock(&ca->mu);
}

static int segment_info_cmp(const void *a, const void *b) {
    const tp_caching_segment_info *x = a, *y = b;
    return x->address < y->address ? -1 : x->address > y->address;
}

void tp_caching_snapshot_free(tp_caching_snapshot *snap) {
    if (!snap) return;
    for (size_t i = 0; i < snap->nsegments; i++) free(snap->segments[i].blocks);
    free(snap->segments);
    free(snap);
}

tp_caching_snapshot *tp_caching_allocator_snapshot(tp_caching_allocator *ca) {
    if (!ca) {
        tp__error(TP_STATUS_INVALID_ARGUMENT, "caching allocator: NULL allocator");
        return NULL;
    }
    tp_caching_snapshot *snap = calloc(1, sizeof *snap);
    if (!snap) goto oom;
    pthread_mutex_lock(&ca->mu);
    size_t nseg = 0;
    for (ca_segment *s = ca->segments; s; s = s->next_seg) nseg++;
    snap->segments = calloc(nseg ? nseg : 1, sizeof *snap->segments);
    if (!snap->segments) goto oom_locked;
    for (ca_segment *s = ca->segments; s; s = s->next_seg) {
        tp_caching_segment_info *si = &snap->segments[snap->nsegments++];
        si->address = s->base;
        si->total_size = s->size;
        si->stream = s->stream;
        si->is_small_pool = s->small;
        for (ca_block *b = s->head; b; b = b->next) si->nblocks++;
        si->blocks = calloc(si->nblocks, sizeof *si->blocks);
        if (!si->blocks) goto oom_locked;
        size_t k = 0;
        for (ca_block *b = s->head; b; b = b->next, k++) {
            si->blocks[k] = (tp_caching_block_info){
                .address = b->ptr, .size = b->size,
                .requested_size = b->requested, .allocated = b->allocated && !b->awaiting,
                .awaiting_free = b->awaiting,
            };
            if (b->allocated && !b->awaiting) si->allocated_size += b->size;
        }
    }
    pthread_mutex_unlock(&ca->mu);
    qsort(snap->segments, snap->nsegments, sizeof *snap->segments, segment_info_cmp);
    return snap;
oom_locked:
    pthread_mutex_unlock(&ca->mu);
oom:
    tp_caching_snapshot_free(snap);
    tp__error(TP_STATUS_OUT_OF_MEMORY, "caching allocator: no memory for a snapshot");
    return NULL;
}
