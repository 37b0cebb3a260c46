/*
 * src/core/views.c - zero-copy views: view, reshape, transpose, permute, t,
 * narrow, slice, select, squeeze, unsqueeze, expand, as_strided, detach.
 *
 * Every view shares its input's storage and version counter, and points at
 * the ROOT base (a view of a view names the original tensor), as PyTorch's
 * ViewInfo does.  Shape checks and error texts follow PyTorch.  The only
 * element copy in this file is reshape's fallback when strides do not allow
 * a view; it is a small private strided copy so the core does not depend on
 * src/ops.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

// ----------------------------------------------------------------------------
// helpers

#define TP__REQUIRE_TENSOR(t, what)                                                 \
    do {                                                                            \
        if (!(t)) {                                                                 \
            tp__error(TP_STATUS_INVALID_ARGUMENT, what ": tensor is NULL");         \
            return NULL;                                                            \
        }                                                                           \
    } while (0)

/* A view of t: same storage and version counter, base = t's root. */
static tp_tensor *tp__make_view(tp_tensor *t, int ndim, const int64_t *sizes,
                              const int64_t *strides, int64_t offset) {
    tp_tensor *v = tp__tensor_make(t->storage, offset, ndim, sizes, strides, t->dtype, t->version,
                                   t->base ? t->base : t, TP__STORAGE_REF_RETAIN);
    if (v) v->requires_grad = t->requires_grad;
    return v;
}

/* PyTorch's infer_size: resolves one -1 and checks the element count. */
static tp_status tp__infer_size(int ndim, const int64_t *sizes, int64_t numel, int64_t *out) {
    char shape[256];
    if (ndim < 0 || ndim > TP_MAX_DIMS)
        return tp__error(TP_STATUS_INVALID_ARGUMENT,
                         "tensors have between 0 and %d dimensions, got %d", TP_MAX_DIMS, ndim);
    if (ndim > 0 && !sizes)
        return tp__error(TP_STATUS_INVALID_ARGUMENT, "sizes is NULL for a %d-dim shape", ndim);
    int infer = -1;
    int64_t product = 1;
    bool overflow = false;
    for (int i = 0; i < ndim; i++) {
        out[i] = sizes[i];
        if (sizes[i] == -1) {
            if (infer >= 0)
                return tp__error(TP_STATUS_INVALID_ARGUMENT, "only one dimension can be inferred");
            infer = i;
        } else if (sizes[i] >= 0) {
            overflow |= __builtin_mul_overflow(product, sizes[i], &product);
        } else {
            return tp__error(TP_STATUS_INVALID_ARGUMENT, "invalid shape dimension %lld",
                             (long long)sizes[i]);
        }
    }
    if (!overflow && (numel == product || (infer >= 0 && product > 0 && numel % product == 0))) {
        if (infer >= 0) {
            if (product == 0) /* reached only when numel == 0 == product */
                return tp__error(TP_STATUS_INVALID_ARGUMENT,
                                 "cannot reshape tensor of 0 elements into shape %s because the "
                                 "unspecified dimension size -1 can be any value and is ambiguous",
                                 tp__format_shape(ndim, sizes, shape, sizeof shape));
            out[infer] = numel / product;
        }
        return TP_STATUS_OK;
    }
    return tp__error(TP_STATUS_INVALID_ARGUMENT, "shape '%s' is invalid for input of size %lld",
                     tp__format_shape(ndim, sizes, shape, sizeof shape), (long long)numel);
}

/* PyTorch's computeStride: strides that let `t`'s elements be read with the
 * new shape without copying, or false.  The old shape is split into chunks
 * of dims that are contiguous with each other; each chunk must be covered
 * exactly by a run of new dims. */
