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

#define U(p) ((uint64_t)(uintptr_t)(p))

// ---------------------------------------------------------------------------
// What the driver is asked (not hooked: resolved once, through the real
// cuGetProcAddress when a lookup found it, else the next definition).

typedef int (*gpa_v2_fn)(const char *, void **, int, unsigned long long, int *);
typedef int (*gpa_v1_fn)(const char *, void **, int, unsigned long long);

static void *driver_fn(const struct tpprof_cuaux *a) {
    void *p = NULL;
    gpa_v2_fn g2 = (gpa_v2_fn)atomic_load(tpprof_cuda_driver_hooks[H_cuGetProcAddress_v2].real);
    gpa_v1_fn g1 = (gpa_v1_fn)atomic_load(tpprof_cuda_driver_hooks[H_cuGetProcAddress].real);
    if (g2) g2(a->name, &p, a->version, 0, NULL);
    else if (g1) g1(a->name, &p, a->version, 0);
    if (!p) p = tpprof_real_dlsym(RTLD_NEXT, a->exported);
    return p && !tpprof_in_self(p) ? p : NULL;
}

typedef int (*ctx_get_current_fn)(cu_handle *);
typedef int (*ctx_get_device_fn)(int *);
typedef int (*ctx_get_device_v2_fn)(int *, cu_handle);
static struct tpprof_cuaux ctx_get_current = {
    .name = "cuCtxGetCurrent", .exported = "cuCtxGetCurrent", .version = 4000};
static struct tpprof_cuaux ctx_get_device = {.name = "cuCtxGetDevice", .exported = "cuCtxGetDevice", .version = 2000};
static struct tpprof_cuaux ctx_get_device_v2 = {
    .name = "cuCtxGetDevice", .exported = "cuCtxGetDevice_v2", .version = 13000};
static struct tpprof_cuaux default_pool = {
    .name = "cuDeviceGetDefaultMemPool", .exported = "cuDeviceGetDefaultMemPool", .version = 11020};
static struct tpprof_cuaux pool_attr = {
    .name = "cuMemPoolGetAttribute", .exported = "cuMemPoolGetAttribute", .version = 11020};

// The current context's device, cached per thread by context.
static __thread cu_handle cached_ctx TPPROF_TLS;
static __thread int32_t cached_dev TPPROF_TLS;

int32_t tpprof_cu_device(void) {
    ctx_get_current_fn cur = (ctx_get_current_fn)tpprof_cuaux_get(&ctx_get_current, driver_fn);
    cu_handle ctx = NULL;
    if (!cur || cur(&ctx) != 0 || !ctx) return -1;
    if (ctx == cached_ctx) return cached_dev;
    ctx_get_device_fn get = (ctx_get_device_fn)tpprof_cuaux_get(&ctx_get_device, driver_fn);
    int d = -1;
    if (!get || get(&d) != 0) return -1;
    cached_ctx = ctx;
    cached_dev = d;
    return d;
}

static __thread uint64_t next_pool_sample_ns TPPROF_TLS;

// What pool *p holds reserved (tpprof_cu_pool_reserved), when a sample is
// due; else UINT64_MAX.
static uint64_t pool_reserved(cu_handle *p, int32_t dev, int always) {
    if (!tpprof_cu_pool_sample_due(&next_pool_sample_ns, always)) return UINT64_MAX;
    return tpprof_cu_pool_reserved(p, dev, &default_pool, &pool_attr, driver_fn);
}

// Leaves a recorded allocation or free on a pool (pool NULL: the device's
// default one): the device, what the pool holds reserved when the call
// succeeded and `sample` is set, one record naming the pool.
static int pool_leave(int r, uint32_t op, cu_handle stream, cu_handle pool, int sample, cu_ptr address, size_t size,
                      const char *api) {
    int32_t dev = tpprof_cu_device();
    uint64_t reserved = r == 0 && sample ? pool_reserved(&pool, dev, 0) : UINT64_MAX;
    return tpprof_device_hook_leave_pool(r, op, dev, U(stream), U(pool), address, size, api, reserved);
}

