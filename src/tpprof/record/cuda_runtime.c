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
#define cudaMemPoolAttrReservedMemCurrent 5
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

static void *runtime_fn(const char *name) {
    void *h = atomic_load(&tpprof_cudart_handle);
    void *p = tpprof_real_dlsym(h ? h : RTLD_NEXT, name);
    return p && !tpprof_in_self(p) ? p : NULL;
}

#define RUNTIME_AUX(var, type, name)                                                                             \
    static _Atomic(void *) var##_p;                                                                              \
    static _Atomic int var##_tried;                                                                              \
    static type var(void) {                                                                                      \
        void *p = atomic_load_explicit(&var##_p, memory_order_acquire);                                          \
        if (!p && atomic_load_explicit(&var##_tried, memory_order_relaxed) < 3) {                                \
            atomic_fetch_add(&var##_tried, 1);                                                                   \
            p = runtime_fn(name);                                                                                \
            atomic_store(&var##_p, p);                                                                           \
        }                                                                                                        \
        return (type)p;                                                                                          \
    }

typedef int (*get_device_fn)(int *);
typedef int (*default_pool_fn)(rt_handle *, int);
typedef int (*pool_attr_fn)(rt_handle, int, void *);
RUNTIME_AUX(get_device, get_device_fn, "cudaGetDevice")
RUNTIME_AUX(default_pool, default_pool_fn, "cudaDeviceGetDefaultMemPool")
RUNTIME_AUX(pool_attr, pool_attr_fn, "cudaMemPoolGetAttribute")

int32_t tpprof_cudart_device(void) {
    get_device_fn g = get_device();
    int d = -1;
    return g && g(&d) == 0 ? d : -1;
}

static __thread uint64_t next_pool_sample_ns TPPROF_TLS;

// What the pool holds reserved, at most once a millisecond per thread
// (always after a trim), or UINT64_MAX.
static uint64_t pool_reserved(rt_handle *pool, int32_t dev, int always) {
    uint64_t now = tpprof_now_ns();
    if (!always && now < next_pool_sample_ns) return UINT64_MAX;
    next_pool_sample_ns = now + 1000000;
    if (!*pool) {
        default_pool_fn dp = default_pool();
        if (dev < 0 || !dp || dp(pool, dev) != 0) return UINT64_MAX;
    }
    pool_attr_fn pa = pool_attr();
    uint64_t v = 0;
    if (!pa || pa(*pool, cudaMemPoolAttrReservedMemCurrent, &v) != 0) return UINT64_MAX;
    return v;
}

// A simple allocation: the real call, the device, one record.
#define SIMPLE_ALLOC(call, kind, ptrexpr, size, api)                                                             \
    do {                                                                                                         \
        tpprof_device_depth++;                                                                                   \
        int r_ = call;                                                                                           \
        int32_t dev_ = (kind) == TPPROF_DEV_KIND_PINNED_HOST ? -1 : tpprof_cudart_device();                      \
        tpprof_device_depth--;                                                                                   \
        tpprof_device_record(TPPROF_DEV_OP_ALLOC, kind, dev_, 0, 0, r_ == 0 ? (ptrexpr) : 0, size, r_, api, 1); \
        return r_;                                                                                               \
    } while (0)

typedef int (*cudaMalloc_fn)(void **, size_t);
TPPROF_EXPORT int cudaMalloc(void **p, size_t n) {
    cudaMalloc_fn real = REAL(cudaMalloc);
    if (!real) return cudaErrorInitializationError;
    if (!tpprof_device_hook_records()) return real(p, n);
    SIMPLE_ALLOC(real(p, n), TPPROF_DEV_KIND_DEVICE, p ? U(*p) : 0, n, "cudaMalloc");
}

typedef int (*cudaFree_fn)(void *);
TPPROF_EXPORT int cudaFree(void *p) {
    cudaFree_fn real = REAL(cudaFree);
    if (!real) return cudaErrorInitializationError;
    // cudaFree(NULL) is how programs make the context: no free.
    if (!tpprof_device_hook_records() || !p) return real(p);
    tpprof_device_depth++;
    int r = real(p);
    int32_t dev = tpprof_cudart_device();
    tpprof_device_depth--;
    tpprof_device_record(TPPROF_DEV_OP_FREE, TPPROF_DEV_KIND_DEVICE, dev, 0, 0, U(p), 0, r, "cudaFree", 1);
    return r;
}

typedef int (*async_alloc_fn)(void **, size_t, rt_handle);
static int async_alloc(int id, const char *api, void **p, size_t n, rt_handle s) {
    async_alloc_fn real = (async_alloc_fn)tpprof_cuhook_real(&tpprof_cuda_runtime_hooks[id]);
    if (!real) return cudaErrorInitializationError;
    if (!tpprof_device_hook_records()) return real(p, n, s);
    tpprof_device_depth++;
    int r = real(p, n, s);
    int32_t dev = tpprof_cudart_device();
    rt_handle pool = NULL;
    uint64_t reserved = r == 0 ? pool_reserved(&pool, dev, 0) : UINT64_MAX;
    tpprof_device_depth--;
    tpprof_device_record_pool(TPPROF_DEV_OP_ALLOC, TPPROF_DEV_KIND_ASYNC, dev, U(s), U(pool),
                              r == 0 && p ? U(*p) : 0, n, r, api, 1, reserved);
    return r;
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
    if (!tpprof_device_hook_records() || !p) return real(p, s);
    tpprof_device_depth++;
    int r = real(p, s);
    int32_t dev = tpprof_cudart_device();
    rt_handle pool = NULL;
    uint64_t reserved = r == 0 ? pool_reserved(&pool, dev, 0) : UINT64_MAX;
    tpprof_device_depth--;
    tpprof_device_record_pool(TPPROF_DEV_OP_FREE, TPPROF_DEV_KIND_ASYNC, dev, U(s), U(pool), U(p), 0, r, api, 1,
                              reserved);
    return r;
}
TPPROF_EXPORT int cudaFreeAsync(void *p, rt_handle s) { return async_free(H_cudaFreeAsync, "cudaFreeAsync", p, s); }
TPPROF_EXPORT int cudaFreeAsync_ptsz(void *p, rt_handle s) {
    return async_free(H_cudaFreeAsync_ptsz, "cudaFreeAsync_ptsz", p, s);
}

typedef int (*pool_alloc_fn)(void **, size_t, rt_handle, rt_handle);
static int pool_alloc(int id, const char *api, void **p, size_t n, rt_handle pool, rt_handle s) {
    pool_alloc_fn real = (pool_alloc_fn)tpprof_cuhook_real(&tpprof_cuda_runtime_hooks[id]);
    if (!real) return cudaErrorInitializationError;
    if (!tpprof_device_hook_records()) return real(p, n, pool, s);
    tpprof_device_depth++;
    int r = real(p, n, pool, s);
    int32_t dev = tpprof_cudart_device();
    rt_handle q = pool;
    uint64_t reserved = r == 0 && pool ? pool_reserved(&q, dev, 0) : UINT64_MAX;
    tpprof_device_depth--;
    tpprof_device_record_pool(TPPROF_DEV_OP_ALLOC, TPPROF_DEV_KIND_ASYNC, dev, U(s), U(pool),
                              r == 0 && p ? U(*p) : 0, n, r, api, 1, reserved);
    return r;
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
    if (!tpprof_device_hook_records()) return real(p, n, flags);
    SIMPLE_ALLOC(real(p, n, flags), TPPROF_DEV_KIND_MANAGED, p ? U(*p) : 0, n, "cudaMallocManaged");
}

typedef int (*cudaMallocPitch_fn)(void **, size_t *, size_t, size_t);
TPPROF_EXPORT int cudaMallocPitch(void **p, size_t *pitch, size_t width, size_t height) {
    cudaMallocPitch_fn real = REAL(cudaMallocPitch);
    if (!real) return cudaErrorInitializationError;
    if (!tpprof_device_hook_records()) return real(p, pitch, width, height);
    SIMPLE_ALLOC(real(p, pitch, width, height), TPPROF_DEV_KIND_PITCH, p ? U(*p) : 0,
                 pitch && r_ == 0 ? *pitch * height : width * height, "cudaMallocPitch");
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
    if (!tpprof_device_hook_records()) return real(p, e);
    SIMPLE_ALLOC(real(p, e), TPPROF_DEV_KIND_PITCH, p ? U(p->ptr) : 0,
                 p && r_ == 0 ? p->pitch * e.height * e.depth : e.width * e.height * e.depth, "cudaMalloc3D");
}

typedef int (*cudaMallocHost_fn)(void **, size_t);
TPPROF_EXPORT int cudaMallocHost(void **p, size_t n) {
    cudaMallocHost_fn real = REAL(cudaMallocHost);
    if (!real) return cudaErrorInitializationError;
    if (!tpprof_device_hook_records()) return real(p, n);
    SIMPLE_ALLOC(real(p, n), TPPROF_DEV_KIND_PINNED_HOST, p ? U(*p) : 0, n, "cudaMallocHost");
}

typedef int (*cudaHostAlloc_fn)(void **, size_t, unsigned);
TPPROF_EXPORT int cudaHostAlloc(void **p, size_t n, unsigned flags) {
    cudaHostAlloc_fn real = REAL(cudaHostAlloc);
    if (!real) return cudaErrorInitializationError;
    if (!tpprof_device_hook_records()) return real(p, n, flags);
    SIMPLE_ALLOC(real(p, n, flags), TPPROF_DEV_KIND_PINNED_HOST, p ? U(*p) : 0, n, "cudaHostAlloc");
}

typedef int (*cudaFreeHost_fn)(void *);
TPPROF_EXPORT int cudaFreeHost(void *p) {
    cudaFreeHost_fn real = REAL(cudaFreeHost);
    if (!real) return cudaErrorInitializationError;
    if (!tpprof_device_hook_records() || !p) return real(p);
    tpprof_device_depth++;
    int r = real(p);
    tpprof_device_depth--;
    tpprof_device_record(TPPROF_DEV_OP_FREE, TPPROF_DEV_KIND_PINNED_HOST, -1, 0, 0, U(p), 0, r, "cudaFreeHost", 1);
    return r;
}

// ---------------------------------------------------------------------------
// Pools and reset.

typedef int (*cudaMemPoolCreate_fn)(rt_handle *, const void *);
TPPROF_EXPORT int cudaMemPoolCreate(rt_handle *pool, const void *props) {
    cudaMemPoolCreate_fn real = REAL(cudaMemPoolCreate);
    if (!real) return cudaErrorInitializationError;
    if (!tpprof_device_hook_records()) return real(pool, props);
    tpprof_device_depth++;
    int r = real(pool, props);
    tpprof_device_depth--;
    // cudaMemPoolProps: allocType, handleTypes, location {type, id}.
    const int *w = props;
    int32_t dev = w && w[2] == cudaMemLocationTypeDevice ? w[3] : -1;
    tpprof_device_record(TPPROF_DEV_OP_POOL_CREATE, TPPROF_DEV_KIND_ASYNC, dev, 0, r == 0 && pool ? U(*pool) : 0, 0,
                         0, r, "cudaMemPoolCreate", 1);
    return r;
}

typedef int (*cudaMemPoolDestroy_fn)(rt_handle);
TPPROF_EXPORT int cudaMemPoolDestroy(rt_handle pool) {
    cudaMemPoolDestroy_fn real = REAL(cudaMemPoolDestroy);
    if (!real) return cudaErrorInitializationError;
    if (!tpprof_device_hook_records()) return real(pool);
    tpprof_device_depth++;
    int r = real(pool);
    tpprof_device_depth--;
    tpprof_device_record(TPPROF_DEV_OP_POOL_DESTROY, TPPROF_DEV_KIND_ASYNC, -1, 0, U(pool), 0, 0, r,
                         "cudaMemPoolDestroy", 1);
    return r;
}

typedef int (*cudaMemPoolTrimTo_fn)(rt_handle, size_t);
TPPROF_EXPORT int cudaMemPoolTrimTo(rt_handle pool, size_t keep) {
    cudaMemPoolTrimTo_fn real = REAL(cudaMemPoolTrimTo);
    if (!real) return cudaErrorInitializationError;
    if (!tpprof_device_hook_records()) return real(pool, keep);
    tpprof_device_depth++;
    int r = real(pool, keep);
    int32_t dev = tpprof_cudart_device();
    rt_handle q = pool;
    uint64_t reserved = r == 0 ? pool_reserved(&q, dev, 1) : UINT64_MAX;
    tpprof_device_depth--;
    tpprof_device_record_pool(TPPROF_DEV_OP_POOL_TRIM, TPPROF_DEV_KIND_ASYNC, dev, 0, U(pool), 0, keep, r,
                              "cudaMemPoolTrimTo", 1, reserved);
    return r;
}

typedef int (*cudaDeviceReset_fn)(void);
TPPROF_EXPORT int cudaDeviceReset(void) {
    cudaDeviceReset_fn real = REAL(cudaDeviceReset);
    if (!real) return cudaErrorInitializationError;
    if (!tpprof_device_hook_records()) return real();
    tpprof_device_depth++;
    int32_t dev = tpprof_cudart_device();
    int r = real();
    tpprof_device_depth--;
    tpprof_device_record(TPPROF_DEV_OP_DEVICE_RESET, TPPROF_DEV_KIND_DEVICE, dev, 0, 0, 0, 0, r, "cudaDeviceReset", 1);
    return r;
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
