/*
 * tests/cuda/fake/fake_cudart.c - a test double of the CUDA runtime, built
 * as libcudart.so.13 (the real SONAME and version node), for machines
 * without a GPU.  See fake_cudart.h for the model and the controls.
 *
 * It implements the cuda* functions libtensorplay loads (src/cuda/cuda_api.h)
 * with host memory and counters, and stubs of the __cuda* registration
 * entry points nvcc-built programs call, so a program built with
 * `nvcc -cudart shared` also loads against it (tpprof's device-capture
 * tests).  Kernels run on the host (emulated_kernels.cpp: libtensorplay's
 * kernels.cu compiled as C++, one thread per launch, synchronously);
 * tpfake_set_kernels(0) makes cudaLaunchKernel fail with
 * cudaErrorNotSupported instead, as a device that cannot run them would.
 * One mutex guards everything; nothing here is fast.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime_api.h>

#define MAXDEV 8
#define EXPORT __attribute__((visibility("default")))

// ----------------------------------------------------------------------------
// state

typedef struct fstream {
    uint64_t issued, completed;
    int device;
    bool live;
} fstream;

typedef struct fevent {
    fstream *stream;
    uint64_t ticket;
    int device;
    bool recorded, live;
} fevent;

typedef struct fpool {
    int device;
    uint64_t reserved, reserved_high, used, used_high, threshold;
} fpool;

typedef struct falloc {
    void *ptr;
    size_t size;
    int device;
    int kind; /* 0 cudaMalloc, 1 pool (async), 2 host */
    struct falloc *next;
} falloc;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int ndev = -1; /* -1: read TPFAKE_DEVICES on first use */
static size_t limit[MAXDEV];
static size_t malloc_bytes[MAXDEV];
static int live_allocs[MAXDEV];
static fpool pools[MAXDEV];
static fstream legacy[MAXDEV];
static falloc *allocs;
static bool auto_complete;
static int nstreams, nevents;

/* Every created stream and event, for complete_all / pending counts. */
#define MAXOBJ 4096
static fstream *streams[MAXOBJ];
static fevent *events[MAXOBJ];

static _Thread_local int current_device;
static _Thread_local cudaError_t last_error;

#define NCALLS 64
static struct { const char *name; uint64_t n; int fail; } calls[NCALLS];

static void init_locked(void) {
    if (ndev >= 0) return;
    const char *e = getenv("TPFAKE_DEVICES");
    ndev = e ? atoi(e) : 1;
    if (ndev > MAXDEV) ndev = MAXDEV;
    for (int d = 0; d < MAXDEV; d++) {
        limit[d] = (size_t)1 << 30;
        pools[d].device = d;
        legacy[d].device = d;
        legacy[d].live = true;
    }
}

/* Counts the call; returns an injected failure if one is pending. */
static cudaError_t enter(const char *name) {
    init_locked();
    int i = 0;
    while (i < NCALLS && calls[i].name && strcmp(calls[i].name, name) != 0) i++;
    if (i == NCALLS) return cudaSuccess;
    calls[i].name = name;
    calls[i].n++;
    if (calls[i].fail) {
        cudaError_t err = (cudaError_t)calls[i].fail;
        calls[i].fail = 0;
        return err;
    }
    return cudaSuccess;
}

static cudaError_t fail(cudaError_t err) {
    if (err != cudaSuccess && err != cudaErrorNotReady) last_error = err;
    return err;
}

#define BEGIN(name)                              \
    pthread_mutex_lock(&mu);                     \
    cudaError_t err_ = enter(name);              \
    if (err_ != cudaSuccess) {                   \
        pthread_mutex_unlock(&mu);               \
        return fail(err_);                       \
    }
#define END(err) do { cudaError_t e_ = (err); pthread_mutex_unlock(&mu); return fail(e_); } while (0)

static fstream *stream_of(cudaStream_t s) {
    uintptr_t v = (uintptr_t)s;
    if (v == 0 || v == 1 || v == 2) return &legacy[current_device]; /* legacy, per-thread */
    return (fstream *)s;
}

