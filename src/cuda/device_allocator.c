/*
 * src/cuda/device_allocator.c - the CUDA slot of the allocator registry and
 * its two backends: "cuda_caching" (one caching allocator per device over
 * the raw "cuda" allocator, with cudaEvent stream events) and "cuda_async"
 * (cudaMallocAsync/cudaFreeAsync on each device's default memory pool).
 *
 * Which backend the registry's dispatcher uses comes from TP_ALLOC_CONF's
 * backend key, read once on first use.  Allocation always targets the
 * current device and the current stream of the calling thread, as c10's
 * allocators do under a device guard.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_internal.h"

// ----------------------------------------------------------------------------
// stream events for the caching allocator (user = the device index)

static void *event_record(void *user, uint64_t stream) {
    const tp__cuda_api *c = tp__cuda();
    int prev = tp__cuda_device_enter((int)(intptr_t)user);
    if (prev < 0) return NULL;
    cudaEvent_t ev = NULL;
    cudaError_t err = c->cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
    if (err == cudaSuccess) {
        err = c->cudaEventRecord(ev, (cudaStream_t)(uintptr_t)stream);
        if (err != cudaSuccess) c->cudaEventDestroy(ev), ev = NULL;
    }
    if (err != cudaSuccess) c->cudaGetLastError();
    tp__cuda_device_restore(prev);
    return ev;
}

static int event_query(void *user, void *event) {
    (void)user;
    const tp__cuda_api *c = tp__cuda();
    cudaError_t err = c->cudaEventQuery(event);
    if (err == cudaSuccess) return 1;
    c->cudaGetLastError();
    return err == cudaErrorNotReady ? 0 : -1;
}

static void event_synchronize(void *user, void *event) {
    (void)user;
    if (tp__cuda()->cudaEventSynchronize(event) != cudaSuccess) tp__cuda()->cudaGetLastError();
}

static void event_destroy(void *user, void *event) {
    (void)user;
    tp__cuda()->cudaEventDestroy(event);
}

// ----------------------------------------------------------------------------
// the caching backend

static pthread_mutex_t caching_mu = PTHREAD_MUTEX_INITIALIZER;
static tp_caching_allocator *_Atomic caching[TP__CUDA_MAX_DEVICES];

tp_caching_allocator *tp_cuda_caching_allocator_of(tp_device device) {
    int index = tp__cuda_check_device(device, "cuda_caching_allocator_of");
    if (index < 0) return NULL;
    if (index >= TP__CUDA_MAX_DEVICES) {
        tp__error(TP_STATUS_UNSUPPORTED, "cuda:%d is past the %d devices supported", index,
                  TP__CUDA_MAX_DEVICES);
        return NULL;
    }
    tp_caching_allocator *ca = atomic_load(&caching[index]);
    if (ca) return ca;
    pthread_mutex_lock(&caching_mu);
    ca = atomic_load(&caching[index]);
    if (!ca) {
        tp_caching_event_ops ops = {
            .record = event_record, .query = event_query, .synchronize = event_synchronize,
            .destroy = event_destroy, .user = (void *)(intptr_t)index,
            .annotate = tp__cuda_nvtx_annotate,
        };
        ca = tp_caching_allocator_new_with_events(tp_cuda_raw_allocator(), NULL, &ops);
        if (ca) atomic_store(&caching[index], ca);
    }
    pthread_mutex_unlock(&caching_mu);
    return ca;
}

static tp_status caching_allocate(tp_allocator *self, size_t nbytes, tp_data_ptr *out) {
    (void)self;
    if (!tp__cuda()) return TP_STATUS_UNSUPPORTED;
    int index = tp__cuda_current_index();
    out->device = tp_device_cuda(index);
    if (nbytes == 0) return TP_STATUS_OK; /* no block, but on this device */
    tp_caching_allocator *ca = tp_cuda_caching_allocator_of(tp_device_cuda(index));
    if (!ca) return tp_last_status();
    return tp_caching_allocator_allocate(ca, nbytes,
                                         (uint64_t)(uintptr_t)tp__cuda_current_stream(index), out);
}

