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
// where a short-lived tensor needs no record at all ("Folded views"): then
// it counts it.
//
// A small tensor op sends a dozen events, so the per-event cost is most of
// what tensor tracking costs (bench/tensor_overhead.sh): on_event only
// checks that recording is on and dispatches, each kind has a small handler
// of its own, and state is touched only by the events that need it.
#define _GNU_SOURCE
#include <sched.h>
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

_Atomic int tpprof_obs_attached;

// Longest record: a new storage with its tensor of 8 dims (16 + 2 * 8: see
// tensor_new); ndim above this is cut (the runtime's TP_MAX_DIMS is 8).
#define OBS_MAX_DIMS 8
#define OBS_MAX_WORDS 32

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

#define OBS_FREED 16

struct obs_recent {
    uint32_t held_sid;       // != 0: a RETAIN held for its TENSOR_CREATED...
    uint64_t held_storage;   // ...of this storage...
    uint64_t held_counts;    // ...with these counts
    uint32_t nfreed;
    struct { uint64_t tensor, storage; } freed[OBS_FREED]; // TENSOR_FREED held for their RELEASE
    uint64_t data_released;  // sent inside a RELEASE: this storage's DATA_RELEASED
    uint64_t freed_storage;  // sent inside a RELEASE: this storage's FREED (the data's
                             // deleter runs in between and may send events)
    uint64_t untimed[16];    // storages made here whose lifetime is not timed (by id's low bits)
    const char *last_name;     // the allocator name the last STORAGE_CREATED record with one carried
    const char *alloc_name[4]; // the allocators of the storages made here lately...
    uint32_t alloc_made[4];    // ...and how many each made (timed_by_allocator)
    uint32_t alloc_next;
    // Folded views (below): this thread's storage bytes as its records say...
    int64_t live, high;        // ...now, and at most since the last rebase
    struct { uint64_t id, nbytes; } made[64]; // storages it made, whose release lowers live (by id's low bits)
    bool settled;              // a tensor's free was sent since the last potential peak move
    bool owner_seen;           // it owns the observer stripe, and live was rebased when it found so
    bool lost;                 // a record could not be written: nothing is folded any more
    const char *held_name;     // the allocator name hold_new put last...
    uint64_t held_name_words[3]; // ...as its words
    uint32_t fold_alloc_last;  // the fold_alloc slot used last
};
static __thread struct obs_recent recent TPPROF_TLS;

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
        if (recent.alloc_name[i] == name) return recent.alloc_made[i] < TIMED_PER_ALLOCATOR && ++recent.alloc_made[i];
    uint32_t i = recent.alloc_next++ & 3;
    recent.alloc_name[i] = name;
    recent.alloc_made[i] = 1;
    return true;
}

static inline bool storage_timed(const tp_obs_storage *s) {
    return s->nbytes >= TPPROF_BIG_BYTES || timed_by_allocator(s->allocator) ||
           (s->storage_id * 0x9E3779B97F4A7C15ULL) >> 61 == 0 || tpprof_cfg.lifetimes_all;
}

static inline void note_untimed(uint64_t id) { recent.untimed[id & 15] = id; }

// Whether the release of storage id's data needs no tick (forgotten then).
static inline bool release_untimed(uint64_t id) {
    uint64_t *e = &recent.untimed[id & 15];
    if (*e != id) return false;
    *e = 0;
    return true;
}

