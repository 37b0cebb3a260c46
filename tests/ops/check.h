/*
 * tests/ops/check.h - assertions and tensor helpers the ops tests share.
 *
 * A failed CHECK prints file:line and the expression, counts the failure and
 * lets the test go on.  Tensors are built from double arrays with make(),
 * compared element by element with CHECK_VALUES (through tp_tensor_get, so
 * any strided result works), and errors with CHECK_ERROR (NULL or status,
 * plus a substring of tp_last_error()).
 */
#ifndef TP_TESTS_OPS_CHECK_H
#define TP_TESTS_OPS_CHECK_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tensorplay/tensorplay.h"
#include "../check.h"

#define CHECK_NEAR(a, b, tol)                                                              \
    do {                                                                                   \
        double check_a_ = (a), check_b_ = (b);                                             \
        if (!(fabs(check_a_ - check_b_) <= (tol)) &&                                       \
            !(isnan(check_a_) && isnan(check_b_)) && check_a_ != check_b_) {               \
            fprintf(stderr, "%s:%d: CHECK_NEAR failed: %s == %.9g, %s == %.9g\n", __FILE__, \
                    __LINE__, #a, check_a_, #b, check_b_);                                 \
            check_failures++;                                                              \
        }                                                                                  \
    } while (0)

/* The call failed (NULL pointer or non-OK status) with a message containing sub. */
#define CHECK_ERROR(failed, sub)                                                          \
    do {                                                                                  \
        tp_clear_error();                                                                 \
        int check_failed_ = (failed);                                                     \
        const char *check_msg_ = tp_last_error();                                         \
        if (!check_failed_ || !strstr(check_msg_, (sub))) {                               \
            fprintf(stderr, "%s:%d: CHECK_ERROR failed: %s\n  message:  \"%s\"\n  expected: \"%s\"\n", \
                    __FILE__, __LINE__, #failed, check_msg_, (sub));                      \
            check_failures++;                                                             \
        }                                                                                 \
    } while (0)

/* For CHECK_ERROR with calls returning tensors: releases a (wrong) result. */
static inline int fails(tp_tensor *t) {
    if (!t) return 1;
    tp_tensor_release(t);
    return 0;
}

// ----------------------------------------------------------------------------
// tensors from values

/* A new contiguous tensor of dtype holding vals (row-major), version 0. */
static inline tp_tensor *make(tp_dtype dtype, int ndim, const int64_t *sizes, const double *vals) {
    tp_tensor *blob = tp_from_blob((void *)vals, ndim, sizes, NULL, TP_DTYPE_FLOAT64, NULL, NULL);
    if (!blob) return NULL;
    tp_tensor *t = dtype == TP_DTYPE_FLOAT64 ? tp_clone(blob) : tp_to_dtype(blob, dtype);
    tp_tensor_release(blob);
    return t;
}

#define MAKE(dtype, shape, ...) \
    make((dtype), (int)(sizeof(int64_t[])shape / sizeof(int64_t)), (int64_t[])shape, (double[])__VA_ARGS__)
#define SHAPE(...) {__VA_ARGS__}

/* Row-major element k of t as double. */
static inline double at(const tp_tensor *t, int64_t k) {
    int nd = tp_tensor_dim(t);
    int64_t idx[TP_MAX_DIMS];
    for (int d = nd - 1; d >= 0; d--) {
        int64_t n = tp_tensor_size(t, d);
        idx[d] = k % n;
        k /= n;
    }
    double v = NAN;
    tp_tensor_get(t, idx, &v);
    return v;
}

static inline int check_values_(const char *file, int line, const tp_tensor *t, int64_t n,
                                const double *want, double tol) {
    if (!t) {
        fprintf(stderr, "%s:%d: CHECK_VALUES on NULL (%s)\n", file, line, tp_last_error());
        return 1;
    }
    if (tp_tensor_numel(t) != n) {
        fprintf(stderr, "%s:%d: CHECK_VALUES numel %lld, expected %lld\n", file, line,
                (long long)tp_tensor_numel(t), (long long)n);
        return 1;
    }
    for (int64_t k = 0; k < n; k++) {
        double got = at(t, k);
        if (!(fabs(got - want[k]) <= tol) && !(isnan(got) && isnan(want[k])) && got != want[k]) {
            fprintf(stderr, "%s:%d: CHECK_VALUES element %lld: got %.9g, expected %.9g\n", file, line,
                    (long long)k, got, want[k]);
            return 1;
        }
    }
    return 0;
}

#define CHECK_VALUES(t, tol, ...)                                                             \
    do {                                                                                      \
        const double check_want_[] = __VA_ARGS__;                                             \
        check_failures += check_values_(__FILE__, __LINE__, (t),                              \
                                        (int64_t)(sizeof check_want_ / sizeof(double)),       \
                                        check_want_, (tol));                                  \
    } while (0)

static inline bool shape_is(const tp_tensor *t, int ndim, const int64_t *sizes) {
    if (!t || tp_tensor_dim(t) != ndim) return false;
    for (int d = 0; d < ndim; d++)
        if (tp_tensor_size(t, d) != sizes[d]) return false;
    return true;
}
#define CHECK_SHAPE(t, shape) \
    CHECK(shape_is((t), (int)(sizeof(int64_t[])shape / sizeof(int64_t)), (int64_t[])shape))

// ----------------------------------------------------------------------------
// random strided views (for "any layout gives the same answer" tests)

static inline uint64_t test_rng(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return *s >> 33;
}

/* A random view of a fresh random tensor: ndim dims of sizes[], reached
 * through a permutation, a stepped slice and an offset.  New reference. */
static inline tp_tensor *random_view(uint64_t *seed, int ndim, const int64_t *sizes, tp_dtype dtype) {
    int perm[TP_MAX_DIMS], inv[TP_MAX_DIMS];
    for (int d = 0; d < ndim; d++) perm[d] = d;
    for (int d = ndim - 1; d > 0; d--) {
        int k = (int)(test_rng(seed) % (uint64_t)(d + 1)), t = perm[d];
        perm[d] = perm[k];
        perm[k] = t;
    }
    for (int d = 0; d < ndim; d++) inv[perm[d]] = d;
    /* the base holds dim d' = perm-position with room for a step and an offset */
    int64_t bsz[TP_MAX_DIMS] = {0}, step[TP_MAX_DIMS] = {0}, off[TP_MAX_DIMS] = {0};
    for (int d = 0; d < ndim; d++) {
        int64_t want = sizes[perm[d]];
        step[d] = 1 + (int64_t)(test_rng(seed) % 2);
        off[d] = (int64_t)(test_rng(seed) % 2);
        bsz[d] = off[d] + (want > 0 ? (want - 1) * step[d] + 1 : 0) + (int64_t)(test_rng(seed) % 2);
    }
    tp_tensor *base = tp_rand(ndim, bsz, TP_DTYPE_FLOAT64, test_rng(seed));
    tp_tensor *scaled = tp_binary_scalar(TP_BINARY_OP_MUL, base, 20);
    tp_tensor *shifted = tp_binary_scalar(TP_BINARY_OP_SUB, scaled, 10);
    tp_tensor *typed = tp_to_dtype(shifted, dtype);
    tp_tensor *v = tp_tensor_retain(typed);
    for (int d = 0; d < ndim; d++) {
        tp_tensor *s = tp_tensor_slice(v, d, off[d], off[d] + (sizes[perm[d]] - 1) * step[d] + 1, step[d]);
        tp_tensor_release(v);
        v = s;
    }
    tp_tensor *p = tp_tensor_permute(v, ndim, inv);
    tp_tensor_release(v);
    tp_tensor_release(typed);
    tp_tensor_release(shifted);
    tp_tensor_release(scaled);
    tp_tensor_release(base);
    return p;
}

/* Same shape, dtype and bytes (compared element by element as contiguous). */
static inline bool same_tensor(tp_tensor *a, tp_tensor *b) {
    if (!a || !b || tp_tensor_dtype(a) != tp_tensor_dtype(b) || tp_tensor_dim(a) != tp_tensor_dim(b)) return false;
    if (!shape_is(b, tp_tensor_dim(a), tp_tensor_sizes(a))) return false;
    tp_tensor *ca = tp_contiguous(a), *cb = tp_contiguous(b);
    bool same = memcmp(tp_tensor_data(ca), tp_tensor_data(cb), tp_tensor_nbytes(ca)) == 0;
    tp_tensor_release(ca);
    tp_tensor_release(cb);
    return same;
}

// ----------------------------------------------------------------------------
// an allocator that refuses requests above a limit (allocation-failure paths)

static size_t limited_max_bytes;

static tp_status limited_allocate(tp_allocator *self, size_t nbytes, tp_data_ptr *out) {
    (void)self;
    if (nbytes > limited_max_bytes) return TP_STATUS_OUT_OF_MEMORY;
    tp_allocator *cpu = tp_allocator_cpu();
    return cpu->allocate(cpu, nbytes, out);
}

static tp_allocator limited_allocator = {.name = "limited", .allocate = limited_allocate};

/* Until limit_end(), CPU allocations above max_bytes fail. */
static inline void limit_begin(size_t max_bytes) {
    limited_max_bytes = max_bytes;
    tp_allocator_set(TP_DEVICE_TYPE_CPU, &limited_allocator);
}
static inline void limit_end(void) { tp_allocator_set(TP_DEVICE_TYPE_CPU, NULL); }

#endif
