// observe.c: tpprof's observer of the tensor runtime. THE HOT PATH, like hooks.c.
//
// libtensorplay looks up `tp_observer_provide` with dlsym(RTLD_DEFAULT) from
// its constructor (or the program's, when linked statically) and attaches
// the observer returned. With a shared libtensorplay that happens BEFORE
// libtpprof's own constructors ran, so the observer is a static object and
// the callback records nothing until recording is active (events before the
// start are simply not seen). Each event is copied, with the calling
// thread's stack and a global sequence number, into that thread's ring, in
// order with the malloc records: the writer (storages.c) ties storages to
// the blocks that back them and keeps the reference ledger. Same rules as
// the malloc hooks: no lock, no syscall, no SQLite, no malloc; the only
// include from the runtime is its observer ABI header. This file must not
// interpret the events beyond copying them, except where the ABI's event
// order makes an unwind or a record redundant ("Stacks already known"
// below): then it skips the unwind, or sends two events as one record.
#define _GNU_SOURCE
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "tensorplay/observer.h"
#include "tpprof_internal.h"

_Atomic int tpprof_obs_attached;

// Longest record: an ALLOCATOR event (12 words) or a tensor of 8 dims
// (7 + 2 * 8); ndim above this is cut (the runtime's TP_MAX_DIMS is 8).
#define OBS_MAX_DIMS 8
#define OBS_MAX_WORDS 24

// ---------------------------------------------------------------------------
// Stacks already known, records folded.
//
// A stack capture is most of an event's cost, a record's sequence number and
// ring slot most of the rest, and the ABI's event order makes some of both
// redundant. Per thread:
//  - TENSOR_CREATED right after a RETAIN of the same storage (the runtime
//    takes the tensor's reference, then reports the tensor, from the same
//    function) takes the RETAIN's stack id: one frame deeper, inside the
//    runtime's retain; the viewer shows stacks from the first caller
//    outside the runtime.
//  - Aggregate mode (full mode sends every event on its own, with its own
//    stack, for the events table):
//    - TENSOR_FREED is held back and sent inside the RELEASE of its storage
//      reference, which the ABI promises next on the same thread (after
//      the frees of the tensor's base or grad, hence a small stack of them,
//      newest match first like the writer's pairing in storages.c): one
//      record, no stack, flagged TPPROF_OBS_TENSOR_REF, the tensor id after
//      the counts. The writer pairs it with the tensor's reference and
//      counts it under that reference's stack (docs/schema-tensors.md).
//    - A RETAIN from a site this thread has seen followed by TENSOR_CREATED
//      of the same storage is held back (its stack captured) and sent inside
//      that TENSOR_CREATED, flagged TPPROF_OBS_WITH_RETAIN, the counts after
//      the dims. Any other event first sends it on its own (and the site is
//      forgotten), so it is never reordered with this thread's observer
//      events; but if the thread sends no other observer event before the
//      recording ends, it is lost. Only a site that has been followed by its
//      tensor is trusted, which inside the runtime's tensor constructor is
//      always.
//    - A storage's creation and its data release carry tpprof_ticks(), taken
//      here (TPPROF_OBS_TICKS, the last payload word): the writer's merge
//      time would round DataPtr lifetimes of microseconds to milliseconds.
//    - A RELEASE that leaves strong 0 carries the DATA_RELEASED the ABI
//      promises next (flag TPPROF_OBS_DATA_RELEASED), which is then not sent;
//      if it leaves weak 1 (no weak holder), also the FREED that comes once
//      the data's deleter has run (TPPROF_OBS_FREED).

#define OBS_FREED 16
#define OBS_SITES 64 // retain sites remembered as followed by their tensor

struct obs_recent {
    uint64_t retain_storage;      // the last event was a RETAIN of this storage (0: it was not)...
    uint32_t retain_sid;          // ...and this is its stack
    uint32_t nfreed;
    struct { uint64_t tensor, storage; } freed[OBS_FREED]; // TENSOR_FREED held for their RELEASE
    uint64_t held_storage, held_counts; // a RETAIN held for its TENSOR_CREATED (held_sid != 0)
    uint32_t held_sid;
    uint32_t tensor_sites[OBS_SITES];   // retain stack ids seen followed by their tensor
    uint64_t data_released;             // sent inside the last event: this storage's DATA_RELEASED
    uint64_t freed_storage;             // sent inside an earlier RELEASE: this storage's FREED (the
                                        // data's deleter runs in between and may send events)
};
static __thread struct obs_recent recent TPPROF_TLS;

