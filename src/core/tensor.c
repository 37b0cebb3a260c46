/*
 * src/core/tensor.c - TensorImpl: construction with bounds checks, lifetime,
 * fields, the shared version counter and the autograd slots.
 *
 * This is the one place tensor handle and version counter refcounts change.
 * Views are built in views.c on top of tp__tensor_make(); a tensor on a
 * storage its creator just made takes over the creation reference
 * (TP__STORAGE_REF_ADOPT: no retain/release pair).  Kernels live in
 * src/ops.  Nothing here copies element data.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

// ----------------------------------------------------------------------------
// shape helpers (shared with views.c and src/ops)

const char *tp__format_shape(int ndim, const int64_t *sizes, char *buf, size_t buflen) {
    if (!buf || buflen == 0) return buf;
    size_t used = 0;
    buf[0] = '\0';
    int n = snprintf(buf, buflen, "[");
    used = n > 0 ? (size_t)n : 0;
    for (int i = 0; i < ndim && used < buflen; i++) {
        n = snprintf(buf + used, buflen - used, i ? ", %lld" : "%lld", (long long)sizes[i]);
        if (n < 0) break;
        used += (size_t)n;
    }
    if (used < buflen) snprintf(buf + used, buflen - used, "]");
    return buf;
}

void tp__contiguous_strides(int ndim, const int64_t *sizes, int64_t *strides) {
    int64_t acc = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        strides[i] = acc;
        /* A size-0 dim would zero every stride before it; PyTorch keeps them
         * as if the size were 1. */
        /* Only a tensor with a 0-size dim can overflow here (tp__check_sizes
         * refuses the rest); it addresses nothing, so saturating is harmless. */
        if (__builtin_mul_overflow(acc, sizes[i] > 1 ? sizes[i] : 1, &acc)) acc = INT64_MAX;
    }
}

int tp__wrap_dim(int dim, int ndim) {
    /* A 0-dim tensor accepts dims -1 and 0, as PyTorch's wrap_scalar. */
    int n = ndim > 0 ? ndim : 1;
    if (dim < -n || dim >= n) {
        tp__error(TP_STATUS_OUT_OF_BOUNDS,
                  "Dimension out of range (expected to be in range of [%d, %d], but got %d)", -n,
                  n - 1, dim);
        return -1;
    }
    return dim < 0 ? dim + n : dim;
}

tp_status tp__check_sizes(int ndim, const int64_t *sizes, int64_t *numel_out) {
    if (ndim < 0 || ndim > TP_MAX_DIMS)
        return tp__error(TP_STATUS_INVALID_ARGUMENT,
                         "tensors have between 0 and %d dimensions, got %d", TP_MAX_DIMS, ndim);
    if (ndim > 0 && !sizes)
        return tp__error(TP_STATUS_INVALID_ARGUMENT, "sizes is NULL for a %d-dim tensor", ndim);
    char shape[256];
    for (int i = 0; i < ndim; i++) {
        if (sizes[i] < 0)
            return tp__error(TP_STATUS_INVALID_ARGUMENT,
                             "Trying to create tensor with negative dimension %lld: %s",
                             (long long)sizes[i], tp__format_shape(ndim, sizes, shape, sizeof shape));
    }
    int64_t numel = 1;
    bool zero = false;
    for (int i = 0; i < ndim; i++) zero = zero || sizes[i] == 0;
    /* With a 0 anywhere numel is 0 whatever the other sizes are. */
    for (int i = 0; i < ndim && !zero; i++) {
        if (__builtin_mul_overflow(numel, sizes[i], &numel))
            return tp__error(TP_STATUS_INVALID_ARGUMENT, "numel of shape %s overflows int64",
                             tp__format_shape(ndim, sizes, shape, sizeof shape));
    }
    if (numel_out) *numel_out = zero ? 0 : numel;
    return TP_STATUS_OK;
}

/* PyTorch's checkInBoundsForStorage: the bytes the geometry reaches, plus
 * the offset, must fit the storage.  A tensor with a 0-size dim needs none. */
