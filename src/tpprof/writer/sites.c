// sites.c: the writer's stack trie (depot stack ids -> stack_nodes) and its
// sites ((stack, kind) -> totals); the inline parts every event takes are
// in sites.h. Writer-owned (writer.h): never on a program thread.
#define _GNU_SOURCE
#include <string.h>
#include <sys/mman.h>

#include "writer/sites.h"
#include "base/mem.h"
#include "record/stacks.h"
#include "writer/writer.h"

// Stack trie lookup: node ids hashed by (parent, ip). A slot is 32 bits:
// the id in its low trie_bits (the table has 2^trie_bits slots and is at
// most 3/4 full, so every id fits) and, above it, as many bits of the
// hash's high half as are left: a probe that meets another key is nearly
// always told so by the slot alone, without reading that node (a cache
// miss each, in a table of millions of nodes). 11 tag bits at a PyTorch
// run's 3.7 million nodes (2^23 slots: a false match one probe in 2,048);
// 64-bit slots with a full 32-bit tag took 32 MiB more there.
static uint32_t *trie_slots;
static uint64_t trie_cap;
static unsigned trie_bits;

// ---------------------------------------------------------------------------
// Stacks: depot id -> trie leaf.

static uint64_t trie_hash(uint32_t parent, uint64_t ip) {
    uint64_t x = ip ^ ((uint64_t)parent * 0x9E3779B97F4A7C15ULL);
    x ^= x >> 31;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 29;
    return x;
}

// A slot's tag bits for hash h in a table of 2^bits slots (none at 2^32).
static inline uint32_t trie_tag(uint64_t h, unsigned bits) {
    return bits >= 32 ? 0 : (uint32_t)(h >> 32) >> bits << bits;
}
static inline uint32_t trie_id_mask(unsigned bits) { return bits >= 32 ? UINT32_MAX : (1u << bits) - 1; }

// The trie node of each stack's outer part (its first p frames from the
// root), by a 128-bit hash of those frames: a new stack shares all but its
// innermost few frames with one seen before, so the walk starts at the
// longest outer part found here instead of at the root (each step of a walk
// from the root is two cache misses, the slot and the node, in tables of
// millions of nodes: a PyTorch run's 600,000 stacks of 32 frames made that
// walk an eighth of the whole process's time). Direct-mapped, a 128th of
// the trie's slots (remade empty as the trie grows: 1 MiB at 3.7 million
// nodes). A quarter cost 16 MiB more than an eighth for no time measured in
// that run, an eighth 8 MiB more than a sixteenth (the writer's CPU 1.40
// against 1.38 s, 14 interleaved rounds); the run's 701,793 new stacks
// replayed through this file alone took the same time with a 16th, a 32nd,
// a 64th, a 128th and a 256th (384-425 ms, medians of 7), where a 128th
// walked the trie 44,700 steps past the longest part found, and 569 stacks
// from the root, against 15,000 and 241 with a 32nd: consecutive new
// stacks share their outer parts, and a miss costs only a longer walk. The
// two hashes are the depot's two chains (stacks.h), so a false match is as
// unlikely as there.
struct prefix_entry {
    uint64_t h1;
    uint32_t h2lo;
    uint32_t node;
};
static struct prefix_entry *prefix_cache;
static uint64_t prefix_cap;

static inline struct prefix_entry *prefix_at(const uint64_t h[2]) {
    return &prefix_cache[(h[0] >> 20) & (prefix_cap - 1)];
}

// A table of random lookups (trie slots, prefix cache): transparent huge
// pages where the system allows them (with 4 KiB pages nearly every lookup
// was a TLB miss as well as a cache miss), and populated for writing: a
// probe reads a slot before a new node is written into it, and a page first
// mapped by that read (the zero page) then took a copy-on-write fault and a
// TLB shootdown across the program's CPUs (4% of a PyTorch run's CPU, in
// the kernel under prefix_walk).
static void *table_map(size_t bytes) {
    void *p = tpprof_mem_map(bytes);
    if (!p) return NULL;
    madvise(p, bytes, MADV_HUGEPAGE);
#ifdef MADV_POPULATE_WRITE
    madvise(p, bytes, MADV_POPULATE_WRITE); // (Linux 5.14; before, faulted in as used)
#endif
    return p;
}

