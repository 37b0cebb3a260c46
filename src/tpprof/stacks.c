// stacks.c: the stack depot, naming each distinct stack with a small id.
//
// Runs inside malloc hooks on any thread at once, so it is lock-free: an
// open-addressing table of (hash, id) slots. A new stack claims an empty slot
// by CAS on its hash, copies its frames into an append-only arena, then
// publishes the id (release); readers that meet the hash wait for the id and
// compare the frames, so two stacks with equal hashes stay distinct. Nothing
// is ever removed. The writer builds the stack_nodes trie from these frames.
// This file must not call malloc.
#define _GNU_SOURCE
#include <sched.h>
#include <string.h>

#include "tpprof_internal.h"

#define SLOT_BITS 19
#define SLOTS ((uint64_t)1 << SLOT_BITS)
#define MAX_IDS (SLOTS * 7 / 10)       // keep probe chains short
#define ARENA_BYTES ((size_t)256 << 20)
#define ID_FAILED UINT32_MAX

struct slot {
    _Atomic uint64_t hash;
    _Atomic uint32_t id;
    uint32_t unused;
};

static struct slot *slots;
static uint64_t **by_id;               // id -> {n, frames...}
static _Atomic uint32_t next_id = 1;
static char *arena;
static _Atomic size_t arena_used;

bool tpprof_stacks_init(void) {
    slots = tpprof_mem_map(SLOTS * sizeof *slots);
    by_id = tpprof_mem_map((MAX_IDS + 1) * sizeof *by_id);
    arena = tpprof_mem_map(ARENA_BYTES);
    return slots && by_id && arena;
}

static inline uint64_t hash_frames(const uintptr_t *ips, int n) {
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ (uint64_t)n;
    for (int i = 0; i < n; i++) {
        h = (h ^ ips[i]) * 0xff51afd7ed558ccdULL;
        h ^= h >> 32;
    }
    return h | 1; // 0 marks an empty slot
}

static uint32_t publish(struct slot *s, const uintptr_t *ips, int n) {
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

uint32_t tpprof_stack_intern(const uintptr_t *ips, int n) {
    if (TPPROF_UNLIKELY(!slots)) return 0;
    uint64_t h = hash_frames(ips, n);
    uint64_t idx = h & (SLOTS - 1);
    for (uint64_t probe = 0; probe < 64; probe++, idx = (idx + 1) & (SLOTS - 1)) {
        struct slot *s = &slots[idx];
        uint64_t cur = atomic_load_explicit(&s->hash, memory_order_acquire);
        if (cur == 0) {
            if (atomic_load_explicit(&next_id, memory_order_relaxed) > MAX_IDS) return 0;
            if (atomic_compare_exchange_strong(&s->hash, &cur, h)) return publish(s, ips, n);
        }
        if (cur != h) continue;
        uint32_t id;
        // The claimant is between its CAS and its publish; a claimant that
        // vanished (fork) leaves the slot unusable, so give up after a while.
        unsigned spins = 0;
        while ((id = atomic_load_explicit(&s->id, memory_order_acquire)) == 0) {
            if (++spins > 100000) break;
            if (spins > 100) sched_yield();
        }
        if (id == 0 || id == ID_FAILED) continue;
        const uint64_t *rec = by_id[id];
        if (rec[0] == (uint64_t)n && memcmp(rec + 1, ips, (size_t)n * sizeof *ips) == 0) return id;
    }
    return 0;
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