static tp_status tp__check_in_bounds(const tp_storage *storage, int64_t offset, int ndim,
                                     const int64_t *sizes, const int64_t *strides,
                                     size_t itemsize) {
    char sz[256], st[256];
    for (int i = 0; i < ndim; i++)
        if (strides[i] < 0)
            return tp__error(TP_STATUS_INVALID_ARGUMENT,
                             "as_strided: Negative strides are not supported at the moment, got "
                             "strides: %s",
                             tp__format_shape(ndim, strides, st, sizeof st));
    if (offset < 0)
        return tp__error(TP_STATUS_INVALID_ARGUMENT, "Tensor: invalid storage offset %lld",
                         (long long)offset);
    /* computeStorageNbytes: 1 + sum(stride * (size - 1)) elements. */
    uint64_t span = 1;
    bool overflow = false;
    for (int i = 0; i < ndim; i++) {
        if (sizes[i] == 0) return TP_STATUS_OK;
        uint64_t reach;
        overflow |= __builtin_mul_overflow((uint64_t)strides[i], (uint64_t)(sizes[i] - 1), &reach);
        overflow |= __builtin_add_overflow(span, reach, &span);
    }
    uint64_t need, offset_bytes;
    overflow |= __builtin_mul_overflow(span, (uint64_t)itemsize, &need);
    overflow |= __builtin_mul_overflow((uint64_t)offset, (uint64_t)itemsize, &offset_bytes);
    overflow |= __builtin_add_overflow(need, offset_bytes, &need);
    if (overflow)
        return tp__error(TP_STATUS_OUT_OF_BOUNDS,
                         "setStorage: sizes %s, strides %s, storage offset %lld, and itemsize %zu "
                         "overflow the storage size calculation",
                         tp__format_shape(ndim, sizes, sz, sizeof sz),
                         tp__format_shape(ndim, strides, st, sizeof st), (long long)offset,
                         itemsize);
    if (need > storage->nbytes)
        return tp__error(TP_STATUS_OUT_OF_BOUNDS,
                         "setStorage: sizes %s, strides %s, storage offset %lld, and itemsize %zu "
                         "requiring a storage size of %llu are out of bounds for storage of size "
                         "%zu",
                         tp__format_shape(ndim, sizes, sz, sizeof sz),
                         tp__format_shape(ndim, strides, st, sizeof st), (long long)offset,
                         itemsize, (unsigned long long)need, storage->nbytes);
    return TP_STATUS_OK;
}

// ----------------------------------------------------------------------------
// version counter

static tp__version *tp__version_new(void) {
    tp__version *v = calloc(1, sizeof *v);
    if (!v) return NULL;
    atomic_init(&v->refcount, 1);
    atomic_init(&v->value, 0);
    return v;
}

static void tp__version_retain(tp__version *v) {
    atomic_fetch_add_explicit(&v->refcount, 1, memory_order_relaxed);
}

static void tp__version_release(tp__version *v) {
    if (v && atomic_fetch_sub_explicit(&v->refcount, 1, memory_order_acq_rel) == 1) free(v);
}

uint32_t tp_tensor_version(const tp_tensor *t) {
    return t ? atomic_load_explicit(&t->version->value, memory_order_relaxed) : 0;
}

void tp_tensor_bump_version(tp_tensor *t) {
    if (!t) return;
    uint32_t v = atomic_fetch_add_explicit(&t->version->value, 1, memory_order_relaxed) + 1;
    TP__OBSERVE({
        tp__ev_.kind = TP_OBS_VERSION_BUMPED;
        tp__ev_.u.version.tensor_id = t->id;
        tp__ev_.u.version.version = v;
    });
}

// ----------------------------------------------------------------------------
// construction and lifetime

/* A handle the runtime keeps for itself (a view's on its base, a tensor's
 * on its grad): not announced. */
static tp_tensor *tp__tensor_retain_quiet(tp_tensor *t) {
    if (t) atomic_fetch_add_explicit(&t->refcount, 1, memory_order_relaxed);
    return t;
}

static void tp__tensor_free(tp_tensor *t);

static void tp__tensor_release_quiet(tp_tensor *t) {
    if (t && atomic_fetch_sub_explicit(&t->refcount, 1, memory_order_acq_rel) == 1) tp__tensor_free(t);
}

