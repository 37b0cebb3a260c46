// livetable.c: the writer's hash tables: the live set (address -> block) and
// a u64 -> u32 map (sites, stack trie).
//
// Only the writer touches these, with its mutex held; they live in tpprof's
// own mappings (mem.c) so the leak scan never sees the addresses they hold.
// Open addressing, linear probing, backward-shift deletion (no tombstones).
// The live set's probe, insert and delete run once per event and are inline
// in writer.h; growing it is here.
#define _GNU_SOURCE
#include "writer/writer.h"
#include "base/mem.h"

static inline uint64_t mix(uint64_t x) { return tpprof_live_home(x); }

// ---------------------------------------------------------------------------
// Live set.

// Sparse while small (TPPROF_LIVE_SPARSE_BYTES, writer.h). alloc_heavy 10000
// steps, ~3,000 live blocks, 2 threads: the writer's merge took 29 ns per
// event (thread CPU time, median of 7) with the table at most 1/2 full, 25
// at 1/4, 22 at 1/8; 1 thread: probes stepped past 0.68 slots on average at
// 1/2, 0.24 at 1/4. Beyond it, at most half full: an insert probes ~2.5
// slots at load 1/2 against ~8.5 (five cache lines) at 3/4, and the table
// holds 2 slots per block, not 8. (At most 3/4 full, tried December 2026:
// the PyTorch loop's 325,000 live blocks at its peak in 16 MiB instead of
// 32, its CPU the same; 700,000 live blocks replaced 5 M times at random,
// 54 MB less RSS but 10% more CPU. Left at 1/2.)
bool tpprof_live_grow(struct tpprof_livetable *lt) {
    uint64_t ncap = lt->cap ? lt->cap * 2 : 1 << 12;
    struct tpprof_block *ns = tpprof_mem_map_populated(ncap * sizeof *ns);
    if (!ns) return false;
    for (uint64_t i = 0; i < lt->cap; i++) {
        struct tpprof_block *b = &lt->slots[i];
        if (!b->addr) continue;
        uint64_t j = mix(b->addr) & (ncap - 1);
        while (ns[j].addr) j = (j + 1) & (ncap - 1);
        ns[j] = *b;
    }
    tpprof_mem_unmap(lt->slots, lt->cap * sizeof *lt->slots);
    lt->slots = ns;
    lt->cap = ncap;
    lt->limit = ncap * sizeof *ns <= TPPROF_LIVE_SPARSE_BYTES ? ncap / 8 : ncap / 2;
    return true;
}

struct tpprof_block *tpprof_live_find(struct tpprof_livetable *lt, uint64_t addr) {
    if (!lt->cap || !addr) return NULL;
    struct tpprof_block *b = tpprof_live_probe(lt, addr);
    return b->addr ? b : NULL;
}

// ---------------------------------------------------------------------------
// u64 -> u32 map.

static bool map_grow(struct tpprof_map *m) {
    uint64_t ncap = m->cap ? m->cap * 2 : 1 << 12;
    uint64_t *nk = tpprof_mem_map_populated(ncap * sizeof *nk);
    uint32_t *nv = tpprof_mem_map_populated(ncap * sizeof *nv);
    if (!nk || !nv) {
        tpprof_mem_unmap(nk, ncap * sizeof *nk);
        tpprof_mem_unmap(nv, ncap * sizeof *nv);
        return false;
    }
    for (uint64_t i = 0; i < m->cap; i++) {
        if (!m->keys[i]) continue;
        uint64_t j = mix(m->keys[i]) & (ncap - 1);
        while (nk[j]) j = (j + 1) & (ncap - 1);
        nk[j] = m->keys[i];
        nv[j] = m->vals[i];
    }
    tpprof_mem_unmap(m->keys, m->cap * sizeof *m->keys);
    tpprof_mem_unmap(m->vals, m->cap * sizeof *m->vals);
    m->keys = nk;
    m->vals = nv;
    m->cap = ncap;
    return true;
}

uint32_t tpprof_map_get(const struct tpprof_map *m, uint64_t key) {
    if (!m->cap || !key) return 0;
    uint64_t j = mix(key) & (m->cap - 1);
    while (m->keys[j]) {
        if (m->keys[j] == key) return m->vals[j];
        j = (j + 1) & (m->cap - 1);
    }
    return 0;
}

bool tpprof_map_put(struct tpprof_map *m, uint64_t key, uint32_t val) {
    if (!key) return false;
    if ((m->count + 1) * 2 > m->cap && !map_grow(m)) return false;
    uint64_t j = mix(key) & (m->cap - 1);
    while (m->keys[j] && m->keys[j] != key) j = (j + 1) & (m->cap - 1);
    if (!m->keys[j]) m->count++;
    m->keys[j] = key;
    m->vals[j] = val;
    return true;
}

uint32_t tpprof_map_take(struct tpprof_map *m, uint64_t key) {
    if (!m->cap || !key) return 0;
    uint64_t mask = m->cap - 1, i = mix(key) & mask;
    while (m->keys[i] && m->keys[i] != key) i = (i + 1) & mask;
    if (!m->keys[i]) return 0;
    uint32_t val = m->vals[i];
    for (uint64_t j = i;;) { // backward-shift deletion, as in tpprof_live_erase
        j = (j + 1) & mask;
        if (!m->keys[j]) break;
        uint64_t home = mix(m->keys[j]) & mask;
        bool stays = (i <= j) ? (home > i && home <= j) : (home > i || home <= j);
        if (stays) continue;
        m->keys[i] = m->keys[j];
        m->vals[i] = m->vals[j];
        i = j;
    }
    m->keys[i] = 0;
    m->count--;
    return val;
}
