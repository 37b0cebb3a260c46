// observe.c: tpprof's observer of the tensor runtime. THE HOT PATH, like hooks.c.
//
// libtensorplay looks up `tp_observer_provide` with dlsym(RTLD_DEFAULT) from
// its constructor (or the program's, when linked statically) and attaches
// the observer returned. With a shared libtensorplay that happens BEFORE
// libtpprof's own constructors ran, so the observer is a static object and
// the callback records nothing until recording is active (events before the
// start are simply not seen). Each event is copied, with the calling
// thread's stack and an order tag (the observer stripe's ticket,
// tpprof_obs_tag), into that thread's
// ring, in order with the malloc records: the writer (writer/ledger.c) ties storages to
// the blocks that back them and keeps the reference ledger. Same rules as
// the malloc hooks: no lock, no syscall, no SQLite, no malloc; the only
// include from the runtime is its observer ABI header. This file must not
// interpret the events beyond copying them, except where the ABI's event
// order makes an unwind or a record redundant ("Stacks already known"
// below): then it skips the unwind, or sends two events as one record; and
// where a short-lived tensor needs no record at all ("Folded views":
// record/obsfold.c and obsfold.h): then it counts it.
//
// A small tensor op sends a dozen events, so the per-event cost is most of
// what tensor tracking costs (bench/tensor_overhead.sh): on_event only
// checks that recording is on and dispatches, each kind has a small handler
// of its own, and state is touched only by the events that need it.
#define _GNU_SOURCE
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "tensorplay/observer.h"
#include "base/base.h"
#include "record/format.h"
#include "record/order.h"
#include "record/rings.h"
#include "record/stacks.h"
#include "record/early.h"
#include "record/obsfold.h"

_Atomic int tpprof_obs_attached;

// ---------------------------------------------------------------------------
// Stacks already known, records folded.
//
// A stack capture is most of an event's cost, a record's order tag and
// ring slot most of the rest, and the ABI's event order makes some of both
// redundant. Per thread, in aggregate mode (full mode sends every event as
// its own record with its own stack and time, for the events table):
//  - An event naming a struct that the current runtime call allocated on
//    this thread (tp_obs_event.object) takes that allocation's stack, which
//    hooks.c keeps for the last few allocations (tpprof_recent_sid).
//  - The RETAIN of a new tensor's storage reference (object: the tensor) is
//    held back and sent inside that tensor's TENSOR_CREATED, which the ABI
//    promises next on this thread, flagged TPPROF_OBS_WITH_RETAIN, the
//    counts after the dims. Any other event first sends it on its own, so it
//    is never reordered with this thread's other observer events; if the
//    thread sends no other observer event before the recording ends, it is
//    lost.
//  - TENSOR_FREED is held back and sent inside the RELEASE of its storage
//    reference, which the ABI promises next on the same thread (after the
//    frees of the tensor's base or grad, hence a small stack of them, newest
//    match first like the writer's pairing in writer/ledger.c): one record, no
//    stack, flagged TPPROF_OBS_TENSOR_REF, the tensor id after the counts.
//    The writer pairs it with the tensor's reference and counts it under
//    that reference's stack (docs/schema-tensors.md).
//  - A runtime that takes the ABI's fused forms (on_tensor_retained,
//    on_tensor_released, on_tensor_new) makes those folds itself: one call,
//    one record, nothing held (a runtime without them gets the above).
//  - A storage's creation and its data release carry tpprof_ticks(), taken
//    here (TPPROF_OBS_TICKS, the last payload word): the writer's merge time
//    would round DataPtr lifetimes of microseconds to milliseconds. Only for
//    the storages whose lifetimes are timed, though ("Timed lifetimes").
//  - A RELEASE that leaves strong 0 carries the DATA_RELEASED the ABI
//    promises next (flag TPPROF_OBS_DATA_RELEASED), which is then not sent;
//    if it leaves weak 1 (no weak holder), also the FREED that comes once the
//    data's deleter has run (TPPROF_OBS_FREED).

__thread struct obs_recent tpprof_obs_recent TPPROF_TLS;

// ---------------------------------------------------------------------------
// Timed lifetimes.
//
// A DataPtr lifetime (storage_lifetimes) takes a tick at the storage's
// creation and another at its data's release. A tick is ~7-20 ns on these
// virtual machines, and a small tensor op makes and drops a storage: the two
// were a third of what tensor tracking added to one (bench/tensor_overhead).
// So every storage of TPPROF_BIG_BYTES or more is timed, and so are the
// first 64 a thread makes of each allocator (one used for a few storages,
// a loader's mapped file, say, is timed throughout); of the rest 1 in 8,
// picked by a hash of the id (not by its low bits: a loop that makes 8
// storages an iteration would time the same one of them each time).
// TPPROF_LIFETIMES=all times them all, full mode's records carry exact times
// anyway. A storage not timed is noted here, so that the release of its
// data on this thread skips the tick too; released on another thread, or
// noted over by a later one, it takes one, wasted, never wrong: the writer
// measures a lifetime only from a timed creation (docs/schema-tensors.md).
#define TIMED_PER_ALLOCATOR 64

// Whether this thread has made fewer than TIMED_PER_ALLOCATOR storages of
// allocator `name` (told apart by the pointer: the runtime's allocators
// keep theirs) among the last 4 allocators it used; counts this one.
static inline bool timed_by_allocator(const char *name) {
    for (int i = 0; i < 4; i++)
        if (tpprof_obs_recent.alloc_name[i] == name)
            return tpprof_obs_recent.alloc_made[i] < TIMED_PER_ALLOCATOR && ++tpprof_obs_recent.alloc_made[i];
    uint32_t i = tpprof_obs_recent.alloc_next++ & 3;
    tpprof_obs_recent.alloc_name[i] = name;
    tpprof_obs_recent.alloc_made[i] = 1;
    return true;
}

static inline bool storage_timed(const tp_obs_storage *s) {
    return s->nbytes >= TPPROF_BIG_BYTES || timed_by_allocator(s->allocator) ||
           (s->storage_id * 0x9E3779B97F4A7C15ULL) >> 61 == 0 || tpprof_cfg.lifetimes_all;
}

// ---------------------------------------------------------------------------
// Folded views: record/obsfold.c (what folding keeps exact, and the held
// records written out) and record/obsfold.h (what the fused callbacks
// below inline: holding a record, folding it).

