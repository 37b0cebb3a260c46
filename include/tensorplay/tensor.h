/*
 * tensorplay/tensor.h - TensorImpl and zero-copy views.
 *
 * A tp_tensor is a refcounted TensorImpl: sizes, strides and storage_offset
 * (in elements) over a tp_storage, a dtype, a device, a version counter
 * shared by views and detach, the view's base (always the root base), and
 * requires_grad plus a grad slot.
 *
 * Ownership: every function that returns a tp_tensor * returns a NEW
 * reference (release it with tp_tensor_release) unless its comment says
 * "borrowed".  On failure it returns NULL and tp_last_error() says why.
 * Negative dims count from the end, as in PyTorch.
 *
 * Views (everything in the views section except detach, and reshape when it
 * does not copy) share storage and version counter, point at the root base,
 * and inherit requires_grad; shape errors use PyTorch's texts.
 *
 *     int64_t sz[2] = {3, 4};
 *     tp_tensor *x = tp_empty(2, sz, TP_DTYPE_FLOAT32);
 *     tp_tensor *a = tp_tensor_slice(x, 0, 1, 3, 1);     // x[1:]
 *     tp_tensor *v = tp_tensor_slice(a, 1, 1, 4, 1);     // x[1:, 1:]
 *     // tp_tensor_storage_offset(v) == 5, strides (4, 1), tp_tensor_base(v) == x
 *     tp_tensor_release(v); tp_tensor_release(a); tp_tensor_release(x);
 */
#ifndef TENSORPLAY_TENSOR_H
#define TENSORPLAY_TENSOR_H

#include <stdbool.h>
#include <stdint.h>
#include "tensorplay/dtype.h"
#include "tensorplay/storage.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TP_MAX_DIMS 8

typedef struct tp_tensor tp_tensor;

/* ---- lifetime ---------------------------------------------------------- */

/* Adds a reference and returns t (NULL passes through). */
tp_tensor *tp_tensor_retain(tp_tensor *t);
/* Drops a reference; the last one releases the storage reference. NULL ok. */
void tp_tensor_release(tp_tensor *t);

/* A tensor over `storage` (which it retains) with the given geometry.
 * strides NULL = contiguous.  Bounds-checked: fails with
 * TP_STATUS_OUT_OF_BOUNDS if the elements reach past the storage.
 * The result is not a view (its base is NULL) and has its own version counter. */
tp_tensor *tp_tensor_new_from_storage(tp_storage *storage, int64_t storage_offset, int ndim,
                                      const int64_t *sizes, const int64_t *strides, tp_dtype dtype);

/* ---- fields (all borrowed / by value) ---------------------------------- */

int tp_tensor_dim(const tp_tensor *t);
const int64_t *tp_tensor_sizes(const tp_tensor *t);
const int64_t *tp_tensor_strides(const tp_tensor *t);
int64_t tp_tensor_size(const tp_tensor *t, int dim);   /* -1 on bad dim (error set) */
int64_t tp_tensor_stride(const tp_tensor *t, int dim); /* 0 on bad dim (error set) */
int64_t tp_tensor_storage_offset(const tp_tensor *t);
int64_t tp_tensor_numel(const tp_tensor *t);
tp_dtype tp_tensor_dtype(const tp_tensor *t);
tp_device tp_tensor_device(const tp_tensor *t);
size_t tp_tensor_itemsize(const tp_tensor *t);
size_t tp_tensor_nbytes(const tp_tensor *t); /* numel * itemsize */
/* Borrowed storage (never NULL for a live tensor). */
tp_storage *tp_tensor_storage(const tp_tensor *t);
/* Address of element [0,...,0]: storage data + offset * itemsize. */
void *tp_tensor_data(const tp_tensor *t);
bool tp_tensor_is_contiguous(const tp_tensor *t);
uint64_t tp_tensor_id(const tp_tensor *t);
/* Refcount of the tensor handle itself. */
uint32_t tp_tensor_use_count(const tp_tensor *t);

/* ---- version counter --------------------------------------------------- */

/* Current version; shared by views and detach(), not by clone or copies. */
uint32_t tp_tensor_version(const tp_tensor *t);
/* Increments the shared counter; every in-place op calls this. */
void tp_tensor_bump_version(tp_tensor *t);

/* ---- views --------------------------------------------------------------- */

bool tp_tensor_is_view(const tp_tensor *t);
/* The root base of a view (borrowed), NULL if t is not a view. */
tp_tensor *tp_tensor_base(const tp_tensor *t);

/* view: same elements with new sizes (one may be -1); fails if the strides
 * do not allow it ("view size is not compatible with input tensor's size and stride ..."). */
tp_tensor *tp_tensor_view(tp_tensor *t, int ndim, const int64_t *sizes);
/* reshape: a view when strides allow, otherwise a contiguous copy. */
tp_tensor *tp_tensor_reshape(tp_tensor *t, int ndim, const int64_t *sizes);
tp_tensor *tp_tensor_transpose(tp_tensor *t, int dim0, int dim1);
tp_tensor *tp_tensor_permute(tp_tensor *t, int ndim, const int *dims);
/* 2-D transpose (0-D and 1-D are returned as views unchanged). */
tp_tensor *tp_tensor_t(tp_tensor *t);
tp_tensor *tp_tensor_narrow(tp_tensor *t, int dim, int64_t start, int64_t length);
/* Python slicing t[start:end:step] on dim; start/end are clamped like
 * Python, negative values count from the end; step must be > 0. */
tp_tensor *tp_tensor_slice(tp_tensor *t, int dim, int64_t start, int64_t end, int64_t step);
/* Removes dim by picking one index (negative counts from the end). */
tp_tensor *tp_tensor_select(tp_tensor *t, int dim, int64_t index);
tp_tensor *tp_tensor_squeeze(tp_tensor *t);             /* all size-1 dims */
tp_tensor *tp_tensor_squeeze_dim(tp_tensor *t, int dim); /* only dim, if size 1 */
tp_tensor *tp_tensor_unsqueeze(tp_tensor *t, int dim);
/* Broadcast to sizes (-1 keeps a dim); new leading dims allowed; stride 0. */
tp_tensor *tp_tensor_expand(tp_tensor *t, int ndim, const int64_t *sizes);
/* Arbitrary geometry on t's storage; overlap allowed, exceeding the storage
 * is not ("setStorage: sizes [3, 3], strides [3, 1], storage offset 0, and
 * itemsize 4 requiring a storage size of 36 are out of bounds for storage of size 24"). */
tp_tensor *tp_tensor_as_strided(tp_tensor *t, int ndim, const int64_t *sizes,
                                const int64_t *strides, int64_t storage_offset);
/* Shares storage and version counter, but is not a view and has
 * requires_grad false. */
tp_tensor *tp_tensor_detach(tp_tensor *t);

/* ---- autograd slots (the graph and backward: autograd.h) ---------------- */

bool tp_tensor_requires_grad(const tp_tensor *t);
/* Only floating dtypes may require grad. */
tp_status tp_tensor_set_requires_grad(tp_tensor *t, bool requires_grad);
/* Borrowed grad, or NULL. */
tp_tensor *tp_tensor_grad(const tp_tensor *t);
/* Replaces the grad slot (retains grad; NULL clears). */
tp_status tp_tensor_set_grad(tp_tensor *t, tp_tensor *grad);

#ifdef __cplusplus
}
#endif
#endif