static bool event_done(const fevent *e) {
    return !e->recorded || auto_complete || e->stream->completed >= e->ticket;
}

static size_t in_use(int d) { return malloc_bytes[d] + pools[d].reserved; }

static void settle_pool(fpool *p) {
    /* A synchronize gives reserved memory above the threshold back. */
    uint64_t keep = p->threshold < p->reserved ? p->threshold : p->reserved;
    p->reserved = p->used > keep ? p->used : keep;
}

static void complete_stream_locked(fstream *s) {
    s->completed = s->issued;
    settle_pool(&pools[s->device]);
}

// ----------------------------------------------------------------------------
// errors and versions

static const struct { cudaError_t e; const char *name, *text; } texts[] = {
    {cudaSuccess, "cudaSuccess", "no error"},
    {cudaErrorInvalidValue, "cudaErrorInvalidValue", "invalid argument"},
    {cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", "out of memory"},
    {cudaErrorInvalidDevice, "cudaErrorInvalidDevice", "invalid device ordinal"},
    {cudaErrorNoDevice, "cudaErrorNoDevice", "no CUDA-capable device is detected"},
    {cudaErrorInsufficientDriver, "cudaErrorInsufficientDriver",
     "CUDA driver version is insufficient for CUDA runtime version"},
    {cudaErrorNotReady, "cudaErrorNotReady", "device not ready"},
    {cudaErrorNotSupported, "cudaErrorNotSupported", "operation not supported"},
    {cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle", "invalid resource handle"},
    {cudaErrorLaunchFailure, "cudaErrorLaunchFailure", "unspecified launch failure"},
    {cudaErrorSymbolNotFound, "cudaErrorSymbolNotFound", "named symbol not found"},
};

EXPORT const char *cudaGetErrorName(cudaError_t e) {
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++)
        if (texts[i].e == e) return texts[i].name;
    return "cudaErrorUnknown";
}
EXPORT const char *cudaGetErrorString(cudaError_t e) {
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++)
        if (texts[i].e == e) return texts[i].text;
    return "unknown error";
}
EXPORT cudaError_t cudaGetLastError(void) {
    cudaError_t e = last_error;
    last_error = cudaSuccess;
    return e;
}
EXPORT cudaError_t cudaRuntimeGetVersion(int *v) { *v = 13000; return cudaSuccess; }
EXPORT cudaError_t cudaDriverGetVersion(int *v) { *v = 13000; return cudaSuccess; }

// ----------------------------------------------------------------------------
// devices

EXPORT cudaError_t cudaGetDeviceCount(int *n) {
    BEGIN("cudaGetDeviceCount");
    *n = ndev;
    END(ndev > 0 ? cudaSuccess : cudaErrorNoDevice);
}
EXPORT cudaError_t cudaSetDevice(int d) {
    BEGIN("cudaSetDevice");
    if (d < 0 || d >= ndev) END(cudaErrorInvalidDevice);
    current_device = d;
    END(cudaSuccess);
}
EXPORT cudaError_t cudaGetDevice(int *d) {
    *d = current_device;
    return cudaSuccess;
}
EXPORT cudaError_t cudaDeviceGetAttribute(int *v, enum cudaDeviceAttr a, int d) {
    (void)a, (void)d;
    *v = 0;
    return cudaSuccess;
}
EXPORT cudaError_t cudaMemGetInfo(size_t *free_b, size_t *total) {
    BEGIN("cudaMemGetInfo");
    *total = limit[current_device];
    *free_b = limit[current_device] - in_use(current_device);
    END(cudaSuccess);
}
EXPORT cudaError_t cudaDeviceSynchronize(void) {
    BEGIN("cudaDeviceSynchronize");
    complete_stream_locked(&legacy[current_device]);
    for (int i = 0; i < MAXOBJ; i++)
        if (streams[i] && streams[i]->live && streams[i]->device == current_device)
            complete_stream_locked(streams[i]);
    END(cudaSuccess);
}

// ----------------------------------------------------------------------------
// memory

