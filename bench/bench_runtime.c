/*
 * bench/bench_runtime.c - what the runtime costs next to the bare metal.
 *
 *   1. 1024x1024 float32 matmul: tp_matmul vs cblas_sgemm called directly
 *      (median of N interleaved runs; tp_matmul also allocates its 4 MiB
 *      result), and tp_matmul(a, b.t()) vs a direct CblasTrans call, which
 *      is what a transposed view should turn into (no copy);
 *   2. add of 16 Mi floats (tp_add with a fresh result, tp_add_ in place)
 *      vs memcpy of the same 64 MiB (into a warm buffer, and into a fresh
 *      malloc, which pays the same first-touch page faults as a new
 *      result), as GB/s of bytes read + written;
 *   3. per-op overhead of tiny (4-element) ops, in ns.
 *
 * Usage: bench_runtime [runs] [threads]   (defaults: 11, all CPUs)
 * It prints a table; it is built by meson but never run as a test.  It does
 * not check results beyond a sanity check that both matmuls agree.
 */
#define _POSIX_C_SOURCE 200809L
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "tensorplay/tensorplay.h"

// ----------------------------------------------------------------------------
// timing

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Called through a volatile pointer so the compiler cannot drop a copy into
 * memory that is freed right after. */
static void *(*volatile copy_fn)(void *, const void *, size_t) = memcpy;

static void die(const char *what) {
    fprintf(stderr, "bench_runtime: %s failed: %s\n", what, tp_last_error());
    exit(1);
}

// ----------------------------------------------------------------------------
// 1. matmul

static void bench_matmul(int runs) {
    const int n = 1024;
    int64_t sz[2] = {n, n};
    tp_tensor *a = tp_randn(2, sz, TP_DTYPE_FLOAT32, 1), *b = tp_randn(2, sz, TP_DTYPE_FLOAT32, 2);
    if (!a || !b) die("randn");
    float *c = malloc((size_t)n * n * sizeof *c);
    double *t_tp = malloc((size_t)runs * sizeof *t_tp), *t_blas = malloc((size_t)runs * sizeof *t_blas);
    if (!c || !t_tp || !t_blas) die("malloc");
    memset(c, 0, (size_t)n * n * sizeof *c);
    tp_tensor *warm = tp_matmul(a, b); /* warm up OpenBLAS's threads and buffers */
    if (!warm) die("matmul");
    tp_tensor_release(warm);
    tp_tensor *bt = tp_tensor_t(b); /* strides (1, n): goes to BLAS as CblasTrans */
    double *t_tr = malloc((size_t)runs * sizeof *t_tr), *t_blas_tr = malloc((size_t)runs * sizeof *t_blas_tr);
    if (!t_tr || !t_blas_tr) die("malloc");
    for (int r = 0; r < runs; r++) {
        /* all four in every round, so load changes hit them alike */
        double t0 = now();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, tp_tensor_data(a), n,
                    tp_tensor_data(b), n, 0.0f, c, n);
        t_blas[r] = now() - t0;
        t0 = now();
        tp_tensor *out = tp_matmul(a, b);
        t_tp[r] = now() - t0;
        if (!out) die("matmul");
        if (r == runs - 1 && memcmp(tp_tensor_data(out), c, (size_t)n * n * sizeof *c) != 0)
            fprintf(stderr, "bench_runtime: warning: tp_matmul and cblas_sgemm results differ\n");
        tp_tensor_release(out);
        t0 = now();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, n, 1.0f, tp_tensor_data(a), n,
                    tp_tensor_data(b), n, 0.0f, c, n);
        t_blas_tr[r] = now() - t0;
        t0 = now();
        out = tp_matmul(a, bt);
        t_tr[r] = now() - t0;
        if (!out) die("matmul");
        tp_tensor_release(out);
    }
    double mt = median(t_tp, runs), mb = median(t_blas, runs), mtr = median(t_tr, runs);
    double mbt = median(t_blas_tr, runs);
    double flops = 2.0 * n * n * n;
    printf("matmul 1024x1024 f32 (median of %d)\n", runs);
    printf("  %-28s %9.3f ms  %7.1f GFLOP/s\n", "cblas_sgemm direct (NN)", mb * 1e3, flops / mb * 1e-9);
    printf("  %-28s %9.3f ms  %7.1f GFLOP/s  (%+.1f%% vs direct)\n", "tp_matmul(a, b)", mt * 1e3,
           flops / mt * 1e-9, (mt / mb - 1) * 100);
    printf("  %-28s %9.3f ms  %7.1f GFLOP/s\n", "cblas_sgemm direct (NT)", mbt * 1e3, flops / mbt * 1e-9);
    printf("  %-28s %9.3f ms  %7.1f GFLOP/s  (%+.1f%% vs direct NT)\n", "tp_matmul(a, b.t())", mtr * 1e3,
           flops / mtr * 1e-9, (mtr / mbt - 1) * 100);
    tp_tensor_release(bt);
    tp_tensor_release(a);
    tp_tensor_release(b);
    free(c);
    free(t_tp);
    free(t_blas);
    free(t_tr);
    free(t_blas_tr);
}

