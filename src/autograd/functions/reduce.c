/*
 * src/autograd/functions/reduce.c - sum and mean.  The gradient of a
 * reduction is the output's gradient put back along the reduced dims
 * (unsqueezed when keepdim was false) and expanded to the input's shape:
 * a stride-0 view, no copy.
 *
 * Node parameters: iarg[0] = mean?, iarg[1] = keepdim, iarg[2] = number of
 * reduced dims (0 = all), iarg[3..] = the dims, wrapped.
 */
#include "kernels.h"

static tp_status reduce_backward(tp__node *n, tp_tensor *g, tp_tensor **out) {
    const tp__edge *e = &n->next[0];
    bool mean = n->iarg[0], keepdim = n->iarg[1];
    int nd = (int)n->iarg[2];
    bool reduced[TP_MAX_DIMS] = {0};
    for (int i = 0; i < e->ndim; i++) reduced[i] = nd == 0;
    for (int i = 0; i < nd; i++) reduced[n->iarg[3 + i]] = true;
    /* g with the reduced dims back as size 1 */
    int64_t kept[TP_MAX_DIMS];
    int64_t count = 1;
    for (int i = 0; i < e->ndim; i++) {
        kept[i] = reduced[i] ? 1 : e->sizes[i];
        if (reduced[i]) count *= e->sizes[i];
    }
    (void)keepdim;
    tp_tensor *gk = tp_tensor_reshape(g, e->ndim, kept);
    if (!gk) return tp_last_status();
    tp_tensor *ge = tp_tensor_expand(gk, e->ndim, e->sizes);
    tp_tensor_release(gk);
    if (!ge) return tp_last_status();
    if (mean) {
        out[0] = tp_binary_scalar(TP_BINARY_OP_DIV, ge, (double)(count ? count : 1));
        tp_tensor_release(ge);
    } else {
        out[0] = ge;
    }
    return out[0] ? TP_STATUS_OK : tp_last_status();
}

typedef struct reduce_ctx {
    bool mean, keepdim;
    int ndims;
    const int *dims;
    int in_ndim;
} reduce_ctx;

static tp_status reduce_fill(tp__node *n, tp_tensor *out, void *vctx) {
    (void)out;
    reduce_ctx *c = vctx;
    n->iarg[0] = c->mean;
    n->iarg[1] = c->keepdim;
    n->iarg[2] = c->dims ? c->ndims : 0;
    for (int i = 0; i < n->iarg[2]; i++) {
        int d = tp__wrap_dim(c->dims[i], c->in_ndim);
        if (d < 0) return tp_last_status();
        n->iarg[3 + i] = c->in_ndim ? d : 0;
    }
    if (c->in_ndim == 0) n->iarg[2] = 0;
    return TP_STATUS_OK;
}

static tp_tensor *reduce(bool mean, tp_tensor *t, int ndims, const int *dims, bool keepdim) {
    tp_tensor *out = mean ? tp_mean(t, ndims, dims, keepdim) : tp_sum(t, ndims, dims, keepdim);
    if (!out) return NULL;
    if (ndims > TP_MAX_DIMS) ndims = TP_MAX_DIMS; /* tp_sum already refused more */
    reduce_ctx c = {mean, keepdim, ndims, ndims > 0 ? dims : NULL, t->ndim};
    return tp__record(out, mean ? "MeanBackward1" : "SumBackward1", reduce_backward, 1, &t,
                      reduce_fill, &c);
}

tp_tensor *tp_ag_sum(tp_tensor *t, int ndims, const int *dims, bool keepdim) {
    return reduce(false, t, ndims, dims, keepdim);
}

tp_tensor *tp_ag_mean(tp_tensor *t, int ndims, const int *dims, bool keepdim) {
    return reduce(true, t, ndims, dims, keepdim);
}