static bool tp__compute_stride(const tp_tensor *t, int new_ndim, const int64_t *new_sizes,
                               int64_t *new_strides) {
    int old_ndim = t->ndim;
    const int64_t *old_sizes = t->sizes, *old_strides = t->strides;
    if (old_ndim == 0) {
        for (int i = 0; i < new_ndim; i++) new_strides[i] = 1;
        return true;
    }
    if (t->numel == 0) {
        bool same = old_ndim == new_ndim;
        for (int i = 0; same && i < new_ndim; i++) same = old_sizes[i] == new_sizes[i];
        if (same) {
            memcpy(new_strides, old_strides, sizeof(int64_t) * (size_t)new_ndim);
        } else {
            tp__contiguous_strides(new_ndim, new_sizes, new_strides);
        }
        return true;
    }
    int view_d = new_ndim - 1;
    int64_t chunk_base_stride = old_strides[old_ndim - 1];
    int64_t tensor_numel = 1, view_numel = 1;
    for (int tensor_d = old_ndim - 1; tensor_d >= 0; tensor_d--) {
        tensor_numel *= old_sizes[tensor_d];
        if (tensor_d == 0 || (old_sizes[tensor_d - 1] != 1 &&
                              old_strides[tensor_d - 1] != tensor_numel * chunk_base_stride)) {
            while (view_d >= 0 && (view_numel < tensor_numel || new_sizes[view_d] == 1)) {
                new_strides[view_d] = view_numel * chunk_base_stride;
                view_numel *= new_sizes[view_d];
                view_d--;
            }
            if (view_numel != tensor_numel) return false;
            if (tensor_d > 0) {
                chunk_base_stride = old_strides[tensor_d - 1];
                tensor_numel = 1;
                view_numel = 1;
            }
        }
    }
    return view_d == -1;
}

// ----------------------------------------------------------------------------
// view / reshape

tp_tensor *tp_tensor_view(tp_tensor *t, int ndim, const int64_t *sizes) {
    TP__REQUIRE_TENSOR(t, "view");
    int64_t shape[TP_MAX_DIMS], strides[TP_MAX_DIMS];
    if (tp__infer_size(ndim, sizes, t->numel, shape) != TP_STATUS_OK) return NULL;
    if (!tp__compute_stride(t, ndim, shape, strides)) {
        tp__error(TP_STATUS_INVALID_ARGUMENT,
                  "view size is not compatible with input tensor's size and stride (at least one "
                  "dimension spans across two contiguous subspaces). Use .reshape(...) instead.");
        return NULL;
    }
    return tp__make_view(t, ndim, shape, strides, t->storage_offset);
}

/* One element of itemsize bytes; a constant size lets the compiler turn the
 * memcpy into a single load and store. */
static inline void tp__copy_item(char *dst, const char *src, size_t itemsize) {
    switch (itemsize) {
    case 1: memcpy(dst, src, 1); break;
    case 2: memcpy(dst, src, 2); break;
    case 4: memcpy(dst, src, 4); break;
    case 8: memcpy(dst, src, 8); break;
    default: memcpy(dst, src, itemsize); break;
    }
}

/* Copies t's elements, in row-major order, into dst (numel * itemsize bytes):
 * a tight loop over the last dim inside an odometer over the others. */
static void tp__gather_contiguous(const tp_tensor *t, char *dst) {
    size_t itemsize = tp_dtype_itemsize(t->dtype);
    if (t->numel == 0) return;
    if (t->ndim == 0) {
        tp__copy_item(dst, (const char *)t->storage->data.ptr + (size_t)t->storage_offset * itemsize,
                      itemsize);
        return;
    }
    const char *base = (const char *)t->storage->data.ptr;
    int last = t->ndim - 1;
    int64_t inner = t->sizes[last], inner_stride = t->strides[last];
    int64_t index[TP_MAX_DIMS] = {0};
    int64_t offset = t->storage_offset; /* in elements, start of the current row */
    for (int64_t rows = t->numel / inner; rows > 0; rows--) {
        for (int64_t k = 0; k < inner; k++, dst += itemsize)
            tp__copy_item(dst, base + (size_t)(offset + k * inner_stride) * itemsize, itemsize);
        /* Odometer step over the outer dims. */
        for (int d = last - 1; d >= 0; d--) {
            if (++index[d] < t->sizes[d]) {
                offset += t->strides[d];
                break;
            }
            offset -= t->strides[d] * (index[d] - 1);
            index[d] = 0;
        }
    }
}

