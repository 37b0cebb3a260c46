// tpprof_internal.h: what the parts of libtpprof.so share.
//
// libtpprof.so is an LD_PRELOAD recorder. The program's threads run the hooks
// (hooks.c): they call the real allocator, capture a stack (unwind.c), name it
// through the lock-free stack depot (stacks.c), take an order tag (a stripe
// ticket and an epoch) and append a small record to their own ring
// (rings.c). One writer thread (writer.c) merges the rings in that order,
// keeps the live table (livetable.c), the per-site totals, the peak and the timeline, and writes
// SQLite (db.c). At exit a reachability scan (scan.c) classifies the blocks
// still live. Lifecycle (init, exit, fork, exec, _exit) is in lifecycle.c.
// When the program uses libtensorplay, its observer events (observe.c) go
// through the same rings, in sequence with the malloc records, and the
// writer keeps the storages, tensors and references (storages.c).
//
// Nothing here depends on libtensorplay beyond its observer ABI header
// (observe.c and storages.c only). Nothing declared here is exported from the
// shared object: only the interposed libc functions and tp_observer_provide
// are (tpprof.map).
#ifndef TPPROF_INTERNAL_H
#define TPPROF_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include <sys/types.h>

#define TPPROF_HIDDEN __attribute__((visibility("hidden")))
#define TPPROF_EXPORT __attribute__((visibility("default")))
#define TPPROF_LIKELY(x) __builtin_expect(!!(x), 1)
#define TPPROF_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define TPPROF_TLS __attribute__((tls_model("initial-exec")))

#define TPPROF_VERSION "0.1.0"
#define TPPROF_SCHEMA_VERSION 1
#define TPPROF_MAX_DEPTH 128

// ---------------------------------------------------------------------------
// Block kinds (the `kinds` table) and record ops (the `events.op` column).

enum tpprof_kind {
    TPPROF_KIND_EARLY = 0, // the site of the blocks from before the start (writer.c adopt_early): never written
    TPPROF_KIND_MALLOC = 1,
    TPPROF_KIND_CALLOC = 2,
    TPPROF_KIND_REALLOC = 3,
    TPPROF_KIND_REALLOCARRAY = 4,
    TPPROF_KIND_POSIX_MEMALIGN = 5,
    TPPROF_KIND_ALIGNED_ALLOC = 6,
    TPPROF_KIND_MEMALIGN = 7,
    TPPROF_KIND_VALLOC = 8,
    TPPROF_KIND_PVALLOC = 9,
    TPPROF_KIND_MMAP = 10,
    TPPROF_KIND_MMAP_FILE = 11,
    TPPROF_KIND_MMAP_RESERVED = 12, // an anonymous PROT_NONE mapping: address space, no memory (see hooks.c)
    TPPROF_KIND_COUNT = 13,
};

// Ops 1-6 are the values of `events.op`; the others exist only in rings.
enum tpprof_op {
    TPPROF_OP_ALLOC = 1,        // addr, size, stack
    TPPROF_OP_FREE = 2,         // addr
    TPPROF_OP_REALLOC = 3,      // addr, size, stack, old_addr (old freed by a REALLOC_FREE)
    TPPROF_OP_MMAP = 4,         // addr, len, stack
    TPPROF_OP_MUNMAP = 5,       // addr, len
    TPPROF_OP_MREMAP = 6,       // new_addr, new_len, stack, old_addr, old_len
    TPPROF_OP_REALLOC_FREE = 7, // addr: the old block of a realloc, freed
    TPPROF_OP_NOP = 8,          // a ticket taken for nothing (failed realloc)
    TPPROF_OP_OBS = 9,          // a runtime observer event (observe.c): kind = tp_obs_kind,
                                // word 1 = words | refop << 8 | flags << 16 | stack << 32, payload after
    TPPROF_OP_ALLOC_PACKED = 10, // an ALLOC in 3 words: addr, size | stack << TPPROF_PACKED_SIZE_BITS
    TPPROF_OP_COMMIT = 11,      // addr, len, stack: mprotect made the range accessible (its reserved parts become mmap)
    TPPROF_OP_WRAP = 15,        // ring padding: continue at the ring's start
};