// ---------------------------------------------------------------------------
// Recording.
//
// The fused callbacks' fast path (below) checks the ring with one compare,
// against t->obs_lim (obs_limit, obsfold.h).
//
// A record is written straight into the ring: obs_slot gives room for the
// longest record (NULL when the ring stays full: the event is lost, the
// holds still count), obs_commit numbers and publishes it. Anything else
// that emits (flush_retain, hold_freed) goes before obs_slot.

// The order tag is taken here, before the record's words are written: where
// it is a locked increment (the stripe contested) it waits for the stores
// before it to drain, and a dozen stores to ring lines the writer last read
// are each a cache miss.
static inline __attribute__((always_inline)) uint64_t *obs_slot(struct tpprof_thread *t) {
    if (!tpprof_ring_reserve(t, OBS_MAX_WORDS + 1)) {
        tpprof_obs_recent.lost = true; // (the writer misses a record: folding would no longer know its totals)
        return NULL;
    }
    uint64_t tag = tpprof_obs_tag(t);
    uint64_t *w = tpprof_ring_slot(t, OBS_MAX_WORDS + 1);
    obs_limit(t);
    w[0] = tpprof_hdr(tag, TPPROF_OP_OBS, 0);
    return w;
}

static inline void obs_commit(struct tpprof_thread *t, uint64_t *w, int kind, int refop, uint64_t flags, uint32_t sid,
                              int n, bool full) {
    w[0] |= (uint64_t)kind;
    w[1] = (uint64_t)n | (uint64_t)refop << 8 | flags | (uint64_t)sid << 32;
    if (full) w[n++] = tpprof_now_ns();
    tpprof_ring_commit(t, (uint64_t)n);
}

// The stack of an event: in aggregate mode the allocation of the struct it
// names (`object`), if any; else an unwind.
static inline uint32_t event_stack(uint64_t object, bool full) {
    uint32_t sid = object && !full ? tpprof_recent_sid(object) : 0;
    return sid ? sid : tpprof_capture(tpprof_cfg.depth);
}

// Sends the held RETAIN as its own record: something else came first.
__attribute__((noinline)) static void flush_retain(struct tpprof_thread *t) {
    uint32_t sid = tpprof_obs_recent.held_sid;
    tpprof_obs_recent.held_sid = 0;
    uint64_t *w = obs_slot(t);
    if (!w) return;
    w[2] = tpprof_obs_recent.held_storage;
    w[3] = tpprof_obs_recent.held_counts;
    obs_commit(t, w, TP_OBS_STORAGE_REFCOUNT, TP_OBS_REFOP_RETAIN, 0, sid, 4, false); // holds: aggregate mode
}

// Every event but the TENSOR_CREATED a held RETAIN waits for sends it
// first, and the held views before anything else. An event while another
// live thread owns the stripe takes it, with that thread's held views
// (obsorder.c), which go first then.
static inline void settle(struct tpprof_thread *t) {
    uintptr_t o = atomic_load_explicit(&tpprof_obs_owner, memory_order_relaxed);
    if (TPPROF_UNLIKELY(o != (uintptr_t)t && o > TPPROF_OBS_REVOKING)) tpprof_obs_take(t);
    if (TPPROF_UNLIKELY(atomic_load_explicit(&t->obs_nheld, memory_order_relaxed))) tpprof_obs_held_write(t);
    if (TPPROF_UNLIKELY(tpprof_obs_recent.held_sid)) flush_retain(t);
}

void tpprof_obs_flush_held(struct tpprof_thread *t) {
    if (!t || (!atomic_load_explicit(&t->obs_nheld, memory_order_relaxed) && !tpprof_obs_recent.held_sid)) return;
    if (tpprof_guard || !atomic_load_explicit(&tpprof_active, memory_order_relaxed)) return;
    tpprof_guard = 1;
    settle(t);
    tpprof_guard = 0;
}

// ---------------------------------------------------------------------------
// One handler a kind. Each gets the thread's ring (never NULL) and an event
// of the full current size.

// A storage's fields at w: id, data, nbytes, device and flags, then the
// allocator's name (3 words), unless it has none or it is the one this
// thread's last record with a name carried (*flags gets
// TPPROF_OBS_SAME_NAME): the writer keeps that per ring, and nearly every
// storage comes from the allocator of the one before. Allocator names are
// static (tensorplay/allocator.h), so the pointer tells them apart. The
// record must be sent: the writer follows what it says. Returns the words.
static inline __attribute__((always_inline)) int put_storage(uint64_t *w, const tp_obs_storage *s,
                                                             uint64_t *flags) {
    w[0] = s->storage_id;
    w[1] = s->data;
    w[2] = s->nbytes;
    w[3] = (uint64_t)(uint16_t)s->device_type | (uint64_t)(uint16_t)s->device_index << 16 |
           (uint64_t)(s->resizable != 0) << 32 | (uint64_t)(s->allocator != NULL) << 33;
    if (!s->allocator) return 4;
    if (TPPROF_LIKELY(s->allocator == tpprof_obs_recent.last_name)) {
        *flags |= TPPROF_OBS_SAME_NAME;
        return 4;
    }
    tpprof_obs_recent.last_name = s->allocator;
    put_name(&w[4], s->allocator);
    return 7;
}

static inline __attribute__((always_inline)) void storage_created(struct tpprof_thread *t, const tp_obs_storage *s, uint64_t object, bool full) {
    settle(t);
    if (!full) fold_storage_made(s->storage_id, s->nbytes);
    uint32_t sid = event_stack(object, full);
    uint64_t *w = obs_slot(t);
    if (!w) return;
    uint64_t flags = 0;
    int n = 2 + put_storage(&w[2], s, &flags);
    if (full) {
    } else if (storage_timed(s)) { // (full mode's records carry exact times anyway)
        w[n++] = tpprof_ticks();
        flags |= TPPROF_OBS_TICKS;
    } else {
        note_untimed(s->storage_id);
    }
    obs_commit(t, w, TP_OBS_STORAGE_CREATED, 0, flags, sid, n, full);
}

