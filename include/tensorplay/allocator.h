/*
 * tensorplay/allocator.h - DataPtr and the pluggable allocator interface.
 *
 * A tp_data_ptr owns a context, not the data pointer (c10's UniqueVoidPtr):
 * tp_data_ptr_clear() runs deleter(ctx) exactly once whenever ctx is not
 * NULL, even if ptr is NULL.  A NULL deleter means borrowed memory.
 *
 * One allocator is registered per device type; a program may replace it at
 * run time with tp_allocator_set().  The registry does not own allocators:
 * an allocator must outlive every storage it allocated.
 *
 *     tp_data_ptr dp;
 *     if (tp_allocator_allocate(tp_allocator_get(TP_DEVICE_TYPE_CPU), 4096, &dp) != TP_STATUS_OK)
 *         return NULL;                     // tp_last_error() says why
 *     ... use dp.ptr (64-byte aligned) ...
 *     tp_data_ptr_clear(&dp);              // frees it, exactly once
 *
 * A custom allocator is a struct with designated initializers:
 *
 *     static tp_allocator my_alloc = {
 *         .name = "arena", .allocate = arena_allocate, .get_stats = arena_stats,
 *     };
 *     tp_allocator_set(TP_DEVICE_TYPE_CPU, &my_alloc);
 */
#ifndef TENSORPLAY_ALLOCATOR_H
#define TENSORPLAY_ALLOCATOR_H

#include <stddef.h>
#include <stdint.h>
#include "tensorplay/dtype.h"
#include "tensorplay/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef void (*tp_deleter_fn)(void *ctx);

typedef struct tp_data_ptr {
    void *ptr;             /* the data; may be NULL (e.g. 0 bytes) */
    void *ctx;             /* what the deleter frees; NULL = nothing to free */
    tp_deleter_fn deleter; /* NULL = borrowed memory, never freed by us */
    tp_device device;
} tp_data_ptr;

/* Runs deleter(ctx) if ctx and deleter are both non-NULL, then zeroes *dp
 * (so a second clear does nothing). */
void tp_data_ptr_clear(tp_data_ptr *dp);

typedef struct tp_allocator_stats {
    uint64_t current_bytes; /* bytes handed out and not yet freed */
    uint64_t peak_bytes;    /* high-water mark of current_bytes */
    uint64_t current_count; /* live allocations */
    uint64_t alloc_count;   /* allocations ever made */
    uint64_t free_count;    /* allocations ever freed */
} tp_allocator_stats;

typedef struct tp_allocator tp_allocator;
struct tp_allocator {
    const char *name; /* static, e.g. "cpu" */
    /* Fills *out with a fresh block of at least nbytes (nbytes == 0 gives a
     * NULL ptr and no ctx).  On failure returns a status, sets the
     * thread-local error, and leaves *out zeroed. */
    tp_status (*allocate)(tp_allocator *self, size_t nbytes, tp_data_ptr *out);
    /* Optional: frees a block allocated here whose ctx == ptr. */
    tp_deleter_fn raw_deleter;
    /* Optional: current statistics. */
    void (*get_stats)(tp_allocator *self, tp_allocator_stats *out);
    void *state; /* the allocator's own data */
};

/* The built-in CPU allocator: 64-byte aligned blocks, thread-safe stats.
 * Borrowed static object.  The data pointer IS the block posix_memalign
 * returned (no header in front; ctx == ptr, so raw_deleter applies), which
 * lets a malloc-hooking profiler match a storage to its block by address.
 * Exact byte counts come from a side table of live blocks under one mutex.
 * Requests above 2^48 bytes fail with TP_STATUS_OUT_OF_MEMORY without
 * reaching the system allocator. */
tp_allocator *tp_allocator_cpu(void);

/* Replaces the allocator for a device type (NULL restores the built-in one;
 * for CUDA that is the backend TP_ALLOC_CONF chooses, or none in a build
 * without CUDA).  Returns TP_STATUS_INVALID_ARGUMENT for a bad
 * device type.  Storages keep the allocator they were created with. */
tp_status tp_allocator_set(tp_device_type type, tp_allocator *allocator);

/* The allocator registered for a device type (borrowed), or NULL. */
tp_allocator *tp_allocator_get(tp_device_type type);

/* Calls allocator->allocate with argument checks; the one place the runtime
 * allocates tensor memory. */
tp_status tp_allocator_allocate(tp_allocator *allocator, size_t nbytes, tp_data_ptr *out);

/* Fills *out from allocator->get_stats, or zeroes it if there is none. */
void tp_allocator_get_stats(tp_allocator *allocator, tp_allocator_stats *out);

#ifdef __cplusplus
}
#endif
#endif