// ALLOC_PACKED's size bits (allocations of 1 TiB and more take the 4-word
// ALLOC); the stack id fits in the 24 above (stacks.c asserts MAX_IDS < 2^24).
#define TPPROF_PACKED_SIZE_BITS 40

static inline uint64_t tpprof_packed_size(const uint64_t *r) {
    return r[2] & (((uint64_t)1 << TPPROF_PACKED_SIZE_BITS) - 1);
}
// The stack id of an ALLOC, ALLOC_PACKED or REALLOC record.
static inline uint32_t tpprof_alloc_sid(const uint64_t *r, int op) {
    return op == TPPROF_OP_ALLOC_PACKED ? (uint32_t)(r[2] >> TPPROF_PACKED_SIZE_BITS) : (uint32_t)r[3];
}

// Flags in bits 16-23 of an OBS record's word 1. TENSOR_REF: a RELEASE made
// by a tensor's free that also carries that TENSOR_FREED (word 4: the tensor
// id), sent without a stack; the writer counts it under the stack of the
// reference it releases (observe.c, storages.c).
#define TPPROF_OBS_TENSOR_REF ((uint64_t)1 << 16)
// WITH_RETAIN: a TENSOR_CREATED that also carries the RETAIN of its storage
// made just before (same stack; the counts after the dims).
#define TPPROF_OBS_WITH_RETAIN ((uint64_t)1 << 17)
// DATA_RELEASED: a RELEASE to strong 0 that also carries the storage's
// DATA_RELEASED (the next event of the thread, per the observer ABI).
#define TPPROF_OBS_DATA_RELEASED ((uint64_t)1 << 18)
// TICKS: the record's last payload word is tpprof_ticks() taken in the
// event (aggregate mode: a storage's creation and data release, so DataPtr
// lifetimes are not rounded to the writer's merge time).
#define TPPROF_OBS_TICKS ((uint64_t)1 << 20)
// FREED: such a RELEASE that leaves weak 1 (no weak references: the runtime
// deletes the struct at once, as c10 does) also carries its FREED.
#define TPPROF_OBS_FREED ((uint64_t)1 << 19)
// ADOPTED: a TENSOR_CREATED whose tensor took over its storage's creation
// reference (TP_OBS_TENSOR_ADOPTED_REF): no RETAIN came for it.
#define TPPROF_OBS_ADOPTED ((uint64_t)1 << 21)
// WITH_TENSOR: a STORAGE_CREATED that also carries the TENSOR_CREATED of the
// tensor made on it in the same runtime call (it adopts the storage's
// reference, so ADOPTED is set too): after the storage's words the tensor's
// stack, then the tensor's words as a TENSOR_CREATED has them from word 2,
// the ticks last (observe.c tensor_new).
#define TPPROF_OBS_WITH_TENSOR ((uint64_t)1 << 22)
// SAME_NAME: a STORAGE_CREATED whose allocator is the one named by this
// thread's last STORAGE_CREATED that carried a name (the same name pointer:
// allocator names are static, tensorplay/allocator.h), so it carries none:
// its storage's words are 4, not 7 (observe.c put_storage).
#define TPPROF_OBS_SAME_NAME ((uint64_t)1 << 23)
// PACKED: the compact layout of its kind, aggregate mode only (observe.c
// says each, storages.c reads them), an id as a 32-bit delta from another.
// A WITH_TENSOR record whose tensor is a plain one on that storage (no
// base, offset 0) is 3 words shorter (tensor_new_words), a tensor's release
// 1 (refcount_words: the storage's delta in word 1's stack half). Ring
// words are much of what a record costs beyond its instructions: each line
// the program writes is taken back from the writer's core.
#define TPPROF_OBS_PACKED ((uint64_t)1 << 24)

// Words per record, excluding the optional trailing timestamp of full mode.
static inline int tpprof_op_words(int op) {
    switch (op) {
    case TPPROF_OP_ALLOC: return 4;
    case TPPROF_OP_ALLOC_PACKED: return 3;
    case TPPROF_OP_FREE: return 2;
    case TPPROF_OP_REALLOC: return 5;
    case TPPROF_OP_MMAP: return 4;
    case TPPROF_OP_COMMIT: return 4;
    case TPPROF_OP_MUNMAP: return 3;
    case TPPROF_OP_MREMAP: return 6;
    case TPPROF_OP_REALLOC_FREE: return 2;
    case TPPROF_OP_NOP: return 1;
    default: return 1;
    }
}