static void *take(size_t n) {
    void *p = aligned_alloc(256, (n + 255) / 256 * 256);
    if (p) memset(p, 0xa5, n); /* like the device: never zeroed for you */
    return p;
}

static void remember(void *p, size_t n, int device, int kind) {
    falloc *a = malloc(sizeof *a);
    *a = (falloc){p, n, device, kind, allocs};
    allocs = a;
}

static falloc *forget(void *p, int kind) {
    for (falloc **a = &allocs; *a; a = &(*a)->next)
        if ((*a)->ptr == p && (*a)->kind == kind) {
            falloc *f = *a;
            *a = f->next;
            return f;
        }
    return NULL;
}

EXPORT cudaError_t cudaMalloc(void **p, size_t n) {
    BEGIN("cudaMalloc");
    int d = current_device;
    *p = NULL;
    if (n > limit[d] || in_use(d) + n > limit[d]) END(cudaErrorMemoryAllocation);
    void *m = take(n ? n : 1);
    if (!m) END(cudaErrorMemoryAllocation);
    remember(m, n, d, 0);
    malloc_bytes[d] += n;
    live_allocs[d]++;
    *p = m;
    END(cudaSuccess);
}
EXPORT cudaError_t cudaFree(void *p) {
    BEGIN("cudaFree");
    if (!p) END(cudaSuccess);
    falloc *a = forget(p, 0);
    if (!a) END(cudaErrorInvalidValue);
    malloc_bytes[a->device] -= a->size;
    live_allocs[a->device]--;
    free(a->ptr);
    free(a);
    END(cudaSuccess);
}
EXPORT cudaError_t cudaHostAlloc(void **p, size_t n, unsigned flags) {
    (void)flags;
    BEGIN("cudaHostAlloc");
    *p = take(n ? n : 1);
    if (!*p) END(cudaErrorMemoryAllocation);
    remember(*p, n, current_device, 2);
    END(cudaSuccess);
}
EXPORT cudaError_t cudaMallocHost(void **p, size_t n) { return cudaHostAlloc(p, n, 0); }
EXPORT cudaError_t cudaFreeHost(void *p) {
    BEGIN("cudaFreeHost");
    falloc *a = forget(p, 2);
    if (!a) END(cudaErrorInvalidValue);
    free(a->ptr);
    free(a);
    END(cudaSuccess);
}
EXPORT cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind k) {
    (void)k;
    BEGIN("cudaMemcpy");
    memmove(dst, src, n);
    END(cudaSuccess);
}
EXPORT cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind k,
                                   cudaStream_t s) {
    (void)k, (void)s;
    BEGIN("cudaMemcpyAsync");
    memmove(dst, src, n);
    END(cudaSuccess);
}
EXPORT cudaError_t cudaMemsetAsync(void *dst, int v, size_t n, cudaStream_t s) {
    (void)s;
    BEGIN("cudaMemsetAsync");
    memset(dst, v, n);
    END(cudaSuccess);
}

// ----------------------------------------------------------------------------
// streams and events

static bool add_obj(void **table, void *o) {
    for (int i = 0; i < MAXOBJ; i++)
        if (!table[i]) return table[i] = o, true;
    return false;
}

