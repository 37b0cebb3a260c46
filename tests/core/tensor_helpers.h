/*
 * tests/core/tensor_helpers.h - builds test tensors from the core API alone
 * (storage + tp_tensor_new_from_storage), so core tests do not depend on
 * src/ops.
 */
#ifndef TP_TESTS_CORE_TENSOR_HELPERS_H
#define TP_TESTS_CORE_TENSOR_HELPERS_H

#include "tensorplay/tensorplay.h"

/* A contiguous tensor on fresh CPU storage; float32 ones hold 0, 1, 2, ...
 * New reference. */
static inline tp_tensor *make_tensor(int ndim, const int64_t *sizes, tp_dtype dtype) {
    int64_t numel = 1;
    for (int i = 0; i < ndim; i++) numel *= sizes[i];
    tp_storage *s = tp_storage_new((size_t)numel * tp_dtype_itemsize(dtype), NULL, true);
    if (!s) return NULL;
    if (dtype == TP_DTYPE_FLOAT32)
        for (int64_t i = 0; i < numel; i++) ((float *)tp_storage_data(s))[i] = (float)i;
    tp_tensor *t = tp_tensor_new_from_storage(s, 0, ndim, sizes, NULL, dtype);
    tp_storage_release(s); /* the tensor holds the only reference now */
    return t;
}

/* Element at a multi-index of a float32 tensor, read through its strides. */
static inline float at_f32(const tp_tensor *t, const int64_t *index) {
    const float *p = (const float *)tp_tensor_data(t);
    int64_t off = 0;
    for (int i = 0; i < tp_tensor_dim(t); i++) off += index[i] * tp_tensor_strides(t)[i];
    return p[off];
}

static inline bool shape_is(const tp_tensor *t, int ndim, const int64_t *sizes,
                            const int64_t *strides) {
    if (tp_tensor_dim(t) != ndim) return false;
    for (int i = 0; i < ndim; i++) {
        if (tp_tensor_sizes(t)[i] != sizes[i]) return false;
        if (strides && tp_tensor_strides(t)[i] != strides[i]) return false;
    }
    return true;
}

#define SHAPE(...) ((const int64_t[]){__VA_ARGS__})

#endif
