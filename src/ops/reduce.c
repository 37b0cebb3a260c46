/*
 * src/ops/reduce.c - sum, mean, max, min (over any set of dims, keepdim)
 * and argmax (one dim).
 *
 * The input is looked at through a permuted view whose kept dims come
 * first and reduced dims last, so output element o reduces the linear
 * range [o*R, (o+1)*R) of one iterator.  Floating inputs accumulate in
 * double, integral ones in int64 (wrapping); max/min propagate NaN and
 * argmax returns the first maximum, as PyTorch does.  Work is split over
 * outputs, or, when there are fewer outputs than threads, over chunks of
 * each reduction whose partial results are combined in order (so results
 * do not depend on the thread count for integer sums and max/min).
 *
 * Reductions over outer dims (kept dims innermost in memory) instead walk
 * the input in memory order into per-thread accumulator arrays.
 *
 * This file does not allocate anything but the result and scratch
 * (partials or accumulator arrays).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include "ops_internal.h"

// ----------------------------------------------------------------------------
// accumulation state

typedef enum red_kind { RED_SUM, RED_MEAN, RED_MAX, RED_MIN, RED_ARGMAX } red_kind;

static const char *red_name(red_kind k) {
    static const char *names[] = {"sum", "mean", "max", "min", "argmax"};
    return names[k];
}

typedef struct red_state {
    double f;     /* floating inputs */
    int64_t i;    /* integral inputs */
    int64_t idx;  /* position of f/i within the reduction (max/min/argmax) */
    bool any;     /* false until the first element */
} red_state;

typedef struct red_job {
    red_kind kind;
    tp_dtype dtype;   /* input dtype */
    bool fp;
    tp__iter it;
    int64_t R;        /* elements per output */
    int64_t nout;
    int64_t nsplit;   /* chunks per reduction (1 = whole) */
    red_state *partials;
    char *out;        /* contiguous result data */
    tp_dtype out_dtype;
} red_job;

typedef struct red_run {
    const red_job *job;
    red_state s;
    int64_t pos; /* position within the reduction of the next run */
} red_run;

static bool wants_max(red_kind k) { return k == RED_MAX || k == RED_ARGMAX; }

/* Does x (at pos) replace the current best?  NaN wins once and then stays. */
static inline bool better_f(bool max, double x, const red_state *s) {
    if (!s->any) return true;
    if (s->f != s->f) return false;
    if (x != x) return true;
    return max ? x > s->f : x < s->f;
}

static inline bool better_i(bool max, int64_t x, const red_state *s) {
    if (!s->any) return true;
    return max ? x > s->i : x < s->i;
}

static void red_loop(char **ptrs, const int64_t *strides, int64_t n, void *vctx) {
    red_run *r = vctx;
    const red_job *j = r->job;
    red_state *s = &r->s;
    const char *p = ptrs[0];
    int64_t st = strides[0];
    bool sum = j->kind == RED_SUM || j->kind == RED_MEAN;
    if (sum && j->dtype == TP_DTYPE_FLOAT32 && st == 4 && ((uintptr_t)p % 4) == 0) {
        /* eight independent sums: not bound by the latency of one add chain */
        const float *x = (const float *)p;
        double acc[8] = {0};
        int64_t i = 0;
        for (; i + 8 <= n; i += 8)
            for (int k = 0; k < 8; k++) acc[k] += x[i + k];
        double tail = 0;
        for (; i < n; i++) tail += x[i];
        s->f += ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7])) + tail;
        s->any = true;
        r->pos += n;
        return;
    }
    bool max = wants_max(j->kind);
    for (int64_t off = 0; off < n; off += TP__CHUNK) {
        int64_t m = n - off < TP__CHUNK ? n - off : TP__CHUNK;
        if (j->fp) {
            double x[TP__CHUNK];
            tp__load_f64(x, p + off * st, st, m, j->dtype);
            if (sum) {
                for (int64_t i = 0; i < m; i++) s->f += x[i];
                s->any = true;
            } else {
                for (int64_t i = 0; i < m; i++)
                    if (better_f(max, x[i], s)) {
                        s->f = x[i];
                        s->idx = r->pos + off + i;
                        s->any = true;
                    }
            }
        } else {
            int64_t x[TP__CHUNK];
            tp__load_i64(x, p + off * st, st, m, j->dtype);
            if (sum) {
                uint64_t acc = (uint64_t)s->i;
                for (int64_t i = 0; i < m; i++) acc += (uint64_t)x[i];
                s->i = (int64_t)acc;
                s->any = true;
            } else {
                for (int64_t i = 0; i < m; i++)
                    if (better_i(max, x[i], s)) {
                        s->i = x[i];
                        s->idx = r->pos + off + i;
                        s->any = true;
                    }
            }
        }
    }
    r->pos += n;
}

