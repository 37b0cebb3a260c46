/*
 * src/nn/layers.c - Linear, LayerNorm, Embedding, Dropout and the
 * functional activations, built from the differentiable ops in
 * autograd.h.  Each layer owns its parameters (leaves that require grad).
 */
#include <math.h>

#include "../core/internal.h"
#include "tensorplay/nn.h"

static tp_tensor *parameter(int ndim, const int64_t *sizes, tp_dtype dtype) {
    tp_tensor *p = tp_empty(ndim, sizes, dtype);
    if (p && tp_tensor_set_requires_grad(p, true) != TP_STATUS_OK) {
        tp_tensor_release(p);
        return NULL;
    }
    return p;
}

// ----------------------------------------------------------------------------
// Linear

tp_status tp_nn_linear_init(tp_nn_linear *m, tp_nn_linear_options o) {
    if (!m) return tp__error(TP_STATUS_INVALID_ARGUMENT, "linear: module is NULL");
    *m = (tp_nn_linear){0};
    if (o.in_features <= 0 || o.out_features <= 0)
        return tp__error(TP_STATUS_INVALID_ARGUMENT, "linear: in_features and out_features must be positive, got %lld and %lld",
                         (long long)o.in_features, (long long)o.out_features);
    double bound = 1.0 / sqrt((double)o.in_features);
    m->weight = parameter(2, (int64_t[]){o.out_features, o.in_features}, o.dtype);
    tp_status st = m->weight ? tp_nn_init_uniform_(m->weight, -bound, bound, o.seed) : tp_last_status();
    if (st == TP_STATUS_OK && !o.no_bias) {
        m->bias = parameter(1, (int64_t[]){o.out_features}, o.dtype);
        st = m->bias ? tp_nn_init_uniform_(m->bias, -bound, bound, o.seed ^ 0x9e3779b97f4a7c15ull) : tp_last_status();
    }
    if (st != TP_STATUS_OK) tp_nn_linear_free(m);
    return st;
}

tp_tensor *tp_nn_linear_forward(const tp_nn_linear *m, tp_tensor *x) {
    if (!m || !m->weight) {
        tp__error(TP_STATUS_INVALID_ARGUMENT, "linear: module is not initialized");
        return NULL;
    }
    return tp_ag_linear(x, m->weight, m->bias);
}

tp_status tp_nn_linear_parameters(const tp_nn_linear *m, tp_param_list *list) {
    tp_status st = tp_param_list_add(list, m->weight);
    if (st == TP_STATUS_OK && m->bias) st = tp_param_list_add(list, m->bias);
    return st;
}

void tp_nn_linear_free(tp_nn_linear *m) {
    if (!m) return;
    tp_tensor_release(m->weight);
    tp_tensor_release(m->bias);
    *m = (tp_nn_linear){0};
}

// ----------------------------------------------------------------------------
// LayerNorm: (x - mean) / sqrt(var + eps) * weight + bias over the last dim

tp_status tp_nn_layer_norm_init(tp_nn_layer_norm *m, tp_nn_layer_norm_options o) {
    if (!m) return tp__error(TP_STATUS_INVALID_ARGUMENT, "layer_norm: module is NULL");
    *m = (tp_nn_layer_norm){0};
    if (o.normalized_size <= 0)
        return tp__error(TP_STATUS_INVALID_ARGUMENT, "layer_norm: normalized_size must be positive");
    m->eps = o.eps > 0 ? o.eps : 1e-5;
    m->weight = parameter(1, &o.normalized_size, o.dtype);
    m->bias = parameter(1, &o.normalized_size, o.dtype);
    bool prev = tp_grad_set_enabled(false);
    tp_status st = !m->weight || !m->bias ? tp_last_status() : tp_fill_(m->weight, 1.0);
    if (st == TP_STATUS_OK) st = tp_fill_(m->bias, 0.0);
    tp_grad_set_enabled(prev);
    if (st != TP_STATUS_OK) tp_nn_layer_norm_free(m);
    return st;
}

tp_tensor *tp_nn_layer_norm_forward(const tp_nn_layer_norm *m, tp_tensor *x) {
    if (!m || !m->weight || !x) {
        tp__error(TP_STATUS_INVALID_ARGUMENT, "layer_norm: module or input is NULL");
        return NULL;
    }
    if (x->ndim < 1 || x->sizes[x->ndim - 1] != m->weight->sizes[0]) {
        char s[256];
        tp__error(TP_STATUS_INVALID_ARGUMENT,
                  "Given normalized_shape=[%lld], expected input with shape [*, %lld], but got input of size%s",
                  (long long)m->weight->sizes[0], (long long)m->weight->sizes[0],
                  tp__format_shape(x->ndim, x->sizes, s, sizeof s));
        return NULL;
    }
    int last = -1;
    tp_tensor *mu = NULL, *xc = NULL, *sq = NULL, *var = NULL, *ve = NULL, *sd = NULL, *y = NULL,
              *yw = NULL, *out = NULL;
    if (!(mu = tp_ag_mean(x, 1, &last, true))) goto done;
    if (!(xc = tp_ag_sub(x, mu))) goto done;
    if (!(sq = tp_ag_mul(xc, xc))) goto done;
    if (!(var = tp_ag_mean(sq, 1, &last, true))) goto done;
    if (!(ve = tp_ag_binary_scalar(TP_BINARY_OP_ADD, var, m->eps))) goto done;
    if (!(sd = tp_ag_unary(TP_UNARY_OP_SQRT, ve))) goto done;
    if (!(y = tp_ag_div(xc, sd))) goto done;
    if (!(yw = tp_ag_mul(y, m->weight))) goto done;
    out = tp_ag_add(yw, m->bias);
done:;
    tp_tensor *ts[] = {mu, xc, sq, var, ve, sd, y, yw};
    for (int i = 0; i < 8; i++) tp_tensor_release(ts[i]);
    return out;
}

