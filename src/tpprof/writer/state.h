// state.h: the writer's state, data only: what the writer keeps (the live
// set, sites, the stack trie, totals, pending rows, the tensor ledger; the
// device state and the autograd graph ledger in the two data-only headers
// it includes at its end) and what the store reads to write it out. store/
// includes this header and no other of writer/; the writer's functions are
// declared in writer.h, device.h and graph.h.
//
// Everything here is owned by the writer: it is touched only with the
// writer's mutex held (by the writer thread, or by the thread running exit,
// _exit, exec or fork). Never touched from inside a malloc hook.
#ifndef TPPROF_WRITER_STATE_H
#define TPPROF_WRITER_STATE_H

#include <sys/types.h>

#include "base/base.h"
#include "record/order.h"

// ---------------------------------------------------------------------------
// Tables (livetable.c; their operations: writer.h).

// A heap block or a mapping still live. 32 bytes: two to a cache line, as
// the live table is probed once per event.
struct tpprof_block {
    uint64_t addr;
    uint64_t size;
    uint32_t site;          // index into tpprof_wstate.sites
    uint32_t thread : 28;   // thread index
    uint32_t carved : 1;    // a mapping committed inside a PROT_NONE reservation (scan.c)
    uint32_t reach : 2;     // 0 not scanned, 1 lost, 2 reachable, 3 a stdio buffer (scan.c)
    uint32_t backs : 1;     // holds a storage's data (ledger.c wants its free)
    uint64_t time_ns;
};
_Static_assert(sizeof(struct tpprof_block) == 32, "live blocks are 32 bytes");

// Address -> block, open addressing with backward-shift deletion: a free
// slot has addr 0 (scan.c and store/store.c walk `slots` for the live blocks).
struct tpprof_livetable {
    struct tpprof_block *slots;
    uint64_t cap, count;
    uint64_t limit; // most blocks before it grows (tpprof_live_grow sets it)
};

// u64 key (never 0) -> u32 value (0 = absent): sites, the stack trie, and
// the tensor ledger's id and block indexes (which also delete).
struct tpprof_map {
    uint64_t *keys;
    uint32_t *vals;
    uint64_t cap, count;
};

// ---------------------------------------------------------------------------
// Aggregates.

// A site's totals: 72 bytes (a PyTorch run keeps 700,000 sites, most of
// them import-time stacks that allocated once: 128 bytes each were 86 MiB,
// the writer's biggest table). What the row holds and is not kept is
// derived: freed_bytes is alloc_bytes - live_bytes, free_count is
// alloc_count - live_count, plus, at a mapping's site, the pieces its
// munmaps split off (splits: a heap site's temp_count, as a mapping's site
// has no temporary allocations). Live and snapshot counts are bounded by
// the live set (32 bits); totals are not. Not cache-line aligned: the old
// 64-byte alignment made each event touch two lines anyway (the snapshot
// and temp fields were on the second).
struct tpprof_site {
    uint32_t stack;              // stack_nodes id of the innermost frame (0: unknown)
    uint32_t next_of_stack;      // index + 1 of the next site of its stack's ring (another kind; itself if none)
    uint64_t snap_epoch : 56;    // the peak epoch snap_* were taken at (tpprof_site_snapped)
    uint64_t kind : 4;
    uint64_t dirty : 1;          // changed since the last flush
    uint64_t stored : 1;         // has a row in the database file
    uint64_t row_peak_live : 1;  // its row's peak_* were its live_* when written (store.c)
    uint32_t live_count, snap_count; // snap_*: live at the peak, if snapped
    int64_t live_bytes, snap_bytes;
    int64_t alloc_count, alloc_bytes;
    union {
        int64_t temp_count;      // heap kinds
        int64_t splits;          // mapping kinds: pieces made by a munmap in the middle
    };
    int64_t temp_bytes;
};
_Static_assert(sizeof(struct tpprof_site) == 72, "sites are 72 bytes");
_Static_assert(TPPROF_KIND_COUNT <= 16, "a site's kind fits its 4 bits");
#define TPPROF_SITE_EPOCH_MASK ((UINT64_C(1) << 56) - 1)

// A mapping kind's site counts splits where a heap site counts temps.
static inline bool tpprof_site_is_map(const struct tpprof_site *s) { return s->kind >= TPPROF_KIND_MMAP; }
static inline int64_t tpprof_site_free_count(const struct tpprof_site *s) {
    return s->alloc_count - (int64_t)s->live_count + (tpprof_site_is_map(s) ? s->splits : 0);
}
static inline int64_t tpprof_site_freed_bytes(const struct tpprof_site *s) { return s->alloc_bytes - s->live_bytes; }
static inline int64_t tpprof_site_temp_count(const struct tpprof_site *s) {
    return tpprof_site_is_map(s) ? 0 : s->temp_count;
}