/* Folds b (covering later positions) into a. */
static void red_combine(const red_job *j, red_state *a, const red_state *b) {
    if (!b->any) return;
    if (!a->any) {
        *a = *b;
        return;
    }
    if (j->kind == RED_SUM || j->kind == RED_MEAN) {
        a->f += b->f;
        a->i = (int64_t)((uint64_t)a->i + (uint64_t)b->i);
        return;
    }
    bool max = wants_max(j->kind);
    if (j->fp ? better_f(max, b->f, a) : better_i(max, b->i, a)) *a = *b;
}

static red_state red_range(const red_job *j, int64_t o, int64_t begin, int64_t end) {
    red_run r = {.job = j, .pos = begin};
    tp__iter_for_range(&j->it, o * j->R + begin, o * j->R + end, red_loop, &r);
    return r.s;
}

static void red_write(const red_job *j, int64_t o, const red_state *s) {
    char *p = j->out + o * tp__itemsize(j->out_dtype);
    if (j->kind == RED_ARGMAX) {
        tp__store_i64(p, 0, &s->idx, 1, j->out_dtype);
    } else if (j->kind == RED_MEAN) {
        double v = s->f / (double)j->R;
        tp__store_f64(p, 0, &v, 1, j->out_dtype);
    } else if (j->fp) {
        tp__store_f64(p, 0, &s->f, 1, j->out_dtype);
    } else {
        tp__store_i64(p, 0, &s->i, 1, j->out_dtype);
    }
}

static void red_outputs(int64_t begin, int64_t end, void *ctx) {
    const red_job *j = ctx;
    for (int64_t o = begin; o < end; o++) {
        red_state s = red_range(j, o, 0, j->R);
        red_write(j, o, &s);
    }
}

static void red_chunks(int64_t begin, int64_t end, void *ctx) {
    const red_job *j = ctx;
    int64_t per = (j->R + j->nsplit - 1) / j->nsplit;
    for (int64_t t = begin; t < end; t++) {
        int64_t o = t / j->nsplit, c = t % j->nsplit;
        int64_t b = c * per, e = b + per < j->R ? b + per : j->R;
        j->partials[t] = b < e ? red_range(j, o, b, e) : (red_state){0};
    }
}

// ----------------------------------------------------------------------------
// column reductions: kept dims innermost in memory (e.g. sum over dim 0 of a
// row-major matrix).  Walking one output at a time would stride through
// memory; instead the input is walked in memory order and every element is
// folded into an accumulator array of nout values (double or int64), one
// array per thread, combined in order at the end.

typedef struct col_job {
    const red_job *j;
    tp__iter it;       /* operands: accumulator (stride 0 on reduced dims), input */
    int64_t nchunks;
    char *accs;        /* nchunks arrays of nout 8-byte accumulators */
} col_job;

static void col_loop(char **ptrs, const int64_t *strides, int64_t n, void *vctx) {
    const red_job *j = vctx;
    int64_t sa = strides[0] / 8;
    bool sum = j->kind == RED_SUM || j->kind == RED_MEAN, max = j->kind == RED_MAX;
    for (int64_t off = 0; off < n; off += TP__CHUNK) {
        int64_t m = n - off < TP__CHUNK ? n - off : TP__CHUNK;
        const char *p = ptrs[1] + off * strides[1];
        if (j->fp) {
            double x[TP__CHUNK];
            double *acc = (double *)(void *)(ptrs[0] + off * strides[0]);
            tp__load_f64(x, p, strides[1], m, j->dtype);
            if (sum) {
                for (int64_t i = 0; i < m; i++) acc[i * sa] += x[i];
            } else {
                for (int64_t i = 0; i < m; i++) {
                    double *a = &acc[i * sa];
                    if (*a != *a) continue; /* NaN sticks */
                    if (x[i] != x[i] || (max ? x[i] > *a : x[i] < *a)) *a = x[i];
                }
            }
        } else {
            int64_t x[TP__CHUNK];
            int64_t *acc = (int64_t *)(void *)(ptrs[0] + off * strides[0]);
            tp__load_i64(x, p, strides[1], m, j->dtype);
            if (sum) {
                for (int64_t i = 0; i < m; i++) acc[i * sa] = (int64_t)((uint64_t)acc[i * sa] + (uint64_t)x[i]);
            } else {
                for (int64_t i = 0; i < m; i++)
                    if (max ? x[i] > acc[i * sa] : x[i] < acc[i * sa]) acc[i * sa] = x[i];
            }
        }
    }
}

