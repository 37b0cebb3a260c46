// test_sites.c: unit tests of the writer's sites and stack trie
// (writer/sites.c, sites.h): depot stacks become trie leaves that share
// their callers' nodes, a (stack, kind) pair has one site however it is
// asked for, and the peak's copy-on-write snapshot keeps each site's share
// at the peak. The depot is this file's: a table of stacks by id.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "writer/sites.h"
#include "writer/writer.h"
#include "../check.h"

struct tpprof_wstate tpprof_w;

// The depot (record/stacks.c in the library): id -> frames, innermost first.
#define MAX_IDS 330000
static uintptr_t frames[MAX_IDS][4];
static int nframes[MAX_IDS];

void tpprof_stack_release(uint32_t id) { (void)id; }
const uintptr_t *tpprof_stack_frames(uint32_t id, int *n) {
    *n = nframes[id];
    return frames[id];
}

static void set_stack(uint32_t id, uintptr_t f0, uintptr_t f1, uintptr_t f2) {
    frames[id][0] = f0, frames[id][1] = f1, frames[id][2] = f2;
    nframes[id] = f2 ? 3 : f1 ? 2 : 1;
}

static void test_stacks_share_their_callers_nodes_in_the_trie(void) {
    set_stack(1, 0x1001, 0x2000, 0x3000); // f1 <- g <- main
    set_stack(2, 0x1002, 0x2000, 0x3000); // f2 <- g <- main
    set_stack(3, 0x1001, 0x2000, 0x3000); // the same frames as 1, another depot id
    uint32_t before = tpprof_w.nnodes;
    uint32_t a = tpprof_writer_leaf_of(1), b = tpprof_writer_leaf_of(2), c = tpprof_writer_leaf_of(3);
    CHECK_MSG(a && b && a != b, "two stacks, two leaves (%u, %u)", a, b);
    CHECK_MSG(c == a, "the same frames under another id: the same leaf (%u, %u)", c, a);
    CHECK_MSG(tpprof_w.nnodes - before == 4, "main, g, f1, f2: %u nodes", tpprof_w.nnodes - before);
    const struct tpprof_node *n = tpprof_w.nodes;
    CHECK_MSG(tpprof_node_ip(a) == 0x1001 && tpprof_node_ip(b) == 0x1002, "leaves hold the innermost frames");
    CHECK_MSG(n[a].parent == n[b].parent && tpprof_node_ip(n[a].parent) == 0x2000, "both under g");
    uint32_t top = n[n[a].parent].parent;
    CHECK_MSG(tpprof_node_ip(top) == 0x3000 && n[top].parent == 0, "main is a root");
    CHECK_MSG(tpprof_writer_leaf_of(1) == a && tpprof_w.nnodes - before == 4, "asked again: nothing new");
    CHECK_MSG(tpprof_writer_leaf_of(0) == 0, "no stack: node 0");
}

static void test_a_stack_and_kind_have_one_site(void) {
    set_stack(10, 0x5001, 0x3000, 0);
    set_stack(11, 0x5001, 0x3000, 0); // same frames
    uint32_t nsites = tpprof_w.nsites;
    struct tpprof_site *m = tpprof_site_get(10, TPPROF_KIND_MALLOC);
    CHECK(m && m->kind == TPPROF_KIND_MALLOC && m->stack == tpprof_writer_leaf_of(10));
    m->alloc_count = 7;
    struct tpprof_site *c = tpprof_site_get(10, TPPROF_KIND_CALLOC); // another kind: another site
    CHECK_MSG(c && c != m && c->kind == TPPROF_KIND_CALLOC && c->alloc_count == 0, "calloc's own site");
    // The hint now names calloc's: malloc's is still found.
    m = tpprof_site_get(10, TPPROF_KIND_MALLOC);
    CHECK_MSG(m && m->kind == TPPROF_KIND_MALLOC && m->alloc_count == 7, "malloc's site again, with its counts");
    struct tpprof_site *m2 = tpprof_site_get(11, TPPROF_KIND_MALLOC);
    CHECK_MSG(m2 == m, "another depot id of the same frames: the same site");
    CHECK_MSG(tpprof_w.nsites - nsites == 2, "%u sites made", tpprof_w.nsites - nsites);
}

