/*
 * tensorplay/caching_allocator.h - a device-agnostic caching allocator with
 * the policy of PyTorch's CUDACachingAllocator.
 *
 * It carves blocks out of segments obtained from a raw tp_allocator (the CPU
 * allocator today; a CUDA allocator later) and keeps freed blocks cached for
 * reuse instead of handing them back.  It is itself a tp_allocator, so
 * storages can allocate from it like from any other:
 *
 *     tp_caching_allocator *ca = tp_caching_allocator_new(tp_allocator_cpu(), NULL);
 *     if (!ca) fprintf(stderr, "%s\n", tp_last_error());   // e.g. a bad TP_ALLOC_CONF
 *     tp_storage *s = tp_storage_new(4096, tp_caching_allocator_as_allocator(ca), false);
 *     tp_storage_release(s);               // the block goes back to the cache
 *     tp_caching_allocator_empty_cache(ca); // wholly free segments go back to the raw allocator
 *     tp_caching_allocator_destroy(ca);
 *
 * Policy (sizes in bytes):
 *   - a request is rounded up to a multiple of 512 (minimum 512), or with
 *     roundup_power2_divisions = d > 0 to the next of d equal steps between
 *     two powers of two (1200 with d = 4 -> 1280; steps are never finer than
 *     64 bytes, so every block stays 64-byte aligned);
 *   - rounded requests up to 1 MiB use the small pool, served from 2 MiB
 *     segments; larger ones the large pool: 1-10 MiB from 20 MiB segments,
 *     10 MiB and more from segments of the request rounded up to 2 MiB;
 *   - reuse is best fit (smallest size, then lowest address) among the free
 *     blocks of the same pool and the same stream;
 *   - a block is split when the remainder is >= 512 (small pool), or when the
 *     request is below max_split_size and the remainder is > 1 MiB (large);
 *   - a request below max_split_size never takes a cached block of
 *     max_split_size or more; a request of max_split_size or more (oversize)
 *     takes a cached block only if it is smaller than request + 20 MiB;
 *   - freed blocks merge with free neighbours of the same segment;
 *   - when the raw allocator fails, cached oversize segments and then
 *     (after waiting for pending stream events) all wholly free segments
 *     are released and the request retried once each; then it fails with
 *     TP_STATUS_OUT_OF_MEMORY;
 *   - with event ops (tp_caching_allocator_new_with_events), a block used
 *     on other streams (record_stream) is reused only after events on those
 *     streams, recorded at its free, have completed.
 *
 * Configuration comes from a string in the spirit of PYTORCH_CUDA_ALLOC_CONF,
 * "max_split_size_mb:128,roundup_power2_divisions:4", normally read from the
 * environment variable TP_ALLOC_CONF.  Unknown keys and bad values are errors.
 *
 * Thread-safe: one mutex per allocator guards everything, including observer
 * events (TP_OBS_ALLOCATOR), which are sent while it is held.
 *
 * Observer events (tp_obs_allocator_event, allocator "caching"; segment and
 * segment_size always describe the segment involved, stream is its stream):
 *   SEGMENT_RESERVE / SEGMENT_RELEASE  block = segment base, block_size = its size
 *   BLOCK_SPLIT   block/block_size = the new free remainder cut off the end
 *   BLOCK_ALLOC   block/block_size = the block handed out (rounded size),
 *                 requested = the bytes asked for
 *   BLOCK_FREE    the block given back, with its requested size
 *   BLOCK_MERGE   block/block_size = the merged free block, after each merge
 * One allocation emits at most RESERVE, SPLIT, ALLOC in that order; one free
 * emits FREE then up to two MERGEs.
 */
#ifndef TENSORPLAY_CACHING_ALLOCATOR_H
#define TENSORPLAY_CACHING_ALLOCATOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "tensorplay/allocator.h"

