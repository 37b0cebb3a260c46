/*
 * src/ops/iter.c - the machinery every op is built on: borrowed strided
 * views, broadcasting, the N-d iterator that turns any strided layout into
 * runs along one dim, and dtype conversion through double/int64 buffers.
 *
 * This file knows no op: no arithmetic and no tensor allocation.  Kernels
 * live in the op files and are handed runs by the iterator (in tiles when an
 * operand is transposed, split over the pool when the work is large).
 */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include "ops_internal.h"

// ----------------------------------------------------------------------------
// views

int64_t tp__view_numel(const tp__view *v) {
    int64_t n = 1;
    for (int d = 0; d < v->ndim; d++) n *= v->sizes[d];
    return n;
}

bool tp__view_has_internal_overlap(const tp__view *v) {
    /* Sort the dims of size > 1 by |stride|; the layout is overlap-free if
     * each stride exceeds the span of all smaller-stride dims. */
    int64_t st[TP_MAX_DIMS], sz[TP_MAX_DIMS];
    int n = 0;
    for (int d = 0; d < v->ndim; d++) {
        if (v->sizes[d] == 0) return false; /* no elements at all */
        if (v->sizes[d] == 1) continue;
        int64_t s = v->strides[d] < 0 ? -v->strides[d] : v->strides[d];
        if (s == 0) return true;
        int i = n++;
        while (i > 0 && st[i - 1] > s) {
            st[i] = st[i - 1];
            sz[i] = sz[i - 1];
            i--;
        }
        st[i] = s;
        sz[i] = v->sizes[d];
    }
    int64_t span = 0; /* max offset reachable with the dims so far */
    for (int i = 0; i < n; i++) {
        if (st[i] <= span) return true;
        span += (sz[i] - 1) * st[i];
    }
    return false;
}

static void view_byte_range(const tp__view *v, uintptr_t *lo, uintptr_t *hi) {
    int64_t isz = tp__itemsize(v->dtype);
    int64_t min_off = 0, max_off = 0;
    for (int d = 0; d < v->ndim; d++) {
        int64_t span = (v->sizes[d] - 1) * v->strides[d];
        if (span < 0) min_off += span;
        else max_off += span;
    }
    *lo = (uintptr_t)v->data + (uintptr_t)(min_off * isz);
    *hi = (uintptr_t)v->data + (uintptr_t)((max_off + 1) * isz);
}

bool tp__views_may_overlap(const tp__view *a, const tp__view *b) {
    if (tp__view_numel(a) == 0 || tp__view_numel(b) == 0) return false;
    uintptr_t alo, ahi, blo, bhi;
    view_byte_range(a, &alo, &ahi);
    view_byte_range(b, &blo, &bhi);
    return alo < bhi && blo < ahi;
}

// ----------------------------------------------------------------------------
// shapes

tp_status tp__broadcast_shape(int na, const int64_t *a, int nb, const int64_t *b,
                              int *nout, int64_t *out) {
    int n = na > nb ? na : nb;
    int64_t tmp[TP_MAX_DIMS];
    for (int i = n - 1; i >= 0; i--) {
        int ia = i - (n - na), ib = i - (n - nb);
        int64_t sa = ia >= 0 ? a[ia] : 1;
        int64_t sb = ib >= 0 ? b[ib] : 1;
        if (sa != sb && sa != 1 && sb != 1)
            return tp__error(TP_STATUS_INVALID_ARGUMENT,
                             "The size of tensor a (%lld) must match the size of tensor b (%lld) "
                             "at non-singleton dimension %d",
                             (long long)sa, (long long)sb, i);
        tmp[i] = sa == 1 ? sb : sa;
    }
    for (int i = 0; i < n; i++) out[i] = tmp[i];
    *nout = n;
    return TP_STATUS_OK;
}

bool tp__shape_equal(int na, const int64_t *a, int nb, const int64_t *b) {
    if (na != nb) return false;
    for (int i = 0; i < na; i++)
        if (a[i] != b[i]) return false;
    return true;
}

// ----------------------------------------------------------------------------
// dtypes

const char *tp__dtype_scalar_name(tp_dtype dtype) {
    switch (dtype) {
    case TP_DTYPE_FLOAT32: return "Float";
    case TP_DTYPE_FLOAT64: return "Double";
    case TP_DTYPE_FLOAT16: return "Half";
    case TP_DTYPE_BFLOAT16: return "BFloat16";
    case TP_DTYPE_INT8: return "Char";
    case TP_DTYPE_INT16: return "Short";
    case TP_DTYPE_INT32: return "Int";
    case TP_DTYPE_INT64: return "Long";
    case TP_DTYPE_UINT8: return "Byte";
    case TP_DTYPE_BOOL: return "Bool";
    default: return "Undefined";
    }
}

