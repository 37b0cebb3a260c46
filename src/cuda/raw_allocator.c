/*
 * src/cuda/raw_allocator.c - the two allocators that go straight to the CUDA
 * runtime: "cuda" (cudaMalloc/cudaFree on the current device, no caching)
 * and "cuda_host" (page-locked host memory from cudaHostAlloc, for
 * non-blocking copies).
 *
 * Each block's ctx is a small host record {ptr, size, device} so the
 * deleter can keep exact statistics; the data pointer is the runtime's own.
 * A deleter cannot report failure: a failing cudaFree is counted in
 * free_errors and otherwise ignored, as c10 does after a device reset.
 */
#include <stdatomic.h>
#include <stdlib.h>

#include "cuda_internal.h"

typedef struct raw_block {
    void *ptr;
    size_t size;
    int device;
    struct raw_state *owner;
} raw_block;

typedef struct raw_state {
    _Atomic uint64_t current, peak, count, allocs, frees, free_errors;
    bool host;
} raw_state;

static void note_alloc(raw_state *st, size_t n) {
    uint64_t cur = atomic_fetch_add(&st->current, n) + n;
    uint64_t peak = atomic_load(&st->peak);
    while (cur > peak && !atomic_compare_exchange_weak(&st->peak, &peak, cur)) {}
    atomic_fetch_add(&st->count, 1);
    atomic_fetch_add(&st->allocs, 1);
}

static void raw_free(void *ctx) {
    raw_block *b = ctx;
    const tp__cuda_api *c = tp__cuda();
    cudaError_t err = cudaSuccess;
    if (c) {
        if (b->owner->host) {
            err = c->cudaFreeHost(b->ptr);
        } else {
            int prev = tp__cuda_device_enter(b->device);
            err = c->cudaFree(b->ptr);
            tp__cuda_device_restore(prev);
        }
        if (err != cudaSuccess) c->cudaGetLastError();
    }
    if (err != cudaSuccess) atomic_fetch_add(&b->owner->free_errors, 1);
    atomic_fetch_sub(&b->owner->current, b->size);
    atomic_fetch_sub(&b->owner->count, 1);
    atomic_fetch_add(&b->owner->frees, 1);
    free(b);
}

static tp_status raw_allocate(tp_allocator *self, size_t nbytes, tp_data_ptr *out) {
    raw_state *st = self->state;
    const tp__cuda_api *c = tp__cuda();
    if (!c) return TP_STATUS_UNSUPPORTED;
    int device = tp__cuda_current_index();
    out->device = st->host ? tp_device_cpu() : tp_device_cuda(device);
    if (nbytes == 0) return TP_STATUS_OK;
    raw_block *b = calloc(1, sizeof *b);
    if (!b) return tp__error(TP_STATUS_OUT_OF_MEMORY, "%s allocator: no host memory", self->name);
    void *p = NULL;
    cudaError_t err = st->host ? c->cudaHostAlloc(&p, nbytes, cudaHostAllocDefault)
                               : c->cudaMalloc(&p, nbytes);
    if (err != cudaSuccess) {
        free(b);
        return tp__cuda_error(err, "%s of %zu bytes on %s%d", st->host ? "cudaHostAlloc" : "cudaMalloc",
                              nbytes, st->host ? "the host for cuda:" : "cuda:", device);
    }
    *b = (raw_block){.ptr = p, .size = nbytes, .device = device, .owner = st};
    note_alloc(st, nbytes);
    out->ptr = p;
    out->ctx = b;
    out->deleter = raw_free;
    return TP_STATUS_OK;
}

static void raw_stats(tp_allocator *self, tp_allocator_stats *out) {
    raw_state *st = self->state;
    out->current_bytes = atomic_load(&st->current);
    out->peak_bytes = atomic_load(&st->peak);
    out->current_count = atomic_load(&st->count);
    out->alloc_count = atomic_load(&st->allocs);
    out->free_count = atomic_load(&st->frees);
}

static raw_state device_state = {.host = false};
static raw_state host_state = {.host = true};

static tp_allocator raw_allocator = {
    .name = "cuda", .allocate = raw_allocate, .get_stats = raw_stats, .state = &device_state,
};
static tp_allocator host_allocator = {
    .name = "cuda_host", .allocate = raw_allocate, .get_stats = raw_stats, .state = &host_state,
};

tp_allocator *tp_cuda_raw_allocator(void) { return &raw_allocator; }
tp_allocator *tp_cuda_host_allocator(void) { return &host_allocator; }

bool tp__cuda_is_pinned(const tp_storage *s) {
    return s->data.deleter == raw_free && ((raw_block *)s->data.ctx)->owner->host;
}
