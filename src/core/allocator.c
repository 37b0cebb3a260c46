/*
 * src/core/allocator.c - DataPtr clearing, the built-in CPU allocator and the
 * per-device allocator registry.
 *
 * The CPU allocator hands out the system allocator's own block as the data
 * pointer (posix_memalign, 64-byte aligned, ctx == ptr, as c10's raw path),
 * with no size header in front: a profiler that hooks malloc can tie a
 * storage's data pointer to the block behind it by address alone.  To keep
 * the statistics exact without a header, the allocator remembers each live
 * block's requested size in a small open-addressing table (pointer -> size)
 * guarded by one mutex, which also guards the counters.  The mutex is held
 * only for a table probe and a few additions, never across the system
 * allocator call.
 *
 * This file does not decide when memory is freed (storage.c does) and knows
 * nothing of tensors.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

// ----------------------------------------------------------------------------
// DataPtr

void tp_data_ptr_clear(tp_data_ptr *dp) {
    if (!dp) return;
    tp_data_ptr old = *dp;
    /* Zero first: a deleter that (wrongly) reaches this DataPtr again finds
     * nothing to free, so the deleter runs exactly once. */
    memset(dp, 0, sizeof *dp);
    if (old.ctx && old.deleter) old.deleter(old.ctx);
}

// ----------------------------------------------------------------------------
// CPU allocator: live-block table (pointer -> requested size)

#define TP__CPU_ALIGNMENT 64
/* No x86-64 or AArch64 process can map more than 2^48 bytes; refusing larger
 * requests up front keeps absurd sizes (e.g. a negative count cast to size_t)
 * away from the system allocator, which under ASan would abort instead of
 * returning NULL. */
#define TP__CPU_MAX_ALLOC ((size_t)1 << 48)

/* The table stores each block's address complemented (tp__cpu_key): a
 * conservative leak scanner (tpprof, LeakSanitizer) reading this table must
 * not take it for a reference that keeps every tensor's data "reachable".
 * A complemented user-space address is a kernel-half value, never a
 * pointer into the heap, and never 0 (the empty-slot marker). */
static inline uintptr_t tp__cpu_key(const void *p) { return ~(uintptr_t)p; }

typedef struct tp__cpu_slot {
    uintptr_t ptr; /* tp__cpu_key of the block; 0 = empty */
    size_t nbytes;
} tp__cpu_slot;

static pthread_mutex_t tp__cpu_lock = PTHREAD_MUTEX_INITIALIZER;
static tp__cpu_slot *tp__cpu_table; /* capacity is a power of two */
static size_t tp__cpu_cap;
static size_t tp__cpu_used;
static tp_allocator_stats tp__cpu_stats;

static size_t tp__cpu_hash(uintptr_t p, size_t cap) {
    /* Blocks are 64-aligned, so the low 6 bits carry nothing. */
    return (size_t)(((uint64_t)(p >> 6) * 0x9e3779b97f4a7c15ull) >> 17) & (cap - 1);
}

/* Inserts without growing; the caller guarantees a free slot. */
static void tp__cpu_table_put(tp__cpu_slot *table, size_t cap, uintptr_t p, size_t nbytes) {
    size_t i = tp__cpu_hash(p, cap);
    while (table[i].ptr) i = (i + 1) & (cap - 1);
    table[i].ptr = p;
    table[i].nbytes = nbytes;
}

/* Keeps the load factor at most 1/2.  Called with the lock held.  Returns
 * false if the table could not grow (the caller then fails the allocation). */
static bool tp__cpu_table_reserve(void) {
    if ((tp__cpu_used + 1) * 2 <= tp__cpu_cap) return true;
    size_t cap = tp__cpu_cap ? tp__cpu_cap * 2 : 256;
    tp__cpu_slot *table = calloc(cap, sizeof *table);
    if (!table) return false;
    for (size_t i = 0; i < tp__cpu_cap; i++)
        if (tp__cpu_table[i].ptr)
            tp__cpu_table_put(table, cap, tp__cpu_table[i].ptr, tp__cpu_table[i].nbytes);
    free(tp__cpu_table);
    tp__cpu_table = table;
    tp__cpu_cap = cap;
    return true;
}

