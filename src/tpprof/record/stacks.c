// stacks.c: the stack depot, naming each distinct stack with a small id.
//
// Runs inside malloc hooks on any thread at once, so it is lock-free. It
// grows with the program: a chain of open-addressing tables ("levels"), a
// small first one, then 16 times as big, each next twice the one before,
// made as the newest fills to 70%;
// nothing is ever moved or removed, so a slot found stays valid. A slot is
// keyed by a 96-bit hash of the frames (the first of two independent 64-bit
// hashes and the low half of the second; a false match needs both to
// collide, about 2^-95 per pair: 2^-57 for the pairs of a million stacks,
// far below the chance of a hardware fault, so frames are not compared). A
// lookup probes the older levels first, then the newest, where a new stack
// claims an empty slot by CAS on its first hash, copies its frames into an
// append-only arena, then publishes the rest of its hash and its id in one
// word (release). Two threads
// that race with the making of a new level may each give one stack an id
// (one in the old level, one in the new): harmless, the writer maps both to
// the same trie leaf and so to the same site. Only a failed mmap (memory
// exhausted) leaves a stack without an id: counted (meta.stacks_full), and
// `tpprof check` fails on it. A per-thread 4-way cache in front keeps the
// hot stacks in L1/L2: the tables themselves are a cache miss. The writer
// builds the stack_nodes trie from the frames. This file must not call
// malloc.
#define _GNU_SOURCE
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "base/base.h"
#include "base/mem.h"
#include "record/rings.h"
#include "record/stacks.h"

// Level 0 has 2^first_bits slots (first_bits: FIRST_BITS, or fewer for
// tests: TPPROF_TEST_STACK_SLOT_BITS), level k > 0 2^(first_bits + JUMP_BITS
// + k - 1); 16 bytes a slot (four to a cache line; 24 before the second
// hash was cut to 32 bits: the PyTorch loop's 1.6 million slots, 12 MiB
// more), 2^31 slots in all. A short process (a build's cc1 or as: a few
// thousand stacks) stays in level 0, 512 KiB of 4 KiB pages touched as
// used; a first level of 8 MiB on huge pages was zeroed by the kernel
// whole for those few thousand stacks (~7 ms of a small cc1's kernel
// time). A program with many stacks probes one small level more (in cache,
// and prefetched with the rest: depot_prefetch) and goes on with 8 MiB on
// huge pages, then doubling.
#define FIRST_BITS 15
#define JUMP_BITS 4
#define LEVELS 14
#define HUGE_LEVEL 1 // from here on tables are on 2 MiB pages
#define FILL_PCT 70                   // keep probe chains short
#define PROBES 64
// The frames' arena, mapped a MiB at a time as stacks come (one mapping of
// it all would be address space in every process, which a program under
// `ulimit -v` or strict overcommit then lacked); up to 64 GiB.
#define ARENA_CHUNK ((size_t)1 << 20)
#define ARENA_CHUNKS ((size_t)1 << 16)
// id -> frames: a directory of chunks of 2^16 pointers, mapped as ids come.
#define ID_CHUNK_BITS 16
#define ID_CHUNK ((uint32_t)1 << ID_CHUNK_BITS)
#define ID_CHUNKS ((uint32_t)1 << 16)
#define ID_FAILED UINT32_MAX
#define CACHE_SLOTS 16384          // 256 KiB per thread, touched as used
#define CACHE_BIG_SLOTS 65536      // 1 MiB, for a thread that misses often
#define CACHE_WAYS 4               // entries per set (one cache line)

// h1 (0: free), then the low half of h2 above the id (0: being published).
struct slot {
    _Atomic uint64_t h1;
    _Atomic uint64_t tail;
};
_Static_assert(sizeof(struct slot) == 16, "depot slots are 16 bytes");
static inline uint64_t slot_tail(uint64_t h2, uint32_t id) { return (uint64_t)(uint32_t)h2 << 32 | id; }

struct level {
    _Atomic(struct slot *) slots;
    _Atomic uint64_t used;            // slots claimed
};

