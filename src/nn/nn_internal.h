/*
 * src/nn/nn_internal.h - what the layer files share.  Private to src/nn.
 */
#ifndef TENSORPLAY_NN_INTERNAL_H
#define TENSORPLAY_NN_INTERNAL_H

#include "../core/internal.h"
#include "tensorplay/nn.h"

/* A new parameter (a leaf that requires grad) drawn from U(-bound, bound)
 * with seed.  New reference or NULL (error set). */
tp_tensor *tp__nn_parameter(int ndim, const int64_t *sizes, tp_dtype dtype, double bound, uint64_t seed);

#endif
