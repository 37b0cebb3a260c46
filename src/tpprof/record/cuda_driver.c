// cuda_driver.c: the driver API's memory entry points (cuMem*, VMM, pools,
// context teardown, as libcuda.so.1 exports them). THE HOT PATH of CUDA
// programs: each hook calls the real function, and when it is the
// thread's outermost device API call (tpprof_device_depth), recording is
// on and no CUPTI backend records device calls (tpprof_device_hook_records,
// record/device.h), asks the driver for the current device (cached per thread and
// context) and records one event (record/device.c). The return value and
// every output are the real function's, untouched; a failed call is
// recorded with its status, never as memory.
//
// These are reached by a direct call (a program linked with -lcuda) or
// through the wrapped lookups of procaddr.c (the static runtime, cuBLAS &
// co.). Handles are opaque integers here: no CUDA header is included, so
// libtpprof.so builds and runs anywhere.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>

#include "record/cuda_hooks.h"
#include "record/device.h"

typedef unsigned long long cu_ptr; // CUdeviceptr, CUmemGenericAllocationHandle
typedef void *cu_handle;           // CUstream, CUmemoryPool, CUcontext

#define CUDA_ERROR_NOT_INITIALIZED 3
#define CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT 5
#define CU_MEM_LOCATION_TYPE_DEVICE 1

#define DRIVER_HOOKS(X)                                                                                           \
    X(cuMemAlloc_v2) X(cuMemFree_v2) X(cuMemAllocAsync) X(cuMemAllocAsync_ptsz) X(cuMemFreeAsync)                 \
    X(cuMemFreeAsync_ptsz) X(cuMemAllocFromPoolAsync) X(cuMemAllocFromPoolAsync_ptsz) X(cuMemAllocManaged)        \
    X(cuMemAllocPitch_v2) X(cuMemHostAlloc) X(cuMemAllocHost_v2) X(cuMemFreeHost) X(cuMemAddressReserve)          \
    X(cuMemAddressFree) X(cuMemCreate) X(cuMemRelease) X(cuMemMap) X(cuMemUnmap) X(cuMemPoolCreate)               \
    X(cuMemPoolDestroy) X(cuMemPoolTrimTo) X(cuCtxDestroy_v2) X(cuDevicePrimaryCtxReset_v2) X(cuGetProcAddress)   \
    X(cuGetProcAddress_v2)

enum {
#define ENUM(n) H_##n,
    DRIVER_HOOKS(ENUM)
#undef ENUM
    H_COUNT
};
static _Atomic(void *) slots[H_COUNT];

#define REAL(n) ((n##_fn)tpprof_cuhook_real(&tpprof_cuda_driver_hooks[H_##n]))

// ---------------------------------------------------------------------------
// What the driver is asked (not hooked: resolved once, through the real
// cuGetProcAddress when a lookup found it, else the next definition).

typedef int (*gpa_v2_fn)(const char *, void **, int, unsigned long long, int *);
typedef int (*gpa_v1_fn)(const char *, void **, int, unsigned long long);

static void *driver_fn(const char *base, const char *exported, int version) {
    void *p = NULL;
    gpa_v2_fn g2 = (gpa_v2_fn)atomic_load(tpprof_cuda_driver_hooks[H_cuGetProcAddress_v2].real);
    gpa_v1_fn g1 = (gpa_v1_fn)atomic_load(tpprof_cuda_driver_hooks[H_cuGetProcAddress].real);
    if (g2) g2(base, &p, version, 0, NULL);
    else if (g1) g1(base, &p, version, 0);
    if (!p) p = tpprof_real_dlsym(RTLD_NEXT, exported);
    return p && !tpprof_in_self(p) ? p : NULL;
}

