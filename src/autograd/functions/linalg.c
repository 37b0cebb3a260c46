/*
 * src/autograd/functions/linalg.c - matmul (torch.matmul's cases: 1-D
 * operands promoted, batch dims broadcast), bmm, and linear as one node.
 *
 *   C = A @ B:  dA = dC @ B^T,  dB = A^T @ dC   (then summed over broadcast
 *   batch dims and the promoted 1-D dims dropped again)
 *   y = x @ W^T + b (x (M, in), W (out, in)):
 *       dx = dy @ W (M, in),  dW = dy^T @ x (out, in),  db = sum_rows(dy)
 * The transposes are views: the gemm reads them as they lie (CblasTrans).
 */
#include <string.h>

#include "kernels.h"

// ----------------------------------------------------------------------------
// matmul / bmm

/* a as a matrix operand: 1-D a is (1, k) on the left, (k, 1) on the right. */
static tp_tensor *as_matrix(tp_tensor *t, bool left) {
    if (t->ndim != 1) return tp_tensor_retain(t);
    return tp_tensor_unsqueeze(t, left ? 0 : 1);
}

/* Gradient of a promoted operand, back to the edge's shape. */
static tp_tensor *finish(tp__node *n, int i, tp_tensor *grad2) {
    if (!grad2) return NULL;
    const tp__edge *e = &n->next[i];
    tp_tensor *r;
    if (e->ndim == 1) { /* summed over any batch dims to (1, k) or (k, 1), then (k) */
        int64_t m2[2] = {i == 0 ? 1 : e->sizes[0], i == 0 ? e->sizes[0] : 1};
        tp_tensor *s = tp__sum_to(grad2, 2, m2);
        r = s ? tp_tensor_reshape(s, 1, e->sizes) : NULL;
        tp_tensor_release(s);
    } else {
        r = tp__sum_to(grad2, e->ndim, e->sizes);
    }
    tp_tensor_release(grad2);
    return r;
}

static tp_status matmul_backward(tp__node *n, tp_tensor *g, tp_tensor **out) {
    bool wa = tp__edge_wants(n, 0), wb = tp__edge_wants(n, 1);
    tp_tensor *a = wb ? tp__node_unpack(n, (int)n->iarg[0]) : NULL;
    tp_tensor *b = wa ? tp__node_unpack(n, (int)n->iarg[1]) : NULL;
    if ((wb && !a) || (wa && !b)) return tp_last_status();
    tp_status st = TP_STATUS_OK;
    tp_tensor *a2 = NULL, *b2 = NULL, *g2 = NULL, *at = NULL, *bt = NULL;
    const tp__edge *ea = &n->next[0], *eb = &n->next[1];
    /* g with the promoted dims back: the product of the promoted operands */
    int64_t gs[TP_MAX_DIMS + 2];
    int gnd = 0;
    for (int i = 0; i < g->ndim; i++) gs[gnd++] = g->sizes[i];
    if (ea->ndim == 1 && eb->ndim == 1) { gs[0] = 1; gs[1] = 1; gnd = 2; }
    else if (ea->ndim == 1) { memmove(gs + gnd - 1 + 1, gs + gnd - 1, sizeof gs[0]); gs[gnd - 1] = 1; gnd++; }
    else if (eb->ndim == 1) gs[gnd++] = 1;
    g2 = tp_tensor_reshape(g, gnd, gs);
    if (!g2) return tp_last_status();
    if (wa) {
        b2 = as_matrix(b, false);
        bt = b2 ? tp_tensor_transpose(b2, -1, -2) : NULL;
        out[0] = finish(n, 0, bt ? tp_matmul(g2, bt) : NULL);
        if (!out[0]) st = tp_last_status();
    }
    if (st == TP_STATUS_OK && wb) {
        a2 = as_matrix(a, true);
        at = a2 ? tp_tensor_transpose(a2, -1, -2) : NULL;
        out[1] = finish(n, 1, at ? tp_matmul(at, g2) : NULL);
        if (!out[1]) st = tp_last_status();
    }
    tp_tensor_release(a2);
    tp_tensor_release(b2);
    tp_tensor_release(at);
    tp_tensor_release(bt);
    tp_tensor_release(g2);
    return st;
}

