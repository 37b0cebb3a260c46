// device.h: the writer's functions over its device memory state
// (writer/device.c; the state itself, data only, is in device_state.h,
// which the store reads through state.h). Called with the writer's lock
// held, never from a hook.
#ifndef TPPROF_WRITER_DEVICE_H
#define TPPROF_WRITER_DEVICE_H

#include "base/base.h"
#include "record/rings.h"
#include "writer/writer.h"
#include "writer/device_state.h"

// Applies one TPPROF_OP_DEVICE record of thread t; `seq` is its apply order.
TPPROF_HIDDEN void tpprof_device_apply(struct tpprof_thread *t, const uint64_t *r, uint64_t seq);
// Writes the device timeline's held-back changes (writer/device.c): at
// every timeline sample of the writer's, and before the final flush.
TPPROF_HIDDEN void tpprof_device_timeline_tick(void);
// The live device allocation starting at `addr` (not a VMM block): its size
// and kinds id; marks it as backing a tensor storage, so its end (free or
// reset) calls tpprof_obs_block_freed (the ledger's). False if none.
TPPROF_HIDDEN bool tpprof_device_block_at(uint64_t addr, uint64_t *size, uint16_t *kind_id);
// Whether device rows wait in such numbers that the writer should flush
// now, before its next periodic flush: their writing costs the same per
// row however they are batched, and a program allocating in a loop would
// otherwise keep millions of them in memory until the exit (the flush
// period grows with the flush's cost: writer.c, FLUSH_SHARE).
TPPROF_HIDDEN bool tpprof_device_flush_due(void);
// A forked child writes a new file: every block is written again there.
TPPROF_HIDDEN void tpprof_device_fork_child(void);

#endif
