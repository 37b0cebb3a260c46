// device_state.h: the writer's device memory state, data only (writer/
// device.c keeps it; store/device.c writes it out and marks what it
// wrote): every device block the program made (device_blocks rows), the
// device events not yet written (device_events), the per-device timeline
// samples (device_timeline) and the counters meta reports. Part of the
// store's one view of the writer: state.h includes it. The writer's
// functions over it are in device.h.
//
// Writer-owned, like state.h's: touched with the writer's lock held, never
// from a hook.
#ifndef TPPROF_WRITER_DEVICE_STATE_H
#define TPPROF_WRITER_DEVICE_STATE_H

#include "base/base.h"

#define TPPROF_DEV_MAX 64 // device ordinals the timeline follows (0..63)

// One device_blocks row. A plain successful allocation and free (the
// commonest calls by far) are not device_calls rows of their own: the
// block carries their event's facts (alloc_seq, pool; free_seq,
// free_thread, free_kind, free_device) and the device_events view reads
// them back (store/device.c). 0 in alloc_seq/free_seq: that call is a
// device_calls row, or was not seen.
struct tpprof_dev_block {
    uint64_t rowid;                            // its device_blocks row
    uint64_t address, size, alloc_ns, free_ns; // free_ns 0: not freed
    uint64_t stream, pool;
    uint64_t alloc_seq, free_seq;              // device_events seq of the allocation / the free
    const char *api, *free_api, *ended_by;     // static strings; free_api/ended_by NULL when none
    int32_t device, free_device;
    uint32_t stack, free_stack;                // stack_nodes ids
    uint32_t thread, free_thread;              // thread index
    uint8_t kind, free_kind;                   // kind_code (record/device.h)
    bool stored, dirty;                        // has a row / changed since written
    bool backs;                                // holds a storage's data (the ledger wants its end)
};

// One device_calls row (the device_events view's other calls).
struct tpprof_dev_event {
    uint64_t seq, time_ns, stream, pool, address, size;
    const char *api;
    int32_t device, result;
    uint32_t thread, stack;
    uint8_t op, kind, flag;
};

struct tpprof_dev_sample {
    uint64_t time_ns;
    int32_t device;
    int64_t allocated, reserved; // reserved < 0: unknown
};

struct tpprof_dev_state {
    // The blocks alive, and those ended but not written yet (written and
    // ended ones leave: writer/device.c compacts before the array grows).
    struct tpprof_dev_block *blocks;
    uint64_t nblocks, capblocks;
    struct tpprof_dev_event *events; // pending rows
    uint64_t nevents, capevents;
    struct tpprof_dev_sample *samples; // pending rows
    uint64_t nsamples, capsamples;
    int64_t allocated[TPPROF_DEV_MAX];
    int64_t calls_failed, bad_frees;
    uint64_t next_rowid;
    uint64_t unwritten; // blocks made or ended since the store last wrote (it clears this)
    bool any;     // a device event was applied
    bool changed; // since the store last wrote (it clears this)
};

TPPROF_HIDDEN extern struct tpprof_dev_state tpprof_dev;

#endif
