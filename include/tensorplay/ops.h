/*
 * tensorplay/ops.h - creation, copies, elementwise math, reductions, matmul.
 *
 * Every op accepts any strided input (views, transposes, broadcasts), not
 * only contiguous tensors.  Every function returning a tp_tensor * returns a
 * NEW reference, or NULL with tp_last_error() set; on failure no output is
 * produced and in-place targets are left unchanged.  In-place ops (suffix _)
 * bump the target's version counter and return a status.
 *
 *     int64_t sz[2] = {2, 3};
 *     tp_tensor *a = tp_arange(0, 6, 1, TP_DTYPE_FLOAT32);
 *     tp_tensor *m = tp_tensor_view(a, 2, sz);                 // [[0,1,2],[3,4,5]]
 *     tp_tensor *s = tp_sum(m, 1, (int[]){1}, false);          // [3, 12]
 *     tp_add_(m, m);                                           // version 0 -> 1
 */
#ifndef TENSORPLAY_OPS_H
#define TENSORPLAY_OPS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include "tensorplay/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- creation (contiguous, CPU, from the registered allocator) ---------- */

tp_tensor *tp_empty(int ndim, const int64_t *sizes, tp_dtype dtype);
tp_tensor *tp_zeros(int ndim, const int64_t *sizes, tp_dtype dtype);
tp_tensor *tp_ones(int ndim, const int64_t *sizes, tp_dtype dtype);
tp_tensor *tp_full(int ndim, const int64_t *sizes, double value, tp_dtype dtype);
/* 1-D [start, end) by step (step != 0); numel = ceil((end - start) / step). */
tp_tensor *tp_arange(double start, double end, double step, tp_dtype dtype);
/* 1-D, `steps` values from start to end inclusive (steps >= 0). */
tp_tensor *tp_linspace(double start, double end, int64_t steps, tp_dtype dtype);
/* Uniform [0, 1) / standard normal from a seeded generator (floating dtypes);
 * the same seed gives the same values.  The generator is xoshiro256**
 * seeded through splitmix64(seed), drawn in row-major order on the calling
 * thread; rand keeps as many top bits as the dtype's significand holds (so
 * values are exact and < 1), randn uses Box-Muller on pairs of doubles. */
tp_tensor *tp_rand(int ndim, const int64_t *sizes, tp_dtype dtype, uint64_t seed);
tp_tensor *tp_randn(int ndim, const int64_t *sizes, tp_dtype dtype, uint64_t seed);
/* Wraps existing memory without copying.  strides NULL = contiguous
 * (strides must be >= 0).  deleter(ctx) runs when the storage's data is
 * released (ctx NULL = data, as c10's DataPtr does); deleter NULL means the
 * memory is borrowed and must outlive the tensor.  Ownership passes on the
 * call: if it fails, the deleter has already run. */
tp_tensor *tp_from_blob(void *data, int ndim, const int64_t *sizes, const int64_t *strides,
                        tp_dtype dtype, tp_deleter_fn deleter, void *ctx);

/* ---- copies and conversion ---------------------------------------------- */

/* Copies src into dst, broadcasting src to dst's shape and converting the
 * dtype.  dst may be any strided tensor (overlapping dst is refused).  If
 * src shares memory with dst, src is read completely before dst is written.
 * Float -> integer truncates toward zero, narrowing integers wrap. */
tp_status tp_copy_(tp_tensor *dst, const tp_tensor *src);
/* New storage with the same values, contiguous; version starts at 0. */
tp_tensor *tp_clone(const tp_tensor *t);
/* t itself (retained) if already contiguous, else a contiguous copy. */
tp_tensor *tp_contiguous(tp_tensor *t);
/* t itself (retained) if dtype matches, else a new tensor in that dtype. */
tp_tensor *tp_to_dtype(tp_tensor *t, tp_dtype dtype);
/* Element at a multi-index, converted to double. */
tp_status tp_tensor_get(const tp_tensor *t, const int64_t *index, double *out);
/* Value of a one-element tensor. */
tp_status tp_tensor_item(const tp_tensor *t, double *out);
/* Fills every element; in place (bumps the version).  A tensor whose
 * elements share memory (e.g. expanded) is refused, as in PyTorch. */
tp_status tp_fill_(tp_tensor *t, double value);

/* ---- elementwise (broadcasting; result dtype per tp_dtype_promote) ------- */

typedef enum tp_binary_op {
    TP_BINARY_OP_ADD, TP_BINARY_OP_SUB, TP_BINARY_OP_MUL, TP_BINARY_OP_DIV, TP_BINARY_OP_POW,
    TP_BINARY_OP_EQ, TP_BINARY_OP_NE, TP_BINARY_OP_LT, TP_BINARY_OP_LE, TP_BINARY_OP_GT,
    TP_BINARY_OP_GE, /* comparisons give bool */
    TP_BINARY_OP_COUNT
} tp_binary_op;

