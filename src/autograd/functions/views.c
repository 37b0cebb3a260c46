/*
 * src/autograd/functions/views.c - views, cat/stack and index_select.
 *
 * A view's output shares storage and version counter with its input (the
 * views of tensor.h do the work); its node only remembers how to put a
 * gradient back:
 *   reshape-like (view, reshape, squeeze, unsqueeze): reshape to the input;
 *   transpose / permute: the inverse permutation;
 *   slice / narrow / select: zeros of the input's shape, the same view of
 *     them, the gradient copied in;
 *   expand: summed over the expanded dims;
 *   as_strided: through the storage (below).
 * Node parameters: iarg[0] = the kind, then the view's own arguments.
 */
#include <string.h>

#include "kernels.h"

enum view_kind { V_RESHAPE, V_TRANSPOSE, V_PERMUTE, V_SLICE, V_SELECT, V_EXPAND };

static tp_status view_backward(tp__node *n, tp_tensor *g, tp_tensor **out) {
    const tp__edge *e = &n->next[0];
    int64_t *p = n->iarg;
    switch ((enum view_kind)p[0]) {
    case V_RESHAPE: out[0] = tp_tensor_reshape(g, e->ndim, e->sizes); break;
    case V_TRANSPOSE: out[0] = tp_tensor_transpose(g, (int)p[1], (int)p[2]); break;
    case V_PERMUTE: {
        int inv[TP_MAX_DIMS];
        for (int i = 0; i < e->ndim; i++) inv[p[1 + i]] = i;
        out[0] = tp_tensor_permute(g, e->ndim, inv);
        break;
    }
    case V_SLICE:
    case V_SELECT: {
        tp_tensor *z = tp_zeros(e->ndim, e->sizes, g->dtype);
        tp_tensor *v = !z ? NULL
                       : p[0] == V_SLICE ? tp_tensor_slice(z, (int)p[1], p[2], p[3], p[4])
                                         : tp_tensor_select(z, (int)p[1], p[2]);
        tp_status st = v ? tp_copy_(v, g) : tp_last_status();
        tp_tensor_release(v);
        if (st != TP_STATUS_OK) {
            tp_tensor_release(z);
            return st;
        }
        out[0] = z;
        break;
    }
    case V_EXPAND: out[0] = tp__sum_to(g, e->ndim, e->sizes); break;
    }
    return out[0] ? TP_STATUS_OK : tp_last_status();
}

typedef struct view_ctx {
    int64_t args[TP_MAX_DIMS + 1];
    int nargs;
} view_ctx;

static tp_status view_fill(tp__node *n, tp_tensor *out, void *vctx) {
    (void)out;
    view_ctx *c = vctx;
    for (int i = 0; i < c->nargs; i++) n->iarg[i] = c->args[i];
    return TP_STATUS_OK;
}

static tp_tensor *record_view(tp_tensor *out, tp_tensor *t, const char *name, view_ctx *c) {
    return tp__record(out, name, view_backward, 1, &t, view_fill, c);
}

tp_tensor *tp_ag_view(tp_tensor *t, int ndim, const int64_t *sizes) {
    view_ctx c = {{V_RESHAPE}, 1};
    return record_view(tp_tensor_view(t, ndim, sizes), t, "ViewBackward0", &c);
}

tp_tensor *tp_ag_reshape(tp_tensor *t, int ndim, const int64_t *sizes) {
    view_ctx c = {{V_RESHAPE}, 1};
    tp_tensor *out = tp_tensor_reshape(t, ndim, sizes);
    /* PyTorch names the node of a reshape after what it did */
    const char *name = out && out->storage == t->storage ? "ViewBackward0" : "CloneBackward0";
    return record_view(out, t, name, &c);
}

tp_tensor *tp_ag_squeeze_dim(tp_tensor *t, int dim) {
    view_ctx c = {{V_RESHAPE}, 1};
    return record_view(tp_tensor_squeeze_dim(t, dim), t, "SqueezeBackward1", &c);
}