// A stack that ends inside another (its caller's frames only) is that
// node, made before; one that goes deeper adds only its new frames. A new
// leaf's site is made without a lookup: a site asked for again, through
// another kind's hint or another depot id, is still the one made first.
static void test_stacks_inside_and_below_others_reuse_their_nodes_and_sites(void) {
    set_stack(20, 0x7001, 0x7002, 0x7003); // h <- k <- main2
    set_stack(21, 0x7002, 0x7003, 0);      // k <- main2: inside 20
    set_stack(22, 0x7000, 0x7001, 0x7002); // deeper than 20 (only 3 frames kept: a new root path)
    set_stack(23, 0x7002, 0x7003, 0);      // 21's frames again
    uint32_t before = tpprof_w.nnodes;
    uint32_t a = tpprof_writer_leaf_of(20);
    CHECK_MSG(tpprof_w.nnodes - before == 3, "h, k, main2: %u nodes", tpprof_w.nnodes - before);
    struct tpprof_site *sa = tpprof_site_get(20, TPPROF_KIND_MALLOC);
    struct tpprof_site *sk = tpprof_site_get(21, TPPROF_KIND_MALLOC);
    CHECK_MSG(tpprof_w.nnodes - before == 3, "k's stack is a node made before: %u nodes", tpprof_w.nnodes - before);
    CHECK_MSG(sk && sk->stack == tpprof_w.nodes[a].parent && sk != sa, "k's own site on h's parent");
    sk->alloc_count = 3;
    CHECK_MSG(tpprof_site_get(21, TPPROF_KIND_CALLOC) != sk, "another kind");
    CHECK_MSG(tpprof_site_get(21, TPPROF_KIND_MALLOC) == sk && tpprof_site_get(23, TPPROF_KIND_MALLOC) == sk &&
                  sk->alloc_count == 3,
              "k's malloc site again: the one made first");
    uint32_t d = tpprof_writer_leaf_of(22);
    CHECK_MSG(d && d != a && tpprof_w.nnodes - before == 6, "another root path: 3 more nodes (%u)",
              tpprof_w.nnodes - before);
    for (uint32_t n = d, i = 0; i < 3; n = tpprof_w.nodes[n].parent, i++)
        CHECK_MSG(n && tpprof_node_ip(n) == (uintptr_t)(0x7000 + i), "frame %u of the new path", i);
}

// A stack's sites (one a kind) are found from any of them (a ring), and
// from a depot id that has no hint yet through the node's mark: four kinds
// asked for in turn through three ids of the same frames, the first id's
// kinds before and after the others made theirs, each (stack, kind) has one
// site. The sites made in between (another stack's) move the array.
static void test_the_sites_of_a_stack_are_one_a_kind_through_every_id(void) {
    set_stack(40, 0xa001, 0xa002, 0x3000);
    set_stack(41, 0xa001, 0xa002, 0x3000);
    set_stack(42, 0xa001, 0xa002, 0x3000);
    static const int kinds[4] = {TPPROF_KIND_MALLOC, TPPROF_KIND_CALLOC, TPPROF_KIND_REALLOC, TPPROF_KIND_MMAP};
    uint32_t nsites = tpprof_w.nsites, at[4];
    for (int k = 0; k < 2; k++) {
        struct tpprof_site *s = tpprof_site_get(40, kinds[k]);
        CHECK(s && s->kind == (uint32_t)kinds[k]);
        s->alloc_count = 100 + k;
        at[k] = (uint32_t)(s - tpprof_w.sites);
    }
    for (uint32_t i = 0; i < 3000; i++) { // (grows the sites array)
        set_stack(21000 + i, 0xb000 + i, 0x3000, 0);
        CHECK(tpprof_site_get(21000 + i, TPPROF_KIND_MALLOC));
    }
    for (int k = 2; k < 4; k++) {
        struct tpprof_site *s = tpprof_site_get(41 + (k & 1), kinds[k]);
        CHECK(s && s->kind == (uint32_t)kinds[k]);
        s->alloc_count = 100 + k;
        at[k] = (uint32_t)(s - tpprof_w.sites);
    }
    int wrong = 0;
    for (uint32_t id = 40; id <= 42; id++)
        for (int k = 3; k >= 0; k--) {
            struct tpprof_site *s = tpprof_site_get(id, kinds[k]);
            wrong += !s || (uint32_t)(s - tpprof_w.sites) != at[k] || s->alloc_count != 100 + k;
        }
    CHECK_MSG(wrong == 0, "%d of 12 asked for found another site", wrong);
    CHECK_MSG(tpprof_w.nsites - nsites == 4 + 3000, "%u sites made", tpprof_w.nsites - nsites);
}