EXPORT cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags) {
    (void)flags;
    BEGIN("cudaStreamCreateWithFlags");
    fstream *f = calloc(1, sizeof *f);
    f->device = current_device;
    f->live = true;
    if (!add_obj((void **)streams, f)) free(f), f = NULL;
    if (!f) END(cudaErrorMemoryAllocation);
    nstreams++;
    *s = (cudaStream_t)f;
    END(cudaSuccess);
}
EXPORT cudaError_t cudaStreamDestroy(cudaStream_t s) {
    BEGIN("cudaStreamDestroy");
    fstream *f = stream_of(s);
    if (f == &legacy[current_device] || !f->live) END(cudaErrorInvalidResourceHandle);
    f->live = false; /* kept: events recorded on it still point here */
    nstreams--;
    END(cudaSuccess);
}
EXPORT cudaError_t cudaStreamSynchronize(cudaStream_t s) {
    BEGIN("cudaStreamSynchronize");
    complete_stream_locked(stream_of(s));
    END(cudaSuccess);
}
EXPORT cudaError_t cudaStreamQuery(cudaStream_t s) {
    BEGIN("cudaStreamQuery");
    fstream *f = stream_of(s);
    END(auto_complete || f->completed >= f->issued ? cudaSuccess : cudaErrorNotReady);
}
EXPORT cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags) {
    (void)s, (void)e, (void)flags;
    BEGIN("cudaStreamWaitEvent");
    END(cudaSuccess);
}
EXPORT cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags) {
    (void)flags;
    BEGIN("cudaEventCreateWithFlags");
    fevent *f = calloc(1, sizeof *f);
    f->device = current_device;
    f->live = true;
    if (!add_obj((void **)events, f)) free(f), f = NULL;
    if (!f) END(cudaErrorMemoryAllocation);
    nevents++;
    *e = (cudaEvent_t)f;
    END(cudaSuccess);
}
EXPORT cudaError_t cudaEventCreate(cudaEvent_t *e) { return cudaEventCreateWithFlags(e, 0); }
EXPORT cudaError_t cudaStreamCreate(cudaStream_t *s) { return cudaStreamCreateWithFlags(s, 0); }
EXPORT cudaError_t cudaEventDestroy(cudaEvent_t e) {
    BEGIN("cudaEventDestroy");
    fevent *f = (fevent *)e;
    for (int i = 0; i < MAXOBJ; i++)
        if (events[i] == f) events[i] = NULL;
    free(f);
    nevents--;
    END(cudaSuccess);
}
EXPORT cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
    BEGIN("cudaEventRecord");
    fevent *f = (fevent *)e;
    fstream *st = stream_of(s);
    f->stream = st;
    f->ticket = ++st->issued;
    f->recorded = true;
    END(cudaSuccess);
}
EXPORT cudaError_t cudaEventQuery(cudaEvent_t e) {
    BEGIN("cudaEventQuery");
    END(event_done((fevent *)e) ? cudaSuccess : cudaErrorNotReady);
}
EXPORT cudaError_t cudaEventSynchronize(cudaEvent_t e) {
    BEGIN("cudaEventSynchronize");
    fevent *f = (fevent *)e;
    if (f->recorded && f->stream->completed < f->ticket) f->stream->completed = f->ticket;
    END(cudaSuccess);
}
EXPORT cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b) {
    (void)a, (void)b;
    *ms = 0.0f;
    return cudaSuccess;
}

// ----------------------------------------------------------------------------
// stream-ordered allocation

