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
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "base/base.h"
#include "base/mem.h"
#include "record/rings.h"
#include "record/stacks.h"

#define SLOT_BITS 19
#define SLOTS ((uint64_t)1 << SLOT_BITS)
#define MAX_IDS (SLOTS * 7 / 10)       // keep probe chains short
// The frames' arena: up to 256 MiB, mapped a MiB at a time as stacks come
// (one mapping of it all was 256 MiB of address space in every process,
// which a program under `ulimit -v` or strict overcommit then lacked).
#define ARENA_CHUNK ((size_t)1 << 20)
#define ARENA_CHUNKS 256
#define ID_FAILED UINT32_MAX
#define CACHE_SLOTS 16384          // 256 KiB per thread, touched as used
#define CACHE_WAYS 4               // entries per set (one cache line)
#define CACHE_SETS (CACHE_SLOTS / CACHE_WAYS)

struct slot {
    _Atomic uint64_t h1;
    _Atomic uint64_t h2;
    _Atomic uint32_t id;
    uint32_t unused;
};

// Per-thread: the last stacks seen, by h1, 4-way set associative: a set is
// one cache line, so a lookup touches one line, and a few thousand hot stacks
// no longer evict each other (direct-mapped, one in five lookups of a program
// with 3,600 sites missed and went to the depot). 16 bytes an entry: the
// cache compares all of h1 and the low half of h2 (96 bits; a false match is
// still far less likely than a hardware fault), the depot behind it all 128.
struct cache_entry {
    uint64_t h1;
    uint32_t h2lo;
    uint32_t id : 24;     // ids stay below MAX_IDS < 2^24
    uint32_t fp_len : 8;  // > 0: an FP walk that yields these frames is exact up to here (unwind.c)
};
_Static_assert(sizeof(struct cache_entry) == 16, "stack cache entries are 16 bytes");
_Static_assert(TPPROF_MAX_DEPTH < 256, "fp_len fits the cache entry");
_Static_assert(MAX_IDS < (1u << 24), "ids fit the cache entry");
static __thread struct cache_entry *cache TPPROF_TLS;

static struct slot *slots;
static uint64_t **by_id;               // id -> {n, frames...}
// The most ids given: MAX_IDS, or fewer for tests (TPPROF_TEST_MAX_STACKS).
static uint32_t max_ids = MAX_IDS;
// Stacks not kept because the depot was full (meta.stacks_full): their
// allocations are recorded without a stack.
_Atomic uint64_t tpprof_stacks_full;
static _Atomic uint32_t next_id = 1;
static _Atomic(char *) arena[ARENA_CHUNKS];
static _Atomic size_t arena_used;

bool tpprof_stacks_init(void) {
    const char *cap = getenv("TPPROF_TEST_MAX_STACKS");
    if (cap && atol(cap) > 0 && atol(cap) < (long)MAX_IDS) max_ids = (uint32_t)atol(cap);
    slots = tpprof_mem_map(SLOTS * sizeof *slots);
    // Lookups land anywhere in 12 MiB: with 4 KiB pages nearly every one is a
    // TLB miss as well as a cache miss.
    if (slots) madvise(slots, SLOTS * sizeof *slots, MADV_HUGEPAGE);
    by_id = tpprof_mem_map((MAX_IDS + 1) * sizeof *by_id);
    return slots && by_id;
}

static inline void hash_frames(const uintptr_t *ips, int n, uint64_t *h1, uint64_t *h2) {
    uint64_t acc[2] = {0, 0}, h[2];
    for (int i = 0; i < n; i++) tpprof_stack_hash_step(acc, ips[i]);
    tpprof_stack_hash_end(acc, n, h);
    *h1 = h[0];
    *h2 = h[1];
}

