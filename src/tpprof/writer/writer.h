// writer.h: the writer thread's state, shared by writer.c (aggregation),
// livetable.c (its tables), store/ (SQLite output, reading it) and scan.c (leak scan).
//
// Everything here is owned by the writer: it is touched only with
// tpprof_writer's mutex held (by the writer thread, or by the thread running
// exit, _exit, exec or fork). Never touched from inside a malloc hook.
#ifndef TPPROF_WRITER_H
#define TPPROF_WRITER_H

#include "base/base.h"
#include "record/order.h"
#include "record/rings.h"

// ---------------------------------------------------------------------------
// Tables (livetable.c).

// A heap block or a mapping still live. 32 bytes: two to a cache line, as
// the live table is probed once per event.
struct tpprof_block {
    uint64_t addr;
    uint64_t size;
    uint32_t site;          // index into tpprof_wstate.sites
    uint32_t thread : 29;   // thread index
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

// The tables' hash (the probe start of a key, before masking).
static inline uint64_t tpprof_live_home(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return x;
}

// The writer probes the live table once per malloc and once per free, so the
// probe, insert and delete are inline here; growing is not.

// How full the live table gets: up to this size, at most 1/8 (each slot a
// probe steps past costs nearly as much as the rest of the event: often one
// more cache line, and a mispredicted loop exit); beyond, at most 1/2 (a
// probe is a cache miss anyway, which the merge prefetches, and memory
// counts). livetable.c has the measurements.
#define TPPROF_LIVE_SPARSE_BYTES ((uint64_t)1 << 20)

// The slot holding addr, or else the free slot that ends its probe (cap > 0:
// the table is never full).
static inline struct tpprof_block *tpprof_live_probe(const struct tpprof_livetable *lt, uint64_t addr) {
    uint64_t mask = lt->cap - 1, j = tpprof_live_home(addr) & mask;
    while (lt->slots[j].addr != addr && lt->slots[j].addr) j = (j + 1) & mask;
    return &lt->slots[j];
}

// Doubles the table (and sets its limit); false if memory ran out.
TPPROF_HIDDEN bool tpprof_live_grow(struct tpprof_livetable *lt);

// The slot of addr (not 0): a new one (addr set, every other field for the
// caller to write, *existed false), or the block already there (*existed
// true); NULL if memory ran out.
static inline struct tpprof_block *tpprof_live_insert(struct tpprof_livetable *lt, uint64_t addr, bool *existed) {
    if (TPPROF_UNLIKELY(lt->count >= lt->limit) && !tpprof_live_grow(lt)) return NULL;
    struct tpprof_block *b = tpprof_live_probe(lt, addr);
    *existed = b->addr != 0;
    if (!*existed) {
        b->addr = addr;
        lt->count++;
    }
    return b;
}

// Frees the slot b of the table (one tpprof_live_probe returned, holding a
// block), moving later blocks of its probe run back.
static inline void tpprof_live_erase(struct tpprof_livetable *lt, struct tpprof_block *b) {
    struct tpprof_block *slots = lt->slots;
    uint64_t mask = lt->cap - 1, i = (uint64_t)(b - slots);
    for (uint64_t j = (i + 1) & mask; slots[j].addr; j = (j + 1) & mask) {
        // Move j back to i unless its home lies cyclically in (i, j]: as
        // distances from i, mod cap, one comparison.
        if (((tpprof_live_home(slots[j].addr) - i - 1) & mask) < ((j - i) & mask)) continue;
        slots[i] = slots[j];
        i = j;
    }
    slots[i].addr = 0;
    lt->count--;
}

// Removes addr's block and copies it to *out; false if there is none.
static inline bool tpprof_live_remove(struct tpprof_livetable *lt, uint64_t addr, struct tpprof_block *out) {
    if (!lt->cap || !addr) return false;
    struct tpprof_block *b = tpprof_live_probe(lt, addr);
    if (!b->addr) return false;
    *out = *b;
    tpprof_live_erase(lt, b);
    return true;
}

// The block of addr, or NULL.
TPPROF_HIDDEN struct tpprof_block *tpprof_live_find(struct tpprof_livetable *lt, uint64_t addr);

// u64 key (never 0) -> u32 value (0 = absent): sites, the stack trie, and
// the tensor ledger's id and block indexes (which also delete).
struct tpprof_map {
    uint64_t *keys;
    uint32_t *vals;
    uint64_t cap, count;
};

TPPROF_HIDDEN uint32_t tpprof_map_get(const struct tpprof_map *m, uint64_t key); // 0 if absent
TPPROF_HIDDEN bool tpprof_map_put(struct tpprof_map *m, uint64_t key, uint32_t val); // false: key 0 or no memory
// Removes key and returns its value (0 if absent): one probe where get + delete take two.
TPPROF_HIDDEN uint32_t tpprof_map_take(struct tpprof_map *m, uint64_t key);

// ---------------------------------------------------------------------------
// Aggregates.

// What every event touches comes first, in one cache line.
struct tpprof_site {
    _Alignas(64) uint32_t stack; // stack_nodes id of the innermost frame (0: unknown)
    uint16_t kind;
    bool dirty;                  // changed since the last flush
    bool stored;                 // has a row in the database file
    uint64_t snap_epoch;
    int64_t live_count, live_bytes, alloc_count, alloc_bytes, free_count, freed_bytes;
    int64_t snap_count, snap_bytes; // live at the peak, if snap_epoch == peak_epoch
    int64_t temp_count, temp_bytes;
    int64_t stored_peak_count, stored_peak_bytes; // the peak values its row holds (if stored)
};

struct tpprof_node {
    uint32_t parent;
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

