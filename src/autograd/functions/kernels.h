/*
 * src/autograd/functions/kernels.h - the few float loops autograd needs
 * that ops.h does not have: fused elementwise backward formulas, GELU,
 * softmax along a dim, and an index_add for index_select's backward.
 *
 * float32 and float64 only (others: TP_STATUS_UNSUPPORTED); inputs of any
 * layout are made contiguous first; outputs are new contiguous tensors
 * (new references) or NULL with the error set.
 */
#ifndef TENSORPLAY_AUTOGRAD_KERNELS_H
#define TENSORPLAY_AUTOGRAD_KERNELS_H

#include "../autograd_internal.h"

typedef enum tp__map_kind {
    TP__MAP_RELU_BWD,    /* g * (y > 0)         (x = g, y = relu output) */
    TP__MAP_TANH_BWD,    /* g * (1 - y^2)       (y = tanh output) */
    TP__MAP_SIGMOID_BWD, /* g * y * (1 - y)     (y = sigmoid output) */
    TP__MAP_SQRT_BWD,    /* g / (2 y)           (y = sqrt output) */
    TP__MAP_ABS_BWD,     /* g * sign(y)         (y = input) */
    TP__MAP_GELU,        /* x * Phi(x)          (y unused) */
    TP__MAP_GELU_BWD,    /* g * (Phi(y) + y phi(y))  (y = input) */
} tp__map_kind;

/* out = f(x, y) elementwise; x and y have the same shape (y may be NULL
 * where unused); the result has x's dtype. */
tp_tensor *tp__map(tp__map_kind kind, tp_tensor *x, tp_tensor *y);

/* softmax or log_softmax of x along dim (max-subtracted). */
tp_tensor *tp__softmax(tp_tensor *x, int dim, bool log);
/* Their backward: from g and the forward's output y. */
tp_tensor *tp__softmax_backward(tp_tensor *g, tp_tensor *y, int dim, bool log);

/* zeros(ndim, sizes) with rows src[i] added at index[i] along dim. */
tp_tensor *tp__index_add_zeros(int ndim, const int64_t *sizes, tp_dtype dtype, int dim,
                               const tp_tensor *index, tp_tensor *src);

#endif
