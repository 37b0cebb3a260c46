// rings.h: the per-thread rings (rings.c), the hot path's one way out:
// a hook reserves, writes and commits a record; the drainer (the writer
// thread) reads them, and naps on the rings' own wake-up.
#ifndef TPPROF_RECORD_RINGS_H
#define TPPROF_RECORD_RINGS_H

#include "base/base.h"
#include "record/format.h"

// Per-thread rings (rings.c). Each program thread owns one single-producer,
// single-consumer ring of 64-bit words; the writer is the only consumer.

struct tpprof_thread {
    _Atomic uint64_t tail;      // producer: words published (monotonic)
    uint64_t p_head;            // producer's copy of head, refreshed when the ring looks full
    char pad0[48];
    _Atomic uint64_t head;      // consumer: words consumed (monotonic), published once per drain
    char pad1[56];
    // The producer's alone (the writer reads the line above for the tail:
    // a store here would take it back from the writer's core each time).
    _Atomic int obs_window;     // 1 while it takes an observer ticket (tpprof_obs_tag; read by a revoker)
    uint64_t obs_lim;           // up to this tail an observer record fits unchecked (observe.c)
    // Stacks this struct's threads took by the CFI walk and by libunwind
    // (unwind.c; summed by tpprof_walk_counts): a locked add to one
    // process-wide counter each was 1% of a program's samples where every
    // stack is a CFI walk. Kept when the struct is reused.
    _Atomic uint64_t cfi_walks, unw_walks;
    char pad2[32];
    uint64_t *ring;
    uint64_t mask;              // capacity - 1, in words
    pid_t tid;
    int index;                  // dense thread number, 0 for the first
    uintptr_t stack_lo, stack_hi;
    uintptr_t tp;               // thread pointer (pthread_self): static TLS lies below it
    _Atomic int exited;
    _Atomic uintptr_t stop_sp;  // during the leak scan: where its stack is read from (scan.c)
    char name[17];              // set by the thread as it exits
    struct tpprof_thread *next; // all thread structs, newest first (a struct is reused: rings.c)
    struct tpprof_thread *free_next, *reborn_next; // on rings.c's lists of reusable and reused structs
    // The thread's unwinder state and stack cache (unwind.c, stacks.c), to
    // be unmapped with its ring once it is gone (tpprof_thread_release).
    void *cache_mem;
    size_t cache_bytes;
    void *big_stack; // libunwind's stack where the thread's own is short (unwind.c), 64 KiB
    struct tpprof_cfi_state *cfi; // the CFI walk's rules (cfiwalk.c), mapped on the first walk; kept when the struct is reused
    struct tpprof_py_memo *py_memo; // Python code ids by code object (pyframes.c), mapped on first use; kept likewise
    // Short-lived views folded on the program thread (obsfold.c, "Folded
    // views"). obs_held: views whose TENSOR_CREATED record is held back
    // (the record's words, word 0 unused), oldest first; touched by the
    // thread only inside its observer window while it owns the observer
    // stripe, and by a thread taking the stripe away from it (obsorder.c,
    // which moves them into its own). fold_sid/fold_count: views made and
    // freed with no record, counted per creation stack (depot id); the
    // writer adds them to refcount_sites (ledger.c, tpprof_obs_fold_collect).
#define TPPROF_OBS_HELD 4
#define TPPROF_OBS_HELD_WORDS 32 // a new storage with its tensor of 8 dims, its name: 2 + 7 + 1 + 4 + 1 + 2 * 8 + 1 (obsfold.h hold_new)
#define TPPROF_FOLD_SLOTS 64
    _Atomic uint32_t obs_nheld;
    uint64_t obs_held[TPPROF_OBS_HELD][TPPROF_OBS_HELD_WORDS];
    uint32_t fold_sid[TPPROF_FOLD_SLOTS]; // depot id << 1 | 1 for a tensor with its storage (a release only)
    uint64_t fold_count[TPPROF_FOLD_SLOTS];
    // Storages folded with their tensor, by allocator (its name, NUL padded:
    // storage_lifetimes counts them).
#define TPPROF_FOLD_ALLOCATORS 4
    uint64_t fold_alloc_name[TPPROF_FOLD_ALLOCATORS][3];
    uint64_t fold_alloc_count[TPPROF_FOLD_ALLOCATORS];
    // Writer-owned from here (its own cache line: written per event).
    _Alignas(64) uint64_t w_head; // consumed so far (head is published from it)
    uint64_t w_tail;            // last tail the writer read
    uint64_t w_lim;             // the merge applies records below this (writer.c)
    uint64_t w_cap;             // a forced drain stops here: the tail when it began
    uint64_t w_pf;              // next record to prefetch (writer.c), ahead of w_head
    uint64_t w_last_alloc;      // address of this thread's last allocation
    uint64_t w_first_ns, w_last_ns;
    uint64_t w_wait_key;        // != 0: its head waits in the merge for this stripe ticket (writer.c)
    uint32_t w_epoch;           // its head's epoch, as the merge's pass last found it
    uint8_t w_state;            // and the head's state then (writer.c: HEAD_*)
    bool w_seen, w_dirty;
    char w_name[32];
    uint16_t w_obs_name;        // allocator name of its last STORAGE_CREATED that carried one (storages.c)
    uint64_t w_fold_taken[TPPROF_FOLD_SLOTS]; // fold_count already added to refcount_sites (ledger.c)
    uint64_t w_fold_alloc_taken[TPPROF_FOLD_ALLOCATORS]; // fold_alloc_count already added to storage_lifetimes
};