#ifdef __cplusplus
extern "C" {
#endif

// ----------------------------------------------------------------------------
// configuration

#define TP_CACHING_UNLIMITED UINT64_MAX

typedef enum tp_caching_backend {
    TP_CACHING_BACKEND_NATIVE = 0,            /* this allocator (default) */
    TP_CACHING_BACKEND_CUDA_MALLOC_ASYNC = 1, /* CUDA's stream-ordered pool instead */
} tp_caching_backend;

typedef struct tp_caching_allocator_config {
    uint64_t max_split_size;           /* bytes; TP_CACHING_UNLIMITED = no limit (default) */
    uint32_t roundup_power2_divisions; /* 0 = plain 512-byte rounding (default) */
    uint32_t backend; /* tp_caching_backend: which allocator a CUDA device uses; the
                         caching allocator itself ignores it */
} tp_caching_allocator_config;

/* The defaults: unlimited max_split_size, no power-of-two rounding.  Start
 * from these: a zeroed config has max_split_size 0, which is refused. */
void tp_caching_allocator_config_default(tp_caching_allocator_config *out);

/* Parses "key:value,key:value" (spaces around tokens allowed, "" = defaults)
 * into *out.  Keys: max_split_size_mb (> 20), roundup_power2_divisions (0 or a
 * power of two up to 64), backend (native or cudaMallocAsync).  On failure returns TP_STATUS_INVALID_ARGUMENT with
 * a message starting "TP_ALLOC_CONF: " (e.g. "TP_ALLOC_CONF: max_split_size_mb
 * too small, must be > 20") and leaves *out unchanged. */
tp_status tp_caching_allocator_config_parse(const char *text, tp_caching_allocator_config *out);

/* tp_caching_allocator_config_parse() of getenv("TP_ALLOC_CONF"); an unset
 * variable gives the defaults. */
tp_status tp_caching_allocator_config_from_env(tp_caching_allocator_config *out);

// ----------------------------------------------------------------------------
// lifetime

typedef struct tp_caching_allocator tp_caching_allocator;

/* A new caching allocator over `raw` (borrowed; it must outlive the caching
 * allocator).  config NULL = read TP_ALLOC_CONF.  Returns NULL with the error
 * set on a bad configuration or when out of memory. */
tp_caching_allocator *tp_caching_allocator_new(tp_allocator *raw,
                                               const tp_caching_allocator_config *config);

/* How the allocator learns when a stream has passed a point (PyTorch's
 * record_stream events).  All four are required; user is passed back.  The
 * CUDA device fills them with cudaEvent*; tests with a double whose events
 * complete when the test says so.
 *   record:  a new event marking the work queued on `stream` so far, or
 *            NULL if none could be made (the block is then freed at once,
 *            as if the stream were idle: the caller's synchronize must
 *            have made that true, see tp_caching_allocator_record_stream);
 *   query:   1 = the event has completed, 0 = not yet, -1 = error (treated
 *            as completed: a broken event must not pin memory forever);
 *   synchronize: waits for it; destroy: frees it. */
typedef struct tp_caching_event_ops {
    void *(*record)(void *user, uint64_t stream);
    int (*query)(void *user, void *event);
    void (*synchronize)(void *user, void *event);
    void (*destroy)(void *user, void *event);
    void *user;
    /* Optional (NULL = none): told when memory becomes usable or stops
     * being so, with the allocator's mutex held; for annotations such as
     * NVTX's memory API.  action: TP_OBS_ALLOC_SEGMENT_RESERVE / _RELEASE
     * (block = segment), TP_OBS_ALLOC_BLOCK_ALLOC (handed out) and
     * TP_OBS_ALLOC_BLOCK_FREE (back in its pool: after its stream events,
     * unlike the observer's BLOCK_FREE, which comes when it is freed). */
    void (*annotate)(void *user, uint32_t action, uint64_t segment, uint64_t segment_size,
                     uint64_t block, uint64_t block_size);
} tp_caching_event_ops;

/* As tp_caching_allocator_new, with stream events (ops copied; NULL = none,
 * and then record_stream is refused). */
tp_caching_allocator *tp_caching_allocator_new_with_events(tp_allocator *raw,
                                                           const tp_caching_allocator_config *config,
                                                           const tp_caching_event_ops *ops);

/* Marks the block behind dp (a DataPtr this allocator handed out and not
 * yet freed) as used on `stream` as well as on its own.  When it is freed,
 * an event is recorded on each such stream and the block stays out of the
 * pools (counted active, no longer allocated; its snapshot state is
 * awaiting_free) until all those events have completed: checked at the
 * start of every allocation, and waited for by empty_cache and before the
 * out-of-memory flush.  Its own stream, or one already recorded, changes
 * nothing.  TP_STATUS_INVALID_ARGUMENT if dp is not a live block of ca or
 * ca has no event ops. */
tp_status tp_caching_allocator_record_stream(tp_caching_allocator *ca, const tp_data_ptr *dp,
                                             uint64_t stream);

/* Blocks freed but waiting for stream events (PyTorch's "active_awaiting_free"). */
size_t tp_caching_allocator_pending_frees(tp_caching_allocator *ca);

/* Releases every cached segment.  If blocks are still allocated, the
 * allocator lives on until the last one is freed and then releases the rest
 * itself; nothing else may be called on it after this. NULL is ignored. */
void tp_caching_allocator_destroy(tp_caching_allocator *ca);

/* The allocator as a tp_allocator vtable (borrowed; lives as long as ca).
 * Its allocate uses stream 0; its get_stats reports allocated bytes. */
tp_allocator *tp_caching_allocator_as_allocator(tp_caching_allocator *ca);

// ----------------------------------------------------------------------------
// allocation

/* Fills *out with a block of at least nbytes reserved for `stream` (0 is the
 * default stream).  The DataPtr's deleter returns the block to the cache; its
 * ctx is the allocator's block record, not the data pointer.  nbytes == 0
 * gives a NULL ptr and no ctx.  On failure *out is zeroed and the status is
 * TP_STATUS_OUT_OF_MEMORY (message names the request, the reserved and
 * allocated totals and the raw allocator's own message). */
tp_status tp_caching_allocator_allocate(tp_caching_allocator *ca, size_t nbytes, uint64_t stream,
                                        tp_data_ptr *out);

/* Waits for the events of blocks awaiting free (with event ops), then
 * returns every wholly free cached segment to the raw allocator. */
void tp_caching_allocator_empty_cache(tp_caching_allocator *ca);

/* The size a request of nbytes is rounded to under ca's configuration. */
size_t tp_caching_allocator_round_size(const tp_caching_allocator *ca, size_t nbytes);

// ----------------------------------------------------------------------------
// statistics (PyTorch's memory_stats, "all" pools only)

typedef struct tp_caching_stat {
    int64_t current;    /* now */
    int64_t peak;       /* high-water mark of current since creation or reset */
    uint64_t allocated; /* total increments */
    uint64_t freed;     /* total decrements */
} tp_caching_stat;

typedef struct tp_caching_allocator_stats {
    tp_caching_stat allocation;     /* allocated blocks (count) */
    tp_caching_stat segment;        /* segments held from the raw allocator (count) */
    tp_caching_stat active;         /* blocks in use (count): allocated ones plus
                                       freed ones waiting for stream events */
    tp_caching_stat inactive_split; /* free blocks in partly used segments (count) */
    tp_caching_stat allocated_bytes;      /* rounded sizes of allocated blocks */
    tp_caching_stat reserved_bytes;       /* sizes of segments */
    tp_caching_stat active_bytes;         /* rounded sizes of active blocks */
    tp_caching_stat inactive_split_bytes; /* sizes of inactive split blocks */
    tp_caching_stat requested_bytes;      /* sizes asked for, of allocated blocks */
    uint64_t num_alloc_retries; /* raw allocation failures followed by a cache flush */
    uint64_t num_ooms;          /* requests that failed with OUT_OF_MEMORY */
} tp_caching_allocator_stats;

void tp_caching_allocator_get_stats(tp_caching_allocator *ca, tp_caching_allocator_stats *out);

/* Sets every peak to its current value. */
void tp_caching_allocator_reset_peak_stats(tp_caching_allocator *ca);

// ----------------------------------------------------------------------------
// snapshot (PyTorch's memory_snapshot segments, without stack frames)

typedef struct tp_caching_block_info {
    uint64_t address;
    uint64_t size;           /* rounded size */
    uint64_t requested_size; /* 0 for a free block */
    bool allocated;
    bool awaiting_free;      /* freed, waiting for events on streams that used it */
} tp_caching_block_info;

typedef struct tp_caching_segment_info {
    uint64_t address;
    uint64_t total_size;
    uint64_t stream;
    bool is_small_pool;
    uint64_t allocated_size; /* sum of allocated block sizes */
    size_t nblocks;
    tp_caching_block_info *blocks; /* in address order */
} tp_caching_segment_info;

typedef struct tp_caching_snapshot {
    size_t nsegments;
    tp_caching_segment_info *segments; /* in address order */
} tp_caching_snapshot;

/* A consistent copy of the allocator's segments and blocks.  Returns a new
 * snapshot the caller frees with tp_caching_snapshot_free, or NULL (error
 * set) when out of memory. */
tp_caching_snapshot *tp_caching_allocator_snapshot(tp_caching_allocator *ca);
void tp_caching_snapshot_free(tp_caching_snapshot *snapshot); /* NULL is ignored */

#ifdef __cplusplus
}
#endif
#endif
