/*
 * src/autograd/functions/softmax.c - softmax, log_softmax and mean
 * cross-entropy over class indices.
 *
 * Cross-entropy is one node (PyTorch: log_softmax + nll_loss, two): the
 * forward computes each row's log-sum-exp with the row maximum subtracted
 * and saves the logits and targets; the backward is
 * (softmax(logits) - onehot(target)) * g / N, recomputed from the logits,
 * so the graph keeps one (N, C) tensor, not two.
 */
#include <math.h>

#include "kernels.h"

// ----------------------------------------------------------------------------
// softmax / log_softmax (iarg[0] = dim, iarg[1] = log; saved 0 = output)

static tp_status softmax_backward(tp__node *n, tp_tensor *g, tp_tensor **out) {
    tp_tensor *y = tp__node_unpack(n, 0);
    if (!y) return tp_last_status();
    out[0] = tp__softmax_backward(g, y, (int)n->iarg[0], n->iarg[1]);
    return out[0] ? TP_STATUS_OK : tp_last_status();
}

static tp_status softmax_fill(tp__node *n, tp_tensor *out, void *vctx) {
    int *c = vctx;
    n->iarg[0] = tp__wrap_dim(c[0], out->ndim);
    n->iarg[1] = c[1];
    return tp__node_save(n, out, true);
}

static tp_tensor *softmax(tp_tensor *t, int dim, bool log) {
    if (!t) {
        tp__error(TP_STATUS_INVALID_ARGUMENT, "softmax: tensor is NULL");
        return NULL;
    }
    int c[2] = {dim, log};
    return tp__record(tp__softmax(t, dim, log), log ? "LogSoftmaxBackward0" : "SoftmaxBackward0",
                      softmax_backward, 1, &t, softmax_fill, c);
}

tp_tensor *tp_ag_softmax(tp_tensor *t, int dim) { return softmax(t, dim, false); }
tp_tensor *tp_ag_log_softmax(tp_tensor *t, int dim) { return softmax(t, dim, true); }

// ----------------------------------------------------------------------------
// cross-entropy (saved 0 = logits as (N, C), 1 = targets as int64 (N))

#define CE_FORWARD(T, EXP, LOG)                                                   \
    do {                                                                         \
        const T *x = (const T *)tp_tensor_data(xc);                              \
        for (int64_t r = 0; r < rows; r++, x += classes) {                       \
            T mx = x[0];                                                         \
            for (int64_t k = 1; k < classes; k++) mx = x[k] > mx ? x[k] : mx;    \
            double s = 0;                                                        \
            for (int64_t k = 0; k < classes; k++) s += (double)EXP(x[k] - mx);   \
            total += (double)mx + log(s) - (double)x[tg[r]];                    \
        }                                                                        \
    } while (0)

#define CE_BACKWARD(T, EXP)                                                       \
    do {                                                                         \
        const T *x = (const T *)tp_tensor_data(xc);                              \
        T *o = (T *)tp_tensor_data(gx);                                          \
        for (int64_t r = 0; r < rows; r++, x += classes, o += classes) {         \
            T mx = x[0];                                                         \
            for (int64_t k = 1; k < classes; k++) mx = x[k] > mx ? x[k] : mx;    \
            double s = 0;                                                        \
            for (int64_t k = 0; k < classes; k++) s += (double)EXP(x[k] - mx);   \
            T inv = (T)(1.0 / s);                                                \
            for (int64_t k = 0; k < classes; k++) o[k] = EXP(x[k] - mx) * inv * (T)scale; \
            o[tg[r]] -= (T)scale;                                                \
        }                                                                        \
    } while (0)

