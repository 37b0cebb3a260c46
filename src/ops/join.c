/*
 * src/ops/join.c - cat, stack and index_select.
 *
 * All three always allocate new storage (PyTorch's cat does too: the
 * result never sees later writes to the inputs).  cat promotes the inputs'
 * dtypes and copies each one into its slice of the result; like PyTorch it
 * skips legacy empty 1-D tensors of shape [0].  Everything is checked before
 * the result is allocated.
 */
#include <stdlib.h>
#include "ops_internal.h"

// ----------------------------------------------------------------------------
// cat

static bool skippable(const tp_tensor *t) { return t->ndim == 1 && t->sizes[0] == 0; }

tp_tensor *tp_cat(int n, tp_tensor *const *tensors, int dim) {
    if (n <= 0 || !tensors) {
        tp__error(TP_STATUS_INVALID_ARGUMENT, "torch.cat(): expected a non-empty list of Tensors");
        return NULL;
    }
    const tp_tensor *ref = NULL;
    tp_dtype dtype = TP_DTYPE_BOOL;
    for (int i = 0; i < n; i++) {
        if (!tensors[i]) {
            tp__error(TP_STATUS_INVALID_ARGUMENT, "torch.cat(): tensor number %d in the list is NULL", i);
            return NULL;
        }
        if (tensors[i]->ndim == 0) {
            tp__error(TP_STATUS_INVALID_ARGUMENT,
                      "zero-dimensional tensor (at position %d) cannot be concatenated", i);
            return NULL;
        }
        dtype = i == 0 ? tensors[i]->dtype : tp_dtype_promote(dtype, tensors[i]->dtype);
        if (!ref && !skippable(tensors[i])) ref = tensors[i];
    }
    tp_device dev;
    if (tp__same_device(n, (const tp_tensor *const *)tensors, &dev)) return NULL;
    if (!ref) return tp__empty_device(dev, 1, (int64_t[]){0}, dtype);
    int d = tp__wrap_dim(dim, ref->ndim);
    if (d < 0) return NULL;

    int64_t sizes[TP_MAX_DIMS];
    for (int k = 0; k < ref->ndim; k++) sizes[k] = ref->sizes[k];
    sizes[d] = 0;
    for (int i = 0; i < n; i++) {
        const tp_tensor *t = tensors[i];
        if (skippable(t)) continue;
        if (t->ndim != ref->ndim) {
            tp__error(TP_STATUS_INVALID_ARGUMENT, "Tensors must have same number of dimensions: got %d and %d",
                      ref->ndim, t->ndim);
            return NULL;
        }
        for (int k = 0; k < t->ndim; k++)
            if (k != d && t->sizes[k] != ref->sizes[k]) {
                tp__error(TP_STATUS_INVALID_ARGUMENT,
                          "Sizes of tensors must match except in dimension %d. Expected size %lld but got "
                          "size %lld for tensor number %d in the list.",
                          d, (long long)ref->sizes[k], (long long)t->sizes[k], i);
                return NULL;
            }
        sizes[d] += t->sizes[d];
    }

    tp_tensor *out = tp__empty_device(dev, ref->ndim, sizes, dtype);
    if (!out) return NULL;
    tp__view ov = tp__view_of(out);
    int64_t isz = tp__itemsize(dtype);
    int64_t at = 0;
    for (int i = 0; i < n; i++) {
        if (skippable(tensors[i])) continue;
        tp__view slice = ov, src = tp__view_of(tensors[i]);
        slice.sizes[d] = tensors[i]->sizes[d];
        slice.data += at * ov.strides[d] * isz;
        if (!tp__is_cpu(dev)) {
            if (tp__dev_copy(dev, &slice, &src)) return tp_tensor_release(out), NULL;
        } else {
            tp__copy_views(&slice, &src);
        }
        at += tensors[i]->sizes[d];
    }
    return out;
}

// ----------------------------------------------------------------------------
// stack

