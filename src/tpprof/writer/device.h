// device.h: the writer's device memory state (writer/device.c): every
// device block the program made (device_blocks rows), the device events
// not yet written (device_events), the per-device timeline samples
// (device_timeline) and the counters meta reports. Writer-owned, like
// writer.h's state: touched with the writer's lock held, never from a hook.
// The store reads it (store/device.c) and marks what it wrote.
#ifndef TPPROF_WRITER_DEVICE_H
#define TPPROF_WRITER_DEVICE_H

#include "base/base.h"
#include "record/rings.h"
#include "writer/writer.h"

#define TPPROF_DEV_MAX 64 // device ordinals the timeline follows (0..63)

// One device_blocks row.
struct tpprof_dev_block {
    uint64_t rowid;                            // its device_blocks row
    uint64_t address, size, alloc_ns, free_ns; // free_ns 0: not freed
    uint64_t stream;
    const char *api, *free_api, *ended_by;     // static strings; free_api/ended_by NULL when none
    int32_t device;
    uint32_t stack, free_stack;                // stack_nodes ids
    uint32_t thread;                           // thread index
    uint8_t kind;                              // kind_code (record/device.h)
    bool stored, dirty;                        // has a row / changed since written
    bool backs;                                // holds a storage's data (the ledger wants its end)
};

// One device_events row.
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
    bool any;     // a device event was applied
    bool changed; // since the store last wrote (it clears this)
};

TPPROF_HIDDEN extern struct tpprof_dev_state tpprof_dev;

// Applies one TPPROF_OP_DEVICE record of thread t; `seq` is its apply order.
TPPROF_HIDDEN void tpprof_device_apply(struct tpprof_thread *t, const uint64_t *r, uint64_t seq);
// Writes the device timeline's held-back changes (writer/device.c): at
// every timeline sample of the writer's, and before the final flush.
TPPROF_HIDDEN void tpprof_device_timeline_tick(void);
// The live device allocation starting at `addr` (not a VMM block): its size
// and kinds id; marks it as backing a tensor storage, so its end (free or
// reset) calls tpprof_obs_block_freed (the ledger's). False if none.
TPPROF_HIDDEN bool tpprof_device_block_at(uint64_t addr, uint64_t *size, uint16_t *kind_id);
// A forked child writes a new file: every block is written again there.
TPPROF_HIDDEN void tpprof_device_fork_child(void);

#endif