// Packed: 10 bytes a node (a PyTorch run's 3.7 million nodes: 35 MiB; 16
// bytes unpacked, 12 with the whole ip). The ip's low 48 bits, which hold
// every user-space return address of a 4-level page table and a Python
// frame's pseudo ip (bit 47: record/pyframes.h); an ip above them (5-level
// page tables) is kept in far_ips, its field TPPROF_NODE_FAR. Read it with
// tpprof_node_ip.
struct __attribute__((packed)) tpprof_node {
    uint32_t parent;
    uint8_t ip48[6]; // little-endian
};
_Static_assert(sizeof(struct tpprof_node) == 10, "nodes are 10 bytes");
#define TPPROF_NODE_FAR ((UINT64_C(1) << 48) - 1)
// A node whose ip does not fit its 48 bits, and that ip.
struct tpprof_far_ip {
    uint32_t node;
    uint64_t ip;
};

struct tpprof_sample {
    uint64_t time_ns;
    int64_t heap_bytes, heap_blocks, mmap_bytes, alloc_calls, free_calls, rss_bytes;
};

struct tpprof_event {
    uint64_t seq, time_ns;
    uint32_t tid, op, kind, stack;
    uint64_t addr, size, old_addr;
};

struct tpprof_wstate {
    // Live set.
    struct tpprof_livetable live;
    struct tpprof_block *maps;  // live mappings: unsorted array
    uint64_t nmaps, capmaps;
    struct tpprof_map maps_at;  // a live mapping's start address -> its index + 1

    // Sites; a stack's are found from its trie node (writer/sites.c).
    struct tpprof_site *sites;
    uint32_t nsites, capsites;
    // Sites whose dirty flag is set: changed (or new) since their row was
    // last written. tpprof_site_touch counts a site as it becomes dirty,
    // the store as it writes it (clearing the flag): a site changed many
    // times between two flushes counts once. Enough of them make a
    // periodic flush due (writer.c).
    uint32_t nchanged;
    // A bit a site (capdirty of them), set with its dirty flag: a flush
    // visits the dirty sites only, in order, not all of them (a PyTorch
    // run's 700,000, 48 MiB, for each periodic flush; thousands of steps).
    uint64_t *dirty_bits;
    uint32_t capdirty; // (bits)

    // Stack trie: nodes[1..nnodes]; depot id -> leaf node.
    struct tpprof_map trie;
    struct tpprof_node *nodes;
    uint32_t nnodes, capnodes, nodes_written;
    // A forked child's (writer.c fork_own_history): the nodes it inherited
    // (1..fork_nodes; 0 in any other process), and a bit each, set once the
    // node is in the child's file: only the paths of the child's own sites
    // go there (store.c put_inherited_path), not the parent's whole trie.
    uint32_t fork_nodes;
    uint64_t *fork_written;
    struct tpprof_far_ip *far_ips; // by node, ascending (nodes are made in id order)
    uint32_t nfar, capfar;
    uint32_t *leaf_of;
    uint32_t capleaf;

    // Totals.
    int64_t heap_bytes, heap_blocks, mmap_bytes, alloc_calls, free_calls;
    int64_t peak_bytes;
    uint64_t peak_time_ns, peak_epoch;

    // Pending rows.
    struct tpprof_sample *samples;
    uint32_t nsamples, capsamples;
    struct tpprof_event *events;
    uint64_t nevents, capevents;

    // Merge: each stripe's next ticket, and the number of the next record
    // applied (full mode's events.seq and the tensor records' order).
    uint32_t expected[TPPROF_STRIPES];
    uint64_t order;
    uint64_t batch_time_ns;

    // Run.
    uint64_t start_unix_ns;
    const char *end_reason;     // NULL while running
    bool complete, scanned, exec_pending;
    int end_signal;             // the signal the program died of (end_reason "signal"), or 0
    pid_t parent_pid;

    // Tids by thread index (a record's thread field): the writer fills it
    // as rings appear; the store reads it (tpprof_wstate_tid_of). (Tids,
    // not structs: a struct serves another thread once its own is gone.)
    uint32_t *tid_of;
    uint32_t captid_of;
    // The threads table rows of threads whose structs were handed back
    // since the last flush (writer.c retire_threads; the store writes them).
    struct tpprof_thread_row {
        pid_t tid;
        char name[32];
        uint64_t first_ns, last_ns;
    } *gone;
    uint32_t ngone, capgone;
};

TPPROF_HIDDEN extern struct tpprof_wstate tpprof_w;

