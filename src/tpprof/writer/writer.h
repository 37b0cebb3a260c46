// writer.h: the writer's functions over its state (state.h): the live
// table's and maps' operations (livetable.c), the helpers ledger.c uses,
// the ledger's entry points and the leak scan's (scan.c).
//
// Everything here is owned by the writer: it is called only with the
// writer's mutex held (by the writer thread, or by the thread running exit,
// _exit, exec or fork). Never from inside a malloc hook.
#ifndef TPPROF_WRITER_H
#define TPPROF_WRITER_H

#include "base/base.h"
#include "record/order.h"
#include "record/rings.h"
#include "writer/state.h"

// ---------------------------------------------------------------------------
// Tables (livetable.c).

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


TPPROF_HIDDEN uint32_t tpprof_map_get(const struct tpprof_map *m, uint64_t key); // 0 if absent
TPPROF_HIDDEN bool tpprof_map_put(struct tpprof_map *m, uint64_t key, uint32_t val); // false: key 0 or no memory
// Removes key and returns its value (0 if absent): one probe where get + delete take two.
TPPROF_HIDDEN uint32_t tpprof_map_take(struct tpprof_map *m, uint64_t key);

// ---------------------------------------------------------------------------
// The writer's helpers for ledger.c (writer.c).

// tpprof_ticks() to ns since the start, at most `batch_ns` (the merge time
// of the batch the record came in: it was made before). writer.c calibrates
// against CLOCK_MONOTONIC at every batch.
TPPROF_HIDDEN uint64_t tpprof_writer_ticks_to_ns(uint64_t ticks, uint64_t batch_ns);
// The stack_nodes id of a depot stack id (0 for 0).
TPPROF_HIDDEN uint32_t tpprof_writer_leaf_of(uint32_t sid);
// Holds a block or mapping from before the start (early.c) for the leak
// scan only (apply.h).
TPPROF_HIDDEN void tpprof_writer_adopt_early(uint64_t addr, uint64_t size, bool mapping);
// Appends one row to `events` (full mode).
TPPROF_HIDDEN void tpprof_writer_keep_event(struct tpprof_thread *t, uint64_t seq, int op, int kind, uint64_t time,
                                            uint64_t addr, uint64_t size, uint32_t sid, uint64_t old);

// ---------------------------------------------------------------------------
// Tensors and allocator events (ledger.c, its state in state.h;
// docs/schema-tensors.md).

// Applies one TPPROF_OP_OBS record.
// `order` numbers the records in the order they are applied.
TPPROF_HIDDEN void tpprof_obs_apply(struct tpprof_thread *t, const uint64_t *r, uint64_t time, uint64_t order);
// A block whose `backs` bit is set was freed (or unmapped) at `time`.
TPPROF_HIDDEN void tpprof_obs_block_freed(uint64_t addr, uint64_t time);
// Adds the views thread t folded since the last call (obsfold.c, "Folded
// views": t->fold_count) to refcount_sites: a retain and a release each at
// its creation stack. _all: every thread's (before the final flush).
TPPROF_HIDDEN void tpprof_obs_fold_collect(struct tpprof_thread *t);
TPPROF_HIDDEN void tpprof_obs_fold_collect_all(void);
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