// Words of the record at r (observer records carry their length).
static inline int tpprof_rec_words(const uint64_t *r) {
    int op = (int)(r[0] >> 4 & 15);
    return op == TPPROF_OP_OBS ? (int)(r[1] & 0xff) : tpprof_op_words(op);
}

// Record header word: order << 8 | op << 4 | kind, where order is what
// tpprof_order_tag returns (or, in tests, any number).
static inline uint64_t tpprof_hdr(uint64_t order, int op, int kind) {
    return order << 8 | (uint64_t)op << 4 | (uint64_t)kind;
}

// ---------------------------------------------------------------------------
// Configuration and global state (lifecycle.c).

struct tpprof_config {
    int depth;          // TPPROF_DEPTH, frames per stack
    bool full;          // TPPROF_MODE=full
    bool unwind_fp;     // TPPROF_UNWIND=fp: frame pointers only
    bool unwind_unw;    // TPPROF_UNWIND=libunwind: libunwind only, no verified FP path
    int interval_ms;    // TPPROF_INTERVAL_MS, timeline period
    bool scan_stop;     // TPPROF_SCAN_STOP (default 1): signal running threads to stop for the exit scan (scan.c)
    bool lifetimes_all; // TPPROF_LIFETIMES=all: every storage's DataPtr lifetime timed (observe.c)
};

TPPROF_HIDDEN extern struct tpprof_config tpprof_cfg;
// Whether TPPROF_MODE asks for full mode, decided once (observe.c): tpprof_cfg.full.
TPPROF_HIDDEN bool tpprof_mode_full(void);
// 1 while hooks record; 0 before init, after the end, or when recording failed.
TPPROF_HIDDEN extern _Atomic int tpprof_active;
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
// CLOCK_MONOTONIC at the start of the recording.
TPPROF_HIDDEN extern uint64_t tpprof_t0_ns;
// Re-entry guard: set while a hook (or tpprof's own thread) is inside tpprof.
TPPROF_HIDDEN extern __thread int tpprof_guard TPPROF_TLS;

TPPROF_HIDDEN uint64_t tpprof_now_ns(void);       // since tpprof_t0_ns

// A cheap clock for hooks: the CPU's time-stamp counter where there is one
// (constant-rate on the machines Linux uses it as its clock; a few ns to
// read), else CLOCK_MONOTONIC. The writer converts (tpprof_writer_ticks_to_ns).
static inline uint64_t tpprof_ticks(void) {
#if defined(__x86_64__) || defined(__i386__)
    return __builtin_ia32_rdtsc();
#elif defined(__aarch64__)
    uint64_t v;
    __asm__ __volatile__("mrs %0, cntvct_el0" : "=r"(v));
    return v;
#else
    return tpprof_now_ns();
#endif
}
TPPROF_HIDDEN void tpprof_disable(const char *what, const char *why);

// ---------------------------------------------------------------------------
// Own memory (mem.c): never from the tracked heap, so it is neither recorded
// nor scanned as a root.

TPPROF_HIDDEN void *tpprof_mem_map(size_t bytes);           // zeroed, or NULL
// Zeroed and every page present, or NULL: for a hash table about to be
// filled, whose probes read slots before writing them (a read of an
// untouched page maps the zero page, and the write after it faults again
// and flushes the TLB of every CPU the program runs on).
TPPROF_HIDDEN void *tpprof_mem_map_populated(size_t bytes);
TPPROF_HIDDEN void tpprof_mem_unmap(void *p, size_t bytes);
TPPROF_HIDDEN void *tpprof_mem_grow(void *p, size_t old_bytes, size_t new_bytes);

// ---------------------------------------------------------------------------
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
    char pad2[48];
    uint64_t *ring;
    uint64_t mask;              // capacity - 1, in words
    pid_t tid;
    int index;                  // dense thread number, 0 for the first
    uintptr_t stack_lo, stack_hi;
    uintptr_t tp;               // thread pointer (pthread_self): static TLS lies below it
    _Atomic int exited;
    _Atomic uintptr_t stop_sp;  // during the leak scan: where its stack is read from (scan.c)
    char name[17];              // set by the thread as it exits
    struct tpprof_thread *next; // all threads ever seen, newest first
    // The thread's unwinder state and stack cache (unwind.c, stacks.c), to
    // be unmapped with its ring once it is gone (tpprof_thread_release).
    void *cache_mem;
    size_t cache_bytes;
    void *big_stack; // libunwind's stack where the thread's own is short (unwind.c), 64 KiB
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
};

