/*
 * fake_rt.c - a second test double of the CUDA runtime (libcudart.so.13,
 * the real SONAME and version node), for tpprof's device-capture tests: it
 * reaches the driver the way the real runtime does, by
 * dlopen("libcuda.so.1"), one dlsym of "cuGetProcAddress_v2" and then one
 * lookup per entry point by base name and version (with the per-thread
 * flag for the _ptsz forms), so a dynamic cudaMalloc here calls
 * cuMemAlloc_v2 through a pointer tpprof has wrapped: the capture must see
 * one allocation, not two. (tests/cuda/fake/fake_cudart.c, libtensorplay's
 * double, keeps its own memory model and never calls a driver.)
 * Run with fake_libcuda's directory on LD_LIBRARY_PATH.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))
typedef unsigned long long dptr;
typedef int (*gpa_fn)(const char *, void **, int, unsigned long long, int *);

enum { cudaSuccess = 0, cudaErrorInvalidValue = 1, cudaErrorMemoryAllocation = 2, cudaErrorInsufficientDriver = 35,
       cudaErrorNoDevice = 100 };

static struct {
    int (*init)(unsigned);
    int (*alloc)(dptr *, size_t), (*free_)(dptr);
    int (*alloc_async[2])(dptr *, size_t, void *), (*free_async[2])(dptr, void *);
    int (*alloc_pool[2])(dptr *, size_t, void *, void *);
    int (*managed)(dptr *, size_t, unsigned), (*pitch)(dptr *, size_t *, size_t, size_t, unsigned);
    int (*host_alloc)(void **, size_t, unsigned), (*free_host)(void *);
    int (*pool_create)(void **, const void *), (*pool_destroy)(void *), (*pool_trim)(void *, size_t);
    int (*pool_attr)(void *, int, void *), (*default_pool)(void **, int);
    int (*ctx_reset)(int);
    int (*ctx_retain)(void **, int), (*ctx_set)(void *);
} drv;
static gpa_fn gpa;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static int init_status = cudaErrorInsufficientDriver;
static _Thread_local int current_device;

static void load(void) {
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) return;
    gpa = (gpa_fn)dlsym(h, "cuGetProcAddress_v2");
    if (!gpa) return;
    int st;
#define G(field, name, ver, flags) gpa(name, (void **)&drv.field, ver, flags, &st)
    G(init, "cuInit", 2000, 0);
    G(alloc, "cuMemAlloc", 3020, 0);
    G(free_, "cuMemFree", 3020, 0);
    G(alloc_async[0], "cuMemAllocAsync", 11020, 0);
    G(alloc_async[1], "cuMemAllocAsync", 11020, 2);
    G(free_async[0], "cuMemFreeAsync", 11020, 0);
    G(free_async[1], "cuMemFreeAsync", 11020, 2);
    G(alloc_pool[0], "cuMemAllocFromPoolAsync", 11020, 0);
    G(alloc_pool[1], "cuMemAllocFromPoolAsync", 11020, 2);
    G(managed, "cuMemAllocManaged", 6000, 0);
    G(pitch, "cuMemAllocPitch", 3020, 0);
    G(host_alloc, "cuMemHostAlloc", 2020, 0);
    G(free_host, "cuMemFreeHost", 2000, 0);
    G(pool_create, "cuMemPoolCreate", 11020, 0);
    G(pool_destroy, "cuMemPoolDestroy", 11020, 0);
    G(pool_trim, "cuMemPoolTrimTo", 11020, 0);
    G(pool_attr, "cuMemPoolGetAttribute", 11020, 0);
    G(default_pool, "cuDeviceGetDefaultMemPool", 11020, 0);
    G(ctx_reset, "cuDevicePrimaryCtxReset", 11000, 0);
    G(ctx_retain, "cuDevicePrimaryCtxRetain", 7000, 0);
    G(ctx_set, "cuCtxSetCurrent", 4000, 0);
#undef G
    if (!drv.init || !drv.alloc) return;
    int r = drv.init(0);
    init_status = r == 0 ? cudaSuccess : r == 100 ? cudaErrorNoDevice : cudaErrorInsufficientDriver;
}

static int ready(void) {
    pthread_once(&once, load);
    return init_status;
}

// Driver statuses map onto the runtime's as the real one's do for these.
static int rt(int r) { return r == 0 ? cudaSuccess : r == 2 ? cudaErrorMemoryAllocation : r == 100 ? cudaErrorNoDevice : cudaErrorInvalidValue; }

#define READY() do { int s_ = ready(); if (s_) return s_; } while (0)

EXPORT int cudaGetDeviceCount(int *n) { READY(); *n = 2; return cudaSuccess; }
EXPORT int cudaGetDevice(int *d) { READY(); *d = current_device; return cudaSuccess; }
EXPORT int cudaSetDevice(int d) {
    READY();
    void *ctx = NULL;
    if (d < 0 || d > 1 || drv.ctx_retain(&ctx, d) != 0 || drv.ctx_set(ctx) != 0) return cudaErrorInvalidValue;
    current_device = d;
    return cudaSuccess;
}
EXPORT int cudaDeviceSynchronize(void) { return ready(); }
EXPORT int cudaGetLastError(void) { return cudaSuccess; }
EXPORT const char *cudaGetErrorString(int e) { return e ? "error" : "no error"; }
EXPORT int cudaStreamCreate(void **s) { static char streams[16]; static int n; READY(); *s = &streams[n++ & 15]; return cudaSuccess; }
EXPORT int cudaMalloc(void **p, size_t n) { READY(); return rt(drv.alloc((dptr *)p, n)); }
EXPORT int cudaFree(void *p) { READY(); return p ? rt(drv.free_((dptr)(uintptr_t)p)) : cudaSuccess; }
EXPORT int cudaMallocAsync(void **p, size_t n, void *s) { READY(); return rt(drv.alloc_async[0]((dptr *)p, n, s)); }
EXPORT int cudaMallocAsync_ptsz(void **p, size_t n, void *s) { READY(); return rt(drv.alloc_async[1]((dptr *)p, n, s)); }
EXPORT int cudaFreeAsync(void *p, void *s) { READY(); return rt(drv.free_async[0]((dptr)(uintptr_t)p, s)); }
EXPORT int cudaFreeAsync_ptsz(void *p, void *s) { READY(); return rt(drv.free_async[1]((dptr)(uintptr_t)p, s)); }
EXPORT int cudaMallocFromPoolAsync(void **p, size_t n, void *pool, void *s) { READY(); return rt(drv.alloc_pool[0]((dptr *)p, n, pool, s)); }
EXPORT int cudaMallocFromPoolAsync_ptsz(void **p, size_t n, void *pool, void *s) { READY(); return rt(drv.alloc_pool[1]((dptr *)p, n, pool, s)); }
EXPORT int cudaMallocManaged(void **p, size_t n, unsigned flags) { READY(); return rt(drv.managed((dptr *)p, n, flags)); }
EXPORT int cudaMallocPitch(void **p, size_t *pitch, size_t w, size_t h) { READY(); return rt(drv.pitch((dptr *)p, pitch, w, h, 4)); }
struct pitched { void *ptr; size_t pitch, xsize, ysize; };
struct extent { size_t width, height, depth; };
EXPORT int cudaMalloc3D(struct pitched *p, struct extent e) {
    READY();
    size_t pitch = 0;
    int r = drv.pitch((dptr *)&p->ptr, &pitch, e.width, e.height * e.depth, 4);
    if (r == 0) p->pitch = pitch, p->xsize = e.width, p->ysize = e.height;
    return rt(r);
}
EXPORT int cudaMallocHost(void **p, size_t n) { READY(); return rt(drv.host_alloc(p, n, 0)); }
EXPORT int cudaHostAlloc(void **p, size_t n, unsigned flags) { READY(); return rt(drv.host_alloc(p, n, flags)); }
EXPORT int cudaFreeHost(void *p) { READY(); return rt(drv.free_host(p)); }
EXPORT int cudaMemPoolCreate(void **pool, const void *props) { READY(); return rt(drv.pool_create(pool, props)); }
EXPORT int cudaMemPoolDestroy(void *pool) { READY(); return rt(drv.pool_destroy(pool)); }
EXPORT int cudaMemPoolTrimTo(void *pool, size_t keep) { READY(); return rt(drv.pool_trim(pool, keep)); }
EXPORT int cudaMemPoolGetAttribute(void *pool, int attr, void *v) { READY(); return rt(drv.pool_attr(pool, attr, v)); }
EXPORT int cudaDeviceGetDefaultMemPool(void **pool, int dev) { READY(); return rt(drv.default_pool(pool, dev)); }
EXPORT int cudaDeviceReset(void) { READY(); return rt(drv.ctx_reset(current_device)); }
EXPORT int cudaGetDriverEntryPointByVersion(const char *sym, void **fn, unsigned ver, unsigned long long flags, int *status) {
    READY();
    return rt(gpa(sym, fn, (int)ver, flags, status));
}
EXPORT int cudaGetDriverEntryPoint(const char *sym, void **fn, unsigned long long flags, int *status) {
    READY();
    return rt(gpa(sym, fn, 13000, flags, status));
}
// The per-thread-stream builds' names (--default-stream per-thread).
EXPORT int cudaGetDriverEntryPointByVersion_ptsz(const char *sym, void **fn, unsigned ver, unsigned long long flags,
                                                 int *status) {
    return cudaGetDriverEntryPointByVersion(sym, fn, ver, flags | 2, status);
}
EXPORT int cudaGetDriverEntryPoint_ptsz(const char *sym, void **fn, unsigned long long flags, int *status) {
    return cudaGetDriverEntryPoint(sym, fn, flags | 2, status);
}

// What nvcc's host code calls at start and exit (no kernels run here).
EXPORT void **__cudaRegisterFatBinary(void *fatbin) { static void *handle[4]; (void)fatbin; return handle; }
EXPORT void __cudaRegisterFatBinaryEnd(void **h) { (void)h; }
EXPORT void __cudaUnregisterFatBinary(void **h) { (void)h; }
EXPORT void __cudaRegisterFunction(void **h, const char *f, char *d, const char *n, int t, void *a, void *b, void *c, void *e, int *s) {
    (void)h, (void)f, (void)d, (void)n, (void)t, (void)a, (void)b, (void)c, (void)e, (void)s;
}
EXPORT char __cudaInitModule(void **h) { (void)h; return 0; }
EXPORT unsigned __cudaPushCallConfiguration(void *g, void *b, size_t shm, void *s) { (void)g, (void)b, (void)shm, (void)s; return 0; }
EXPORT int __cudaPopCallConfiguration(void *g, void *b, size_t *shm, void *s) { (void)g, (void)b, (void)shm, (void)s; return 0; }