static void caching_stats(tp_allocator *self, tp_allocator_stats *out) {
    (void)self;
    for (int i = 0; i < TP__CUDA_MAX_DEVICES; i++) {
        tp_caching_allocator *ca = atomic_load(&caching[i]);
        if (!ca) continue;
        tp_allocator_stats s;
        tp_allocator_get_stats(tp_caching_allocator_as_allocator(ca), &s);
        out->current_bytes += s.current_bytes;
        out->peak_bytes += s.peak_bytes; /* a sum of per-device peaks */
        out->current_count += s.current_count;
        out->alloc_count += s.alloc_count;
        out->free_count += s.free_count;
    }
}

static tp_allocator caching_allocator = {
    .name = "cuda_caching", .allocate = caching_allocate, .get_stats = caching_stats,
};
tp_allocator *tp_cuda_caching_allocator(void) { return &caching_allocator; }

// ----------------------------------------------------------------------------
// the async backend

typedef struct async_block {
    void *ptr;
    size_t size;
    int device;
    cudaStream_t stream;
    uint32_t nuses;
    cudaStream_t uses[4]; /* beyond four, the free waits for the device */
    bool overflow;
} async_block;

static _Atomic uint64_t async_allocs, async_frees, async_ooms;
/* Guards the uses of async blocks (record_stream may race a free of a
 * tensor shared across threads). */
static pthread_mutex_t async_uses_mu = PTHREAD_MUTEX_INITIALIZER;

static void async_free(void *ctx) {
    async_block *b = ctx;
    const tp__cuda_api *c = tp__cuda();
    int prev = tp__cuda_device_enter(b->device);
    pthread_mutex_lock(&async_uses_mu);
    uint32_t nuses = b->nuses;
    cudaStream_t uses[4];
    memcpy(uses, b->uses, sizeof uses);
    bool overflow = b->overflow;
    pthread_mutex_unlock(&async_uses_mu);
    /* The free is ordered on the allocation stream; make that stream wait
     * for the other streams that used the block (PyTorch's cudaMallocAsync
     * backend does the same). */
    if (overflow) {
        c->cudaDeviceSynchronize();
    } else {
        for (uint32_t i = 0; i < nuses; i++) {
            cudaEvent_t ev;
            if (c->cudaEventCreateWithFlags(&ev, cudaEventDisableTiming) != cudaSuccess) {
                c->cudaDeviceSynchronize();
                break;
            }
            c->cudaEventRecord(ev, uses[i]);
            c->cudaStreamWaitEvent(b->stream, ev, 0);
            c->cudaEventDestroy(ev);
        }
    }
    if (c->cudaFreeAsync(b->ptr, b->stream) != cudaSuccess) c->cudaGetLastError();
    tp__cuda_device_restore(prev);
    atomic_fetch_add(&async_frees, 1);
    free(b);
}

static cudaMemPool_t pool_of(int index) {
    cudaMemPool_t pool = NULL;
    if (tp__cuda()->cudaDeviceGetDefaultMemPool(&pool, index) != cudaSuccess) {
        tp__cuda()->cudaGetLastError();
        return NULL;
    }
    return pool;
}

static tp_status async_allocate(tp_allocator *self, size_t nbytes, tp_data_ptr *out) {
    (void)self;
    const tp__cuda_api *c = tp__cuda();
    if (!c) return TP_STATUS_UNSUPPORTED;
    int index = tp__cuda_current_index();
    out->device = tp_device_cuda(index);
    if (nbytes == 0) return TP_STATUS_OK;
    async_block *b = calloc(1, sizeof *b);
    if (!b) return tp__error(TP_STATUS_OUT_OF_MEMORY, "cuda_async allocator: no host memory");
    cudaStream_t stream = tp__cuda_current_stream(index);
    void *p = NULL;
    cudaError_t err = c->cudaMallocAsync(&p, nbytes, stream);
    if (err == cudaErrorMemoryAllocation) {
        /* PyTorch's retry: let pending frees land, give cached memory back, once. */
        c->cudaGetLastError();
        c->cudaDeviceSynchronize();
        cudaMemPool_t pool = pool_of(index);
        if (pool) c->cudaMemPoolTrimTo(pool, 0);
        err = c->cudaMallocAsync(&p, nbytes, stream);
    }
    if (err != cudaSuccess) {
        free(b);
        if (err == cudaErrorMemoryAllocation) atomic_fetch_add(&async_ooms, 1);
        return tp__cuda_error(err, "cudaMallocAsync of %zu bytes on cuda:%d, after emptying the pool",
                              nbytes, index);
    }
    *b = (async_block){.ptr = p, .size = nbytes, .device = index, .stream = stream};
    atomic_fetch_add(&async_allocs, 1);
    out->ptr = p;
    out->ctx = b;
    out->deleter = async_free;
    return TP_STATUS_OK;
}