TPPROF_HIDDEN extern _Atomic(struct tpprof_thread *) tpprof_threads;
TPPROF_HIDDEN extern __thread struct tpprof_thread *tpprof_self TPPROF_TLS;

// The calling thread's ring, created on first use; NULL when out of memory.
TPPROF_HIDDEN struct tpprof_thread *tpprof_thread_get(void);
// Events dropped because a ring stayed full (see rings.c).
TPPROF_HIDDEN extern _Atomic uint64_t tpprof_dropped;
// Stacks taken by libunwind, not by the verified frame-pointer walk
// (unwind.c; meta.libunwind_walks).
TPPROF_HIDDEN extern _Atomic uint64_t tpprof_unwind_slow;
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
// Unmaps a thread's ring, unwinder state and stack cache (the writer, once
// the thread is gone for good and its ring drained); the struct stays.
TPPROF_HIDDEN void tpprof_thread_release(struct tpprof_thread *t);

// ---------------------------------------------------------------------------
// The calling thread's last few heap allocations and their stacks (hooks.c
// writes them, observe.c reads them: an event that names a struct the
// current runtime call allocated takes that allocation's stack).

// Addresses are kept complemented: this lives in static TLS, which the leak
// scan reads as a root, and a plain copy would make the blocks reachable.
#define TPPROF_RECENT 4
struct tpprof_recent_allocs {
    uint64_t addr[TPPROF_RECENT]; // ~address
    uint32_t sid[TPPROF_RECENT];
    uint32_t next;
};
TPPROF_HIDDEN extern __thread struct tpprof_recent_allocs tpprof_recent TPPROF_TLS;

// The stack of the newest of those allocations at addr, or 0.
static inline uint32_t tpprof_recent_sid(uint64_t addr) {
    for (uint32_t k = 1; k <= TPPROF_RECENT; k++) {
        uint32_t i = (tpprof_recent.next - k) & (TPPROF_RECENT - 1);
        if (tpprof_recent.addr[i] == ~addr) return tpprof_recent.sid[i];
    }
    return 0;
}

// ---------------------------------------------------------------------------
// Blocks allocated before the start (early.c): 1 until the constructor is
// done; meanwhile the hooks note blocks with tpprof_early_alloc/free.
TPPROF_HIDDEN extern _Atomic int tpprof_early;
TPPROF_HIDDEN void tpprof_early_alloc(const void *p, size_t n);
TPPROF_HIDDEN void tpprof_early_free(const void *p);
TPPROF_HIDDEN void tpprof_early_map(const void *p, size_t len); // an anonymous, writable mapping
TPPROF_HIDDEN void tpprof_early_unmap(const void *p, size_t len);
// Ends the noting; adopt (if not NULL) gets every block and mapping still there.
TPPROF_HIDDEN void tpprof_early_end(void (*adopt)(uint64_t addr, uint64_t size, bool mapping));

// ---------------------------------------------------------------------------
// Runtime observer (observe.c): 1 once libtensorplay attached our observer
// (TPPROF_TENSORS=0 declines).
TPPROF_HIDDEN extern _Atomic int tpprof_obs_attached;

// ---------------------------------------------------------------------------
// Stacks (unwind.c, stacks.c).

// Captures the calling thread's stack (innermost first, tpprof's frames
// removed, at most `max` frames) and returns its depot id (0: none).
TPPROF_HIDDEN uint32_t tpprof_capture(int max);
// The same, the frame-pointer walk starting at the frame `start` (0: this
// call's own): an interposed function's frame (hooks.c), whose return
// address is the program's, so the walk does not step through tpprof's own
// frames first to find it. tpprof's frames at `start` are still skipped.
TPPROF_HIDDEN uint32_t tpprof_capture_at(int max, uintptr_t start);
TPPROF_HIDDEN void tpprof_unwind_init(void);
TPPROF_HIDDEN void tpprof_unwind_flush(void);
// Unmaps a gone thread's unwinder stack (tpprof_thread_release).
TPPROF_HIDDEN void tpprof_unwind_release(struct tpprof_thread *t);
TPPROF_HIDDEN void tpprof_unwind_thread_bounds(uintptr_t *lo, uintptr_t *hi);