static void storage_data_swapped(struct tpprof_thread *t, const tp_obs_storage *s, uint64_t object, bool full) {
    settle(t);
    if (tpprof_obs_recent.made[s->storage_id & 63].id == s->storage_id)
        tpprof_obs_recent.made[s->storage_id & 63].id = 0;
    fold_rebase();
    uint32_t sid = event_stack(object, full);
    uint64_t *w = obs_slot(t);
    if (!w) return;
    w[2] = s->storage_id;
    w[3] = s->data;
    w[4] = s->nbytes;
    w[5] = s->old_data;
    obs_commit(t, w, TP_OBS_STORAGE_DATA_SWAPPED, 0, 0, sid, 6, full);
}

// DATA_RELEASED and FREED: no table names their stacks in aggregate mode
// (full mode's events do), and usually they travelled inside the RELEASE
// before them.
static inline __attribute__((always_inline)) void storage_gone(struct tpprof_thread *t, int kind, uint64_t id, uint64_t object, bool full) {
    if (kind == TP_OBS_STORAGE_DATA_RELEASED) {
        if (tpprof_obs_recent.data_released == id) {
            tpprof_obs_recent.data_released = 0;
            return;
        }
    } else if (tpprof_obs_recent.freed_storage == id) {
        tpprof_obs_recent.freed_storage = 0;
        return;
    }
    settle(t);
    uint32_t sid = full ? event_stack(object, full) : 0;
    uint64_t *w = obs_slot(t);
    if (!w) return;
    w[2] = id;
    int n = 3;
    uint64_t flags = 0;
    if (!full) fold_storage_gone(id);
    if (kind == TP_OBS_STORAGE_DATA_RELEASED && !full && !release_untimed(id)) {
        w[n++] = tpprof_ticks();
        flags = TPPROF_OBS_TICKS;
    }
    obs_commit(t, w, kind, 0, flags, sid, n, full);
}

// The tensor whose held TENSOR_FREED this RELEASE of `storage` completes
// (forgotten now), or 0.
static inline uint64_t take_freed(uint64_t storage) {
    for (uint32_t i = tpprof_obs_recent.nfreed; i-- > 0;)
        if (tpprof_obs_recent.freed[i].storage == storage) {
            uint64_t tensor = tpprof_obs_recent.freed[i].tensor;
            for (uint32_t j = i; j + 1 < tpprof_obs_recent.nfreed; j++)
                tpprof_obs_recent.freed[j] = tpprof_obs_recent.freed[j + 1];
            tpprof_obs_recent.nfreed--;
            return tensor;
        }
    return 0;
}

// A REFCOUNT record. tensor != 0: the release of that tensor's reference
// (no stack: it counts under the reference's). In aggregate mode a release
// to strong 0 carries the DATA_RELEASED the ABI promises next, and with weak
// 1 (no weak holder) the FREED after it; *gone says which (TPPROF_OBS_*).
// A REFCOUNT record's words from w[2] on and its flags (*flags); returns
// its length. (The general way and on_tensor_released's fast path.)
// (A packed form, the tensor's id in word 2 and its storage's as a 32-bit
// delta in word 1, one word less, made tensor tracking 2-3 points dearer,
// not cheaper, on bench/tensor_overhead: it went.)
static inline __attribute__((always_inline)) int refcount_words(uint64_t *w, uint64_t storage, int refop,
                                                                uint32_t strong, uint32_t weak, uint64_t tensor,
                                                                bool full, uint64_t *flags) {
    w[2] = storage;
    w[3] = (uint64_t)strong | (uint64_t)weak << 32;
    int n = 4;
    *flags = 0;
    if (tensor) {
        w[n++] = tensor;
        *flags = TPPROF_OBS_TENSOR_REF;
    }
    if (refop == TP_OBS_REFOP_RELEASE && strong == 0 && !full) {
        fold_storage_gone(storage);
        if (!release_untimed(storage)) {
            w[n++] = tpprof_ticks(); // the data's deleter runs now
            *flags |= TPPROF_OBS_TICKS;
        }
        *flags |= TPPROF_OBS_DATA_RELEASED | (weak == 1 ? TPPROF_OBS_FREED : 0);
    }
    return n;
}

static inline __attribute__((always_inline)) void refcount_record(struct tpprof_thread *t, uint64_t storage, int refop,
                                                                  uint32_t strong, uint32_t weak, uint64_t tensor,
                                                                  uint32_t sid, bool full, uint64_t *gone) {
    *gone = 0;
    uint64_t *w = obs_slot(t);
    if (!w) return;
    uint64_t flags;
    int n = refcount_words(w, storage, refop, strong, weak, tensor, full, &flags);
    *gone = flags & (TPPROF_OBS_DATA_RELEASED | TPPROF_OBS_FREED);
    obs_commit(t, w, TP_OBS_STORAGE_REFCOUNT, refop, flags, sid, n, full);
    if (tensor) tpprof_obs_recent.settled = true; // the writer's peak_end is set now (Folded views)
}

static inline __attribute__((always_inline)) void refcount(struct tpprof_thread *t, uint64_t storage, int refop, uint32_t strong, uint32_t weak,
                     uint64_t object, bool full) {
    settle(t);
    uint64_t tensor = refop == TP_OBS_REFOP_RELEASE && tpprof_obs_recent.nfreed && !full ? take_freed(storage) : 0;
    uint32_t sid = tensor ? 0 : event_stack(object, full); // a tensor's release counts under its reference's stack
    if (refop == TP_OBS_REFOP_RETAIN && object && sid && !full) {
        // A new tensor's reference: held for its TENSOR_CREATED.
        tpprof_obs_recent.held_sid = sid;
        tpprof_obs_recent.held_storage = storage;
        tpprof_obs_recent.held_counts = (uint64_t)strong | (uint64_t)weak << 32;
        return;
    }
    uint64_t gone;
    refcount_record(t, storage, refop, strong, weak, tensor, sid, full, &gone);
    // The events folded in are still to come from the runtime: skip them.
    if (gone & TPPROF_OBS_DATA_RELEASED) tpprof_obs_recent.data_released = storage;
    if (gone & TPPROF_OBS_FREED) tpprof_obs_recent.freed_storage = storage;
}