// ----------------------------------------------------------------------------
// 2. bandwidth

static void bench_bandwidth(int runs) {
    const int64_t n = INT64_C(16) << 20;
    const double bytes = (double)n * sizeof(float);
    tp_tensor *a = tp_rand(1, &n, TP_DTYPE_FLOAT32, 3), *b = tp_rand(1, &n, TP_DTYPE_FLOAT32, 4);
    if (!a || !b) die("rand");
    float *src = malloc((size_t)bytes), *dst = malloc((size_t)bytes);
    if (!src || !dst) die("malloc");
    memset(src, 1, (size_t)bytes);
    memset(dst, 0, (size_t)bytes); /* fault the pages in: memcpy gets a warm target */
    double *t_cpy = malloc((size_t)runs * sizeof(double)), *t_add = malloc((size_t)runs * sizeof(double));
    double *t_inp = malloc((size_t)runs * sizeof(double)), *t_fresh = malloc((size_t)runs * sizeof(double));
    for (int r = 0; r < runs; r++) {
        double t0 = now();
        copy_fn(dst, src, (size_t)bytes);
        t_cpy[r] = now() - t0;
        /* what a fresh 64 MiB result costs by itself: first-touch page faults */
        t0 = now();
        float *fresh = malloc((size_t)bytes);
        if (!fresh) die("malloc");
        copy_fn(fresh, src, (size_t)bytes);
        free(fresh);
        t_fresh[r] = now() - t0;
        t0 = now();
        tp_tensor *c = tp_add(a, b);
        t_add[r] = now() - t0;
        if (!c) die("add");
        tp_tensor_release(c);
        t0 = now();
        if (tp_add_(a, b) != TP_STATUS_OK) die("add_");
        t_inp[r] = now() - t0;
    }
    double mc = median(t_cpy, runs), ma = median(t_add, runs), mi = median(t_inp, runs);
    double mf = median(t_fresh, runs);
    printf("elementwise, 16 Mi float32 (median of %d; GB/s = bytes read + written)\n", runs);
    printf("  %-28s %9.3f ms  %7.2f GB/s\n", "memcpy 64 MiB (1 thread)", mc * 1e3, 2 * bytes / mc * 1e-9);
    printf("  %-28s %9.3f ms  %7.2f GB/s\n", "memcpy to fresh malloc (1 t)", mf * 1e3, 2 * bytes / mf * 1e-9);
    printf("  %-28s %9.3f ms  %7.2f GB/s\n", "tp_add (new result)", ma * 1e3, 3 * bytes / ma * 1e-9);
    printf("  %-28s %9.3f ms  %7.2f GB/s\n", "tp_add_ (in place)", mi * 1e3, 3 * bytes / mi * 1e-9);
    tp_tensor_release(a);
    tp_tensor_release(b);
    free(src);
    free(dst);
    free(t_cpy);
    free(t_add);
    free(t_inp);
    free(t_fresh);
}

// ----------------------------------------------------------------------------
// 3. per-op overhead

static void bench_overhead(void) {
    const int iters = 200000;
    int64_t n = 4;
    tp_tensor *a = tp_ones(1, &n, TP_DTYPE_FLOAT32), *b = tp_ones(1, &n, TP_DTYPE_FLOAT32);
    double best_new = INFINITY, best_inp = INFINITY, best_sum = INFINITY;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = now();
        for (int i = 0; i < iters; i++) tp_tensor_release(tp_add(a, b));
        double t = (now() - t0) / iters;
        if (t < best_new) best_new = t;
        t0 = now();
        for (int i = 0; i < iters; i++) tp_add_(a, b);
        t = (now() - t0) / iters;
        if (t < best_inp) best_inp = t;
        t0 = now();
        for (int i = 0; i < iters; i++) tp_tensor_release(tp_sum(a, 0, NULL, false));
        t = (now() - t0) / iters;
        if (t < best_sum) best_sum = t;
    }
    printf("tiny ops, 4-element float32 (best of 5 x %d)\n", iters);
    printf("  %-28s %9.1f ns/op\n", "tp_add (alloc + release)", best_new * 1e9);
    printf("  %-28s %9.1f ns/op\n", "tp_add_ (in place)", best_inp * 1e9);
    printf("  %-28s %9.1f ns/op\n", "tp_sum (to 0-d)", best_sum * 1e9);
    tp_tensor_release(a);
    tp_tensor_release(b);
}

int main(int argc, char **argv) {
    int runs = argc > 1 ? atoi(argv[1]) : 11;
    if (runs < 1) runs = 1;
    if (argc > 2 && tp_set_num_threads(atoi(argv[2])) != TP_STATUS_OK) die("set_num_threads");
    printf("tensorplay bench_runtime: %d kernel threads\n\n", tp_get_num_threads());
    bench_matmul(runs);
    printf("\n");
    bench_bandwidth(runs);
    printf("\n");
    bench_overhead();
    return 0;
}