// Room for a record of `bytes` (at most a few KiB) in the arena, or NULL
// when it is full or a chunk cannot be mapped. A record never spans two
// chunks: one that would is given the next chunk's start instead (the rest
// of this one stays unused).
static uint64_t *arena_take(size_t bytes) {
    for (;;) {
        size_t off = atomic_fetch_add(&arena_used, bytes);
        size_t c = off / ARENA_CHUNK;
        if (c >= ARENA_CHUNKS) return NULL;
        if ((off + bytes - 1) / ARENA_CHUNK != c) continue;
        char *base = atomic_load_explicit(&arena[c], memory_order_acquire);
        if (!base) {
            char *fresh = tpprof_mem_map(ARENA_CHUNK);
            if (!fresh) return NULL;
            if (atomic_compare_exchange_strong(&arena[c], &base, fresh)) base = fresh;
            else tpprof_mem_unmap(fresh, ARENA_CHUNK); // another thread mapped it first
        }
        return (uint64_t *)(base + off % ARENA_CHUNK);
    }
}

static uint32_t publish(struct slot *s, uint64_t h2, const uintptr_t *ips, int n) {
    atomic_store_explicit(&s->h2, h2, memory_order_relaxed);
    uint32_t id = atomic_fetch_add(&next_id, 1);
    uint64_t *rec = id > max_ids ? NULL : arena_take(((size_t)n + 1) * sizeof(uint64_t));
    if (!rec) {
        atomic_store_explicit(&s->id, ID_FAILED, memory_order_release);
        atomic_fetch_add_explicit(&tpprof_stacks_full, 1, memory_order_relaxed);
        return 0;
    }
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
            if (atomic_load_explicit(&next_id, memory_order_relaxed) > max_ids) {
                atomic_fetch_add_explicit(&tpprof_stacks_full, 1, memory_order_relaxed);
                return 0;
            }
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
    atomic_fetch_add_explicit(&tpprof_stacks_full, 1, memory_order_relaxed); // a probe chain too long: as full
    return 0;
}

// The set of h1 (CACHE_WAYS entries, one cache line: the mapping is page
// aligned), or NULL when out of memory.
static inline struct cache_entry *cache_set(uint64_t h1) {
    struct cache_entry *c = cache;
    if (TPPROF_UNLIKELY(!c)) {
        c = cache = tpprof_mem_map(CACHE_SLOTS * sizeof *c);
        if (c && tpprof_self) { // released with the thread's ring
            tpprof_self->cache_mem = c;
            tpprof_self->cache_bytes = CACHE_SLOTS * sizeof *c;
        }
    }
    return c ? &c[((h1 >> 40) & (CACHE_SETS - 1)) * CACHE_WAYS] : NULL;
}

static inline struct cache_entry *cache_find(struct cache_entry *set, const uint64_t h[2]) {
    for (int i = 0; i < CACHE_WAYS; i++)
        if (set[i].h1 == h[0] && set[i].h2lo == (uint32_t)h[1]) return &set[i];
    return NULL;
}

uint32_t tpprof_stack_find_fp(const uint64_t h[2], uint32_t fp_len) {
    struct cache_entry *set = cache_set(h[0]);
    struct cache_entry *e = set ? cache_find(set, h) : NULL;
    return e && e->fp_len == fp_len ? e->id : 0;
}

uint32_t tpprof_stack_intern_h(const uintptr_t *ips, int n, const uint64_t h[2], uint32_t fp_len) {
    if (TPPROF_UNLIKELY(!slots)) return 0;
    struct cache_entry *set = cache_set(h[0]);
    struct cache_entry *e = set ? cache_find(set, h) : NULL;
    if (e) {
        if (fp_len) e->fp_len = fp_len & 255;
        return e->id;
    }
    uint32_t id = lookup(h[0], h[1], ips, n);
    if (set && id) { // newest first; the oldest of the set goes
        memmove(&set[1], &set[0], (CACHE_WAYS - 1) * sizeof *set);
        set[0].h1 = h[0];
        set[0].h2lo = (uint32_t)h[1];
        set[0].id = id & 0xffffff;
        set[0].fp_len = fp_len & 255;
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
