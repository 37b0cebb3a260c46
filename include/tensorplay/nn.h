/*
 * tensorplay/nn.h - layers as plain structs, their parameters as a list.
 *
 * A layer is a struct of tensors (its parameters: leaves that require
 * grad) filled by *_init from an options struct written with designated
 * initializers, a *_forward that records through autograd.h, and *_free.
 * No class system: a model is a struct of layers and lists its parameters
 * by calling each layer's *_parameters on one tp_param_list.
 *
 *     tp_nn_linear fc;
 *     tp_nn_linear_init(&fc, (tp_nn_linear_options){.in_features = 784,
 *                                                   .out_features = 10, .seed = 1});
 *     tp_param_list params = {0};
 *     tp_nn_linear_parameters(&fc, &params);
 *     tp_tensor *logits = tp_nn_linear_forward(&fc, x);          // (B, 10)
 *     tp_tensor *loss = tp_nn_cross_entropy(logits, labels);      // 0-d
 *     tp_backward(loss, NULL, false);
 *     ...
 *     tp_param_list_free(&params);
 *     tp_nn_linear_free(&fc);
 *
 * Ownership: a layer owns its parameter tensors (released by *_free); a
 * tp_param_list BORROWS them (it holds pointers, not references), so it
 * must not outlive the layers.  Forward calls return NEW references or NULL
 * with tp_last_error() set.  Initialization matches PyTorch's default
 * distributions (not its random stream): Linear weight and bias
 * U(-1/sqrt(in), 1/sqrt(in)), LayerNorm 1 and 0, Embedding N(0, 1).
 */
#ifndef TENSORPLAY_NN_H
#define TENSORPLAY_NN_H

#include <stdbool.h>
#include <stdint.h>
#include "tensorplay/autograd.h"