// ---------------------------------------------------------------------------
// Folded views.
//
// A view made and freed while nothing needs to see it on its own (the
// narrow() a small op takes and drops) reaches the recording only through
// two counts: a retain and a release at its creation stack in
// refcount_sites. Such a view's two records (its TENSOR_CREATED with the
// RETAIN, its TENSOR_FREED with the RELEASE) were a third of the records of
// a small tensor op, and each costs the program its ring words and the
// writer its merge and ledger work (bench/tensor_overhead.sh). So in
// aggregate mode the fused on_tensor_retained does not write a view's
// record at once: it keeps it in the thread struct (t->obs_held, at most
// TPPROF_OBS_HELD); if the view's free comes first, leaving its storage
// alive, the two are folded into t->fold_count[its stack], which the writer
// adds to refcount_sites at the end (ledger.c). Anything else about a held
// view, or its storage, writes it first (flush_held), in order, so the
// writer sees what it saw before.
//
// What a fold must not change:
//  - The peak. A view is in the tensors table when it is alive at the
//    storage peak's last moment (writer/state.h alive_at_peak): created
//    before peak_end, the first tensor free or data release after the peak
//    moved, and freed after it. So a view is held only when the writer's
//    peak_end is set already (`settled`: a tensor's free was written since
//    the last storage event that may have moved the peak), and every held
//    view is written before such an event (a storage made that takes live
//    above high, a data swap). A view held and folded then was made after
//    peak_end and is not in the peak, and its free would not have set
//    peak_end.
//  - Other threads. Only while this thread owns the observer stripe
//    (record/order.h) does it know every storage event: nothing is held
//    otherwise. A thread that takes the stripe away (obsorder.c) takes the
//    held views too and writes them before its own records: a view passed
//    to another thread is recorded in full.
//  - The storage's counts. Records carry a storage's counts after the
//    event; a view's record held while another record of its storage is
//    written would bring back counts from before it: any record naming a
//    held view's storage writes the held views first, and a view is folded
//    only if no newer held view is on its storage.
//  - Views whose free releases the storage's data (strong 0): written.
//
// Whether a storage event may move the peak: from the moment the thread
// found it owns the stripe (a rebase: then the writer's peak is at least
// its storage total), only this thread's records change that total; live
// follows them (+nbytes when a storage is made, -nbytes when the data of
// one made here, and still in `made`, is released: one not found is never
// taken off, which only overstates live) and the peak can move only when
// live exceeds high, its maximum since the rebase.

static inline bool fold_on(void) { return !recent.lost; }

// A storage of `nbytes` made: whether it may move the peak (then nothing
// is settled any more: the caller has written the held views first).
static inline bool fold_storage_made(uint64_t id, uint64_t nbytes) {
    recent.live += (int64_t)nbytes;
    recent.made[id & 63].id = id;
    recent.made[id & 63].nbytes = nbytes;
    if (TPPROF_LIKELY(recent.live <= recent.high)) return false;
    recent.high = recent.live;
    recent.settled = false;
    return true;
}

// Storage id's data released, in a record written.
static inline void fold_storage_gone(uint64_t id) {
    if (recent.made[id & 63].id != id) return;
    recent.made[id & 63].id = 0;
    recent.live -= (int64_t)recent.made[id & 63].nbytes;
}

// The writer's total changes by what this thread cannot tell (a data swap,
// or it just found it owns the stripe): start again from here.
static inline void fold_rebase(void) {
    recent.high = recent.live;
    recent.settled = false;
}

// Opens the thread's observer window; whether it owns the stripe (its
// held views are then its own until the window closes).
static inline bool stripe_open(struct tpprof_thread *t) {
    atomic_store_explicit(&t->obs_window, 1, memory_order_relaxed);
    atomic_signal_fence(memory_order_seq_cst); // (obsorder.c: the revoker's membarrier does the CPU's part)
    return atomic_load_explicit(&tpprof_obs_owner, memory_order_relaxed) == (uintptr_t)t;
}

static inline void stripe_close(struct tpprof_thread *t) {
    atomic_store_explicit(&t->obs_window, 0, memory_order_release);
}