// The tensor whose held TENSOR_FREED this RELEASE of `storage` completes
// (forgotten now), or 0.
static inline uint64_t take_freed(uint64_t storage) {
    for (uint32_t i = recent.nfreed; i-- > 0;)
        if (recent.freed[i].storage == storage) {
            uint64_t tensor = recent.freed[i].tensor;
            for (uint32_t j = i; j + 1 < recent.nfreed; j++) recent.freed[j] = recent.freed[j + 1];
            recent.nfreed--;
            return tensor;
        }
    return 0;
}

// ---------------------------------------------------------------------------
// Recording.

// Up to 24 bytes of a name, NUL padded, into 3 words (all zero for NULL).
static inline void put_name(uint64_t *w, const char *name) {
    w[0] = w[1] = w[2] = 0;
    if (!name) return;
    char *d = (char *)w;
    for (int i = 0; i < 23 && name[i]; i++) d[i] = name[i];
}

// The record of the event being handled is written straight into the ring
// (no copy): obs_slot gives room for the longest record (or NULL when the
// ring stays full), obs_commit numbers and publishes it. An event that
// sends nothing just leaves its words unpublished, to be overwritten.
// Anything else that emits (flush_retain, hold_freed) goes before obs_slot
// or ends the event.
static inline uint64_t *obs_slot(struct tpprof_thread *t) {
    if (!tpprof_ring_reserve(t, OBS_MAX_WORDS + 1)) return NULL;
    return tpprof_ring_slot(t, OBS_MAX_WORDS + 1);
}

static inline void obs_commit(struct tpprof_thread *t, uint64_t *w, int kind, int refop, uint64_t flags, uint32_t sid,
                              int n) {
    uint64_t seq = atomic_fetch_add(&tpprof_seq, 1);
    w[0] = tpprof_hdr(seq, TPPROF_OP_OBS, kind);
    w[1] = (uint64_t)n | (uint64_t)refop << 8 | flags | (uint64_t)sid << 32;
    int k = n;
    if (tpprof_cfg.full) w[k++] = tpprof_now_ns();
    tpprof_ring_commit(t, (uint64_t)k);
}

// Sends one record of n words whose payload is p[2..n-1].
static void emit(struct tpprof_thread *t, int kind, int refop, uint64_t flags, uint32_t sid, const uint64_t *p, int n) {
    uint64_t *w = obs_slot(t);
    if (!w) return;
    for (int i = 2; i < n; i++) w[i] = p[i];
    obs_commit(t, w, kind, refop, flags, sid, n);
}

// Sends the held RETAIN as its own record: something else came first, so
// its site is no longer trusted to be followed by its tensor.
static void flush_retain(struct tpprof_thread *t) {
    uint64_t w[5] = {0, 0, recent.held_storage, recent.held_counts};
    emit(t, TP_OBS_STORAGE_REFCOUNT, TP_OBS_REFOP_RETAIN, 0, recent.held_sid, w, 4);
    if (recent.tensor_sites[recent.held_sid % OBS_SITES] == recent.held_sid)
        recent.tensor_sites[recent.held_sid % OBS_SITES] = 0;
    recent.held_sid = 0;
}

// Holds a TENSOR_FREED back for its RELEASE; a stack deeper than any release
// chain sends its oldest on its own (the writer pairs that one itself).
static void hold_freed(struct tpprof_thread *t, uint64_t tensor, uint64_t storage) {
    if (recent.nfreed == OBS_FREED) {
        uint64_t w[5] = {0, 0, recent.freed[0].tensor, recent.freed[0].storage};
        emit(t, TP_OBS_TENSOR_FREED, 0, 0, 0, w, 4);
        for (uint32_t j = 0; j + 1 < OBS_FREED; j++) recent.freed[j] = recent.freed[j + 1];
        recent.nfreed--;
    }
    recent.freed[recent.nfreed].tensor = tensor;
    recent.freed[recent.nfreed].storage = storage;
    recent.nfreed++;
}

// Whether the runtime's event reaches `member` of the union.
#define HAS(ev, member) ((ev)->struct_size >= offsetof(tp_obs_event, u) + sizeof((ev)->u.member))

// The struct this event's runtime call allocated and is creating (0: none,
// or a runtime from before the field).
static inline uint64_t event_object(const tp_obs_event *ev) {
    return ev->struct_size >= offsetof(tp_obs_event, object) + sizeof ev->object ? ev->object : 0;
}

