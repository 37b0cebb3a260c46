// merge.h: merging the per-thread rings into one event order (merge.c).
//
//     tpprof_merge_expect_current();      // at the start: each stripe's next ticket
//     ...
//     while (running) {
//         tpprof_merge_drain(false);       // whatever's turn has come, for a slice
//         if (!tpprof_merge_cut) nap();   // all of it: the rings are drained
//     }
//     tpprof_merge_drain(true);            // at the end: what the rings hold now
//
// Each record is applied to the writer's tables (apply.h) as its turn
// comes: the records of one stripe (heap addresses hash onto stripes;
// mappings share stripe 0; observer records have TPPROF_OBS_STRIPE) in
// ticket order, across stripes by epoch (a ring runs at most EPOCH_SLACK
// epochs ahead of the oldest ready one; equal epochs: the older thread's
// ring first). Writer-owned (writer.h): call it with the writer's lock held.
#ifndef TPPROF_WRITER_MERGE_H
#define TPPROF_WRITER_MERGE_H

#include "base/base.h"
#include "record/rings.h"

// Applies every record whose turn has come, from the rings of every thread
// on tpprof_threads (and those rings.c hands out again); returns how many.
// With `force` (exit, exec, fork, the leak scan) it takes what the rings
// held when it began, skipping the stripe tickets still missing then
// (threads that vanished inside a hook); without, it stops after a slice
// of 5 ms or as soon as tpprof_merge_waiters is non-zero (then
// tpprof_merge_cut is set), and skips a missing ticket only after 0.5 s.
// A thread that is gone for good and drained leaves the merge: its threads
// table row is kept (tpprof_w.gone) and its struct recycled (rings.c).
TPPROF_HIDDEN uint64_t tpprof_merge_drain(bool force);
// The last tpprof_merge_drain stopped with records still waiting.
TPPROF_HIDDEN extern bool tpprof_merge_cut;
// Threads waiting for the writer's lock (the writer counts them): a drain
// not forced yields to them.
TPPROF_HIDDEN extern _Atomic int tpprof_merge_waiters;
// Each stripe's next ticket is the one it hands out next (the writer
// starts, or a forked child goes on from what the parent's rings held).
TPPROF_HIDDEN void tpprof_merge_expect_current(void);
// Notes thread t's tid under its index (tpprof_w.tid_of).
TPPROF_HIDDEN void tpprof_merge_note_thread(struct tpprof_thread *t);

#endif