static void col_chunks(int64_t begin, int64_t end, void *ctx) {
    col_job *c = ctx;
    int64_t per = (c->it.numel + c->nchunks - 1) / c->nchunks;
    for (int64_t k = begin; k < end; k++) {
        tp__iter it = c->it;
        it.data[0] = c->accs + k * c->j->nout * 8;
        int64_t b = k * per, e = b + per < it.numel ? b + per : it.numel;
        tp__iter_for_range(&it, b, e, col_loop, (void *)c->j);
    }
}

/* True if the input's innermost memory dim is kept, so a column walk pays. */
static bool columns_pay(const tp__view *in, const bool *reduced, red_kind kind, int64_t nout) {
    if (kind == RED_ARGMAX || nout < 2) return false;
    int inner = -1;
    int64_t best = INT64_MAX;
    for (int d = 0; d < in->ndim; d++) {
        int64_t s = in->strides[d] < 0 ? -in->strides[d] : in->strides[d];
        if (in->sizes[d] > 1 && s < best) {
            best = s;
            inner = d;
        }
    }
    return inner >= 0 && !reduced[inner];
}

/* Returns false (nothing written) if the accumulators cannot be allocated. */
static bool reduce_columns(const red_job *j, const tp__view *in, const bool *reduced) {
    int threads = tp_get_num_threads();
    int64_t total = j->nout * j->R;
    col_job c = {.j = j, .nchunks = threads > 1 && total >= 2 * TP__PARALLEL_GRAIN ? threads : 1};
    /* one accumulator array per chunk: keep the extra arrays under 64 MiB */
    int64_t fit = (INT64_C(64) << 20) / (j->nout * 8);
    if (c.nchunks > 1 && c.nchunks > fit) c.nchunks = fit > 1 ? fit : 1;
    c.accs = malloc((size_t)(c.nchunks * j->nout) * 8);
    if (!c.accs) return false;
    for (int64_t k = 0; k < c.nchunks * j->nout; k++) {
        char *a = c.accs + k * 8;
        if (j->fp) {
            double v = j->kind == RED_MAX ? -INFINITY : j->kind == RED_MIN ? INFINITY : 0.0;
            memcpy(a, &v, 8);
        } else {
            int64_t v = j->kind == RED_MAX ? INT64_MIN : j->kind == RED_MIN ? INT64_MAX : 0;
            memcpy(a, &v, 8);
        }
    }
    /* accumulator geometry: contiguous over kept dims, stride 0 on reduced */
    tp__view acc = {.data = c.accs, .ndim = in->ndim, .dtype = j->fp ? TP_DTYPE_FLOAT64 : TP_DTYPE_INT64};
    int64_t stride = 1;
    for (int d = in->ndim - 1; d >= 0; d--) {
        acc.sizes[d] = in->sizes[d];
        acc.strides[d] = reduced[d] ? 0 : stride;
        if (!reduced[d]) stride *= in->sizes[d];
    }
    tp__view ops[2] = {acc, *in};
    tp__iter_init(&c.it, in->ndim, in->sizes, 2, ops);
    tp__parallel_for(c.nchunks, 1, col_chunks, &c);
    for (int64_t o = 0; o < j->nout; o++) {
        red_state s = {.any = true};
        for (int64_t k = 0; k < c.nchunks; k++) {
            red_state part = {.any = true};
            memcpy(j->fp ? (void *)&part.f : (void *)&part.i, c.accs + (k * j->nout + o) * 8, 8);
            if (k == 0) s = part;
            else red_combine(j, &s, &part);
        }
        red_write(j, o, &s);
    }
    free(c.accs);
    return true;
}

// ----------------------------------------------------------------------------
// the driver