    // Sites: (stack, kind) -> index.
    struct tpprof_map site_index;
    struct tpprof_site *sites;
    uint32_t nsites, capsites;

    // Stack trie: nodes[1..nnodes]; depot id -> leaf node.
    struct tpprof_map trie;
    struct tpprof_node *nodes;
    uint32_t nnodes, capnodes, nodes_written;
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

// The kernel's tid of the thread of index i, or 0 if unknown.
static inline uint32_t tpprof_wstate_tid_of(uint32_t i) {
    return i < tpprof_w.captid_of ? tpprof_w.tid_of[i] : 0;
}

// ---------------------------------------------------------------------------
// The writer's helpers for ledger.c (writer.c).

// tpprof_ticks() to ns since the start, at most `batch_ns` (the merge time
// of the batch the record came in: it was made before). writer.c calibrates
// against CLOCK_MONOTONIC at every batch.
TPPROF_HIDDEN uint64_t tpprof_writer_ticks_to_ns(uint64_t ticks, uint64_t batch_ns);
// The stack_nodes id of a depot stack id (0 for 0).
TPPROF_HIDDEN uint32_t tpprof_writer_leaf_of(uint32_t sid);
// Appends one row to `events` (full mode).
TPPROF_HIDDEN void tpprof_writer_keep_event(struct tpprof_thread *t, uint64_t seq, int op, int kind, uint64_t time,
                                            uint64_t addr, uint64_t size, uint32_t sid, uint64_t old);

// ---------------------------------------------------------------------------
// Tensors and allocator events (ledger.c, its state in ledger.h;
// docs/schema-tensors.md).

// Applies one TPPROF_OP_OBS record.
// `order` numbers the records in the order they are applied.
TPPROF_HIDDEN void tpprof_obs_apply(struct tpprof_thread *t, const uint64_t *r, uint64_t time, uint64_t order);
// A block whose `backs` bit is set was freed (or unmapped) at `time`.
TPPROF_HIDDEN void tpprof_obs_block_freed(uint64_t addr, uint64_t time);
// The index in maps of the live mapping starting at addr, or -1 (writer.c).
TPPROF_HIDDEN int64_t tpprof_writer_map_at(uint64_t addr);
TPPROF_HIDDEN void tpprof_obs_fork_child(void);

// ---------------------------------------------------------------------------
// Leak scan (scan.c): sets `reach` of every live block and mapping.

TPPROF_HIDDEN void tpprof_scan_run(struct tpprof_wstate *w, uintptr_t sp);
// Finds, once in the constructor, what the scan must know before the end
// (where libc allocates stdio buffers: see scan.c).
TPPROF_HIDDEN void tpprof_scan_prepare(void);

#endif