// Per-thread: the last stacks seen, 4-way set associative, the set picked by
// bits of h2 (set_own, below): a set is one cache line, so a lookup touches
// one line, and a few thousand hot stacks no longer evict each other
// (direct-mapped, one in five lookups of a program with 3,600 sites missed
// and went to the depot). 16 bytes an entry: the cache compares h1's low 48
// bits and h2's low 24, 72 bits (h1's lowest always 1; 0: an empty way),
// and the bits of h2 that picked its set where the entry is in its own set,
// not where it spilled into its second (a false match is still far less
// likely than a hardware fault); the depot behind it compares all 128.
struct cache_entry {
    uint64_t h1lo : 48;
    uint64_t next : 16;   // the set the thread's next lookup went to last time (cache_next)
    uint32_t id;
    uint32_t h2lo : 24;
    uint32_t fp_len : 8;  // > 0: an FP walk that yields these frames is exact up to here (unwind.c)
};
_Static_assert(sizeof(struct cache_entry) == 16, "stack cache entries are 16 bytes");
_Static_assert(TPPROF_MAX_DEPTH < 256, "fp_len fits the cache entry");
_Static_assert(CACHE_BIG_SLOTS / CACHE_WAYS <= 65536, "a set's number fits the hint");
#define H1LO(h1) ((h1) & (((uint64_t)1 << 48) - 1))
#define H2LO(h2) ((uint32_t)(h2) & 0xffffffu)
static __thread struct cache_entry *cache TPPROF_TLS;
// The cache's sets - 1, and its misses so far: a thread that has missed as
// many times as the cache has entries gets one four times the size, once
// (alloc_heavy built with clang allocates from 46,000 distinct stacks, and
// one in ten of its lookups went on to the depot's tables, a cache and TLB
// miss each).
static __thread uint32_t cache_mask TPPROF_TLS;
static __thread uint32_t cache_misses TPPROF_TLS;
// The thread's cache misses in a row (up to 255): see depot_prefetch.
static __thread uint8_t miss_run TPPROF_TLS;
// The entry of the thread's last lookup (cache_next), NULL after the cache
// is made again.
static __thread struct cache_entry *last_entry TPPROF_TLS;

static struct level levels[LEVELS];
static _Atomic int top;                // the newest level
static unsigned first_bits = FIRST_BITS;
typedef _Atomic(uint64_t *) id_ptr;
static _Atomic(id_ptr *) by_id[ID_CHUNKS]; // id -> {n, frames...}
// The most ids given: all, or fewer for tests (TPPROF_TEST_MAX_STACKS, which
// stands for memory running out).
static uint32_t max_ids = ID_FAILED - 1;
// Stacks not kept because memory ran out (meta.stacks_full): their
// allocations are recorded without a stack.
_Atomic uint64_t tpprof_stacks_full;
static _Atomic uint32_t next_id = 1;
static _Atomic(char *) arena[ARENA_CHUNKS];
static _Atomic size_t arena_used;
// A chunk's frames are needed until the writer has turned each of its
// stacks into a trie leaf (tpprof_stack_release): then it is unmapped (a
// PyTorch run's 600,000 stacks of 32 frames were 160 MiB). The ranges taken
// from arena_used tile the arena, so a chunk is complete when every range
// that touches it was accounted for: chunk_done sums those bytes (a record
// that would span two chunks accounts for the tail of one and its own
// start in the next), after chunk_recs counted its record.
static _Atomic uint32_t chunk_done[ARENA_CHUNKS], chunk_recs[ARENA_CHUNKS];
static uint32_t chunk_released[ARENA_CHUNKS]; // the writer's
// Released chunks kept mapped for the next ones the arena reaches (a few
// MiB at most): a fresh mapping is a page fault and a zeroed page every 4
// KiB of frames, which the allocating thread paid inside its hook (the
// torch_mlp.py bench's 700,000 new stacks: 3.5% of the program thread's
// samples in those faults). A slot holds a chunk or NULL; each is taken and
// given by one atomic exchange or CAS, so no list to get wrong.
#define SPARE_CHUNKS 8
static _Atomic(char *) spare[SPARE_CHUNKS];

static uint64_t level_slots(int k) {
    return (uint64_t)1 << (k == 0 ? first_bits : first_bits + JUMP_BITS + (unsigned)k - 1);
}