static int32_t location_device(const void *props) {
    // CUmemAllocationProp and CUmemPoolProps both begin: type, handle types,
    // location {type, id}.
    const int *w = props;
    return w && w[2] == CU_MEM_LOCATION_TYPE_DEVICE ? w[3] : -1;
}

// ---------------------------------------------------------------------------
// Allocation and free.

typedef int (*cuMemAlloc_v2_fn)(cu_ptr *, size_t);
TPPROF_EXPORT int cuMemAlloc_v2(cu_ptr *p, size_t n) {
    cuMemAlloc_v2_fn real = REAL(cuMemAlloc_v2);
    if (!real) return CUDA_ERROR_NOT_INITIALIZED;
    if (!tpprof_device_hook_enter()) return real(p, n);
    int r = real(p, n);
    return tpprof_device_hook_leave(r, TPPROF_DEV_OP_ALLOC, TPPROF_DEV_KIND_DEVICE, tpprof_cu_device(),
                                    r == 0 && p ? *p : 0, n, "cuMemAlloc_v2");
}

typedef int (*cuMemFree_v2_fn)(cu_ptr);
TPPROF_EXPORT int cuMemFree_v2(cu_ptr p) {
    cuMemFree_v2_fn real = REAL(cuMemFree_v2);
    if (!real) return CUDA_ERROR_NOT_INITIALIZED;
    if (!p || !tpprof_device_hook_enter()) return real(p);
    int r = real(p);
    return tpprof_device_hook_leave(r, TPPROF_DEV_OP_FREE, TPPROF_DEV_KIND_DEVICE, tpprof_cu_device(), p, 0,
                                    "cuMemFree_v2");
}

typedef int (*async_alloc_fn)(cu_ptr *, size_t, cu_handle);
static int async_alloc(int id, const char *api, cu_ptr *p, size_t n, cu_handle s) {
    async_alloc_fn real = (async_alloc_fn)tpprof_cuhook_real(&tpprof_cuda_driver_hooks[id]);
    if (!real) return CUDA_ERROR_NOT_INITIALIZED;
    if (!tpprof_device_hook_enter()) return real(p, n, s);
    int r = real(p, n, s);
    return pool_leave(r, TPPROF_DEV_OP_ALLOC, s, NULL, 1, r == 0 && p ? *p : 0, n, api);
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
    if (!tpprof_device_hook_enter()) return real(p, s);
    int r = real(p, s);
    return pool_leave(r, TPPROF_DEV_OP_FREE, s, NULL, 1, p, 0, api);
}
TPPROF_EXPORT int cuMemFreeAsync(cu_ptr p, cu_handle s) { return async_free(H_cuMemFreeAsync, "cuMemFreeAsync", p, s); }
TPPROF_EXPORT int cuMemFreeAsync_ptsz(cu_ptr p, cu_handle s) {
    return async_free(H_cuMemFreeAsync_ptsz, "cuMemFreeAsync_ptsz", p, s);
}

typedef int (*pool_alloc_fn)(cu_ptr *, size_t, cu_handle, cu_handle);
static int pool_alloc(int id, const char *api, cu_ptr *p, size_t n, cu_handle pool, cu_handle s) {
    pool_alloc_fn real = (pool_alloc_fn)tpprof_cuhook_real(&tpprof_cuda_driver_hooks[id]);
    if (!real) return CUDA_ERROR_NOT_INITIALIZED;
    if (!tpprof_device_hook_enter()) return real(p, n, pool, s);
    int r = real(p, n, pool, s);
    return pool_leave(r, TPPROF_DEV_OP_ALLOC, s, pool, pool != NULL, r == 0 && p ? *p : 0, n, api);
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
    if (!tpprof_device_hook_enter()) return real(p, n, flags);
    int r = real(p, n, flags);
    return tpprof_device_hook_leave(r, TPPROF_DEV_OP_ALLOC, TPPROF_DEV_KIND_MANAGED, tpprof_cu_device(),
                                    r == 0 && p ? *p : 0, n, "cuMemAllocManaged");
}

