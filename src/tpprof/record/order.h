// order.h: the order of events across threads (stripes, tickets, epochs),
// and the observer records' own stripe (obsorder.c). The hooks take tags;
// the writer's merge applies records by them.
#ifndef TPPROF_RECORD_ORDER_H
#define TPPROF_RECORD_ORDER_H

#include "record/format.h"
#include "record/rings.h"
#include "base/base.h"

// Event order across threads. What must be exact is the order of the events
// that name one address: a free takes its number BEFORE the block is
// released and an allocation AFTER it is obtained, so an address reused by
// another thread is always seen freed first. One global counter did that,
// and its cache line moved between cores with every event (alloc_heavy, 2
// threads: half of the hook's own samples sat behind its lock xadd). So the
// numbers come from stripes: heap records take theirs from the stripe of
// their address's 64 MiB window (glibc gives each thread's arena its own
// 64 MiB heaps, so a thread mostly stays on its own lines); mappings, which
// name ranges, share stripe 0, and observer records, which name ids, have
// the last stripe to themselves (tpprof_obs_tag: taken without a locked
// instruction while one thread sends them all). The writer
// applies a stripe's records in its order. Between stripes, the epoch orders:
// a global count that moves on with every 64th ticket of a stripe (so about
// every 64 events of each busy thread) and is stamped on each record, so the
// merge keeps threads' records within a few epochs of each other (the peak
// and the timeline are of a real interleaving, give or take a few hundred
// events, not of one ring drained ahead of another; big events exactly:
// TPPROF_BIG_BYTES).
// Header bits: kind 0-3, op 4-7, stripe 8-15, ticket 16-43, epoch 44-63;
// tickets and epochs wrap and are compared as serial numbers.
#define TPPROF_STRIPES 256
#define TPPROF_TICKET_BITS 28
#define TPPROF_EPOCH_BITS 20
#define TPPROF_TICKET_MASK ((1u << TPPROF_TICKET_BITS) - 1)
#define TPPROF_EPOCH_MASK ((1u << TPPROF_EPOCH_BITS) - 1)
#define TPPROF_EPOCH_EVENTS 64
struct tpprof_order_line {
    _Alignas(128) _Atomic uint64_t v; // 128: the adjacent-line prefetcher pairs lines
    char pad[120];
};
TPPROF_HIDDEN extern struct tpprof_order_line tpprof_stripes[TPPROF_STRIPES];
TPPROF_HIDDEN extern struct tpprof_order_line tpprof_epoch;

// Heap addresses hash onto the first half of the stripes (as cheap as
// onto all of them, and a program has far fewer arenas), so none lands on
// the observer records' own (TPPROF_OBS_STRIPE, the last).
static inline unsigned tpprof_stripe_of(uint64_t addr) {
    return (unsigned)(((addr >> 26) * 0x9E3779B97F4A7C15ULL) >> 57);
}
static inline unsigned tpprof_hdr_stripe(uint64_t h) { return (unsigned)(h >> 8 & 255); }
static inline uint32_t tpprof_hdr_ticket(uint64_t h) {
    return (uint32_t)(h >> 16) & TPPROF_TICKET_MASK;
}
static inline uint32_t tpprof_hdr_epoch(uint64_t h) { return (uint32_t)(h >> 44); }
// a - b for wrapping tickets and epochs.
static inline int32_t tpprof_ticket_diff(uint32_t a, uint32_t b) {
    return (int32_t)((a - b) << (32 - TPPROF_TICKET_BITS)) >> (32 - TPPROF_TICKET_BITS);
}
static inline int32_t tpprof_epoch_diff(uint32_t a, uint32_t b) {
    return (int32_t)((a - b) << (32 - TPPROF_EPOCH_BITS)) >> (32 - TPPROF_EPOCH_BITS);
}
// An event of at least this many bytes (an allocation, a free of a block
// whose chunk is this big, a mapping) is ordered exactly against the events
// of other threads, not just within the merge's slack: it moves the epoch on
// by TPPROF_EPOCH_BIG_GAP before and after its own, so whatever another
// thread did before it has an epoch older by more than the slack, and
// whatever it does after, newer. Without this, two threads that take turns
// holding one big buffer were recorded with a peak of two buffers.
#define TPPROF_BIG_BYTES ((uint64_t)64 << 10)
// An MMAP record's length word has this bit set when the program chose the
// address (MAP_FIXED): the mapping may lie over parts of live ones.
#define TPPROF_MMAP_FIXED ((uint64_t)1 << 63)
#define TPPROF_EPOCH_BIG_GAP 5 // the writer's EPOCH_SLACK + 1

