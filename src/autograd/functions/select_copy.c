/*
 * src/autograd/functions/select_copy.c - the ops whose gradient is the
 * incoming one routed or passed through: where, amax/amin over dims
 * (tp_max/tp_min), and the copies (clone, contiguous, to_dtype).
 *
 *   where(c, a, b):  da = where(c, g, 0),  db = where(c, 0, g)   (summed to shape)
 *   max/min over dims: the gradient shared evenly among the elements equal
 *     to the result (PyTorch's amax/amin rule for ties)
 *   copies: the gradient itself (the engine converts it to the input's dtype)
 */
#include "kernels.h"

// ----------------------------------------------------------------------------
// where (saved 0 = cond)

static tp_status where_backward(tp__node *n, tp_tensor *g, tp_tensor **out) {
    tp_tensor *cond = tp__node_unpack(n, 0);
    if (!cond) return tp_last_status();
    tp_tensor *zero = tp_zeros(0, NULL, g->dtype);
    if (!zero) return tp_last_status();
    tp_status st = TP_STATUS_OK;
    for (int i = 0; i < 2 && st == TP_STATUS_OK; i++) {
        if (!tp__edge_wants(n, i + 1)) continue;
        tp_tensor *r = i == 0 ? tp_where(cond, g, zero) : tp_where(cond, zero, g);
        out[i + 1] = r ? tp__sum_to(r, n->next[i + 1].ndim, n->next[i + 1].sizes) : NULL;
        tp_tensor_release(r);
        if (!out[i + 1]) st = tp_last_status();
    }
    tp_tensor_release(zero);
    return st;
}

static tp_status where_fill(tp__node *n, tp_tensor *out, void *ctx) {
    (void)out;
    return tp__node_save(n, ctx, false);
}

tp_tensor *tp_ag_where(const tp_tensor *cond, tp_tensor *a, tp_tensor *b) {
    /* cond is an input without a gradient: its edge stays empty */
    return tp__record(tp_where(cond, a, b), "WhereBackward0", where_backward, 3,
                      (tp_tensor *[]){(tp_tensor *)cond, a, b}, where_fill, (void *)cond);
}

// ----------------------------------------------------------------------------
// max / min over dims (saved 0 = input, 1 = output; iarg as in reduce.c:
// [1] keepdim, [2] ndims, [3..] dims)

static tp_status extreme_backward(tp__node *n, tp_tensor *g, tp_tensor **out) {
    tp_tensor *x = tp__node_unpack(n, 0), *y = x ? tp__node_unpack(n, 1) : NULL;
    if (!y) return tp_last_status();
    const tp__edge *e = &n->next[0];
    int nd = (int)n->iarg[2];
    bool reduced[TP_MAX_DIMS] = {0};
    for (int i = 0; i < e->ndim; i++) reduced[i] = nd == 0;
    for (int i = 0; i < nd; i++) reduced[n->iarg[3 + i]] = true;
    int64_t kept[TP_MAX_DIMS];
    int dims[TP_MAX_DIMS], ndims = 0;
    for (int i = 0; i < e->ndim; i++) {
        kept[i] = reduced[i] ? 1 : e->sizes[i];
        if (reduced[i]) dims[ndims++] = i;
    }
    tp_tensor *yk = tp_tensor_reshape(y, e->ndim, kept);
    tp_tensor *gk = yk ? tp_tensor_reshape(g, e->ndim, kept) : NULL;
    tp_tensor *eq = gk ? tp_binary(TP_BINARY_OP_EQ, x, yk) : NULL;       /* bool, x's shape */
    tp_tensor *mask = eq ? tp_to_dtype(eq, g->dtype) : NULL;
    tp_tensor *count = mask ? (ndims ? tp_sum(mask, ndims, dims, true) : tp_tensor_retain(mask)) : NULL;
    tp_tensor *share = count ? tp_div(gk, count) : NULL;                 /* g / ties */
    out[0] = share ? tp_mul(mask, share) : NULL;
    tp_tensor *ts[] = {yk, gk, eq, mask, count, share};
    for (int i = 0; i < 6; i++) tp_tensor_release(ts[i]);
    return out[0] ? TP_STATUS_OK : tp_last_status();
}

typedef struct extreme_ctx {
    tp_tensor *x;
    int ndims;
    const int *dims;
    bool keepdim;
} extreme_ctx;

static tp_status extreme_fill(tp__node *n, tp_tensor *out, void *vctx) {
    extreme_ctx *c = vctx;
    n->iarg[1] = c->keepdim;
    n->iarg[2] = c->dims && c->x->ndim ? c->ndims : 0;
    for (int i = 0; i < n->iarg[2]; i++) {
        int d = tp__wrap_dim(c->dims[i], c->x->ndim);
        if (d < 0) return tp_last_status();
        n->iarg[3 + i] = d;
    }
    tp_status st = tp__node_save(n, c->x, false);
    return st == TP_STATUS_OK ? tp__node_save(n, out, true) : st;
}

static tp_tensor *extreme(bool max, tp_tensor *t, int ndims, const int *dims, bool keepdim) {
    tp_tensor *out = max ? tp_max(t, ndims, dims, keepdim) : tp_min(t, ndims, dims, keepdim);
    if (!out) return NULL;
    extreme_ctx c = {t, ndims > TP_MAX_DIMS ? TP_MAX_DIMS : ndims, ndims > 0 ? dims : NULL, keepdim};
    return tp__record(out, max ? "AmaxBackward0" : "AminBackward0", extreme_backward, 1, &t,
                      extreme_fill, &c);
}

tp_tensor *tp_ag_max(tp_tensor *t, int ndims, const int *dims, bool keepdim) {
    return extreme(true, t, ndims, dims, keepdim);
}

tp_tensor *tp_ag_min(tp_tensor *t, int ndims, const int *dims, bool keepdim) {
    return extreme(false, t, ndims, dims, keepdim);
}

// ----------------------------------------------------------------------------
// copies

static tp_status pass_backward(tp__node *n, tp_tensor *g, tp_tensor **out) {
    (void)n;
    out[0] = tp_tensor_retain(g);
    return TP_STATUS_OK;
}

tp_tensor *tp_ag_clone(tp_tensor *t) {
    return tp__record(tp_clone(t), "CloneBackward0", pass_backward, 1, &t, NULL, NULL);
}

tp_tensor *tp_ag_contiguous(tp_tensor *t) {
    tp_tensor *out = tp_contiguous(t);
    if (out == t) return out; /* t itself: no node, as PyTorch */
    return tp__record(out, "CloneBackward0", pass_backward, 1, &t, NULL, NULL);
}

tp_tensor *tp_ag_to_dtype(tp_tensor *t, tp_dtype dtype) {
    tp_tensor *out = tp_to_dtype(t, dtype);
    if (out == t) return out;
    if (out && t && t->requires_grad && !tp_dtype_is_floating(dtype) && tp__grad_enabled()) {
        out->requires_grad = false; /* an integral copy has no gradient */
        return out;
    }
    return tp__record(out, "ToCopyBackward0", pass_backward, 1, &t, NULL, NULL);
}