// ---------------------------------------------------------------------------
// Recording.
//
// The fused callbacks' fast path (below) checks the ring with one compare:
// up to t->obs_lim, a record of OBS_MAX_WORDS + 1 has room (by the head the
// thread last saw) and ends before the next quarter of the ring, so it
// neither wraps nor is the one that may have to wake the writer
// (tpprof_ring_commit). Set by the general way's every slot, which the
// first record of each quarter takes.
static inline void obs_limit(struct tpprof_thread *t) {
    uint64_t tail = atomic_load_explicit(&t->tail, memory_order_relaxed), words = t->mask + 1;
    uint64_t room = t->p_head + words - 2 * (OBS_MAX_WORDS + 1); // tail + 2 * 33 - p_head <= words
    uint64_t quarter = (tail | (words / 4 - 1)) + 1 - (OBS_MAX_WORDS + 2); // ends short of the next quarter
    t->obs_lim = room < quarter ? room : quarter;
}
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
        recent.lost = true; // (the writer misses a record: folding would no longer know its totals)
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
    uint32_t sid = recent.held_sid;
    recent.held_sid = 0;
    uint64_t *w = obs_slot(t);
    if (!w) return;
    w[2] = recent.held_storage;
    w[3] = recent.held_counts;
    obs_commit(t, w, TP_OBS_STORAGE_REFCOUNT, TP_OBS_REFOP_RETAIN, 0, sid, 4, false); // holds: aggregate mode
}

// Access to t's held views: true inside its open window, as the stripe's
// owner; false once it is not the owner and no thread is taking the stripe
// away (its held views are then its own: any revoker took them already).
static bool held_access(struct tpprof_thread *t) {
    if (stripe_open(t)) return true;
    stripe_close(t);
    while (atomic_load_explicit(&tpprof_obs_owner, memory_order_acquire) == TPPROF_OBS_REVOKING) sched_yield();
    return false;
}

// Writes the held views (Folded views), oldest first, each with a ticket
// taken now: before whatever the caller writes next. A thread taking the
// stripe away may have taken them (obsorder.c): then nothing is left here.
__attribute__((noinline)) static void flush_held(struct tpprof_thread *t) {
    while (atomic_load_explicit(&t->obs_nheld, memory_order_relaxed)) {
        bool room = tpprof_ring_reserve(t, OBS_MAX_WORDS + 1);
        bool mine = held_access(t);
        uint32_t n = atomic_load_explicit(&t->obs_nheld, memory_order_relaxed);
        if (!n || !room) {
            if (!room) { // lost, like any record that finds the ring full
                atomic_store_explicit(&t->obs_nheld, 0, memory_order_relaxed);
                recent.lost = true;
            }
            if (mine) stripe_close(t);
            return;
        }
        uint64_t ticket = 0;
        if (mine) { // tpprof_obs_ticket's owner way, inside this window
            _Atomic uint64_t *v = &tpprof_stripes[TPPROF_OBS_STRIPE].v;
            ticket = atomic_load_explicit(v, memory_order_relaxed);
            atomic_store_explicit(v, ticket + 1, memory_order_relaxed);
        }
        uint64_t words = t->obs_held[0][1] & 0xff, kind = t->obs_held[0][0] & 0xff;
        uint64_t *w = tpprof_ring_slot(t, OBS_MAX_WORDS + 1);
        memcpy(&w[1], &t->obs_held[0][1], (words - 1) * sizeof *w);
        memmove(t->obs_held[0], t->obs_held[1], (n - 1) * sizeof t->obs_held[0]);
        atomic_store_explicit(&t->obs_nheld, n - 1, memory_order_relaxed);
        uint64_t tag;
        if (mine) {
            stripe_close(t);
            tag = tpprof_order_tag_of(ticket, TPPROF_OBS_STRIPE, false);
        } else {
            tag = tpprof_obs_tag(t);
        }
        w[0] = tpprof_hdr(tag, TPPROF_OP_OBS, (int)kind);
        obs_limit(t);
        tpprof_ring_commit(t, words);
        // A held storage carries its name in full, and the writer keeps it as
        // the ring's last: the next record that has one sends it again.
        if (kind == TP_OBS_STORAGE_CREATED) recent.last_name = NULL;
    }
}