tp_tensor *tp_tensor_reshape(tp_tensor *t, int ndim, const int64_t *sizes) {
    TP__REQUIRE_TENSOR(t, "reshape");
    int64_t shape[TP_MAX_DIMS], strides[TP_MAX_DIMS];
    if (tp__infer_size(ndim, sizes, t->numel, shape) != TP_STATUS_OK) return NULL;
    if (tp__compute_stride(t, ndim, shape, strides))
        return tp__make_view(t, ndim, shape, strides, t->storage_offset);

    /* Strides do not allow a view: a contiguous copy with its own storage
     * and version counter, not a view of t. */
    if (t->device.type != TP_DEVICE_TYPE_CPU) {
        /* Device memory is not readable here: the device copies (ops). */
        tp_tensor *c = tp_contiguous(t);
        if (!c) return NULL;
        tp_tensor *out = tp__tensor_make(c->storage, 0, ndim, shape, NULL, t->dtype, NULL, NULL,
                                         TP__STORAGE_REF_RETAIN);
        tp_tensor_release(c);
        if (out) out->requires_grad = t->requires_grad;
        return out;
    }
    size_t nbytes = (size_t)t->numel * tp_dtype_itemsize(t->dtype);
    tp_allocator *allocator = tp_allocator_get((tp_device_type)t->device.type);
    if (!allocator) {
        tp__error(TP_STATUS_UNSUPPORTED, "reshape: no allocator for this tensor's device");
        return NULL;
    }
    tp_storage *s = tp__storage_new_for_tensor(nbytes, allocator, true);
    if (!s) return NULL;
    tp__gather_contiguous(t, (char *)s->data.ptr);
    /* The tensor takes s's creation reference, also if it fails. */
    tp_tensor *out = tp__tensor_make(s, 0, ndim, shape, NULL, t->dtype, NULL, NULL,
                                     TP__STORAGE_REF_ADOPT);
    if (out) out->requires_grad = t->requires_grad;
    return out;
}

// ----------------------------------------------------------------------------
// reordering dims

tp_tensor *tp_tensor_transpose(tp_tensor *t, int dim0, int dim1) {
    TP__REQUIRE_TENSOR(t, "transpose");
    int d0 = tp__wrap_dim(dim0, t->ndim), d1 = tp__wrap_dim(dim1, t->ndim);
    if (d0 < 0 || d1 < 0) return NULL;
    int64_t sizes[TP_MAX_DIMS], strides[TP_MAX_DIMS];
    memcpy(sizes, t->sizes, sizeof sizes);
    memcpy(strides, t->strides, sizeof strides);
    if (t->ndim > 0) {
        sizes[d0] = t->sizes[d1];
        sizes[d1] = t->sizes[d0];
        strides[d0] = t->strides[d1];
        strides[d1] = t->strides[d0];
    }
    return tp__make_view(t, t->ndim, sizes, strides, t->storage_offset);
}

tp_tensor *tp_tensor_permute(tp_tensor *t, int ndim, const int *dims) {
    TP__REQUIRE_TENSOR(t, "permute");
    if (ndim != t->ndim || (ndim > 0 && !dims)) {
        tp__error(TP_STATUS_INVALID_ARGUMENT, "number of dims don't match in permute");
        return NULL;
    }
    int64_t sizes[TP_MAX_DIMS], strides[TP_MAX_DIMS];
    bool seen[TP_MAX_DIMS] = {false};
    for (int i = 0; i < ndim; i++) {
        int d = tp__wrap_dim(dims[i], t->ndim);
        if (d < 0) return NULL;
        if (seen[d]) {
            tp__error(TP_STATUS_INVALID_ARGUMENT, "repeated dim in permute");
            return NULL;
        }
        seen[d] = true;
        sizes[i] = t->sizes[d];
        strides[i] = t->strides[d];
    }
    return tp__make_view(t, ndim, sizes, strides, t->storage_offset);
}