// Level k's table, mapped now if no thread did yet; NULL when out of memory.
static struct slot *level_map(int k) {
    struct slot *s = atomic_load_explicit(&levels[k].slots, memory_order_acquire);
    if (s) return s;
    size_t bytes = level_slots(k) * sizeof *s;
    // Lookups land anywhere in a big one: with 4 KiB pages nearly every one
    // is a TLB miss as well as a cache miss. Aligned, so that all of it is
    // on huge pages (mmap's 4 KiB alignment left up to 2 MiB of each table
    // on small pages: 512 faults in the allocating hook).
    // Populated: a probe reads a slot before it claims it, and a read of an
    // untouched page maps the zero page, which the claim then copies.
    struct slot *fresh = k >= HUGE_LEVEL ? tpprof_mem_map_huge(bytes) : tpprof_mem_map_populated(bytes);
    if (!fresh) return NULL;
    if (atomic_compare_exchange_strong(&levels[k].slots, &s, fresh)) return fresh;
    tpprof_mem_unmap(fresh, bytes); // another thread mapped it first
    return s;
}

bool tpprof_stacks_init(void) {
    const char *cap = getenv("TPPROF_TEST_MAX_STACKS");
    if (cap && atol(cap) > 0 && atol(cap) < (long)max_ids) max_ids = (uint32_t)atol(cap);
    const char *bits = getenv("TPPROF_TEST_STACK_SLOT_BITS");
    if (bits && atoi(bits) >= 4 && atoi(bits) <= FIRST_BITS) first_bits = (unsigned)atoi(bits);
    return level_map(0) != NULL;
}

static inline void hash_frames(const uintptr_t *ips, int n, uint64_t *h1, uint64_t *h2) {
    uint64_t acc[2] = {0, 0}, h[2];
    for (int i = 0; i < n; i++) tpprof_stack_hash_step(acc, ips[i]);
    tpprof_stack_hash_end(acc, n, h);
    *h1 = h[0];
    *h2 = h[1];
}

// A kept chunk (not zeroed: a record is written whole before it is
// published), or NULL.
static char *spare_take(void) {
    for (int i = 0; i < SPARE_CHUNKS; i++)
        if (atomic_load_explicit(&spare[i], memory_order_relaxed)) {
            char *c = atomic_exchange_explicit(&spare[i], NULL, memory_order_acquire);
            if (c) return c;
        }
    return NULL;
}

// A chunk no longer used: kept if a slot is free, else unmapped.
static void spare_give(char *c) {
    for (int i = 0; i < SPARE_CHUNKS; i++) {
        char *none = NULL;
        if (atomic_compare_exchange_strong_explicit(&spare[i], &none, c, memory_order_release, memory_order_relaxed))
            return;
    }
    tpprof_mem_unmap(c, ARENA_CHUNK);
}

// Room for a record of `bytes` (at most a few KiB) in the arena, or NULL
// when it is full or a chunk cannot be mapped; *chunk says which. A record
// never spans two chunks: one that would is given the next chunk's start
// instead (the rest of this one stays unused). The taker calls arena_done
// once the record is written (or given up).
static uint64_t *arena_take(size_t bytes, size_t *chunk) {
    for (;;) {
        size_t off = atomic_fetch_add(&arena_used, bytes);
        size_t c = off / ARENA_CHUNK;
        if (c >= ARENA_CHUNKS) return NULL;
        if ((off + bytes - 1) / ARENA_CHUNK != c) { // the tail of c, and a start in c + 1
            size_t tail = (c + 1) * ARENA_CHUNK - off;
            atomic_fetch_add_explicit(&chunk_done[c], (uint32_t)tail, memory_order_release);
            if (c + 1 < ARENA_CHUNKS)
                atomic_fetch_add_explicit(&chunk_done[c + 1], (uint32_t)(bytes - tail), memory_order_release);
            continue;
        }
        char *base = atomic_load_explicit(&arena[c], memory_order_acquire);
        if (!base) {
            char *fresh = spare_take();
            // Filled front to back: one past the first is populated at once
            // (256 faults in the allocating hook otherwise; the first stays
            // lazy, for a short process's few stacks).
            if (!fresh) fresh = c ? tpprof_mem_map_populated(ARENA_CHUNK) : tpprof_mem_map(ARENA_CHUNK);
            if (!fresh) {
                atomic_fetch_add_explicit(&chunk_done[c], (uint32_t)bytes, memory_order_release);
                return NULL;
            }
            if (atomic_compare_exchange_strong(&arena[c], &base, fresh)) base = fresh;
            else spare_give(fresh); // another thread mapped it first
        }
        *chunk = c;
        return (uint64_t *)(base + off % ARENA_CHUNK);
    }
}