static int dtype_category(tp_dtype d) {
    if (d == TP_DTYPE_BOOL) return 0;
    return tp_dtype_is_floating(d) ? 2 : 1;
}

tp_dtype tp__result_dtype(const tp_tensor *a, const tp_tensor *b) {
    bool za = a->ndim == 0, zb = b->ndim == 0;
    if (za == zb) return tp_dtype_promote(a->dtype, b->dtype);
    tp_dtype dim = za ? b->dtype : a->dtype;
    tp_dtype zero = za ? a->dtype : b->dtype;
    /* The 0-d operand only matters when its category is higher. */
    if (dtype_category(zero) > dtype_category(dim)) return tp_dtype_promote(dim, zero);
    return dim;
}

bool tp__can_cast(tp_dtype from, tp_dtype to) {
    if (tp_dtype_is_floating(from) && !tp_dtype_is_floating(to)) return false;
    if (from != TP_DTYPE_BOOL && to == TP_DTYPE_BOOL) return false;
    return true;
}

// ----------------------------------------------------------------------------
// conversion (memcpy keeps loads legal for borrowed, unaligned blobs)

#define DEFINE_LOAD(T)                                                   \
    static inline T load_##T(const char *p) { T v; memcpy(&v, p, sizeof v); return v; }
DEFINE_LOAD(float)
DEFINE_LOAD(double)
DEFINE_LOAD(uint16_t)
DEFINE_LOAD(int8_t)
DEFINE_LOAD(int16_t)
DEFINE_LOAD(int32_t)
DEFINE_LOAD(int64_t)
DEFINE_LOAD(uint8_t)
#define LOAD_AS(T, p) load_##T(p)
#define STORE_AS(T, p, x) do { T v_ = (T)(x); memcpy((p), &v_, sizeof v_); } while (0)

void tp__load_f64(double *dst, const char *src, int64_t stride, int64_t n, tp_dtype dtype) {
    switch (dtype) {
    case TP_DTYPE_FLOAT32: for (int64_t i = 0; i < n; i++) dst[i] = LOAD_AS(float, src + i * stride); break;
    case TP_DTYPE_FLOAT64: for (int64_t i = 0; i < n; i++) dst[i] = LOAD_AS(double, src + i * stride); break;
    case TP_DTYPE_FLOAT16:
        for (int64_t i = 0; i < n; i++) dst[i] = tp_half_to_float(LOAD_AS(uint16_t, src + i * stride));
        break;
    case TP_DTYPE_BFLOAT16:
        for (int64_t i = 0; i < n; i++) dst[i] = tp_bfloat16_to_float(LOAD_AS(uint16_t, src + i * stride));
        break;
    case TP_DTYPE_INT8: for (int64_t i = 0; i < n; i++) dst[i] = LOAD_AS(int8_t, src + i * stride); break;
    case TP_DTYPE_INT16: for (int64_t i = 0; i < n; i++) dst[i] = LOAD_AS(int16_t, src + i * stride); break;
    case TP_DTYPE_INT32: for (int64_t i = 0; i < n; i++) dst[i] = LOAD_AS(int32_t, src + i * stride); break;
    case TP_DTYPE_INT64: for (int64_t i = 0; i < n; i++) dst[i] = (double)LOAD_AS(int64_t, src + i * stride); break;
    case TP_DTYPE_UINT8: for (int64_t i = 0; i < n; i++) dst[i] = LOAD_AS(uint8_t, src + i * stride); break;
    case TP_DTYPE_BOOL: for (int64_t i = 0; i < n; i++) dst[i] = LOAD_AS(uint8_t, src + i * stride) != 0; break;
    default: for (int64_t i = 0; i < n; i++) dst[i] = 0; break;
    }
}