tp_tensor *tp_tensor_t(tp_tensor *t) {
    TP__REQUIRE_TENSOR(t, "t");
    if (t->ndim > 2) {
        tp__error(TP_STATUS_INVALID_ARGUMENT,
                  "t() expects a tensor with <= 2 dimensions, but self is %dD", t->ndim);
        return NULL;
    }
    return tp_tensor_transpose(t, 0, t->ndim < 2 ? 0 : 1);
}

// ----------------------------------------------------------------------------
// narrowing and indexing

tp_tensor *tp_tensor_narrow(tp_tensor *t, int dim, int64_t start, int64_t length) {
    TP__REQUIRE_TENSOR(t, "narrow");
    if (t->ndim == 0) {
        tp__error(TP_STATUS_INVALID_ARGUMENT, "narrow() cannot be applied to a 0-dim tensor.");
        return NULL;
    }
    int d = tp__wrap_dim(dim, t->ndim);
    if (d < 0) return NULL;
    if (length < 0) {
        tp__error(TP_STATUS_INVALID_ARGUMENT, "narrow(): length must be non-negative.");
        return NULL;
    }
    int64_t size = t->sizes[d];
    if (start < -size || start > size) {
        tp__error(TP_STATUS_OUT_OF_BOUNDS,
                  "start out of range (expected to be in range of [%lld, %lld], but got %lld)",
                  (long long)-size, (long long)size, (long long)start);
        return NULL;
    }
    if (start < 0) start += size;
    if (start > size - length) {
        tp__error(TP_STATUS_OUT_OF_BOUNDS, "start (%lld) + length (%lld) exceeds dimension size (%lld).",
                  (long long)start, (long long)length, (long long)size);
        return NULL;
    }
    int64_t sizes[TP_MAX_DIMS];
    memcpy(sizes, t->sizes, sizeof sizes);
    sizes[d] = length;
    return tp__make_view(t, t->ndim, sizes, t->strides, t->storage_offset + start * t->strides[d]);
}

tp_tensor *tp_tensor_slice(tp_tensor *t, int dim, int64_t start, int64_t end, int64_t step) {
    TP__REQUIRE_TENSOR(t, "slice");
    if (t->ndim == 0) {
        tp__error(TP_STATUS_INVALID_ARGUMENT, "slice() cannot be applied to a 0-dim tensor.");
        return NULL;
    }
    int d = tp__wrap_dim(dim, t->ndim);
    if (d < 0) return NULL;
    if (step <= 0) {
        tp__error(TP_STATUS_INVALID_ARGUMENT, "slice step must be positive");
        return NULL;
    }
    /* Python's clamping: negatives count from the end, then clip to [0, size]. */
    int64_t size = t->sizes[d];
    if (start < 0) start = start < -size ? 0 : start + size;
    if (end < 0) end = end < -size ? 0 : end + size;
    if (start > size) start = size;
    if (end > size) end = size;
    if (end < start) end = start;
    int64_t sizes[TP_MAX_DIMS], strides[TP_MAX_DIMS];
    memcpy(sizes, t->sizes, sizeof sizes);
    memcpy(strides, t->strides, sizeof strides);
    sizes[d] = end == start ? 0 : (end - start - 1) / step + 1; /* ceil, without overflow */
    /* With one element or none the stride is never stepped over, and a huge
     * step must not overflow it. */
    strides[d] = sizes[d] > 1 ? t->strides[d] * step : t->strides[d];
    return tp__make_view(t, t->ndim, sizes, strides, t->storage_offset + start * t->strides[d]);
}