tp_tensor *tp__tensor_make(tp_storage *storage, int64_t storage_offset, int ndim,
                           const int64_t *sizes, const int64_t *strides, tp_dtype dtype,
                           tp__version *version, tp_tensor *base, tp__storage_ref ref) {
    bool adopt = ref == TP__STORAGE_REF_ADOPT;
    tp__version *fresh = NULL;
    tp_tensor *t = NULL;
    if (!storage) {
        tp__error(TP_STATUS_INVALID_ARGUMENT, "tensor: storage is NULL");
        return NULL;
    }
    if (!tp_dtype_is_valid(dtype)) {
        tp__error(TP_STATUS_INVALID_ARGUMENT, "tensor: invalid dtype %d", (int)dtype);
        goto fail;
    }
    int64_t numel;
    if (tp__check_sizes(ndim, sizes, &numel) != TP_STATUS_OK) goto fail;
    int64_t contiguous[TP_MAX_DIMS];
    if (!strides) {
        tp__contiguous_strides(ndim, sizes, contiguous);
        strides = contiguous;
    }
    size_t itemsize = tp_dtype_itemsize(dtype);
    if (tp__check_in_bounds(storage, storage_offset, ndim, sizes, strides, itemsize) !=
        TP_STATUS_OK)
        goto fail;
    int64_t nbytes;
    if (__builtin_mul_overflow(numel, (int64_t)itemsize, &nbytes)) {
        tp__error(TP_STATUS_INVALID_ARGUMENT, "tensor: %lld elements of %zu bytes overflow",
                  (long long)numel, itemsize);
        goto fail;
    }

    t = calloc(1, sizeof *t);
    fresh = version ? NULL : tp__version_new();
    if (!t || (!version && !fresh)) {
        tp__error(TP_STATUS_OUT_OF_MEMORY, "tensor: failed to allocate the tensor struct");
        goto fail;
    }
    atomic_init(&t->refcount, 1);
    t->ndim = ndim;
    t->id = tp__next_id();
    for (int i = 0; i < ndim; i++) {
        t->sizes[i] = sizes[i];
        t->strides[i] = strides[i];
    }
    t->storage_offset = storage_offset;
    t->numel = numel;
    t->dtype = dtype;
    t->device = storage->data.device;
    /* Read once: the retain and the TENSOR_CREATED go to the same observer,
     * as one call when it takes the fused form. */
    const tp_observer *o = tp__observer_get();
    bool fused = o && !adopt && TP_OBSERVER_HAS(o, on_tensor_retained);
    uint32_t strong = 0, weak = 0;
    if (fused) tp__storage_retain_quiet(storage, &strong, &weak);
    else if (!adopt) tp__storage_retain_for(storage, t); /* adopting: the caller's is ours now */
    t->storage = storage;
    if (version) tp__version_retain(version);
    t->version = version ? version : fresh;
    t->base = tp__tensor_retain_quiet(base);
    t->requires_grad = false;
    t->grad = NULL;

    if (__builtin_expect(storage->unannounced, 0) && !(o && TP_OBSERVER_HAS(o, on_tensor_new)))
        tp__storage_announce(storage); /* the observer changed since the storage was made */
    if (__builtin_expect(o != NULL, 0)) {
        tp_obs_tensor tn = {
            .tensor_id = t->id,
            .storage_id = storage->id,
            .base_id = base ? base->id : 0,
            .storage_offset = storage_offset,
            .ndim = ndim,
            .dtype = (int32_t)dtype,
            .sizes = t->sizes,
            .strides = t->strides,
            .itemsize = (uint32_t)itemsize,
            .flags = adopt ? TP_OBS_TENSOR_ADOPTED_REF : 0,
        };
        uint64_t object = (uint64_t)(uintptr_t)t; /* calloc'ed above */
        if (fused) {
            o->on_tensor_retained(o->user, &tn, strong, weak, object);
        } else if (adopt && storage->unannounced && TP_OBSERVER_HAS(o, on_tensor_new)) {
            storage->unannounced = false;
            tp_obs_storage st;
            tp__storage_describe(storage, 0, &st);
            o->on_tensor_new(o->user, &st, (uint64_t)(uintptr_t)storage, &tn, object);
        } else if (TP_OBSERVER_HAS(o, on_tensor_created)) {
            o->on_tensor_created(o->user, &tn, object);
        } else {
            tp_obs_event ev = {.kind = TP_OBS_TENSOR_CREATED, .struct_size = sizeof ev, .object = object,
                               .u.tensor = tn};
            o->on_event(o->user, &ev);
        }
    }
    return t;

fail:
    free(t);
    free(fresh);
    /* An adopting call was given the reference whatever happens: it was the
     * storage's creation reference, taken in this runtime call, so its
     * release names the storage (tp_obs_event.object). */
    if (adopt) {
        if (storage->unannounced) tp__storage_announce(storage);
        tp__storage_release_for(storage, storage);
    }
    return NULL;
}

