/*
 * tensorplay/autograd.h - reverse-mode automatic differentiation.
 *
 * The ops in ops.h compute and record nothing (like ATen's native kernels).
 * The tp_ag_* calls here compute with those same kernels and, when grad
 * mode is on and an input requires grad, record a node (grad_fn) for the
 * output that holds what backward needs.  tp_backward() then runs the graph
 * from an output in dependency order and accumulates into the .grad of
 * every leaf that requires grad (tp_tensor_grad in tensor.h).
 *
 *     tp_tensor *w = tp_randn(2, (int64_t[]){3, 2}, TP_DTYPE_FLOAT32, 1);
 *     tp_tensor_set_requires_grad(w, true);                 // a leaf
 *     tp_tensor *x = tp_ones(2, (int64_t[]){4, 3}, TP_DTYPE_FLOAT32);
 *     tp_tensor *y = tp_ag_matmul(x, w);                    // grad_fn MmBackward0
 *     tp_tensor *l = tp_ag_sum(y, 0, NULL, false);          // 0-d
 *     tp_backward(l, NULL, false);                          // w's grad: all 4s
 *     tp_tensor_release(l); tp_tensor_release(y); ...
 *
 * Ownership: as everywhere in the runtime, each call returning a tensor
 * returns a NEW reference, or NULL with tp_last_error() set.  The graph is
 * owned by the tensors it produced: releasing the last output frees it
 * (iteratively: a 100,000-node chain frees without deep recursion).  A
 * graph holds its leaves and its saved tensors until it is freed, or until
 * tp_backward runs without retain_graph, which frees the saved tensors.
 *
 * Semantics follow PyTorch (c10/autograd), and so do the error texts, with
 * PyTorch's type names written as tensorplay's: "tensorplay.FloatTensor"
 * for "torch.FloatTensor", "tensorplay.Size([3])" for "torch.Size([3])".
 *   - no_grad is thread-local and only stops recording: in-place ops still
 *     bump the version counter.
 *   - A saved tensor modified in place since it was saved fails backward
 *     with "one of the variables needed for gradient computation has been
 *     modified by an inplace operation: [tensorplay.FloatTensor [3]], which
 *     is output 0 of SigmoidBackward0, is at version 1; expected version 0
 *     instead. Hint: ..." (the "which is output" clause only when the
 *     tensor was made by a node).
 *   - Views made here (tp_ag_view ... tp_ag_expand) share storage and
 *     version counter with their input and record a node; the views in
 *     tensor.h record nothing: such a view of a tensor that requires grad
 *     copies the flag but has no grad_fn, so to autograd it is a leaf of
 *     its own (its gradient goes to its own .grad, not to its base's).
 *   - One backward at a time per graph (node scratch lives in the nodes),
 *     and no two threads accumulating into the same leaf at once (.grad
 *     is not locked); no create_graph (backward formulas do not record).
 */
#ifndef TENSORPLAY_AUTOGRAD_H
#define TENSORPLAY_AUTOGRAD_H

#include <stdbool.h>
#include <stdint.h>
#include "tensorplay/ops.h"
#include "tensorplay/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

// ---- grad mode and the engine -----------------------------------------------

/* Whether tp_ag_* calls record on this thread (default true). */
bool tp_grad_is_enabled(void);
/* Sets this thread's grad mode; returns the previous one, so a no_grad
 * region reads:  bool prev = tp_grad_set_enabled(false); ...;
 * tp_grad_set_enabled(prev); */
bool tp_grad_set_enabled(bool enabled);

/* Runs backward from output.  grad_output NULL means 1 and is allowed only
 * for a one-element output ("grad can be implicitly created only for scalar
 * outputs"); otherwise it must have output's shape ("Mismatch in shape:
 * grad_output[0] has a shape of tensorplay.Size([2]) and output[0] has a
 * shape of tensorplay.Size([3]).") and is converted to output's dtype.
 * output must require grad ("element 0 of tensors does not require grad
 * and does not have a grad_fn").  Gradients are summed into the .grad of
 * every leaf reached (a leaf's first gradient is adopted when nothing else
 * holds it, else copied; later ones are added in place).  Without
 * retain_graph each node's saved tensors are released as it runs, and a
 * second backward through them fails with PyTorch's "Trying to backward
 * through the graph a second time ...".  On failure, gradients already
 * accumulated stay, as in PyTorch.  Borrowed arguments. */