// An array by node or by depot id (4 bytes an entry, filled nearly densely
// as ids come) grown to new_bytes, its new part populated for writing: an
// entry is read before it is first written (is there a leaf, a hint, a
// site yet?), and a page first mapped by that read (the zero page) took a
// copy-on-write fault and a TLB shootdown at the write after it: 295 of
// the writer's 3,786 samples in a PyTorch run were such faults, most under
// tpprof_site_lookup. The part never used costs at most half the array.
static void *grow_written(void *p, size_t old_bytes, size_t new_bytes) {
    char *n = tpprof_mem_grow(p, old_bytes, new_bytes);
#ifdef MADV_POPULATE_WRITE
    if (n) madvise(n + old_bytes, new_bytes - old_bytes, MADV_POPULATE_WRITE);
#endif
    return n;
}

static void prefix_remake(uint64_t cap) {
    if (prefix_cache) tpprof_mem_unmap(prefix_cache, prefix_cap * sizeof *prefix_cache);
    prefix_cache = table_map(cap * sizeof *prefix_cache);
    prefix_cap = prefix_cache ? cap : 0;
}

#define REHASH_AHEAD 16

// Room for `more` new nodes: the slot table at most 3/4 full after them,
// and the node array big enough.
static bool trie_reserve(uint32_t more) {
    struct tpprof_wstate *w = &tpprof_w;
    uint64_t need = (uint64_t)w->nnodes + more + 1;
    if (need * 4 > trie_cap * 3) {
        if (need > UINT32_MAX / 4 * 3) return false; // (ids are 32 bits)
        unsigned bits = trie_cap ? trie_bits : 14;
        while (need * 4 > ((uint64_t)3 << bits)) bits++;
        uint64_t ncap = (uint64_t)1 << bits;
        uint32_t *ns = table_map(ncap * sizeof *ns);
        if (!ns) return false;
        // By node, not by slot: the nodes are read in order and the writes
        // land anywhere, each independent of the last (from the old slots,
        // each node read was a cache miss the next step waited for). The
        // slot of the node REHASH_AHEAD on is fetched while this one is
        // put: one miss after another was a fifth of prefix_walk's samples
        // in a PyTorch run (2^14 -> 2^23 slots, ~6 million puts).
        uint64_t ahead[REHASH_AHEAD];
        for (uint32_t id = 1; id <= w->nnodes && id <= REHASH_AHEAD; id++) {
            ahead[id % REHASH_AHEAD] = trie_hash(w->nodes[id].parent, tpprof_node_ip(id));
            __builtin_prefetch(&ns[ahead[id % REHASH_AHEAD] & (ncap - 1)], 1);
        }
        for (uint32_t id = 1; id <= w->nnodes; id++) {
            uint64_t h = ahead[id % REHASH_AHEAD];
            if (w->nnodes - id >= REHASH_AHEAD) {
                uint32_t next = id + REHASH_AHEAD;
                uint64_t hn = trie_hash(w->nodes[next].parent, tpprof_node_ip(next));
                ahead[next % REHASH_AHEAD] = hn;
                __builtin_prefetch(&ns[hn & (ncap - 1)], 1);
            }
            uint64_t j = h & (ncap - 1);
            while (ns[j]) j = (j + 1) & (ncap - 1);
            ns[j] = trie_tag(h, bits) | id;
        }
        if (trie_slots) tpprof_mem_unmap(trie_slots, trie_cap * sizeof *trie_slots);
        trie_slots = ns;
        trie_cap = ncap;
        trie_bits = bits;
        prefix_remake(ncap / 128);
    }
    if (need >= w->capnodes) {
        uint32_t ncap = w->capnodes ? w->capnodes : 1 << 14;
        while (need >= ncap) ncap *= 2;
        struct tpprof_node *n = tpprof_mem_grow(w->nodes, w->capnodes * sizeof *n, ncap * sizeof *n);
        if (!n) return false;
        w->nodes = n;
        w->capnodes = ncap;
    }
    return true;
}

