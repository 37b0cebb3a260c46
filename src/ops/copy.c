/*
 * src/ops/copy.c - copies and conversions: copy_, clone, contiguous,
 * to_dtype, element access (get/item) and fill_.
 *
 * clone and to_dtype always make new storage (c10's _to_copy: empty + copy_),
 * except that to_dtype to the same dtype and contiguous on a contiguous
 * tensor hand back the input itself, retained, as PyTorch does.
 * This file does no arithmetic; conversions round and wrap like PyTorch.
 */
#include <stdlib.h>
#include "ops_internal.h"

// ----------------------------------------------------------------------------
// fill

static const char overlap_message[] =
    "unsupported operation: more than one element of the written-to tensor refers to a single "
    "memory location. Please clone() the tensor before performing the operation.";

typedef struct fill_ctx {
    unsigned char bytes[8];
    size_t isz;
} fill_ctx;

static void fill_loop(char **ptrs, const int64_t *strides, int64_t n, void *ctx) {
    const fill_ctx *f = ctx;
    char *p = ptrs[0];
    if (f->isz == 4 && strides[0] == 4) {
        uint32_t v;
        memcpy(&v, f->bytes, 4);
        for (int64_t i = 0; i < n; i++) memcpy(p + 4 * i, &v, 4);
        return;
    }
    for (int64_t i = 0; i < n; i++) memcpy(p + i * strides[0], f->bytes, f->isz);
}

void tp__fill_view(const tp__view *v, double value) {
    fill_ctx f = {.isz = tp_dtype_itemsize(v->dtype)};
    tp__set_f64((char *)f.bytes, v->dtype, value);
    tp__iter it;
    tp__iter_init(&it, v->ndim, v->sizes, 1, v);
    if (it.numel > 0) tp__iter_run(&it, fill_loop, &f);
}

tp_status tp_fill_(tp_tensor *t, double value) {
    if (!t) return tp__error(TP_STATUS_INVALID_ARGUMENT, "fill_(): tensor is NULL");
    tp__view v = tp__view_of(t);
    if (tp__view_has_internal_overlap(&v))
        return tp__error(TP_STATUS_INVALID_ARGUMENT, "%s", overlap_message);
    if (tp__is_cpu(t->device)) tp__fill_view(&v, value);
    else if (tp__dev_fill(t->device, &v, value)) return tp_last_status();
    tp_tensor_bump_version(t);
    return TP_STATUS_OK;
}

// ----------------------------------------------------------------------------
// copy_

static char *shape_str(int ndim, const int64_t *sizes, char *buf, size_t len) {
    tp__format_shape(ndim, sizes, buf, len);
    return buf;
}

tp_status tp_copy_(tp_tensor *dst, const tp_tensor *src) {
    if (!dst || !src) return tp__error(TP_STATUS_INVALID_ARGUMENT, "copy_(): tensor is NULL");
    if (!tp_device_equal(dst->device, src->device)) {
        /* PyTorch's copy_ crosses devices: bring src over, then copy there. */
        tp_tensor *moved = tp_tensor_to((tp_tensor *)src, dst->device);
        if (!moved) return tp_last_status();
        tp_status st = tp_copy_(dst, moved);
        tp_tensor_release(moved);
        return st;
    }
    int nb;
    int64_t bshape[TP_MAX_DIMS];
    tp_status st = tp__broadcast_shape(dst->ndim, dst->sizes, src->ndim, src->sizes, &nb, bshape);
    if (st != TP_STATUS_OK) return st;
    if (!tp__shape_equal(nb, bshape, dst->ndim, dst->sizes)) {
        char a[128], b[128];
        return tp__error(TP_STATUS_INVALID_ARGUMENT,
                         "output with shape %s doesn't match the broadcast shape %s",
                         shape_str(dst->ndim, dst->sizes, a, sizeof a), shape_str(nb, bshape, b, sizeof b));
    }
    tp__view dv = tp__view_of(dst), sv = tp__view_of(src);
    if (tp__view_has_internal_overlap(&dv))
        return tp__error(TP_STATUS_INVALID_ARGUMENT, "%s", overlap_message);
    if (!tp__is_cpu(dst->device)) {
        tp_tensor *tmp = NULL;
        if (tp__views_may_overlap(&dv, &sv)) {
            if (!(tmp = tp_clone(src))) return tp_last_status();
            sv = tp__view_of(tmp);
        }
        st = tp__dev_copy(dst->device, &dv, &sv);
        tp_tensor_release(tmp);
        if (st) return st;
    } else if (tp__views_may_overlap(&dv, &sv)) {
        /* Read everything before writing anything: copy src aside first. */
        tp_tensor *tmp = tp__copy_to_new(&sv, src->dtype);
        if (!tmp) return tp_last_status();
        tp__view tv = tp__view_of(tmp);
        tp__copy_views(&dv, &tv);
        tp_tensor_release(tmp);
    } else {
        tp__copy_views(&dv, &sv);
    }
    tp_tensor_bump_version(dst);
    return TP_STATUS_OK;
}