// The depot names each distinct stack with a dense id >= 1 (lock-free).
// Returns 0 when out of memory.
TPPROF_HIDDEN uint32_t tpprof_stack_intern(const uintptr_t *ips, int n);

// The depot's 128-bit hash of n frames: two chains over the frames in
// order, innermost first, each step a bijection of the chain's state for a
// given frame (and of the frame for a given state), so two stacks of one
// length that differ in one frame never collide; the two chains differ in how a frame enters (xor,
// add) and in their odd multiplier, and the end mixes in n. Two multiplies
// and two xor/adds a frame, the chains independent of each other: cheap
// enough to run inside unwind.c's frame-pointer walk. acc[0..1] = 0,
// tpprof_stack_hash_step for frames 0..n-1 in order, then
// tpprof_stack_hash_end.
#define TPPROF_STACK_HASH_KA 0xff51afd7ed558ccdULL
#define TPPROF_STACK_HASH_KB 0x9FB21C651E98DF25ULL
static inline void tpprof_stack_hash_step(uint64_t acc[2], uintptr_t ip) {
    acc[0] = (acc[0] ^ ip) * TPPROF_STACK_HASH_KA;
    acc[1] = (acc[1] + ip) * TPPROF_STACK_HASH_KB;
}
static inline void tpprof_stack_hash_end(const uint64_t acc[2], int n, uint64_t h[2]) {
    uint64_t a = acc[0] + (uint64_t)n * 0x9E3779B97F4A7C15ULL, b = acc[1] + (uint64_t)n;
    a ^= a >> 32;
    a *= 0xc4ceb9fe1a85ec53ULL;
    a ^= a >> 29;
    b ^= b >> 33;
    b *= 0xff51afd7ed558ccdULL;
    b ^= b >> 29;
    h[0] = a | 1; // 0 marks an empty depot slot
    h[1] = b;
}
// For unwind.c's verified frame-pointer path: the id of the frames hashed to
// h if this thread's cache holds them marked exact for an FP walk of
// `fp_len` frames, else 0.
TPPROF_HIDDEN uint32_t tpprof_stack_find_fp(const uint64_t h[2], uint32_t fp_len);
// Interns frames already hashed; fp_len > 0 marks them exact for an FP walk.
TPPROF_HIDDEN uint32_t tpprof_stack_intern_h(const uintptr_t *ips, int n, const uint64_t h[2], uint32_t fp_len);
// The frames of a stack id (borrowed, lives until exit).
TPPROF_HIDDEN const uintptr_t *tpprof_stack_frames(uint32_t id, int *n);
TPPROF_HIDDEN uint32_t tpprof_stack_count(void);
TPPROF_HIDDEN bool tpprof_stacks_init(void);

// ---------------------------------------------------------------------------
// Modules (modules.c): snapshots of the loaded ELF objects.

struct tpprof_module {
    char path[256];
    char build_id[64];          // hex, "" if none
    uintptr_t base, lo, hi;
    uint64_t loaded_ns, unloaded_ns; // unloaded_ns 0 while loaded
    bool loaded;
    bool written, dirty;
    bool bypass;                // calls the C library's allocator directly (modules.c)
};

// Re-reads the module list (after start, dlopen, dlclose); thread-safe.
TPPROF_HIDDEN void tpprof_modules_refresh(void);
// Also looks again, in the module loaded at `base` (about to be dlclose'd:
// its lazy bindings have resolved by now), for direct allocator bindings.
TPPROF_HIDDEN void tpprof_modules_refresh_closing(uintptr_t base);
// Copies the modules into a fresh array (caller frees with tpprof_mem_unmap);
// returns the count.
TPPROF_HIDDEN int tpprof_modules_take(struct tpprof_module **out, size_t *bytes);
TPPROF_HIDDEN void tpprof_modules_mark_all_unwritten(void);
// Looks again, in every loaded module, for allocation calls bound straight
// to the C library (lazy bindings resolve with use), then writes the paths
// of every module ever seen doing so as a JSON array into out; returns how
// many (0: none, out is "[]").
TPPROF_HIDDEN int tpprof_modules_bypassing(char *out, size_t cap);
TPPROF_HIDDEN void tpprof_modules_lock(void);
TPPROF_HIDDEN void tpprof_modules_unlock(void);
// Address range of libtpprof.so itself.
TPPROF_HIDDEN extern uintptr_t tpprof_self_lo, tpprof_self_hi;
TPPROF_HIDDEN void tpprof_self_range_init(void);