// Every event but the TENSOR_CREATED a held RETAIN waits for sends it
// first, and the held views before anything else. An event while another
// live thread owns the stripe takes it, with that thread's held views
// (obsorder.c), which go first then.
static inline void settle(struct tpprof_thread *t) {
    uintptr_t o = atomic_load_explicit(&tpprof_obs_owner, memory_order_relaxed);
    if (TPPROF_UNLIKELY(o != (uintptr_t)t && o > TPPROF_OBS_REVOKING)) tpprof_obs_take(t);
    if (TPPROF_UNLIKELY(atomic_load_explicit(&t->obs_nheld, memory_order_relaxed))) flush_held(t);
    if (TPPROF_UNLIKELY(recent.held_sid)) flush_retain(t);
}

void tpprof_obs_flush_held(struct tpprof_thread *t) {
    if (!t || (!atomic_load_explicit(&t->obs_nheld, memory_order_relaxed) && !recent.held_sid)) return;
    if (tpprof_guard || !atomic_load_explicit(&tpprof_active, memory_order_relaxed)) return;
    tpprof_guard = 1;
    settle(t);
    tpprof_guard = 0;
}

// Up to 24 bytes of a name, NUL padded, into 3 words (all zero for NULL).
static inline void put_name(uint64_t *w, const char *name) {
    w[0] = w[1] = w[2] = 0;
    if (!name) return;
    char *d = (char *)w;
    for (int i = 0; i < 23 && name[i]; i++) d[i] = name[i];
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
    if (TPPROF_LIKELY(s->allocator == recent.last_name)) {
        *flags |= TPPROF_OBS_SAME_NAME;
        return 4;
    }
    recent.last_name = s->allocator;
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
    if (recent.made[s->storage_id & 63].id == s->storage_id) recent.made[s->storage_id & 63].id = 0;
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
        if (recent.data_released == id) {
            recent.data_released = 0;
            return;
        }
    } else if (recent.freed_storage == id) {
        recent.freed_storage = 0;
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
    for (uint32_t i = recent.nfreed; i-- > 0;)
        if (recent.freed[i].storage == storage) {
            uint64_t tensor = recent.freed[i].tensor;
            for (uint32_t j = i; j + 1 < recent.nfreed; j++) recent.freed[j] = recent.freed[j + 1];
            recent.nfreed--;
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
    if (tensor) recent.settled = true; // the writer's peak_end is set now (Folded views)
}

static inline __attribute__((always_inline)) void refcount(struct tpprof_thread *t, uint64_t storage, int refop, uint32_t strong, uint32_t weak,
                     uint64_t object, bool full) {
    settle(t);
    uint64_t tensor = refop == TP_OBS_REFOP_RELEASE && recent.nfreed && !full ? take_freed(storage) : 0;
    uint32_t sid = tensor ? 0 : event_stack(object, full); // a tensor's release counts under its reference's stack
    if (refop == TP_OBS_REFOP_RETAIN && object && sid && !full) {
        // A new tensor's reference: held for its TENSOR_CREATED.
        recent.held_sid = sid;
        recent.held_storage = storage;
        recent.held_counts = (uint64_t)strong | (uint64_t)weak << 32;
        return;
    }
    uint64_t gone;
    refcount_record(t, storage, refop, strong, weak, tensor, sid, full, &gone);
    // The events folded in are still to come from the runtime: skip them.
    if (gone & TPPROF_OBS_DATA_RELEASED) recent.data_released = storage;
    if (gone & TPPROF_OBS_FREED) recent.freed_storage = storage;
}

// A tensor's shape at w: ndim | dtype << 8 | itemsize << 32, then the
// sizes and the strides. Returns the words.
static inline __attribute__((always_inline)) int put_shape(uint64_t *w, const tp_obs_tensor *x) {
    int nd = (unsigned)x->ndim <= OBS_MAX_DIMS ? x->ndim : x->ndim < 0 ? 0 : OBS_MAX_DIMS;
    w[0] = (uint64_t)nd | (uint64_t)(uint32_t)x->dtype << 8 | (uint64_t)x->itemsize << 32;
    uint64_t *sizes = &w[1], *strides = &w[1 + nd];
    for (int i = 0; i < nd; i++) {
        sizes[i] = x->sizes ? (uint64_t)x->sizes[i] : 0;
        strides[i] = x->strides ? (uint64_t)x->strides[i] : 0;
    }
    return 1 + 2 * nd;
}

// A tensor's fields at w: id, storage id, base id, offset, then its shape.
// Returns the words.
static inline __attribute__((always_inline)) int put_tensor(uint64_t *w, const tp_obs_tensor *x) {
    w[0] = x->tensor_id;
    w[1] = x->storage_id;
    w[2] = x->base_id;
    w[3] = (uint64_t)x->storage_offset;
    return 4 + put_shape(&w[4], x);
}

// A TENSOR_CREATED record; flags TPPROF_OBS_WITH_RETAIN: it carries its
// storage reference's RETAIN, with these counts.
// A TENSOR_CREATED record's words from w[2] on; returns its length and
// adds to *flags. (The general way and on_tensor_retained's fast path.)
// (Packed like the others it cost more in instructions than it saved in
// ring words: bench/tensor_overhead +10.4% against +8.9% without.)
static inline __attribute__((always_inline)) int tensor_words(uint64_t *w, const tp_obs_tensor *x, uint64_t counts,
                                                              uint64_t *flags) {
    if (x->flags & TP_OBS_TENSOR_ADOPTED_REF) *flags |= TPPROF_OBS_ADOPTED;
    int n = 2 + put_tensor(&w[2], x);
    if (*flags & TPPROF_OBS_WITH_RETAIN) w[n++] = counts;
    return n;
}

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
    if (recent.held_sid) {
        if (recent.held_storage == x->storage_id) { // the held RETAIN travels with it
            sid = recent.held_sid;
            counts = recent.held_counts;
            flags = TPPROF_OBS_WITH_RETAIN;
            recent.held_sid = 0;
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
        if (TPPROF_UNLIKELY(recent.nfreed == OBS_FREED)) {
            uint64_t *w = obs_slot(t);
            if (w) {
                w[2] = recent.freed[0].tensor;
                w[3] = recent.freed[0].storage;
                obs_commit(t, w, TP_OBS_TENSOR_FREED, 0, 0, 0, 4, full);
                recent.settled = true;
            }
            memmove(&recent.freed[0], &recent.freed[1], (OBS_FREED - 1) * sizeof recent.freed[0]);
            recent.nfreed--;
        }
        recent.freed[recent.nfreed].tensor = tensor;
        recent.freed[recent.nfreed].storage = storage;
        recent.nfreed++;
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
    if (TPPROF_UNLIKELY(!t || tpprof_guard || recent.held_sid) ||
        !atomic_load_explicit(&tpprof_active, memory_order_relaxed))
        return NULL;
    tpprof_guard = 1;
    return t;
}

// A held record's word 0 (never sent: flush_held writes the header): its
// kind, and where its tensor's and its storage's ids are.
static inline uint64_t held_tag(int kind, int tensor_at, int storage_at) {
    return (uint64_t)kind | (uint64_t)tensor_at << 8 | (uint64_t)storage_at << 16;
}
static inline uint64_t held_tensor(const uint64_t *h) { return h[h[0] >> 8 & 0xff]; }
static inline uint64_t held_storage(const uint64_t *h) { return h[h[0] >> 16 & 0xff]; }

// Where a record may be held back (Folded views): the thread owns the
// stripe, found so before (rebased), the peak is settled, and there is
// room. Returns the slot, with the thread's window open (held_end closes
// it), or NULL: write the record. The caller's fast path: the guard set,
// aggregate mode.
static inline __attribute__((always_inline)) uint64_t *held_begin(struct tpprof_thread *t, uint32_t *n) {
    if (!fold_on()) return NULL;
    bool mine = stripe_open(t);
    *n = atomic_load_explicit(&t->obs_nheld, memory_order_relaxed);
    if (TPPROF_UNLIKELY(!mine || !recent.owner_seen) || !recent.settled || *n == TPPROF_OBS_HELD) {
        stripe_close(t);
        if (mine && !recent.owner_seen) fold_rebase(); // from here only this thread changes the totals
        recent.owner_seen = mine;
        return NULL;
    }
    return t->obs_held[*n];
}

static inline __attribute__((always_inline)) void held_end(struct tpprof_thread *t, uint32_t n) {
    atomic_store_explicit(&t->obs_nheld, n + 1, memory_order_relaxed);
    stripe_close(t);
}

// Holds a tensor's record: flags TPPROF_OBS_WITH_RETAIN (a view, with its
// RETAIN's counts) or 0 (a tensor adopting the storage just written).
static inline __attribute__((always_inline)) bool hold(struct tpprof_thread *t, const tp_obs_tensor *x, uint32_t sid,
                                                       uint64_t flags, uint64_t counts) {
    uint32_t n;
    uint64_t *h = (unsigned)x->ndim <= OBS_MAX_DIMS ? held_begin(t, &n) : NULL;
    if (!h) return false;
    int words = tensor_words(h, x, counts, &flags);
    h[0] = held_tag(TP_OBS_TENSOR_CREATED, 2, 3);
    h[1] = (uint64_t)words | flags | (uint64_t)sid << 32;
    held_end(t, n);
    return true;
}

// Holds a new storage not timed (its lifetime only counts) with the tensor
// adopting it: tensor_new_words' record, its allocator's name in full (a
// held record may be written after others that changed the ring's name).
static inline __attribute__((always_inline)) bool hold_new(struct tpprof_thread *t, const tp_obs_storage *s,
                                                           uint32_t sid, const tp_obs_tensor *x, uint32_t tensor_sid) {
    uint32_t n;
    uint64_t *h = (unsigned)x->ndim <= OBS_MAX_DIMS ? held_begin(t, &n) : NULL;
    if (!h) return false;
    h[2] = s->storage_id;
    h[3] = s->data;
    h[4] = s->nbytes;
    h[5] = (uint64_t)(uint16_t)s->device_type | (uint64_t)(uint16_t)s->device_index << 16 |
           (uint64_t)(s->resizable != 0) << 32 | (uint64_t)(s->allocator != NULL) << 33;
    int b = 6;
    if (s->allocator) {
        if (TPPROF_UNLIKELY(s->allocator != recent.held_name)) {
            put_name(recent.held_name_words, s->allocator);
            recent.held_name = s->allocator;
        }
        memcpy(&h[6], recent.held_name_words, sizeof recent.held_name_words);
        b = 9;
    }
    h[b] = tensor_sid;
    int words = b + 1 + put_tensor(&h[b + 1], x);
    h[0] = held_tag(TP_OBS_STORAGE_CREATED, b + 1, 2);
    h[1] = (uint64_t)words | TPPROF_OBS_WITH_TENSOR | TPPROF_OBS_ADOPTED | (uint64_t)sid << 32;
    held_end(t, n);
    return true;
}

// The fold_count slot of a key (depot id << 1 | a release only), or -1 when
// another key has it.
static inline int fold_slot(struct tpprof_thread *t, uint32_t key) {
    uint32_t k = (key * 0x9E3779B1u) >> (32 - 6);
    return t->fold_sid[k] == key || t->fold_sid[k] == 0 ? (int)k : -1;
}

// The fold_alloc slot of the allocator named at words (3), or -1.
static inline int fold_alloc_slot(struct tpprof_thread *t, const uint64_t *words) {
    uint64_t *last = t->fold_alloc_name[recent.fold_alloc_last & (TPPROF_FOLD_ALLOCATORS - 1)];
    if (TPPROF_LIKELY(last[0] == words[0] && last[1] == words[1] && last[2] == words[2] && words[0]))
        return (int)(recent.fold_alloc_last & (TPPROF_FOLD_ALLOCATORS - 1));
    for (int i = 0; i < TPPROF_FOLD_ALLOCATORS; i++) {
        uint64_t *a = t->fold_alloc_name[i];
        if (a[0] == words[0] && a[1] == words[1] && a[2] == words[2] && (t->fold_alloc_count[i] || words[0]))
            return (int)(recent.fold_alloc_last = (uint32_t)i);
        if (!t->fold_alloc_count[i] && !a[0]) {
            memcpy(a, words, 3 * sizeof *a);
            return (int)(recent.fold_alloc_last = (uint32_t)i);
        }
    }
    return -1;
}

// A tensor freed while records are held. 1: it was held and is folded: a
// view whose storage keeps data, or a tensor with its new storage, held
// together, freed with the storage's last reference (strong 0, weak 1:
// nothing names the storage any more); no newer held view is on its
// storage, and its counts have a slot. 2: it adopted its storage's
// creation reference, the storage written, and releases the storage's last
// strong reference: folded too, but its release is written as the
// storage's own, with the tensor's stack (*sid), which the writer pairs
// with the creation reference and counts there, as the tensor's. 0: it was
// not held, and nothing held is on its storage: its record may be written
// now. -1: the general way, which writes the held records first.
static inline __attribute__((always_inline)) int fold(struct tpprof_thread *t, uint64_t tensor, uint64_t storage,
                                                      uint32_t strong, uint32_t weak, uint32_t *sidp) {
    if (!stripe_open(t)) {
        stripe_close(t);
        return -1;
    }
    uint32_t n = atomic_load_explicit(&t->obs_nheld, memory_order_relaxed), i = n;
    bool newer = false; // a held record newer than it on its storage
    while (i-- > 0 && held_tensor(t->obs_held[i]) != tensor) newer |= held_storage(t->obs_held[i]) == storage;
    if (i == UINT32_MAX) {
        stripe_close(t);
        return newer ? -1 : 0;
    }
    const uint64_t *h = t->obs_held[i];
    bool with_storage = (h[0] & 0xff) == TP_OBS_STORAGE_CREATED, adopted = h[1] & TPPROF_OBS_ADOPTED;
    uint32_t sid = (uint32_t)(h[1] >> 32);
    int k = -1, a = 0;
    if (with_storage) {
        sid = (uint32_t)h[(h[0] >> 8 & 0xff) - 1]; // the tensor's stack, before its words
        static const uint64_t none[3];
        a = strong == 0 && weak == 1 ? fold_alloc_slot(t, h[5] >> 33 & 1 ? &h[6] : none) : -1;
        k = fold_slot(t, sid << 1 | 1);
    } else if (!adopted) {
        k = fold_slot(t, sid << 1);
    }
    if (newer || (strong == 0) != adopted || (with_storage ? a < 0 || k < 0 : !adopted && k < 0)) {
        stripe_close(t);
        return -1;
    }
    if (TPPROF_UNLIKELY(i + 1 < n)) // (nearly always the newest: tensors are freed newest first)
        memmove(t->obs_held[i], t->obs_held[i + 1], (n - 1 - i) * sizeof t->obs_held[0]);
    atomic_store_explicit(&t->obs_nheld, n - 1, memory_order_relaxed);
    stripe_close(t);
    if (with_storage) {
        fold_storage_gone(storage);
        release_untimed(storage);
        t->fold_alloc_count[a]++;
        t->fold_sid[k] = sid << 1 | 1;
        t->fold_count[k]++;
        return 1;
    }
    if (adopted) {
        *sidp = sid;
        return 2;
    }
    t->fold_sid[k] = sid << 1;
    t->fold_count[k]++;
    return 1;
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
            if (!folded) recent.settled = true; // (refcount_record)
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