TPPROF_HIDDEN extern _Atomic(struct tpprof_thread *) tpprof_threads;
TPPROF_HIDDEN extern __thread struct tpprof_thread *tpprof_self TPPROF_TLS;

// The calling thread's ring, created on first use; NULL when out of memory.
TPPROF_HIDDEN struct tpprof_thread *tpprof_thread_get(void);
// Events dropped because a ring stayed full (see rings.c).
TPPROF_HIDDEN extern _Atomic uint64_t tpprof_dropped;
// The program's allocations and frees that were not recorded
// (meta.events_unrecorded): those of a thread that could get no ring
// (meta.threads_unrecorded counts the threads: rings.c), and those a signal
// handler made while its thread was inside a hook, whose own record was
// half written (hooks.c: tpprof_guard is TPPROF_GUARD_HOOK there).
TPPROF_HIDDEN extern _Atomic uint64_t tpprof_unrecorded_events, tpprof_unrecorded_threads;
// Thread structs and rings mapped (meta.rings): as many as the program ever
// had threads at once, give or take the writer's lag (rings.c reuses them).
TPPROF_HIDDEN extern _Atomic uint64_t tpprof_rings_mapped;
// Stacks taken by libunwind, not by the verified frame-pointer walk
// (unwind.c; meta.libunwind_walks), of threads without a struct: the
// others count in their struct (cfi_walks, unw_walks); tpprof_walk_counts
// has all.
TPPROF_HIDDEN extern _Atomic uint64_t tpprof_unwind_slow;
// The walks of all threads so far: meta.cfi_walks and meta.libunwind_walks.
TPPROF_HIDDEN void tpprof_walk_counts(uint64_t *cfi, uint64_t *unw);
// Stacks the depot had no room for (stacks.c; meta.stacks_full).
TPPROF_HIDDEN extern _Atomic uint64_t tpprof_stacks_full;
// Bytes of stack left below the caller (UINTPTR_MAX when the bounds are
// unknown).
TPPROF_HIDDEN uintptr_t tpprof_stack_room(void);
// tpprof_ring_reserve's slow path (rings.c).
TPPROF_HIDDEN bool tpprof_ring_wait(struct tpprof_thread *t, uint64_t words);

// Waits until `words` fit in the ring; false if recording stopped meanwhile.
// Inline (it runs in every hook): the fast path reads no shared line.
static inline bool tpprof_ring_reserve(struct tpprof_thread *t, uint64_t words) {
    // A record never wraps: in the worst case it needs `words` more for padding.
    uint64_t tail = atomic_load_explicit(&t->tail, memory_order_relaxed);
    if (TPPROF_LIKELY(tail + 2 * words - t->p_head <= t->mask + 1)) return true;
    return tpprof_ring_wait(t, words);
}

// Where the next record of up to n words goes (space must have been
// reserved): a record never wraps, so one that would not fit before the
// ring's end pads it (the writer jumps to the start) and goes at the start.
static inline uint64_t *tpprof_ring_slot(struct tpprof_thread *t, uint64_t n) {
    uint64_t tail = atomic_load_explicit(&t->tail, memory_order_relaxed);
    uint64_t pos = tail & t->mask;
    if (TPPROF_UNLIKELY(pos + n > t->mask + 1)) {
        t->ring[pos] = (uint64_t)TPPROF_OP_WRAP << 4;
        atomic_store_explicit(&t->tail, tail + t->mask + 1 - pos, memory_order_release);
        pos = 0;
    }
    return &t->ring[pos];
}

