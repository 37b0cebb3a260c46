/*
 * samples/train/mlp_model.h - the 784-512-512-10 MLP that samples/train/mlp
 * trains and bench/train_step times: three Linear layers with ReLU between,
 * cross-entropy, AdamW; synthetic data made each step.
 *
 * The data: x ~ N(0, 1) of shape (B, 784), labels y = argmax(x @ T) for a
 * fixed random "teacher" T (784, 10), so there is something to learn.
 * Everything here goes through the public API; every failure exits with
 * one line on stderr.
 */
#ifndef TP_SAMPLES_MLP_MODEL_H
#define TP_SAMPLES_MLP_MODEL_H

#include <stdio.h>
#include <stdlib.h>
#include "tensorplay/tensorplay.h"

#define MLP_IN 784
#define MLP_HIDDEN 512
#define MLP_CLASSES 10

static inline tp_tensor *mlp_ok(tp_tensor *t, const char *what) {
    if (!t) {
        fprintf(stderr, "mlp: %s failed: %s\n", what, tp_last_error());
        exit(1);
    }
    return t;
}
static inline void mlp_ok_status(tp_status st, const char *what) {
    if (st != TP_STATUS_OK) {
        fprintf(stderr, "mlp: %s failed: %s\n", what, tp_last_error());
        exit(1);
    }
}
#define MLP_OK(call) mlp_ok((call), #call)
#define MLP_OK_STATUS(call) mlp_ok_status((call), #call)

typedef struct mlp_model {
    tp_nn_linear fc1, fc2, fc3;
    tp_param_list params; /* borrowed from the layers */
    tp_tensor *teacher;   /* (784, 10) */
} mlp_model;

static inline void mlp_model_init(mlp_model *m, uint64_t seed) {
    *m = (mlp_model){0};
    MLP_OK_STATUS(tp_nn_linear_init(&m->fc1, (tp_nn_linear_options){.in_features = MLP_IN, .out_features = MLP_HIDDEN, .seed = seed + 1}));
    MLP_OK_STATUS(tp_nn_linear_init(&m->fc2, (tp_nn_linear_options){.in_features = MLP_HIDDEN, .out_features = MLP_HIDDEN, .seed = seed + 2}));
    MLP_OK_STATUS(tp_nn_linear_init(&m->fc3, (tp_nn_linear_options){.in_features = MLP_HIDDEN, .out_features = MLP_CLASSES, .seed = seed + 3}));
    MLP_OK_STATUS(tp_nn_linear_parameters(&m->fc1, &m->params));
    MLP_OK_STATUS(tp_nn_linear_parameters(&m->fc2, &m->params));
    MLP_OK_STATUS(tp_nn_linear_parameters(&m->fc3, &m->params));
    m->teacher = MLP_OK(tp_randn(2, (int64_t[]){MLP_IN, MLP_CLASSES}, TP_DTYPE_FLOAT32, seed + 100));
}

static inline void mlp_model_free(mlp_model *m) {
    tp_param_list_free(&m->params);
    tp_nn_linear_free(&m->fc1);
    tp_nn_linear_free(&m->fc2);
    tp_nn_linear_free(&m->fc3);
    tp_tensor_release(m->teacher);
}

/* A fresh batch: *x (B, 784) float32, *y (B) int64.  New references. */
static inline void mlp_batch(const mlp_model *m, int64_t batch, uint64_t seed, tp_tensor **x, tp_tensor **y) {
    *x = MLP_OK(tp_randn(2, (int64_t[]){batch, MLP_IN}, TP_DTYPE_FLOAT32, seed));
    tp_tensor *scores = MLP_OK(tp_matmul(*x, m->teacher));
    *y = MLP_OK(tp_argmax(scores, 1, false));
    tp_tensor_release(scores);
}

/* logits (B, 10) = fc3(relu(fc2(relu(fc1(x))))); records when grad is on. */
static inline tp_tensor *mlp_forward(const mlp_model *m, tp_tensor *x) {
    tp_tensor *a1 = MLP_OK(tp_nn_linear_forward(&m->fc1, x));
    tp_tensor *h1 = MLP_OK(tp_nn_relu(a1));
    tp_tensor *a2 = MLP_OK(tp_nn_linear_forward(&m->fc2, h1));
    tp_tensor *h2 = MLP_OK(tp_nn_relu(a2));
    tp_tensor *logits = MLP_OK(tp_nn_linear_forward(&m->fc3, h2));
    tp_tensor_release(a1);
    tp_tensor_release(h1);
    tp_tensor_release(a2);
    tp_tensor_release(h2);
    return logits;
}

/* One training step: zero_grad(set_to_none), forward, backward, AdamW.
 * Returns the loss. */
static inline double mlp_step(mlp_model *m, tp_adamw *opt, int64_t batch, uint64_t seed) {
    tp_tensor *x, *y;
    mlp_batch(m, batch, seed, &x, &y);
    MLP_OK_STATUS(tp_param_list_zero_grad(&m->params, true));
    tp_tensor *logits = mlp_forward(m, x);
    tp_tensor *loss = MLP_OK(tp_nn_cross_entropy(logits, y));
    double value = 0;
    MLP_OK_STATUS(tp_tensor_item(loss, &value));
    MLP_OK_STATUS(tp_backward(loss, NULL, false));
    MLP_OK_STATUS(tp_adamw_step(opt));
    tp_tensor_release(loss);
    tp_tensor_release(logits);
    tp_tensor_release(y);
    tp_tensor_release(x);
    return value;
}

static inline tp_adamw_options mlp_adamw_options(void) {
    return (tp_adamw_options){.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 1e-2};
}

#endif