// The record taken from chunk c is written (rec: the writer will release
// it) or given up.
static void arena_done(size_t c, size_t bytes, bool rec) {
    if (rec) atomic_fetch_add_explicit(&chunk_recs[c], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&chunk_done[c], (uint32_t)bytes, memory_order_release);
}

// Where id's frames pointer lives, its chunk mapped now if need be; NULL
// when out of memory.
static id_ptr *id_slot(uint32_t id) {
    uint32_t c = id >> ID_CHUNK_BITS;
    id_ptr *chunk = atomic_load_explicit(&by_id[c], memory_order_acquire);
    if (!chunk) {
        // Ids come in order: a chunk after the first will be written whole,
        // so it is zeroed in one go rather than by 128 faults in the hook.
        id_ptr *fresh = c ? tpprof_mem_map_populated(ID_CHUNK * sizeof *fresh) : tpprof_mem_map(ID_CHUNK * sizeof *fresh);
        if (!fresh) return NULL;
        if (atomic_compare_exchange_strong(&by_id[c], &chunk, fresh)) chunk = fresh;
        else tpprof_mem_unmap(fresh, ID_CHUNK * sizeof *fresh);
    }
    return &chunk[id & (ID_CHUNK - 1)];
}

static uint32_t publish(struct slot *s, uint64_t h2, const uintptr_t *ips, int n) {
    uint32_t id = atomic_fetch_add(&next_id, 1);
    size_t bytes = ((size_t)n + 1) * sizeof(uint64_t), c = 0;
    uint64_t *rec = id > max_ids ? NULL : arena_take(bytes, &c);
    id_ptr *at = rec ? id_slot(id) : NULL;
    if (!at) {
        if (rec) arena_done(c, bytes, false);
        atomic_store_explicit(&s->tail, slot_tail(h2, ID_FAILED), memory_order_release);
        atomic_fetch_add_explicit(&tpprof_stacks_full, 1, memory_order_relaxed);
        return 0;
    }
    // The chunk's counts first: a locked add after the copy waited for the
    // copy's stores, each a cache miss in fresh arena lines (a fifth of
    // probe's samples on the PyTorch loop); with the hooks' tickets taken
    // without one, nothing in the hook waits for them now. (The writer
    // frees a chunk only once it has released each of its stacks, which
    // it cannot do before this one's id is published below.)
    arena_done(c, bytes, true);
    rec[0] = (uint64_t)n | (uint64_t)c << 32;
    memcpy(rec + 1, ips, (size_t)n * sizeof *ips);
    atomic_store_explicit(at, rec, memory_order_relaxed); // the id's release below publishes it
    atomic_store_explicit(&s->tail, slot_tail(h2, id), memory_order_release);
    return id;
}

enum { PROBE_MISS = 0, PROBE_FULL = -1 };

// Looks for (h1, h2) in level k; claims an empty slot for it if `insert`.
// Returns its id, PROBE_MISS (not there, not inserted), PROBE_FULL (the level
// is full or its probe chain too long: try the next level) or ID_FAILED
// (memory ran out: counted).
static int64_t probe(int k, bool insert, uint64_t h1, uint64_t h2, const uintptr_t *ips, int n) {
    struct slot *slots = atomic_load_explicit(&levels[k].slots, memory_order_acquire);
    uint64_t mask = level_slots(k) - 1, idx = h1 & mask;
    for (int p = 0; p < PROBES; p++, idx = (idx + 1) & mask) {
        struct slot *s = &slots[idx];
        uint64_t cur = atomic_load_explicit(&s->h1, memory_order_acquire);
        if (cur == 0) {
            if (!insert) return PROBE_MISS;
            if (atomic_load_explicit(&levels[k].used, memory_order_relaxed) >= level_slots(k) * FILL_PCT / 100)
                return PROBE_FULL;
            if (atomic_load_explicit(&next_id, memory_order_relaxed) > max_ids) return ID_FAILED;
            if (atomic_compare_exchange_strong(&s->h1, &cur, h1)) {
                atomic_fetch_add_explicit(&levels[k].used, 1, memory_order_relaxed);
                uint32_t id = publish(s, h2, ips, n);
                return id ? (int64_t)id : -2; // -2: publish counted the failure
            }
        }
        if (cur != h1) continue;
        uint64_t tail;
        // The claimant is between its CAS and its publish; a claimant that
        // vanished (fork) leaves the slot unusable, so give up after a while.
        unsigned spins = 0;
        while ((tail = atomic_load_explicit(&s->tail, memory_order_acquire)) == 0) {
            if (++spins > 100000) break;
            if (spins > 100) sched_yield();
        }
        uint32_t id = (uint32_t)tail;
        if (id == 0 || id == ID_FAILED) continue;
        if (tail >> 32 == (uint32_t)h2) return id;
    }
    return insert ? PROBE_FULL : PROBE_MISS;
}