// A TENSOR_CREATED record; flags TPPROF_OBS_WITH_RETAIN: it carries its
// storage reference's RETAIN, with these counts.
static inline __attribute__((always_inline)) void tensor_record(struct tpprof_thread *t, const tp_obs_tensor *x,
                                                                uint32_t sid, uint64_t flags, uint64_t counts,
                                                                bool full) {
    uint64_t *w = obs_slot(t);
    if (!w) return;
    int n = tensor_words(w, x, counts, &flags);
    obs_commit(t, w, TP_OBS_TENSOR_CREATED, 0, flags, sid, n, full);
}

// A new storage and the tensor adopting it (on_tensor_new), in aggregate
// mode, as one STORAGE_CREATED record flagged TPPROF_OBS_WITH_TENSOR: the
// storage's words (put_storage: 4 or 7 from word 2), then the tensor's
// stack, then its TENSOR_CREATED's words from word 2 on (so the record less
// the 3 or 6 words before the stack reads as that record), then the ticks.
// Its words from w[2] on and its flags; returns its length. (The general
// way and on_tensor_new's fast path.)
static inline __attribute__((always_inline)) int tensor_new_words(uint64_t *w, const tp_obs_storage *s,
                                                                  const tp_obs_tensor *x, uint32_t tensor_sid,
                                                                  uint64_t *flags, bool timed) {
    *flags = TPPROF_OBS_WITH_TENSOR | (x->flags & TP_OBS_TENSOR_ADOPTED_REF ? TPPROF_OBS_ADOPTED : 0);
    int b = 2 + put_storage(&w[2], s, flags);
    w[b] = tensor_sid;
    int n = b + 1 + put_tensor(&w[b + 1], x);
    if (timed) {
        w[n++] = tpprof_ticks();
        *flags |= TPPROF_OBS_TICKS;
    } else {
        note_untimed(s->storage_id);
    }
    return n;
}

// A STORAGE_CREATED record on its own, in aggregate mode (its tensor held:
// on_tensor_new): its words from w[2] on and its flags; returns its length.
static inline __attribute__((always_inline)) int storage_words(uint64_t *w, const tp_obs_storage *s, uint64_t *flags,
                                                                bool timed) {
    *flags = 0;
    int n = 2 + put_storage(&w[2], s, flags);
    if (timed) {
        w[n++] = tpprof_ticks();
        *flags |= TPPROF_OBS_TICKS;
    } else {
        note_untimed(s->storage_id);
    }
    return n;
}

static inline __attribute__((always_inline)) void tensor_new(struct tpprof_thread *t, const tp_obs_storage *s,
                                                             uint64_t storage_object, const tp_obs_tensor *x,
                                                             uint64_t tensor_object, bool counted) {
    settle(t);
    if (!counted) fold_storage_made(s->storage_id, s->nbytes);
    uint32_t sid = event_stack(storage_object, false);
    uint32_t tensor_sid = event_stack(tensor_object, false);
    uint64_t *w = obs_slot(t);
    if (!w) return;
    uint64_t flags;
    int n = tensor_new_words(w, s, x, tensor_sid, &flags, storage_timed(s));
    obs_commit(t, w, TP_OBS_STORAGE_CREATED, 0, flags, sid, n, false);
}

static inline __attribute__((always_inline)) void tensor_created(struct tpprof_thread *t, const tp_obs_tensor *x, uint64_t object, bool full) {
    uint32_t sid = 0;
    uint64_t flags = 0, counts = 0;
    if (tpprof_obs_recent.held_sid) {
        if (tpprof_obs_recent.held_storage == x->storage_id) { // the held RETAIN travels with it
            sid = tpprof_obs_recent.held_sid;
            counts = tpprof_obs_recent.held_counts;
            flags = TPPROF_OBS_WITH_RETAIN;
            tpprof_obs_recent.held_sid = 0;
        } else {
            flush_retain(t);
        }
    }
    if (!sid) sid = event_stack(object, full);
    tensor_record(t, x, sid, flags, counts, full);
}

// Holds a TENSOR_FREED back for its RELEASE; a stack deeper than any release
// chain sends its oldest on its own (the writer pairs that one itself).
static inline __attribute__((always_inline)) void tensor_freed(struct tpprof_thread *t, uint64_t tensor, uint64_t storage, bool full) {
    settle(t);
    if (!full) {
        if (TPPROF_UNLIKELY(tpprof_obs_recent.nfreed == OBS_FREED)) {
            uint64_t *w = obs_slot(t);
            if (w) {
                w[2] = tpprof_obs_recent.freed[0].tensor;
                w[3] = tpprof_obs_recent.freed[0].storage;
                obs_commit(t, w, TP_OBS_TENSOR_FREED, 0, 0, 0, 4, full);
                tpprof_obs_recent.settled = true;
            }
            memmove(&tpprof_obs_recent.freed[0], &tpprof_obs_recent.freed[1],
                    (OBS_FREED - 1) * sizeof tpprof_obs_recent.freed[0]);
            tpprof_obs_recent.nfreed--;
        }
        tpprof_obs_recent.freed[tpprof_obs_recent.nfreed].tensor = tensor;
        tpprof_obs_recent.freed[tpprof_obs_recent.nfreed].storage = storage;
        tpprof_obs_recent.nfreed++;
        return;
    }
    uint32_t sid = event_stack(0, full);
    uint64_t *w = obs_slot(t);
    if (!w) return;
    w[2] = tensor;
    w[3] = storage;
    obs_commit(t, w, TP_OBS_TENSOR_FREED, 0, 0, sid, 4, full);
}

static void on_version_bumped(struct tpprof_thread *t, const tp_obs_event *ev) {
    settle(t);
    uint32_t sid = tpprof_cfg.full ? event_stack(ev->object, tpprof_cfg.full) : 0; // no table names it in aggregate mode
    uint64_t *w = obs_slot(t);
    if (!w) return;
    w[2] = ev->u.version.tensor_id;
    w[3] = ev->u.version.version;
    obs_commit(t, w, TP_OBS_VERSION_BUMPED, 0, 0, sid, 4, tpprof_cfg.full);
}

// A tensor handle taken or dropped (tp_tensor_retain, a release not the
// last): its own stack, always (the writer's handle ledger names it).
static void on_tensor_ref(struct tpprof_thread *t, const tp_obs_event *ev) {
    settle(t);
    uint32_t sid = tpprof_capture(tpprof_cfg.depth);
    uint64_t *w = obs_slot(t);
    if (!w) return;
    int op = (int)(ev->u.tensor_ref.op & 0xff);
    w[2] = ev->u.tensor_ref.tensor_id;
    w[3] = ev->u.tensor_ref.count;
    obs_commit(t, w, TP_OBS_TENSOR_REFCOUNT, op, 0, sid, 4, tpprof_cfg.full);
}