// Whether s's snap_* hold its share of the current peak (else its live_*
// do: it has not changed since). (56 bits of epochs: a new peak at most
// once per allocation.)
static inline bool tpprof_site_snapped(const struct tpprof_site *s) {
    return s->snap_epoch == (tpprof_w.peak_epoch & TPPROF_SITE_EPOCH_MASK);
}
static inline int64_t tpprof_site_peak_count(const struct tpprof_site *s) {
    return tpprof_site_snapped(s) ? s->snap_count : s->live_count;
}
static inline int64_t tpprof_site_peak_bytes(const struct tpprof_site *s) {
    return tpprof_site_snapped(s) ? s->snap_bytes : s->live_bytes;
}

// Node id's return address (TPPROF_NODE_FAR: found in far_ips, by id).
static inline uint64_t tpprof_node_ip(uint32_t id) {
    const uint8_t *b = tpprof_w.nodes[id].ip48;
    uint64_t v = (uint64_t)b[0] | (uint64_t)b[1] << 8 | (uint64_t)b[2] << 16 | (uint64_t)b[3] << 24 |
                 (uint64_t)b[4] << 32 | (uint64_t)b[5] << 40;
    if (TPPROF_LIKELY(v != TPPROF_NODE_FAR)) return v;
    uint32_t lo = 0, hi = tpprof_w.nfar;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (tpprof_w.far_ips[mid].node < id) lo = mid + 1;
        else hi = mid;
    }
    return lo < tpprof_w.nfar && tpprof_w.far_ips[lo].node == id ? tpprof_w.far_ips[lo].ip : v;
}

// Marks site s changed since its row was written (tpprof_site_touch; the
// store's final flush and a forked child's new file rewrite others too),
// and tpprof_site_clean once it is written.
static inline void tpprof_site_dirty(struct tpprof_site *s) {
    if (!s->dirty) {
        uint32_t i = (uint32_t)(s - tpprof_w.sites);
        s->dirty = true;
        tpprof_w.nchanged++;
        tpprof_w.dirty_bits[i / 64] |= (uint64_t)1 << (i % 64);
    }
}
static inline void tpprof_site_clean(struct tpprof_site *s) {
    if (s->dirty) {
        uint32_t i = (uint32_t)(s - tpprof_w.sites);
        s->dirty = false;
        tpprof_w.nchanged--;
        tpprof_w.dirty_bits[i / 64] &= ~((uint64_t)1 << (i % 64));
    }
}

// The kernel's tid of the thread of index i, or 0 if unknown.
static inline uint32_t tpprof_wstate_tid_of(uint32_t i) {
    return i < tpprof_w.captid_of ? tpprof_w.tid_of[i] : 0;
}

// ---------------------------------------------------------------------------
// The tensor ledger (writer/ledger.c keeps it; store/tensors.c writes it
// out): storages, tensors, outstanding references, allocator events and
// their aggregates (docs/schema-tensors.md).

enum {
    S_RESIZABLE = 1, S_RELEASED = 2, S_FREED = 4, S_HAS_BLOCK = 8, S_BLOCK_FREED = 16,
    S_LIFETIME_PENDING = 32, S_LAST_RELEASE = 64, S_HAS_ALLOCATOR = 128,
    S_TIMED = 256, // its creation's time is exact: its lifetime is measured (observe.c, "Timed lifetimes")
};

struct obs_storage {
    uint64_t id, data, nbytes;
    uint64_t created_ns, last_release_ns, data_released_ns, freed_ns;
    uint64_t released_batch_ns; // the merge time data_released_ns came in (aggregate mode: delays)
    uint64_t block_addr, block_size, block_freed_ns;
    uint64_t created_seq, released_seq;
    uint32_t created_stack, strong, weak, version_bumps;
    uint32_t refs;           // newest outstanding reference (ref pool index, 0 none)
    uint32_t next_in_block;  // next storage (slot + 1) backed by the same block
    uint32_t next_kept;      // peak list link (slot + 1)
    uint32_t implicit_weak;  // thread index + 1 owing c10's implicit weak release
    uint16_t allocator;      // index into names
    int16_t dev_type, dev_index;
    uint16_t block_kind;
    uint16_t flags;
    bool used;
};

#define MAX_DIMS 8
struct obs_tensor {
    uint64_t id, storage, base;
    int64_t offset;
    uint64_t created_ns, created_seq, freed_ns, freed_seq;
    uint32_t created_stack, itemsize, version, next_kept;
    uint32_t handle_refs; // outstanding tp_tensor_retain handles, newest first (ref pool index, 0 none)
    uint32_t ref;         // the storage reference it owns (ref pool index; 0 none; current only while
                          // that obs_ref's tensor is this id: a reference given back clears it)
    int32_t dtype;
    uint8_t ndim;
    bool freed, used;
    bool creation_dropped; // the handle it was created with was released (others hold it)
    int64_t sizes[MAX_DIMS], strides[MAX_DIMS]; // the first ndim of each are set
};