void tp__load_i64(int64_t *dst, const char *src, int64_t stride, int64_t n, tp_dtype dtype) {
    switch (dtype) {
    case TP_DTYPE_INT8: for (int64_t i = 0; i < n; i++) dst[i] = LOAD_AS(int8_t, src + i * stride); break;
    case TP_DTYPE_INT16: for (int64_t i = 0; i < n; i++) dst[i] = LOAD_AS(int16_t, src + i * stride); break;
    case TP_DTYPE_INT32: for (int64_t i = 0; i < n; i++) dst[i] = LOAD_AS(int32_t, src + i * stride); break;
    case TP_DTYPE_INT64: for (int64_t i = 0; i < n; i++) dst[i] = LOAD_AS(int64_t, src + i * stride); break;
    case TP_DTYPE_UINT8: for (int64_t i = 0; i < n; i++) dst[i] = LOAD_AS(uint8_t, src + i * stride); break;
    case TP_DTYPE_BOOL: for (int64_t i = 0; i < n; i++) dst[i] = LOAD_AS(uint8_t, src + i * stride) != 0; break;
    default: {
        /* floating source: truncate toward zero like a C/PyTorch cast */
        double buf[TP__CHUNK];
        for (int64_t off = 0; off < n; off += TP__CHUNK) {
            int64_t m = n - off < TP__CHUNK ? n - off : TP__CHUNK;
            tp__load_f64(buf, src + off * stride, stride, m, dtype);
            for (int64_t i = 0; i < m; i++) dst[off + i] = tp__f64_to_i64(buf[i]);
        }
        break;
    }
    }
}

void tp__store_f64(char *dst, int64_t stride, const double *src, int64_t n, tp_dtype dtype) {
    switch (dtype) {
    case TP_DTYPE_FLOAT32: for (int64_t i = 0; i < n; i++) STORE_AS(float, dst + i * stride, src[i]); break;
    case TP_DTYPE_FLOAT64: for (int64_t i = 0; i < n; i++) STORE_AS(double, dst + i * stride, src[i]); break;
    case TP_DTYPE_FLOAT16:
        for (int64_t i = 0; i < n; i++) STORE_AS(uint16_t, dst + i * stride, tp_float_to_half((float)src[i]));
        break;
    case TP_DTYPE_BFLOAT16:
        for (int64_t i = 0; i < n; i++)
            STORE_AS(uint16_t, dst + i * stride, tp_float_to_bfloat16((float)src[i]));
        break;
    case TP_DTYPE_BOOL: for (int64_t i = 0; i < n; i++) STORE_AS(uint8_t, dst + i * stride, src[i] != 0); break;
    default: {
        int64_t buf[TP__CHUNK];
        for (int64_t off = 0; off < n; off += TP__CHUNK) {
            int64_t m = n - off < TP__CHUNK ? n - off : TP__CHUNK;
            for (int64_t i = 0; i < m; i++) buf[i] = tp__f64_to_i64(src[off + i]);
            tp__store_i64(dst + off * stride, stride, buf, m, dtype);
        }
        break;
    }
    }
}

void tp__store_i64(char *dst, int64_t stride, const int64_t *src, int64_t n, tp_dtype dtype) {
    /* Narrowing goes through the unsigned type: modular, never undefined. */
    switch (dtype) {
    case TP_DTYPE_INT8: for (int64_t i = 0; i < n; i++) STORE_AS(int8_t, dst + i * stride, (uint8_t)src[i]); break;
    case TP_DTYPE_INT16: for (int64_t i = 0; i < n; i++) STORE_AS(int16_t, dst + i * stride, (uint16_t)src[i]); break;
    case TP_DTYPE_INT32: for (int64_t i = 0; i < n; i++) STORE_AS(int32_t, dst + i * stride, (uint32_t)src[i]); break;
    case TP_DTYPE_INT64: for (int64_t i = 0; i < n; i++) STORE_AS(int64_t, dst + i * stride, src[i]); break;
    case TP_DTYPE_UINT8: for (int64_t i = 0; i < n; i++) STORE_AS(uint8_t, dst + i * stride, (uint8_t)src[i]); break;
    case TP_DTYPE_BOOL: for (int64_t i = 0; i < n; i++) STORE_AS(uint8_t, dst + i * stride, src[i] != 0); break;
    default: {
        double buf[TP__CHUNK];
        for (int64_t off = 0; off < n; off += TP__CHUNK) {
            int64_t m = n - off < TP__CHUNK ? n - off : TP__CHUNK;
            for (int64_t i = 0; i < m; i++) buf[i] = (double)src[off + i];
            tp__store_f64(dst + off * stride, stride, buf, m, dtype);
        }
        break;
    }
    }
}

double tp__get_f64(const char *p, tp_dtype dtype) {
    double v;
    tp__load_f64(&v, p, 0, 1, dtype);
    return v;
}

void tp__set_f64(char *p, tp_dtype dtype, double value) {
    tp__store_f64(p, 0, &value, 1, dtype);
}

