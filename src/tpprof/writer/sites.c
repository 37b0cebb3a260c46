// sites.c: the writer's stack trie (depot stack ids -> stack_nodes) and its
// sites ((stack, kind) -> totals); the inline parts every event takes are
// in sites.h. Writer-owned (writer.h): never on a program thread.
#define _GNU_SOURCE
#include <string.h>

#include "writer/sites.h"
#include "base/mem.h"
#include "record/stacks.h"
#include "writer/writer.h"

// Stack trie lookup: node ids hashed by (parent, ip).
static uint32_t *trie_slots;
static uint64_t trie_cap;

// ---------------------------------------------------------------------------
// Stacks: depot id -> trie leaf.

static uint64_t trie_hash(uint32_t parent, uint64_t ip) {
    uint64_t x = ip ^ ((uint64_t)parent * 0x9E3779B97F4A7C15ULL);
    x ^= x >> 31;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 29;
    return x;
}

static bool trie_grow(void) {
    uint64_t ncap = trie_cap ? trie_cap * 2 : 1 << 14;
    uint32_t *ns = tpprof_mem_map(ncap * sizeof *ns);
    if (!ns) return false;
    for (uint64_t i = 0; i < trie_cap; i++) {
        uint32_t id = trie_slots[i];
        if (!id) continue;
        uint64_t j = trie_hash(tpprof_w.nodes[id].parent, tpprof_w.nodes[id].ip) & (ncap - 1);
        while (ns[j]) j = (j + 1) & (ncap - 1);
        ns[j] = id;
    }
    tpprof_mem_unmap(trie_slots, trie_cap * sizeof *trie_slots);
    trie_slots = ns;
    trie_cap = ncap;
    return true;
}

static uint32_t trie_child(uint32_t parent, uint64_t ip) {
    struct tpprof_wstate *w = &tpprof_w;
    if ((uint64_t)(w->nnodes + 1) * 2 > trie_cap && !trie_grow()) return 0;
    uint64_t j = trie_hash(parent, ip) & (trie_cap - 1);
    while (trie_slots[j]) {
        uint32_t id = trie_slots[j];
        if (w->nodes[id].parent == parent && w->nodes[id].ip == ip) return id;
        j = (j + 1) & (trie_cap - 1);
    }
    if (w->nnodes + 1 >= w->capnodes) {
        uint32_t ncap = w->capnodes ? w->capnodes * 2 : 1 << 14;
        struct tpprof_node *n = tpprof_mem_grow(w->nodes, w->capnodes * sizeof *n, ncap * sizeof *n);
        if (!n) return 0;
        w->nodes = n;
        w->capnodes = ncap;
    }
    uint32_t id = ++w->nnodes;
    w->nodes[id].parent = parent;
    w->nodes[id].ip = ip;
    trie_slots[j] = id;
    return id;
}

uint32_t tpprof_writer_leaf_of(uint32_t sid) {
    struct tpprof_wstate *w = &tpprof_w;
    if (sid == 0) return 0;
    if (sid >= w->capleaf) {
        uint32_t ncap = w->capleaf ? w->capleaf : 1 << 12;
        while (ncap <= sid) ncap *= 2;
        uint32_t *n = tpprof_mem_grow(w->leaf_of, w->capleaf * sizeof *n, ncap * sizeof *n);
        if (!n) return 0;
        w->leaf_of = n;
        w->capleaf = ncap;
    }
    if (w->leaf_of[sid]) return w->leaf_of[sid];
    int n;
    const uintptr_t *ips = tpprof_stack_frames(sid, &n);
    uint32_t node = 0;
    for (int i = n - 1; i >= 0; i--) {
        uint32_t c = trie_child(node, ips[i]);
        if (!c) break;
        node = c;
    }
    w->leaf_of[sid] = node;
    return node;
}

// ---------------------------------------------------------------------------
// Sites.

struct tpprof_site_hints tpprof_site_hints;

struct tpprof_site *tpprof_site_get_slow(uint32_t sid, int kind) {
    struct tpprof_wstate *w = &tpprof_w;
    struct tpprof_site *s = tpprof_site_lookup(sid, kind);
    if (!s) return NULL;
    struct tpprof_site_hints *h = &tpprof_site_hints;
    if (sid >= h->cap) {
        uint32_t ncap = h->cap ? h->cap : 1 << 12;
        while (ncap <= sid) ncap *= 2;
        uint32_t *n = tpprof_mem_grow(h->at, h->cap * sizeof *n, ncap * sizeof *n);
        if (!n) return s;
        h->at = n;
        h->cap = ncap;
    }
    h->at[sid] = (uint32_t)(s - w->sites) + 1;
    return s;
}

struct tpprof_site *tpprof_site_lookup(uint32_t sid, int kind) {
    struct tpprof_wstate *w = &tpprof_w;
    uint32_t stack = tpprof_writer_leaf_of(sid);
    uint64_t key = ((uint64_t)stack << 4 | (uint64_t)kind) + 1;
    uint32_t idx = tpprof_map_get(&w->site_index, key);
    if (idx) return &w->sites[idx - 1];
    if (w->nsites == w->capsites) {
        uint32_t ncap = w->capsites ? w->capsites * 2 : 1024;
        struct tpprof_site *n = tpprof_mem_grow(w->sites, w->capsites * sizeof *n, ncap * sizeof *n);
        if (!n) return NULL;
        w->sites = n;
        w->capsites = ncap;
    }
    if (!tpprof_map_put(&w->site_index, key, w->nsites + 1)) return NULL;
    struct tpprof_site *s = &w->sites[w->nsites++];
    memset(s, 0, sizeof *s);
    s->stack = stack;
    s->kind = (uint16_t)kind;
    return s;
}