// ----------------------------------------------------------------------------
// clone, contiguous, to_dtype

tp_tensor *tp__copy_to_new(const tp__view *src, tp_dtype dtype) {
    tp_tensor *t = tp_empty(src->ndim, src->sizes, dtype);
    if (!t) return NULL;
    tp__view dv = tp__view_of(t);
    tp__copy_views(&dv, src);
    return t;
}

/* tp__copy_to_new on t's own device. */
static tp_tensor *copy_to_new_on(const tp_tensor *t, tp_dtype dtype) {
    tp__view v = tp__view_of(t);
    if (tp__is_cpu(t->device)) return tp__copy_to_new(&v, dtype);
    tp_tensor *out = tp__empty_device(t->device, t->ndim, t->sizes, dtype);
    if (!out) return NULL;
    tp__view dv = tp__view_of(out);
    if (tp__dev_copy(t->device, &dv, &v)) tp_tensor_release(out), out = NULL;
    return out;
}

tp_tensor *tp_clone(const tp_tensor *t) {
    if (!t) {
        tp__error(TP_STATUS_INVALID_ARGUMENT, "clone(): tensor is NULL");
        return NULL;
    }
    return copy_to_new_on(t, t->dtype);
}

tp_tensor *tp_contiguous(tp_tensor *t) {
    if (!t) {
        tp__error(TP_STATUS_INVALID_ARGUMENT, "contiguous(): tensor is NULL");
        return NULL;
    }
    if (tp_tensor_is_contiguous(t)) return tp_tensor_retain(t);
    return tp_clone(t);
}

tp_tensor *tp_to_dtype(tp_tensor *t, tp_dtype dtype) {
    if (!t) {
        tp__error(TP_STATUS_INVALID_ARGUMENT, "to(): tensor is NULL");
        return NULL;
    }
    if (!tp_dtype_is_valid(dtype)) {
        tp__error(TP_STATUS_INVALID_ARGUMENT, "to(): invalid dtype %d", (int)dtype);
        return NULL;
    }
    if (t->dtype == dtype) return tp_tensor_retain(t);
    return copy_to_new_on(t, dtype);
}

// ----------------------------------------------------------------------------
// element access

tp_status tp_tensor_get(const tp_tensor *t, const int64_t *index, double *out) {
    if (!t || !out || (t->ndim > 0 && !index))
        return tp__error(TP_STATUS_INVALID_ARGUMENT, "get(): NULL argument");
    int64_t off = 0;
    for (int d = 0; d < t->ndim; d++) {
        int64_t i = index[d], n = t->sizes[d];
        if (i < -n || i >= n)
            return tp__error(TP_STATUS_OUT_OF_BOUNDS,
                             "index %lld is out of bounds for dimension %d with size %lld",
                             (long long)i, d, (long long)n);
        if (i < 0) i += n;
        off += i * t->strides[d];
    }
    const char *p = (const char *)tp_tensor_data(t) + off * tp__itemsize(t->dtype);
    if (!tp__is_cpu(t->device)) {
        char elem[8];
        tp_status st = tp__dev_read(t->device, elem, p, (size_t)tp__itemsize(t->dtype));
        if (st) return st;
        p = elem;
        *out = tp__get_f64(p, t->dtype);
        return TP_STATUS_OK;
    }
    *out = tp__get_f64(p, t->dtype);
    return TP_STATUS_OK;
}

tp_status tp_tensor_item(const tp_tensor *t, double *out) {
    if (!t || !out) return tp__error(TP_STATUS_INVALID_ARGUMENT, "item(): NULL argument");
    if (t->numel != 1)
        return tp__error(TP_STATUS_INVALID_ARGUMENT,
                         "a Tensor with %lld elements cannot be converted to Scalar",
                         (long long)t->numel);
    if (!tp__is_cpu(t->device)) return tp_tensor_get(t, (const int64_t[TP_MAX_DIMS]){0}, out);
    *out = tp__get_f64(tp_tensor_data(t), t->dtype);
    return TP_STATUS_OK;
}
