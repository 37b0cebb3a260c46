// stacks.c: the stack depot, naming each distinct stack with a small id.
//
// Runs inside malloc hooks on any thread at once, so it is lock-free: an
// open-addressing table of slots keyed by a 128-bit hash of the frames (two
// independent 64-bit hashes; a false match needs both to collide, about
// 2^-128 per pair, far below the chance of a hardware fault, so frames are
// not compared). A new stack claims an empty slot by CAS on its first hash,
// stores the second, copies its frames into an append-only arena, then
// publishes the id (release). A per-thread direct-mapped cache in front
// keeps the hot stacks in L1/L2: the table itself is a cache miss.
// Nothing is ever removed. The writer builds the stack_nodes trie from the
// frames. This file must not call malloc.
#define _GNU_SOURCE
#include <sched.h>
#include <string.h>
#include <sys/mman.h>

#include "tpprof_internal.h"

#define SLOT_BITS 19
#define SLOTS ((uint64_t)1 << SLOT_BITS)
#define MAX_IDS (SLOTS * 7 / 10)       // keep probe chains short
#define ARENA_BYTES ((size_t)256 << 20)
#define ID_FAILED UINT32_MAX
#define CACHE_SLOTS 16384          // 384 KiB per thread, touched as used

struct slot {
    _Atomic uint64_t h1;
    _Atomic uint64_t h2;
    _Atomic uint32_t id;
    uint32_t unused;
};

// Per-thread: the last stacks seen, by h1.
struct cache_entry {
    uint64_t h1, h2;
    uint32_t id;
    uint32_t fp_len; // > 0: an FP walk that yields these frames is exact up to here (unwind.c)
};
static __thread struct cache_entry *cache TPPROF_TLS;

static struct slot *slots;
static uint64_t **by_id;               // id -> {n, frames...}
static _Atomic uint32_t next_id = 1;
static char *arena;
static _Atomic size_t arena_used;

bool tpprof_stacks_init(void) {
    slots = tpprof_mem_map(SLOTS * sizeof *slots);
    // Lookups land anywhere in 12 MiB: with 4 KiB pages nearly every one is a
    // TLB miss as well as a cache miss.
    if (slots) madvise(slots, SLOTS * sizeof *slots, MADV_HUGEPAGE);
    by_id = tpprof_mem_map((MAX_IDS + 1) * sizeof *by_id);
    arena = tpprof_mem_map(ARENA_BYTES);
    return slots && by_id && arena;
}

// Each frame is hashed on its own (with its position) and the results are
// summed: no dependency chain from frame to frame, so the CPU overlaps the
// multiplies (a chained hash costs ~5 cycles of latency per frame).
static inline void hash_frames(const uintptr_t *ips, int n, uint64_t *h1, uint64_t *h2) {
    uint64_t a = (uint64_t)n * 0x9E3779B97F4A7C15ULL, b = (uint64_t)n;
    for (int i = 0; i < n; i++) {
        uint64_t x = ips[i] + (uint64_t)(i + 1) * 0x9E3779B97F4A7C15ULL;
        uint64_t y = ips[i] ^ ((uint64_t)(i + 1) * 0xC2B2AE3D27D4EB4FULL);
        a += (x ^ (x >> 29)) * 0xff51afd7ed558ccdULL;
        b += (y ^ (y >> 31)) * 0x9FB21C651E98DF25ULL;
    }
    a ^= a >> 32;
    a *= 0xc4ceb9fe1a85ec53ULL;
    a ^= a >> 29;
    b ^= b >> 33;
    b *= 0xff51afd7ed558ccdULL;
    b ^= b >> 29;
    *h1 = a | 1; // 0 marks an empty slot
    *h2 = b;
}