// The child of parent with this ip, or 0 when it has none.
static uint32_t trie_find(uint32_t parent, uint64_t ip) {
    const struct tpprof_wstate *w = &tpprof_w;
    if (!trie_cap) return 0;
    uint64_t h = trie_hash(parent, ip);
    uint32_t tag = trie_tag(h, trie_bits), mask = trie_id_mask(trie_bits), v;
    for (uint64_t j = h & (trie_cap - 1); (v = trie_slots[j]) != 0; j = (j + 1) & (trie_cap - 1)) {
        if ((v & ~mask) != tag) continue;
        uint32_t id = v & mask;
        if (w->nodes[id].parent == parent && tpprof_node_ip(id) == ip) return id;
    }
    return 0;
}

uint32_t tpprof_writer_trie_child(uint32_t parent, uint64_t ip) { return trie_find(parent, ip); }

// Sets node id's ip (state.h: 48 bits, or TPPROF_NODE_FAR and the ip in
// far_ips; ids come in ascending order, so far_ips stays sorted). Without
// memory for a far ip, the node keeps TPPROF_NODE_FAR as its ip.
static void node_set_ip(uint32_t id, uint64_t ip) {
    struct tpprof_wstate *w = &tpprof_w;
    uint64_t v = ip;
    if (TPPROF_UNLIKELY(ip >= TPPROF_NODE_FAR)) {
        v = TPPROF_NODE_FAR;
        if (w->nfar == w->capfar) {
            uint32_t ncap = w->capfar ? 2 * w->capfar : 64;
            struct tpprof_far_ip *n = tpprof_mem_grow(w->far_ips, w->capfar * sizeof *n, ncap * sizeof *n);
            if (n) w->far_ips = n, w->capfar = ncap;
        }
        if (w->nfar < w->capfar) w->far_ips[w->nfar++] = (struct tpprof_far_ip){id, ip};
    }
    uint8_t *b = w->nodes[id].ip48;
    for (int k = 0; k < 6; k++) b[k] = (uint8_t)(v >> 8 * k);
}

// Nodes for ips[0..k) (innermost first, as a stack's frames are) as a chain
// below parent, the outermost first: all new (a node made now has no
// children yet, so nothing is looked up). Their ids are known before any is
// made, so every slot's cache miss is started at once. Room was reserved.
// path[i] gets the node of ips[k - 1 - i].
static void trie_append(uint32_t parent, const uintptr_t *ips, int k, uint32_t *path) {
    struct tpprof_wstate *w = &tpprof_w;
    uint64_t hs[TPPROF_MAX_DEPTH];
    for (int i = 0; i < k; i++) {
        hs[i] = trie_hash(i ? w->nnodes + (uint32_t)i : parent, ips[k - 1 - i]);
        __builtin_prefetch(&trie_slots[hs[i] & (trie_cap - 1)], 1);
    }
    for (int i = 0; i < k; i++) {
        uint32_t id = ++w->nnodes;
        w->nodes[id].parent = parent;
        node_set_ip(id, ips[k - 1 - i]);
        uint64_t j = hs[i] & (trie_cap - 1);
        while (trie_slots[j]) j = (j + 1) & (trie_cap - 1);
        trie_slots[j] = trie_tag(hs[i], trie_bits) | id;
        path[i] = parent = id;
    }
}

// Whether the last tpprof_writer_leaf_of call made its leaf node now: no
// site can have that stack yet, so tpprof_site_lookup need not look.
static bool leaf_new;

