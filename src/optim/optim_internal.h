/*
 * src/optim/optim_internal.h - what the optimizers share: the parameter
 * checks at init and a parameter's gradient in the form the fused loops
 * read.  Private to src/optim.
 */
#ifndef TENSORPLAY_OPTIM_INTERNAL_H
#define TENSORPLAY_OPTIM_INTERNAL_H

#include "../core/internal.h"
#include "tensorplay/optim.h"

/* Every parameter contiguous float32/float64 (the loops' layout). */
tp_status tp__optim_check_params(const tp_param_list *params, const char *who);

/* p's .grad as a contiguous tensor of p's dtype and shape (new
 * reference); NULL without error when p has no grad, NULL with the error
 * set when it cannot be made. */
tp_tensor *tp__optim_grad(tp_tensor *p);

#endif