tp_tensor *tp_ag_squeeze(tp_tensor *t) {
    view_ctx c = {{V_RESHAPE}, 1};
    return record_view(tp_tensor_squeeze(t), t, "SqueezeBackward0", &c);
}

tp_tensor *tp_ag_unsqueeze(tp_tensor *t, int dim) {
    view_ctx c = {{V_RESHAPE}, 1};
    return record_view(tp_tensor_unsqueeze(t, dim), t, "UnsqueezeBackward0", &c);
}

tp_tensor *tp_ag_transpose(tp_tensor *t, int dim0, int dim1) {
    view_ctx c = {{V_TRANSPOSE, dim0, dim1}, 3};
    return record_view(tp_tensor_transpose(t, dim0, dim1), t, "TransposeBackward0", &c);
}

tp_tensor *tp_ag_t(tp_tensor *t) {
    if (t && t->ndim < 2) {
        view_ctx c = {{V_RESHAPE}, 1};
        return record_view(tp_tensor_t(t), t, "TBackward0", &c);
    }
    view_ctx c = {{V_TRANSPOSE, 0, 1}, 3};
    return record_view(tp_tensor_t(t), t, "TBackward0", &c);
}

tp_tensor *tp_ag_permute(tp_tensor *t, int ndim, const int *dims) {
    tp_tensor *out = tp_tensor_permute(t, ndim, dims);
    view_ctx c = {{V_PERMUTE}, 1 + (out ? ndim : 0)};
    /* the permute succeeded, so ndim == t's and the dims are valid */
    for (int i = 0; out && i < ndim; i++) c.args[1 + i] = tp__wrap_dim(dims[i], ndim);
    return record_view(out, t, "PermuteBackward0", &c);
}

tp_tensor *tp_ag_slice(tp_tensor *t, int dim, int64_t start, int64_t end, int64_t step) {
    view_ctx c = {{V_SLICE, dim, start, end, step}, 5};
    return record_view(tp_tensor_slice(t, dim, start, end, step), t, "SliceBackward0", &c);
}

tp_tensor *tp_ag_narrow(tp_tensor *t, int dim, int64_t start, int64_t length) {
    tp_tensor *out = tp_tensor_narrow(t, dim, start, length);
    /* narrow accepts a negative start (counted from the end); as a slice: */
    int d = out ? tp__wrap_dim(dim, t->ndim) : 0;
    int64_t s = out && start < 0 ? start + t->sizes[d] : start;
    view_ctx c = {{V_SLICE, dim, s, s + length, 1}, 5};
    return record_view(out, t, "SliceBackward0", &c);
}

tp_tensor *tp_ag_select(tp_tensor *t, int dim, int64_t index) {
    view_ctx c = {{V_SELECT, dim, index}, 3};
    return record_view(tp_tensor_select(t, dim, index), t, "SelectBackward0", &c);
}

tp_tensor *tp_ag_expand(tp_tensor *t, int ndim, const int64_t *sizes) {
    view_ctx c = {{V_EXPAND}, 1};
    return record_view(tp_tensor_expand(t, ndim, sizes), t, "ExpandBackward0", &c);
}

// ----------------------------------------------------------------------------
// as_strided: geometry on the storage itself, so the gradient is put back
// through the storage too (PyTorch's as_strided_backward, the case where
// neither the output nor the input has elements that overlap): zeros over
// the storage span both geometries cover, the gradient copied in through
// the output's strides (no element twice: the copy is the scatter-add),
// read back through the input's.  Overlapping geometries are refused when
// a node would be made.
// Node parameters: iarg[0, ndim) the output's strides, iarg[TP_MAX_DIMS,
// TP_MAX_DIMS + input ndim) the input's, then the output's storage offset
// and the input's.

#define AS_STRIDED_OFF (2 * TP_MAX_DIMS)

