// ledger.h: the tensor ledger's state (writer/ledger.c keeps it; store/tensors.c
// writes it out): storages, tensors, outstanding references, allocator events
// and their aggregates (docs/schema-tensors.md).
//
// Writer-owned like everything in writer.h: touched with the writer's lock
// held, never from a program thread.
#ifndef TPPROF_WRITER_LEDGER_H
#define TPPROF_WRITER_LEDGER_H

#include "writer/writer.h"
#include "base/base.h"

// ---------------------------------------------------------------------------
// Records.

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
    uint64_t tensor; // owning tensor, 0 none
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
    struct { uint64_t tensor, storage; } e[FREED_STACK]; // TENSOR_FREED awaiting their RELEASE
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
    struct ledger_index ref_of;    // tensor id -> the storage reference it owns (ref pool index)
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

#endif