static uint32_t publish(struct slot *s, uint64_t h2, const uintptr_t *ips, int n) {
    atomic_store_explicit(&s->h2, h2, memory_order_relaxed);
    uint32_t id = atomic_fetch_add(&next_id, 1);
    size_t bytes = ((size_t)n + 1) * sizeof(uint64_t);
    size_t off = atomic_fetch_add(&arena_used, bytes);
    if (id > MAX_IDS || off + bytes > ARENA_BYTES) {
        atomic_store_explicit(&s->id, ID_FAILED, memory_order_release);
        return 0;
    }
    uint64_t *rec = (uint64_t *)(arena + off);
    rec[0] = (uint64_t)n;
    memcpy(rec + 1, ips, (size_t)n * sizeof *ips);
    by_id[id] = rec;
    atomic_store_explicit(&s->id, id, memory_order_release);
    return id;
}

static uint32_t lookup(uint64_t h1, uint64_t h2, const uintptr_t *ips, int n) {
    uint64_t idx = h1 & (SLOTS - 1);
    for (uint64_t probe = 0; probe < 64; probe++, idx = (idx + 1) & (SLOTS - 1)) {
        struct slot *s = &slots[idx];
        uint64_t cur = atomic_load_explicit(&s->h1, memory_order_acquire);
        if (cur == 0) {
            if (atomic_load_explicit(&next_id, memory_order_relaxed) > MAX_IDS) return 0;
            if (atomic_compare_exchange_strong(&s->h1, &cur, h1)) return publish(s, h2, ips, n);
        }
        if (cur != h1) continue;
        uint32_t id;
        // The claimant is between its CAS and its publish; a claimant that
        // vanished (fork) leaves the slot unusable, so give up after a while.
        unsigned spins = 0;
        while ((id = atomic_load_explicit(&s->id, memory_order_acquire)) == 0) {
            if (++spins > 100000) break;
            if (spins > 100) sched_yield();
        }
        if (id == 0 || id == ID_FAILED) continue;
        if (atomic_load_explicit(&s->h2, memory_order_relaxed) == h2) return id;
    }
    return 0;
}

static inline struct cache_entry *cache_slot(uint64_t h1) {
    struct cache_entry *c = cache;
    if (TPPROF_UNLIKELY(!c)) c = cache = tpprof_mem_map(CACHE_SLOTS * sizeof *c);
    return c ? &c[(h1 >> 40) & (CACHE_SLOTS - 1)] : NULL;
}

uint32_t tpprof_stack_find_fp(const uintptr_t *ips, int n, uint32_t fp_len, uint64_t h[2]) {
    hash_frames(ips, n, &h[0], &h[1]);
    struct cache_entry *e = cache_slot(h[0]);
    if (e && e->h1 == h[0] && e->h2 == h[1] && e->fp_len == fp_len) return e->id;
    return 0;
}

uint32_t tpprof_stack_intern_h(const uintptr_t *ips, int n, const uint64_t h[2], uint32_t fp_len) {
    if (TPPROF_UNLIKELY(!slots)) return 0;
    struct cache_entry *e = cache_slot(h[0]);
    if (e && e->h1 == h[0] && e->h2 == h[1]) {
        if (fp_len) e->fp_len = fp_len;
        return e->id;
    }
    uint32_t id = lookup(h[0], h[1], ips, n);
    if (e && id) {
        e->h1 = h[0];
        e->h2 = h[1];
        e->id = id;
        e->fp_len = fp_len;
    }
    return id;
}

uint32_t tpprof_stack_intern(const uintptr_t *ips, int n) {
    uint64_t h[2];
    hash_frames(ips, n, &h[0], &h[1]);
    return tpprof_stack_intern_h(ips, n, h, 0);
}

const uintptr_t *tpprof_stack_frames(uint32_t id, int *n) {
    if (id == 0 || id > MAX_IDS || !by_id[id]) {
        *n = 0;
        return NULL;
    }
    const uint64_t *rec = by_id[id];
    *n = (int)rec[0];
    return (const uintptr_t *)(rec + 1);
}

uint32_t tpprof_stack_count(void) {
    uint32_t n = atomic_load(&next_id);
    return n > MAX_IDS + 1 ? (uint32_t)MAX_IDS + 1 : n;
}