static tp_tensor *reduce(red_kind kind, const tp_tensor *t, int ndims, const int *dims, bool keepdim) {
    const char *name = red_name(kind);
    if (!t) {
        tp__error(TP_STATUS_INVALID_ARGUMENT, "%s(): tensor is NULL", name);
        return NULL;
    }
    int nd = t->ndim;
    bool reduced[TP_MAX_DIMS] = {false};
    bool all = ndims <= 0 || !dims;
    if (!all) {
        if (ndims > (nd > 0 ? nd : 1)) {
            tp__error(TP_STATUS_INVALID_ARGUMENT, "%s(): got %d dims for a %d-d tensor", name, ndims, nd);
            return NULL;
        }
        for (int k = 0; k < ndims; k++) {
            int d = tp__wrap_dim(dims[k], nd > 0 ? nd : 1);
            if (d < 0) return NULL;
            if (nd == 0) continue;
            if (reduced[d]) {
                tp__error(TP_STATUS_INVALID_ARGUMENT, "dim %d appears multiple times in the list of dims", d);
                return NULL;
            }
            reduced[d] = true;
        }
    } else {
        for (int d = 0; d < nd; d++) reduced[d] = true;
    }

    tp_dtype out_dtype = t->dtype;
    if (kind == RED_SUM && !tp_dtype_is_floating(t->dtype)) out_dtype = TP_DTYPE_INT64;
    if (kind == RED_ARGMAX) out_dtype = TP_DTYPE_INT64;
    if (kind == RED_MEAN && !tp_dtype_is_floating(t->dtype)) {
        tp__error(TP_STATUS_INVALID_ARGUMENT,
                  "mean(): could not infer output dtype. Input dtype must be either a floating "
                  "point or complex dtype. Got: %s", tp__dtype_scalar_name(t->dtype));
        return NULL;
    }

    /* permuted geometry: kept dims, then reduced dims */
    tp__view in = tp__view_of(t), perm = in;
    int64_t out_sizes[TP_MAX_DIMS];
    int n_out = 0, k = 0;
    int64_t nout = 1, R = 1;
    for (int d = 0; d < nd; d++) {
        if (reduced[d]) {
            if (keepdim) out_sizes[n_out++] = 1;
            R *= t->sizes[d];
            continue;
        }
        out_sizes[n_out++] = t->sizes[d];
        perm.sizes[k] = t->sizes[d];
        perm.strides[k++] = t->strides[d];
        nout *= t->sizes[d];
    }
    for (int d = 0; d < nd; d++)
        if (reduced[d]) {
            perm.sizes[k] = t->sizes[d];
            perm.strides[k++] = t->strides[d];
        }

    if (R == 0 && nout > 0 && kind != RED_SUM && kind != RED_MEAN) {
        if (all)
            tp__error(TP_STATUS_INVALID_ARGUMENT,
                      "%s(): Expected reduction dim to be specified for input.numel() == 0. "
                      "Specify the reduction dim with the 'dim' argument.", name);
        else
            for (int d = 0; d < nd; d++)
                if (reduced[d] && t->sizes[d] == 0) {
                    tp__error(TP_STATUS_INVALID_ARGUMENT,
                              "%s(): Expected reduction dim %d to have non-zero size.", name, d);
                    break;
                }
        return NULL;
    }

    tp_tensor *out = tp__empty_device(t->device, n_out, out_sizes, out_dtype);
    if (!out) return NULL;
    if (nout == 0) return out;
    if (!tp__is_cpu(t->device)) {
        if (tp__dev_reduce(t->device, (int)kind, tp_tensor_data(out), out_dtype, &in, reduced))
            tp_tensor_release(out), out = NULL;
        return out;
    }

    red_job j = {.kind = kind, .dtype = t->dtype, .fp = tp_dtype_is_floating(t->dtype), .R = R,
                 .nout = nout, .nsplit = 1, .out = tp_tensor_data(out), .out_dtype = out_dtype};
    tp__iter_init(&j.it, nd, perm.sizes, 1, &perm);

    if (columns_pay(&in, reduced, kind, nout) && reduce_columns(&j, &in, reduced)) return out;

    int threads = tp_get_num_threads();
    int64_t total = nout * R;
    if (threads > 1 && nout < threads && total >= 2 * TP__PARALLEL_GRAIN) {
        /* Few outputs, long reductions: split each one into chunks. */
        j.nsplit = threads;
        j.partials = calloc((size_t)(nout * j.nsplit), sizeof *j.partials);
    }
    if (j.partials) {
        tp__parallel_for(nout * j.nsplit, 1, red_chunks, &j);
        for (int64_t o = 0; o < nout; o++) {
            red_state s = {0};
            for (int64_t c = 0; c < j.nsplit; c++) red_combine(&j, &s, &j.partials[o * j.nsplit + c]);
            red_write(&j, o, &s);
        }
        free(j.partials);
    } else {
        /* A failed calloc only costs parallelism. */
        int64_t grain = R > 0 ? (TP__PARALLEL_GRAIN + R - 1) / R : nout;
        tp__parallel_for(nout, grain, red_outputs, &j);
    }
    return out;
}

// ----------------------------------------------------------------------------
// public entry points

tp_tensor *tp_sum(const tp_tensor *t, int ndims, const int *dims, bool keepdim) {
    return reduce(RED_SUM, t, ndims, dims, keepdim);
}

tp_tensor *tp_mean(const tp_tensor *t, int ndims, const int *dims, bool keepdim) {
    return reduce(RED_MEAN, t, ndims, dims, keepdim);
}

tp_tensor *tp_max(const tp_tensor *t, int ndims, const int *dims, bool keepdim) {
    return reduce(RED_MAX, t, ndims, dims, keepdim);
}

tp_tensor *tp_min(const tp_tensor *t, int ndims, const int *dims, bool keepdim) {
    return reduce(RED_MIN, t, ndims, dims, keepdim);
}

tp_tensor *tp_argmax(const tp_tensor *t, int dim, bool keepdim) {
    return reduce(RED_ARGMAX, t, 1, &dim, keepdim);
}