tp_tensor *tp_tensor_select(tp_tensor *t, int dim, int64_t index) {
    TP__REQUIRE_TENSOR(t, "select");
    if (t->ndim == 0) {
        tp__error(TP_STATUS_INVALID_ARGUMENT, "select() cannot be applied to a 0-dim tensor.");
        return NULL;
    }
    int d = tp__wrap_dim(dim, t->ndim);
    if (d < 0) return NULL;
    int64_t size = t->sizes[d];
    if (index < -size || index >= size) {
        char shape[256];
        tp__error(TP_STATUS_OUT_OF_BOUNDS,
                  "select(): index %lld out of range for tensor of size %s at dimension %d",
                  (long long)index, tp__format_shape(t->ndim, t->sizes, shape, sizeof shape), d);
        return NULL;
    }
    if (index < 0) index += size;
    int64_t sizes[TP_MAX_DIMS], strides[TP_MAX_DIMS];
    int n = 0;
    for (int i = 0; i < t->ndim; i++) {
        if (i == d) continue;
        sizes[n] = t->sizes[i];
        strides[n] = t->strides[i];
        n++;
    }
    return tp__make_view(t, n, sizes, strides, t->storage_offset + index * t->strides[d]);
}

// ----------------------------------------------------------------------------
// adding and removing size-1 dims

/* A view of t without dim `only` (-1: without every size-1 dim). */
static tp_tensor *tp__squeeze(tp_tensor *t, int only) {
    int64_t sizes[TP_MAX_DIMS], strides[TP_MAX_DIMS];
    int n = 0;
    for (int i = 0; i < t->ndim; i++) {
        if (only < 0 ? t->sizes[i] == 1 : i == only) continue;
        sizes[n] = t->sizes[i];
        strides[n] = t->strides[i];
        n++;
    }
    return tp__make_view(t, n, sizes, strides, t->storage_offset);
}

tp_tensor *tp_tensor_squeeze(tp_tensor *t) {
    TP__REQUIRE_TENSOR(t, "squeeze");
    return tp__squeeze(t, -1);
}

tp_tensor *tp_tensor_squeeze_dim(tp_tensor *t, int dim) {
    TP__REQUIRE_TENSOR(t, "squeeze");
    int d = tp__wrap_dim(dim, t->ndim);
    if (d < 0) return NULL;
    if (t->ndim == 0 || t->sizes[d] != 1)
        return tp__make_view(t, t->ndim, t->sizes, t->strides, t->storage_offset);
    return tp__squeeze(t, d);
}

tp_tensor *tp_tensor_unsqueeze(tp_tensor *t, int dim) {
    TP__REQUIRE_TENSOR(t, "unsqueeze");
    if (t->ndim >= TP_MAX_DIMS) {
        tp__error(TP_STATUS_INVALID_ARGUMENT,
                  "tensors have between 0 and %d dimensions, got %d", TP_MAX_DIMS, t->ndim + 1);
        return NULL;
    }
    int d = tp__wrap_dim(dim, t->ndim + 1);
    if (d < 0) return NULL;
    int64_t sizes[TP_MAX_DIMS], strides[TP_MAX_DIMS];
    for (int i = 0, n = 0; i <= t->ndim; i++) {
        if (i == d) {
            sizes[i] = 1;
            /* PyTorch: the new dim steps over the whole dim that follows it. */
            strides[i] = d < t->ndim ? t->sizes[d] * t->strides[d] : 1;
            continue;
        }
        sizes[i] = t->sizes[n];
        strides[i] = t->strides[n];
        n++;
    }
    return tp__make_view(t, t->ndim + 1, sizes, strides, t->storage_offset);
}

// ----------------------------------------------------------------------------
// broadcasting and arbitrary geometry