typedef struct mm_ctx {
    tp_tensor *a, *b;
} mm_ctx;

static tp_status matmul_fill(tp__node *n, tp_tensor *out, void *vctx) {
    (void)out;
    mm_ctx *c = vctx;
    tp_status st = TP_STATUS_OK;
    if (tp__edge_wants(n, 1)) { n->iarg[0] = n->n_saved; st = tp__node_save(n, c->a, false); }
    if (st == TP_STATUS_OK && tp__edge_wants(n, 0)) { n->iarg[1] = n->n_saved; st = tp__node_save(n, c->b, false); }
    return st;
}

tp_tensor *tp_ag_matmul(tp_tensor *a, tp_tensor *b) {
    tp_tensor *out = tp_matmul(a, b);
    mm_ctx c = {a, b};
    const char *name = a && b && a->ndim == 2 && b->ndim == 2 ? "MmBackward0" : "MatmulBackward0";
    return tp__record(out, name, matmul_backward, 2, (tp_tensor *[]){a, b}, matmul_fill, &c);
}

tp_tensor *tp_ag_bmm(tp_tensor *a, tp_tensor *b) {
    tp_tensor *out = tp_bmm(a, b);
    mm_ctx c = {a, b};
    return tp__record(out, "BmmBackward0", matmul_backward, 2, (tp_tensor *[]){a, b}, matmul_fill, &c);
}

// ----------------------------------------------------------------------------
// linear: one node, as addmm

static tp_status linear_backward(tp__node *n, tp_tensor *g, tp_tensor **out) {
    /* saved: 0 = x (M, in) as 2-D, 1 = W */
    bool wx = tp__edge_wants(n, 0), ww = tp__edge_wants(n, 1), wbias = n->n_next > 2 && tp__edge_wants(n, 2);
    tp_tensor *x = ww ? tp__node_unpack(n, 0) : NULL, *w = wx ? tp__node_unpack(n, 1) : NULL;
    if ((ww && !x) || (wx && !w)) return tp_last_status();
    int64_t out_f = n->next[1].sizes[0];
    int64_t m = g->numel / (out_f ? out_f : 1);
    tp_tensor *g2 = tp_tensor_reshape(g, 2, (int64_t[]){m, out_f});
    if (!g2) return tp_last_status();
    tp_status st = TP_STATUS_OK;
    if (wx) { /* (M, out) @ (out, in) -> back to x's shape */
        tp_tensor *gx = tp_matmul(g2, w);
        out[0] = gx ? tp_tensor_reshape(gx, n->next[0].ndim, n->next[0].sizes) : NULL;
        tp_tensor_release(gx);
        if (!out[0]) st = tp_last_status();
    }
    if (st == TP_STATUS_OK && ww) { /* (out, M) @ (M, in) */
        tp_tensor *gt = tp_tensor_t(g2);
        out[1] = gt ? tp_matmul(gt, x) : NULL;
        tp_tensor_release(gt);
        if (!out[1]) st = tp_last_status();
    }
    if (st == TP_STATUS_OK && wbias) {
        out[2] = tp_sum(g2, 1, (int[]){0}, false);
        if (!out[2]) st = tp_last_status();
    }
    tp_tensor_release(g2);
    return st;
}

typedef struct linear_ctx {
    tp_tensor *x2, *w;
} linear_ctx;

static tp_status linear_fill(tp__node *n, tp_tensor *out, void *vctx) {
    (void)out;
    linear_ctx *c = vctx;
    /* slot 0: x, slot 1: W (a placeholder keeps the indices fixed) */
    tp_status st = tp__node_save(n, c->x2, false);
    if (st == TP_STATUS_OK) st = tp__node_save(n, c->w, false);
    return st;
}