typedef int (*cuMemAllocPitch_v2_fn)(cu_ptr *, size_t *, size_t, size_t, unsigned);
TPPROF_EXPORT int cuMemAllocPitch_v2(cu_ptr *p, size_t *pitch, size_t width, size_t height, unsigned elem) {
    cuMemAllocPitch_v2_fn real = REAL(cuMemAllocPitch_v2);
    if (!real) return CUDA_ERROR_NOT_INITIALIZED;
    if (!tpprof_device_hook_enter()) return real(p, pitch, width, height, elem);
    int r = real(p, pitch, width, height, elem);
    int ok = r == 0 && p && pitch;
    return tpprof_device_hook_leave(r, TPPROF_DEV_OP_ALLOC, TPPROF_DEV_KIND_PITCH, tpprof_cu_device(), ok ? *p : 0,
                                    ok ? *pitch * height : width * height, "cuMemAllocPitch_v2");
}

// Pinned host memory: device -1 (it belongs to no device).
typedef int (*cuMemHostAlloc_fn)(void **, size_t, unsigned);
TPPROF_EXPORT int cuMemHostAlloc(void **p, size_t n, unsigned flags) {
    cuMemHostAlloc_fn real = REAL(cuMemHostAlloc);
    if (!real) return CUDA_ERROR_NOT_INITIALIZED;
    if (!tpprof_device_hook_enter()) return real(p, n, flags);
    int r = real(p, n, flags);
    return tpprof_device_hook_leave(r, TPPROF_DEV_OP_ALLOC, TPPROF_DEV_KIND_PINNED_HOST, -1, r == 0 && p ? U(*p) : 0,
                                    n, "cuMemHostAlloc");
}

typedef int (*cuMemAllocHost_v2_fn)(void **, size_t);
TPPROF_EXPORT int cuMemAllocHost_v2(void **p, size_t n) {
    cuMemAllocHost_v2_fn real = REAL(cuMemAllocHost_v2);
    if (!real) return CUDA_ERROR_NOT_INITIALIZED;
    if (!tpprof_device_hook_enter()) return real(p, n);
    int r = real(p, n);
    return tpprof_device_hook_leave(r, TPPROF_DEV_OP_ALLOC, TPPROF_DEV_KIND_PINNED_HOST, -1, r == 0 && p ? U(*p) : 0,
                                    n, "cuMemAllocHost_v2");
}

typedef int (*cuMemFreeHost_fn)(void *);
TPPROF_EXPORT int cuMemFreeHost(void *p) {
    cuMemFreeHost_fn real = REAL(cuMemFreeHost);
    if (!real) return CUDA_ERROR_NOT_INITIALIZED;
    if (!p || !tpprof_device_hook_enter()) return real(p);
    int r = real(p);
    return tpprof_device_hook_leave(r, TPPROF_DEV_OP_FREE, TPPROF_DEV_KIND_PINNED_HOST, -1, U(p), 0, "cuMemFreeHost");
}

// ---------------------------------------------------------------------------
// Virtual memory management: reservations, physical handles and mappings
// are three things (a mapping is never counted as memory: its physical
// handle is).

typedef int (*cuMemAddressReserve_fn)(cu_ptr *, size_t, size_t, cu_ptr, unsigned long long);
TPPROF_EXPORT int cuMemAddressReserve(cu_ptr *p, size_t n, size_t align, cu_ptr addr, unsigned long long flags) {
    cuMemAddressReserve_fn real = REAL(cuMemAddressReserve);
    if (!real) return CUDA_ERROR_NOT_INITIALIZED;
    if (!tpprof_device_hook_enter()) return real(p, n, align, addr, flags);
    int r = real(p, n, align, addr, flags);
    return tpprof_device_hook_leave(r, TPPROF_DEV_OP_VA_RESERVE, TPPROF_DEV_KIND_VMM_RESERVE, -1,
                                    r == 0 && p ? *p : 0, n, "cuMemAddressReserve");
}