#ifdef __cplusplus
extern "C" {
#endif

// ---- parameter lists ----------------------------------------------------

typedef struct tp_param_list {
    tp_tensor **items; /* borrowed */
    int count, capacity;
} tp_param_list;

/* Appends p (borrowed).  Fails on NULL or out of memory. */
tp_status tp_param_list_add(tp_param_list *list, tp_tensor *p);
/* Frees the array (not the tensors) and zeroes the list. */
void tp_param_list_free(tp_param_list *list);
/* optimizer.zero_grad(set_to_none): drops each .grad, or fills it with 0
 * in place. */
tp_status tp_param_list_zero_grad(const tp_param_list *list, bool set_to_none);

// ---- initializers (in place, under no_grad; the same seed gives the same values)

tp_status tp_nn_init_uniform_(tp_tensor *t, double low, double high, uint64_t seed);
tp_status tp_nn_init_normal_(tp_tensor *t, double mean, double std, uint64_t seed);

// ---- layers -----------------------------------------------------------------

typedef struct tp_nn_linear_options {
    int64_t in_features, out_features;
    bool no_bias;   /* false: with a bias, as PyTorch's default */
    tp_dtype dtype; /* 0 = float32 */
    uint64_t seed;
} tp_nn_linear_options;

typedef struct tp_nn_linear {
    tp_tensor *weight; /* (out, in) */
    tp_tensor *bias;   /* (out) or NULL */
} tp_nn_linear;

tp_status tp_nn_linear_init(tp_nn_linear *m, tp_nn_linear_options options);
/* x (..., in) -> (..., out) */
tp_tensor *tp_nn_linear_forward(const tp_nn_linear *m, tp_tensor *x);
tp_status tp_nn_linear_parameters(const tp_nn_linear *m, tp_param_list *list);
void tp_nn_linear_free(tp_nn_linear *m);

typedef struct tp_nn_layer_norm_options {
    int64_t normalized_size; /* the last dim's size */
    double eps;              /* 0 = 1e-5 */
    tp_dtype dtype;
} tp_nn_layer_norm_options;

typedef struct tp_nn_layer_norm {
    tp_tensor *weight, *bias; /* (normalized_size) */
    double eps;
} tp_nn_layer_norm;

tp_status tp_nn_layer_norm_init(tp_nn_layer_norm *m, tp_nn_layer_norm_options options);
/* Normalizes over the last dim (biased variance, as PyTorch). */
tp_tensor *tp_nn_layer_norm_forward(const tp_nn_layer_norm *m, tp_tensor *x);
tp_status tp_nn_layer_norm_parameters(const tp_nn_layer_norm *m, tp_param_list *list);
void tp_nn_layer_norm_free(tp_nn_layer_norm *m);

typedef struct tp_nn_embedding_options {
    int64_t num_embeddings, embedding_dim;
    tp_dtype dtype;
    uint64_t seed;
} tp_nn_embedding_options;

typedef struct tp_nn_embedding {
    tp_tensor *weight; /* (num_embeddings, embedding_dim) */
} tp_nn_embedding;

tp_status tp_nn_embedding_init(tp_nn_embedding *m, tp_nn_embedding_options options);
/* indices: int64 of any shape -> (..., embedding_dim).  An index out of
 * range fails (index_select's error). */
tp_tensor *tp_nn_embedding_forward(const tp_nn_embedding *m, const tp_tensor *indices);
tp_status tp_nn_embedding_parameters(const tp_nn_embedding *m, tp_param_list *list);
void tp_nn_embedding_free(tp_nn_embedding *m);

typedef struct tp_nn_dropout {
    double p;       /* probability of zeroing, in [0, 1] */
    uint64_t seed;  /* the masks of call k come from seed + k */
    uint64_t calls; /* forward calls in training so far */
} tp_nn_dropout;

/* In training: zeroes each element with probability p and scales the rest
 * by 1/(1-p); otherwise (or p == 0) returns x retained.  Seeded: the same
 * struct state gives the same mask. */
tp_tensor *tp_nn_dropout_forward(tp_nn_dropout *m, tp_tensor *x, bool training);

typedef struct tp_nn_conv2d_options {
    int64_t in_channels, out_channels, kernel_size; /* square kernels */
    int64_t stride;  /* 0 = 1 */
    int64_t padding; /* zeros on each side */
    bool no_bias;
    tp_dtype dtype;  /* float32 (0) or float64 */
    uint64_t seed;
} tp_nn_conv2d_options;

typedef struct tp_nn_conv2d {
    tp_tensor *weight; /* (out, in, k, k) */
    tp_tensor *bias;   /* (out) or NULL */
    int64_t stride, padding;
} tp_nn_conv2d;

/* Weight and bias U(-1/sqrt(in*k*k), 1/sqrt(in*k*k)), PyTorch's default. */
tp_status tp_nn_conv2d_init(tp_nn_conv2d *m, tp_nn_conv2d_options options);
/* x (N, in, H, W) -> (N, out, OH, OW); see tp_ag_conv2d. */
tp_tensor *tp_nn_conv2d_forward(const tp_nn_conv2d *m, tp_tensor *x);
tp_status tp_nn_conv2d_parameters(const tp_nn_conv2d *m, tp_param_list *list);
void tp_nn_conv2d_free(tp_nn_conv2d *m);

typedef struct tp_nn_lstm_cell_options {
    int64_t input_size, hidden_size;
    tp_dtype dtype;
    uint64_t seed;
} tp_nn_lstm_cell_options;

typedef struct tp_nn_lstm_cell {
    tp_tensor *weight_ih, *weight_hh; /* (4H, in), (4H, H): gates i, f, g, o */
    tp_tensor *bias_ih, *bias_hh;     /* (4H) */
    int64_t hidden_size;
} tp_nn_lstm_cell;

/* Every parameter U(-1/sqrt(H), 1/sqrt(H)), PyTorch's default. */
tp_status tp_nn_lstm_cell_init(tp_nn_lstm_cell *m, tp_nn_lstm_cell_options options);
/* One step, as torch.nn.LSTMCell: x (B, in), h and c (B, H) -> *h_out and
 * *c_out (B, H), NEW references (both NULL on failure). */
tp_status tp_nn_lstm_cell_forward(const tp_nn_lstm_cell *m, tp_tensor *x, tp_tensor *h, tp_tensor *c,
                                  tp_tensor **h_out, tp_tensor **c_out);
tp_status tp_nn_lstm_cell_parameters(const tp_nn_lstm_cell *m, tp_param_list *list);
void tp_nn_lstm_cell_free(tp_nn_lstm_cell *m);

// ---- functional -------------------------------------------------------------

tp_tensor *tp_nn_relu(tp_tensor *x);
tp_tensor *tp_nn_gelu(tp_tensor *x);
/* Mean cross-entropy of logits (N, C) against int64 targets (N); see
 * tp_ag_cross_entropy. */
tp_tensor *tp_nn_cross_entropy(tp_tensor *logits, const tp_tensor *target);

#ifdef __cplusplus
}
#endif
#endif