bool tp__cuda_async_record_stream(const tp_data_ptr *dp, cudaStream_t stream) {
    if (dp->deleter != async_free) return false;
    async_block *b = dp->ctx;
    pthread_mutex_lock(&async_uses_mu);
    bool known = stream == b->stream;
    for (uint32_t i = 0; i < b->nuses && !known; i++) known = b->uses[i] == stream;
    if (!known && b->nuses < 4) b->uses[b->nuses++] = stream;
    else if (!known) b->overflow = true;
    pthread_mutex_unlock(&async_uses_mu);
    return true;
}

static uint64_t pool_attr(cudaMemPool_t pool, enum cudaMemPoolAttr attr) {
    uint64_t v = 0;
    if (tp__cuda()->cudaMemPoolGetAttribute(pool, attr, &v) != cudaSuccess) {
        tp__cuda()->cudaGetLastError();
        return 0;
    }
    return v;
}

tp_status tp_cuda_async_pool_stats(tp_device device, tp_cuda_pool_stats *out) {
    if (!out) return tp__error(TP_STATUS_INVALID_ARGUMENT, "cuda_async_pool_stats: NULL output");
    int index = tp__cuda_check_device(device, "cuda_async_pool_stats");
    if (index < 0) return tp_last_status();
    cudaMemPool_t pool = pool_of(index);
    if (!pool) return tp__error(TP_STATUS_UNSUPPORTED, "cuda:%d has no default memory pool", index);
    *out = (tp_cuda_pool_stats){
        .reserved_bytes = pool_attr(pool, cudaMemPoolAttrReservedMemCurrent),
        .reserved_peak = pool_attr(pool, cudaMemPoolAttrReservedMemHigh),
        .used_bytes = pool_attr(pool, cudaMemPoolAttrUsedMemCurrent),
        .used_peak = pool_attr(pool, cudaMemPoolAttrUsedMemHigh),
        .release_threshold = pool_attr(pool, cudaMemPoolAttrReleaseThreshold),
        .alloc_count = atomic_load(&async_allocs),
        .free_count = atomic_load(&async_frees),
        .num_ooms = atomic_load(&async_ooms),
    };
    return TP_STATUS_OK;
}

tp_status tp_cuda_async_set_release_threshold(tp_device device, uint64_t bytes) {
    int index = tp__cuda_check_device(device, "cuda_async_set_release_threshold");
    if (index < 0) return tp_last_status();
    cudaMemPool_t pool = pool_of(index);
    if (!pool) return tp__error(TP_STATUS_UNSUPPORTED, "cuda:%d has no default memory pool", index);
    cudaError_t err = tp__cuda()->cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &bytes);
    if (err != cudaSuccess)
        return tp__cuda_error(err, "cudaMemPoolSetAttribute(ReleaseThreshold) on cuda:%d", index);
    return TP_STATUS_OK;
}

static void async_stats(tp_allocator *self, tp_allocator_stats *out) {
    (void)self;
    int n = 0;
    if (tp_cuda_device_count(&n) != TP_STATUS_OK) return;
    for (int i = 0; i < n; i++) {
        tp_cuda_pool_stats s;
        if (tp_cuda_async_pool_stats(tp_device_cuda(i), &s) != TP_STATUS_OK) continue;
        out->current_bytes += s.used_bytes;
        out->peak_bytes += s.used_peak;
    }
    out->alloc_count = atomic_load(&async_allocs);
    out->free_count = atomic_load(&async_frees);
    out->current_count = out->alloc_count - out->free_count;
}

static tp_allocator async_allocator = {
    .name = "cuda_async", .allocate = async_allocate, .get_stats = async_stats,
};
tp_allocator *tp_cuda_async_allocator(void) { return &async_allocator; }