/* Removes p and returns its size through *nbytes; false if p is unknown.
 * Backward-shift deletion keeps every probe chain unbroken without tombstones. */
static bool tp__cpu_table_take(uintptr_t p, size_t *nbytes) {
    if (!tp__cpu_cap) return false;
    size_t mask = tp__cpu_cap - 1;
    size_t i = tp__cpu_hash(p, tp__cpu_cap);
    while (tp__cpu_table[i].ptr != p) {
        if (!tp__cpu_table[i].ptr) return false;
        i = (i + 1) & mask;
    }
    *nbytes = tp__cpu_table[i].nbytes;
    size_t hole = i;
    for (size_t j = (i + 1) & mask; tp__cpu_table[j].ptr; j = (j + 1) & mask) {
        size_t home = tp__cpu_hash(tp__cpu_table[j].ptr, tp__cpu_cap);
        /* Move j into the hole unless its home lies cyclically in (hole, j]. */
        bool stays = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
        if (!stays) {
            tp__cpu_table[hole] = tp__cpu_table[j];
            hole = j;
        }
    }
    tp__cpu_table[hole].ptr = 0;
    tp__cpu_table[hole].nbytes = 0;
    tp__cpu_used--;
    return true;
}

/* fork() while another thread holds the lock would leave the child's copy
 * locked forever; take it across fork so both sides start unlocked. */
static void tp__cpu_atfork_prepare(void) { pthread_mutex_lock(&tp__cpu_lock); }
static void tp__cpu_atfork_release(void) { pthread_mutex_unlock(&tp__cpu_lock); }

__attribute__((constructor)) static void tp__cpu_register_atfork(void) {
    pthread_atfork(tp__cpu_atfork_prepare, tp__cpu_atfork_release, tp__cpu_atfork_release);
}

// ----------------------------------------------------------------------------
// CPU allocator: the vtable

static void tp__cpu_free(void *ctx) {
    if (!ctx) return;
    size_t nbytes = 0;
    pthread_mutex_lock(&tp__cpu_lock);
    if (tp__cpu_table_take(tp__cpu_key(ctx), &nbytes)) {
        tp__cpu_stats.current_bytes -= nbytes;
        tp__cpu_stats.current_count--;
        tp__cpu_stats.free_count++;
    }
    pthread_mutex_unlock(&tp__cpu_lock);
    free(ctx);
}

static tp_status tp__cpu_allocate(tp_allocator *self, size_t nbytes, tp_data_ptr *out) {
    (void)self;
    memset(out, 0, sizeof *out);
    out->device = tp_device_cpu();
    if (nbytes == 0) return TP_STATUS_OK; /* NULL ptr, no ctx: nothing to free */
    void *p = NULL;
    if (nbytes > TP__CPU_MAX_ALLOC || posix_memalign(&p, TP__CPU_ALIGNMENT, nbytes) != 0) {
        memset(out, 0, sizeof *out);
        return tp__error(TP_STATUS_OUT_OF_MEMORY, "CPU allocator: failed to allocate %zu bytes",
                         nbytes);
    }
    pthread_mutex_lock(&tp__cpu_lock);
    bool ok = tp__cpu_table_reserve();
    if (ok) {
        tp__cpu_table_put(tp__cpu_table, tp__cpu_cap, tp__cpu_key(p), nbytes);
        tp__cpu_used++;
        tp__cpu_stats.current_bytes += nbytes;
        if (tp__cpu_stats.current_bytes > tp__cpu_stats.peak_bytes)
            tp__cpu_stats.peak_bytes = tp__cpu_stats.current_bytes;
        tp__cpu_stats.current_count++;
        tp__cpu_stats.alloc_count++;
    }
    pthread_mutex_unlock(&tp__cpu_lock);
    if (!ok) {
        free(p);
        memset(out, 0, sizeof *out);
        return tp__error(TP_STATUS_OUT_OF_MEMORY,
                         "CPU allocator: failed to allocate %zu bytes (bookkeeping table full)",
                         nbytes);
    }
    out->ptr = p;
    out->ctx = p;
    out->deleter = tp__cpu_free;
    return TP_STATUS_OK;
}

static void tp__cpu_get_stats(tp_allocator *self, tp_allocator_stats *out) {
    (void)self;
    pthread_mutex_lock(&tp__cpu_lock);
    *out = tp__cpu_stats;
    pthread_mutex_unlock(&tp__cpu_lock);
}