EXPORT cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t *p, int d) {
    BEGIN("cudaDeviceGetDefaultMemPool");
    if (d < 0 || d >= ndev) END(cudaErrorInvalidDevice);
    *p = (cudaMemPool_t)&pools[d];
    END(cudaSuccess);
}
EXPORT cudaError_t cudaMallocAsync(void **p, size_t n, cudaStream_t s) {
    (void)s;
    BEGIN("cudaMallocAsync");
    int d = current_device;
    fpool *pool = &pools[d];
    *p = NULL;
    uint64_t grow = pool->used + n > pool->reserved ? pool->used + n - pool->reserved : 0;
    if (n > limit[d] || in_use(d) + grow > limit[d]) END(cudaErrorMemoryAllocation);
    void *m = take(n ? n : 1);
    if (!m) END(cudaErrorMemoryAllocation);
    remember(m, n, d, 1);
    pool->reserved += grow;
    pool->used += n;
    if (pool->used > pool->used_high) pool->used_high = pool->used;
    if (pool->reserved > pool->reserved_high) pool->reserved_high = pool->reserved;
    *p = m;
    END(cudaSuccess);
}
EXPORT cudaError_t cudaFreeAsync(void *p, cudaStream_t s) {
    (void)s;
    BEGIN("cudaFreeAsync");
    falloc *a = forget(p, 1);
    if (!a) END(cudaErrorInvalidValue);
    pools[a->device].used -= a->size; /* stays reserved until a synchronize */
    free(a->ptr);
    free(a);
    END(cudaSuccess);
}
EXPORT cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t p, enum cudaMemPoolAttr attr, void *v) {
    BEGIN("cudaMemPoolSetAttribute");
    fpool *pool = (fpool *)p;
    if (attr != cudaMemPoolAttrReleaseThreshold) END(cudaErrorInvalidValue);
    pool->threshold = *(uint64_t *)v;
    END(cudaSuccess);
}
EXPORT cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t p, enum cudaMemPoolAttr attr, void *v) {
    BEGIN("cudaMemPoolGetAttribute");
    fpool *pool = (fpool *)p;
    uint64_t *out = v;
    switch (attr) {
    case cudaMemPoolAttrReleaseThreshold: *out = pool->threshold; break;
    case cudaMemPoolAttrReservedMemCurrent: *out = pool->reserved; break;
    case cudaMemPoolAttrReservedMemHigh: *out = pool->reserved_high; break;
    case cudaMemPoolAttrUsedMemCurrent: *out = pool->used; break;
    case cudaMemPoolAttrUsedMemHigh: *out = pool->used_high; break;
    default: END(cudaErrorInvalidValue);
    }
    END(cudaSuccess);
}
EXPORT cudaError_t cudaMemPoolTrimTo(cudaMemPool_t p, size_t keep) {
    BEGIN("cudaMemPoolTrimTo");
    fpool *pool = (fpool *)p;
    uint64_t k = keep < pool->reserved ? keep : pool->reserved;
    pool->reserved = pool->used > k ? pool->used : k;
    END(cudaSuccess);
}

// ----------------------------------------------------------------------------
// modules and launches: kernels by name from emulated_kernels.cpp

void *tpfake_emulated_kernel(const char *name);
void tpfake_emulated_run(void *kernel, void **args);
static bool kernels_off;
static int dummy_library;

EXPORT cudaError_t cudaLibraryLoadData(cudaLibrary_t *lib, const void *code, enum cudaJitOption *o,
                                       void **ov, unsigned no, enum cudaLibraryOption *lo,
                                       void **lov, unsigned nlo) {
    (void)code, (void)o, (void)ov, (void)no, (void)lo, (void)lov, (void)nlo;
    BEGIN("cudaLibraryLoadData");
    *lib = (cudaLibrary_t)&dummy_library;
    END(cudaSuccess);
}
EXPORT cudaError_t cudaLibraryUnload(cudaLibrary_t lib) {
    (void)lib;
    return cudaSuccess;
}
EXPORT cudaError_t cudaLibraryGetKernel(cudaKernel_t *k, cudaLibrary_t lib, const char *name) {
    (void)lib;
    BEGIN("cudaLibraryGetKernel");
    *k = (cudaKernel_t)tpfake_emulated_kernel(name);
    END(*k ? cudaSuccess : cudaErrorSymbolNotFound);
}
EXPORT cudaError_t cudaLaunchKernel(const void *f, dim3 g, dim3 b, void **args, size_t shm,
                                    cudaStream_t s) {
    (void)g, (void)b, (void)shm, (void)s;
    BEGIN("cudaLaunchKernel");
    if (kernels_off || !f) END(cudaErrorNotSupported);
    pthread_mutex_unlock(&mu); /* kernels touch only "device" memory */
    tpfake_emulated_run((void *)f, args);
    return cudaSuccess;
}