// Publishes the n words written at tpprof_ring_slot. The ring's line 512
// bytes ahead is fetched for writing now: a line the thread writes for the
// first time in a lap was last in the writer's cache, or nowhere, and the
// hook's next atomic increment would otherwise wait for that store's miss
// (alloc_heavy, 2 threads, A/B runs of 15-31 paired rounds: 0.01x to 0.06x
// less CPU over native; the wall-time difference is within the noise).
// A record that starts a new quarter of the ring wakes the drainer (the
// writer thread) if it is napping (it naps 4 ms between drains): a thread
// that fills its ring faster than that does not wait for it. The wake-up is
// the rings' own (rings.c), so the hot path calls nothing above it: the
// drainer naps with tpprof_drainer_nap, a producer ends the nap with
// tpprof_drainer_kick, and tpprof_drainer_stop, set (then kicked), ends the
// naps for good (the drainer's loop reads it).
TPPROF_HIDDEN extern _Atomic int tpprof_drainer_napping;
TPPROF_HIDDEN extern _Atomic int tpprof_drainer_stop;
TPPROF_HIDDEN void tpprof_drainer_nap(long ns);
TPPROF_HIDDEN void tpprof_drainer_kick(void);

// A prefetch for writing: the line comes exclusive, where a read prefetch
// (what GCC makes of __builtin_prefetch(p, 1) without -mprfchw) brings it
// shared with the writer's core, and the store must still take it from
// there, stalling the hook's next locked add. PREFETCHW where the CPU has
// it (rings.c looks at the start; tensor tracking, bench/tensor_overhead:
// about 1 point less, and host recording a few % faster), else the read
// prefetch.
TPPROF_HIDDEN extern bool tpprof_prefetchw;
TPPROF_HIDDEN void tpprof_cpu_init(void);
static inline void tpprof_prefetch_write(const void *p) {
#if defined(__x86_64__)
    if (TPPROF_LIKELY(tpprof_prefetchw)) {
        __asm__ volatile("prefetchw %0" : : "m"(*(const char *)p));
        return;
    }
#endif
    __builtin_prefetch(p, 1, 3);
}

static inline void tpprof_ring_commit(struct tpprof_thread *t, uint64_t n) {
    uint64_t tail = atomic_load_explicit(&t->tail, memory_order_relaxed);
    tpprof_prefetch_write(&t->ring[(tail + n + 64) & t->mask]);
    atomic_store_explicit(&t->tail, tail + n, memory_order_release);
    if (TPPROF_UNLIKELY((tail ^ (tail + n)) > t->mask >> 2) &&
        atomic_load_explicit(&tpprof_drainer_napping, memory_order_relaxed))
        tpprof_drainer_kick();
}

// Appends one record (header + payload); space must have been reserved.
static inline void tpprof_ring_put(struct tpprof_thread *t, const uint64_t *w, int n) {
    uint64_t *r = tpprof_ring_slot(t, (uint64_t)n);
    for (int i = 0; i < n; i++) r[i] = w[i];
    tpprof_ring_commit(t, (uint64_t)n);
}
TPPROF_HIDDEN void tpprof_threads_fork_child(void);
// Hands a thread's struct, with its ring, to the next new thread (the
// writer, once the thread is gone for good, its ring drained and its row
// taken); its unwinder state and stack cache are unmapped.
TPPROF_HIDDEN void tpprof_thread_recycle(struct tpprof_thread *t);
// Writes the views thread t (the caller's own) holds back (observe.c,
// "Folded views"): at its exit and at the end of the recording.
TPPROF_HIDDEN void tpprof_obs_flush_held(struct tpprof_thread *t);
// The structs given to new threads again since the last call (linked
// through reborn_next): the writer visits them again (writer.c).
TPPROF_HIDDEN struct tpprof_thread *tpprof_threads_reborn(void);

// The drainer's CPU-time clock (0 until it runs; the writer sets it): a
// producer waiting on a full ring tells a busy drainer from a blocked one by
// it (rings.c).
TPPROF_HIDDEN extern clockid_t tpprof_drainer_clock;
// The writer thread's tid (writer.c sets it when it starts; 0 before).
TPPROF_HIDDEN extern _Atomic pid_t tpprof_drainer_tid;

#endif