static uint32_t lookup(uint64_t h1, uint64_t h2, const uintptr_t *ips, int n) {
    int t = atomic_load_explicit(&top, memory_order_acquire);
    for (int k = 0; k < t; k++) { // the older levels, as they are
        int64_t r = probe(k, false, h1, h2, ips, n);
        if (r > 0 && r != ID_FAILED) return (uint32_t)r;
    }
    for (;;) {
        int64_t r = probe(t, true, h1, h2, ips, n);
        if (r == -2) return 0;
        if (r == ID_FAILED) break;
        if (r > 0) return (uint32_t)r;
        // The newest level is full: on to the next, made now if need be.
        if (t + 1 >= LEVELS || !level_map(t + 1)) break;
        int cur = t;
        atomic_compare_exchange_strong(&top, &cur, t + 1);
        t++;
    }
    atomic_fetch_add_explicit(&tpprof_stacks_full, 1, memory_order_relaxed);
    return 0;
}

// Maps the calling thread's cache of `slots` entries (the old one goes),
// with its bitmap of sets that spilled (below) after the entries.
// The big one is populated: made for a thread that missed 16,384 times, it
// will be filled, and a set read before it is written maps the zero page
// that the write then copies (two faults a page, in the hook).
static size_t cache_map_bytes(uint32_t slots) {
    return slots * sizeof(struct cache_entry) + slots / CACHE_WAYS / 8;
}

static struct cache_entry *cache_make(uint32_t slots) {
    size_t bytes = cache_map_bytes(slots);
    struct cache_entry *c = slots > CACHE_SLOTS ? tpprof_mem_map_populated(bytes) : tpprof_mem_map(bytes);
    if (!c) return NULL;
    if (cache) tpprof_mem_unmap(cache, cache_map_bytes((cache_mask + 1) * CACHE_WAYS));
    cache = c;
    last_entry = NULL;
    cache_mask = slots / CACHE_WAYS - 1;
    if (tpprof_self) { // released with the thread's ring
        tpprof_self->cache_mem = c;
        tpprof_self->cache_bytes = bytes;
    }
    return c;
}

// The cache, made now if need be (NULL when out of memory).
static inline struct cache_entry *cache_get(void) {
    struct cache_entry *c = cache;
    if (TPPROF_UNLIKELY(!c)) c = cache_make(CACHE_SLOTS);
    return c;
}

// A stack's own set and its second. A stack pushed out of its own set, full
// of newer ones, moves to a free way of its second set, and its own set is
// marked as one that spilled (a bit a set, after the entries): a lookup
// that misses a set so marked looks in the second set too. With 4 ways,
// 9% of alloc_heavy's 46,000 hot stacks (clang's build) did not fit their
// set (65,536 entries) and went to the depot each time (its tables, the
// verdicts again: 310,000 of 4.32 M lookups).
static inline uint32_t set_own(uint64_t h2) { return (uint32_t)(h2 >> 40) & cache_mask; }
static inline uint32_t set_second(uint64_t h1lo) { return (uint32_t)(h1lo >> 20) & cache_mask; }
static inline uint8_t *spilled(struct cache_entry *c) { return (uint8_t *)&c[(cache_mask + 1) * CACHE_WAYS]; }

static inline struct cache_entry *cache_find(struct cache_entry *set, const uint64_t h[2]) {
    for (int i = 0; i < CACHE_WAYS; i++)
        if (set[i].h1lo == H1LO(h[0]) && set[i].h2lo == H2LO(h[1])) return &set[i];
    return NULL;
}