tp_status tp_nn_layer_norm_parameters(const tp_nn_layer_norm *m, tp_param_list *list) {
    tp_status st = tp_param_list_add(list, m->weight);
    return st == TP_STATUS_OK ? tp_param_list_add(list, m->bias) : st;
}

void tp_nn_layer_norm_free(tp_nn_layer_norm *m) {
    if (!m) return;
    tp_tensor_release(m->weight);
    tp_tensor_release(m->bias);
    *m = (tp_nn_layer_norm){0};
}

// ----------------------------------------------------------------------------
// Embedding: rows of weight picked by index (index_select on dim 0)

tp_status tp_nn_embedding_init(tp_nn_embedding *m, tp_nn_embedding_options o) {
    if (!m) return tp__error(TP_STATUS_INVALID_ARGUMENT, "embedding: module is NULL");
    *m = (tp_nn_embedding){0};
    if (o.num_embeddings <= 0 || o.embedding_dim <= 0)
        return tp__error(TP_STATUS_INVALID_ARGUMENT, "embedding: sizes must be positive");
    m->weight = parameter(2, (int64_t[]){o.num_embeddings, o.embedding_dim}, o.dtype);
    tp_status st = m->weight ? tp_nn_init_normal_(m->weight, 0.0, 1.0, o.seed) : tp_last_status();
    if (st != TP_STATUS_OK) tp_nn_embedding_free(m);
    return st;
}

tp_tensor *tp_nn_embedding_forward(const tp_nn_embedding *m, const tp_tensor *indices) {
    if (!m || !m->weight || !indices) {
        tp__error(TP_STATUS_INVALID_ARGUMENT, "embedding: module or indices is NULL");
        return NULL;
    }
    if (indices->dtype != TP_DTYPE_INT64 && indices->dtype != TP_DTYPE_INT32) {
        tp__error(TP_STATUS_INVALID_ARGUMENT,
                  "Expected tensor for argument #1 'indices' to have one of the following scalar "
                  "types: Long, Int; but got %s instead", tp_dtype_name(indices->dtype));
        return NULL;
    }
    tp_tensor *flat = tp_tensor_reshape((tp_tensor *)indices, 1, (int64_t[]){indices->numel});
    tp_tensor *rows = flat ? tp_ag_index_select(m->weight, 0, flat) : NULL;
    tp_tensor_release(flat);
    if (!rows) return NULL;
    int64_t sizes[TP_MAX_DIMS];
    if (indices->ndim + 1 > TP_MAX_DIMS) {
        tp_tensor_release(rows);
        tp__error(TP_STATUS_INVALID_ARGUMENT, "embedding: indices have too many dims");
        return NULL;
    }
    for (int i = 0; i < indices->ndim; i++) sizes[i] = indices->sizes[i];
    sizes[indices->ndim] = m->weight->sizes[1];
    tp_tensor *out = tp_ag_view(rows, indices->ndim + 1, sizes);
    tp_tensor_release(rows);
    return out;
}

tp_status tp_nn_embedding_parameters(const tp_nn_embedding *m, tp_param_list *list) {
    return tp_param_list_add(list, m->weight);
}

void tp_nn_embedding_free(tp_nn_embedding *m) {
    if (!m) return;
    tp_tensor_release(m->weight);
    *m = (tp_nn_embedding){0};
}

// ----------------------------------------------------------------------------
// Dropout

tp_tensor *tp_nn_dropout_forward(tp_nn_dropout *m, tp_tensor *x, bool training) {
    if (!m || !x) {
        tp__error(TP_STATUS_INVALID_ARGUMENT, "dropout: module or input is NULL");
        return NULL;
    }
    if (!(m->p >= 0 && m->p <= 1)) {
        tp__error(TP_STATUS_INVALID_ARGUMENT, "dropout probability has to be between 0 and 1, but got %g", m->p);
        return NULL;
    }
    if (!training || m->p == 0) return tp_tensor_retain(x);
    if (m->p == 1) {
        tp_tensor *z = tp_zeros(x->ndim, x->sizes, x->dtype);
        tp_tensor *r = z ? tp_ag_mul(x, z) : NULL;
        tp_tensor_release(z);
        return r;
    }
    tp_tensor *u = tp_rand(x->ndim, x->sizes, x->dtype, m->seed + m->calls++);
    tp_tensor *keep = u ? tp_binary_scalar(TP_BINARY_OP_GE, u, m->p) : NULL;
    tp_tensor *mask = keep ? tp_to_dtype(keep, x->dtype) : NULL;
    tp_status st = mask ? tp_binary_scalar_(TP_BINARY_OP_MUL, mask, 1.0 / (1.0 - m->p)) : tp_last_status();
    tp_tensor *out = st == TP_STATUS_OK ? tp_ag_mul(x, mask) : NULL;
    tp_tensor_release(u);
    tp_tensor_release(keep);
    tp_tensor_release(mask);
    return out;
}

// ----------------------------------------------------------------------------
// functional

tp_tensor *tp_nn_relu(tp_tensor *x) { return tp_ag_unary(TP_UNARY_OP_RELU, x); }
tp_tensor *tp_nn_gelu(tp_tensor *x) { return tp_ag_gelu(x); }
tp_tensor *tp_nn_cross_entropy(tp_tensor *logits, const tp_tensor *target) {
    return tp_ag_cross_entropy(logits, target);
}