typedef int (*cuMemAddressFree_fn)(cu_ptr, size_t);
TPPROF_EXPORT int cuMemAddressFree(cu_ptr p, size_t n) {
    cuMemAddressFree_fn real = REAL(cuMemAddressFree);
    if (!real) return CUDA_ERROR_NOT_INITIALIZED;
    if (!tpprof_device_hook_enter()) return real(p, n);
    int r = real(p, n);
    return tpprof_device_hook_leave(r, TPPROF_DEV_OP_VA_FREE, TPPROF_DEV_KIND_VMM_RESERVE, -1, p, n,
                                    "cuMemAddressFree");
}

typedef int (*cuMemCreate_fn)(cu_ptr *, size_t, const void *, unsigned long long);
TPPROF_EXPORT int cuMemCreate(cu_ptr *h, size_t n, const void *prop, unsigned long long flags) {
    cuMemCreate_fn real = REAL(cuMemCreate);
    if (!real) return CUDA_ERROR_NOT_INITIALIZED;
    if (!tpprof_device_hook_enter()) return real(h, n, prop, flags);
    int r = real(h, n, prop, flags);
    return tpprof_device_hook_leave(r, TPPROF_DEV_OP_PHYS_CREATE, TPPROF_DEV_KIND_VMM_PHYSICAL, location_device(prop),
                                    r == 0 && h ? *h : 0, n, "cuMemCreate");
}

typedef int (*cuMemRelease_fn)(cu_ptr);
TPPROF_EXPORT int cuMemRelease(cu_ptr h) {
    cuMemRelease_fn real = REAL(cuMemRelease);
    if (!real) return CUDA_ERROR_NOT_INITIALIZED;
    if (!tpprof_device_hook_enter()) return real(h);
    int r = real(h);
    return tpprof_device_hook_leave(r, TPPROF_DEV_OP_PHYS_RELEASE, TPPROF_DEV_KIND_VMM_PHYSICAL, -1, h, 0,
                                    "cuMemRelease");
}

typedef int (*cuMemMap_fn)(cu_ptr, size_t, size_t, cu_ptr, unsigned long long);
TPPROF_EXPORT int cuMemMap(cu_ptr p, size_t n, size_t offset, cu_ptr h, unsigned long long flags) {
    cuMemMap_fn real = REAL(cuMemMap);
    if (!real) return CUDA_ERROR_NOT_INITIALIZED;
    if (!tpprof_device_hook_enter()) return real(p, n, offset, h, flags);
    int r = real(p, n, offset, h, flags);
    return tpprof_device_hook_leave(r, TPPROF_DEV_OP_MAP, TPPROF_DEV_KIND_VMM_MAPPING, -1, p, n, "cuMemMap");
}

typedef int (*cuMemUnmap_fn)(cu_ptr, size_t);
TPPROF_EXPORT int cuMemUnmap(cu_ptr p, size_t n) {
    cuMemUnmap_fn real = REAL(cuMemUnmap);
    if (!real) return CUDA_ERROR_NOT_INITIALIZED;
    if (!tpprof_device_hook_enter()) return real(p, n);
    int r = real(p, n);
    return tpprof_device_hook_leave(r, TPPROF_DEV_OP_UNMAP, TPPROF_DEV_KIND_VMM_MAPPING, -1, p, n, "cuMemUnmap");
}

// ---------------------------------------------------------------------------
// Pools and teardown.

