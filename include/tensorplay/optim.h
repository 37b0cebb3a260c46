/*
 * tensorplay/optim.h - SGD (momentum, Nesterov, weight decay) and AdamW,
 * with PyTorch's update rules.
 *
 *     tp_adamw opt;
 *     tp_adamw_init(&opt, &params, (tp_adamw_options){.lr = 1e-3, .beta1 = 0.9,
 *                   .beta2 = 0.999, .eps = 1e-8, .weight_decay = 1e-2});
 *     for (...) {
 *         tp_param_list_zero_grad(&params, true);   // zero_grad(set_to_none=True)
 *         ... forward, tp_backward ...
 *         tp_adamw_step(&opt);
 *     }
 *     tp_adamw_free(&opt);
 *
 * Every option is what the caller writes: a field left out is 0 (PyTorch's
 * defaults are in the example above).  The optimizer BORROWS the parameter
 * tensors (copying the list's pointers at init) and owns its state tensors
 * (momentum buffers, moments).  A step updates each parameter that has a
 * .grad in place (bumping its version, as p.add_ does) without recording;
 * parameters without a .grad are skipped.  Parameters must be contiguous
 * float32 or float64.
 */
#ifndef TENSORPLAY_OPTIM_H
#define TENSORPLAY_OPTIM_H

#include "tensorplay/nn.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tp_sgd_options {
    double lr, momentum, dampening, weight_decay;
    bool nesterov;
} tp_sgd_options;

typedef struct tp_sgd {
    tp_sgd_options options;
    int count;
    tp_tensor **params;   /* borrowed */
    tp_tensor **momentum; /* owned, NULL until a param's first step */
} tp_sgd;

/* Fails on invalid options ("Invalid learning rate: -1", "Nesterov momentum
 * requires a momentum and zero dampening") or unsupported parameters. */
tp_status tp_sgd_init(tp_sgd *opt, const tp_param_list *params, tp_sgd_options options);
tp_status tp_sgd_step(tp_sgd *opt);
void tp_sgd_free(tp_sgd *opt);

typedef struct tp_adamw_options {
    double lr, beta1, beta2, eps, weight_decay;
} tp_adamw_options;

typedef struct tp_adamw {
    tp_adamw_options options;
    int count;
    tp_tensor **params;              /* borrowed */
    tp_tensor **exp_avg, **exp_avg_sq; /* owned, NULL until a param's first step */
    int64_t *steps;
} tp_adamw;

/* Fails on invalid options ("Invalid beta parameter at index 0: 1",
 * "Invalid epsilon value: -1", ...). */
tp_status tp_adamw_init(tp_adamw *opt, const tp_param_list *params, tp_adamw_options options);
tp_status tp_adamw_step(tp_adamw *opt);
void tp_adamw_free(tp_adamw *opt);

#ifdef __cplusplus
}
#endif
#endif