tp_status tp_backward(tp_tensor *output, const tp_tensor *grad_output, bool retain_graph);

/* A leaf: made by the user, not by a recorded op (requires_grad or not). */
bool tp_tensor_is_leaf(const tp_tensor *t);
/* "MulBackward0" for a tensor a recorded op made, NULL for a leaf (static). */
const char *tp_tensor_grad_fn_name(const tp_tensor *t);

// ---- differentiable ops (same semantics as their ops.h counterparts) -------

/* ADD, SUB, MUL, DIV, POW (broadcasting; gradients summed back to each
 * input's shape).  Comparisons are computed and never recorded: a bool
 * result has no gradient. */
tp_tensor *tp_ag_binary(tp_binary_op op, tp_tensor *a, tp_tensor *b);
tp_tensor *tp_ag_binary_scalar(tp_binary_op op, tp_tensor *a, double b);
tp_tensor *tp_ag_unary(tp_unary_op op, tp_tensor *a);
tp_tensor *tp_ag_add(tp_tensor *a, tp_tensor *b);
tp_tensor *tp_ag_sub(tp_tensor *a, tp_tensor *b);
tp_tensor *tp_ag_mul(tp_tensor *a, tp_tensor *b);
tp_tensor *tp_ag_div(tp_tensor *a, tp_tensor *b);
/* GELU, exact (erf) form as torch.nn.GELU(); float32/float64. */
tp_tensor *tp_ag_gelu(tp_tensor *a);

/* In place, with PyTorch's checks: a leaf that requires grad (or a view of
 * one) is refused while grad mode is on ("a leaf Variable that requires
 * grad is being used in an in-place operation.").  Every differentiable
 * binary op (tensor or scalar) and every unary op records its history on a
 * tensor that is not a view: the node, named as the out-of-place op's
 * (MulBackward0, ExpBackward0, ...), becomes the tensor's grad_fn.  Ops
 * whose gradient needs the value the tensor had before (mul_/div_/pow_ by
 * a tensor, pow_ by a scalar, the unary ops) compute out of place on a copy
 * of it, which the node keeps, and write the result into the tensor, as
 * PyTorch's original_self does.  On a view with history, and for
 * comparisons, they return TP_STATUS_UNSUPPORTED (PyTorch's CopySlices is
 * not implemented).  The version is bumped as in ops.h. */
tp_status tp_ag_binary_(tp_binary_op op, tp_tensor *a, tp_tensor *b);
tp_status tp_ag_binary_scalar_(tp_binary_op op, tp_tensor *a, double b);
tp_status tp_ag_unary_(tp_unary_op op, tp_tensor *a);
/* copy_ (CopyBackwards: the gradient goes to src, summed to its shape) and
 * fill_ (FillBackward0), as PyTorch's: dst's old value is overwritten, so
 * its history gets zeros.  Same checks and view rule as above. */
tp_status tp_ag_copy_(tp_tensor *dst, tp_tensor *src);
tp_status tp_ag_fill_(tp_tensor *t, double value);

tp_tensor *tp_ag_sum(tp_tensor *t, int ndims, const int *dims, bool keepdim);
tp_tensor *tp_ag_mean(tp_tensor *t, int ndims, const int *dims, bool keepdim);

/* amax / amin over dims: the gradient is shared evenly among the elements
 * equal to the result (PyTorch's rule for ties). */
tp_tensor *tp_ag_max(tp_tensor *t, int ndims, const int *dims, bool keepdim);
tp_tensor *tp_ag_min(tp_tensor *t, int ndims, const int *dims, bool keepdim);
/* cond (bool, no gradient) ? a : b, broadcasting. */
tp_tensor *tp_ag_where(const tp_tensor *cond, tp_tensor *a, tp_tensor *b);
/* Copies: the gradient passes through (converted back to t's dtype).
 * contiguous/to_dtype return t itself, with no node, when nothing changes;
 * to an integral dtype the result does not require grad. */
