// cuda_hooks.h: the CUDA entry points tpprof wraps, and where their real
// functions are kept (record/cuda_runtime.c, record/cuda_driver.c,
// record/procaddr.c).
//
// Each hooked entry point is an exported function of libtpprof.so with the
// entry point's own name (a program or library that links CUDA dynamically
// calls it), and the same function is what procaddr.c hands out, in place of
// the real one, from dlsym, dlvsym, cuGetProcAddress and
// cudaGetDriverEntryPoint(ByVersion) (how the static runtime and NVIDIA's
// libraries reach the driver). Its real function is kept in a slot: the
// first real pointer a lookup returned for that name, else (a direct call)
// the next definition after libtpprof.so (RTLD_NEXT). A slot never holds a
// pointer into libtpprof.so.
#ifndef TPPROF_RECORD_CUDA_HOOKS_H
#define TPPROF_RECORD_CUDA_HOOKS_H

#include <stdint.h>

#include "base/base.h"

struct tpprof_cuhook {
    const char *name;
    void *wrapper;
    _Atomic(void *) *real; // the slot
};

// The two tables (NULL name ends each).
TPPROF_HIDDEN extern const struct tpprof_cuhook tpprof_cuda_runtime_hooks[];
TPPROF_HIDDEN extern const struct tpprof_cuhook tpprof_cuda_driver_hooks[];

// The hook named `name`, or NULL.
TPPROF_HIDDEN const struct tpprof_cuhook *tpprof_cuhook_find(const char *name);
// What to hand out for `real`, the function a lookup found for hook h: h's
// wrapper (real kept in its slot), or real itself (NULL, a pointer into
// libtpprof.so, or a function other than the one the slot already holds).
TPPROF_HIDDEN void *tpprof_cuhook_wrap(const struct tpprof_cuhook *h, void *real);
// The real function of hook h: its slot, else the next definition after
// libtpprof.so; NULL when there is none (the hook then returns an error).
TPPROF_HIDDEN void *tpprof_cuhook_real(const struct tpprof_cuhook *h);
// Whether p points into libtpprof.so.
TPPROF_HIDDEN int tpprof_in_self(const void *p);

// The C library's dlsym and dlvsym (procaddr.c finds them in libc's own
// symbol table, since libtpprof.so defines both names).
TPPROF_HIDDEN void *tpprof_real_dlsym(void *handle, const char *name);

// A handle of the library the runtime's hooks were found in by a lookup
// (dlsym on a handle: libtensorplay opens libcudart RTLD_LOCAL), for the
// runtime's own queries (cudaGetDevice & co.); NULL: RTLD_NEXT.
TPPROF_HIDDEN extern _Atomic(void *) tpprof_cudart_handle;

// Wraps what a driver entry-point lookup returned in *pfn for base name
// `symbol` (cuGetProcAddress's naming: "cuMemAlloc", version 3020 gives
// cuMemAlloc_v2), requested version and flags (bit 1: per-thread default
// stream, which gives the _ptsz forms).
TPPROF_HIDDEN void tpprof_cu_wrap_entry(const char *symbol, void **pfn, int version, uint64_t flags);

// cudaGetDevice / the current context's device, for a record (-1 unknown).
TPPROF_HIDDEN int32_t tpprof_cudart_device(void);
TPPROF_HIDDEN int32_t tpprof_cu_device(void);

// ---------------------------------------------------------------------------
// What the hooks ask CUDA besides their real calls (the device, what a pool
// holds): functions not hooked, looked up when first needed, by the hook
// file's own lookup (the runtime's library, or the driver's
// cuGetProcAddress); a function not found is looked for three times at most.

struct tpprof_cuaux {
    const char *name;     // the runtime's name, or the driver's base name (cuGetProcAddress's)
    const char *exported; // the driver's exported symbol (unused by the runtime)
    int version;          // the driver's cuGetProcAddress version (unused by the runtime)
    _Atomic(void *) fn;
    _Atomic int tried;
};

// a's function, or NULL: the one found before, else what find(a) finds now.
static inline void *tpprof_cuaux_get(struct tpprof_cuaux *a, void *(*find)(const struct tpprof_cuaux *)) {
    void *p = atomic_load_explicit(&a->fn, memory_order_acquire);
    if (!p && atomic_load_explicit(&a->tried, memory_order_relaxed) < 3) {
        atomic_fetch_add(&a->tried, 1);
        p = find(a);
        atomic_store(&a->fn, p);
    }
    return p;
}

// cuDeviceGetDefaultMemPool / cudaDeviceGetDefaultMemPool and
// cuMemPoolGetAttribute / cudaMemPoolGetAttribute (the same signatures, the
// same attribute number).
typedef int (*tpprof_cu_default_pool_fn)(void **pool, int device);
typedef int (*tpprof_cu_pool_attr_fn)(void *pool, int attr, void *value);
#define TPPROF_CU_POOL_ATTR_RESERVED_MEM_CURRENT 5

// Whether a hook samples a pool now: at most once a millisecond per thread
// (*next_ns: the hook file's thread-local), always when `always` (after a
// trim). The timeline's reserved column is sampled, not exact.
static inline bool tpprof_cu_pool_sample_due(uint64_t *next_ns, int always) {
    uint64_t now = tpprof_now_ns();
    if (!always && now < *next_ns) return false;
    *next_ns = now + 1000000;
    return true;
}

// What pool *pool holds reserved (bytes), or UINT64_MAX. *pool NULL: the
// default pool of `device`, found and left in *pool. default_pool and
// pool_attr are the functions above, looked up (find) only when needed.
static inline uint64_t tpprof_cu_pool_reserved(void **pool, int32_t device, struct tpprof_cuaux *default_pool,
                                               struct tpprof_cuaux *pool_attr,
                                               void *(*find)(const struct tpprof_cuaux *)) {
    if (!*pool) {
        tpprof_cu_default_pool_fn dp = (tpprof_cu_default_pool_fn)tpprof_cuaux_get(default_pool, find);
        if (device < 0 || !dp || dp(pool, device) != 0) return UINT64_MAX;
    }
    tpprof_cu_pool_attr_fn pa = (tpprof_cu_pool_attr_fn)tpprof_cuaux_get(pool_attr, find);
    uint64_t v = 0;
    if (!pa || pa(*pool, TPPROF_CU_POOL_ATTR_RESERVED_MEM_CURRENT, &v) != 0) return UINT64_MAX;
    return v;
}

#endif
