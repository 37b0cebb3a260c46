// cuda_runtime.c: the CUDA runtime's memory entry points (libcudart's
// exported cuda* functions). THE HOT PATH of programs that link the
// runtime dynamically (nvcc -cudart shared, libtensorplay's dlopen'ed
// libcudart through procaddr.c's dlsym). Same rules as cuda_driver.c: the
// real call, then one record when this is the thread's outermost device
// call (the runtime's own driver calls inside it are not recorded again)
// and no CUPTI backend records device calls (tpprof_device_hook_records);
// every return value and output untouched.
//
// The static runtime never calls these (its cuda* functions are inside the
// program): it is seen through its driver calls (cuda_driver.c), with the
// driver's entry point names in `api`.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <stddef.h>

#include "record/cuda_hooks.h"
#include "record/device.h"

typedef void *rt_handle; // cudaStream_t, cudaMemPool_t

#define cudaErrorInitializationError 3
#define cudaMemLocationTypeDevice 1

#define RUNTIME_HOOKS(X)                                                                                          \
    X(cudaMalloc) X(cudaFree) X(cudaMallocAsync) X(cudaMallocAsync_ptsz) X(cudaFreeAsync) X(cudaFreeAsync_ptsz)   \
    X(cudaMallocFromPoolAsync) X(cudaMallocFromPoolAsync_ptsz) X(cudaMallocManaged) X(cudaMallocPitch)             \
    X(cudaMalloc3D) X(cudaMallocHost) X(cudaHostAlloc) X(cudaFreeHost) X(cudaMemPoolCreate) X(cudaMemPoolDestroy)  \
    X(cudaMemPoolTrimTo) X(cudaDeviceReset) X(cudaGetDriverEntryPoint) X(cudaGetDriverEntryPoint_ptsz)            \
    X(cudaGetDriverEntryPointByVersion) X(cudaGetDriverEntryPointByVersion_ptsz)

enum {
#define ENUM(n) H_##n,
    RUNTIME_HOOKS(ENUM)
#undef ENUM
    H_COUNT
};
static _Atomic(void *) slots[H_COUNT];

#define REAL(n) ((n##_fn)tpprof_cuhook_real(&tpprof_cuda_runtime_hooks[H_##n]))

#define U(p) ((uint64_t)(uintptr_t)(p))

// ---------------------------------------------------------------------------
// What the runtime is asked: from the library the hooks came from.

static void *runtime_fn(const struct tpprof_cuaux *a) {
    void *h = atomic_load(&tpprof_cudart_handle);
    void *p = tpprof_real_dlsym(h ? h : RTLD_NEXT, a->name);
    return p && !tpprof_in_self(p) ? p : NULL;
}

typedef int (*get_device_fn)(int *);
static struct tpprof_cuaux get_device = {.name = "cudaGetDevice"};
static struct tpprof_cuaux default_pool = {.name = "cudaDeviceGetDefaultMemPool"};
static struct tpprof_cuaux pool_attr = {.name = "cudaMemPoolGetAttribute"};

int32_t tpprof_cudart_device(void) {
    get_device_fn g = (get_device_fn)tpprof_cuaux_get(&get_device, runtime_fn);
    int d = -1;
    return g && g(&d) == 0 ? d : -1;
}

static __thread uint64_t next_pool_sample_ns TPPROF_TLS;

// What pool *p holds reserved (tpprof_cu_pool_reserved), when a sample is
// due; else UINT64_MAX.
static uint64_t pool_reserved(rt_handle *p, int32_t dev, int always) {
    if (!tpprof_cu_pool_sample_due(&next_pool_sample_ns, always)) return UINT64_MAX;
    return tpprof_cu_pool_reserved(p, dev, &default_pool, &pool_attr, runtime_fn);
}

// Leaves a recorded allocation or free on a pool (pool NULL: the device's
// default one): the device, what the pool holds reserved when the call
// succeeded and `sample` is set, one record naming the pool.
static int pool_leave(int r, uint32_t op, rt_handle stream, rt_handle pool, int sample, uint64_t address,
                      size_t size, const char *api) {
    int32_t dev = tpprof_cudart_device();
    uint64_t reserved = r == 0 && sample ? pool_reserved(&pool, dev, 0) : UINT64_MAX;
    return tpprof_device_hook_leave_pool(r, op, dev, U(stream), U(pool), address, size, api, reserved);
}

// Leaves a recorded allocation that returned r: its device (pinned host
// memory belongs to none), one record.
static int alloc_leave(int r, uint32_t kind, uint64_t address, uint64_t size, const char *api) {
    int32_t dev = kind == TPPROF_DEV_KIND_PINNED_HOST ? -1 : tpprof_cudart_device();
    return tpprof_device_hook_leave(r, TPPROF_DEV_OP_ALLOC, kind, dev, address, size, api);
}