tp_tensor *tp_tensor_new_from_storage(tp_storage *storage, int64_t storage_offset, int ndim,
                                      const int64_t *sizes, const int64_t *strides,
                                      tp_dtype dtype) {
    return tp__tensor_make(storage, storage_offset, ndim, sizes, strides, dtype, NULL, NULL,
                           TP__STORAGE_REF_RETAIN);
}

static void tp__tensor_ref_event(const tp_tensor *t, uint32_t op, uint32_t count) {
    TP__OBSERVE({
        tp__ev_.kind = TP_OBS_TENSOR_REFCOUNT;
        tp__ev_.u.tensor_ref.tensor_id = t->id;
        tp__ev_.u.tensor_ref.op = op;
        tp__ev_.u.tensor_ref.count = count;
    });
}

tp_tensor *tp_tensor_retain(tp_tensor *t) {
    if (!t) return t;
    uint32_t before = atomic_fetch_add_explicit(&t->refcount, 1, memory_order_relaxed);
    if (__builtin_expect(tp__observer_get() != NULL, 0)) tp__tensor_ref_event(t, TP_OBS_REFOP_RETAIN, before + 1);
    return t;
}

void tp_tensor_release(tp_tensor *t) {
    if (!t) return;
    uint32_t before = atomic_fetch_sub_explicit(&t->refcount, 1, memory_order_acq_rel);
    if (before != 1) {
        if (__builtin_expect(tp__observer_get() != NULL, 0)) tp__tensor_ref_event(t, TP_OBS_REFOP_RELEASE, before - 1);
        return;
    }
    tp__tensor_free(t);
}

/* The last handle is gone. */
static void tp__tensor_free(tp_tensor *t) {
    const tp_observer *o = tp__observer_get();
    uint64_t base_id = t->base ? t->base->id : 0;
    /* An observer taking the fused form hears of it once, at the storage
     * release; any other gets TENSOR_FREED now. */
    bool fused = o && TP_OBSERVER_HAS(o, on_tensor_released);
    if (__builtin_expect(o != NULL, 0) && !fused) {
        if (TP_OBSERVER_HAS(o, on_tensor_freed)) {
            o->on_tensor_freed(o->user, t->id, t->storage->id, base_id);
        } else {
            tp_obs_event ev = {.kind = TP_OBS_TENSOR_FREED, .struct_size = sizeof ev,
                               .u.tensor = {.tensor_id = t->id, .storage_id = t->storage->id,
                                            .base_id = base_id}};
            o->on_event(o->user, &ev);
        }
    }
    tp__tensor_release_quiet(t->grad);
    tp__node_release(t->grad_fn);
    tp__tensor_release_quiet(t->base); /* a root base: no deeper recursion */
    if (fused) tp__storage_release_tensor(t->storage, o, t->id, base_id);
    else tp_storage_release(t->storage);
    tp__version_release(t->version);
    free(t);
}

uint32_t tp_tensor_use_count(const tp_tensor *t) {
    return t ? atomic_load_explicit(&((tp_tensor *)t)->refcount, memory_order_relaxed) : 0;
}

// ----------------------------------------------------------------------------
// fields

int tp_tensor_dim(const tp_tensor *t) { return t ? t->ndim : 0; }
const int64_t *tp_tensor_sizes(const tp_tensor *t) { return t ? t->sizes : NULL; }
const int64_t *tp_tensor_strides(const tp_tensor *t) { return t ? t->strides : NULL; }

int64_t tp_tensor_size(const tp_tensor *t, int dim) {
    if (!t) {
        tp__error(TP_STATUS_INVALID_ARGUMENT, "size: tensor is NULL");
        return -1;
    }
    if (t->ndim == 0) {
        tp__error(TP_STATUS_OUT_OF_BOUNDS, "Dimension specified as %d but tensor has no dimensions",
                  dim);
        return -1;
    }
    int d = tp__wrap_dim(dim, t->ndim);
    return d < 0 ? -1 : t->sizes[d];
}

int64_t tp_tensor_stride(const tp_tensor *t, int dim) {
    if (!t) {
        tp__error(TP_STATUS_INVALID_ARGUMENT, "stride: tensor is NULL");
        return 0;
    }
    if (t->ndim == 0) {
        tp__error(TP_STATUS_OUT_OF_BOUNDS, "Dimension specified as %d but tensor has no dimensions",
                  dim);
        return 0;
    }
    int d = tp__wrap_dim(dim, t->ndim);
    return d < 0 ? 0 : t->strides[d];
}