// ---------------------------------------------------------------------------
// Writer (writer.c).

// Opens the database at `path` and starts the writer thread; false (after
// the one stderr line) if the database cannot be written.
TPPROF_HIDDEN bool tpprof_writer_start(const char *path);
// Drains the rings and classifies the live blocks (atexit; `sp`: the
// exiting thread's stack pointer, registers spilled above it).
TPPROF_HIDDEN void tpprof_writer_leak_scan(uintptr_t sp);
// Drains the rings, writes everything and closes the database. EXIT: after
// the leak scan, complete=1; EXEC: complete=1, end_reason=exec, no scan;
// QUICK (_exit): complete=0, live blocks unscanned.
enum tpprof_end { TPPROF_END_EXIT, TPPROF_END_EXEC, TPPROF_END_QUICK };
TPPROF_HIDDEN void tpprof_writer_finish(enum tpprof_end how);
TPPROF_HIDDEN void tpprof_writer_exec_failed(void);
// Holds the writer still (its lock) while a program's dup2 takes the number
// of a file of tpprof's; resume reopens that file elsewhere (statm) and lets
// the writer go on.
TPPROF_HIDDEN void tpprof_writer_pause(void);
TPPROF_HIDDEN void tpprof_writer_resume(int taken);
// The main thread called pthread_exit (lifecycle.c): the writer ends the
// process once it is the last thread (writer.c).
TPPROF_HIDDEN extern _Atomic int tpprof_main_exited;
// The object whose malloc the program calls when it is not this library's
// (lifecycle.c; "" when it is): meta.malloc_replaced_by.
TPPROF_HIDDEN extern char tpprof_malloc_owner[1024];
// The allocator preloaded after this library that the hooks pass over for
// glibc's (lifecycle.c), or "".
TPPROF_HIDDEN extern char tpprof_malloc_skipped[1024];
// The drainer's CPU-time clock (0 until it runs; the writer sets it): a
// producer waiting on a full ring tells a busy drainer from a blocked one by
// it (rings.c).
TPPROF_HIDDEN extern clockid_t tpprof_drainer_clock;
// Turns recording on, once the writer started: the blocks noted before the
// start (early.c) become the writer's, for the leak scan only.
TPPROF_HIDDEN void tpprof_writer_go(void);
// A signal is ending the process: writes everything, the live set scanned
// from sp if sp is not 0 (lifecycle.c's handler).
TPPROF_HIDDEN void tpprof_writer_end_signal(int sig, uintptr_t sp);
TPPROF_HIDDEN void tpprof_writer_fork_prepare(void);
TPPROF_HIDDEN void tpprof_writer_fork_parent(void);
TPPROF_HIDDEN void tpprof_writer_fork_child(const char *path);

// ---------------------------------------------------------------------------
// The database's file descriptors (fdguard.c).

// Routes SQLite's opens and closes through fdguard.c; once, before the first
// database is opened. False if the VFS does not allow it (not guarded).
TPPROF_HIDDEN bool tpprof_fdguard_install(void);
// Opens a file of tpprof's own for reading (/proc), guarded like the
// database's; -1 on error. Close it with tpprof_fd_close.
TPPROF_HIDDEN int tpprof_fd_open(const char *path);
TPPROF_HIDDEN void tpprof_fd_close(int fd);
// Where tpprof's one line goes: a copy of descriptor 2 taken at the first
// call (the constructor's), -1 if there was none.
TPPROF_HIDDEN int tpprof_fd_stderr(void);
// A forked child: closes the parent's abandoned database descriptors.
TPPROF_HIDDEN void tpprof_fdguard_fork_child(void);
TPPROF_HIDDEN extern char tpprof_output_path[4096];

#endif
