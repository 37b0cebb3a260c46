/*
 * src/core/storage.c - Storage: refcounted bytes with c10's intrusive_ptr
 * rules, resize and DataPtr swapping.
 *
 * This is the one place storage refcounts change, and every change is
 * published to the observer.  The rules (notes/c10-semantics.md, section 1):
 *   - new: strong 1, weak 1 (the weak count holds +1 while strong > 0);
 *   - strong -> 0: if weak == 1 nobody can observe the struct any more, so it
 *     is deleted at once (we still report "data released" then "freed");
 *     otherwise the data is released and weak drops its +1;
 *   - the struct is freed when weak reaches 0;
 *   - weak_lock CAS-increments strong only while it is above 0.
 *
 * Observer events read ids and counts captured before a decrement: once our
 * reference is gone another thread may free the struct at any moment.
 * This file knows nothing of tensors or of how allocators get memory.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

// ----------------------------------------------------------------------------
// ids

static _Atomic uint64_t tp__id_counter = 0;

uint64_t tp__next_id(void) {
    return atomic_fetch_add_explicit(&tp__id_counter, 1, memory_order_relaxed) + 1;
}

// ----------------------------------------------------------------------------
// observer events

static const char *tp__storage_allocator_name(const tp_storage *s) {
    if (s->allocator) return s->allocator->name;
    /* Wrapped memory with a deleter is owned but came from outside. */
    return s->data.deleter ? "external" : NULL;
}

void tp__storage_describe(const tp_storage *s, uint64_t old_data, tp_obs_storage *out) {
    *out = (tp_obs_storage){
        .storage_id = s->id,
        .data = (uint64_t)(uintptr_t)s->data.ptr,
        .nbytes = s->nbytes,
        .allocator = tp__storage_allocator_name(s),
        .device_type = s->data.device.type,
        .device_index = s->data.device.index,
        .resizable = s->resizable,
        .old_data = old_data,
    };
}

static void tp__observe_storage(uint32_t kind, const tp_storage *s, uint64_t old_data) {
    const tp_observer *o = tp__observer_get();
    if (__builtin_expect(o == NULL, 1)) return;
    tp_obs_storage st;
    tp__storage_describe(s, old_data, &st);
    /* The struct was calloc'ed by the call that sends CREATED (below). */
    uint64_t object = kind == TP_OBS_STORAGE_CREATED ? (uint64_t)(uintptr_t)s : 0;
    if (TP_OBSERVER_HAS(o, on_storage)) {
        o->on_storage(o->user, kind, &st, object);
        return;
    }
    tp_obs_event ev = {.kind = kind, .struct_size = sizeof ev, .object = object, .u.storage = st};
    o->on_event(o->user, &ev);
}

static void tp__observe_refcount(uint64_t id, tp_obs_refop op, uint32_t strong, uint32_t weak,
                                 const void *object) {
    const tp_observer *o = tp__observer_get();
    if (__builtin_expect(o == NULL, 1)) return;
    if (TP_OBSERVER_HAS(o, on_refcount)) {
        o->on_refcount(o->user, id, (uint32_t)op, strong, weak, (uint64_t)(uintptr_t)object);
        return;
    }
    tp_obs_event ev = {.kind = TP_OBS_STORAGE_REFCOUNT, .struct_size = sizeof ev,
                       .object = (uint64_t)(uintptr_t)object,
                       .u.refcount = {.storage_id = id, .op = op, .strong = strong, .weak = weak}};
    o->on_event(o->user, &ev);
}

// ----------------------------------------------------------------------------
// creation

/* announce: send STORAGE_CREATED now; else the tensor made for it will. */
static tp_storage *tp__storage_create(tp_data_ptr data, size_t nbytes, tp_allocator *allocator, bool resizable,
                                      bool announce) {
    tp_storage *s = calloc(1, sizeof *s);
    if (!s) {
        tp_data_ptr_clear(&data); /* we were given ownership */
        tp__error(TP_STATUS_OUT_OF_MEMORY, "storage: failed to allocate the storage struct");
        return NULL;
    }
    atomic_init(&s->strong, 1);
    atomic_init(&s->weak, 1);
    s->id = tp__next_id();
    s->data = data;
    s->nbytes = nbytes;
    s->allocator = allocator;
    s->resizable = resizable;
    s->unannounced = !announce;
    if (announce) tp__observe_storage(TP_OBS_STORAGE_CREATED, s, 0);
    return s;
}

tp_storage *tp_storage_new_with_data_ptr(tp_data_ptr data, size_t nbytes,
                                         tp_allocator *allocator, bool resizable) {
    return tp__storage_create(data, nbytes, allocator, resizable, true);
}