// A lazily resolved driver function (resolved at most a few times).
#define DRIVER_AUX(var, type, base, exported, version)                                                          \
    static _Atomic(void *) var##_p;                                                                              \
    static _Atomic int var##_tried;                                                                              \
    static type var(void) {                                                                                      \
        void *p = atomic_load_explicit(&var##_p, memory_order_acquire);                                          \
        if (!p && atomic_load_explicit(&var##_tried, memory_order_relaxed) < 3) {                                \
            atomic_fetch_add(&var##_tried, 1);                                                                   \
            p = driver_fn(base, exported, version);                                                              \
            atomic_store(&var##_p, p);                                                                           \
        }                                                                                                        \
        return (type)p;                                                                                          \
    }

typedef int (*ctx_get_current_fn)(cu_handle *);
typedef int (*ctx_get_device_fn)(int *);
typedef int (*ctx_get_device_v2_fn)(int *, cu_handle);
typedef int (*default_pool_fn)(cu_handle *, int);
typedef int (*pool_attr_fn)(cu_handle, int, void *);
DRIVER_AUX(ctx_get_current, ctx_get_current_fn, "cuCtxGetCurrent", "cuCtxGetCurrent", 4000)
DRIVER_AUX(ctx_get_device, ctx_get_device_fn, "cuCtxGetDevice", "cuCtxGetDevice", 2000)
DRIVER_AUX(ctx_get_device_v2, ctx_get_device_v2_fn, "cuCtxGetDevice", "cuCtxGetDevice_v2", 13000)
DRIVER_AUX(default_pool, default_pool_fn, "cuDeviceGetDefaultMemPool", "cuDeviceGetDefaultMemPool", 11020)
DRIVER_AUX(pool_attr, pool_attr_fn, "cuMemPoolGetAttribute", "cuMemPoolGetAttribute", 11020)

// The current context's device, cached per thread by context.
static __thread cu_handle cached_ctx TPPROF_TLS;
static __thread int32_t cached_dev TPPROF_TLS;

int32_t tpprof_cu_device(void) {
    ctx_get_current_fn cur = ctx_get_current();
    cu_handle ctx = NULL;
    if (!cur || cur(&ctx) != 0 || !ctx) return -1;
    if (ctx == cached_ctx) return cached_dev;
    ctx_get_device_fn get = ctx_get_device();
    int d = -1;
    if (!get || get(&d) != 0) return -1;
    cached_ctx = ctx;
    cached_dev = d;
    return d;
}

// What pool p holds reserved (bytes), or UINT64_MAX. Asked at most once a
// millisecond per thread (and always after a trim): the timeline's reserved
// column is sampled, not exact.
static __thread uint64_t next_pool_sample_ns TPPROF_TLS;

static uint64_t pool_reserved(cu_handle *pool, int32_t dev, int always) {
    uint64_t now = tpprof_now_ns();
    if (!always && now < next_pool_sample_ns) return UINT64_MAX;
    next_pool_sample_ns = now + 1000000;
    if (!*pool) {
        default_pool_fn dp = default_pool();
        if (dev < 0 || !dp || dp(pool, dev) != 0) return UINT64_MAX;
    }
    pool_attr_fn pa = pool_attr();
    uint64_t v = 0;
    if (!pa || pa(*pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &v) != 0) return UINT64_MAX;
    return v;
}

static int32_t location_device(const void *props) {
    // CUmemAllocationProp and CUmemPoolProps both begin: type, handle types,
    // location {type, id}.
    const int *w = props;
    return w && w[2] == CU_MEM_LOCATION_TYPE_DEVICE ? w[3] : -1;
}

#define U(p) ((uint64_t)(uintptr_t)(p))

// ---------------------------------------------------------------------------
// Allocation and free.

typedef int (*cuMemAlloc_v2_fn)(cu_ptr *, size_t);
TPPROF_EXPORT int cuMemAlloc_v2(cu_ptr *p, size_t n) {
    cuMemAlloc_v2_fn real = REAL(cuMemAlloc_v2);
    if (!real) return CUDA_ERROR_NOT_INITIALIZED;
    if (!tpprof_device_hook_records()) return real(p, n);
    tpprof_device_depth++;
    int r = real(p, n);
    int32_t dev = tpprof_cu_device();
    tpprof_device_depth--;
    tpprof_device_record(TPPROF_DEV_OP_ALLOC, TPPROF_DEV_KIND_DEVICE, dev, 0, 0, r == 0 && p ? *p : 0, n, r,
                         "cuMemAlloc_v2", 1);
    return r;
}

typedef int (*cuMemFree_v2_fn)(cu_ptr);
TPPROF_EXPORT int cuMemFree_v2(cu_ptr p) {
    cuMemFree_v2_fn real = REAL(cuMemFree_v2);
    if (!real) return CUDA_ERROR_NOT_INITIALIZED;
    if (!tpprof_device_hook_records() || !p) return real(p);
    tpprof_device_depth++;
    int r = real(p);
    int32_t dev = tpprof_cu_device();
    tpprof_device_depth--;
    tpprof_device_record(TPPROF_DEV_OP_FREE, TPPROF_DEV_KIND_DEVICE, dev, 0, 0, p, 0, r, "cuMemFree_v2", 1);
    return r;
}

typedef int (*async_alloc_fn)(cu_ptr *, size_t, cu_handle);
static int async_alloc(int id, const char *api, cu_ptr *p, size_t n, cu_handle s) {
    async_alloc_fn real = (async_alloc_fn)tpprof_cuhook_real(&tpprof_cuda_driver_hooks[id]);
    if (!real) return CUDA_ERROR_NOT_INITIALIZED;
    if (!tpprof_device_hook_records()) return real(p, n, s);
    tpprof_device_depth++;
    int r = real(p, n, s);
    int32_t dev = tpprof_cu_device();
    cu_handle pool = NULL;
    uint64_t reserved = r == 0 ? pool_reserved(&pool, dev, 0) : UINT64_MAX;
    tpprof_device_depth--;
    tpprof_device_record_pool(TPPROF_DEV_OP_ALLOC, TPPROF_DEV_KIND_ASYNC, dev, U(s), U(pool), r == 0 && p ? *p : 0, n,
                              r, api, 1, reserved);
    return r;
}
TPPROF_EXPORT int cuMemAllocAsync(cu_ptr *p, size_t n, cu_handle s) {
    return async_alloc(H_cuMemAllocAsync, "cuMemAllocAsync", p, n, s);
}
TPPROF_EXPORT int cuMemAllocAsync_ptsz(cu_ptr *p, size_t n, cu_handle s) {
    return async_alloc(H_cuMemAllocAsync_ptsz, "cuMemAllocAsync_ptsz", p, n, s);
}

typedef int (*async_free_fn)(cu_ptr, cu_handle);
static int async_free(int id, const char *api, cu_ptr p, cu_handle s) {
    async_free_fn real = (async_free_fn)tpprof_cuhook_real(&tpprof_cuda_driver_hooks[id]);
    if (!real) return CUDA_ERROR_NOT_INITIALIZED;
    if (!tpprof_device_hook_records()) return real(p, s);
    tpprof_device_depth++;
    int r = real(p, s);
    int32_t dev = tpprof_cu_device();
    cu_handle pool = NULL;
    uint64_t reserved = r == 0 ? pool_reserved(&pool, dev, 0) : UINT64_MAX;
    tpprof_device_depth--;
    tpprof_device_record_pool(TPPROF_DEV_OP_FREE, TPPROF_DEV_KIND_ASYNC, dev, U(s), U(pool), p, 0, r, api, 1,
                              reserved);
    return r;
}
TPPROF_EXPORT int cuMemFreeAsync(cu_ptr p, cu_handle s) { return async_free(H_cuMemFreeAsync, "cuMemFreeAsync", p, s); }
TPPROF_EXPORT int cuMemFreeAsync_ptsz(cu_ptr p, cu_handle s) {
    return async_free(H_cuMemFreeAsync_ptsz, "cuMemFreeAsync_ptsz", p, s);
}

typedef int (*pool_alloc_fn)(cu_ptr *, size_t, cu_handle, cu_handle);
static int pool_alloc(int id, const char *api, cu_ptr *p, size_t n, cu_handle pool, cu_handle s) {
    pool_alloc_fn real = (pool_alloc_fn)tpprof_cuhook_real(&tpprof_cuda_driver_hooks[id]);
    if (!real) return CUDA_ERROR_NOT_INITIALIZED;
    if (!tpprof_device_hook_records()) return real(p, n, pool, s);
    tpprof_device_depth++;
    int r = real(p, n, pool, s);
    int32_t dev = tpprof_cu_device();
    cu_handle q = pool;
    uint64_t reserved = r == 0 && pool ? pool_reserved(&q, dev, 0) : UINT64_MAX;
    tpprof_device_depth--;
    tpprof_device_record_pool(TPPROF_DEV_OP_ALLOC, TPPROF_DEV_KIND_ASYNC, dev, U(s), U(pool), r == 0 && p ? *p : 0,
                              n, r, api, 1, reserved);
    return r;
}
TPPROF_EXPORT int cuMemAllocFromPoolAsync(cu_ptr *p, size_t n, cu_handle pool, cu_handle s) {
    return pool_alloc(H_cuMemAllocFromPoolAsync, "cuMemAllocFromPoolAsync", p, n, pool, s);
}
TPPROF_EXPORT int cuMemAllocFromPoolAsync_ptsz(cu_ptr *p, size_t n, cu_handle pool, cu_handle s) {
    return pool_alloc(H_cuMemAllocFromPoolAsync_ptsz, "cuMemAllocFromPoolAsync_ptsz", p, n, pool, s);
}

typedef int (*cuMemAllocManaged_fn)(cu_ptr *, size_t, unsigned);
TPPROF_EXPORT int cuMemAllocManaged(cu_ptr *p, size_t n, unsigned flags) {
    cuMemAllocManaged_fn real = REAL(cuMemAllocManaged);
    if (!real) return CUDA_ERROR_NOT_INITIALIZED;
    if (!tpprof_device_hook_records()) return real(p, n, flags);
    tpprof_device_depth++;
    int r = real(p, n, flags);
    int32_t dev = tpprof_cu_device();
    tpprof_device_depth--;
    tpprof_device_record(TPPROF_DEV_OP_ALLOC, TPPROF_DEV_KIND_MANAGED, dev, 0, 0, r == 0 && p ? *p : 0, n, r,
                         "cuMemAllocManaged", 1);
    return r;
}

typedef int (*cuMemAllocPitch_v2_fn)(cu_ptr *, size_t *, size_t, size_t, unsigned);
TPPROF_EXPORT int cuMemAllocPitch_v2(cu_ptr *p, size_t *pitch, size_t width, size_t height, unsigned elem) {
    cuMemAllocPitch_v2_fn real = REAL(cuMemAllocPitch_v2);
    if (!real) return CUDA_ERROR_NOT_INITIALIZED;
    if (!tpprof_device_hook_records()) return real(p, pitch, width, height, elem);
    tpprof_device_depth++;
    int r = real(p, pitch, width, height, elem);
    int32_t dev = tpprof_cu_device();
    tpprof_device_depth--;
    int ok = r == 0 && p && pitch;
    tpprof_device_record(TPPROF_DEV_OP_ALLOC, TPPROF_DEV_KIND_PITCH, dev, 0, 0, ok ? *p : 0,
                         ok ? *pitch * height : width * height, r, "cuMemAllocPitch_v2", 1);
    return r;
}

// Pinned host memory: device -1 (it belongs to no device).
typedef int (*cuMemHostAlloc_fn)(void **, size_t, unsigned);
TPPROF_EXPORT int cuMemHostAlloc(void **p, size_t n, unsigned flags) {
    cuMemHostAlloc_fn real = REAL(cuMemHostAlloc);
    if (!real) return CUDA_ERROR_NOT_INITIALIZED;
    if (!tpprof_device_hook_records()) return real(p, n, flags);
    tpprof_device_depth++;
    int r = real(p, n, flags);
    tpprof_device_depth--;
    tpprof_device_record(TPPROF_DEV_OP_ALLOC, TPPROF_DEV_KIND_PINNED_HOST, -1, 0, 0, r == 0 && p ? U(*p) : 0, n, r,
                         "cuMemHostAlloc", 1);
    return r;
}

typedef int (*cuMemAllocHost_v2_fn)(void **, size_t);
TPPROF_EXPORT int cuMemAllocHost_v2(void **p, size_t n) {
    cuMemAllocHost_v2_fn real = REAL(cuMemAllocHost_v2);
    if (!real) return CUDA_ERROR_NOT_INITIALIZED;
    if (!tpprof_device_hook_records()) return real(p, n);
    tpprof_device_depth++;
    int r = real(p, n);
    tpprof_device_depth--;
    tpprof_device_record(TPPROF_DEV_OP_ALLOC, TPPROF_DEV_KIND_PINNED_HOST, -1, 0, 0, r == 0 && p ? U(*p) : 0, n, r,
                         "cuMemAllocHost_v2", 1);
    return r;
}

typedef int (*cuMemFreeHost_fn)(void *);
TPPROF_EXPORT int cuMemFreeHost(void *p) {
    cuMemFreeHost_fn real = REAL(cuMemFreeHost);
    if (!real) return CUDA_ERROR_NOT_INITIALIZED;
    if (!tpprof_device_hook_records() || !p) return real(p);
    tpprof_device_depth++;
    int r = real(p);
    tpprof_device_depth--;
    tpprof_device_record(TPPROF_DEV_OP_FREE, TPPROF_DEV_KIND_PINNED_HOST, -1, 0, 0, U(p), 0, r, "cuMemFreeHost", 1);
    return r;
}

// ---------------------------------------------------------------------------
// Virtual memory management: reservations, physical handles and mappings
// are three things (a mapping is never counted as memory: its physical
// handle is).

typedef int (*cuMemAddressReserve_fn)(cu_ptr *, size_t, size_t, cu_ptr, unsigned long long);
TPPROF_EXPORT int cuMemAddressReserve(cu_ptr *p, size_t n, size_t align, cu_ptr addr, unsigned long long flags) {
    cuMemAddressReserve_fn real = REAL(cuMemAddressReserve);
    if (!real) return CUDA_ERROR_NOT_INITIALIZED;
    if (!tpprof_device_hook_records()) return real(p, n, align, addr, flags);
    tpprof_device_depth++;
    int r = real(p, n, align, addr, flags);
    tpprof_device_depth--;
    tpprof_device_record(TPPROF_DEV_OP_VA_RESERVE, TPPROF_DEV_KIND_VMM_RESERVE, -1, 0, 0, r == 0 && p ? *p : 0, n, r,
                         "cuMemAddressReserve", 1);
    return r;
}

typedef int (*cuMemAddressFree_fn)(cu_ptr, size_t);
TPPROF_EXPORT int cuMemAddressFree(cu_ptr p, size_t n) {
    cuMemAddressFree_fn real = REAL(cuMemAddressFree);
    if (!real) return CUDA_ERROR_NOT_INITIALIZED;
    if (!tpprof_device_hook_records()) return real(p, n);
    tpprof_device_depth++;
    int r = real(p, n);
    tpprof_device_depth--;
    tpprof_device_record(TPPROF_DEV_OP_VA_FREE, TPPROF_DEV_KIND_VMM_RESERVE, -1, 0, 0, p, n, r, "cuMemAddressFree", 1);
    return r;
}

typedef int (*cuMemCreate_fn)(cu_ptr *, size_t, const void *, unsigned long long);
TPPROF_EXPORT int cuMemCreate(cu_ptr *h, size_t n, const void *prop, unsigned long long flags) {
    cuMemCreate_fn real = REAL(cuMemCreate);
    if (!real) return CUDA_ERROR_NOT_INITIALIZED;
    if (!tpprof_device_hook_records()) return real(h, n, prop, flags);
    tpprof_device_depth++;
    int r = real(h, n, prop, flags);
    tpprof_device_depth--;
    tpprof_device_record(TPPROF_DEV_OP_PHYS_CREATE, TPPROF_DEV_KIND_VMM_PHYSICAL, location_device(prop), 0, 0,
                         r == 0 && h ? *h : 0, n, r, "cuMemCreate", 1);
    return r;
}

typedef int (*cuMemRelease_fn)(cu_ptr);
TPPROF_EXPORT int cuMemRelease(cu_ptr h) {
    cuMemRelease_fn real = REAL(cuMemRelease);
    if (!real) return CUDA_ERROR_NOT_INITIALIZED;
    if (!tpprof_device_hook_records()) return real(h);
    tpprof_device_depth++;
    int r = real(h);
    tpprof_device_depth--;
    tpprof_device_record(TPPROF_DEV_OP_PHYS_RELEASE, TPPROF_DEV_KIND_VMM_PHYSICAL, -1, 0, 0, h, 0, r, "cuMemRelease", 1);
    return r;
}

typedef int (*cuMemMap_fn)(cu_ptr, size_t, size_t, cu_ptr, unsigned long long);
TPPROF_EXPORT int cuMemMap(cu_ptr p, size_t n, size_t offset, cu_ptr h, unsigned long long flags) {
    cuMemMap_fn real = REAL(cuMemMap);
    if (!real) return CUDA_ERROR_NOT_INITIALIZED;
    if (!tpprof_device_hook_records()) return real(p, n, offset, h, flags);
    tpprof_device_depth++;
    int r = real(p, n, offset, h, flags);
    tpprof_device_depth--;
    tpprof_device_record(TPPROF_DEV_OP_MAP, TPPROF_DEV_KIND_VMM_MAPPING, -1, 0, 0, p, n, r, "cuMemMap", 1);
    return r;
}

typedef int (*cuMemUnmap_fn)(cu_ptr, size_t);
TPPROF_EXPORT int cuMemUnmap(cu_ptr p, size_t n) {
    cuMemUnmap_fn real = REAL(cuMemUnmap);
    if (!real) return CUDA_ERROR_NOT_INITIALIZED;
    if (!tpprof_device_hook_records()) return real(p, n);
    tpprof_device_depth++;
    int r = real(p, n);
    tpprof_device_depth--;
    tpprof_device_record(TPPROF_DEV_OP_UNMAP, TPPROF_DEV_KIND_VMM_MAPPING, -1, 0, 0, p, n, r, "cuMemUnmap", 1);
    return r;
}

// ---------------------------------------------------------------------------
// Pools and teardown.

typedef int (*cuMemPoolCreate_fn)(cu_handle *, const void *);
TPPROF_EXPORT int cuMemPoolCreate(cu_handle *pool, const void *props) {
    cuMemPoolCreate_fn real = REAL(cuMemPoolCreate);
    if (!real) return CUDA_ERROR_NOT_INITIALIZED;
    if (!tpprof_device_hook_records()) return real(pool, props);
    tpprof_device_depth++;
    int r = real(pool, props);
    tpprof_device_depth--;
    tpprof_device_record(TPPROF_DEV_OP_POOL_CREATE, TPPROF_DEV_KIND_ASYNC, location_device(props), 0,
                         r == 0 && pool ? U(*pool) : 0, 0, 0, r, "cuMemPoolCreate", 1);
    return r;
}

typedef int (*cuMemPoolDestroy_fn)(cu_handle);
TPPROF_EXPORT int cuMemPoolDestroy(cu_handle pool) {
    cuMemPoolDestroy_fn real = REAL(cuMemPoolDestroy);
    if (!real) return CUDA_ERROR_NOT_INITIALIZED;
    if (!tpprof_device_hook_records()) return real(pool);
    tpprof_device_depth++;
    int r = real(pool);
    tpprof_device_depth--;
    tpprof_device_record(TPPROF_DEV_OP_POOL_DESTROY, TPPROF_DEV_KIND_ASYNC, -1, 0, U(pool), 0, 0, r,
                         "cuMemPoolDestroy", 1);
    return r;
}

typedef int (*cuMemPoolTrimTo_fn)(cu_handle, size_t);
TPPROF_EXPORT int cuMemPoolTrimTo(cu_handle pool, size_t keep) {
    cuMemPoolTrimTo_fn real = REAL(cuMemPoolTrimTo);
    if (!real) return CUDA_ERROR_NOT_INITIALIZED;
    if (!tpprof_device_hook_records()) return real(pool, keep);
    tpprof_device_depth++;
    int r = real(pool, keep);
    int32_t dev = tpprof_cu_device();
    cu_handle q = pool;
    uint64_t reserved = r == 0 ? pool_reserved(&q, dev, 1) : UINT64_MAX;
    tpprof_device_depth--;
    tpprof_device_record_pool(TPPROF_DEV_OP_POOL_TRIM, TPPROF_DEV_KIND_ASYNC, dev, 0, U(pool), 0, keep, r,
                              "cuMemPoolTrimTo", 1, reserved);
    return r;
}

// A context's device: the cached one if it is the current context, else
// the driver's cuCtxGetDevice_v2 where it has one.
static int32_t device_of_ctx(cu_handle ctx) {
    int32_t cur = tpprof_cu_device();
    if (ctx == cached_ctx) return cur;
    ctx_get_device_v2_fn g = ctx_get_device_v2();
    int d = -1;
    return g && g(&d, ctx) == 0 ? d : -1;
}

typedef int (*cuCtxDestroy_v2_fn)(cu_handle);
TPPROF_EXPORT int cuCtxDestroy_v2(cu_handle ctx) {
    cuCtxDestroy_v2_fn real = REAL(cuCtxDestroy_v2);
    if (!real) return CUDA_ERROR_NOT_INITIALIZED;
    if (!tpprof_device_hook_records()) return real(ctx);
    tpprof_device_depth++;
    int32_t dev = device_of_ctx(ctx);
    int r = real(ctx);
    if (ctx == cached_ctx) cached_ctx = NULL;
    tpprof_device_depth--;
    tpprof_device_record(TPPROF_DEV_OP_DEVICE_RESET, TPPROF_DEV_KIND_DEVICE, dev, 0, 0, 0, 0, r, "cuCtxDestroy_v2", 1);
    return r;
}

typedef int (*cuDevicePrimaryCtxReset_v2_fn)(int);
TPPROF_EXPORT int cuDevicePrimaryCtxReset_v2(int dev) {
    cuDevicePrimaryCtxReset_v2_fn real = REAL(cuDevicePrimaryCtxReset_v2);
    if (!real) return CUDA_ERROR_NOT_INITIALIZED;
    if (!tpprof_device_hook_records()) return real(dev);
    tpprof_device_depth++;
    int r = real(dev);
    cached_ctx = NULL;
    tpprof_device_depth--;
    tpprof_device_record(TPPROF_DEV_OP_DEVICE_RESET, TPPROF_DEV_KIND_DEVICE, dev, 0, 0, 0, 0, r,
                         "cuDevicePrimaryCtxReset_v2", 1);
    return r;
}

// The gpa wrappers are procaddr.c's; their slots are here, with the rest.
int cuGetProcAddress(const char *, void **, int, uint64_t);
int cuGetProcAddress_v2(const char *, void **, int, uint64_t, int *);

const struct tpprof_cuhook tpprof_cuda_driver_hooks[] = {
#define ROW(n) {#n, (void *)n, &slots[H_##n]},
    DRIVER_HOOKS(ROW)
#undef ROW
    {NULL, NULL, NULL},
};