static tp_allocator tp__cpu_allocator = {
    .name = "cpu",
    .allocate = tp__cpu_allocate,
    .raw_deleter = tp__cpu_free,
    .get_stats = tp__cpu_get_stats,
    .state = NULL,
};

tp_allocator *tp_allocator_cpu(void) { return &tp__cpu_allocator; }

// ----------------------------------------------------------------------------
// registry: one allocator per device type, replaceable at run time

#ifdef TP_HAVE_CUDA
/* src/cuda: dispatches to the caching or cudaMallocAsync backend. */
extern tp_allocator tp__cuda_default_allocator;
#define TP__CUDA_BUILTIN (&tp__cuda_default_allocator)
#else
#define TP__CUDA_BUILTIN NULL
#endif

static tp_allocator *_Atomic tp__registry[TP_DEVICE_TYPE_COUNT] = {
    [TP_DEVICE_TYPE_CPU] = &tp__cpu_allocator,
    [TP_DEVICE_TYPE_CUDA] = TP__CUDA_BUILTIN,
};

static tp_allocator *tp__builtin_allocator(tp_device_type type) {
    return type == TP_DEVICE_TYPE_CPU ? &tp__cpu_allocator
           : type == TP_DEVICE_TYPE_CUDA ? TP__CUDA_BUILTIN : NULL;
}

tp_status tp_allocator_set(tp_device_type type, tp_allocator *allocator) {
    if ((unsigned)type >= TP_DEVICE_TYPE_COUNT)
        return tp__error(TP_STATUS_INVALID_ARGUMENT, "allocator_set: invalid device type %d",
                         (int)type);
    if (allocator && !allocator->allocate)
        return tp__error(TP_STATUS_INVALID_ARGUMENT,
                         "allocator_set: allocator '%s' has no allocate function",
                         allocator->name ? allocator->name : "(unnamed)");
    atomic_store_explicit(&tp__registry[type], allocator ? allocator : tp__builtin_allocator(type),
                          memory_order_release);
    return TP_STATUS_OK;
}

tp_allocator *tp_allocator_get(tp_device_type type) {
    if ((unsigned)type >= TP_DEVICE_TYPE_COUNT) return NULL;
    return atomic_load_explicit(&tp__registry[type], memory_order_acquire);
}

// ----------------------------------------------------------------------------
// checked entry points

tp_status tp_allocator_allocate(tp_allocator *allocator, size_t nbytes, tp_data_ptr *out) {
    if (!out) return tp__error(TP_STATUS_INVALID_ARGUMENT, "allocate: output DataPtr is NULL");
    memset(out, 0, sizeof *out);
    if (!allocator) return tp__error(TP_STATUS_INVALID_ARGUMENT, "allocate: allocator is NULL");
    if (!allocator->allocate)
        return tp__error(TP_STATUS_INVALID_ARGUMENT,
                         "allocate: allocator '%s' has no allocate function",
                         allocator->name ? allocator->name : "(unnamed)");
    /* Allocators outside the runtime cannot reach tp__error(); if this one
     * failed without recording a message, we write one for it. */
    uint64_t errors_before = tp__error_count();
    tp_status st = allocator->allocate(allocator, nbytes, out);
    if (st != TP_STATUS_OK) {
        /* Whatever a custom allocator left behind is not ours to free. */
        memset(out, 0, sizeof *out);
        if (tp__error_count() == errors_before)
            tp__error(st, "%s allocator: failed to allocate %zu bytes",
                      allocator->name ? allocator->name : "(unnamed)", nbytes);
        return st;
    }
    if (nbytes > 0 && !out->ptr) {
        tp_data_ptr_clear(out);
        return tp__error(TP_STATUS_INTERNAL,
                         "%s allocator: returned no memory for %zu bytes without an error",
                         allocator->name ? allocator->name : "(unnamed)", nbytes);
    }
    return TP_STATUS_OK;
}

void tp_allocator_get_stats(tp_allocator *allocator, tp_allocator_stats *out) {
    if (!out) return;
    memset(out, 0, sizeof *out);
    if (allocator && allocator->get_stats) allocator->get_stats(allocator, out);
}
