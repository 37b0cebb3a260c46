/*
 * src/optim/sgd.c - torch.optim.SGD's update, one pass per parameter:
 *   g = grad + weight_decay * p
 *   buf = g (first step) or momentum * buf + (1 - dampening) * g
 *   g = nesterov ? g + momentum * buf : buf      (when momentum != 0)
 *   p -= lr * g
 * Written as a loop over contiguous float data: the optimizer is not part
 * of the graph and a fused pass reads each tensor once.
 */
#include <stdlib.h>

#include "optim_internal.h"

tp_status tp_sgd_init(tp_sgd *opt, const tp_param_list *params, tp_sgd_options o) {
    if (!opt || !params) return tp__error(TP_STATUS_INVALID_ARGUMENT, "sgd: optimizer or params is NULL");
    *opt = (tp_sgd){0};
    if (!(o.lr >= 0)) return tp__error(TP_STATUS_INVALID_ARGUMENT, "Invalid learning rate: %g", o.lr);
    if (!(o.momentum >= 0)) return tp__error(TP_STATUS_INVALID_ARGUMENT, "Invalid momentum value: %g", o.momentum);
    if (!(o.weight_decay >= 0))
        return tp__error(TP_STATUS_INVALID_ARGUMENT, "Invalid weight_decay value: %g", o.weight_decay);
    if (o.nesterov && (o.momentum <= 0 || o.dampening != 0))
        return tp__error(TP_STATUS_INVALID_ARGUMENT, "Nesterov momentum requires a momentum and zero dampening");
    tp_status st = tp__optim_check_params(params, "sgd");
    if (st != TP_STATUS_OK) return st;
    opt->options = o;
    opt->count = params->count;
    opt->params = calloc((size_t)params->count + 1, sizeof *opt->params);
    opt->momentum = calloc((size_t)params->count + 1, sizeof *opt->momentum);
    if (!opt->params || !opt->momentum) {
        tp_sgd_free(opt);
        return tp__error(TP_STATUS_OUT_OF_MEMORY, "sgd: out of memory");
    }
    for (int i = 0; i < params->count; i++) opt->params[i] = params->items[i];
    return TP_STATUS_OK;
}

#define SGD_LOOP(T)                                                              \
    do {                                                                        \
        T *P = (T *)tp_tensor_data(p);                                          \
        const T *G = (const T *)tp_tensor_data(g);                              \
        T *B = buf ? (T *)tp_tensor_data(buf) : NULL;                           \
        for (int64_t k = 0; k < n; k++) {                                       \
            double d = (double)G[k] + o->weight_decay * (double)P[k];           \
            if (B) {                                                            \
                double b = first ? d : o->momentum * (double)B[k] + (1 - o->dampening) * d; \
                B[k] = (T)b;                                                    \
                d = o->nesterov ? d + o->momentum * b : b;                      \
            }                                                                   \
            P[k] = (T)((double)P[k] - o->lr * d);                               \
        }                                                                       \
    } while (0)

tp_status tp_sgd_step(tp_sgd *opt) {
    if (!opt || !opt->params) return tp__error(TP_STATUS_INVALID_ARGUMENT, "sgd: optimizer is not initialized");
    const tp_sgd_options *o = &opt->options;
    for (int i = 0; i < opt->count; i++) {
        tp_tensor *p = opt->params[i];
        tp_tensor *g = tp__optim_grad(p);
        if (!g) {
            if (tp_tensor_grad(p)) return tp_last_status();
            continue;
        }
        bool first = false;
        tp_tensor *buf = NULL;
        if (o->momentum != 0) {
            if (!opt->momentum[i]) {
                opt->momentum[i] = tp_zeros(tp_tensor_dim(p), tp_tensor_sizes(p), tp_tensor_dtype(p));
                if (!opt->momentum[i]) {
                    tp_tensor_release(g);
                    return tp_last_status();
                }
                first = true;
            }
            buf = opt->momentum[i];
        }
        int64_t n = tp_tensor_numel(p);
        if (tp_tensor_dtype(p) == TP_DTYPE_FLOAT32) SGD_LOOP(float);
        else SGD_LOOP(double);
        tp_tensor_bump_version(p);
        tp_tensor_release(g);
    }
    return TP_STATUS_OK;
}

void tp_sgd_free(tp_sgd *opt) {
    if (!opt) return;
    for (int i = 0; opt->momentum && i < opt->count; i++) tp_tensor_release(opt->momentum[i]);
    free(opt->momentum);
    free(opt->params);
    *opt = (tp_sgd){0};
}