/* One past the last storage element the geometry reaches, from 0; 0 if empty. */
static int64_t span_of(int ndim, const int64_t *sizes, const int64_t *strides) {
    int64_t last = 0;
    for (int i = 0; i < ndim; i++) {
        if (sizes[i] == 0) return 0;
        last += (sizes[i] - 1) * strides[i];
    }
    return last + 1;
}

/* No two indices reach one storage element: ordered by stride, each dim of
 * size > 1 steps past everything the smaller ones reach. */
static bool non_overlapping(int ndim, const int64_t *sizes, const int64_t *strides) {
    int order[TP_MAX_DIMS], n = 0;
    for (int i = 0; i < ndim; i++) {
        if (sizes[i] == 0) return true;
        if (sizes[i] > 1) order[n++] = i;
    }
    for (int a = 1; a < n; a++) /* insertion sort by stride: at most TP_MAX_DIMS */
        for (int b = a; b > 0 && strides[order[b]] < strides[order[b - 1]]; b--) {
            int k = order[b];
            order[b] = order[b - 1];
            order[b - 1] = k;
        }
    int64_t reach = 0; /* the largest offset the dims so far reach */
    for (int i = 0; i < n; i++) {
        int d = order[i];
        if (strides[d] <= reach) return false;
        reach += (sizes[d] - 1) * strides[d];
    }
    return true;
}

static tp_status as_strided_backward(tp__node *n, tp_tensor *g, tp_tensor **out) {
    const tp__edge *e = &n->next[0];
    const int64_t *os = n->iarg, *is = n->iarg + TP_MAX_DIMS;
    int64_t ooff = n->iarg[AS_STRIDED_OFF], ioff = n->iarg[AS_STRIDED_OFF + 1];
    int64_t ospan = span_of(n->out_ndim, n->out_sizes, os), ispan = span_of(e->ndim, e->sizes, is);
    int64_t lo = ooff < ioff ? ooff : ioff;
    int64_t hi = ooff + ospan > ioff + ispan ? ooff + ospan : ioff + ispan;
    int64_t len = hi - lo;
    tp_tensor *buf = tp_zeros(1, &len, g->dtype); // the storage span, as offsets from lo
    tp_tensor *v = buf ? tp_tensor_as_strided(buf, n->out_ndim, n->out_sizes, os, ooff - lo) : NULL;
    tp_status st = v ? tp_copy_(v, g) : tp_last_status();
    tp_tensor_release(v);
    tp_tensor *r = st == TP_STATUS_OK ? tp_tensor_as_strided(buf, e->ndim, e->sizes, is, ioff - lo) : NULL;
    tp_tensor_release(buf);
    if (!r) return st == TP_STATUS_OK ? tp_last_status() : st;
    out[0] = tp_contiguous(r);
    tp_tensor_release(r);
    return out[0] ? TP_STATUS_OK : tp_last_status();
}

typedef struct as_strided_ctx {
    const tp_tensor *in;
    const int64_t *strides;
    int64_t offset;
} as_strided_ctx;

static tp_status as_strided_fill(tp__node *n, tp_tensor *out, void *vctx) {
    const as_strided_ctx *c = vctx;
    const tp_tensor *in = c->in;
    if (!non_overlapping(out->ndim, out->sizes, c->strides) || !non_overlapping(in->ndim, in->sizes, in->strides)) {
        char a[256], b[256];
        bool o = !non_overlapping(out->ndim, out->sizes, c->strides);
        tp__format_shape(o ? out->ndim : in->ndim, o ? out->sizes : in->sizes, a, sizeof a);
        tp__format_shape(o ? out->ndim : in->ndim, o ? c->strides : in->strides, b, sizeof b);
        return tp__error(TP_STATUS_UNSUPPORTED,
                         "as_strided: the gradient through an %s whose elements overlap (sizes %s, strides %s) is "
                         "not implemented: AsStridedBackward0 needs every element of the %s at its own storage "
                         "element (compute it under no_grad, or build it from differentiable views)",
                         o ? "output" : "input", a, b, o ? "output" : "input");
    }
    for (int i = 0; i < out->ndim; i++) n->iarg[i] = c->strides[i];
    for (int i = 0; i < in->ndim; i++) n->iarg[TP_MAX_DIMS + i] = in->strides[i];
    n->iarg[AS_STRIDED_OFF] = c->offset;
    n->iarg[AS_STRIDED_OFF + 1] = in->storage_offset;
    return TP_STATUS_OK;
}

