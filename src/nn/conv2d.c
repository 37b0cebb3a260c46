/*
 * src/nn/conv2d.c - the Conv2d layer: parameters, and one node per call
 * (tp_ag_conv2d: im2col + a batched gemm).
 */
#include <math.h>

#include "nn_internal.h"

// ----------------------------------------------------------------------------
// Conv2d

tp_status tp_nn_conv2d_init(tp_nn_conv2d *m, tp_nn_conv2d_options o) {
    if (!m) return tp__error(TP_STATUS_INVALID_ARGUMENT, "conv2d: module is NULL");
    *m = (tp_nn_conv2d){0};
    if (o.in_channels <= 0 || o.out_channels <= 0 || o.kernel_size <= 0)
        return tp__error(TP_STATUS_INVALID_ARGUMENT, "conv2d: channels and kernel_size must be positive");
    if (o.padding < 0) return tp__error(TP_STATUS_INVALID_ARGUMENT, "conv2d: padding must be >= 0");
    m->stride = o.stride > 0 ? o.stride : 1;
    m->padding = o.padding;
    int64_t k = o.kernel_size;
    /* PyTorch's default: kaiming_uniform(a = sqrt(5)) = U(-1/sqrt(fan_in), 1/sqrt(fan_in)) */
    double bound = 1.0 / sqrt((double)(o.in_channels * k * k));
    m->weight = tp__nn_parameter(4, (int64_t[]){o.out_channels, o.in_channels, k, k}, o.dtype, bound, o.seed);
    if (m->weight && !o.no_bias)
        m->bias = tp__nn_parameter(1, &o.out_channels, o.dtype, bound, o.seed ^ 0x9e3779b97f4a7c15ull);
    if (!m->weight || (!o.no_bias && !m->bias)) {
        tp_status st = tp_last_status();
        tp_nn_conv2d_free(m);
        return st;
    }
    return TP_STATUS_OK;
}

tp_tensor *tp_nn_conv2d_forward(const tp_nn_conv2d *m, tp_tensor *x) {
    if (!m || !m->weight) {
        tp__error(TP_STATUS_INVALID_ARGUMENT, "conv2d: module is not initialized");
        return NULL;
    }
    return tp_ag_conv2d(x, m->weight, m->bias, m->stride, m->stride, m->padding, m->padding);
}

tp_status tp_nn_conv2d_parameters(const tp_nn_conv2d *m, tp_param_list *list) {
    tp_status st = tp_param_list_add(list, m->weight);
    return st == TP_STATUS_OK && m->bias ? tp_param_list_add(list, m->bias) : st;
}

void tp_nn_conv2d_free(tp_nn_conv2d *m) {
    if (!m) return;
    tp_tensor_release(m->weight);
    tp_tensor_release(m->bias);
    *m = (tp_nn_conv2d){0};
}

