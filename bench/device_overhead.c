// device_overhead.c: what tpprof's device capture adds to one device
// allocate+free pair, through each way a program reaches the driver, on
// the CUDA test doubles (tests/tpprof/cuda/fakes, TPFAKE_CU_FAST=1: no
// system call per allocation). Not a test; bench/device_overhead.sh runs
// it with and without the preload, interleaved, and prints the difference.
//
//   device_overhead PATH PAIRS   ->  "PATH ns_per_pair"
//     runtime  cudaMalloc/cudaFree of a dynamic libcudart (dlopen'ed and
//              dlsym'ed, as libtensorplay does; the runtime double calls
//              the driver through its own cuGetProcAddress table)
//     table    cuMemAlloc/cuMemFree from cuGetProcAddress_v2 (the static
//              runtime's and cuBLAS's way: a wrapped driver table)
//     driver   cuMemAlloc_v2/cuMemFree_v2 by name (a program linked with
//              -lcuda)
// The median of 9 blocks of PAIRS/9 pairs is printed, in wall time and in
// the calling thread's CPU time (what the hooks cost the program's thread:
// the writer's work, SQLite included, runs on its own thread, and on a
// loaded machine with few cores takes the program's wall time too).
//   -> "PATH wall_ns_per_pair thread_cpu_ns_per_pair"

#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef unsigned long long dptr;
static int (*rt_malloc)(void **, size_t), (*rt_free)(void *);
static int (*cu_alloc)(dptr *, size_t), (*cu_free)(dptr);

static uint64_t clock_ns(clockid_t c) {
    struct timespec ts;
    clock_gettime(c, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: device_overhead runtime|table|driver PAIRS\n");
        return 2;
    }
    const char *path = argv[1];
    long pairs = atol(argv[2]);
    if (pairs < 9) pairs = 9;
    int runtime = strcmp(path, "runtime") == 0;
    if (runtime) {
        void *h = dlopen("libcudart.so.13", RTLD_NOW | RTLD_LOCAL);
        if (!h) return fprintf(stderr, "no libcudart.so.13: %s\n", dlerror()), 1;
        *(void **)&rt_malloc = dlsym(h, "cudaMalloc");
        *(void **)&rt_free = dlsym(h, "cudaFree");
        if (!rt_malloc || !rt_free) return 1;
    } else {
        void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        if (!h) return fprintf(stderr, "no libcuda.so.1: %s\n", dlerror()), 1;
        if (strcmp(path, "table") == 0) {
            int (*gpa)(const char *, void **, int, unsigned long long, int *);
            *(void **)&gpa = dlsym(h, "cuGetProcAddress_v2");
            if (!gpa || gpa("cuMemAlloc", (void **)&cu_alloc, 3020, 0, NULL) ||
                gpa("cuMemFree", (void **)&cu_free, 3020, 0, NULL))
                return 1;
        } else if (strcmp(path, "driver") == 0) {
            *(void **)&cu_alloc = dlsym(h, "cuMemAlloc_v2");
            *(void **)&cu_free = dlsym(h, "cuMemFree_v2");
        } else {
            return fprintf(stderr, "unknown path %s\n", path), 2;
        }
        if (!cu_alloc || !cu_free) return 1;
        int (*init)(unsigned);
        *(void **)&init = dlsym(h, "cuInit");
        if (init) init(0);
    }
    double per[9], cpu[9];
    long block = pairs / 9;
    for (int b = 0; b < 9; b++) {
        uint64_t t0 = clock_ns(CLOCK_MONOTONIC), c0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
        for (long i = 0; i < block; i++) {
            if (runtime) {
                void *p;
                if (rt_malloc(&p, 4096) || rt_free(p)) return 1;
            } else {
                dptr p;
                if (cu_alloc(&p, 4096) || cu_free(p)) return 1;
            }
        }
        cpu[b] = (double)(clock_ns(CLOCK_THREAD_CPUTIME_ID) - c0) / (double)block;
        per[b] = (double)(clock_ns(CLOCK_MONOTONIC) - t0) / (double)block;
    }
    qsort(per, 9, sizeof per[0], cmp);
    qsort(cpu, 9, sizeof cpu[0], cmp);
    printf("%s %.1f %.1f\n", path, per[4], cpu[4]);
    return 0;
}