static uint32_t prefix_walk(const uintptr_t *ips, int n) {
    if (n <= 0 || !trie_reserve((uint32_t)n)) return 0;
    // hs[p]: the hash of the outer p frames, finished (tpprof_stack_hash_end)
    // only for the p probed, from n down to the longest found: the chains'
    // states for every p (acc), the rest of the work only where it is used.
    uint64_t acc[TPPROF_MAX_DEPTH + 1][2], hs[TPPROF_MAX_DEPTH + 1][2];
    acc[0][0] = acc[0][1] = 0;
    for (int p = 1; p <= n; p++) {
        acc[p][0] = acc[p - 1][0];
        acc[p][1] = acc[p - 1][1];
        tpprof_stack_hash_step(acc[p], ips[n - p]);
    }
    uint32_t path[TPPROF_MAX_DEPTH + 1]; // path[p]: the node of the outer p frames
    path[0] = 0;
    int p = 0;
    if (prefix_cache) { // the probes' misses overlap (they do not depend on each other)
        int ahead = n > 8 ? n - 8 : 0;
        for (int q = n; q > ahead; q--) {
            tpprof_stack_hash_end(acc[q], q, hs[q]);
            __builtin_prefetch(prefix_at(hs[q]));
        }
        for (int q = n; q > 0; q--) {
            if (q <= ahead) tpprof_stack_hash_end(acc[q], q, hs[q]);
            const struct prefix_entry *e = prefix_at(hs[q]);
            if (e->h1 == hs[q][0] && e->h2lo == (uint32_t)hs[q][1]) {
                path[q] = e->node;
                p = q;
                break;
            }
        }
    }
    int known = p;
    for (uint32_t c; p < n && (c = trie_find(path[p], ips[n - 1 - p])) != 0; p++) path[p + 1] = c;
    if (p < n) {
        trie_append(path[p], ips, n - p, &path[p + 1]);
        leaf_new = true;
    }
    if (prefix_cache) // the outer parts walked or made, for the next stack that shares them
        for (int q = known + 1; q <= n; q++) {
            struct prefix_entry *e = prefix_at(hs[q]);
            e->h1 = hs[q][0];
            e->h2lo = (uint32_t)hs[q][1];
            e->node = path[q];
        }
    return path[n];
}

uint32_t tpprof_writer_leaf_of(uint32_t sid) {
    struct tpprof_wstate *w = &tpprof_w;
    leaf_new = false;
    if (sid == 0 || sid >= 1u << 31) return 0; // (2^31 stacks: memory ran out long before)
    if (sid >= w->capleaf) {
        uint32_t ncap = w->capleaf ? w->capleaf : 1 << 12;
        while (ncap <= sid) ncap *= 2;
        uint32_t *n = grow_written(w->leaf_of, w->capleaf * sizeof *n, ncap * sizeof *n);
        if (!n) return 0;
        w->leaf_of = n;
        w->capleaf = ncap;
    }
    if (w->leaf_of[sid]) return w->leaf_of[sid];
    int n;
    const uintptr_t *ips = tpprof_stack_frames(sid, &n);
    if (n > TPPROF_MAX_DEPTH) n = TPPROF_MAX_DEPTH;
    uint32_t node = prefix_walk(ips, n);
    w->leaf_of[sid] = node;
    if (node) tpprof_stack_release(sid); // (out of memory: kept, tried again)
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
    if (sid >= 1u << 31) return s;
    if (sid >= h->cap) {
        uint32_t ncap = h->cap ? h->cap : 1 << 12;
        while (ncap <= sid) ncap *= 2;
        uint32_t *n = grow_written(h->at, h->cap * sizeof *n, ncap * sizeof *n);
        if (!n) return s;
        h->at = n;
        h->cap = ncap;
    }
    h->at[sid] = (uint32_t)(s - w->sites) + 1;
    return s;
}

