// drv_app.c: a driver-API program for tpprof's device-capture tests, in the
// two ways programs reach the driver:
//   drv_app gpa     - as cuBLAS does: dlopen("libcuda.so.1"), dlsym
//                     "cuGetProcAddress_v2", then every entry point by base
//                     name and version (the per-thread-stream flag for the
//                     _ptsz forms; cuGetProcAddress itself at 11030 for the
//                     4-argument form, which resolves cuMemAllocManaged)
//   drv_app direct  - linked against libcuda.so.1, calling cuMem*_v2 by name
// Each step is a function of its own (the stack a test expects); every
// status is printed, so a run under tpprof must print the same as one
// without. The steps: a 1 MiB allocation freed elsewhere, a 3 MiB leak,
// stream-ordered allocations on two streams (legacy and per-thread forms),
// managed and pitched memory, pinned host memory, a VMM
// reserve/create/map/unmap/release/free, a pool, a 4 GiB allocation that
// runs out of memory, a double free, a free of a pointer never given out,
// a free of a host pointer, and blocks made on one thread freed on another.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef unsigned long long dptr;
typedef int (*gpa_v2_fn)(const char *, void **, int, unsigned long long, int *);
typedef int (*gpa_v1_fn)(const char *, void **, int, unsigned long long);

static int (*mem_alloc)(dptr *, size_t);
static int (*mem_free)(dptr);
static int (*alloc_async)(dptr *, size_t, void *);
static int (*alloc_async_ptsz)(dptr *, size_t, void *);
static int (*free_async)(dptr, void *);
static int (*free_async_ptsz)(dptr, void *);
static int (*alloc_managed)(dptr *, size_t, unsigned);
static int (*alloc_pitch)(dptr *, size_t *, size_t, size_t, unsigned);
static int (*host_alloc)(void **, size_t, unsigned);
static int (*free_host)(void *);
static int (*addr_reserve)(dptr *, size_t, size_t, dptr, unsigned long long);
static int (*addr_free)(dptr, size_t);
static int (*mem_create)(unsigned long long *, size_t, const void *, unsigned long long);
static int (*mem_release)(unsigned long long);
static int (*mem_map)(dptr, size_t, size_t, unsigned long long, unsigned long long);
static int (*mem_unmap)(dptr, size_t);
static int (*pool_create)(void **, const void *);
static int (*pool_destroy)(void *);
static int (*pool_trim)(void *, size_t);
static int (*alloc_from_pool)(dptr *, size_t, void *, void *);
static int (*cu_init)(unsigned);

static int resolve_gpa(void) {
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        printf("no libcuda.so.1: %s\n", dlerror());
        return 1;
    }
    gpa_v2_fn gpa = (gpa_v2_fn)dlsym(h, "cuGetProcAddress_v2");
    if (!gpa) return 1;
    int st;
#define GET(var, name, ver, flags) printf("gpa %s %d %d: %d\n", name, ver, flags, gpa(name, (void **)&var, ver, flags, &st))
    GET(cu_init, "cuInit", 2000, 0);
    GET(mem_alloc, "cuMemAlloc", 3020, 0);
    GET(mem_free, "cuMemFree", 3020, 0);
    GET(alloc_async, "cuMemAllocAsync", 11020, 0);
    GET(alloc_async_ptsz, "cuMemAllocAsync", 11020, 2);
    GET(free_async, "cuMemFreeAsync", 11020, 0);
    GET(free_async_ptsz, "cuMemFreeAsync", 11020, 2);
    GET(alloc_pitch, "cuMemAllocPitch", 3020, 0);
    GET(host_alloc, "cuMemHostAlloc", 2020, 0);
    GET(free_host, "cuMemFreeHost", 2000, 0);
    GET(addr_reserve, "cuMemAddressReserve", 10020, 0);
    GET(addr_free, "cuMemAddressFree", 10020, 0);
    GET(mem_create, "cuMemCreate", 10020, 0);
    GET(mem_release, "cuMemRelease", 10020, 0);
    GET(mem_map, "cuMemMap", 10020, 0);
    GET(mem_unmap, "cuMemUnmap", 10020, 0);
    GET(pool_create, "cuMemPoolCreate", 11020, 0);
    GET(pool_destroy, "cuMemPoolDestroy", 11020, 0);
    GET(pool_trim, "cuMemPoolTrimTo", 11020, 0);
    GET(alloc_from_pool, "cuMemAllocFromPoolAsync", 11020, 0);
    // The 4-argument form, as the static runtime asks for it, resolving
    // one more entry point.
    gpa_v1_fn gpa4 = NULL;
    GET(gpa4, "cuGetProcAddress", 11030, 0);
    if (!gpa4) return 1;
    printf("gpa4 cuMemAllocManaged: %d\n", gpa4("cuMemAllocManaged", (void **)&alloc_managed, 6000, 0));