typedef int (*cudaMalloc_fn)(void **, size_t);
TPPROF_EXPORT int cudaMalloc(void **p, size_t n) {
    cudaMalloc_fn real = REAL(cudaMalloc);
    if (!real) return cudaErrorInitializationError;
    if (!tpprof_device_hook_enter()) return real(p, n);
    int r = real(p, n);
    return alloc_leave(r, TPPROF_DEV_KIND_DEVICE, r == 0 && p ? U(*p) : 0, n, "cudaMalloc");
}

typedef int (*cudaFree_fn)(void *);
TPPROF_EXPORT int cudaFree(void *p) {
    cudaFree_fn real = REAL(cudaFree);
    if (!real) return cudaErrorInitializationError;
    // cudaFree(NULL) is how programs make the context: no free.
    if (!p || !tpprof_device_hook_enter()) return real(p);
    int r = real(p);
    return tpprof_device_hook_leave(r, TPPROF_DEV_OP_FREE, TPPROF_DEV_KIND_DEVICE, tpprof_cudart_device(), U(p), 0,
                                    "cudaFree");
}

typedef int (*async_alloc_fn)(void **, size_t, rt_handle);
static int async_alloc(int id, const char *api, void **p, size_t n, rt_handle s) {
    async_alloc_fn real = (async_alloc_fn)tpprof_cuhook_real(&tpprof_cuda_runtime_hooks[id]);
    if (!real) return cudaErrorInitializationError;
    if (!tpprof_device_hook_enter()) return real(p, n, s);
    int r = real(p, n, s);
    return pool_leave(r, TPPROF_DEV_OP_ALLOC, s, NULL, 1, r == 0 && p ? U(*p) : 0, n, api);
}
TPPROF_EXPORT int cudaMallocAsync(void **p, size_t n, rt_handle s) {
    return async_alloc(H_cudaMallocAsync, "cudaMallocAsync", p, n, s);
}
TPPROF_EXPORT int cudaMallocAsync_ptsz(void **p, size_t n, rt_handle s) {
    return async_alloc(H_cudaMallocAsync_ptsz, "cudaMallocAsync_ptsz", p, n, s);
}

typedef int (*async_free_fn)(void *, rt_handle);
static int async_free(int id, const char *api, void *p, rt_handle s) {
    async_free_fn real = (async_free_fn)tpprof_cuhook_real(&tpprof_cuda_runtime_hooks[id]);
    if (!real) return cudaErrorInitializationError;
    if (!p || !tpprof_device_hook_enter()) return real(p, s);
    int r = real(p, s);
    return pool_leave(r, TPPROF_DEV_OP_FREE, s, NULL, 1, U(p), 0, api);
}
TPPROF_EXPORT int cudaFreeAsync(void *p, rt_handle s) { return async_free(H_cudaFreeAsync, "cudaFreeAsync", p, s); }
TPPROF_EXPORT int cudaFreeAsync_ptsz(void *p, rt_handle s) {
    return async_free(H_cudaFreeAsync_ptsz, "cudaFreeAsync_ptsz", p, s);
}

typedef int (*pool_alloc_fn)(void **, size_t, rt_handle, rt_handle);
static int pool_alloc(int id, const char *api, void **p, size_t n, rt_handle pool, rt_handle s) {
    pool_alloc_fn real = (pool_alloc_fn)tpprof_cuhook_real(&tpprof_cuda_runtime_hooks[id]);
    if (!real) return cudaErrorInitializationError;
    if (!tpprof_device_hook_enter()) return real(p, n, pool, s);
    int r = real(p, n, pool, s);
    return pool_leave(r, TPPROF_DEV_OP_ALLOC, s, pool, pool != NULL, r == 0 && p ? U(*p) : 0, n, api);
}
TPPROF_EXPORT int cudaMallocFromPoolAsync(void **p, size_t n, rt_handle pool, rt_handle s) {
    return pool_alloc(H_cudaMallocFromPoolAsync, "cudaMallocFromPoolAsync", p, n, pool, s);
}
TPPROF_EXPORT int cudaMallocFromPoolAsync_ptsz(void **p, size_t n, rt_handle pool, rt_handle s) {
    return pool_alloc(H_cudaMallocFromPoolAsync_ptsz, "cudaMallocFromPoolAsync_ptsz", p, n, pool, s);
}