// A node keeps 48 bits of its ip: an ip above them (a return address of a
// 5-level page table's upper half) is kept apart, and reads back whole; so
// does the one ip whose 48 bits are the mark, and the stacks through them
// are found again, not made twice.
static void test_return_addresses_past_48_bits_read_back_whole(void) {
    const uintptr_t far = (uintptr_t)0x00ff00000000a001ull, mark = ((uintptr_t)1 << 48) - 1;
    set_stack(25000, 0xc001, far, 0x3000);
    set_stack(25001, mark, far, 0x3000);
    set_stack(25002, 0xc001, far, 0x3000);
    uint32_t before = tpprof_w.nnodes;
    uint32_t a = tpprof_writer_leaf_of(25000), b = tpprof_writer_leaf_of(25001);
    CHECK_MSG(a && b && tpprof_w.nodes[a].parent == tpprof_w.nodes[b].parent, "both under the far frame");
    uint32_t mid = tpprof_w.nodes[a].parent;
    CHECK_MSG(tpprof_node_ip(mid) == far, "the far ip whole: %#llx", (unsigned long long)tpprof_node_ip(mid));
    CHECK_MSG(tpprof_node_ip(b) == mark, "the mark's own value: %#llx", (unsigned long long)tpprof_node_ip(b));
    CHECK_MSG(tpprof_node_ip(a) == 0xc001 && tpprof_node_ip(tpprof_w.nodes[mid].parent) == 0x3000, "the others");
    CHECK_MSG(tpprof_writer_leaf_of(25002) == a && tpprof_w.nnodes - before == 3, "found again (the far frame, c001 and the mark: main was there): %u nodes",
              tpprof_w.nnodes - before);
    CHECK_MSG(tpprof_writer_trie_child(mid, mark) == b && tpprof_writer_trie_child(mid, far) == 0, "by ip");
}

// Thousands of stacks: the trie's hash and the sites array grow (and move)
// under the lookups, and every stack keeps its own site.
static void test_many_stacks_keep_their_sites_through_growth(void) {
    enum { N = 20000, FIRST = 100 };
    for (uint32_t i = 0; i < N; i++) set_stack(FIRST + i, 0x100000 + i, 0x200000 + i % 97, 0x3000);
    for (uint32_t i = 0; i < N; i++) {
        struct tpprof_site *s = tpprof_site_get(FIRST + i, TPPROF_KIND_MMAP);
        if (!s) {
            CHECK_MSG(false, "no site for %u", i);
            return;
        }
        s->alloc_count = i + 1;
    }
    int wrong = 0;
    for (uint32_t i = 0; i < N; i++) {
        struct tpprof_site *s = tpprof_site_get(FIRST + i, TPPROF_KIND_MMAP);
        const struct tpprof_node *leaf = &tpprof_w.nodes[s->stack];
        if (s->alloc_count != i + 1 || tpprof_node_ip(s->stack) != 0x100000 + i || tpprof_node_ip(leaf->parent) != 0x200000 + i % 97)
            wrong++;
    }
    CHECK_MSG(wrong == 0, "%d of %d stacks lost their site or their frames", wrong, N);
}