#undef GET
    return 0;
}

// The direct path: the exported names, bound at link time.
int cuInit(unsigned);
int cuMemAlloc_v2(dptr *, size_t);
int cuMemFree_v2(dptr);
int cuMemAllocAsync(dptr *, size_t, void *);
int cuMemAllocAsync_ptsz(dptr *, size_t, void *);
int cuMemFreeAsync(dptr, void *);
int cuMemFreeAsync_ptsz(dptr, void *);
int cuMemAllocManaged(dptr *, size_t, unsigned);
int cuMemAllocPitch_v2(dptr *, size_t *, size_t, size_t, unsigned);
int cuMemHostAlloc(void **, size_t, unsigned);
int cuMemFreeHost(void *);
int cuMemAddressReserve(dptr *, size_t, size_t, dptr, unsigned long long);
int cuMemAddressFree(dptr, size_t);
int cuMemCreate(unsigned long long *, size_t, const void *, unsigned long long);
int cuMemRelease(unsigned long long);
int cuMemMap(dptr, size_t, size_t, unsigned long long, unsigned long long);
int cuMemUnmap(dptr, size_t);
int cuMemPoolCreate(void **, const void *);
int cuMemPoolDestroy(void *);
int cuMemPoolTrimTo(void *, size_t);
int cuMemAllocFromPoolAsync(dptr *, size_t, void *, void *);

static void resolve_direct(void) {
    cu_init = cuInit;
    mem_alloc = cuMemAlloc_v2;
    mem_free = cuMemFree_v2;
    alloc_async = cuMemAllocAsync;
    alloc_async_ptsz = cuMemAllocAsync_ptsz;
    free_async = cuMemFreeAsync;
    free_async_ptsz = cuMemFreeAsync_ptsz;
    alloc_managed = cuMemAllocManaged;
    alloc_pitch = cuMemAllocPitch_v2;
    host_alloc = cuMemHostAlloc;
    free_host = cuMemFreeHost;
    addr_reserve = cuMemAddressReserve;
    addr_free = cuMemAddressFree;
    mem_create = cuMemCreate;
    mem_release = cuMemRelease;
    mem_map = cuMemMap;
    mem_unmap = cuMemUnmap;
    pool_create = cuMemPoolCreate;
    pool_destroy = cuMemPoolDestroy;
    pool_trim = cuMemPoolTrimTo;
    alloc_from_pool = cuMemAllocFromPoolAsync;
}

// ---------------------------------------------------------------------------
// The steps (noinline: each is a frame the test looks for).

#define STEP __attribute__((noinline)) static
static dptr weights;