static void on_allocator(struct tpprof_thread *t, const tp_obs_event *ev) {
    settle(t);
    uint32_t sid = event_stack(ev->object, tpprof_cfg.full);
    uint64_t *w = obs_slot(t);
    if (!w) return;
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
    obs_commit(t, w, TP_OBS_ALLOCATOR, 0, 0, sid, 12, tpprof_cfg.full);
}

// Entering a callback: recording is on and this is not tpprof's own doing.
// Returns the thread's ring with the guard set (it keeps the hooks out while
// a record is half written: of libunwind's mallocs, and of a signal
// handler's on this thread), or NULL: nothing to do.
static inline struct tpprof_thread *enter(void) {
    if (tpprof_guard || !atomic_load_explicit(&tpprof_active, memory_order_relaxed)) return NULL;
    tpprof_guard = 1;
    struct tpprof_thread *t = tpprof_self; // rings.c's fast path, without the call
    if (TPPROF_UNLIKELY(!t) && !(t = tpprof_thread_get())) tpprof_guard = 0;
    return t;
}

// The autograd graph (observer ABI 3): rare next to the tensor events (one
// node an op, against a dozen tensor events), so plain records. A node's
// creation takes the stack of the node struct's allocation (its object) and
// carries its name (4 words: 31 characters), the ids of the nodes its
// inputs have, then those of its leaf inputs: GRAPH_MAX_NEXT of them, the
// rest in records flagged TPPROF_OBS_MORE_EDGES of GRAPH_MORE_NEXT each
// (every edge is kept: a cat of 40 inputs is one graph); the others need
// no stack: the writer names each by its node.
#define GRAPH_MAX_NEXT 16
#define GRAPH_MORE_NEXT (OBS_MAX_WORDS - 5) // words 2-3 and the full-mode time left out

// The ids of a node's edges from index `from`, `count` of them: node
// edges (next_ids) first, then leaf edges; into w, with their split.
static uint64_t put_edges(uint64_t *w, const tp_obs_node *x, uint32_t from, uint32_t count) {
    uint32_t nn = x->next_ids ? x->n_next : 0, k = 0, kl = 0;
    for (uint32_t i = from; i < from + count; i++) {
        if (i < nn) w[k++] = x->next_ids[i];
        else w[k + kl++] = x->leaf_ids[i - nn];
    }
    return k | (uint64_t)kl << 16;
}

static void on_graph_node(struct tpprof_thread *t, const tp_obs_event *ev, bool full) {
    settle(t);
    const tp_obs_node *x = &ev->u.node;
    uint32_t sid = ev->kind == TP_OBS_NODE_CREATED || full ? event_stack(ev->object, full) : 0;
    uint64_t *w = obs_slot(t);
    if (!w) return;
    w[2] = x->node_id;
    int n = 3;
    if (ev->kind == TP_OBS_NODE_CREATED) {
        w[3] = w[4] = w[5] = w[6] = 0;
        if (x->name) {
            char *d = (char *)&w[3];
            for (int i = 0; i < 31 && x->name[i]; i++) d[i] = x->name[i];
        }
        uint32_t all = (x->next_ids ? x->n_next : 0) + (x->leaf_ids ? x->n_leaves : 0);
        uint32_t first = all < GRAPH_MAX_NEXT ? all : GRAPH_MAX_NEXT;
        w[7] = put_edges(&w[8], x, 0, first);
        obs_commit(t, w, (int)ev->kind, 0, 0, sid, 8 + (int)first, full);
        for (uint32_t from = first; from < all; from += GRAPH_MORE_NEXT) {
            uint32_t count = all - from < GRAPH_MORE_NEXT ? all - from : GRAPH_MORE_NEXT;
            if (!(w = obs_slot(t))) return;
            w[2] = x->node_id;
            w[3] = put_edges(&w[4], x, from, count);
            obs_commit(t, w, (int)ev->kind, 0, TPPROF_OBS_MORE_EDGES, 0, 4 + (int)count, full);
        }
        return;
    } else if (ev->kind == TP_OBS_NODE_RAN) {
        w[n++] = x->flags;
    }
    obs_commit(t, w, (int)ev->kind, 0, 0, sid, n, full);
}

// GRAD_SET, as a TENSOR_SAVED record flagged TPPROF_OBS_GRAD (format.h).
static void on_graph_grad(struct tpprof_thread *t, const tp_obs_event *ev, bool full) {
    settle(t);
    uint32_t sid = full ? event_stack(0, full) : 0;
    uint64_t *w = obs_slot(t);
    if (!w) return;
    w[2] = ev->u.grad.tensor_id;
    w[3] = ev->u.grad.grad_id;
    w[4] = ev->u.grad.grad_storage_id;
    obs_commit(t, w, TP_OBS_TENSOR_SAVED, 0, TPPROF_OBS_GRAD, sid, 5, full);
}

static void on_graph_saved(struct tpprof_thread *t, const tp_obs_event *ev, bool full) {
    settle(t);
    uint32_t sid = full ? event_stack(0, full) : 0;
    uint64_t *w = obs_slot(t);
    if (!w) return;
    w[2] = ev->u.saved.node_id;
    w[3] = ev->u.saved.tensor_id;
    w[4] = ev->u.saved.storage_id;
    w[5] = ev->u.saved.slot;
    obs_commit(t, w, (int)ev->kind, 0, 0, sid, 6, full);
}