// ----------------------------------------------------------------------------
// the registry's dispatcher and the backend choice

static pthread_once_t backend_once = PTHREAD_ONCE_INIT;
static tp_allocator *backend;
static char backend_error[512];

static void choose_backend(void) {
    tp_caching_allocator_config cfg;
    if (tp_caching_allocator_config_from_env(&cfg) != TP_STATUS_OK) {
        snprintf(backend_error, sizeof backend_error, "%s", tp_last_error());
        return;
    }
    backend = cfg.backend == TP_CACHING_BACKEND_CUDA_MALLOC_ASYNC ? &async_allocator
                                                                  : &caching_allocator;
}

static tp_allocator *chosen(void) {
    pthread_once(&backend_once, choose_backend);
    if (!backend) tp__error(TP_STATUS_INVALID_ARGUMENT, "%s", backend_error);
    return backend;
}

const char *tp_cuda_allocator_backend(void) {
    tp_allocator *a = chosen();
    if (!a) return NULL;
    return a == &async_allocator ? "cudaMallocAsync" : "native";
}

static tp_status dispatch_allocate(tp_allocator *self, size_t nbytes, tp_data_ptr *out) {
    (void)self;
    tp_allocator *a = chosen();
    if (!a) return TP_STATUS_INVALID_ARGUMENT;
    return a->allocate(a, nbytes, out);
}

static void dispatch_stats(tp_allocator *self, tp_allocator_stats *out) {
    (void)self;
    tp_allocator *a = chosen();
    if (a) a->get_stats(a, out);
}

tp_allocator tp__cuda_default_allocator = {
    .name = "cuda_default", .allocate = dispatch_allocate, .get_stats = dispatch_stats,
};

tp_allocator *tp__cuda_storage_allocator(void) {
    tp_allocator *a = tp_allocator_get(TP_DEVICE_TYPE_CUDA);
    return a == &tp__cuda_default_allocator ? chosen() : a;
}

// ----------------------------------------------------------------------------
// record_stream and empty_cache

tp_status tp_tensor_record_stream(tp_tensor *t, tp_stream s) {
    if (!t) return tp__error(TP_STATUS_INVALID_ARGUMENT, "record_stream: NULL tensor");
    if (t->device.type != TP_DEVICE_TYPE_CUDA)
        return tp__error(TP_STATUS_INVALID_ARGUMENT, "record_stream: the tensor is not on a CUDA device");
    if (s.device.index >= 0 && s.device.index != t->device.index) {
        char a[16], b[16];
        return tp__error(TP_STATUS_INVALID_ARGUMENT,
                         "record_stream: the stream is on %s, the tensor on %s",
                         tp_device_str(s.device, a, sizeof a), tp_device_str(t->device, b, sizeof b));
    }
    const tp_data_ptr *dp = &t->storage->data;
    if (!dp->ctx) return TP_STATUS_OK; /* no memory (0 bytes) */
    if (tp__cuda_async_record_stream(dp, (cudaStream_t)(uintptr_t)s.handle)) return TP_STATUS_OK;
    int index = t->device.index;
    if (index >= 0 && index < TP__CUDA_MAX_DEVICES) {
        tp_caching_allocator *ca = atomic_load(&caching[index]);
        if (ca && tp_caching_allocator_record_stream(ca, dp, s.handle) == TP_STATUS_OK)
            return TP_STATUS_OK;
    }
    tp_clear_error();
    return TP_STATUS_OK; /* raw cudaFree waits for the device: nothing to defer */
}

tp_status tp_cuda_empty_cache(void) {
    if (!tp__cuda()) return TP_STATUS_UNSUPPORTED;
    for (int i = 0; i < TP__CUDA_MAX_DEVICES; i++) {
        tp_caching_allocator *ca = atomic_load(&caching[i]);
        if (ca) tp_caching_allocator_empty_cache(ca);
    }
    int n = tp__cuda()->device_count;
    for (int i = 0; i < n && i < TP__CUDA_MAX_DEVICES; i++) {
        cudaMemPool_t pool = pool_of(i);
        if (pool && tp__cuda()->cudaMemPoolTrimTo(pool, 0) != cudaSuccess)
            tp__cuda()->cudaGetLastError();
    }
    return TP_STATUS_OK;
}