/* PyTorch's legacy type names, which its expand() error still prints. */
static const char *tp__legacy_type_name(tp_dtype dtype) {
    static const char *const names[TP_DTYPE_COUNT] = {
        [TP_DTYPE_FLOAT32] = "FloatTensor",  [TP_DTYPE_FLOAT64] = "DoubleTensor",
        [TP_DTYPE_FLOAT16] = "HalfTensor",   [TP_DTYPE_BFLOAT16] = "BFloat16Tensor",
        [TP_DTYPE_INT8] = "CharTensor",      [TP_DTYPE_INT16] = "ShortTensor",
        [TP_DTYPE_INT32] = "IntTensor",      [TP_DTYPE_INT64] = "LongTensor",
        [TP_DTYPE_UINT8] = "ByteTensor",     [TP_DTYPE_BOOL] = "BoolTensor",
    };
    return tp_dtype_is_valid(dtype) ? names[dtype] : "Tensor";
}

tp_tensor *tp_tensor_expand(tp_tensor *t, int ndim, const int64_t *sizes) {
    TP__REQUIRE_TENSOR(t, "expand");
    char target[256], have[256];
    if (ndim < 0 || ndim > TP_MAX_DIMS || (ndim > 0 && !sizes)) {
        tp__error(TP_STATUS_INVALID_ARGUMENT, "tensors have between 0 and %d dimensions, got %d",
                  TP_MAX_DIMS, ndim);
        return NULL;
    }
    if (ndim < t->ndim) {
        tp__error(TP_STATUS_INVALID_ARGUMENT,
                  "expand(torch.%s{%s}, size=%s): the number of sizes provided (%d) must be "
                  "greater or equal to the number of dimensions in the tensor (%d)",
                  tp__legacy_type_name(t->dtype), tp__format_shape(t->ndim, t->sizes, have, sizeof have),
                  tp__format_shape(ndim, sizes, target, sizeof target), ndim, t->ndim);
        return NULL;
    }
    int64_t out_sizes[TP_MAX_DIMS], out_strides[TP_MAX_DIMS];
    for (int i = ndim - 1; i >= 0; i--) {
        int dim = t->ndim - (ndim - i);
        int64_t size = dim >= 0 ? t->sizes[dim] : 1;
        int64_t stride = dim >= 0 ? t->strides[dim]
                         : i == ndim - 1 ? 1
                                         : out_sizes[i + 1] * out_strides[i + 1];
        int64_t want = sizes[i];
        if (want == -1) {
            if (dim < 0) {
                tp__error(TP_STATUS_INVALID_ARGUMENT,
                          "The expanded size of the tensor (-1) isn't allowed in a leading, "
                          "non-existing dimension %d",
                          i);
                return NULL;
            }
            want = size;
        }
        if (size != want) {
            if (size != 1) {
                tp__error(TP_STATUS_INVALID_ARGUMENT,
                          "The expanded size of the tensor (%lld) must match the existing size "
                          "(%lld) at non-singleton dimension %d.  Target sizes: %s.  Tensor "
                          "sizes: %s",
                          (long long)want, (long long)size, i,
                          tp__format_shape(ndim, sizes, target, sizeof target),
                          tp__format_shape(t->ndim, t->sizes, have, sizeof have));
                return NULL;
            }
            size = want;
            stride = 0;
        }
        out_sizes[i] = size;
        out_strides[i] = stride;
    }
    return tp__make_view(t, ndim, out_sizes, out_strides, t->storage_offset);
}

tp_tensor *tp_tensor_as_strided(tp_tensor *t, int ndim, const int64_t *sizes,
                                const int64_t *strides, int64_t storage_offset) {
    TP__REQUIRE_TENSOR(t, "as_strided");
    if (ndim > 0 && !strides) {
        tp__error(TP_STATUS_INVALID_ARGUMENT, "as_strided: strides is NULL");
        return NULL;
    }
    return tp__make_view(t, ndim, sizes, strides, storage_offset);
}

tp_tensor *tp_tensor_detach(tp_tensor *t) {
    TP__REQUIRE_TENSOR(t, "detach");
    /* Same storage and version counter, but not a view: base stays NULL. */
    return tp__tensor_make(t->storage, t->storage_offset, t->ndim, t->sizes, t->strides, t->dtype,
                           t->version, NULL, TP__STORAGE_REF_RETAIN);
}