/* What nvcc's host stubs call in a program linked with -cudart shared. */
EXPORT void **__cudaRegisterFatBinary(void *fatbin) { (void)fatbin; return (void **)&dummy_library; }
EXPORT void __cudaRegisterFatBinaryEnd(void **h) { (void)h; }
EXPORT void __cudaUnregisterFatBinary(void **h) { (void)h; }
EXPORT void __cudaRegisterFunction(void **h, const char *hf, char *df, const char *dn, int tl,
                                   void *tid, void *bid, void *bd, void *gd, int *ws) {
    (void)h, (void)hf, (void)df, (void)dn, (void)tl, (void)tid, (void)bid, (void)bd, (void)gd, (void)ws;
}
EXPORT char __cudaInitModule(void **h) { (void)h; return 0; }
EXPORT unsigned __cudaPushCallConfiguration(dim3 g, dim3 b, size_t shm, void *s) {
    (void)g, (void)b, (void)shm, (void)s;
    return 0;
}
EXPORT cudaError_t __cudaPopCallConfiguration(dim3 *g, dim3 *b, size_t *shm, void *s) {
    (void)g, (void)b, (void)shm, (void)s;
    return cudaSuccess;
}

// ----------------------------------------------------------------------------
// controls (fake_cudart.h)

EXPORT void tpfake_reset(void) {
    pthread_mutex_lock(&mu);
    init_locked();
    for (int i = 0; i < NCALLS; i++) calls[i].n = 0, calls[i].fail = 0;
    auto_complete = false;
    pthread_mutex_unlock(&mu);
}
EXPORT void tpfake_set_device_count(int n) {
    pthread_mutex_lock(&mu);
    init_locked();
    ndev = n < MAXDEV ? n : MAXDEV;
    pthread_mutex_unlock(&mu);
}
EXPORT void tpfake_set_memory_limit(int d, size_t bytes) {
    pthread_mutex_lock(&mu);
    init_locked();
    limit[d] = bytes;
    pthread_mutex_unlock(&mu);
}
EXPORT size_t tpfake_device_bytes_in_use(int d) {
    pthread_mutex_lock(&mu);
    size_t n = in_use(d);
    pthread_mutex_unlock(&mu);
    return n;
}
EXPORT int tpfake_live_allocations(int d) {
    pthread_mutex_lock(&mu);
    int n = live_allocs[d];
    pthread_mutex_unlock(&mu);
    return n;
}
EXPORT void tpfake_set_kernels(int on) {
    pthread_mutex_lock(&mu);
    kernels_off = !on;
    pthread_mutex_unlock(&mu);
}
EXPORT void tpfake_set_auto_complete(int on) {
    pthread_mutex_lock(&mu);
    auto_complete = on != 0;
    pthread_mutex_unlock(&mu);
}
EXPORT void tpfake_stream_complete(void *s) {
    pthread_mutex_lock(&mu);
    init_locked();
    complete_stream_locked(stream_of((cudaStream_t)s));
    pthread_mutex_unlock(&mu);
}
EXPORT void tpfake_complete_all(void) {
    pthread_mutex_lock(&mu);
    init_locked();
    for (int d = 0; d < MAXDEV; d++) complete_stream_locked(&legacy[d]);
    for (int i = 0; i < MAXOBJ; i++)
        if (streams[i]) complete_stream_locked(streams[i]);
    pthread_mutex_unlock(&mu);
}
EXPORT int tpfake_pending_events(void) {
    pthread_mutex_lock(&mu);
    int n = 0;
    for (int i = 0; i < MAXOBJ; i++) n += events[i] && !event_done(events[i]);
    pthread_mutex_unlock(&mu);
    return n;
}
EXPORT int tpfake_live_streams(void) { return nstreams; }
EXPORT int tpfake_live_events(void) { return nevents; }
EXPORT uint64_t tpfake_calls(const char *name) {
    pthread_mutex_lock(&mu);
    uint64_t n = 0;
    for (int i = 0; i < NCALLS && calls[i].name; i++)
        if (strcmp(calls[i].name, name) == 0) n = calls[i].n;
    pthread_mutex_unlock(&mu);
    return n;
}
EXPORT void tpfake_fail_next(const char *name, int err) {
    pthread_mutex_lock(&mu);
    init_locked();
    int i = 0;
    while (i < NCALLS && calls[i].name && strcmp(calls[i].name, name) != 0) i++;
    if (i < NCALLS) {
        calls[i].name = calls[i].name ? calls[i].name : strdup(name);
        calls[i].fail = err;
    }
    pthread_mutex_unlock(&mu);
}