tp_tensor *tp_ag_as_strided(tp_tensor *t, int ndim, const int64_t *sizes, const int64_t *strides,
                            int64_t storage_offset) {
    as_strided_ctx c = {t, strides, storage_offset};
    return tp__record(tp_tensor_as_strided(t, ndim, sizes, strides, storage_offset), "AsStridedBackward0",
                      as_strided_backward, 1, &t, as_strided_fill, &c);
}

// ----------------------------------------------------------------------------
// cat / stack: the gradient split back along dim (narrow views of it)

static tp_status cat_backward(tp__node *n, tp_tensor *g, tp_tensor **out) {
    int dim = (int)n->iarg[0];
    bool stack = n->iarg[1];
    int64_t at = 0;
    for (int i = 0; i < n->n_next; i++) {
        const tp__edge *e = &n->next[i];
        if (!stack && e->ndim == 1 && e->sizes[0] == 0 && g->ndim != 1) continue; /* skipped by cat */
        int64_t len = stack ? 1 : e->sizes[dim];
        if (tp__edge_wants(n, i)) {
            out[i] = stack ? tp_tensor_select(g, dim, at) : tp_tensor_narrow(g, dim, at, len);
            if (!out[i]) return tp_last_status();
        }
        at += len;
    }
    return TP_STATUS_OK;
}

typedef struct cat_ctx {
    int dim;
    bool stack;
} cat_ctx;

static tp_status cat_fill(tp__node *n, tp_tensor *out, void *vctx) {
    cat_ctx *c = vctx;
    int d = tp__wrap_dim(c->dim, out->ndim);
    if (d < 0) return tp_last_status();
    n->iarg[0] = d;
    n->iarg[1] = c->stack;
    return TP_STATUS_OK;
}

tp_tensor *tp_ag_cat(int n, tp_tensor *const *tensors, int dim) {
    cat_ctx c = {dim, false};
    return tp__record(tp_cat(n, tensors, dim), "CatBackward0", cat_backward, n, tensors, cat_fill, &c);
}

tp_tensor *tp_ag_stack(int n, tp_tensor *const *tensors, int dim) {
    cat_ctx c = {dim, true};
    return tp__record(tp_stack(n, tensors, dim), "StackBackward0", cat_backward, n, tensors, cat_fill, &c);
}

// ----------------------------------------------------------------------------
// index_select: the gradient added back at the selected indices

static tp_status index_select_backward(tp__node *n, tp_tensor *g, tp_tensor **out) {
    tp_tensor *index = tp__node_unpack(n, 0);
    if (!index) return tp_last_status();
    const tp__edge *e = &n->next[0];
    out[0] = tp__index_add_zeros(e->ndim, e->sizes, e->dtype, (int)n->iarg[0], index, g);
    return out[0] ? TP_STATUS_OK : tp_last_status();
}

typedef struct index_ctx {
    int dim;
    const tp_tensor *index;
} index_ctx;

static tp_status index_fill(tp__node *n, tp_tensor *out, void *vctx) {
    index_ctx *c = vctx;
    int d = tp__wrap_dim(c->dim, out->ndim);
    if (d < 0) return tp_last_status();
    n->iarg[0] = d;
    return tp__node_save(n, (tp_tensor *)c->index, false);
}

tp_tensor *tp_ag_index_select(tp_tensor *t, int dim, const tp_tensor *index) {
    index_ctx c = {dim, index};
    return tp__record(tp_index_select(t, dim, index), "IndexSelectBackward0", index_select_backward,
                      1, &t, index_fill, &c);
}