// ----------------------------------------------------------------------------
// the iterator

void tp__iter_init(tp__iter *it, int ndim, const int64_t *shape, int nops, const tp__view *ops) {
    int64_t sizes[TP_MAX_DIMS];
    int64_t strides[TP__ITER_MAX_OPS][TP_MAX_DIMS];
    it->nops = nops;
    it->numel = 1;
    for (int d = 0; d < ndim; d++) it->numel *= shape[d];
    for (int k = 0; k < nops; k++) it->data[k] = ops[k].data;

    /* Broadcast every operand to shape, dropping dims of size 1. */
    int n = 0;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] == 1) continue;
        sizes[n] = shape[d];
        for (int k = 0; k < nops; k++) {
            int od = d - (ndim - ops[k].ndim);
            int64_t isz = tp__itemsize(ops[k].dtype);
            if (od < 0 || ops[k].sizes[od] == 1) strides[k][n] = 0;
            else strides[k][n] = ops[k].strides[od] * isz;
        }
        n++;
    }
    /* Merge dim i into the run below it when every operand steps through
     * both as one: the row-major linear order is unchanged by this. */
    int m = 0;
    for (int d = 0; d < n; d++) {
        if (m > 0) {
            bool merge = true;
            for (int k = 0; k < nops && merge; k++)
                merge = it->strides[k][m - 1] == strides[k][d] * sizes[d];
            if (merge) {
                it->sizes[m - 1] *= sizes[d];
                for (int k = 0; k < nops; k++) it->strides[k][m - 1] = strides[k][d];
                continue;
            }
        }
        it->sizes[m] = sizes[d];
        for (int k = 0; k < nops; k++) it->strides[k][m] = strides[k][d];
        m++;
    }
    it->ndim = m;
}

void tp__iter_for_range(const tp__iter *it, int64_t begin, int64_t end, tp__loop_fn fn, void *ctx) {
    if (begin >= end) return;
    char *ptrs[TP__ITER_MAX_OPS];
    int64_t inner[TP__ITER_MAX_OPS];
    if (it->ndim == 0) {
        for (int k = 0; k < it->nops; k++) {
            ptrs[k] = it->data[k];
            inner[k] = 0;
        }
        fn(ptrs, inner, 1, ctx);
        return;
    }
    int last = it->ndim - 1;
    int64_t idx[TP_MAX_DIMS];
    int64_t rem = begin;
    for (int d = last; d >= 0; d--) {
        idx[d] = rem % it->sizes[d];
        rem /= it->sizes[d];
    }
    for (int k = 0; k < it->nops; k++) inner[k] = it->strides[k][last];
    int64_t pos = begin;
    while (pos < end) {
        for (int k = 0; k < it->nops; k++) {
            char *p = it->data[k];
            for (int d = 0; d <= last; d++) p += idx[d] * it->strides[k][d];
            ptrs[k] = p;
        }
        int64_t n = it->sizes[last] - idx[last];
        if (n > end - pos) n = end - pos;
        fn(ptrs, inner, n, ctx);
        pos += n;
        idx[last] += n;
        for (int d = last; d > 0 && idx[d] == it->sizes[d]; d--) {
            idx[d] = 0;
            idx[d - 1]++;
        }
    }
}

typedef struct iter_job {
    const tp__iter *it;
    tp__loop_fn fn;
    void *ctx;
} iter_job;

static void iter_job_range(int64_t begin, int64_t end, void *ctx) {
    iter_job *job = ctx;
    tp__iter_for_range(job->it, begin, end, job->fn, job->ctx);
}

// Transposed operands: a 2-D iteration where some operand's inner stride is
// larger than its outer one would touch a new cache line per element.
// Walking TILE x TILE blocks (runs of TILE along the inner dim, TILE rows at
// a time) reuses each line across rows instead.

#define TILE 32

static int64_t abs64(int64_t x) { return x < 0 ? -x : x; }

static bool iter_wants_tiles(const tp__iter *it) {
    if (it->ndim != 2 || it->sizes[0] < 2 * TILE || it->sizes[1] < 2 * TILE) return false;
    for (int k = 0; k < it->nops; k++)
        if (it->strides[k][0] != 0 && abs64(it->strides[k][1]) > abs64(it->strides[k][0])) return true;
    return false;
}

