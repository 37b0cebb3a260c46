/*
 * src/autograd/functions/kernels.c - plain loops over contiguous float32 /
 * float64 data for the formulas ops.h cannot express in one pass.  Each
 * loop reads its inputs through tp_contiguous copies when needed and
 * writes a fresh contiguous output; no threads (these are O(n) passes next
 * to the gemms that dominate a training step).
 */
#include <math.h>
#include <string.h>

#include "kernels.h"

static tp_status need_float(const tp_tensor *t, const char *what) {
    if (t->dtype == TP_DTYPE_FLOAT32 || t->dtype == TP_DTYPE_FLOAT64) return TP_STATUS_OK;
    return tp__error(TP_STATUS_UNSUPPORTED, "%s: only float32 and float64 are supported, got %s",
                     what, tp_dtype_name(t->dtype));
}

// ----------------------------------------------------------------------------
// elementwise maps

#define MAP_BODY(T, ERF, EXP)                                                        \
    do {                                                                            \
        const T *X = (const T *)xd, *Y = (const T *)yd;                             \
        T *O = (T *)od;                                                             \
        for (int64_t i = 0; i < n; i++) {                                           \
            T g = X[i];                                                             \
            switch (kind) {                                                         \
            case TP__MAP_RELU_BWD: O[i] = Y[i] > 0 ? g : (T)0; break;               \
            case TP__MAP_TANH_BWD: O[i] = g * ((T)1 - Y[i] * Y[i]); break;          \
            case TP__MAP_SIGMOID_BWD: O[i] = g * Y[i] * ((T)1 - Y[i]); break;       \
            case TP__MAP_SQRT_BWD: O[i] = g / ((T)2 * Y[i]); break;                 \
            case TP__MAP_ABS_BWD: O[i] = Y[i] > 0 ? g : Y[i] < 0 ? -g : (T)0; break; \
            case TP__MAP_GELU: O[i] = g * (T)0.5 * ((T)1 + ERF(g * (T)0.70710678118654752440)); break; \
            case TP__MAP_GELU_BWD: {                                                \
                T y = Y[i];                                                         \
                T cdf = (T)0.5 * ((T)1 + ERF(y * (T)0.70710678118654752440));                    \
                T pdf = EXP((T)-0.5 * y * y) * (T)0.3989422804014327;               \
                O[i] = g * (cdf + y * pdf);                                         \
                break;                                                              \
            }                                                                       \
            }                                                                       \
        }                                                                           \
    } while (0)

tp_tensor *tp__map(tp__map_kind kind, tp_tensor *x, tp_tensor *y) {
    if (need_float(x, "autograd") != TP_STATUS_OK) return NULL;
    tp_tensor *xc = tp_contiguous(x), *yc = NULL, *out = NULL;
    if (!xc) return NULL;
    if (y) {
        tp_tensor *yt = tp_to_dtype(y, x->dtype);
        yc = yt ? tp_contiguous(yt) : NULL;
        tp_tensor_release(yt);
        if (!yc) goto done;
        if (yc->numel != xc->numel) {
            tp__error(TP_STATUS_INTERNAL, "autograd: map operands differ in size");
            goto done;
        }
    }
    out = tp_empty(x->ndim, x->sizes, x->dtype);
    if (!out) goto done;
    int64_t n = xc->numel;
    const void *xd = tp_tensor_data(xc), *yd = yc ? tp_tensor_data(yc) : xd;
    void *od = tp_tensor_data(out);
    if (n) {
        if (x->dtype == TP_DTYPE_FLOAT32) MAP_BODY(float, erff, expf);
        else MAP_BODY(double, erf, exp);
    }
done:
    tp_tensor_release(xc);
    tp_tensor_release(yc);
    return out;
}

// ----------------------------------------------------------------------------
// softmax along a dim: the tensor seen as (outer, n, inner), contiguous

static void split(const tp_tensor *t, int dim, int64_t *outer, int64_t *n, int64_t *inner) {
    *outer = 1;
    *inner = 1;
    for (int i = 0; i < dim; i++) *outer *= t->sizes[i];
    for (int i = dim + 1; i < t->ndim; i++) *inner *= t->sizes[i];
    *n = t->ndim ? t->sizes[dim] : 1;
}

#define SOFTMAX_BODY(T, EXP, LOG)                                                      \
    do {                                                                              \
        const T *X = (const T *)tp_tensor_data(xc);                                   \
        T *O = (T *)tp_tensor_data(out);                                              \
        for (int64_t o = 0; o < outer; o++)                                           \
            for (int64_t j = 0; j < inner; j++) {                                     \
                const T *x = X + o * n * inner + j;                                   \
                T *y = O + o * n * inner + j;                                         \
                T mx = x[0];                                                          \
                for (int64_t k = 1; k < n; k++) mx = x[k * inner] > mx ? x[k * inner] : mx; \
                double sum = 0;                                                       \
                for (int64_t k = 0; k < n; k++) sum += (double)EXP(x[k * inner] - mx); \
                if (take_log) {                                                            \
                    T lse = mx + (T)LOG((T)sum);                                      \
                    for (int64_t k = 0; k < n; k++) y[k * inner] = x[k * inner] - lse; \
                } else {                                                              \
                    T inv = (T)(1.0 / sum);                                           \
                    for (int64_t k = 0; k < n; k++) y[k * inner] = EXP(x[k * inner] - mx) * inv; \
                }                                                                     \
            }                                                                         \
    } while (0)