/* out (M, out_f) += bias broadcast over rows, without a version bump:
 * out is new and nobody has seen it yet. */
static tp_status add_bias(tp_tensor *out, tp_tensor *bias) {
    if (out->dtype == bias->dtype && bias->ndim == 1 && bias->strides[0] == 1 &&
        tp_tensor_is_contiguous(out) && (out->dtype == TP_DTYPE_FLOAT32 || out->dtype == TP_DTYPE_FLOAT64)) {
        int64_t cols = bias->sizes[0], rows = cols ? out->numel / cols : 0;
        if (out->dtype == TP_DTYPE_FLOAT32) {
            float *o = tp_tensor_data(out);
            const float *b = tp_tensor_data(bias);
            for (int64_t r = 0; r < rows; r++, o += cols)
                for (int64_t j = 0; j < cols; j++) o[j] += b[j];
        } else {
            double *o = tp_tensor_data(out);
            const double *b = tp_tensor_data(bias);
            for (int64_t r = 0; r < rows; r++, o += cols)
                for (int64_t j = 0; j < cols; j++) o[j] += b[j];
        }
        return TP_STATUS_OK;
    }
    return tp_add_(out, bias);
}

tp_tensor *tp_ag_linear(tp_tensor *x, tp_tensor *weight, tp_tensor *bias) {
    if (!x || !weight) {
        tp__error(TP_STATUS_INVALID_ARGUMENT, "linear: input or weight is NULL");
        return NULL;
    }
    if (weight->ndim != 2 || x->ndim < 1 || x->sizes[x->ndim - 1] != weight->sizes[1]) {
        char xs[256], ws[256];
        tp__error(TP_STATUS_INVALID_ARGUMENT,
                  "mat1 and mat2 shapes cannot be multiplied (input %s, weight %s)",
                  tp__format_shape(x->ndim, x->sizes, xs, sizeof xs),
                  tp__format_shape(weight->ndim, weight->sizes, ws, sizeof ws));
        return NULL;
    }
    int64_t in_f = weight->sizes[1], out_f = weight->sizes[0];
    if (bias && (bias->ndim != 1 || bias->sizes[0] != out_f)) {
        tp__error(TP_STATUS_INVALID_ARGUMENT, "linear: bias must have shape [%lld]", (long long)out_f);
        return NULL;
    }
    int64_t m = x->numel / (in_f ? in_f : 1);
    if (in_f == 0) m = x->numel ? 0 : (x->ndim > 1 ? x->sizes[0] : 1);
    tp_tensor *x2 = tp_tensor_reshape(x, 2, (int64_t[]){m, in_f});
    tp_tensor *wt = x2 ? tp_tensor_t(weight) : NULL;
    tp_tensor *y2 = wt ? tp_matmul(x2, wt) : NULL;
    tp_tensor_release(wt);
    if (y2 && bias && add_bias(y2, bias) != TP_STATUS_OK) {
        tp_tensor_release(y2);
        y2 = NULL;
    }
    int64_t ys[TP_MAX_DIMS];
    for (int i = 0; i < x->ndim - 1; i++) ys[i] = x->sizes[i];
    ys[x->ndim - 1] = out_f;
    tp_tensor *y = y2;
    if (y2 && x->ndim != 2) {
        y = tp_tensor_reshape(y2, x->ndim, ys);
        tp_tensor_release(y2);
    }
    linear_ctx c = {x2, weight};
    tp_tensor *r = tp__record(y, bias ? "AddmmBackward0" : "MmBackward0", linear_backward, bias ? 3 : 2,
                              (tp_tensor *[]){x, weight, bias}, linear_fill, &c);
    tp_tensor_release(x2);
    return r;
}