static tp_status ce_backward(tp__node *n, tp_tensor *g, tp_tensor **out) {
    tp_tensor *xc = tp__node_unpack(n, 0), *tc = xc ? tp__node_unpack(n, 1) : NULL;
    if (!tc) return tp_last_status();
    double gv;
    tp_status st = tp_tensor_item(g, &gv);
    if (st != TP_STATUS_OK) return st;
    int64_t rows = xc->sizes[0], classes = xc->sizes[1];
    double scale = gv / (double)(rows ? rows : 1);
    tp_tensor *gx = tp_empty(2, xc->sizes, xc->dtype);
    if (!gx) return tp_last_status();
    const int64_t *tg = tp_tensor_data(tc);
    if (xc->dtype == TP_DTYPE_FLOAT32) CE_BACKWARD(float, expf);
    else CE_BACKWARD(double, exp);
    const tp__edge *e = &n->next[0];
    out[0] = tp_tensor_reshape(gx, e->ndim, e->sizes);
    tp_tensor_release(gx);
    return out[0] ? TP_STATUS_OK : tp_last_status();
}

typedef struct ce_ctx {
    tp_tensor *xc, *tc;
} ce_ctx;

static tp_status ce_fill(tp__node *n, tp_tensor *out, void *vctx) {
    (void)out;
    ce_ctx *c = vctx;
    tp_status st = tp__node_save(n, c->xc, false);
    return st == TP_STATUS_OK ? tp__node_save(n, c->tc, false) : st;
}

tp_tensor *tp_ag_cross_entropy(tp_tensor *logits, const tp_tensor *target) {
    if (!logits || !target) {
        tp__error(TP_STATUS_INVALID_ARGUMENT, "cross_entropy: logits or target is NULL");
        return NULL;
    }
    if (logits->dtype != TP_DTYPE_FLOAT32 && logits->dtype != TP_DTYPE_FLOAT64) {
        tp__error(TP_STATUS_UNSUPPORTED, "cross_entropy: logits must be float32 or float64, got %s",
                  tp_dtype_name(logits->dtype));
        return NULL;
    }
    if (target->dtype != TP_DTYPE_INT64) {
        tp__error(TP_STATUS_INVALID_ARGUMENT,
                  "expected scalar type Long but found %s", tp_dtype_name(target->dtype));
        return NULL;
    }
    bool batched = logits->ndim == 2;
    if (!(batched || logits->ndim == 1) || target->ndim != (batched ? 1 : 0) ||
        (batched && target->sizes[0] != logits->sizes[0])) {
        char ls[256], ts[256];
        tp__error(TP_STATUS_INVALID_ARGUMENT,
                  "cross_entropy: expected logits (N, C) with targets (N), or (C) with a 0-d "
                  "target; got %s and %s",
                  tp__format_shape(logits->ndim, logits->sizes, ls, sizeof ls),
                  tp__format_shape(target->ndim, target->sizes, ts, sizeof ts));
        return NULL;
    }
    int64_t rows = batched ? logits->sizes[0] : 1, classes = logits->sizes[batched ? 1 : 0];
    tp_tensor *x2 = tp_tensor_reshape(logits, 2, (int64_t[]){rows, classes});
    tp_tensor *xc = x2 ? tp_contiguous(x2) : NULL;
    tp_tensor *t1 = tp_tensor_reshape((tp_tensor *)target, 1, (int64_t[]){rows});
    tp_tensor *tc = t1 ? tp_contiguous(t1) : NULL;
    tp_tensor_release(x2);
    tp_tensor_release(t1);
    tp_tensor *out = NULL;
    if (!xc || !tc) goto done;
    const int64_t *tg = tp_tensor_data(tc);
    for (int64_t r = 0; r < rows; r++)
        if (tg[r] < 0 || tg[r] >= classes) {
            tp__error(TP_STATUS_OUT_OF_BOUNDS, "Target %lld is out of bounds.", (long long)tg[r]);
            goto done;
        }
    if (classes == 0 && rows > 0) {
        tp__error(TP_STATUS_INVALID_ARGUMENT, "cross_entropy: no classes");
        goto done;
    }
    double total = 0;
    if (logits->dtype == TP_DTYPE_FLOAT32) CE_FORWARD(float, expf, logf);
    else CE_FORWARD(double, exp, log);
    out = tp_full(0, NULL, rows ? total / (double)rows : NAN, logits->dtype);
    ce_ctx c = {xc, tc};
    out = tp__record(out, "NllLossBackward0", ce_backward, 1, &logits, ce_fill, &c);
done:
    tp_tensor_release(xc);
    tp_tensor_release(tc);
    return out;
}