static void on_event(void *user, const tp_obs_event *ev) {
    (void)user;
    // The runtime sends the whole struct of its ABI version; a shorter one
    // is not an event we can read.
    if (TPPROF_UNLIKELY(ev->struct_size < sizeof *ev)) return;
    struct tpprof_thread *t = enter();
    if (!t) return;
    bool full = tpprof_cfg.full;
    switch (ev->kind) {
    case TP_OBS_STORAGE_CREATED: storage_created(t, &ev->u.storage, ev->object, full); break;
    case TP_OBS_STORAGE_REFCOUNT:
        refcount(t, ev->u.refcount.storage_id, (int)(ev->u.refcount.op & 0xff), ev->u.refcount.strong,
                 ev->u.refcount.weak, ev->object, full);
        break;
    case TP_OBS_STORAGE_DATA_RELEASED:
    case TP_OBS_STORAGE_FREED: storage_gone(t, (int)ev->kind, ev->u.storage.storage_id, ev->object, full); break;
    case TP_OBS_STORAGE_DATA_SWAPPED: storage_data_swapped(t, &ev->u.storage, ev->object, full); break;
    case TP_OBS_TENSOR_CREATED: tensor_created(t, &ev->u.tensor, ev->object, full); break;
    case TP_OBS_TENSOR_FREED: tensor_freed(t, ev->u.tensor.tensor_id, ev->u.tensor.storage_id, full); break;
    case TP_OBS_VERSION_BUMPED: on_version_bumped(t, ev); break;
    case TP_OBS_ALLOCATOR: on_allocator(t, ev); break;
    case TP_OBS_TENSOR_REFCOUNT: on_tensor_ref(t, ev); break;
    case TP_OBS_NODE_CREATED:
    case TP_OBS_NODE_RAN:
    case TP_OBS_NODE_FREED: on_graph_node(t, ev, full); break;
    case TP_OBS_TENSOR_SAVED:
    case TP_OBS_SAVED_RELEASED: on_graph_saved(t, ev, full); break;
    case TP_OBS_GRAD_SET: on_graph_grad(t, ev, full); break;
    default: break; // a kind from a newer runtime: ignored, as the ABI asks
    }
    tpprof_guard = 0;
}

// The ABI's direct forms of the frequent events: no event struct to build
// (runtime) or to dispatch on (here). Each has its handler inlined twice,
// for aggregate mode and for full mode, so the common one carries none of
// full mode's branches.
static void on_refcount(void *user, uint64_t storage_id, uint32_t op, uint32_t strong, uint32_t weak,
                        uint64_t object) {
    (void)user;
    struct tpprof_thread *t = enter();
    if (!t) return;
    if (TPPROF_LIKELY(!tpprof_cfg.full)) refcount(t, storage_id, (int)(op & 0xff), strong, weak, object, false);
    else refcount(t, storage_id, (int)(op & 0xff), strong, weak, object, true);
    tpprof_guard = 0;
}

static void on_tensor_freed(void *user, uint64_t tensor_id, uint64_t storage_id, uint64_t base_id) {
    (void)user, (void)base_id;
    struct tpprof_thread *t = enter();
    if (!t) return;
    if (TPPROF_LIKELY(!tpprof_cfg.full)) tensor_freed(t, tensor_id, storage_id, false);
    else tensor_freed(t, tensor_id, storage_id, true);
    tpprof_guard = 0;
}

static void on_tensor_created(void *user, const tp_obs_tensor *tensor, uint64_t object) {
    (void)user;
    struct tpprof_thread *t = enter();
    if (!t) return;
    if (TPPROF_LIKELY(!tpprof_cfg.full)) tensor_created(t, tensor, object, false);
    else tensor_created(t, tensor, object, true);
    tpprof_guard = 0;
}

static void on_storage(void *user, uint32_t kind, const tp_obs_storage *storage, uint64_t object) {
    (void)user;
    struct tpprof_thread *t = enter();
    if (!t) return;
    bool full = tpprof_cfg.full;
    switch (kind) {
    case TP_OBS_STORAGE_CREATED:
        if (TPPROF_LIKELY(!full)) storage_created(t, storage, object, false);
        else storage_created(t, storage, object, true);
        break;
    case TP_OBS_STORAGE_DATA_RELEASED:
    case TP_OBS_STORAGE_FREED:
        if (TPPROF_LIKELY(!full)) storage_gone(t, (int)kind, storage->storage_id, object, false);
        else storage_gone(t, (int)kind, storage->storage_id, object, true);
        break;
    case TP_OBS_STORAGE_DATA_SWAPPED: storage_data_swapped(t, storage, object, full); break;
    default: break;
    }
    tpprof_guard = 0;
}

// The fused forms: one call for the RETAIN and TENSOR_CREATED of a view,
// one for a tensor's TENSOR_FREED and its RELEASE (and the DATA_RELEASED and
// FREED that implies), one for a new storage and the tensor adopting it.
// They write the records the held events above are folded into, with
// nothing held (a new storage and its tensor: one record, tensor_new). Full
// mode keeps every event as its own record with its own stack and time, so
// it does not ask for them (tp_observer_provide); should a runtime call them
// anyway, they are split.
//
// These three are nearly every event of a tensor program, so each has a
// fast path that makes no call: aggregate mode's observer, no RETAIN held, room
// in the ring before its next quarter (obs_limit), the observer stripe this
// thread's or shared by all (tpprof_obs_tag), and the stacks among the
// hooks' last allocations. When any of that fails, the general way
// (*_general) writes the same record.

// The three keep no frame pointer (GCC; 21 instructions an iteration of
// bench/tensor_overhead): the fast path calls nothing, so no stack is
// walked through its frame, and the general way is a tail call, made once
// the frame is gone.
#if defined(__GNUC__) && !defined(__clang__)
#define TPPROF_NO_FRAME __attribute__((optimize("omit-frame-pointer")))
#else
#define TPPROF_NO_FRAME
#endif

// The fast path's slot: NULL when the general way must be taken (nothing
// done yet then). The caller has set the guard.
static inline __attribute__((always_inline)) uint64_t *obs_slot_fast(struct tpprof_thread *t, int kind,
                                                                     uint64_t *tailp) {
    uint64_t tail = atomic_load_explicit(&t->tail, memory_order_relaxed);
    *tailp = tail;
    if (TPPROF_UNLIKELY(tail > t->obs_lim)) return NULL; // (obs_limit)
    uint64_t ticket;
    if (TPPROF_UNLIKELY(!tpprof_obs_ticket(t, &ticket))) return NULL; // (the stripe's other states)
    uint64_t *w = &t->ring[tail & t->mask];
    w[0] = tpprof_hdr(tpprof_order_tag_of(ticket, TPPROF_OBS_STRIPE, false), TPPROF_OP_OBS, kind);
    return w;
}