// The sites of one stack (one a kind) form a ring through next_of_stack,
// each naming the next and the last the first, so any of them leads to
// all: a depot id's hint names one. Nothing by node names them, only a bit
// says which trie nodes have sites (has_sites; 512 KiB at a PyTorch run's
// 3.7 M nodes, where an array of each node's first site took 16 MiB for its
// 700,000 leaves). A node's sites are looked for only when a depot id with
// no hint yet reaches a node that has them (its frames are another id's,
// which the depot gives rarely, or it has no stack: node 0): by a search
// of the sites, once a node (the map `shared` remembers it). A new stack's
// leaf, made by its walk, has none: nothing is looked at.
static uint64_t *has_sites;
static uint32_t has_sites_cap; // (in bits)
static struct tpprof_map shared; // node + 1 -> index + 1 of one of its sites

static bool node_has_sites(uint32_t node) { return node < has_sites_cap && (has_sites[node / 64] >> (node % 64) & 1); }

static bool node_mark_sites(uint32_t node) {
    if (node >= has_sites_cap) {
        uint32_t ncap = has_sites_cap ? has_sites_cap : 1 << 15;
        while (ncap <= node) ncap *= 2;
        uint64_t *n = grow_written(has_sites, has_sites_cap / 8, ncap / 8);
        if (!n) return false;
        has_sites = n;
        has_sites_cap = ncap;
    }
    has_sites[node / 64] |= (uint64_t)1 << (node % 64);
    return true;
}

// The site of this kind in the ring through site i (index + 1), or NULL.
static struct tpprof_site *ring_find(uint32_t i, int kind) {
    struct tpprof_site *sites = tpprof_w.sites;
    uint32_t j = i;
    do {
        if (sites[j - 1].kind == (uint32_t)kind) return &sites[j - 1];
        j = sites[j - 1].next_of_stack;
    } while (j != i);
    return NULL;
}

// Index + 1 of one of the sites of node `stack` (node_has_sites), 0 if none.
static uint32_t site_of_node(uint32_t stack) {
    uint32_t i = tpprof_map_get(&shared, (uint64_t)stack + 1);
    if (i) return i;
    for (i = tpprof_w.nsites; i > 0 && tpprof_w.sites[i - 1].stack != stack; i--) {}
    if (i) tpprof_map_put(&shared, (uint64_t)stack + 1, i); // (out of memory: searched again next time)
    return i;
}

struct tpprof_site *tpprof_site_lookup(uint32_t sid, int kind) {
    struct tpprof_wstate *w = &tpprof_w;
    const struct tpprof_site_hints *h = &tpprof_site_hints;
    uint32_t ring = sid < h->cap ? h->at[sid] : 0, stack;
    if (ring) {
        stack = w->sites[ring - 1].stack;
    } else {
        stack = tpprof_writer_leaf_of(sid);
        // (A leaf made just now has no site: nothing to look at.)
        if (!leaf_new && node_has_sites(stack)) ring = site_of_node(stack);
    }
    if (ring) {
        struct tpprof_site *s = ring_find(ring, kind);
        if (s) return s;
    } else if (!node_mark_sites(stack)) {
        return NULL;
    }
    if (w->nsites == w->capsites) {
        uint32_t ncap = w->capsites ? w->capsites * 2 : 1024;
        struct tpprof_site *n = tpprof_mem_grow(w->sites, w->capsites * sizeof *n, ncap * sizeof *n);
        if (!n) return NULL;
        w->sites = n;
        w->capsites = ncap;
    }
    if (w->nsites >= w->capdirty) {
        uint32_t ncap = w->capdirty ? 2 * w->capdirty : 1024;
        uint64_t *bits = grow_written(w->dirty_bits, w->capdirty / 8, ncap / 8);
        if (!bits) return NULL;
        w->dirty_bits = bits;
        w->capdirty = ncap;
    }
    struct tpprof_site *s = &w->sites[w->nsites++];
    memset(s, 0, sizeof *s);
    s->stack = stack;
    s->kind = (uint16_t)kind;
    if (ring) { // into the stack's ring, after site `ring`
        s->next_of_stack = w->sites[ring - 1].next_of_stack;
        w->sites[ring - 1].next_of_stack = w->nsites;
    } else {
        s->next_of_stack = w->nsites;
    }
    return s;
}
