/*
 * src/optim/common.c - parameter checks and gradient access shared by the
 * optimizers.
 */
#include "optim_internal.h"

tp_status tp__optim_check_params(const tp_param_list *params, const char *who) {
    for (int i = 0; i < params->count; i++) {
        tp_tensor *p = params->items[i];
        if (!p) return tp__error(TP_STATUS_INVALID_ARGUMENT, "%s: parameter %d is NULL", who, i);
        if (p->dtype != TP_DTYPE_FLOAT32 && p->dtype != TP_DTYPE_FLOAT64)
            return tp__error(TP_STATUS_UNSUPPORTED, "%s: parameter %d is %s; float32 and float64 are supported",
                             who, i, tp_dtype_name(p->dtype));
        if (!tp_tensor_is_contiguous(p))
            return tp__error(TP_STATUS_UNSUPPORTED, "%s: parameter %d is not contiguous", who, i);
    }
    return TP_STATUS_OK;
}

tp_tensor *tp__optim_grad(tp_tensor *p) {
    tp_tensor *g = p->grad;
    if (!g) return NULL;
    tp_tensor *c = tp_to_dtype(g, p->dtype);
    tp_tensor *r = c ? tp_contiguous(c) : NULL;
    tp_tensor_release(c);
    return r;
}