typedef int (*cudaMallocManaged_fn)(void **, size_t, unsigned);
TPPROF_EXPORT int cudaMallocManaged(void **p, size_t n, unsigned flags) {
    cudaMallocManaged_fn real = REAL(cudaMallocManaged);
    if (!real) return cudaErrorInitializationError;
    if (!tpprof_device_hook_enter()) return real(p, n, flags);
    int r = real(p, n, flags);
    return alloc_leave(r, TPPROF_DEV_KIND_MANAGED, r == 0 && p ? U(*p) : 0, n, "cudaMallocManaged");
}

typedef int (*cudaMallocPitch_fn)(void **, size_t *, size_t, size_t);
TPPROF_EXPORT int cudaMallocPitch(void **p, size_t *pitch, size_t width, size_t height) {
    cudaMallocPitch_fn real = REAL(cudaMallocPitch);
    if (!real) return cudaErrorInitializationError;
    if (!tpprof_device_hook_enter()) return real(p, pitch, width, height);
    int r = real(p, pitch, width, height);
    return alloc_leave(r, TPPROF_DEV_KIND_PITCH, r == 0 && p ? U(*p) : 0,
                       pitch && r == 0 ? *pitch * height : width * height, "cudaMallocPitch");
}

// cudaPitchedPtr and cudaExtent, as cuda_runtime_api.h lays them out.
struct rt_pitched_ptr {
    void *ptr;
    size_t pitch, xsize, ysize;
};
struct rt_extent {
    size_t width, height, depth;
};
typedef int (*cudaMalloc3D_fn)(struct rt_pitched_ptr *, struct rt_extent);
TPPROF_EXPORT int cudaMalloc3D(struct rt_pitched_ptr *p, struct rt_extent e) {
    cudaMalloc3D_fn real = REAL(cudaMalloc3D);
    if (!real) return cudaErrorInitializationError;
    if (!tpprof_device_hook_enter()) return real(p, e);
    int r = real(p, e);
    return alloc_leave(r, TPPROF_DEV_KIND_PITCH, r == 0 && p ? U(p->ptr) : 0,
                       p && r == 0 ? p->pitch * e.height * e.depth : e.width * e.height * e.depth, "cudaMalloc3D");
}

typedef int (*cudaMallocHost_fn)(void **, size_t);
TPPROF_EXPORT int cudaMallocHost(void **p, size_t n) {
    cudaMallocHost_fn real = REAL(cudaMallocHost);
    if (!real) return cudaErrorInitializationError;
    if (!tpprof_device_hook_enter()) return real(p, n);
    int r = real(p, n);
    return alloc_leave(r, TPPROF_DEV_KIND_PINNED_HOST, r == 0 && p ? U(*p) : 0, n, "cudaMallocHost");
}

typedef int (*cudaHostAlloc_fn)(void **, size_t, unsigned);
TPPROF_EXPORT int cudaHostAlloc(void **p, size_t n, unsigned flags) {
    cudaHostAlloc_fn real = REAL(cudaHostAlloc);
    if (!real) return cudaErrorInitializationError;
    if (!tpprof_device_hook_enter()) return real(p, n, flags);
    int r = real(p, n, flags);
    return alloc_leave(r, TPPROF_DEV_KIND_PINNED_HOST, r == 0 && p ? U(*p) : 0, n, "cudaHostAlloc");
}

typedef int (*cudaFreeHost_fn)(void *);
TPPROF_EXPORT int cudaFreeHost(void *p) {
    cudaFreeHost_fn real = REAL(cudaFreeHost);
    if (!real) return cudaErrorInitializationError;
    if (!p || !tpprof_device_hook_enter()) return real(p);
    int r = real(p);
    return tpprof_device_hook_leave(r, TPPROF_DEV_OP_FREE, TPPROF_DEV_KIND_PINNED_HOST, -1, U(p), 0, "cudaFreeHost");
}

// ---------------------------------------------------------------------------
// Pools and reset.

typedef int (*cudaMemPoolCreate_fn)(rt_handle *, const void *);
TPPROF_EXPORT int cudaMemPoolCreate(rt_handle *pool, const void *props) {
    cudaMemPoolCreate_fn real = REAL(cudaMemPoolCreate);
    if (!real) return cudaErrorInitializationError;
    if (!tpprof_device_hook_enter()) return real(pool, props);
    int r = real(pool, props);
    // cudaMemPoolProps: allocType, handleTypes, location {type, id}.
    const int *w = props;
    int32_t dev = w && w[2] == cudaMemLocationTypeDevice ? w[3] : -1;
    return tpprof_device_hook_leave_pool(r, TPPROF_DEV_OP_POOL_CREATE, dev, 0, r == 0 && pool ? U(*pool) : 0, 0, 0,
                                         "cudaMemPoolCreate", UINT64_MAX);
}

