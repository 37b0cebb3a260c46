/*
 * samples/cuda/fragmentation.c - one allocation pattern, two CUDA
 * allocators: the caching allocator ("cuda_caching", segments carved into
 * blocks and kept) and the stream-ordered pool ("cuda_async",
 * cudaMallocAsync on the device's default pool).
 *
 * The workload interleaves long-lived small tensors with short-lived ones
 * of growing sizes, the pattern that strands free space inside segments:
 * each round allocates a batch of activations (1..8 MiB), keeps every
 * fourth one, frees the rest.  For each allocator it prints the peak bytes
 * in use, the peak reserved from the driver, and their ratio (reserved per
 * byte used); for the caching allocator also the inactive split bytes that
 * empty_cache cannot give back.
 *
 * Usage: fragmentation [device] [rounds].  Works against the runtime test
 * double too (no kernels: allocation only), where the pool figures are the
 * double's model, not a driver's.
 */
#include <stdio.h>
#include <stdlib.h>
#include "tensorplay/tensorplay.h"
#include "tensorplay/cuda.h"

#define MIB ((size_t)1 << 20)

typedef struct figures {
    double peak_used, peak_reserved;
    double stranded; /* caching: inactive split bytes at the end */
} figures;

static tp_storage *take(tp_allocator *a, size_t n) {
    tp_storage *s = tp_storage_new(n, a, false);
    if (!s) {
        fprintf(stderr, "fragmentation: %s\n", tp_last_error());
        exit(1);
    }
    return s;
}

/* The workload; returns how many storages it still holds in keep[]. */
static int workload(tp_allocator *a, int rounds, tp_storage **keep) {
    int nkeep = 0;
    unsigned seed = 12345;
    for (int r = 0; r < rounds; r++) {
        tp_storage *batch[16];
        for (int i = 0; i < 16; i++) {
            seed = seed * 1103515245u + 12345u;
            size_t n = MIB + (seed >> 8) % (7 * MIB) + (size_t)r * 4096; /* 1..8 MiB, drifting */
            batch[i] = take(a, n);
        }
        for (int i = 0; i < 16; i++) {
            if (i % 4 == 0) keep[nkeep++] = batch[i];
            else tp_storage_release(batch[i]);
        }
    }
    return nkeep;
}

int main(int argc, char **argv) {
    tp_device dev;
    if (tp_device_parse(argc > 1 ? argv[1] : "cuda:0", &dev) != TP_STATUS_OK) {
        fprintf(stderr, "fragmentation: %s\n", tp_last_error());
        return 2;
    }
    int rounds = argc > 2 ? atoi(argv[2]) : 24;
    if (rounds < 1 || rounds > 64) rounds = 24;
    int n = 0;
    if (tp_cuda_device_count(&n) != TP_STATUS_OK) {
        printf("SKIP: no CUDA device (%s)\n", tp_last_error());
        return 77;
    }
    if (tp_cuda_set_device(dev.index < 0 ? 0 : dev.index) != TP_STATUS_OK) {
        fprintf(stderr, "fragmentation: %s\n", tp_last_error());
        return 2;
    }
    tp_storage *keep[64 * 4];
    figures f[2] = {{0}};

    /* caching */
    tp_caching_allocator *ca = tp_cuda_caching_allocator_of(dev);
    tp_caching_allocator_reset_peak_stats(ca);
    int nk = workload(tp_cuda_caching_allocator(), rounds, keep);
    tp_caching_allocator_stats cs;
    tp_caching_allocator_get_stats(ca, &cs);
    f[0].peak_used = (double)cs.allocated_bytes.peak;
    f[0].peak_reserved = (double)cs.reserved_bytes.peak;
    f[0].stranded = (double)cs.inactive_split_bytes.current;
    for (int i = 0; i < nk; i++) tp_storage_release(keep[i]);
    tp_cuda_empty_cache();

    /* stream-ordered pool */
    tp_cuda_pool_stats before, after;
    tp_device_synchronize(dev);
    tp_cuda_async_pool_stats(dev, &before);
    nk = workload(tp_cuda_async_allocator(), rounds, keep);
    tp_cuda_async_pool_stats(dev, &after);
    f[1].peak_used = (double)after.used_peak;
    f[1].peak_reserved = (double)after.reserved_peak;
    for (int i = 0; i < nk; i++) tp_storage_release(keep[i]);
    tp_device_synchronize(dev);
    tp_cuda_empty_cache();

    printf("workload: %d rounds of 16 allocations of 1-8 MiB, every 4th kept (%d kept)\n", rounds, nk);
    printf("%-14s %14s %16s %10s %18s\n", "allocator", "peak used MiB", "peak reserved MiB",
           "reserved/used", "stranded MiB");
    const char *names[2] = {"cuda_caching", "cuda_async"};
    for (int i = 0; i < 2; i++) {
        char stranded[32] = "-";
        if (i == 0) snprintf(stranded, sizeof stranded, "%.1f", f[i].stranded / MIB);
        printf("%-14s %14.1f %16.1f %10.3f %18s\n", names[i], f[i].peak_used / MIB,
               f[i].peak_reserved / MIB, f[i].peak_used > 0 ? f[i].peak_reserved / f[i].peak_used : 0,
               stranded);
    }
    (void)before;
    return 0;
}