static void tile_rows(int64_t begin, int64_t end, void *ctx) {
    iter_job *job = ctx;
    const tp__iter *it = job->it;
    int64_t rows = it->sizes[0], cols = it->sizes[1];
    char *ptrs[TP__ITER_MAX_OPS];
    int64_t inner[TP__ITER_MAX_OPS];
    for (int k = 0; k < it->nops; k++) inner[k] = it->strides[k][1];
    for (int64_t rb = begin; rb < end; rb++) {
        int64_t r0 = rb * TILE, r1 = r0 + TILE < rows ? r0 + TILE : rows;
        for (int64_t c0 = 0; c0 < cols; c0 += TILE) {
            int64_t n = cols - c0 < TILE ? cols - c0 : TILE;
            for (int64_t r = r0; r < r1; r++) {
                for (int k = 0; k < it->nops; k++)
                    ptrs[k] = it->data[k] + r * it->strides[k][0] + c0 * it->strides[k][1];
                job->fn(ptrs, inner, n, job->ctx);
            }
        }
    }
}

void tp__iter_run(const tp__iter *it, tp__loop_fn fn, void *ctx) {
    if (iter_wants_tiles(it)) {
        iter_job job = {it, fn, ctx};
        int64_t blocks = (it->sizes[0] + TILE - 1) / TILE;
        if (it->numel < 2 * TP__PARALLEL_GRAIN || tp_get_num_threads() <= 1) {
            tile_rows(0, blocks, &job);
        } else {
            int64_t per_block = TILE * it->sizes[1];
            tp__parallel_for(blocks, (TP__PARALLEL_GRAIN + per_block - 1) / per_block, tile_rows, &job);
        }
        return;
    }
    if (it->numel < 2 * TP__PARALLEL_GRAIN || tp_get_num_threads() <= 1) {
        tp__iter_for_range(it, 0, it->numel, fn, ctx);
        return;
    }
    iter_job job = {it, fn, ctx};
    tp__parallel_for(it->numel, TP__PARALLEL_GRAIN, iter_job_range, &job);
}

// ----------------------------------------------------------------------------
// copying

static void copy_same_loop(char **ptrs, const int64_t *strides, int64_t n, void *ctx) {
    size_t isz = *(const size_t *)ctx;
    char *d = ptrs[0];
    const char *s = ptrs[1];
    if (strides[0] == (int64_t)isz && strides[1] == (int64_t)isz) {
        memcpy(d, s, (size_t)n * isz);
        return;
    }
    switch (isz) {
    case 1: for (int64_t i = 0; i < n; i++) d[i * strides[0]] = s[i * strides[1]]; break;
    case 2: for (int64_t i = 0; i < n; i++) memcpy(d + i * strides[0], s + i * strides[1], 2); break;
    case 4: for (int64_t i = 0; i < n; i++) memcpy(d + i * strides[0], s + i * strides[1], 4); break;
    default: for (int64_t i = 0; i < n; i++) memcpy(d + i * strides[0], s + i * strides[1], isz); break;
    }
}

typedef struct convert_ctx {
    tp_dtype dst, src;
    bool via_int; /* both integral/bool: exact through int64 */
} convert_ctx;

static void copy_convert_loop(char **ptrs, const int64_t *strides, int64_t n, void *ctx) {
    const convert_ctx *c = ctx;
    for (int64_t off = 0; off < n; off += TP__CHUNK) {
        int64_t m = n - off < TP__CHUNK ? n - off : TP__CHUNK;
        if (c->via_int) {
            int64_t buf[TP__CHUNK];
            tp__load_i64(buf, ptrs[1] + off * strides[1], strides[1], m, c->src);
            tp__store_i64(ptrs[0] + off * strides[0], strides[0], buf, m, c->dst);
        } else {
            double buf[TP__CHUNK];
            tp__load_f64(buf, ptrs[1] + off * strides[1], strides[1], m, c->src);
            tp__store_f64(ptrs[0] + off * strides[0], strides[0], buf, m, c->dst);
        }
    }
}

void tp__copy_views(const tp__view *dst, const tp__view *src) {
    tp__iter it;
    tp__view ops[2] = {*dst, *src};
    tp__iter_init(&it, dst->ndim, dst->sizes, 2, ops);
    if (it.numel == 0) return;
    if (dst->dtype == src->dtype) {
        size_t isz = tp_dtype_itemsize(dst->dtype);
        tp__iter_run(&it, copy_same_loop, &isz);
    } else {
        convert_ctx c = {dst->dtype, src->dtype,
                         tp__is_integral(dst->dtype) && tp__is_integral(src->dtype)};
        tp__iter_run(&it, copy_convert_loop, &c);
    }
}