static tp_storage *tp__storage_allocate(size_t nbytes, tp_allocator *allocator, bool resizable, bool announce) {
    if (!allocator) allocator = tp_allocator_get(TP_DEVICE_TYPE_CPU);
    tp_data_ptr data;
    if (tp_allocator_allocate(allocator, nbytes, &data) != TP_STATUS_OK) return NULL;
    return tp__storage_create(data, nbytes, allocator, resizable, announce);
}

tp_storage *tp_storage_new(size_t nbytes, tp_allocator *allocator, bool resizable) {
    return tp__storage_allocate(nbytes, allocator, resizable, true);
}

tp_storage *tp__storage_new_for_tensor(size_t nbytes, tp_allocator *allocator, bool resizable) {
    const tp_observer *o = tp__observer_get();
    return tp__storage_allocate(nbytes, allocator, resizable, !(o && TP_OBSERVER_HAS(o, on_tensor_new)));
}

void tp__storage_announce(tp_storage *s) {
    s->unannounced = false;
    tp__observe_storage(TP_OBS_STORAGE_CREATED, s, 0);
}

// ----------------------------------------------------------------------------
// teardown

/* Runs the DataPtr deleter (strong reached 0); `quiet`: the observer was
 * told already (on_tensor_released, TP_OBS_RELEASED_DATA). */
static void tp__storage_release_data(tp_storage *s, bool quiet) {
    if (!quiet) tp__observe_storage(TP_OBS_STORAGE_DATA_RELEASED, s, 0);
    tp_data_ptr_clear(&s->data);
}

/* Frees the struct (weak reached 0, or strong reached 0 with no weak refs);
 * `quiet` as above (TP_OBS_RELEASED_FREED). */
static void tp__storage_free(tp_storage *s, bool quiet) {
    if (!quiet) tp__observe_storage(TP_OBS_STORAGE_FREED, s, 0);
    tp_data_ptr_clear(&s->data); /* already empty unless deleted directly */
    free(s);
}

// ----------------------------------------------------------------------------
// strong references

void tp__storage_retain_for(tp_storage *s, const void *object) {
    if (!s) return;
    uint32_t strong = atomic_fetch_add_explicit(&s->strong, 1, memory_order_relaxed) + 1;
    tp__observe_refcount(s->id, TP_OBS_REFOP_RETAIN, strong,
                         atomic_load_explicit(&s->weak, memory_order_relaxed), object);
}

void tp_storage_retain(tp_storage *s) { tp__storage_retain_for(s, NULL); }

void tp_storage_release(tp_storage *s) { tp__storage_release_for(s, NULL); }

/* The one place a strong reference is dropped.  fused: an observer taking
 * on_tensor_released, told of this release as tensor `tensor_id`'s (base
 * base_id), and then not of the DATA_RELEASED and FREED it implies; NULL:
 * the plain REFCOUNT RELEASE (object as tp_obs_event.object). */
static void tp__storage_release(tp_storage *s, const void *object, const tp_observer *fused,
                                uint64_t tensor_id, uint64_t base_id) {
    uint64_t id = s->id;
    /* While we hold a strong reference weak >= 1 and does not move because
     * of us; read it now, the struct may be gone after the decrement. */
    uint32_t weak = atomic_load_explicit(&s->weak, memory_order_relaxed);
    uint32_t strong = atomic_fetch_sub_explicit(&s->strong, 1, memory_order_acq_rel) - 1;
    /* Once strong is 0 nobody can retain or lock, and weak holders cannot
     * take weak below the +1 that strong's side still holds: with weak 1 now
     * the struct is ours alone, and it is deleted directly, as c10 does (its
     * destructor frees the data, so both steps are reported). */
    bool direct = strong == 0 && atomic_load_explicit(&s->weak, memory_order_acquire) == 1;
    if (fused) {
        uint32_t flags = (strong == 0 ? TP_OBS_RELEASED_DATA : 0u) | (direct ? TP_OBS_RELEASED_FREED : 0u);
        fused->on_tensor_released(fused->user, tensor_id, id, base_id, strong, weak, flags);
    } else {
        tp__observe_refcount(id, TP_OBS_REFOP_RELEASE, strong, weak, object);
    }
    if (strong != 0) return;
    bool quiet = fused != NULL;
    if (direct) {
        tp__storage_release_data(s, quiet);
        tp__storage_free(s, quiet);
        return;
    }
    tp__storage_release_data(s, quiet);
    weak = atomic_fetch_sub_explicit(&s->weak, 1, memory_order_acq_rel) - 1;
    tp__observe_refcount(id, TP_OBS_REFOP_WEAK_RELEASE, 0, weak, NULL);
    if (weak == 0) tp__storage_free(s, false); /* the weak holders let go meanwhile */
}

void tp__storage_release_for(tp_storage *s, const void *object) {
    if (s) tp__storage_release(s, object, NULL, 0, 0);
}