// A thread making new stacks one after another (miss_run, below: the
// PyTorch loop's import) neither looks in the second set nor spills into it:
// for it each would be one more cache miss a new stack.
static inline struct cache_entry *cache_lookup(struct cache_entry *c, const uint64_t h[2]) {
    uint32_t a = set_own(h[1]);
    struct cache_entry *e = cache_find(&c[a * CACHE_WAYS], h);
    if (TPPROF_LIKELY(e) || miss_run >= 2 || !(spilled(c)[a >> 3] >> (a & 7) & 1)) return e;
    return cache_find(&c[set_second(h[0]) * CACHE_WAYS], h);
}

// Puts h's entry first in its own set; the oldest there goes, to its second
// set if that was its own set and the second has a free way.
static struct cache_entry *cache_put(struct cache_entry *c, const uint64_t h[2], uint32_t id, uint32_t fp_len) {
    uint32_t a = set_own(h[1]);
    struct cache_entry *set = &c[a * CACHE_WAYS], old = set[CACHE_WAYS - 1];
    memmove(&set[1], &set[0], (CACHE_WAYS - 1) * sizeof *set);
    // (The last lookup's entry, if in this set, moved a way on, or went.)
    if (last_entry >= set && last_entry < set + CACHE_WAYS)
        last_entry = last_entry == set + CACHE_WAYS - 1 ? NULL : last_entry + 1;
    set[0].h1lo = H1LO(h[0]);
    set[0].next = 0;
    set[0].h2lo = H2LO(h[1]);
    set[0].id = id;
    set[0].fp_len = fp_len & 255;
    // (An entry whose second set is this one is a guest here, spilled from
    // its own set, or has no second set: it goes.)
    uint32_t b = set_second(old.h1lo);
    if (!old.h1lo || b == a || miss_run >= 2) return &set[0];
    struct cache_entry *second = &c[b * CACHE_WAYS];
    for (int i = 0; i < CACHE_WAYS; i++)
        if (!second[i].h1lo) {
            second[i] = old;
            spilled(c)[a >> 3] |= (uint8_t)(1u << (a & 7));
            return &set[0];
        }
    return &set[0];
}

// The set the lookup after e's stack went to last time is asked of memory
// now: a program allocates in a pattern (alloc_heavy: the same eight or
// nine stacks, one after the other, for each op of a path through its
// calls), and the next lookup, a few hundred ns later, then finds its line
// in the CPU's cache (with tens of thousands of hot stacks, a lookup missed
// the CPU's caches nearly each time: the program writes ~150 KiB between
// two uses of a stack). The last lookup's entry learns that this one went
// to set `set`. Not for a thread making new stacks one after another.
static inline void cache_next(struct cache_entry *c, struct cache_entry *e, uint32_t set) {
    struct cache_entry *last = last_entry;
    if (last) last->next = set & 0xffff;
    last_entry = e;
    if (e && miss_run < 2) __builtin_prefetch(&c[(e->next & cache_mask) * CACHE_WAYS]);
}

uint32_t tpprof_stack_find_fp(const uint64_t h[2], uint32_t fp_len) {
    struct cache_entry *c = cache_get();
    struct cache_entry *e = c ? cache_lookup(c, h) : NULL;
    if (!e || e->fp_len != fp_len) return 0;
    cache_next(c, e, set_own(h[1]));
    if (TPPROF_UNLIKELY(miss_run)) miss_run = 0; // (a hit ends a run of misses here too)
    return e->id;
}

// The first slot each level would probe for h1, asked of memory now. A
// thread making new stacks one after another (PyTorch's import: 700,000
// distinct stacks in 1.1 million allocations) misses its cache and then
// each level's table, three cache and TLB misses one after the other:
// fetched together they cost about one. Only after two misses in a row: a
// thread whose stacks are in its cache would fetch lines it never reads.
static inline void depot_prefetch(uint64_t h1) {
    int t = atomic_load_explicit(&top, memory_order_relaxed);
    for (int k = 0; k <= t; k++) {
        const struct slot *slots = atomic_load_explicit(&levels[k].slots, memory_order_relaxed);
        if (slots) __builtin_prefetch(&slots[h1 & (level_slots(k) - 1)]);
    }
}