static void on_event(void *user, const tp_obs_event *ev) {
    (void)user;
    if (tpprof_guard || !atomic_load_explicit(&tpprof_active, memory_order_relaxed)) return;
    tpprof_guard = 1;
    struct tpprof_thread *t = tpprof_self; // rings.c's fast path, without the call
    if (TPPROF_UNLIKELY(!t)) t = tpprof_thread_get();
    int n = 0, refop = 0;
    bool stack = true;
    uint32_t sid = 0;
    uint64_t flags = 0;
    uint64_t retained = recent.retain_storage; // only the very next event may use it
    recent.retain_storage = 0;
    uint64_t data_released = recent.data_released; // likewise
    recent.data_released = 0;
    if (recent.held_sid && t &&
        !(ev->kind == TP_OBS_TENSOR_CREATED && HAS(ev, tensor) && ev->u.tensor.storage_id == recent.held_storage))
        flush_retain(t);
    // Events that send no record of their own, decided before taking a slot.
    switch (ev->kind) {
    case TP_OBS_STORAGE_DATA_RELEASED: // already sent inside the release before it
        if (HAS(ev, storage) && data_released == ev->u.storage.storage_id) goto out;
        break;
    case TP_OBS_STORAGE_FREED: // likewise (the data's deleter ran in between)
        if (HAS(ev, storage) && recent.freed_storage == ev->u.storage.storage_id) {
            recent.freed_storage = 0;
            goto out;
        }
        break;
    case TP_OBS_TENSOR_FREED: // aggregate mode: held for its release
        if (tpprof_cfg.full || !HAS(ev, tensor)) break;
        if (t) hold_freed(t, ev->u.tensor.tensor_id, ev->u.tensor.storage_id);
        goto out;
    default:
        break;
    }
    uint64_t scratch[OBS_MAX_WORDS + 1];
    uint64_t *w = t ? obs_slot(t) : NULL;
    bool no_room = w == NULL; // the record is built and dropped (holds still count)
    if (no_room) w = scratch;
    switch (ev->kind) {
    case TP_OBS_STORAGE_CREATED:
        if (!HAS(ev, storage)) goto out;
        w[2] = ev->u.storage.storage_id;
        w[3] = ev->u.storage.data;
        w[4] = ev->u.storage.nbytes;
        w[5] = (uint64_t)(uint16_t)ev->u.storage.device_type | (uint64_t)(uint16_t)ev->u.storage.device_index << 16 |
               (uint64_t)(ev->u.storage.resizable != 0) << 32 | (uint64_t)(ev->u.storage.allocator != NULL) << 33;
        put_name(&w[6], ev->u.storage.allocator);
        n = 9;
        if (!tpprof_cfg.full) { // full mode's records carry exact times anyway
            w[n++] = tpprof_ticks();
            flags = TPPROF_OBS_TICKS;
        }
        break;
    case TP_OBS_STORAGE_DATA_SWAPPED:
        if (!HAS(ev, storage)) goto out;
        w[2] = ev->u.storage.storage_id;
        w[3] = ev->u.storage.data;
        w[4] = ev->u.storage.nbytes;
        w[5] = ev->u.storage.old_data;
        n = 6;
        break;
    case TP_OBS_STORAGE_DATA_RELEASED:
    case TP_OBS_STORAGE_FREED:
        if (!HAS(ev, storage)) goto out;
        w[2] = ev->u.storage.storage_id;
        n = 3;
        if (ev->kind == TP_OBS_STORAGE_DATA_RELEASED && !tpprof_cfg.full) {
            w[n++] = tpprof_ticks();
            flags = TPPROF_OBS_TICKS;
        }
        stack = tpprof_cfg.full; // no table names these stacks; full mode's events do
        break;
    case TP_OBS_STORAGE_REFCOUNT:
        if (!HAS(ev, refcount)) goto out;
        w[2] = ev->u.refcount.storage_id;
        w[3] = (uint64_t)ev->u.refcount.strong | (uint64_t)ev->u.refcount.weak << 32;
        refop = (int)(ev->u.refcount.op & 0xff);
        n = 4;
        if (refop == TP_OBS_REFOP_RELEASE && recent.nfreed && (w[4] = take_freed(w[2])) != 0) {
            stack = false;
            flags = TPPROF_OBS_TENSOR_REF;
            n = 5;
        }
        if (refop == TP_OBS_REFOP_RELEASE && ev->u.refcount.strong == 0 && !tpprof_cfg.full) {
            w[n++] = tpprof_ticks(); // the data's deleter runs now
            flags |= TPPROF_OBS_DATA_RELEASED | TPPROF_OBS_TICKS;
            recent.data_released = w[2];
            if (ev->u.refcount.weak == 1) { // no weak holder: FREED follows the data's deleter
                flags |= TPPROF_OBS_FREED;
                recent.freed_storage = w[2];
            }
        }
        break;
    case TP_OBS_TENSOR_CREATED: {
        if (!HAS(ev, tensor)) goto out;
        const tp_obs_tensor *x = &ev->u.tensor;
        int nd = x->ndim < 0 ? 0 : x->ndim > OBS_MAX_DIMS ? OBS_MAX_DIMS : x->ndim;
        w[2] = x->tensor_id;
        w[3] = x->storage_id;
        w[4] = x->base_id;
        w[5] = (uint64_t)x->storage_offset;
        w[6] = (uint64_t)nd | (uint64_t)(uint32_t)x->dtype << 8 | (uint64_t)x->itemsize << 32;
        for (int i = 0; i < nd; i++) {
            w[7 + i] = x->sizes ? (uint64_t)x->sizes[i] : 0;
            w[7 + nd + i] = x->strides ? (uint64_t)x->strides[i] : 0;
        }
        n = 7 + 2 * nd;
        if (recent.held_sid) { // the held RETAIN of this storage travels with it
            stack = false;
            sid = recent.held_sid;
            recent.held_sid = 0;
            w[n++] = recent.held_counts;
            flags = TPPROF_OBS_WITH_RETAIN;
        } else if (retained && retained == x->storage_id) {
            stack = false;
            sid = recent.retain_sid;
            if (!tpprof_cfg.full) recent.tensor_sites[sid % OBS_SITES] = sid;
        }
        if (x->flags & TP_OBS_TENSOR_ADOPTED_REF) flags |= TPPROF_OBS_ADOPTED; // the creation reference is its
        break;
    }
    case TP_OBS_TENSOR_FREED:
        if (!HAS(ev, tensor)) goto out;
        w[2] = ev->u.tensor.tensor_id;
        w[3] = ev->u.tensor.storage_id;
        n = 4;
        stack = tpprof_cfg.full;
        break;
    case TP_OBS_VERSION_BUMPED:
        if (!HAS(ev, version)) goto out;
        w[2] = ev->u.version.tensor_id;
        w[3] = ev->u.version.version;
        n = 4;
        stack = tpprof_cfg.full;
        break;
    case TP_OBS_ALLOCATOR: {
        if (!HAS(ev, allocator)) goto out;
        const tp_obs_allocator_event *a = &ev->u.allocator;
        w[2] = (uint64_t)(a->action & 0xff) | (uint64_t)(uint16_t)a->device_type << 8 |
               (uint64_t)(uint16_t)a->device_index << 24;
        w[3] = a->segment;
        w[4] = a->segment_size;
        w[5] = a->block;
        w[6] = a->block_size;
        w[7] = a->requested;
        w[8] = a->stream;
        put_name(&w[9], a->allocator);
        n = 12;
        break;
    }
    default: // a kind from a newer runtime: ignored, as the ABI asks
        goto out;
    }
    if (!t) goto out;
    // An event of a runtime call that is creating a struct it allocated
    // here: that allocation's stack is this call's (aggregate mode; full
    // mode captures every event's own).
    uint64_t object = stack && !tpprof_cfg.full ? event_object(ev) : 0;
    if (object && (sid = tpprof_recent_sid(object)) != 0) {
        stack = false;
        if (ev->kind == TP_OBS_STORAGE_REFCOUNT && refop == TP_OBS_REFOP_RETAIN) {
            // The new tensor's reference: held for its TENSOR_CREATED.
            recent.held_storage = w[2];
            recent.held_counts = w[3];
            recent.held_sid = sid;
            goto out;
        }
    }
    if (stack) sid = tpprof_capture(tpprof_cfg.depth);
    if (ev->kind == TP_OBS_STORAGE_REFCOUNT && refop == TP_OBS_REFOP_RETAIN && sid) {
        if (recent.tensor_sites[sid % OBS_SITES] == sid) { // hold it for its tensor
            recent.held_storage = w[2];
            recent.held_counts = w[3];
            recent.held_sid = sid;
            goto out;
        }
        recent.retain_storage = w[2];
        recent.retain_sid = sid;
    }
    if (!no_room) obs_commit(t, w, (int)ev->kind, refop, flags, sid, n);
out:
    tpprof_guard = 0;
}

static const tp_observer observer = {
    .abi_version = TP_OBSERVER_ABI_VERSION,
    .struct_size = sizeof observer,
    .user = NULL,
    .on_event = on_event,
};

// ---------------------------------------------------------------------------
// The provider (exported; see tpprof.map). Called by the runtime's
// constructor, possibly before ours: it only reads the environment.

TPPROF_EXPORT const tp_observer *tp_observer_provide(uint32_t runtime_abi);

const tp_observer *tp_observer_provide(uint32_t runtime_abi) {
    if (runtime_abi != TP_OBSERVER_ABI_VERSION) return NULL;
    const char *v = getenv("TPPROF_TENSORS");
    if (v && strcmp(v, "0") == 0) return NULL;
    atomic_store(&tpprof_obs_attached, 1);
    return &observer;
}