tp_tensor *tp_stack(int n, tp_tensor *const *tensors, int dim) {
    if (n <= 0 || !tensors) {
        tp__error(TP_STATUS_INVALID_ARGUMENT, "stack expects a non-empty TensorList");
        return NULL;
    }
    for (int i = 0; i < n; i++)
        if (tp__cpu_only("stack", tensors[i])) return NULL;
    for (int i = 0; i < n; i++)
        if (!tensors[i]) {
            tp__error(TP_STATUS_INVALID_ARGUMENT, "stack(): tensor number %d in the list is NULL", i);
            return NULL;
        }
    const tp_tensor *ref = tensors[0];
    if (ref->ndim + 1 > TP_MAX_DIMS) {
        tp__error(TP_STATUS_INVALID_ARGUMENT, "stack(): result would have more than %d dims", TP_MAX_DIMS);
        return NULL;
    }
    int d = tp__wrap_dim(dim, ref->ndim + 1);
    if (d < 0) return NULL;
    tp_dtype dtype = ref->dtype;
    for (int i = 1; i < n; i++) {
        if (!tp__shape_equal(ref->ndim, ref->sizes, tensors[i]->ndim, tensors[i]->sizes)) {
            char s0[128], s1[128];
            tp__format_shape(ref->ndim, ref->sizes, s0, sizeof s0);
            tp__format_shape(tensors[i]->ndim, tensors[i]->sizes, s1, sizeof s1);
            tp__error(TP_STATUS_INVALID_ARGUMENT,
                      "stack expects each tensor to be equal size, but got %s at entry 0 and %s at entry %d",
                      s0, s1, i);
            return NULL;
        }
        dtype = tp_dtype_promote(dtype, tensors[i]->dtype);
    }
    int64_t sizes[TP_MAX_DIMS];
    for (int k = 0, j = 0; k <= ref->ndim; k++) sizes[k] = k == d ? n : ref->sizes[j++];
    tp_tensor *out = tp_empty(ref->ndim + 1, sizes, dtype);
    if (!out) return NULL;
    tp__view ov = tp__view_of(out);
    int64_t isz = tp__itemsize(dtype);
    for (int i = 0; i < n; i++) {
        /* the i-th slice along d, with d removed */
        tp__view slice = {.data = ov.data + i * ov.strides[d] * isz, .ndim = ref->ndim, .dtype = dtype};
        for (int k = 0, j = 0; k <= ref->ndim; k++) {
            if (k == d) continue;
            slice.sizes[j] = ov.sizes[k];
            slice.strides[j++] = ov.strides[k];
        }
        tp__view src = tp__view_of(tensors[i]);
        tp__copy_views(&slice, &src);
    }
    return out;
}

// ----------------------------------------------------------------------------
// index_select

tp_tensor *tp_index_select(const tp_tensor *t, int dim, const tp_tensor *index) {
    if (!t || !index) {
        tp__error(TP_STATUS_INVALID_ARGUMENT, "index_select(): tensor is NULL");
        return NULL;
    }
    if (tp__cpu_only("index_select", t) || tp__cpu_only("index_select", index)) return NULL;
    if (index->ndim > 1) {
        tp__error(TP_STATUS_INVALID_ARGUMENT, "index_select(): Index is supposed to be a vector");
        return NULL;
    }
    if (index->dtype != TP_DTYPE_INT64 && index->dtype != TP_DTYPE_INT32) {
        tp__error(TP_STATUS_INVALID_ARGUMENT, "index_select(): Expected dtype int32 or int64 for index");
        return NULL;
    }
    int nd = t->ndim > 0 ? t->ndim : 1;
    int d = tp__wrap_dim(dim, nd);
    if (d < 0) return NULL;
    int64_t dim_size = t->ndim > 0 ? t->sizes[d] : 1;
    int64_t dim_stride = t->ndim > 0 ? t->strides[d] : 0;

    int64_t nidx = index->numel;
    if (t->ndim == 0 && nidx != 1) {
        tp__error(TP_STATUS_INVALID_ARGUMENT,
                  "index_select(): Index to scalar can have only 1 value, got %lld value(s)", (long long)nidx);
        return NULL;
    }
    int64_t *idx = malloc((size_t)(nidx > 0 ? nidx : 1) * sizeof *idx);
    if (!idx) {
        tp__error(TP_STATUS_OUT_OF_MEMORY, "index_select(): cannot allocate %lld indices", (long long)nidx);
        return NULL;
    }
    tp__view iv = tp__view_of(index);
    int64_t istride = iv.ndim ? iv.strides[0] * tp__itemsize(iv.dtype) : 0;
    tp__load_i64(idx, iv.data, istride, nidx, iv.dtype);
    for (int64_t i = 0; i < nidx; i++)
        if (idx[i] < 0 || idx[i] >= dim_size) {
            tp__error(TP_STATUS_OUT_OF_BOUNDS,
                      "index out of range in self: index %lld is out of bounds for dimension %d with size %lld",
                      (long long)idx[i], d, (long long)dim_size);
            free(idx);
            return NULL;
        }

    int64_t sizes[TP_MAX_DIMS];
    for (int k = 0; k < t->ndim; k++) sizes[k] = k == d ? nidx : t->sizes[k];
    tp_tensor *out = tp_empty(t->ndim, sizes, t->dtype);
    if (!out) {
        free(idx);
        return NULL;
    }
    tp__view ov = tp__view_of(out), src = tp__view_of(t);
    int64_t isz = tp__itemsize(t->dtype);
    /* one slice per index, with dim d dropped from both sides */
    tp__view s = {.data = src.data, .ndim = 0, .dtype = t->dtype}, o = s;
    o.data = ov.data;
    for (int k = 0; k < t->ndim; k++) {
        if (k == d) continue;
        s.sizes[s.ndim] = src.sizes[k];
        s.strides[s.ndim++] = src.strides[k];
        o.sizes[o.ndim] = ov.sizes[k];
        o.strides[o.ndim++] = ov.strides[k];
    }
    int64_t ostride = t->ndim > 0 ? ov.strides[d] : 0;
    for (int64_t i = 0; i < nidx; i++) {
        tp__view si = s, oi = o;
        si.data += idx[i] * dim_stride * isz;
        oi.data += i * ostride * isz;
        tp__copy_views(&oi, &si);
    }
    free(idx);
    return out;
}