void tp__storage_release_tensor(tp_storage *s, const tp_observer *o, uint64_t tensor_id, uint64_t base_id) {
    if (s) tp__storage_release(s, NULL, o, tensor_id, base_id);
}

// ----------------------------------------------------------------------------
// weak references

void tp_storage_weak_retain(tp_storage *s) {
    if (!s) return;
    uint32_t weak = atomic_fetch_add_explicit(&s->weak, 1, memory_order_relaxed) + 1;
    tp__observe_refcount(s->id, TP_OBS_REFOP_WEAK_RETAIN,
                         atomic_load_explicit(&s->strong, memory_order_relaxed), weak, NULL);
}

void tp_storage_weak_release(tp_storage *s) {
    if (!s) return;
    uint64_t id = s->id;
    uint32_t strong = atomic_load_explicit(&s->strong, memory_order_relaxed);
    uint32_t weak = atomic_fetch_sub_explicit(&s->weak, 1, memory_order_acq_rel) - 1;
    tp__observe_refcount(id, TP_OBS_REFOP_WEAK_RELEASE, strong, weak, NULL);
    if (weak == 0) tp__storage_free(s, false);
}

tp_storage *tp_storage_weak_lock(tp_storage *s) {
    if (!s) return NULL;
    uint32_t strong = atomic_load_explicit(&s->strong, memory_order_relaxed);
    do {
        if (strong == 0) return NULL; /* final: the data is gone */
    } while (!atomic_compare_exchange_weak_explicit(&s->strong, &strong, strong + 1,
                                                    memory_order_acq_rel,
                                                    memory_order_relaxed));
    tp__observe_refcount(s->id, TP_OBS_REFOP_LOCK, strong + 1,
                         atomic_load_explicit(&s->weak, memory_order_relaxed), NULL);
    return s;
}

uint32_t tp_storage_use_count(const tp_storage *s) {
    return s ? atomic_load_explicit(&((tp_storage *)s)->strong, memory_order_relaxed) : 0;
}

uint32_t tp_storage_weak_count(const tp_storage *s) {
    return s ? atomic_load_explicit(&((tp_storage *)s)->weak, memory_order_relaxed) : 0;
}

// ----------------------------------------------------------------------------
// fields

void *tp_storage_data(const tp_storage *s) { return s ? s->data.ptr : NULL; }
size_t tp_storage_nbytes(const tp_storage *s) { return s ? s->nbytes : 0; }
tp_allocator *tp_storage_allocator(const tp_storage *s) { return s ? s->allocator : NULL; }
tp_device tp_storage_device(const tp_storage *s) {
    return s ? s->data.device : tp_device_cpu();
}
bool tp_storage_resizable(const tp_storage *s) { return s && s->resizable; }
uint64_t tp_storage_id(const tp_storage *s) { return s ? s->id : 0; }

// ----------------------------------------------------------------------------
// resize and DataPtr swap

tp_status tp_storage_resize(tp_storage *s, size_t new_nbytes) {
    if (!s) return tp__error(TP_STATUS_INVALID_ARGUMENT, "resize: storage is NULL");
    if (!s->resizable || !s->allocator)
        return tp__error(TP_STATUS_INVALID_ARGUMENT,
                         "Trying to resize storage that is not resizable");
    if (s->data.device.type != TP_DEVICE_TYPE_CPU) { /* its bytes are not ours to memcpy */
        char buf[16];
        return tp__error(TP_STATUS_UNSUPPORTED, "resize: a storage on %s cannot be resized",
                         tp_device_str(s->data.device, buf, sizeof buf));
    }
    tp_data_ptr fresh;
    tp_status st = tp_allocator_allocate(s->allocator, new_nbytes, &fresh);
    if (st != TP_STATUS_OK) return st; /* the old data is untouched */
    size_t keep = s->nbytes < new_nbytes ? s->nbytes : new_nbytes;
    if (keep > 0) memcpy(fresh.ptr, s->data.ptr, keep);
    tp_data_ptr old = tp_storage_set_data_ptr(s, fresh, new_nbytes);
    tp_data_ptr_clear(&old);
    return TP_STATUS_OK;
}

tp_data_ptr tp_storage_set_data_ptr(tp_storage *s, tp_data_ptr data, size_t nbytes) {
    if (!s) {
        tp__error(TP_STATUS_INVALID_ARGUMENT, "set_data_ptr: storage is NULL");
        return data; /* still the caller's */
    }
    tp_data_ptr old = s->data;
    s->data = data;
    s->nbytes = nbytes;
    tp__observe_storage(TP_OBS_STORAGE_DATA_SWAPPED, s, (uint64_t)(uintptr_t)old.ptr);
    return old;
}
