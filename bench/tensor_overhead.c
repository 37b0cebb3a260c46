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
 * Usage: tensor_overhead [iterations] [elements] (defaults 200000 16): the
 * two tensors have `elements` float32 elements, the views half of them; 16
 * is the worst case for tpprof (nearly no work per op), larger sizes show how
 * the cost shrinks as the ops do real work.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "tensorplay/tensorplay.h"

static double now(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    long iters = argc > 1 ? atol(argv[1]) : 200000;
    int64_t n = argc > 2 ? atol(argv[2]) : 16;
    if (iters < 1 || n < 16) {
        fprintf(stderr, "usage: tensor_overhead [iterations >= 1] [elements >= 16]\n");
        return 2;
    }
    int64_t half = n / 2;
    tp_tensor *a = tp_ones(1, (int64_t[]){n}, TP_DTYPE_FLOAT32);
    tp_tensor *b = tp_ones(1, (int64_t[]){n}, TP_DTYPE_FLOAT32);
    if (!a || !b) {
        fprintf(stderr, "tensor_overhead: %s\n", tp_last_error());
        return 1;
    }
    double t0 = now(CLOCK_MONOTONIC), c0 = now(CLOCK_PROCESS_CPUTIME_ID), m0 = now(CLOCK_THREAD_CPUTIME_ID);
    for (long i = 0; i < iters; i++) {
        tp_tensor *va = tp_tensor_narrow(a, 0, i % 8, half);
        tp_tensor *vb = tp_tensor_narrow(b, 0, 8 - i % 8, half);
        tp_tensor *c = va && vb ? tp_add(va, vb) : NULL;
        if (!c) {
            fprintf(stderr, "tensor_overhead: %s\n", tp_last_error());
            return 1;
        }
        tp_tensor_release(c);
        tp_tensor_release(vb);
        tp_tensor_release(va);
    }
    double dt = now(CLOCK_MONOTONIC) - t0, dc = now(CLOCK_PROCESS_CPUTIME_ID) - c0,
           dm = now(CLOCK_THREAD_CPUTIME_ID) - m0;
    printf("iterations=%ld seconds=%.6f cpu_ns_per_iteration=%.1f main_cpu_ns_per_iteration=%.1f "
           "ns_per_iteration=%.1f\n",
           iters, dt, dc * 1e9 / (double)iters, dm * 1e9 / (double)iters, dt * 1e9 / (double)iters);
    tp_tensor_release(a);
    tp_tensor_release(b);
    return 0;
}