typedef int (*cudaMemPoolDestroy_fn)(rt_handle);
TPPROF_EXPORT int cudaMemPoolDestroy(rt_handle pool) {
    cudaMemPoolDestroy_fn real = REAL(cudaMemPoolDestroy);
    if (!real) return cudaErrorInitializationError;
    if (!tpprof_device_hook_enter()) return real(pool);
    int r = real(pool);
    return tpprof_device_hook_leave_pool(r, TPPROF_DEV_OP_POOL_DESTROY, -1, 0, U(pool), 0, 0, "cudaMemPoolDestroy",
                                         UINT64_MAX);
}

typedef int (*cudaMemPoolTrimTo_fn)(rt_handle, size_t);
TPPROF_EXPORT int cudaMemPoolTrimTo(rt_handle pool, size_t keep) {
    cudaMemPoolTrimTo_fn real = REAL(cudaMemPoolTrimTo);
    if (!real) return cudaErrorInitializationError;
    if (!tpprof_device_hook_enter()) return real(pool, keep);
    int r = real(pool, keep);
    int32_t dev = tpprof_cudart_device();
    rt_handle q = pool;
    uint64_t reserved = r == 0 ? pool_reserved(&q, dev, 1) : UINT64_MAX;
    return tpprof_device_hook_leave_pool(r, TPPROF_DEV_OP_POOL_TRIM, dev, 0, U(pool), 0, keep, "cudaMemPoolTrimTo",
                                         reserved);
}

typedef int (*cudaDeviceReset_fn)(void);
TPPROF_EXPORT int cudaDeviceReset(void) {
    cudaDeviceReset_fn real = REAL(cudaDeviceReset);
    if (!real) return cudaErrorInitializationError;
    if (!tpprof_device_hook_enter()) return real();
    int32_t dev = tpprof_cudart_device();
    int r = real();
    return tpprof_device_hook_leave(r, TPPROF_DEV_OP_DEVICE_RESET, TPPROF_DEV_KIND_DEVICE, dev, 0, 0,
                                    "cudaDeviceReset");
}

// ---------------------------------------------------------------------------
// The runtime's driver entry-point lookups: what they return is wrapped as
// cuGetProcAddress's is (the dynamic runtime's answer is often a hook
// already, from its own wrapped cuGetProcAddress: left as it is).

typedef int (*entry_fn)(const char *, void **, unsigned long long, int *);
static int entry_point(int id, const char *symbol, void **fn, unsigned long long flags, int *status) {
    entry_fn real = (entry_fn)tpprof_cuhook_real(&tpprof_cuda_runtime_hooks[id]);
    if (!real) return cudaErrorInitializationError;
    int r = real(symbol, fn, flags, status);
    if (r == 0 && fn) tpprof_cu_wrap_entry(symbol, fn, INT_MAX, flags);
    return r;
}
TPPROF_EXPORT int cudaGetDriverEntryPoint(const char *symbol, void **fn, unsigned long long flags, int *status) {
    return entry_point(H_cudaGetDriverEntryPoint, symbol, fn, flags, status);
}
TPPROF_EXPORT int cudaGetDriverEntryPoint_ptsz(const char *symbol, void **fn, unsigned long long flags, int *status) {
    return entry_point(H_cudaGetDriverEntryPoint_ptsz, symbol, fn, flags, status);
}

typedef int (*entry_v_fn)(const char *, void **, unsigned, unsigned long long, int *);
static int entry_point_v(int id, const char *symbol, void **fn, unsigned version, unsigned long long flags,
                         int *status) {
    entry_v_fn real = (entry_v_fn)tpprof_cuhook_real(&tpprof_cuda_runtime_hooks[id]);
    if (!real) return cudaErrorInitializationError;
    int r = real(symbol, fn, version, flags, status);
    if (r == 0 && fn) tpprof_cu_wrap_entry(symbol, fn, (int)version, flags);
    return r;
}
TPPROF_EXPORT int cudaGetDriverEntryPointByVersion(const char *symbol, void **fn, unsigned version,
                                                   unsigned long long flags, int *status) {
    return entry_point_v(H_cudaGetDriverEntryPointByVersion, symbol, fn, version, flags, status);
}
TPPROF_EXPORT int cudaGetDriverEntryPointByVersion_ptsz(const char *symbol, void **fn, unsigned version,
                                                        unsigned long long flags, int *status) {
    return entry_point_v(H_cudaGetDriverEntryPointByVersion_ptsz, symbol, fn, version, flags, status);
}

const struct tpprof_cuhook tpprof_cuda_runtime_hooks[] = {
#define ROW(n) {#n, (void *)n, &slots[H_##n]},
    RUNTIME_HOOKS(ROW)
#undef ROW
    {NULL, NULL, NULL},
};
