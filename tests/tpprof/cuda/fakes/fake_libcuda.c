/*
 * fake_libcuda.c - a test double of the CUDA driver, built as libcuda.so.1
 * (the real SONAME; like the real one, no symbol versions), for tpprof's
 * device-capture tests on machines without a GPU.
 *
 * "Device" memory is anonymous memory mapped with the raw system call (so
 * the profiler under test sees no host mapping of the double's own), kept
 * in a table so that a free of a pointer it never gave out, or gave out and
 * took back, fails with CUDA_ERROR_INVALID_VALUE as the real driver's does,
 * instead of crashing. Every entry point the capture wraps is here, plus
 * what the runtime and the capture ask of a driver: cuInit,
 * cuDriverGetVersion, devices and contexts, the default pool and its
 * attributes, and cuGetProcAddress in both forms (base name + version +
 * per-thread-stream flag, as the real driver resolves them).
 *
 * Controls (environment): TPFAKE_CU_NODRIVER=1 makes every call fail with
 * CUDA_ERROR_NO_DEVICE (100), as a machine whose driver finds no GPU;
 * TPFAKE_CU_LIMIT=bytes (default 1 GiB) is the largest allocation that
 * succeeds (larger ones fail with CUDA_ERROR_OUT_OF_MEMORY, 2);
 * TPFAKE_CU_FAST=1 hands out addresses of memory that is never mapped
 * (no system call: bench/device_overhead times the capture, not mmap).
 *
 * CUDA's injection, as the real driver does it: the first successful
 * cuInit with CUDA_INJECTION64_PATH set dlopens that library and calls its
 * InitializeInjection (TPFAKE_CU_INIT_IN_ALLOC=1: the first cuMemAlloc_v2
 * does, as a runtime's lazy initialization inside the program's first
 * cudaMalloc would). And CUPTI's callbacks: a subscriber (the fake libcupti,
 * tests/tpprof/cupti/fake_cupti.c) registers with tpfake_cu_set_cupti, and
 * cuMemAlloc_v2 and cuMemFree_v2 then report their ENTER and EXIT to it (the
 * other entry points do not).
 * One mutex guards the table; nothing here is fast, except the
 * allocation/free pair the benchmark times (a few hash-free array scans
 * on a small table).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))
typedef unsigned long long dptr;
typedef int CUresult;

enum { OK = 0, INVALID_VALUE = 1, OUT_OF_MEMORY = 2, NOT_INITIALIZED = 3, NO_DEVICE = 100, NOT_FOUND = 500 };
enum { K_DEVICE, K_HOST, K_RESERVE };

#define MAXALLOC 4096
static struct {
    dptr p;
    size_t size;
    int kind, device;
} table[MAXALLOC];
static int ntable;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

struct fpool {
    int device;
    unsigned long long reserved, used;
};
static struct fpool default_pool[2] = {{0, 0, 0}, {1, 0, 0}};
struct fctx {
    int device;
};
static struct fctx primary[2] = {{0}, {1}};
static _Thread_local struct fctx *current = &primary[0];
static unsigned long long next_handle = 0x5000;

static int nodriver(void) {
    static int v = -1;
    if (v < 0) {
        const char *e = getenv("TPFAKE_CU_NODRIVER");
        v = e && *e == '1';
    }
    return v;
}

static size_t limit(void) {
    static size_t v;
    if (!v) {
        const char *e = getenv("TPFAKE_CU_LIMIT");
        v = e ? strtoull(e, NULL, 10) : (size_t)1 << 30;
    }
    return v;
}

static int fast(void) {
    static int v = -1;
    if (v < 0) {
        const char *e = getenv("TPFAKE_CU_FAST");
        v = e && *e == '1';
    }
    return v;
}
static uintptr_t fast_next = (uintptr_t)0x7e0000000000ull;

static CUresult get(size_t n, int kind, dptr *out) {
    if (nodriver()) return NO_DEVICE;
    if (!out) return INVALID_VALUE;
    if (n > limit()) return OUT_OF_MEMORY;
    void *p = fast() ? (void *)__atomic_fetch_add(&fast_next, (n + 4095) & ~(size_t)4095, __ATOMIC_RELAXED)
                     : (void *)syscall(SYS_mmap, NULL, n ? n : 1, kind == K_RESERVE ? PROT_NONE : PROT_READ | PROT_WRITE,
                              MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return OUT_OF_MEMORY;
    pthread_mutex_lock(&mu);
    int i = 0;
    while (i < ntable && table[i].p) i++;
    if (i == MAXALLOC) {
        pthread_mutex_unlock(&mu);
        if (!fast()) syscall(SYS_munmap, p, n ? n : 1);
        return OUT_OF_MEMORY;
    }
    if (i == ntable) ntable++;
    table[i].p = (dptr)(uintptr_t)p;
    table[i].size = n ? n : 1;
    table[i].kind = kind;
    table[i].device = current->device;
    pthread_mutex_unlock(&mu);
    *out = (dptr)(uintptr_t)p;
    return OK;
}

static CUresult put(dptr p, int kind) {
    if (nodriver()) return NO_DEVICE;
    pthread_mutex_lock(&mu);
    for (int i = 0; i < ntable; i++)
        if (table[i].p == p && table[i].kind == kind) {
            size_t n = table[i].size;
            table[i].p = 0;
            while (ntable > 0 && !table[ntable - 1].p) ntable--;
            pthread_mutex_unlock(&mu);
            if (!fast()) syscall(SYS_munmap, (void *)(uintptr_t)p, n);
            return OK;
        }
    pthread_mutex_unlock(&mu);
    return INVALID_VALUE;
}

static size_t size_of(dptr p) {
    size_t n = 0;
    pthread_mutex_lock(&mu);
    for (int i = 0; i < ntable; i++)
        if (table[i].p == p) n = table[i].size;
    pthread_mutex_unlock(&mu);
    return n;
}

// ---------------------------------------------------------------------------
// Injection and CUPTI.

// The subscriber's report: exit 0 (ENTER) or 1 (EXIT), the entry point, its
// output pointer (allocations), its pointer (frees), size, status.
typedef void (*cupti_report_fn)(int exit, const char *api, dptr *out, dptr ptr, size_t size, CUresult result);
static cupti_report_fn _Atomic cupti_report;
EXPORT void tpfake_cu_set_cupti(cupti_report_fn f) { cupti_report = f; }

static void inject_once(void) {
    const char *path = getenv("CUDA_INJECTION64_PATH");
    if (!path || !*path) return;
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    int (*init)(void) = h ? (int (*)(void))dlsym(h, "InitializeInjection") : NULL;
    if (init) init();
}
static pthread_once_t injected = PTHREAD_ONCE_INIT;

static int init_in_alloc(void) {
    static int v = -1;
    if (v < 0) {
        const char *e = getenv("TPFAKE_CU_INIT_IN_ALLOC");
        v = e && *e == '1';
    }
    return v;
}

// ---------------------------------------------------------------------------
// Driver, devices, contexts.

EXPORT CUresult cuInit(unsigned flags) {
    if (flags) return INVALID_VALUE;
    if (nodriver()) return NO_DEVICE;
    pthread_once(&injected, inject_once);
    return OK;
}
EXPORT CUresult cuDriverGetVersion(int *v) {
    if (!v) return INVALID_VALUE;
    *v = 13000;
    return OK;
}
EXPORT CUresult cuDeviceGetCount(int *n) {
    if (nodriver()) return NO_DEVICE;
    *n = 2;
    return OK;
}
EXPORT CUresult cuDeviceGet(int *d, int ordinal) {
    if (nodriver()) return NO_DEVICE;
    if (ordinal < 0 || ordinal > 1) return INVALID_VALUE;
    *d = ordinal;
    return OK;
}
EXPORT CUresult cuDevicePrimaryCtxRetain(void **ctx, int dev) {
    if (nodriver()) return NO_DEVICE;
    if (dev < 0 || dev > 1) return INVALID_VALUE;
    *ctx = &primary[dev];
    return OK;
}
EXPORT CUresult cuCtxGetCurrent(void **ctx) {
    if (nodriver()) return NO_DEVICE;
    *ctx = current;
    return OK;
}
EXPORT CUresult cuCtxSetCurrent(void *ctx) {
    if (nodriver()) return NO_DEVICE;
    current = ctx ? ctx : &primary[0];
    return OK;
}
EXPORT CUresult cuCtxGetDevice(int *d) {
    if (nodriver()) return NO_DEVICE;
    *d = current->device;
    return OK;
}
EXPORT CUresult cuCtxGetDevice_v2(int *d, void *ctx) {
    if (nodriver()) return NO_DEVICE;
    *d = ctx ? ((struct fctx *)ctx)->device : current->device;
    return OK;
}
// Both teardowns give back every allocation of the device (what a program
// that leaks through a reset expects of a real one, near enough).
static CUresult drop_device(int dev) {
    pthread_mutex_lock(&mu);
    for (int i = 0; i < ntable; i++)
        if (table[i].p && table[i].kind == K_DEVICE && table[i].device == dev) {
            if (!fast()) syscall(SYS_munmap, (void *)(uintptr_t)table[i].p, table[i].size);
            table[i].p = 0;
        }
    pthread_mutex_unlock(&mu);
    return OK;
}
EXPORT CUresult cuCtxDestroy_v2(void *ctx) {
    if (nodriver()) return NO_DEVICE;
    return ctx ? drop_device(((struct fctx *)ctx)->device) : INVALID_VALUE;
}
EXPORT CUresult cuDevicePrimaryCtxReset_v2(int dev) {
    if (nodriver()) return NO_DEVICE;
    return drop_device(dev);
}
EXPORT CUresult cuGetExportTable(const void **table_out, const void *uuid) {
    (void)table_out, (void)uuid;
    return NOT_FOUND;
}

// ---------------------------------------------------------------------------
// Memory.

EXPORT CUresult cuMemAlloc_v2(dptr *p, size_t n) {
    if (init_in_alloc()) pthread_once(&injected, inject_once);
    cupti_report_fn f = cupti_report;
    if (f) f(0, "cuMemAlloc_v2", p, 0, n, OK);
    CUresult r = get(n, K_DEVICE, p);
    if (f) f(1, "cuMemAlloc_v2", p, 0, n, r);
    return r;
}
EXPORT CUresult cuMemFree_v2(dptr p) {
    cupti_report_fn f = cupti_report;
    size_t n = f ? size_of(p) : 0;
    if (f) f(0, "cuMemFree_v2", NULL, p, n, OK);
    CUresult r = put(p, K_DEVICE);
    if (f) f(1, "cuMemFree_v2", NULL, p, n, r);
    return r;
}
EXPORT CUresult cuMemAllocManaged(dptr *p, size_t n, unsigned flags) {
    (void)flags;
    return get(n, K_DEVICE, p);
}
EXPORT CUresult cuMemAllocPitch_v2(dptr *p, size_t *pitch, size_t width, size_t height, unsigned elem) {
    (void)elem;
    if (!pitch) return INVALID_VALUE;
    size_t pw = (width + 511) & ~(size_t)511;
    CUresult r = get(pw * height, K_DEVICE, p);
    if (r == OK) *pitch = pw;
    return r;
}
EXPORT CUresult cuMemHostAlloc(void **p, size_t n, unsigned flags) {
    (void)flags;
    return get(n, K_HOST, (dptr *)p);
}
EXPORT CUresult cuMemAllocHost_v2(void **p, size_t n) { return get(n, K_HOST, (dptr *)p); }
EXPORT CUresult cuMemFreeHost(void *p) { return put((dptr)(uintptr_t)p, K_HOST); }

static struct fpool *pool_or_default(void *pool) { return pool ? pool : &default_pool[current->device]; }

static CUresult pool_get(dptr *p, size_t n, void *pool) {
    CUresult r = get(n, K_DEVICE, p);
    if (r == OK) {
        struct fpool *fp = pool_or_default(pool);
        fp->used += n;
        if (fp->reserved < fp->used) fp->reserved = fp->used;
    }
    return r;
}
static CUresult pool_put(dptr p) {
    size_t n = size_of(p);
    CUresult r = put(p, K_DEVICE);
    if (r == OK) pool_or_default(NULL)->used -= n < pool_or_default(NULL)->used ? n : pool_or_default(NULL)->used;
    return r;
}
EXPORT CUresult cuMemAllocAsync(dptr *p, size_t n, void *s) {
    (void)s;
    return pool_get(p, n, NULL);
}
EXPORT CUresult cuMemAllocAsync_ptsz(dptr *p, size_t n, void *s) {
    (void)s;
    return pool_get(p, n, NULL);
}
EXPORT CUresult cuMemFreeAsync(dptr p, void *s) {
    (void)s;
    return pool_put(p);
}
EXPORT CUresult cuMemFreeAsync_ptsz(dptr p, void *s) {
    (void)s;
    return pool_put(p);
}
EXPORT CUresult cuMemAllocFromPoolAsync(dptr *p, size_t n, void *pool, void *s) {
    (void)s;
    return nodriver() ? NO_DEVICE : pool ? pool_get(p, n, pool) : INVALID_VALUE;
}
EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(dptr *p, size_t n, void *pool, void *s) {
    (void)s;
    return nodriver() ? NO_DEVICE : pool ? pool_get(p, n, pool) : INVALID_VALUE;
}
EXPORT CUresult cuMemPoolCreate(void **pool, const int *props) {
    if (nodriver()) return NO_DEVICE;
    struct fpool *fp = calloc(1, sizeof *fp);
    if (!fp) return OUT_OF_MEMORY;
    fp->device = props ? props[3] : 0;
    *pool = fp;
    return OK;
}
EXPORT CUresult cuMemPoolDestroy(void *pool) {
    if (nodriver()) return NO_DEVICE;
    if (!pool || pool == &default_pool[0] || pool == &default_pool[1]) return INVALID_VALUE;
    free(pool);
    return OK;
}
EXPORT CUresult cuMemPoolTrimTo(void *pool, size_t keep) {
    if (nodriver()) return NO_DEVICE;
    struct fpool *fp = pool_or_default(pool);
    unsigned long long floor = fp->used > keep ? fp->used : keep;
    if (fp->reserved > floor) fp->reserved = floor;
    return OK;
}
EXPORT CUresult cuDeviceGetDefaultMemPool(void **pool, int dev) {
    if (nodriver()) return NO_DEVICE;
    if (dev < 0 || dev > 1) return INVALID_VALUE;
    *pool = &default_pool[dev];
    return OK;
}
EXPORT CUresult cuMemPoolGetAttribute(void *pool, int attr, void *v) {
    if (nodriver()) return NO_DEVICE;
    struct fpool *fp = pool_or_default(pool);
    if (attr == 5) *(unsigned long long *)v = fp->reserved;
    else if (attr == 7) *(unsigned long long *)v = fp->used;
    else return INVALID_VALUE;
    return OK;
}

// VMM: reservations are PROT_NONE mappings; physical handles and mappings
// are only counted (a handle is a number).
EXPORT CUresult cuMemAddressReserve(dptr *p, size_t n, size_t align, dptr addr, unsigned long long flags) {
    (void)align, (void)addr, (void)flags;
    return get(n, K_RESERVE, p);
}
EXPORT CUresult cuMemAddressFree(dptr p, size_t n) {
    (void)n;
    return put(p, K_RESERVE);
}
EXPORT CUresult cuMemCreate(unsigned long long *h, size_t n, const void *prop, unsigned long long flags) {
    (void)prop, (void)flags;
    if (nodriver()) return NO_DEVICE;
    if (!h || !n) return INVALID_VALUE;
    if (n > limit()) return OUT_OF_MEMORY;
    pthread_mutex_lock(&mu);
    *h = next_handle++;
    pthread_mutex_unlock(&mu);
    return OK;
}
EXPORT CUresult cuMemRelease(unsigned long long h) { return nodriver() ? NO_DEVICE : h >= 0x5000 ? OK : INVALID_VALUE; }
EXPORT CUresult cuMemMap(dptr p, size_t n, size_t off, unsigned long long h, unsigned long long flags) {
    (void)n, (void)off, (void)flags;
    return nodriver() ? NO_DEVICE : p && h >= 0x5000 ? OK : INVALID_VALUE;
}
EXPORT CUresult cuMemUnmap(dptr p, size_t n) {
    (void)n;
    return nodriver() ? NO_DEVICE : p ? OK : INVALID_VALUE;
}

// ---------------------------------------------------------------------------
// cuGetProcAddress: base name, version, per-thread-stream flag -> function.

EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, unsigned long long flags);
EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, unsigned long long flags,
                                    int *status);

static const struct {
    const char *base;
    int min_version;
    void *legacy, *ptsz;
} entries[] = {
    {"cuInit", 2000, (void *)cuInit, NULL},
    {"cuDriverGetVersion", 2020, (void *)cuDriverGetVersion, NULL},
    {"cuDeviceGetCount", 2000, (void *)cuDeviceGetCount, NULL},
    {"cuDeviceGet", 2000, (void *)cuDeviceGet, NULL},
    {"cuDevicePrimaryCtxRetain", 7000, (void *)cuDevicePrimaryCtxRetain, NULL},
    {"cuCtxGetCurrent", 4000, (void *)cuCtxGetCurrent, NULL},
    {"cuCtxSetCurrent", 4000, (void *)cuCtxSetCurrent, NULL},
    {"cuCtxGetDevice", 13000, (void *)cuCtxGetDevice_v2, NULL},
    {"cuCtxGetDevice", 2000, (void *)cuCtxGetDevice, NULL},
    {"cuCtxDestroy", 4000, (void *)cuCtxDestroy_v2, NULL},
    {"cuDevicePrimaryCtxReset", 11000, (void *)cuDevicePrimaryCtxReset_v2, NULL},
    {"cuGetExportTable", 3000, (void *)cuGetExportTable, NULL},
    {"cuMemAlloc", 3020, (void *)cuMemAlloc_v2, NULL},
    {"cuMemFree", 3020, (void *)cuMemFree_v2, NULL},
    {"cuMemAllocManaged", 6000, (void *)cuMemAllocManaged, NULL},
    {"cuMemAllocPitch", 3020, (void *)cuMemAllocPitch_v2, NULL},
    {"cuMemHostAlloc", 2020, (void *)cuMemHostAlloc, NULL},
    {"cuMemAllocHost", 3020, (void *)cuMemAllocHost_v2, NULL},
    {"cuMemFreeHost", 2000, (void *)cuMemFreeHost, NULL},
    {"cuMemAllocAsync", 11020, (void *)cuMemAllocAsync, (void *)cuMemAllocAsync_ptsz},
    {"cuMemFreeAsync", 11020, (void *)cuMemFreeAsync, (void *)cuMemFreeAsync_ptsz},
    {"cuMemAllocFromPoolAsync", 11020, (void *)cuMemAllocFromPoolAsync, (void *)cuMemAllocFromPoolAsync_ptsz},
    {"cuMemPoolCreate", 11020, (void *)cuMemPoolCreate, NULL},
    {"cuMemPoolDestroy", 11020, (void *)cuMemPoolDestroy, NULL},
    {"cuMemPoolTrimTo", 11020, (void *)cuMemPoolTrimTo, NULL},
    {"cuMemPoolGetAttribute", 11020, (void *)cuMemPoolGetAttribute, NULL},
    {"cuDeviceGetDefaultMemPool", 11020, (void *)cuDeviceGetDefaultMemPool, NULL},
    {"cuMemAddressReserve", 10020, (void *)cuMemAddressReserve, NULL},
    {"cuMemAddressFree", 10020, (void *)cuMemAddressFree, NULL},
    {"cuMemCreate", 10020, (void *)cuMemCreate, NULL},
    {"cuMemRelease", 10020, (void *)cuMemRelease, NULL},
    {"cuMemMap", 10020, (void *)cuMemMap, NULL},
    {"cuMemUnmap", 10020, (void *)cuMemUnmap, NULL},
    {"cuGetProcAddress", 12000, (void *)cuGetProcAddress_v2, NULL},
    {"cuGetProcAddress", 11030, (void *)cuGetProcAddress, NULL},
};

static CUresult lookup(const char *symbol, void **pfn, int version, unsigned long long flags, int *status) {
    if (status) *status = 1; // CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND
    if (!symbol || !pfn) return INVALID_VALUE;
    *pfn = NULL;
    int found_older = 0;
    for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++) {
        if (strcmp(entries[i].base, symbol) != 0) continue;
        if (version < entries[i].min_version) {
            found_older = 1;
            continue;
        }
        *pfn = (flags & 2) && entries[i].ptsz ? entries[i].ptsz : entries[i].legacy;
        if (status) *status = 0;
        return OK;
    }
    if (found_older && status) *status = 2; // VERSION_NOT_SUFFICIENT
    return NOT_FOUND;
}

CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, unsigned long long flags) {
    return lookup(symbol, pfn, version, flags, NULL);
}
CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, unsigned long long flags, int *status) {
    return lookup(symbol, pfn, version, flags, status);
}
