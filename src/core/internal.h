/*
 * src/core/internal.h - the runtime's private struct layouts and helpers,
 * shared by src/core and src/ops.  Nothing outside src/ may include this:
 * the profiler sees the runtime only through include/tensorplay/observer.h.
 */
#ifndef TENSORPLAY_CORE_INTERNAL_H
#define TENSORPLAY_CORE_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include "tensorplay/tensorplay.h"

// ----------------------------------------------------------------------------
// errors

/* Records a failure for tp_last_error() (printf-style) and returns status. */
tp_status tp__error(tp_status status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* How many failures this thread has recorded so far; lets a caller tell
 * whether a callee (e.g. a custom allocator) already left a message. */
uint64_t tp__error_count(void);

// ----------------------------------------------------------------------------
// observer

/* The attached observer; NULL almost always, so the check is one
 * well-predicted branch. */
extern const tp_observer *_Atomic tp__observer;

static inline const tp_observer *tp__observer_get(void) {
    return atomic_load_explicit(&tp__observer, memory_order_acquire);
}
/* Publishes an event if an observer is attached. Call through the macro so
 * the event is only built when someone listens. */
#define TP__OBSERVE(build_event)                                         \
    do {                                                                 \
        const tp_observer *tp__obs_ = tp__observer_get();                \
        if (__builtin_expect(tp__obs_ != NULL, 0)) {                     \
            tp_obs_event tp__ev_ = {0};                                  \
            tp__ev_.struct_size = sizeof tp__ev_;                        \
            build_event;                                                 \
            tp__obs_->on_event(tp__obs_->user, &tp__ev_);                \
        }                                                                \
    } while (0)

/* The attached observer if it takes the autograd graph's events (ABI
 * version 3 or later), else NULL. */
static inline const tp_observer *tp__observer_graph(void) {
    const tp_observer *o = tp__observer_get();
    return __builtin_expect(o != NULL, 0) && o->abi_version >= 3 ? o : NULL;
}

// ----------------------------------------------------------------------------
// foreign memory (src/ops/creation.c)

/* tp_from_blob for memory on `device` (a CUDA device's memory: DLPack's
 * import); the tensor's device is the DataPtr's.  Same ownership rules. */
tp_tensor *tp__from_blob_on(tp_device device, void *data, int ndim, const int64_t *sizes,
                            const int64_t *strides, tp_dtype dtype, tp_deleter_fn deleter, void *ctx);

// ----------------------------------------------------------------------------
// ids

/* A process-unique id (never 0) from one atomic counter shared by storages
 * and tensors, so an id names one object of either kind. */
uint64_t tp__next_id(void);

// ----------------------------------------------------------------------------
// storage

struct tp_storage {
    _Atomic uint32_t strong;
    _Atomic uint32_t weak; /* includes +1 while strong > 0 */
    uint64_t id;
    tp_data_ptr data;
    size_t nbytes;
    tp_allocator *allocator; /* NULL: cannot resize */
    bool resizable;
    /* Made by tp__storage_new_for_tensor with STORAGE_CREATED left to the
     * tensor's on_tensor_new: not yet reported. */
    bool unannounced;
};

// ----------------------------------------------------------------------------
// version counter, shared by a tensor, its views and detach()

typedef struct tp__version {
    _Atomic uint32_t refcount;
    _Atomic uint32_t value;
} tp__version;

// ----------------------------------------------------------------------------
// tensor impl

struct tp_tensor {
    _Atomic uint32_t refcount;
    int32_t ndim;
    uint64_t id;
    int64_t sizes[TP_MAX_DIMS];
    int64_t strides[TP_MAX_DIMS]; /* in elements */
    int64_t storage_offset;       /* in elements */
    int64_t numel;
    tp_dtype dtype;
    tp_device device;
    tp_storage *storage;     /* strong reference */
    tp__version *version;    /* shared */
    tp_tensor *base;         /* root base of a view (strong reference), else NULL */
    bool requires_grad;
    tp_tensor *grad;         /* strong reference or NULL */
    /* src/autograd: the node that made this tensor (strong reference), NULL
     * for leaves and tensors outside any graph.  Released with the tensor. */
    struct tp__node *grad_fn;
};

/* Drops a strong reference to an autograd node (src/autograd/node.c);
 * frees a whole chain iteratively, never by recursion.  NULL ok. */
void tp__node_release(struct tp__node *node);

/* tp_storage_retain for the reference of a tensor being created: the event
 * names the tensor struct (tp_obs_event.object), allocated by this call. */
void tp__storage_retain_for(tp_storage *s, const void *object);
/* tp_storage_release of the creation reference by the runtime call that
 * created the storage (tp_obs_event.object: the storage struct). */
void tp__storage_release_for(tp_storage *s, const void *object);
/* tp_storage_new for a tensor that adopts it in the same call
 * (TP__STORAGE_REF_ADOPT, next): when the observer takes on_tensor_new,
 * STORAGE_CREATED is left to that tensor's (s->unannounced).  New
 * reference or NULL. */
tp_storage *tp__storage_new_for_tensor(size_t nbytes, tp_allocator *allocator, bool resizable);
/* Sends the STORAGE_CREATED a storage made for a tensor still owes. */
void tp__storage_announce(tp_storage *s);
/* The observer ABI's description of s (old_data: DATA_SWAPPED's). */
void tp__storage_describe(const tp_storage *s, uint64_t old_data, tp_obs_storage *out);
/* The retain of a tensor being made for an observer that takes
 * on_tensor_retained: no event of its own (that call reports it); the
 * counts after it into *strong, *weak.  s not NULL.  Inline: it is on
 * every view's way while an observer is attached. */
static inline void tp__storage_retain_quiet(tp_storage *s, uint32_t *strong, uint32_t *weak) {
    *strong = atomic_fetch_add_explicit(&s->strong, 1, memory_order_relaxed) + 1;
    *weak = atomic_load_explicit(&s->weak, memory_order_relaxed);
}
/* Releases the storage reference of tensor tensor_id (root base base_id)
 * through o's on_tensor_released (o attached and providing it): the one
 * call stands for the tensor's TENSOR_FREED, the RELEASE and, when the
 * data or the struct goes, their DATA_RELEASED and FREED. */
void tp__storage_release_tensor(tp_storage *s, const tp_observer *o, uint64_t tensor_id, uint64_t base_id);

/* How a new tensor gets its strong reference to the storage. */
typedef enum tp__storage_ref {
    /* It retains one of its own; the caller's references are untouched,
     * whether or not the tensor is made (views, detach, the public
     * tp_tensor_new_from_storage). */
    TP__STORAGE_REF_RETAIN = 0,
    /* It ADOPTS the storage's creation reference, which the caller holds,
     * as c10 moves a new Storage into its TensorImpl: no retain, no RETAIN
     * event, and TENSOR_CREATED carries TP_OBS_TENSOR_ADOPTED_REF.  Only for
     * a storage this same runtime call created on this thread and has not
     * shared (the observer ABI promises that much), with version and base
     * NULL.  The reference is consumed whatever happens: if the tensor
     * cannot be made it is released here (the storage is freed), so the
     * caller must not touch the storage after the call. */
    TP__STORAGE_REF_ADOPT = 1,
} tp__storage_ref;

/* Creates a tensor over storage (its reference as `ref` says) with the
 * given geometry, version counter (retained; NULL = a fresh one) and base
 * (retained; NULL = not a view).  Bounds-checked against the storage.  New
 * reference or NULL. */
tp_tensor *tp__tensor_make(tp_storage *storage, int64_t storage_offset, int ndim,
                           const int64_t *sizes, const int64_t *strides, tp_dtype dtype,
                           tp__version *version, tp_tensor *base, tp__storage_ref ref);

/* Fills strides with the contiguous (row-major) strides of sizes. */
void tp__contiguous_strides(int ndim, const int64_t *sizes, int64_t *strides);

/* Wraps a possibly negative dim into [0, ndim); on failure sets the error
 * ("Dimension out of range (expected to be in range of [-2, 1], but got 2)")
 * and returns -1. */
int tp__wrap_dim(int dim, int ndim);

/* Checks ndim/sizes (0 <= ndim <= TP_MAX_DIMS, sizes >= 0, numel overflow);
 * computes numel.  Returns TP_STATUS_OK or an error status (error set). */
tp_status tp__check_sizes(int ndim, const int64_t *sizes, int64_t *numel_out);

/* "[3, 4]" into buf. */
const char *tp__format_shape(int ndim, const int64_t *sizes, char *buf, size_t buflen);

#endif