// site_touch saves a site's live totals once per peak epoch, before its
// first change after a new peak: the snapshot is the site's share at the
// peak, whatever happened after it.
static void test_the_peak_keeps_each_sites_share(void) {
    set_stack(20, 0x7001, 0x3000, 0);
    set_stack(21, 0x7002, 0x3000, 0);
    struct tpprof_site *a = tpprof_site_get(20, TPPROF_KIND_MALLOC), *b = tpprof_site_get(21, TPPROF_KIND_MALLOC);
    tpprof_w.peak_epoch = 1;
    // a: +100; b: +50 -> peak 150.
    tpprof_site_touch(a);
    a->live_bytes += 100, tpprof_w.heap_bytes += 100;
    tpprof_check_peak(10);
    tpprof_site_touch(b);
    b->live_bytes += 50, tpprof_w.heap_bytes += 50;
    tpprof_check_peak(20);
    CHECK_MSG(tpprof_w.peak_bytes == 150 && tpprof_w.peak_time_ns == 20, "peak 150 at 20: %lld at %llu",
              (long long)tpprof_w.peak_bytes, (unsigned long long)tpprof_w.peak_time_ns);
    uint64_t epoch = tpprof_w.peak_epoch;
    // a frees 100, b grows by 20: below the peak, which stays.
    tpprof_site_touch(a);
    a->live_bytes -= 100, tpprof_w.heap_bytes -= 100;
    tpprof_check_peak(30);
    tpprof_site_touch(b);
    b->live_bytes += 20, tpprof_w.heap_bytes += 20;
    tpprof_check_peak(40);
    CHECK_MSG(tpprof_w.peak_epoch == epoch && tpprof_w.peak_bytes == 150, "no new peak");
    CHECK_MSG(a->snap_epoch == epoch && a->snap_bytes == 100, "a's share at the peak: %lld", (long long)a->snap_bytes);
    CHECK_MSG(b->snap_epoch == epoch && b->snap_bytes == 50, "b's share at the peak: %lld", (long long)b->snap_bytes);
    CHECK(a->dirty && b->dirty);
}

// tpprof_w.nchanged counts the sites whose row no longer holds their totals:
// a site counts as it becomes dirty, once however often it changes, and
// again after the store wrote it (which clears the flag and the count, as
// store/store.c's put_sites does) and it changed once more.
static void test_a_site_with_a_row_counts_once_as_changed_until_written(void) {
    set_stack(30, 0x9001, 0x3000, 0);
    struct tpprof_site *s = tpprof_site_get(30, TPPROF_KIND_MALLOC);
    CHECK(s && !s->dirty);
    uint32_t before = tpprof_w.nchanged;
    for (int i = 0; i < 5; i++) {
        tpprof_site_touch(s);
        s->alloc_count++;
    }
    CHECK_MSG(tpprof_w.nchanged == before + 1, "changed 5 times: counted %u times", tpprof_w.nchanged - before);
    s->dirty = false, tpprof_w.nchanged--; // written (put_sites)
    s->stored = true;
    CHECK_MSG(tpprof_w.nchanged == before, "written: not changed");
    tpprof_site_touch(s);
    tpprof_site_touch(s);
    CHECK_MSG(s->dirty && tpprof_w.nchanged == before + 1, "changed after its write: counted once more (%u)",
              tpprof_w.nchanged - before);
}

