/*
 * src/nn/init.c - in-place initializers (torch.nn.init's uniform_ and
 * normal_), seeded through tp_rand / tp_randn.  They write under no_grad,
 * as torch.nn.init does, so they work on parameters that already require
 * grad.
 */
#include "nn_internal.h"

static tp_status fill_from(tp_tensor *t, tp_tensor *values, double scale, double shift) {
    if (!values) return tp_last_status();
    tp_status st = tp_binary_scalar_(TP_BINARY_OP_MUL, values, scale);
    if (st == TP_STATUS_OK) st = tp_binary_scalar_(TP_BINARY_OP_ADD, values, shift);
    if (st == TP_STATUS_OK) st = tp_copy_(t, values);
    tp_tensor_release(values);
    return st;
}

tp_status tp_nn_init_uniform_(tp_tensor *t, double low, double high, uint64_t seed) {
    if (!t) return tp__error(TP_STATUS_INVALID_ARGUMENT, "init: tensor is NULL");
    if (!(low <= high))
        return tp__error(TP_STATUS_INVALID_ARGUMENT, "uniform_ expects to return a [from, to) range, but found from=%g > to=%g", low, high);
    return fill_from(t, tp_rand(t->ndim, t->sizes, TP_DTYPE_FLOAT64, seed), high - low, low);
}

tp_status tp_nn_init_normal_(tp_tensor *t, double mean, double std, uint64_t seed) {
    if (!t) return tp__error(TP_STATUS_INVALID_ARGUMENT, "init: tensor is NULL");
    if (!(std >= 0))
        return tp__error(TP_STATUS_INVALID_ARGUMENT, "normal expects std >= 0.0, but found std %g", std);
    return fill_from(t, tp_randn(t->ndim, t->sizes, TP_DTYPE_FLOAT64, seed), std, mean);
}

tp_tensor *tp__nn_parameter(int ndim, const int64_t *sizes, tp_dtype dtype, double bound, uint64_t seed) {
    tp_tensor *p = tp_empty(ndim, sizes, dtype);
    if (!p) return NULL;
    if (tp_tensor_set_requires_grad(p, true) != TP_STATUS_OK ||
        tp_nn_init_uniform_(p, -bound, bound, seed) != TP_STATUS_OK) {
        tp_tensor_release(p);
        return NULL;
    }
    return p;
}
