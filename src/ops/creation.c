/*
 * src/ops/creation.c - tensors made from nothing: empty/zeros/ones/full,
 * arange/linspace, seeded rand/randn, and from_blob over foreign memory.
 *
 * Random numbers: xoshiro256** (Blackman & Vigna) seeded by four outputs
 * of splitmix64(seed), one generator per call, values drawn in row-major
 * order on the calling thread, so a seed always gives the same tensor.
 * rand keeps the top bits that fit the dtype's significand (53 for float64,
 * 24 for float32, 11 for float16, 8 for bfloat16), so every value is exact
 * and strictly below 1.  randn is Box-Muller on pairs of doubles.
 *
 * This file does no arithmetic on existing tensors.
 */
#include <math.h>
#include <stdlib.h>
#include "ops_internal.h"

// ----------------------------------------------------------------------------
// empty and constant fills

tp_tensor *tp_empty(int ndim, const int64_t *sizes, tp_dtype dtype) {
    return tp__empty_with(NULL, ndim, sizes, dtype);
}

tp_tensor *tp__empty_with(tp_allocator *allocator, int ndim, const int64_t *sizes, tp_dtype dtype) {
    if (!tp_dtype_is_valid(dtype)) {
        tp__error(TP_STATUS_INVALID_ARGUMENT, "empty(): invalid dtype %d", (int)dtype);
        return NULL;
    }
    if (ndim > 0 && !sizes) {
        tp__error(TP_STATUS_INVALID_ARGUMENT, "empty(): sizes is NULL for a %d-d tensor", ndim);
        return NULL;
    }
    int64_t numel;
    if (tp__check_sizes(ndim, sizes, &numel) != TP_STATUS_OK) return NULL;
    size_t isz = tp_dtype_itemsize(dtype);
    if ((uint64_t)numel > SIZE_MAX / isz) {
        tp__error(TP_STATUS_OUT_OF_MEMORY, "empty(): %lld elements of %zu bytes overflow size_t",
                  (long long)numel, isz);
        return NULL;
    }
    tp_storage *st = tp__storage_new_for_tensor((size_t)numel * isz, allocator, true);
    if (!st) return NULL;
    /* The tensor takes st's creation reference, also if it fails. */
    return tp__tensor_make(st, 0, ndim, sizes, NULL, dtype, NULL, NULL, TP__STORAGE_REF_ADOPT);
}

tp_tensor *tp_full(int ndim, const int64_t *sizes, double value, tp_dtype dtype) {
    tp_tensor *t = tp_empty(ndim, sizes, dtype);
    if (!t) return NULL;
    tp__view v = tp__view_of(t);
    tp__fill_view(&v, value); /* not tp_fill_: a new tensor stays at version 0 */
    return t;
}

tp_tensor *tp_zeros(int ndim, const int64_t *sizes, tp_dtype dtype) {
    tp_tensor *t = tp_empty(ndim, sizes, dtype);
    if (!t) return NULL;
    /* All-zero bytes are 0 in every dtype we have. */
    if (t->numel > 0) memset(tp_tensor_data(t), 0, (size_t)t->numel * tp_dtype_itemsize(dtype));
    return t;
}

tp_tensor *tp_ones(int ndim, const int64_t *sizes, tp_dtype dtype) {
    return tp_full(ndim, sizes, 1.0, dtype);
}

// ----------------------------------------------------------------------------
// ranges

/* Fills a fresh contiguous 1-D tensor with f(i) in chunks. */
static void fill_affine(tp_tensor *t, double start, double step, double end, bool symmetric) {
    double buf[TP__CHUNK];
    char *p = tp_tensor_data(t);
    int64_t n = t->numel;
    int64_t isz = tp__itemsize(t->dtype);
    for (int64_t off = 0; off < n; off += TP__CHUNK) {
        int64_t m = n - off < TP__CHUNK ? n - off : TP__CHUNK;
        for (int64_t i = 0; i < m; i++) {
            int64_t k = off + i;
            /* linspace computes the upper half from `end` so both ends are exact */
            buf[i] = symmetric && k >= n / 2 ? end - (double)(n - 1 - k) * step
                                             : start + (double)k * step;
        }
        tp__store_f64(p + off * isz, isz, buf, m, t->dtype);
    }
}

tp_tensor *tp_arange(double start, double end, double step, tp_dtype dtype) {
    if (step == 0 || step != step) {
        tp__error(TP_STATUS_INVALID_ARGUMENT, "arange(): step must be nonzero");
        return NULL;
    }
    if (!isfinite(start) || !isfinite(end)) {
        tp__error(TP_STATUS_INVALID_ARGUMENT, "arange(): unsupported range: %g -> %g", start, end);
        return NULL;
    }
    if ((step > 0 && end < start) || (step < 0 && end > start)) {
        tp__error(TP_STATUS_INVALID_ARGUMENT,
                  "arange(): upper bound and larger bound inconsistent with step sign");
        return NULL;
    }
    double count = ceil((end - start) / step);
    if (count > 9.0e15) {
        tp__error(TP_STATUS_INVALID_ARGUMENT, "arange(): too many elements (%g)", count);
        return NULL;
    }
    int64_t n = (int64_t)count;
    tp_tensor *t = tp_empty(1, &n, dtype);
    if (!t) return NULL;
    fill_affine(t, start, step, end, false);
    return t;
}

tp_tensor *tp_linspace(double start, double end, int64_t steps, tp_dtype dtype) {
    if (steps < 0) {
        tp__error(TP_STATUS_INVALID_ARGUMENT, "linspace(): number of steps must be non-negative");
        return NULL;
    }
    tp_tensor *t = tp_empty(1, &steps, dtype);
    if (!t) return NULL;
    double step = steps > 1 ? (end - start) / (double)(steps - 1) : 0.0;
    fill_affine(t, start, step, end, steps > 1);
    return t;
}

