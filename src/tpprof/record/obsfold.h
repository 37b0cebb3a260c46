// obsfold.h: the runtime observer's per-thread state, and the folding of
// short-lived tensors as the fused callbacks inline it. THE HOT PATH.
//
// Internal to the observer: included by record/observe.c (the callbacks)
// and record/obsfold.c (folding: what it keeps exact, the held records
// written out) only. What both files need, and what the fused callbacks'
// fast paths take without a call (a record's words, holding a record,
// folding one), is here as static inline; everything else is in those two
// files. Same rules as the malloc hooks: no lock, no syscall, no SQLite,
// no malloc.
#ifndef TPPROF_RECORD_OBSFOLD_H
#define TPPROF_RECORD_OBSFOLD_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "tensorplay/observer.h"
#include "base/base.h"
#include "record/format.h"
#include "record/order.h"
#include "record/rings.h"

// Longest record: a new storage with its tensor of 8 dims (16 + 2 * 8: see
// tensor_new); ndim above this is cut (the runtime's TP_MAX_DIMS is 8).
#define OBS_MAX_DIMS 8
#define OBS_MAX_WORDS 32

// The fused callbacks' fast path (observe.c) checks the ring with one compare:
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

// The thread's observer state: what observe.c holds back ("Stacks already
// known", "Timed lifetimes") and what folding keeps (obsfold.c).
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
    // Folded views (obsfold.c): this thread's storage bytes as its records say...
    int64_t live, high;        // ...now, and at most since the last rebase
    struct { uint64_t id, nbytes; } made[64]; // storages it made, whose release lowers live (by id's low bits)
    bool settled;              // a tensor's free was sent since the last potential peak move
    bool owner_seen;           // it owns the observer stripe, and live was rebased when it found so
    bool lost;                 // a record could not be written: nothing is folded any more
    const char *held_name;     // the allocator name hold_new put last...
    uint64_t held_name_words[3]; // ...as its words
    uint32_t fold_alloc_last;  // the fold_alloc slot used last
};
TPPROF_HIDDEN extern __thread struct obs_recent tpprof_obs_recent TPPROF_TLS;

// The storages made here whose lifetime is not timed (observe.c, "Timed
// lifetimes"): their data's release on this thread takes no tick either.
static inline void note_untimed(uint64_t id) { tpprof_obs_recent.untimed[id & 15] = id; }

// Whether the release of storage id's data needs no tick (forgotten then).
static inline bool release_untimed(uint64_t id) {
    uint64_t *e = &tpprof_obs_recent.untimed[id & 15];
    if (*e != id) return false;
    *e = 0;
    return true;
}

// ---------------------------------------------------------------------------
// Folded views (obsfold.c): the thread's storage total, and its window on
// the observer stripe.

static inline bool fold_on(void) { return !tpprof_obs_recent.lost; }

// A storage of `nbytes` made: whether it may move the peak (then nothing
// is settled any more: the caller has written the held views first).
static inline bool fold_storage_made(uint64_t id, uint64_t nbytes) {
    tpprof_obs_recent.live += (int64_t)nbytes;
    tpprof_obs_recent.made[id & 63].id = id;
    tpprof_obs_recent.made[id & 63].nbytes = nbytes;
    if (TPPROF_LIKELY(tpprof_obs_recent.live <= tpprof_obs_recent.high)) return false;
    tpprof_obs_recent.high = tpprof_obs_recent.live;
    tpprof_obs_recent.settled = false;
    return true;
}

// Storage id's data released, in a record written.
static inline void fold_storage_gone(uint64_t id) {
    if (tpprof_obs_recent.made[id & 63].id != id) return;
    tpprof_obs_recent.made[id & 63].id = 0;
    tpprof_obs_recent.live -= (int64_t)tpprof_obs_recent.made[id & 63].nbytes;
}

// The writer's total changes by what this thread cannot tell (a data swap,
// or it just found it owns the stripe): start again from here.
static inline void fold_rebase(void) {
    tpprof_obs_recent.high = tpprof_obs_recent.live;
    tpprof_obs_recent.settled = false;
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
// A record's words, written (observe.c) or held (hold, hold_new).

// Up to 24 bytes of a name, NUL padded, into 3 words (all zero for NULL).
static inline void put_name(uint64_t *w, const char *name) {
    w[0] = w[1] = w[2] = 0;
    if (!name) return;
    char *d = (char *)w;
    for (int i = 0; i < 23 && name[i]; i++) d[i] = name[i];
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

// ---------------------------------------------------------------------------
// Holding a record and folding it: the fused callbacks' fast paths
// (observe.c), which call nothing.

// Writes the held records (obsfold.c), oldest first, before whatever the
// caller writes next; the guard set.
TPPROF_HIDDEN void tpprof_obs_held_write(struct tpprof_thread *t);

// A held record's word 0 (never sent: tpprof_obs_held_write writes the
// header): its kind, and where its tensor's and its storage's ids are.
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
    if (TPPROF_UNLIKELY(!mine || !tpprof_obs_recent.owner_seen) || !tpprof_obs_recent.settled ||
        *n == TPPROF_OBS_HELD) {
        stripe_close(t);
        if (mine && !tpprof_obs_recent.owner_seen) fold_rebase(); // from here only this thread changes the totals
        tpprof_obs_recent.owner_seen = mine;
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
        if (TPPROF_UNLIKELY(s->allocator != tpprof_obs_recent.held_name)) {
            put_name(tpprof_obs_recent.held_name_words, s->allocator);
            tpprof_obs_recent.held_name = s->allocator;
        }
        memcpy(&h[6], tpprof_obs_recent.held_name_words, sizeof tpprof_obs_recent.held_name_words);
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
    uint64_t *last = t->fold_alloc_name[tpprof_obs_recent.fold_alloc_last & (TPPROF_FOLD_ALLOCATORS - 1)];
    if (TPPROF_LIKELY(last[0] == words[0] && last[1] == words[1] && last[2] == words[2] && words[0]))
        return (int)(tpprof_obs_recent.fold_alloc_last & (TPPROF_FOLD_ALLOCATORS - 1));
    for (int i = 0; i < TPPROF_FOLD_ALLOCATORS; i++) {
        uint64_t *a = t->fold_alloc_name[i];
        if (a[0] == words[0] && a[1] == words[1] && a[2] == words[2] && (t->fold_alloc_count[i] || words[0]))
            return (int)(tpprof_obs_recent.fold_alloc_last = (uint32_t)i);
        if (!t->fold_alloc_count[i] && !a[0]) {
            memcpy(a, words, 3 * sizeof *a);
            return (int)(tpprof_obs_recent.fold_alloc_last = (uint32_t)i);
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

#endif