typedef int (*cuMemPoolCreate_fn)(cu_handle *, const void *);
TPPROF_EXPORT int cuMemPoolCreate(cu_handle *pool, const void *props) {
    cuMemPoolCreate_fn real = REAL(cuMemPoolCreate);
    if (!real) return CUDA_ERROR_NOT_INITIALIZED;
    if (!tpprof_device_hook_enter()) return real(pool, props);
    int r = real(pool, props);
    return tpprof_device_hook_leave_pool(r, TPPROF_DEV_OP_POOL_CREATE, location_device(props), 0,
                                         r == 0 && pool ? U(*pool) : 0, 0, 0, "cuMemPoolCreate", UINT64_MAX);
}

typedef int (*cuMemPoolDestroy_fn)(cu_handle);
TPPROF_EXPORT int cuMemPoolDestroy(cu_handle pool) {
    cuMemPoolDestroy_fn real = REAL(cuMemPoolDestroy);
    if (!real) return CUDA_ERROR_NOT_INITIALIZED;
    if (!tpprof_device_hook_enter()) return real(pool);
    int r = real(pool);
    return tpprof_device_hook_leave_pool(r, TPPROF_DEV_OP_POOL_DESTROY, -1, 0, U(pool), 0, 0, "cuMemPoolDestroy",
                                         UINT64_MAX);
}

typedef int (*cuMemPoolTrimTo_fn)(cu_handle, size_t);
TPPROF_EXPORT int cuMemPoolTrimTo(cu_handle pool, size_t keep) {
    cuMemPoolTrimTo_fn real = REAL(cuMemPoolTrimTo);
    if (!real) return CUDA_ERROR_NOT_INITIALIZED;
    if (!tpprof_device_hook_enter()) return real(pool, keep);
    int r = real(pool, keep);
    int32_t dev = tpprof_cu_device();
    cu_handle q = pool;
    uint64_t reserved = r == 0 ? pool_reserved(&q, dev, 1) : UINT64_MAX;
    return tpprof_device_hook_leave_pool(r, TPPROF_DEV_OP_POOL_TRIM, dev, 0, U(pool), 0, keep, "cuMemPoolTrimTo",
                                         reserved);
}

// A context's device: the cached one if it is the current context, else
// the driver's cuCtxGetDevice_v2 where it has one.
static int32_t device_of_ctx(cu_handle ctx) {
    int32_t cur = tpprof_cu_device();
    if (ctx == cached_ctx) return cur;
    ctx_get_device_v2_fn g = (ctx_get_device_v2_fn)tpprof_cuaux_get(&ctx_get_device_v2, driver_fn);
    int d = -1;
    return g && g(&d, ctx) == 0 ? d : -1;
}

typedef int (*cuCtxDestroy_v2_fn)(cu_handle);
TPPROF_EXPORT int cuCtxDestroy_v2(cu_handle ctx) {
    cuCtxDestroy_v2_fn real = REAL(cuCtxDestroy_v2);
    if (!real) return CUDA_ERROR_NOT_INITIALIZED;
    if (!tpprof_device_hook_enter()) return real(ctx);
    int32_t dev = device_of_ctx(ctx);
    int r = real(ctx);
    if (ctx == cached_ctx) cached_ctx = NULL;
    return tpprof_device_hook_leave(r, TPPROF_DEV_OP_DEVICE_RESET, TPPROF_DEV_KIND_DEVICE, dev, 0, 0,
                                    "cuCtxDestroy_v2");
}

typedef int (*cuDevicePrimaryCtxReset_v2_fn)(int);
TPPROF_EXPORT int cuDevicePrimaryCtxReset_v2(int dev) {
    cuDevicePrimaryCtxReset_v2_fn real = REAL(cuDevicePrimaryCtxReset_v2);
    if (!real) return CUDA_ERROR_NOT_INITIALIZED;
    if (!tpprof_device_hook_enter()) return real(dev);
    int r = real(dev);
    cached_ctx = NULL;
    return tpprof_device_hook_leave(r, TPPROF_DEV_OP_DEVICE_RESET, TPPROF_DEV_KIND_DEVICE, dev, 0, 0,
                                    "cuDevicePrimaryCtxReset_v2");
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