STEP void weights_alloc(void) { printf("weights_alloc: %d\n", mem_alloc(&weights, 1 << 20)); }
STEP void weights_free(void) { printf("weights_free: %d\n", mem_free(weights)); }
STEP void leak_buffer(void) {
    dptr p = 0;
    printf("leak_buffer: %d\n", mem_alloc(&p, 3 << 20));
}
STEP void two_streams(void) {
    dptr a = 0, b = 0;
    void *s1 = (void *)0x11, *s2 = (void *)0x22;
    printf("async a: %d\n", alloc_async(&a, 64 << 10, s1));
    printf("async b: %d\n", alloc_async_ptsz(&b, 128 << 10, s2));
    printf("free a: %d\n", free_async(a, s1));
    printf("free b: %d\n", free_async_ptsz(b, s2));
}
STEP void managed_and_pitch(void) {
    dptr m = 0, p = 0;
    size_t pitch = 0;
    printf("managed: %d\n", alloc_managed(&m, 256 << 10, 1));
    printf("pitch: %d %zu\n", alloc_pitch(&p, &pitch, 1000, 10, 4), pitch);
    printf("free managed: %d\n", mem_free(m));
    printf("free pitch: %d\n", mem_free(p));
}
STEP void pinned(void) {
    void *h = NULL;
    printf("pinned: %d\n", host_alloc(&h, 8 << 10, 0));
    printf("free pinned: %d\n", free_host(h));
}
STEP void vmm(void) {
    dptr va = 0;
    unsigned long long h = 0;
    int prop[8] = {1, 0, 1, 1, 0, 0, 0, 0}; // pinned type, no handle types, location device 1
    printf("reserve: %d\n", addr_reserve(&va, 2 << 20, 0, 0, 0));
    printf("create: %d\n", mem_create(&h, 2 << 20, prop, 0));
    printf("map: %d\n", mem_map(va, 2 << 20, 0, h, 0));
    printf("unmap: %d\n", mem_unmap(va, 2 << 20));
    printf("release: %d\n", mem_release(h));
    printf("address free: %d\n", addr_free(va, 2 << 20));
}
STEP void pool(void) {
    void *pl = NULL;
    int props[8] = {1, 0, 1, 0, 0, 0, 0, 0};
    dptr p = 0;
    printf("pool create: %d\n", pool_create(&pl, props));
    printf("pool alloc: %d\n", alloc_from_pool(&p, 32 << 10, pl, (void *)0x11));
    printf("pool free: %d\n", free_async(p, (void *)0x11));
    printf("pool trim: %d\n", pool_trim(pl, 0));
    printf("pool destroy: %d\n", pool_destroy(pl));
}
STEP void oom(void) {
    dptr p = 0;
    printf("oom: %d\n", mem_alloc(&p, (size_t)4 << 30));
}
STEP void bad_frees(void) {
    dptr p = 0;
    printf("small: %d\n", mem_alloc(&p, 4096));
    printf("free once: %d\n", mem_free(p));
    printf("free twice: %d\n", mem_free(p));
    printf("free unknown: %d\n", mem_free(0xdead0000ull));
    void *host = malloc(100);
    printf("free host: %d\n", mem_free((dptr)(unsigned long)host));
    free(host);
}

static void *cross_thread_alloc(void *arg) {
    dptr *blocks = arg;
    int bad = 0;
    for (int i = 0; i < 8; i++) bad += mem_alloc(&blocks[i], 64 << 10) != 0;
    return bad ? (void *)1 : NULL;
}
STEP void cross_thread(void) {
    dptr blocks[8] = {0};
    pthread_t t;
    void *bad = (void *)1;
    if (pthread_create(&t, NULL, cross_thread_alloc, blocks) == 0) pthread_join(t, &bad);
    int freed = 0;
    for (int i = 0; i < 8; i++) freed += mem_free(blocks[i]) == 0;
    printf("cross thread: %s, %d freed here\n", bad ? "failed" : "allocated there", freed);
}

// 3000 allocations at one site, each freed but the last (aggregate mode
// writes a row for the first 1024 and the leak; device_sites counts all).
STEP void loop_pairs(void) {
    int ok = 0;
    for (int i = 0; i < 3000; i++) {
        dptr p;
        if (mem_alloc(&p, 4096) == 0) ok += i == 2999 || mem_free(p) == 0;
    }
    printf("loop: %d pairs\n", ok);
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "gpa";
    // A program probing for the runtime: none is loaded, whatever libtpprof.so defines.
    printf("cudaMalloc probe: %s\n", dlsym(RTLD_DEFAULT, "cudaMalloc") ? "found" : "absent");
    if (strcmp(mode, "direct") == 0 || strcmp(mode, "loop") == 0) resolve_direct();
    else if (resolve_gpa() != 0) return 2;
    printf("init: %d\n", cu_init(0));
    if (strcmp(mode, "loop") == 0) {
        loop_pairs();
        weights_alloc();
        leak_buffer();
        weights_free();
        return 0;
    }
    weights_alloc();
    leak_buffer();
    weights_free();
    two_streams();
    managed_and_pitch();
    pinned();
    vmm();
    pool();
    oom();
    bad_frees();
    cross_thread();
    puts("drv_app done");
    return 0;
}
