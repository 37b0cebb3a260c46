/*
 * src/optim/adamw.c - torch.optim.AdamW's update (amsgrad off), one fused
 * pass per parameter:
 *   p *= 1 - lr * weight_decay
 *   m = beta1 m + (1 - beta1) g;   v = beta2 v + (1 - beta2) g^2
 *   p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
 */
#include <math.h>
#include <stdlib.h>

#include "optim_internal.h"

tp_status tp_adamw_init(tp_adamw *opt, const tp_param_list *params, tp_adamw_options o) {
    if (!opt || !params) return tp__error(TP_STATUS_INVALID_ARGUMENT, "adamw: optimizer or params is NULL");
    *opt = (tp_adamw){0};
    if (!(o.lr >= 0)) return tp__error(TP_STATUS_INVALID_ARGUMENT, "Invalid learning rate: %g", o.lr);
    if (!(o.eps >= 0)) return tp__error(TP_STATUS_INVALID_ARGUMENT, "Invalid epsilon value: %g", o.eps);
    if (!(o.beta1 >= 0 && o.beta1 < 1))
        return tp__error(TP_STATUS_INVALID_ARGUMENT, "Invalid beta parameter at index 0: %g", o.beta1);
    if (!(o.beta2 >= 0 && o.beta2 < 1))
        return tp__error(TP_STATUS_INVALID_ARGUMENT, "Invalid beta parameter at index 1: %g", o.beta2);
    if (!(o.weight_decay >= 0))
        return tp__error(TP_STATUS_INVALID_ARGUMENT, "Invalid weight_decay value: %g", o.weight_decay);
    tp_status st = tp__optim_check_params(params, "adamw");
    if (st != TP_STATUS_OK) return st;
    opt->options = o;
    opt->count = params->count;
    size_t n = (size_t)params->count + 1;
    opt->params = calloc(n, sizeof *opt->params);
    opt->exp_avg = calloc(n, sizeof *opt->exp_avg);
    opt->exp_avg_sq = calloc(n, sizeof *opt->exp_avg_sq);
    opt->steps = calloc(n, sizeof *opt->steps);
    if (!opt->params || !opt->exp_avg || !opt->exp_avg_sq || !opt->steps) {
        tp_adamw_free(opt);
        return tp__error(TP_STATUS_OUT_OF_MEMORY, "adamw: out of memory");
    }
    for (int i = 0; i < params->count; i++) opt->params[i] = params->items[i];
    return TP_STATUS_OK;
}

#define ADAMW_LOOP(T, SQRT)                                                     \
    do {                                                                       \
        T *P = (T *)tp_tensor_data(p);                                         \
        const T *G = (const T *)tp_tensor_data(g);                             \
        T *M = (T *)tp_tensor_data(opt->exp_avg[i]);                           \
        T *V = (T *)tp_tensor_data(opt->exp_avg_sq[i]);                        \
        const T decay = (T)(1 - o->lr * o->weight_decay), b1 = (T)o->beta1,    \
                b2 = (T)o->beta2, step = (T)step_size, isb2 = (T)inv_sqrt_bc2, \
                eps = (T)o->eps;                                               \
        for (int64_t k = 0; k < n; k++) {                                      \
            T gk = G[k];                                                       \
            T m = b1 * M[k] + ((T)1 - b1) * gk;                                \
            T v = b2 * V[k] + ((T)1 - b2) * gk * gk;                           \
            M[k] = m;                                                          \
            V[k] = v;                                                          \
            P[k] = P[k] * decay - step * m / (SQRT(v) * isb2 + eps);           \
        }                                                                      \
    } while (0)

tp_status tp_adamw_step(tp_adamw *opt) {
    if (!opt || !opt->params) return tp__error(TP_STATUS_INVALID_ARGUMENT, "adamw: optimizer is not initialized");
    const tp_adamw_options *o = &opt->options;
    for (int i = 0; i < opt->count; i++) {
        tp_tensor *p = opt->params[i];
        tp_tensor *g = tp__optim_grad(p);
        if (!g) {
            if (tp_tensor_grad(p)) return tp_last_status();
            continue;
        }
        if (!opt->exp_avg[i]) {
            opt->exp_avg[i] = tp_zeros(tp_tensor_dim(p), tp_tensor_sizes(p), tp_tensor_dtype(p));
            opt->exp_avg_sq[i] = tp_zeros(tp_tensor_dim(p), tp_tensor_sizes(p), tp_tensor_dtype(p));
            if (!opt->exp_avg[i] || !opt->exp_avg_sq[i]) {
                tp_tensor_release(g);
                return tp_last_status();
            }
        }
        int64_t t = ++opt->steps[i];
        double bc1 = 1 - pow(o->beta1, (double)t), bc2 = 1 - pow(o->beta2, (double)t);
        double step_size = o->lr / bc1, inv_sqrt_bc2 = 1 / sqrt(bc2);
        int64_t n = tp_tensor_numel(p);
        if (tp_tensor_dtype(p) == TP_DTYPE_FLOAT32) ADAMW_LOOP(float, sqrtf);
        else ADAMW_LOOP(double, sqrt);
        tp_tensor_bump_version(p);
        tp_tensor_release(g);
    }
    return TP_STATUS_OK;
}

void tp_adamw_free(tp_adamw *opt) {
    if (!opt) return;
    for (int i = 0; i < opt->count; i++) {
        if (opt->exp_avg) tp_tensor_release(opt->exp_avg[i]);
        if (opt->exp_avg_sq) tp_tensor_release(opt->exp_avg_sq[i]);
    }
    free(opt->exp_avg);
    free(opt->exp_avg_sq);
    free(opt->steps);
    free(opt->params);
    *opt = (tp_adamw){0};
}