// Publishes a fast-path record (tail: as obs_slot_fast found it, the guard
// keeps it so) and clears the guard. It starts no quarter of the ring
// (obs_limit): the writer needs no waking.
static inline __attribute__((always_inline)) void obs_done_fast(struct tpprof_thread *t, uint64_t *w, uint64_t tail,
                                                                 int refop, uint64_t flags, uint32_t sid, int n) {
    w[1] = (uint64_t)n | (uint64_t)refop << 8 | flags | (uint64_t)sid << 32;
    tpprof_prefetch_write(&t->ring[(tail + (uint64_t)n + 64) & t->mask]);
    atomic_store_explicit(&t->tail, tail + (uint64_t)n, memory_order_release);
    tpprof_guard = 0;
}

// Whether a fused callback may take its fast path: recording is on, this is
// not tpprof's own doing, and the thread has a ring, nothing held. (Full
// mode's observer sends its fused forms straight to the general way:
// observer_full.) Sets the guard when it returns a thread (NULL: the guard
// is as it was and the general way decides).
static inline __attribute__((always_inline)) struct tpprof_thread *enter_fast(void) {
    struct tpprof_thread *t = tpprof_self;
    if (TPPROF_UNLIKELY(!t || tpprof_guard || tpprof_obs_recent.held_sid) ||
        !atomic_load_explicit(&tpprof_active, memory_order_relaxed))
        return NULL;
    tpprof_guard = 1;
    return t;
}

// The general ways take the callbacks' own arguments: the fast path's
// fallback is then a jump with every register where it came, and full
// mode's observer names them directly (observer_full).
__attribute__((noinline)) static void retained_general(void *user, const tp_obs_tensor *tensor, uint32_t strong,
                                                       uint32_t weak, uint64_t object) {
    (void)user;
    struct tpprof_thread *t = enter();
    if (!t) return;
    if (TPPROF_LIKELY(!tpprof_cfg.full)) {
        settle(t);
        tensor_record(t, tensor, event_stack(object, false), TPPROF_OBS_WITH_RETAIN,
                      (uint64_t)strong | (uint64_t)weak << 32, false);
    } else {
        refcount(t, tensor->storage_id, TP_OBS_REFOP_RETAIN, strong, weak, object, true);
        tensor_created(t, tensor, object, true);
    }
    tpprof_guard = 0;
}

TPPROF_NO_FRAME static void on_tensor_retained(void *user, const tp_obs_tensor *tensor, uint32_t strong,
                                               uint32_t weak, uint64_t object) {
    (void)user;
    struct tpprof_thread *t = enter_fast();
    if (TPPROF_LIKELY(t)) {
        uint32_t sid = object ? tpprof_recent_sid(object) : 0;
        uint64_t counts = (uint64_t)strong | (uint64_t)weak << 32;
        if (sid && hold(t, tensor, sid, TPPROF_OBS_WITH_RETAIN, counts)) {
            tpprof_guard = 0;
            return;
        }
        uint64_t tail; // (with views held, the general way writes them first)
        uint64_t *w = sid && !atomic_load_explicit(&t->obs_nheld, memory_order_relaxed)
                          ? obs_slot_fast(t, TP_OBS_TENSOR_CREATED, &tail)
                          : NULL;
        if (TPPROF_LIKELY(w)) {
            uint64_t flags = TPPROF_OBS_WITH_RETAIN;
            int n = tensor_words(w, tensor, counts, &flags);
            obs_done_fast(t, w, tail, 0, flags, sid, n);
            return;
        }
        tpprof_guard = 0;
    }
    retained_general(user, tensor, strong, weak, object);
}

__attribute__((noinline)) static void released_general(void *user, uint64_t tensor_id, uint64_t storage_id,
                                                       uint64_t base_id, uint32_t strong, uint32_t weak,
                                                       uint32_t flags) {
    (void)user, (void)base_id;
    struct tpprof_thread *t = enter();
    if (!t) return;
    uint64_t gone;
    if (TPPROF_LIKELY(!tpprof_cfg.full)) {
        settle(t);
        // What the runtime implies (flags) is what the record says by its
        // counts: strong 0 releases the data, and with weak 1 the struct.
        refcount_record(t, storage_id, TP_OBS_REFOP_RELEASE, strong, weak, tensor_id, 0, false, &gone);
    } else {
        tensor_freed(t, tensor_id, storage_id, true);
        refcount_record(t, storage_id, TP_OBS_REFOP_RELEASE, strong, weak, 0, event_stack(0, true), true, &gone);
        if (flags & TP_OBS_RELEASED_DATA) storage_gone(t, TP_OBS_STORAGE_DATA_RELEASED, storage_id, 0, true);
        if (flags & TP_OBS_RELEASED_FREED) storage_gone(t, TP_OBS_STORAGE_FREED, storage_id, 0, true);
    }
    tpprof_guard = 0;
}

TPPROF_NO_FRAME static void on_tensor_released(void *user, uint64_t tensor_id, uint64_t storage_id, uint64_t base_id,
                                               uint32_t strong, uint32_t weak, uint32_t flags) {
    struct tpprof_thread *t = enter_fast();
    if (TPPROF_LIKELY(t)) {
        uint32_t sid = 0;
        int folded = atomic_load_explicit(&t->obs_nheld, memory_order_relaxed)
                         ? fold(t, tensor_id, storage_id, strong, weak, &sid)
                         : 0;
        if (TPPROF_LIKELY(folded == 1)) {
            tpprof_guard = 0;
            return;
        }
        uint64_t tail;
        uint64_t *w = folded >= 0 ? obs_slot_fast(t, TP_OBS_STORAGE_REFCOUNT, &tail) : NULL;
        if (TPPROF_LIKELY(w)) { // refcount_record's record, for a tensor's reference
            uint64_t f;
            int n = refcount_words(w, storage_id, TP_OBS_REFOP_RELEASE, strong, weak, folded ? 0 : tensor_id, false, &f);
            if (!folded) tpprof_obs_recent.settled = true; // (refcount_record)
            obs_done_fast(t, w, tail, TP_OBS_REFOP_RELEASE, f, sid, n); // no stack: its reference's (or folded: the tensor's)
            return;
        }
        if (folded == 2) { // (the tensor is gone from the held ones: its release is the storage's)
            uint64_t gone;
            settle(t);
            refcount_record(t, storage_id, TP_OBS_REFOP_RELEASE, strong, weak, 0, sid, false, &gone);
            tpprof_guard = 0;
            return;
        }
        tpprof_guard = 0;
    }
    released_general(user, tensor_id, storage_id, base_id, strong, weak, flags);
}