// A flush visits the dirty sites by their bits (state.h: dirty_bits): a
// site's bit is set while it is dirty, through the sites array's growth,
// and cleared as the store writes it (tpprof_site_clean).
static void test_a_dirty_sites_bit_is_set_until_it_is_written(void) {
    enum { FIRST = 25010, N = 4000 }; // (ids of their own: the tests share the depot)
    for (uint32_t i = 0; i < N; i++) {
        set_stack(FIRST + i, 0xd00000 + i, 0x3000, 0);
        struct tpprof_site *s = tpprof_site_get(FIRST + i, TPPROF_KIND_MALLOC);
        CHECK(s);
        if (s && i % 3 == 0) tpprof_site_touch(s);
    }
    int wrong = 0;
    for (uint32_t i = 0; i < tpprof_w.nsites; i++)
        wrong += (int)(tpprof_w.dirty_bits[i / 64] >> (i % 64) & 1) != (int)tpprof_w.sites[i].dirty;
    CHECK_MSG(wrong == 0, "%d of %u sites' bits are not their dirty flags", wrong, tpprof_w.nsites);
    uint32_t before = tpprof_w.nchanged;
    struct tpprof_site *s = tpprof_site_get(FIRST + 3, TPPROF_KIND_MALLOC);
    uint32_t i = (uint32_t)(s - tpprof_w.sites);
    CHECK(s->dirty && (tpprof_w.dirty_bits[i / 64] >> (i % 64) & 1));
    tpprof_site_clean(s);
    CHECK_MSG(!s->dirty && !(tpprof_w.dirty_bits[i / 64] >> (i % 64) & 1) && tpprof_w.nchanged == before - 1,
              "written: clean, its bit cleared, counted once");
    tpprof_site_clean(s);
    CHECK_MSG(tpprof_w.nchanged == before - 1, "cleaned twice: counted once");
}

// The trie's slots are 32 bits: the node id in the low bits, a tag from the
// hash above them (writer/sites.c). 300,000 stacks of 4 frames of their
// own make 1.2 million nodes (a table of 2^21 slots, 11 tag bits): every
// node is found as its parent's child for its ip, and a frame no stack has
// is found under none of them.
static void test_the_stack_tries_32_bit_slots_find_every_node_past_a_million(void) {
    enum { FIRST = 30000, N = 300000 };
    uint32_t before = tpprof_w.nnodes;
    for (uint32_t i = 0; i < N; i++)
        for (int k = 0; k < 4; k++) frames[FIRST + i][k] = 0x10000000u + 4 * i + (uint32_t)k;
    for (uint32_t i = 0; i < N; i++) {
        nframes[FIRST + i] = 4;
        if (!tpprof_writer_leaf_of(FIRST + i)) {
            CHECK_MSG(false, "no leaf for stack %u", i);
            return;
        }
    }
    CHECK_MSG(tpprof_w.nnodes - before == 4 * N, "%u nodes made", tpprof_w.nnodes - before);
    uint32_t lost = 0, phantom = 0;
    for (uint32_t id = 1; id <= tpprof_w.nnodes; id++) {
        const struct tpprof_node *n = &tpprof_w.nodes[id];
        lost += tpprof_writer_trie_child(n->parent, tpprof_node_ip(id)) != id;
        phantom += tpprof_writer_trie_child(id, 0x7fff0000u + id) != 0;
    }
    CHECK_MSG(lost == 0, "%u of %u nodes not found", lost, tpprof_w.nnodes);
    CHECK_MSG(phantom == 0, "%u absent children found", phantom);
    // Stacks asked for again (their leaves as the trie has them).
    uint32_t wrong = 0;
    for (uint32_t i = 0; i < N; i += 97) {
        uint32_t leaf = tpprof_writer_leaf_of(FIRST + i);
        wrong += !leaf || tpprof_node_ip(leaf) != 0x10000000u + 4 * i;
    }
    CHECK_MSG(wrong == 0, "%u stacks with another leaf", wrong);
}

int main(void) {
    test_stacks_share_their_callers_nodes_in_the_trie();
    test_a_stack_and_kind_have_one_site();
    test_stacks_inside_and_below_others_reuse_their_nodes_and_sites();
    test_many_stacks_keep_their_sites_through_growth();
    test_the_sites_of_a_stack_are_one_a_kind_through_every_id();
    test_return_addresses_past_48_bits_read_back_whole();
    test_the_peak_keeps_each_sites_share();
    test_a_site_with_a_row_counts_once_as_changed_until_written();
    test_a_dirty_sites_bit_is_set_until_it_is_written();
    test_the_stack_tries_32_bit_slots_find_every_node_past_a_million();
    return CHECK_DONE();
}
