/*
 * samples/train/leak_common.h - what the three leak samples share: a small
 * classifier (64-256-10, batch 64, synthetic data), the CPU allocator's
 * live bytes, and the exit rule of --check.
 *
 * Each leak sample is a training loop with one classic mistake, written on
 * purpose; it prints the bytes the CPU allocator holds as it goes, so the
 * leak is visible without a profiler.  With --check it exits 1 unless the
 * leak shows (tests/nn runs them so).
 */
#ifndef TP_SAMPLES_LEAK_COMMON_H
#define TP_SAMPLES_LEAK_COMMON_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mlp_model.h" /* MLP_OK, MLP_OK_STATUS */

typedef struct small_model {
    tp_nn_linear fc1, fc2;
    tp_param_list params;
} small_model;

static inline void small_model_init(small_model *m) {
    *m = (small_model){0};
    MLP_OK_STATUS(tp_nn_linear_init(&m->fc1, (tp_nn_linear_options){.in_features = 64, .out_features = 256, .seed = 1}));
    MLP_OK_STATUS(tp_nn_linear_init(&m->fc2, (tp_nn_linear_options){.in_features = 256, .out_features = 10, .seed = 2}));
    MLP_OK_STATUS(tp_nn_linear_parameters(&m->fc1, &m->params));
    MLP_OK_STATUS(tp_nn_linear_parameters(&m->fc2, &m->params));
}

static inline void small_model_free(small_model *m) {
    tp_param_list_free(&m->params);
    tp_nn_linear_free(&m->fc1);
    tp_nn_linear_free(&m->fc2);
}

/* logits (64, 10) of a seeded batch; *y its labels.  New references. */
static inline tp_tensor *small_forward(small_model *m, uint64_t seed, tp_tensor **y) {
    tp_tensor *x = MLP_OK(tp_randn(2, (int64_t[]){64, 64}, TP_DTYPE_FLOAT32, seed));
    tp_tensor *sums = MLP_OK(tp_sum(x, 1, (int[]){1}, false));
    tp_tensor *pos = MLP_OK(tp_binary_scalar(TP_BINARY_OP_GT, sums, 0));
    *y = MLP_OK(tp_to_dtype(pos, TP_DTYPE_INT64)); /* class 0 or 1 */
    tp_tensor *a = MLP_OK(tp_nn_linear_forward(&m->fc1, x));
    tp_tensor *h = MLP_OK(tp_nn_relu(a));
    tp_tensor *logits = MLP_OK(tp_nn_linear_forward(&m->fc2, h));
    tp_tensor *ts[] = {x, sums, pos, a, h};
    for (int i = 0; i < 5; i++) tp_tensor_release(ts[i]);
    return logits;
}

static inline uint64_t live_bytes(void) {
    tp_allocator_stats st;
    tp_allocator_get_stats(tp_allocator_cpu(), &st);
    return st.current_bytes;
}

static inline int leak_args(int argc, char **argv, int *steps, int *check) {
    *steps = 40;
    *check = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--check") == 0) *check = 1;
        else if ((*steps = atoi(argv[i])) < 4) {
            fprintf(stderr, "usage: %s [steps >= 4] [--check]\n", argv[0]);
            return 0;
        }
    }
    return 1;
}

#endif