struct obs_ref {
    uint32_t next;   // older reference of the same storage
    uint32_t prev;   // newer one (0: the list's head)
    uint32_t stack;  // stack_nodes id
    uint64_t tensor; // owning tensor, 0 none (cleared when the reference is given back)
    uint32_t op;     // 0 creation, 1 retain, 3 weak retain, 5 lock
    uint32_t sid;    // depot id of the stack (rc_count's hint, for its release)
};

struct alloc_event {
    uint64_t seq, time_ns, segment, segment_size, block, block_size, requested, stream;
    uint32_t thread, stack;
    uint16_t allocator, action;
    int16_t dev_type, dev_index;
};

struct lifetime {
    int64_t count, live_sum, live_max, delay_sum, delay_max;
    int64_t delay_count; // storages whose release delay was measured
    int64_t live_count;  // storages whose live time was measured (timed: S_TIMED)
};

// Key (a record's id, a block's address; never 0) -> slot + 1 of the
// records alive now. writer.h's map costs a call and a hash probe an
// operation, and one small tensor op makes a dozen of them on records that
// live for microseconds, so a direct-mapped table in front takes the keys
// first, and the map (`back`) only a key whose entry another key holds.
// Ids come from the runtime's one counter and take the entry of their low
// bits, so the short-lived records of consecutive ids pass through
// different entries, and a long-lived one keeps its entry; addresses are
// hashed. Each key is in one place: its entry, or else `back`. The front is
// tpprof's own data (never a root of the leak scan).
#define IX_BITS 12
struct ix_entry {
    uint64_t key; // 0: free (val 0 too)
    uint32_t val;
};
struct ledger_index {
    struct ix_entry front[1 << IX_BITS];
    uint64_t back_max; // no key above it was ever put in back
    struct tpprof_map back;
};

#define MAX_NAMES 64
#define FREED_STACK 16

// Per program thread: what pairs a refcount change with a tensor. Every
// record touches its thread's, so it is 16 bytes; the stack of freed
// tensors, which only a TENSOR_FREED sent on its own and an unowned RELEASE
// use, is apart (o.freed, same index).
struct obs_thread {
    uint64_t retain_storage; // the last event was a RETAIN of this storage...
    uint32_t retain_ref;     // ...that made this reference
    uint32_t nfreed;         // entries in the thread's freed stack
};
struct freed_stack {
    struct { uint64_t tensor, storage; uint32_t ref; } e[FREED_STACK]; // TENSOR_FREED awaiting their RELEASE
                                                                        // (ref: obs_tensor.ref)
};

struct tpprof_ledger {
    struct obs_storage *st;
    uint32_t nst, capst, free_st; // free list through next_kept
    struct obs_tensor *tn;
    uint32_t ntn, captn, free_tn;
    struct obs_ref *refs;
    uint32_t nrefs, caprefs, free_ref;
    struct ledger_index st_ids, tn_ids;
    struct ledger_index by_block;  // live block address -> first storage slot + 1
    uint32_t kept_st, kept_tn;    // freed, but alive at the current peak
    struct obs_thread *threads;
    struct freed_stack *freed;
    uint32_t capthreads, capfreed;
    char names[MAX_NAMES][24];
    uint32_t nnames;               // names[0] is "no allocator"
    struct lifetime lifetimes[MAX_NAMES];
    struct tpprof_map rc_index;    // (stack << 3 | op) + 1 -> rc slot + 1
    struct { uint32_t stack, op; int64_t count; } *rc;
    uint32_t nrc, caprc;
    uint32_t *rc_hint;            // (depot stack id, op parity) -> rc slot + 1 it used last
    uint32_t caprc_hint;
    struct alloc_event *aev;
    uint64_t naev, capaev;
    struct { uint64_t base, size; } *segs;
    uint32_t nsegs, capsegs;
    int64_t storage_bytes, peak_bytes;
    uint64_t peak_seq, peak_end, peak_ns;
    uint64_t batch_ns;             // merge time of the record being applied
};

TPPROF_HIDDEN extern struct tpprof_ledger tpprof_ledger;

// "At the peak" is the last moment of the peak: the storage total reaches
// its maximum at peak_seq and everything stays until peak_end (the first
// tensor free or data release after it; 0 while none came). So the tensor
// created on the storage that made the peak is in it, and so is the first
// tensor freed after it.
static inline bool alive_at_peak(uint64_t created_seq, bool dead, uint64_t dead_seq) {
    uint64_t end = tpprof_ledger.peak_end ? tpprof_ledger.peak_end : UINT64_MAX;
    return tpprof_ledger.peak_seq && created_seq < end && (!dead || dead_seq >= end);
}

// ---------------------------------------------------------------------------
// The device state and the graph ledger: data only, in their own headers
// (graph_state.h needs struct tpprof_map, defined above).

#include "writer/device_state.h"
#include "writer/graph_state.h"

#endif