typedef enum tp_unary_op {
    TP_UNARY_OP_NEG, TP_UNARY_OP_ABS, TP_UNARY_OP_EXP, TP_UNARY_OP_LOG, TP_UNARY_OP_SQRT,
    TP_UNARY_OP_RELU, TP_UNARY_OP_TANH, TP_UNARY_OP_SIGMOID,
    TP_UNARY_OP_COUNT
} tp_unary_op;

tp_tensor *tp_binary(tp_binary_op op, const tp_tensor *a, const tp_tensor *b);
/* a op scalar (the scalar does not promote a floating tensor's dtype; an
 * integer tensor with a non-integral scalar becomes float32). */
tp_tensor *tp_binary_scalar(tp_binary_op op, const tp_tensor *a, double b);
/* exp/log/sqrt/tanh/sigmoid of an integer tensor give float32. */
tp_tensor *tp_unary(tp_unary_op op, const tp_tensor *a);
/* In place: a = a op b (b broadcast to a; the result must fit a's shape and
 * dtype: "result type Float can't be cast to the desired output type Long").
 * The version is bumped once on success; on error a is untouched.  An
 * operand overlapping a (other than a itself) is read before a is written. */
tp_status tp_binary_(tp_binary_op op, tp_tensor *a, const tp_tensor *b);
tp_status tp_binary_scalar_(tp_binary_op op, tp_tensor *a, double b);
tp_status tp_unary_(tp_unary_op op, tp_tensor *a);

tp_tensor *tp_add(const tp_tensor *a, const tp_tensor *b);
tp_tensor *tp_sub(const tp_tensor *a, const tp_tensor *b);
tp_tensor *tp_mul(const tp_tensor *a, const tp_tensor *b);
tp_tensor *tp_div(const tp_tensor *a, const tp_tensor *b);
tp_tensor *tp_pow(const tp_tensor *a, const tp_tensor *b);
tp_tensor *tp_neg(const tp_tensor *a);
tp_tensor *tp_abs(const tp_tensor *a);
tp_tensor *tp_exp(const tp_tensor *a);
tp_tensor *tp_log(const tp_tensor *a);
tp_tensor *tp_sqrt(const tp_tensor *a);
tp_tensor *tp_relu(const tp_tensor *a);
tp_tensor *tp_tanh(const tp_tensor *a);
tp_tensor *tp_sigmoid(const tp_tensor *a);
tp_status tp_add_(tp_tensor *a, const tp_tensor *b);
tp_status tp_sub_(tp_tensor *a, const tp_tensor *b);
tp_status tp_mul_(tp_tensor *a, const tp_tensor *b);
tp_status tp_div_(tp_tensor *a, const tp_tensor *b);
tp_status tp_relu_(tp_tensor *a);
/* cond (bool) ? a : b, all three broadcast together. */
tp_tensor *tp_where(const tp_tensor *cond, const tp_tensor *a, const tp_tensor *b);

/* ---- reductions -------------------------------------------------------- */

/* Over the listed dims (ndims == 0 or dims NULL = all dims).  sum of bool or
 * integers gives int64; mean requires a floating dtype. */
tp_tensor *tp_sum(const tp_tensor *t, int ndims, const int *dims, bool keepdim);
tp_tensor *tp_mean(const tp_tensor *t, int ndims, const int *dims, bool keepdim);
tp_tensor *tp_max(const tp_tensor *t, int ndims, const int *dims, bool keepdim);
tp_tensor *tp_min(const tp_tensor *t, int ndims, const int *dims, bool keepdim);
/* int64 indices of the first maximum along dim. */
tp_tensor *tp_argmax(const tp_tensor *t, int dim, bool keepdim);

/* ---- linear algebra (float32/float64 through OpenBLAS) ------------------ */

/* torch.matmul semantics: 1-D x 1-D dot, 2-D x 2-D, batched with broadcast. */
tp_tensor *tp_matmul(const tp_tensor *a, const tp_tensor *b);
/* (B, n, k) x (B, k, m) -> (B, n, m). */
tp_tensor *tp_bmm(const tp_tensor *a, const tp_tensor *b);

/* ---- joining and indexing (always new storage) --------------------------- */

tp_tensor *tp_cat(int n, tp_tensor *const *tensors, int dim);
tp_tensor *tp_stack(int n, tp_tensor *const *tensors, int dim);
/* index: 1-D int64 or int32 tensor. */
tp_tensor *tp_index_select(const tp_tensor *t, int dim, const tp_tensor *index);

/* ---- printing ------------------------------------------------------------- */

/* PyTorch-like text ("tensor([[0., 1.],\n        [2., 3.]])"); the caller
 * owns the returned string and frees it with free(). NULL on failure. */
char *tp_tensor_to_string(const tp_tensor *t);
tp_status tp_tensor_print(const tp_tensor *t, FILE *out);

/* ---- threads ------------------------------------------------------------- */

/* Kernel threads (>= 1; default: online CPUs).  The pool's workers sleep on
 * a condition variable while idle (never spin), and BLAS calls run on the
 * caller's thread with OpenBLAS's own threading, never from inside the pool. */
tp_status tp_set_num_threads(int n);
int tp_get_num_threads(void);

#ifdef __cplusplus
}
#endif
#endif