// ----------------------------------------------------------------------------
// random

typedef struct rng { uint64_t s[4]; } rng;

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static rng rng_seed(uint64_t seed) {
    rng r;
    for (int i = 0; i < 4; i++) r.s[i] = splitmix64(&seed);
    return r;
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t rng_next(rng *r) {
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

static int significand_bits(tp_dtype d) {
    switch (d) {
    case TP_DTYPE_FLOAT64: return 53;
    case TP_DTYPE_FLOAT32: return 24;
    case TP_DTYPE_FLOAT16: return 11;
    default: return 8; /* bfloat16 */
    }
}

static tp_tensor *random_tensor(const char *name, int ndim, const int64_t *sizes, tp_dtype dtype,
                                uint64_t seed, bool normal) {
    if (tp_dtype_is_valid(dtype) && !tp_dtype_is_floating(dtype)) {
        tp__error(TP_STATUS_INVALID_ARGUMENT,
                  "%s(): expected a floating point dtype, but got %s", name, tp_dtype_name(dtype));
        return NULL;
    }
    tp_tensor *t = tp_empty(ndim, sizes, dtype);
    if (!t) return NULL;
    rng r = rng_seed(seed);
    int bits = significand_bits(dtype);
    double scale = ldexp(1.0, -bits);
    double buf[TP__CHUNK];
    char *p = tp_tensor_data(t);
    int64_t isz = tp__itemsize(dtype);
    for (int64_t off = 0; off < t->numel; off += TP__CHUNK) {
        int64_t m = t->numel - off < TP__CHUNK ? t->numel - off : TP__CHUNK;
        if (!normal) {
            for (int64_t i = 0; i < m; i++) buf[i] = (double)(rng_next(&r) >> (64 - bits)) * scale;
        } else {
            for (int64_t i = 0; i < m; i += 2) {
                /* u1 in (0, 1] keeps log finite */
                double u1 = (double)((rng_next(&r) >> 11) + 1) * 0x1p-53;
                double u2 = (double)(rng_next(&r) >> 11) * 0x1p-53;
                double rad = sqrt(-2.0 * log(u1)), th = 6.283185307179586 * u2;
                buf[i] = rad * cos(th);
                if (i + 1 < m) buf[i + 1] = rad * sin(th);
            }
        }
        tp__store_f64(p + off * isz, isz, buf, m, dtype);
    }
    return t;
}

tp_tensor *tp_rand(int ndim, const int64_t *sizes, tp_dtype dtype, uint64_t seed) {
    return random_tensor("rand", ndim, sizes, dtype, seed, false);
}

tp_tensor *tp_randn(int ndim, const int64_t *sizes, tp_dtype dtype, uint64_t seed) {
    return random_tensor("randn", ndim, sizes, dtype, seed, true);
}

// ----------------------------------------------------------------------------
// foreign memory

tp_tensor *tp_from_blob(void *data, int ndim, const int64_t *sizes, const int64_t *strides,
                        tp_dtype dtype, tp_deleter_fn deleter, void *ctx) {
    return tp__from_blob_on(tp_device_cpu(), data, ndim, sizes, strides, dtype, deleter, ctx);
}

tp_tensor *tp__from_blob_on(tp_device device, void *data, int ndim, const int64_t *sizes, const int64_t *strides,
                            tp_dtype dtype, tp_deleter_fn deleter, void *ctx) {
    /* c10's DataPtr frees its ctx, so a deleter without a ctx frees data. */
    if (deleter && !ctx) ctx = data;
    tp_data_ptr dp = {.ptr = data, .ctx = deleter ? ctx : NULL, .deleter = deleter, .device = device};
    int64_t numel = 0;
    tp_status st = TP_STATUS_OK;
    if (!tp_dtype_is_valid(dtype))
        st = tp__error(TP_STATUS_INVALID_ARGUMENT, "from_blob(): invalid dtype %d", (int)dtype);
    else if (ndim > 0 && !sizes)
        st = tp__error(TP_STATUS_INVALID_ARGUMENT, "from_blob(): sizes is NULL");
    else
        st = tp__check_sizes(ndim, sizes, &numel);
    /* The storage must cover the furthest element the strides reach. */
    int64_t extent = numel > 0 ? 1 : 0;
    for (int d = 0; st == TP_STATUS_OK && strides && numel > 0 && d < ndim; d++) {
        if (strides[d] < 0)
            st = tp__error(TP_STATUS_INVALID_ARGUMENT,
                           "from_blob(): negative stride %lld in dimension %d",
                           (long long)strides[d], d);
        else
            extent += (sizes[d] - 1) * strides[d];
    }
    if (st == TP_STATUS_OK && !strides) extent = numel;
    if (st == TP_STATUS_OK && numel > 0 && !data)
        st = tp__error(TP_STATUS_INVALID_ARGUMENT, "from_blob(): data is NULL for %lld elements",
                       (long long)numel);
    if (st != TP_STATUS_OK) {
        /* Ownership passed to us: a failed call still frees, like the storage API. */
        tp_data_ptr_clear(&dp);
        return NULL;
    }
    tp_storage *s = tp_storage_new_with_data_ptr(dp, (size_t)extent * tp_dtype_itemsize(dtype),
                                                 NULL, false);
    if (!s) return NULL;
    /* The tensor takes s's creation reference, also if it fails. */
    return tp__tensor_make(s, 0, ndim, sizes, strides, dtype, NULL, NULL, TP__STORAGE_REF_ADOPT);
}