tp_tensor *tp__softmax(tp_tensor *x, int dim, bool take_log) {
    if (need_float(x, take_log ? "log_softmax" : "softmax") != TP_STATUS_OK) return NULL;
    int d = tp__wrap_dim(dim, x->ndim);
    if (d < 0) return NULL;
    tp_tensor *xc = tp_contiguous(x);
    if (!xc) return NULL;
    tp_tensor *out = tp_empty(x->ndim, x->sizes, x->dtype);
    if (out && xc->numel) {
        int64_t outer, n, inner;
        split(xc, d, &outer, &n, &inner);
        if (x->dtype == TP_DTYPE_FLOAT32) SOFTMAX_BODY(float, expf, logf);
        else SOFTMAX_BODY(double, exp, log);
    }
    tp_tensor_release(xc);
    return out;
}

#define SOFTMAX_BWD_BODY(T, EXP)                                                       \
    do {                                                                              \
        const T *G = (const T *)tp_tensor_data(gc), *Y = (const T *)tp_tensor_data(yc); \
        T *O = (T *)tp_tensor_data(out);                                              \
        for (int64_t o = 0; o < outer; o++)                                           \
            for (int64_t j = 0; j < inner; j++) {                                     \
                int64_t b = o * n * inner + j;                                        \
                double s = 0;                                                         \
                if (take_log) {                                                            \
                    for (int64_t k = 0; k < n; k++) s += G[b + k * inner];            \
                    for (int64_t k = 0; k < n; k++)                                   \
                        O[b + k * inner] = G[b + k * inner] - EXP(Y[b + k * inner]) * (T)s; \
                } else {                                                              \
                    for (int64_t k = 0; k < n; k++) s += (double)G[b + k * inner] * Y[b + k * inner]; \
                    for (int64_t k = 0; k < n; k++)                                   \
                        O[b + k * inner] = Y[b + k * inner] * (G[b + k * inner] - (T)s); \
                }                                                                     \
            }                                                                         \
    } while (0)

tp_tensor *tp__softmax_backward(tp_tensor *g, tp_tensor *y, int dim, bool take_log) {
    if (need_float(y, "softmax backward") != TP_STATUS_OK) return NULL;
    tp_tensor *gt = tp_to_dtype(g, y->dtype);
    tp_tensor *gc = gt ? tp_contiguous(gt) : NULL, *yc = tp_contiguous(y), *out = NULL;
    tp_tensor_release(gt);
    if (gc && yc) out = tp_empty(y->ndim, y->sizes, y->dtype);
    if (out && yc->numel) {
        int64_t outer, n, inner;
        split(yc, dim, &outer, &n, &inner);
        if (y->dtype == TP_DTYPE_FLOAT32) SOFTMAX_BWD_BODY(float, expf);
        else SOFTMAX_BWD_BODY(double, exp);
    }
    tp_tensor_release(gc);
    tp_tensor_release(yc);
    return out;
}

// ----------------------------------------------------------------------------
// index_add into zeros

tp_tensor *tp__index_add_zeros(int ndim, const int64_t *sizes, tp_dtype dtype, int dim,
                               const tp_tensor *index, tp_tensor *src) {
    tp_tensor *out = tp_zeros(ndim, sizes, dtype);
    if (!out) return NULL;
    tp_tensor *idx = tp_to_dtype((tp_tensor *)index, TP_DTYPE_INT64);
    tp_tensor *ic = idx ? tp_contiguous(idx) : NULL;
    tp_tensor_release(idx);
    tp_tensor *st = tp_to_dtype(src, dtype);
    tp_tensor *sc = st ? tp_contiguous(st) : NULL;
    tp_tensor_release(st);
    if (!ic || !sc) goto fail;
    const int64_t *ix = (const int64_t *)tp_tensor_data(ic);
    int64_t outer, n, inner, sn = ic->numel;
    split(out, dim, &outer, &n, &inner);
    if (need_float(out, "index_select backward") != TP_STATUS_OK) goto fail;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < sn; i++) {
            int64_t row = ix[i];
            if (dtype == TP_DTYPE_FLOAT32) {
                float *dst = (float *)tp_tensor_data(out) + (o * n + row) * inner;
                const float *s = (const float *)tp_tensor_data(sc) + (o * sn + i) * inner;
                for (int64_t j = 0; j < inner; j++) dst[j] += s[j];
            } else {
                double *dst = (double *)tp_tensor_data(out) + (o * n + row) * inner;
                const double *s = (const double *)tp_tensor_data(sc) + (o * sn + i) * inner;
                for (int64_t j = 0; j < inner; j++) dst[j] += s[j];
            }
        }
    tp_tensor_release(ic);
    tp_tensor_release(sc);
    return out;
fail:
    tp_tensor_release(ic);
    tp_tensor_release(sc);
    tp_tensor_release(out);
    return NULL;
}