int64_t tp_tensor_storage_offset(const tp_tensor *t) { return t ? t->storage_offset : 0; }
int64_t tp_tensor_numel(const tp_tensor *t) { return t ? t->numel : 0; }
tp_dtype tp_tensor_dtype(const tp_tensor *t) { return t ? t->dtype : TP_DTYPE_COUNT; }
tp_device tp_tensor_device(const tp_tensor *t) { return t ? t->device : tp_device_cpu(); }
size_t tp_tensor_itemsize(const tp_tensor *t) { return t ? tp_dtype_itemsize(t->dtype) : 0; }
size_t tp_tensor_nbytes(const tp_tensor *t) {
    return t ? (size_t)t->numel * tp_dtype_itemsize(t->dtype) : 0;
}
tp_storage *tp_tensor_storage(const tp_tensor *t) { return t ? t->storage : NULL; }
uint64_t tp_tensor_id(const tp_tensor *t) { return t ? t->id : 0; }

void *tp_tensor_data(const tp_tensor *t) {
    if (!t || !t->storage->data.ptr) return NULL; /* 0-byte storage: no address */
    return (char *)t->storage->data.ptr + t->storage_offset * (int64_t)tp_dtype_itemsize(t->dtype);
}

bool tp_tensor_is_contiguous(const tp_tensor *t) {
    if (!t) return false;
    if (t->numel == 0) return true;
    int64_t expected = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (t->sizes[i] == 1) continue; /* any stride works for a size-1 dim */
        if (t->strides[i] != expected) return false;
        expected *= t->sizes[i];
    }
    return true;
}

bool tp_tensor_is_view(const tp_tensor *t) { return t && t->base; }
tp_tensor *tp_tensor_base(const tp_tensor *t) { return t ? t->base : NULL; }

// ----------------------------------------------------------------------------
// autograd slots

bool tp_tensor_requires_grad(const tp_tensor *t) { return t && t->requires_grad; }

tp_status tp_tensor_set_requires_grad(tp_tensor *t, bool requires_grad) {
    if (!t) return tp__error(TP_STATUS_INVALID_ARGUMENT, "set_requires_grad: tensor is NULL");
    if (requires_grad && !tp_dtype_is_floating(t->dtype))
        return tp__error(TP_STATUS_INVALID_ARGUMENT,
                         "only Tensors of floating point and complex dtype can require gradients");
    t->requires_grad = requires_grad;
    return TP_STATUS_OK;
}

tp_tensor *tp_tensor_grad(const tp_tensor *t) { return t ? t->grad : NULL; }

tp_status tp_tensor_set_grad(tp_tensor *t, tp_tensor *grad) {
    if (!t) return tp__error(TP_STATUS_INVALID_ARGUMENT, "set_grad: tensor is NULL");
    if (grad) {
        /* A tensor holding itself would never be freed. */
        if (grad == t)
            return tp__error(TP_STATUS_INVALID_ARGUMENT, "can't assign Variable as its own grad");
        if (grad->dtype != t->dtype)
            return tp__error(TP_STATUS_INVALID_ARGUMENT,
                             "assigned grad has data of a different type");
        if (grad->device.type != t->device.type || grad->device.index != t->device.index)
            return tp__error(TP_STATUS_INVALID_ARGUMENT,
                             "assigned grad has data located on a different device");
        bool same = grad->ndim == t->ndim;
        for (int i = 0; same && i < t->ndim; i++) same = grad->sizes[i] == t->sizes[i];
        if (!same)
            return tp__error(TP_STATUS_INVALID_ARGUMENT,
                             "assigned grad has data of a different size");
    }
    tp_tensor *old = t->grad;
    t->grad = tp__tensor_retain_quiet(grad);
    /* The handle above is not a TENSOR_REFCOUNT: tell a graph observer who
     * keeps the grad (a gradient goes with its parameter). */
    const tp_observer *o = tp__observer_graph();
    if (o && (grad || old)) {
        tp_obs_event ev = {.kind = TP_OBS_GRAD_SET, .struct_size = sizeof ev};
        ev.u.grad = (tp_obs_grad){.tensor_id = t->id, .grad_id = grad ? grad->id : 0,
                                  .grad_storage_id = grad ? grad->storage->id : 0};
        o->on_event(o->user, &ev);
    }
    tp__tensor_release_quiet(old);
    return TP_STATUS_OK;
}
