/*
 * tensorplay/deferred_allocator.h - a wrapper allocator whose frees are
 * queued and run in batches.
 *
 * It wraps any tp_allocator.  A DataPtr it hands out carries a deleter that
 * only queues the block; the wrapped allocator's deleter runs when the queue
 * is flushed: explicitly with tp_deferred_allocator_flush(), or automatically
 * by the free that takes the queue past max_queued_bytes or max_queued_count.
 * Useful when frees are expensive or must happen at a known point (after a
 * step, outside a latency-critical section).
 *
 *     tp_deferred_allocator *d = tp_deferred_allocator_new(tp_allocator_cpu(), 64 << 20, 0);
 *     tp_storage *s = tp_storage_new(4096, tp_deferred_allocator_as_allocator(d), false);
 *     tp_storage_release(s);            // queued, the CPU allocator has not freed it yet
 *     tp_deferred_allocator_flush(d);   // now it has
 *     tp_deferred_allocator_destroy(d); // flushes whatever is left
 *
 * Thread-safe; the wrapped deleters run outside the wrapper's lock, so they
 * may take their own.
 */
#ifndef TENSORPLAY_DEFERRED_ALLOCATOR_H
#define TENSORPLAY_DEFERRED_ALLOCATOR_H

#include <stddef.h>
#include <stdint.h>
#include "tensorplay/allocator.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tp_deferred_allocator tp_deferred_allocator;

/* Wraps `inner` (borrowed; it must outlive the wrapper).  A free that leaves
 * more than max_queued_bytes bytes or max_queued_count blocks queued flushes
 * the queue; 0 disables that threshold (both 0: only explicit flushes).
 * Returns NULL with the error set if inner is NULL or memory runs out. */
tp_deferred_allocator *tp_deferred_allocator_new(tp_allocator *inner, uint64_t max_queued_bytes,
                                                 uint64_t max_queued_count);

/* Flushes the queue.  Blocks still allocated keep the wrapper alive until
 * they are freed (each such free then runs at once); nothing else may be
 * called on it after this.  NULL is ignored. */
void tp_deferred_allocator_destroy(tp_deferred_allocator *d);

/* The wrapper as a tp_allocator (borrowed; lives as long as d). */
tp_allocator *tp_deferred_allocator_as_allocator(tp_deferred_allocator *d);

/* Runs the wrapped deleter of every queued block, oldest first.  Returns how
 * many blocks it freed. */
size_t tp_deferred_allocator_flush(tp_deferred_allocator *d);

typedef struct tp_deferred_allocator_stats {
    uint64_t live_bytes;        /* allocated and not yet freed by the program */
    uint64_t live_count;
    uint64_t queued_bytes;      /* freed by the program, not yet by the inner allocator */
    uint64_t queued_count;
    uint64_t peak_queued_bytes;
    uint64_t alloc_count;       /* allocations ever made */
    uint64_t freed_count;       /* blocks handed to the inner deleter */
    uint64_t flush_count;       /* flushes that freed at least one block */
    uint64_t auto_flush_count;  /* of those, triggered by a threshold */
} tp_deferred_allocator_stats;

void tp_deferred_allocator_get_stats(tp_deferred_allocator *d, tp_deferred_allocator_stats *out);

#ifdef __cplusplus
}
#endif
#endif