// The order part of a record header (tpprof_hdr) for an event of thread t
// on `stripe`: the stripe's next ticket, then the epoch (read after the
// ticket: the locked add orders it; tpprof_order_tag_of, for a ticket taken
// otherwise, reads it as it comes: observer records are never big, and the
// epoch only orders between stripes). The event that takes every
// TPPROF_EPOCH_EVENTS-th ticket of a stripe moves the epoch on (a thread
// mostly takes its own stripe's tickets: each busy thread moves it about
// every 64 of its events, with no count of its own to keep); a big event
// moves it around itself.
static inline uint64_t tpprof_order_tag_of(uint64_t ticket, unsigned stripe, bool big) {
    uint64_t epoch;
    if (TPPROF_UNLIKELY(big))
        epoch = atomic_fetch_add(&tpprof_epoch.v, 2 * TPPROF_EPOCH_BIG_GAP) + TPPROF_EPOCH_BIG_GAP;
    else
        epoch = atomic_load_explicit(&tpprof_epoch.v, memory_order_relaxed);
    if (TPPROF_UNLIKELY((ticket & (TPPROF_EPOCH_EVENTS - 1)) == 0))
        atomic_fetch_add_explicit(&tpprof_epoch.v, 1, memory_order_relaxed);
    // epoch's low bits at 36, ticket's at 8: the shifts drop the rest
    return epoch << 36 | ticket << (64 - TPPROF_TICKET_BITS) >> (64 - TPPROF_TICKET_BITS - 8) | stripe;
}
static inline uint64_t tpprof_order_tag(unsigned stripe, bool big) {
    return tpprof_order_tag_of(atomic_fetch_add(&tpprof_stripes[stripe].v, 1), stripe, big);
}

// Observer records' order tags (obsorder.c). They all come from one stripe
// so that the events naming one storage or tensor are applied in the order
// they happened, whichever threads sent them; a tensor op sends half a
// dozen, and a locked increment each (it waits for the thread's earlier
// stores to drain) was a quarter of what tensor tracking cost the program.
// So while one thread sends them all, which is the usual case, that thread
// owns the stripe (tpprof_obs_owner) and takes its tickets with a plain load
// and store, inside a window it marks in its thread struct. Another thread
// that wants one takes the stripe away (obsorder.c): it marks the stripe
// REVOKING, makes every thread of the process pass a full memory barrier
// (membarrier(2), so the owner's next look at tpprof_obs_owner sees it, or
// its window is seen open), waits for any open window to close, and leaves
// the stripe CONTESTED (locked increments from then on), or owned by itself
// when the owner has exited. Without membarrier the stripe is CONTESTED from
// the start.
#define TPPROF_OBS_STRIPE (TPPROF_STRIPES - 1)
_Static_assert(TPPROF_OBS_STRIPE >= 128, "no heap address may hash onto the observer stripe (tpprof_stripe_of)");
#define TPPROF_OBS_CONTESTED ((uintptr_t)1)
#define TPPROF_OBS_REVOKING ((uintptr_t)2)
TPPROF_HIDDEN extern _Atomic uintptr_t tpprof_obs_owner; // NULL (free), a thread, or the two above
TPPROF_HIDDEN uint64_t tpprof_obs_tag_slow(struct tpprof_thread *t);
// Takes the stripe away from another live thread that owns it, and the
// views it holds back (into t's obs_held); nothing when it is free,
// contested or t's.
TPPROF_HIDDEN void tpprof_obs_take(struct tpprof_thread *t);
// The end of the recording (the writer's final flush, on the thread
// ending it): the records another thread that owns the stripe still holds
// back, taken from it into out (how many; *owner: whose); the stripe is
// contested after.
TPPROF_HIDDEN uint32_t tpprof_obs_seize_held(uint64_t (*out)[TPPROF_OBS_HELD_WORDS], struct tpprof_thread **owner);
// At the start (before recording is on) and in a forked child.
TPPROF_HIDDEN void tpprof_obs_order_init(void);
TPPROF_HIDDEN void tpprof_obs_order_fork_child(void);

// The observer stripe's next ticket in its two usual states, owned by t
// (plain stores) or contested (a locked add); false, nothing taken, in the
// others (free, another thread's, being taken away: tpprof_obs_tag_slow's).
static inline bool tpprof_obs_ticket(struct tpprof_thread *t, uint64_t *ticket) {
    _Atomic uint64_t *v = &tpprof_stripes[TPPROF_OBS_STRIPE].v;
    atomic_store_explicit(&t->obs_window, 1, memory_order_relaxed);
    // The compiler keeps the store before the load; the CPU may not, which
    // is what the revoker's membarrier is for.
    atomic_signal_fence(memory_order_seq_cst);
    uintptr_t owner = atomic_load_explicit(&tpprof_obs_owner, memory_order_relaxed);
    if (TPPROF_LIKELY(owner == (uintptr_t)t)) {
        *ticket = atomic_load_explicit(v, memory_order_relaxed);
        atomic_store_explicit(v, *ticket + 1, memory_order_relaxed);
        atomic_store_explicit(&t->obs_window, 0, memory_order_release);
        return true;
    }
    atomic_store_explicit(&t->obs_window, 0, memory_order_release);
    if (owner != TPPROF_OBS_CONTESTED) return false;
    *ticket = atomic_fetch_add(v, 1);
    return true;
}

static inline uint64_t tpprof_obs_tag(struct tpprof_thread *t) {
    uint64_t ticket;
    if (TPPROF_LIKELY(tpprof_obs_ticket(t, &ticket))) return tpprof_order_tag_of(ticket, TPPROF_OBS_STRIPE, false);
    return tpprof_obs_tag_slow(t);
}

// The size of the glibc chunk of heap block p (what free will release).
static inline uint64_t tpprof_chunk_bytes(const void *p) { return ((const uint64_t *)p)[-1] & ~(uint64_t)7; }

#endif