uint32_t tpprof_stack_intern_h(const uintptr_t *ips, int n, const uint64_t h[2], uint32_t fp_len) {
    if (TPPROF_UNLIKELY(!atomic_load_explicit(&levels[0].slots, memory_order_relaxed))) return 0;
    if (miss_run >= 2) depot_prefetch(h[0]);
    struct cache_entry *c = cache_get();
    struct cache_entry *e = c ? cache_lookup(c, h) : NULL;
    if (e) {
        miss_run = 0;
        if (fp_len) e->fp_len = fp_len & 255;
        cache_next(c, e, set_own(h[1]));
        return e->id;
    }
    if (miss_run < 255) miss_run++;
    uint32_t id = lookup(h[0], h[1], ips, n);
    if (TPPROF_UNLIKELY(++cache_misses == CACHE_SLOTS) && cache_make(CACHE_BIG_SLOTS)) c = cache;
    if (c && id) cache_next(c, cache_put(c, h, id, fp_len), set_own(h[1]));
    return id;
}

uint32_t tpprof_stack_intern(const uintptr_t *ips, int n) {
    uint64_t h[2];
    hash_frames(ips, n, &h[0], &h[1]);
    return tpprof_stack_intern_h(ips, n, h, 0);
}

// Id's slot in by_id, or NULL (no id, or its chunk of slots not made).
static inline id_ptr *slot_of_id(uint32_t id) {
    id_ptr *chunk = id == 0 || id == ID_FAILED ? NULL : atomic_load_explicit(&by_id[id >> ID_CHUNK_BITS], memory_order_acquire);
    return chunk ? &chunk[id & (ID_CHUNK - 1)] : NULL;
}

const uintptr_t *tpprof_stack_frames(uint32_t id, int *n) {
    id_ptr *slot = slot_of_id(id);
    const uint64_t *rec = slot ? atomic_load_explicit(slot, memory_order_acquire) : NULL;
    if (!rec) {
        *n = 0;
        return NULL;
    }
    *n = (int)(uint32_t)rec[0];
    return (const uintptr_t *)(rec + 1);
}

void tpprof_stack_prefetch(uint32_t id) {
    id_ptr *slot = slot_of_id(id);
    const char *rec = slot ? (const char *)atomic_load_explicit(slot, memory_order_acquire) : NULL;
    if (!rec) return;
    // (A PyTorch stack's 45 frames are 368 bytes with their count.)
    for (int k = 0; k < 6; k++) __builtin_prefetch(rec + 64 * k);
}

// Unmaps chunk c if it is complete and the writer released all its stacks.
static void chunk_try_free(size_t c) {
    if (atomic_load_explicit(&chunk_done[c], memory_order_acquire) == ARENA_CHUNK &&
        chunk_released[c] == atomic_load_explicit(&chunk_recs[c], memory_order_relaxed)) {
        char *base = atomic_exchange(&arena[c], NULL);
        if (base) spare_give(base);
    }
}

void tpprof_stack_release(uint32_t id) {
    id_ptr *slot = slot_of_id(id);
    uint64_t *rec = slot ? atomic_exchange_explicit(slot, NULL, memory_order_acquire) : NULL;
    if (!rec) return;
    size_t c = (size_t)(rec[0] >> 32);
    chunk_released[c]++;
    // The chunk of the newest stack released is nearly always the one the
    // program is filling, whose counters' cache line each new stack writes:
    // reading them at every release was a miss each (chunk_try_free, ~1%
    // of a PyTorch run's samples, nearly all on that load). A chunk is
    // complete only once a stack past it was taken (the one that crosses
    // its end starts the next), so it is looked at when a stack of a later
    // chunk is released, and again at each of its own released after that.
    static size_t newest; // the writer's
    if (c > newest) {
        for (size_t k = newest; k < c; k++) chunk_try_free(k);
        newest = c;
    } else if (c < newest) {
        chunk_try_free(c);
    }
}

uint32_t tpprof_stack_count(void) { return atomic_load(&next_id); }

uint32_t tpprof_stack_cache_misses(void) { return cache_misses; }

int tpprof_stack_levels(void) { return atomic_load(&top) + 1; }

size_t tpprof_stack_arena_spares(void) {
    size_t n = 0;
    for (int i = 0; i < SPARE_CHUNKS; i++) n += atomic_load(&spare[i]) != NULL;
    return n;
}

size_t tpprof_stack_arena_chunks(void) {
    size_t n = 0, used = atomic_load(&arena_used) / ARENA_CHUNK + 1;
    for (size_t c = 0; c < used && c < ARENA_CHUNKS; c++) n += atomic_load(&arena[c]) != NULL;
    return n;
}
