// stacks.h: stack capture (unwind.c) and the stack depot (stacks.c), and
// the hooks' recent allocations, whose stacks observer events take.
#ifndef TPPROF_RECORD_STACKS_H
#define TPPROF_RECORD_STACKS_H

#include "base/base.h"
#include "record/rings.h"

// Stacks (unwind.c, stacks.c).

// Captures the calling thread's stack (innermost first, tpprof's frames
// removed, at most `max` frames) and returns its depot id (0: none).
TPPROF_HIDDEN uint32_t tpprof_capture(int max);
// The same, the frame-pointer walk starting at the frame `start` (0: this
// call's own): an interposed function's frame (hooks.c), whose return
// address is the program's, so the walk does not step through tpprof's own
// frames first to find it. tpprof's frames at `start` are still skipped.
TPPROF_HIDDEN uint32_t tpprof_capture_at(int max, uintptr_t start);
// The stack of an allocation the dynamic loader makes (its TLS vector grown
// inside dlopen or a thread's first use of a new module's TLS): the
// frame-pointer walk only. libunwind reaches its own TLS through
// __tls_get_addr, which, called while the loader grows this thread's TLS
// vector, grows it again inside the first growth: ld.so then loses one of
// the two (a leak tpprof would cause).
TPPROF_HIDDEN uint32_t tpprof_capture_loader(int max);
TPPROF_HIDDEN void tpprof_unwind_init(void);
TPPROF_HIDDEN void tpprof_unwind_flush(void);
// Unmaps a gone thread's unwinder stack (tpprof_thread_release).
TPPROF_HIDDEN void tpprof_unwind_release(struct tpprof_thread *t);
TPPROF_HIDDEN void tpprof_unwind_thread_bounds(uintptr_t *lo, uintptr_t *hi);
// The stack pointer of the frame that called the C library's exit, on the
// calling thread's stack (0: not found; x86-64 with libunwind only).
TPPROF_HIDDEN uintptr_t tpprof_unwind_exit_caller_sp(void);
// libunwind's per-thread state made now (rings.c, as a thread gets its ring).
TPPROF_HIDDEN void tpprof_unwind_thread_warm(void);

// The depot names each distinct stack with a dense id >= 1 (lock-free); it
// grows with the program. Returns 0 only when out of memory (counted in
// tpprof_stacks_full).
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
// The frames of a stack id (borrowed: until tpprof_stack_release(id)).
TPPROF_HIDDEN const uintptr_t *tpprof_stack_frames(uint32_t id, int *n);
// Starts loading id's frames into the cache (the writer, some records
// before it makes their trie leaf: their first read was a cache miss).
TPPROF_HIDDEN void tpprof_stack_prefetch(uint32_t id);
// The writer is done with id's frames (it made their trie leaf): they go,
// and with them, once all its stacks are released, their arena chunk; the
// id's frames are then NULL. Writer only (one thread).
TPPROF_HIDDEN void tpprof_stack_release(uint32_t id);
// The frames' arena chunks (1 MiB each) in use now, and those released
// and kept mapped for reuse (at most a few).
TPPROF_HIDDEN size_t tpprof_stack_arena_chunks(void);
TPPROF_HIDDEN size_t tpprof_stack_arena_spares(void);
TPPROF_HIDDEN uint32_t tpprof_stack_count(void);
// The calling thread's stack cache misses so far (tests).
TPPROF_HIDDEN uint32_t tpprof_stack_cache_misses(void);
// The depot's tables in use (it adds one, twice the last, as that fills).
TPPROF_HIDDEN int tpprof_stack_levels(void);
TPPROF_HIDDEN bool tpprof_stacks_init(void);

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

#endif
