/*
 * bench/tensor_overhead.c - a workload of small tensor ops, for measuring
 * what tpprof's tensor tracking costs on top of its host-only recording.
 *
 * Each iteration takes a narrow view of a small tensor, adds it to another
 * view, and releases both views and the result: per iteration 3 tensors and
 * 1 storage are created and freed, with their refcount changes (14
 * observer events, 5 of them refcount changes: the result adopts its new
 * storage's creation reference, so only the views retain) and 6 mallocs.  It prints the
 * iterations, the elapsed time, the CPU time of the whole process (every
 * thread: tpprof's writer included) and of the program's own thread over
 * the loop; on a machine shared with other work the CPU times vary far less
 * than the elapsed time, and the program thread's is what the tracking
 * costs the program where the writer has a core of its own.
 * bench/tensor_overhead.sh runs it native, under the preload
 * with TPPROF_TENSORS=0 (host only) and with tensors, and reports the cost
 * per event.  Built by meson, never run as a test.
 *
 * Usage: tensor_overhead [iterations] [elements] [block] (defaults 200000
 * 16): the two tensors have `elements` float32 elements, the views half of
 * them; 16 is the worst case for tpprof (nearly no work per op), larger
 * sizes show how the cost shrinks as the ops do real work.
 *
 * With `block` (under tpprof, tensors on), the one process measures both
 * sides: it runs the iterations in blocks of `block`, taking turns with the
 * observer attached (tensor tracking) and detached (tp_observer_set(NULL):
 * what TPPROF_TENSORS=0 gives, the malloc hooks still recording), the
 * program thread's CPU time per block, and prints the median of the
 * per-pair ratios. Blocks a millisecond apart see the same machine, where
 * separate runs on a shared machine differ by more than what is measured.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "tensorplay/observer.h"
#include "tensorplay/tensorplay.h"

static double now(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

// One iteration (see the top); false (the error said) if an op failed.
static bool iteration(tp_tensor *a, tp_tensor *b, long i, int64_t half) {
    tp_tensor *va = tp_tensor_narrow(a, 0, i % 8, half);
    tp_tensor *vb = tp_tensor_narrow(b, 0, 8 - i % 8, half);
    tp_tensor *c = va && vb ? tp_add(va, vb) : NULL;
    if (!c) {
        fprintf(stderr, "tensor_overhead: %s\n", tp_last_error());
        return false;
    }
    tp_tensor_release(c);
    tp_tensor_release(vb);
    tp_tensor_release(va);
    return true;
}

static int by_value(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

static double median(double *v, long n) {
    qsort(v, (size_t)n, sizeof *v, by_value);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// The interleaved measurement (`block`, see the top).
static int interleaved(tp_tensor *a, tp_tensor *b, long iters, int64_t half, long block) {
    const tp_observer *obs = tp_observer_get();
    if (!obs) {
        fprintf(stderr, "tensor_overhead: no observer attached (run it under tpprof, tensors on)\n");
        return 2;
    }
    long pairs = iters / (2 * block);
    if (pairs < 1) pairs = 1;
    double *on = malloc((size_t)pairs * sizeof *on), *off = malloc((size_t)pairs * sizeof *off),
           *ratio = malloc((size_t)pairs * sizeof *ratio);
    if (!on || !off || !ratio) return 1;
    long i = 0;
    for (long p = 0; p < pairs; p++) {
        for (int side = 0; side < 2; side++) {
            bool tracking = (side == 0) == (p % 2 == 0); // each side first in every other pair
            if (tp_observer_set(tracking ? obs : NULL) != 0) {
                fprintf(stderr, "tensor_overhead: %s\n", tp_last_error());
                return 1;
            }
            double t0 = now(CLOCK_THREAD_CPUTIME_ID);
            for (long k = 0; k < block; k++, i++)
                if (!iteration(a, b, i, half)) return 1;
            double dt = (now(CLOCK_THREAD_CPUTIME_ID) - t0) * 1e9 / (double)block;
            if (tracking) on[p] = dt;
            else off[p] = dt;
        }
        ratio[p] = on[p] / off[p];
    }
    tp_observer_set(obs);
    double r = median(ratio, pairs), h = median(off, pairs), t = median(on, pairs);
    printf("interleaved pairs=%ld block=%ld host_ns_per_iteration=%.1f tensors_ns_per_iteration=%.1f "
           "paired_ratio=%.4f\n",
           pairs, block, h, t, r);
    free(on), free(off), free(ratio);
    return 0;
}

int main(int argc, char **argv) {
    long iters = argc > 1 ? atol(argv[1]) : 200000;
    int64_t n = argc > 2 ? atol(argv[2]) : 16;
    long block = argc > 3 ? atol(argv[3]) : 0;
    if (iters < 1 || n < 16 || block < 0) {
        fprintf(stderr, "usage: tensor_overhead [iterations >= 1] [elements >= 16] [block >= 1]\n");
        return 2;
    }
    int64_t half = n / 2;
    tp_tensor *a = tp_ones(1, (int64_t[]){n}, TP_DTYPE_FLOAT32);
    tp_tensor *b = tp_ones(1, (int64_t[]){n}, TP_DTYPE_FLOAT32);
    if (!a || !b) {
        fprintf(stderr, "tensor_overhead: %s\n", tp_last_error());
        return 1;
    }
    if (block) {
        int rc = interleaved(a, b, iters, half, block);
        tp_tensor_release(a);
        tp_tensor_release(b);
        return rc;
    }
    double t0 = now(CLOCK_MONOTONIC), c0 = now(CLOCK_PROCESS_CPUTIME_ID), m0 = now(CLOCK_THREAD_CPUTIME_ID);
    for (long i = 0; i < iters; i++)
        if (!iteration(a, b, i, half)) return 1;
    double dt = now(CLOCK_MONOTONIC) - t0, dc = now(CLOCK_PROCESS_CPUTIME_ID) - c0,
           dm = now(CLOCK_THREAD_CPUTIME_ID) - m0;
    printf("iterations=%ld seconds=%.6f cpu_ns_per_iteration=%.1f main_cpu_ns_per_iteration=%.1f "
           "ns_per_iteration=%.1f\n",
           iters, dt, dc * 1e9 / (double)iters, dm * 1e9 / (double)iters, dt * 1e9 / (double)iters);
    tp_tensor_release(a);
    tp_tensor_release(b);
    return 0;
}