// counted: the fast path has counted the storage in live already.
static inline __attribute__((always_inline)) void new_general_as(const tp_obs_storage *storage,
                                                                 uint64_t storage_object,
                                                                 const tp_obs_tensor *tensor, uint64_t tensor_object,
                                                                 bool counted) {
    struct tpprof_thread *t = enter();
    if (!t) return;
    if (TPPROF_LIKELY(!tpprof_cfg.full)) {
        tensor_new(t, storage, storage_object, tensor, tensor_object, counted);
    } else {
        storage_created(t, storage, storage_object, true);
        tensor_created(t, tensor, tensor_object, true);
    }
    tpprof_guard = 0;
}

__attribute__((noinline)) static void new_general(void *user, const tp_obs_storage *storage,
                                                  uint64_t storage_object, const tp_obs_tensor *tensor,
                                                  uint64_t tensor_object) {
    (void)user;
    new_general_as(storage, storage_object, tensor, tensor_object, false);
}

__attribute__((noinline)) static void new_general_counted(const tp_obs_storage *storage, uint64_t storage_object,
                                                          const tp_obs_tensor *tensor, uint64_t tensor_object) {
    new_general_as(storage, storage_object, tensor, tensor_object, true);
}

TPPROF_NO_FRAME static void on_tensor_new(void *user, const tp_obs_storage *storage, uint64_t storage_object,
                                          const tp_obs_tensor *tensor, uint64_t tensor_object) {
    (void)user;
    struct tpprof_thread *t = enter_fast();
    if (TPPROF_LIKELY(t)) {
        // A storage that may move the peak: the held views go first (the general way).
        bool moves = fold_storage_made(storage->storage_id, storage->nbytes);
        uint32_t sid = storage_object ? tpprof_recent_sid(storage_object) : 0;
        uint32_t tensor_sid = tensor_object ? tpprof_recent_sid(tensor_object) : 0;
        bool adopted = tensor->flags & TP_OBS_TENSOR_ADOPTED_REF, timed = storage_timed(storage);
        // Not timed, the storage and its tensor may be held together (before
        // any ticket is taken: a record gets one only when written).
        if (!timed && adopted && sid && tensor_sid && hold_new(t, storage, sid, tensor, tensor_sid)) {
            note_untimed(storage->storage_id);
            tpprof_guard = 0;
            return;
        }
        uint64_t tail;
        uint64_t *w = sid && tensor_sid && !(moves && atomic_load_explicit(&t->obs_nheld, memory_order_relaxed))
                          ? obs_slot_fast(t, TP_OBS_STORAGE_CREATED, &tail)
                          : NULL;
        if (TPPROF_LIKELY(w)) {
            uint64_t flags;
            bool held = adopted && hold(t, tensor, tensor_sid, 0, 0);
            int n = held ? storage_words(w, storage, &flags, timed)
                         : tensor_new_words(w, storage, tensor, tensor_sid, &flags, timed);
            obs_done_fast(t, w, tail, 0, flags, sid, n);
            return;
        }
        tpprof_guard = 0;
        new_general_counted(storage, storage_object, tensor, tensor_object);
        return;
    }
    new_general(user, storage, storage_object, tensor, tensor_object);
}

// Aggregate mode's observer. Full mode's is the same struct cut short before
// the fused forms (tp_observer_provide): the runtime reads no member past
// struct_size, and should one call them anyway they take the general way.
static const tp_observer observer = {
    .abi_version = TP_OBSERVER_ABI_VERSION,
    .struct_size = sizeof observer,
    .user = NULL,
    .on_event = on_event,
    .on_refcount = on_refcount,
    .on_tensor_freed = on_tensor_freed,
    .on_tensor_created = on_tensor_created,
    .on_storage = on_storage,
    .on_tensor_retained = on_tensor_retained,
    .on_tensor_released = on_tensor_released,
    .on_tensor_new = on_tensor_new,
};

// Full mode or not, decided once from TPPROF_MODE by whichever asks first:
// the runtime's constructor asking for an observer (tp_observer_provide,
// possibly before tpprof's constructor) or tpprof's (tpprof_start). So the
// observer handed out and the mode the writer reads records in agree: the
// aggregate observer's fused callbacks write aggregate mode's records
// without asking.
bool tpprof_mode_full(void) {
    static _Atomic int decided; // 0 not yet, 1 aggregate, 2 full
    int m = atomic_load(&decided);
    if (!m) {
        const char *mode = getenv("TPPROF_MODE");
        int want = mode && strcmp(mode, "full") == 0 ? 2 : 1;
        if (atomic_compare_exchange_strong(&decided, &m, want)) m = want; // (else m: the first one's)
    }
    return m == 2;
}

static tp_observer observer_full;

// ---------------------------------------------------------------------------
// The provider (exported; see tpprof.map). Called by the runtime's
// constructor, possibly before ours: it only reads the environment.

TPPROF_EXPORT const tp_observer *tp_observer_provide(uint32_t runtime_abi);

// A runtime of version 2 (no graph events; otherwise the same events) gets
// the same callbacks under its own version number: it attaches only that.
static tp_observer observer_v2;

const tp_observer *tp_observer_provide(uint32_t runtime_abi) {
    if (runtime_abi < 2 || runtime_abi > TP_OBSERVER_ABI_VERSION) return NULL;
    const char *v = getenv("TPPROF_TENSORS");
    if (v && strcmp(v, "0") == 0) return NULL;
    atomic_store(&tpprof_obs_attached, 1);
    if (!tpprof_mode_full()) {
        if (runtime_abi == TP_OBSERVER_ABI_VERSION) return &observer;
        observer_v2 = observer;
        observer_v2.abi_version = runtime_abi;
        return &observer_v2;
    }
    observer_full = observer;
    observer_full.abi_version = runtime_abi;
    observer_full.struct_size = (uint32_t)offsetof(tp_observer, on_tensor_retained);
    observer_full.on_tensor_retained = retained_general; // (should a runtime call them past struct_size)
    observer_full.on_tensor_released = released_general;
    observer_full.on_tensor_new = new_general;
    return &observer_full;
}