tp_tensor *tp_ag_clone(tp_tensor *t);
tp_tensor *tp_ag_contiguous(tp_tensor *t);
tp_tensor *tp_ag_to_dtype(tp_tensor *t, tp_dtype dtype);

tp_tensor *tp_ag_matmul(tp_tensor *a, tp_tensor *b);
tp_tensor *tp_ag_bmm(tp_tensor *a, tp_tensor *b);
/* x (..., in) @ weight (out, in)^T + bias (out) (bias may be NULL), as
 * torch.nn.functional.linear; one node (AddmmBackward0). */
tp_tensor *tp_ag_linear(tp_tensor *x, tp_tensor *weight, tp_tensor *bias);

tp_tensor *tp_ag_view(tp_tensor *t, int ndim, const int64_t *sizes);
tp_tensor *tp_ag_reshape(tp_tensor *t, int ndim, const int64_t *sizes);
tp_tensor *tp_ag_transpose(tp_tensor *t, int dim0, int dim1);
tp_tensor *tp_ag_permute(tp_tensor *t, int ndim, const int *dims);
tp_tensor *tp_ag_t(tp_tensor *t);
tp_tensor *tp_ag_narrow(tp_tensor *t, int dim, int64_t start, int64_t length);
tp_tensor *tp_ag_slice(tp_tensor *t, int dim, int64_t start, int64_t end, int64_t step);
tp_tensor *tp_ag_select(tp_tensor *t, int dim, int64_t index);
tp_tensor *tp_ag_squeeze(tp_tensor *t); /* all size-1 dims */
tp_tensor *tp_ag_squeeze_dim(tp_tensor *t, int dim);
tp_tensor *tp_ag_unsqueeze(tp_tensor *t, int dim);
tp_tensor *tp_ag_expand(tp_tensor *t, int ndim, const int64_t *sizes);
/* tp_tensor_as_strided with a gradient (AsStridedBackward0: put back through
 * the storage, as PyTorch's as_strided_backward).  When a node is made, the
 * output and the input must each have no two elements on one storage
 * element: else NULL with TP_STATUS_UNSUPPORTED ("as_strided: the gradient
 * through an output whose elements overlap ..."). */
tp_tensor *tp_ag_as_strided(tp_tensor *t, int ndim, const int64_t *sizes, const int64_t *strides,
                            int64_t storage_offset);

tp_tensor *tp_ag_cat(int n, tp_tensor *const *tensors, int dim);
tp_tensor *tp_ag_stack(int n, tp_tensor *const *tensors, int dim);
/* Gradient flows to t only (index is integral). */
tp_tensor *tp_ag_index_select(tp_tensor *t, int dim, const tp_tensor *index);

/* softmax / log_softmax along dim (float32/float64), max-subtracted. */
tp_tensor *tp_ag_softmax(tp_tensor *t, int dim);
tp_tensor *tp_ag_log_softmax(tp_tensor *t, int dim);
/* Mean cross-entropy of logits (N, C) against int64 class indices (N), as
 * torch.nn.functional.cross_entropy: log-sum-exp with the row maximum
 * subtracted, so large logits do not overflow.  A 0-d result.  A target
 * outside [0, C) fails with "Target 12 is out of bounds.". */
tp_tensor *tp_ag_cross_entropy(tp_tensor *logits, const tp_tensor *target);

/* 2-D convolution, x (N, C, H, W) with weight (O, C, kh, kw) and bias (O)
 * or NULL, as torch.nn.functional.conv2d with groups 1 and dilation 1:
 * im2col and one batched gemm; float32/float64. -> (N, O, OH, OW). */
tp_tensor *tp_ag_conv2d(tp_tensor *x, tp_tensor *weight, tp_tensor *bias, int64_t stride_h,
                        int64_t stride_w, int64_t pad_h, int64_t pad_w);

#ifdef __cplusplus
}
#endif
#endif
