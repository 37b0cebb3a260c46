// store.h: the recorder's SQLite output, its one interface (store/).
//
// Every SQL statement of the recorder is in store/: store.c (opening the
// file, the schema, the host tables, meta) and tensors.c (the tensor
// ledger's tables). The store reads the writer's state (writer/state.h,
// data only) and marks what it wrote (a site's `stored`, the pending
// rows it consumed); it calls nothing in writer/. It is driven by the
// writer, with the writer's lock held.
//
//     tpprof_store_open(path);        // at the start: schema, meta
//     tpprof_store_flush(false);      // periodically: what is new, one transaction
//     tpprof_store_flush(true);       // at the end: everything, live blocks too
//     tpprof_store_close(true);
//
// All return false after printing the one failure line (tpprof_disable).
#ifndef TPPROF_STORE_H
#define TPPROF_STORE_H

#include <stdbool.h>

#include "base/base.h"

TPPROF_HIDDEN bool tpprof_store_open(const char *path);
// Claims path as this process's recording before it is written: an
// exclusive flock(2) on the file (created empty if missing), held for the
// process's life on a guarded descriptor (base/fdguard.h), so that another
// process given the same TPPROF_OUTPUT (the commands of a pipeline run with
// an exported LD_PRELOAD) does not replace a recording still being written.
// 1: claimed (a new recording then starts in the claimed file); 0: another
// live process holds it; -1: it cannot be opened (tpprof_store_open will
// say why). A forked child's call drops its copy of the parent's claim.
TPPROF_HIDDEN int tpprof_store_claim(const char *path);
TPPROF_HIDDEN bool tpprof_store_flush(bool final);
// The same in steps, for a periodic flush that must not keep the rings
// waiting (store.c): begin opens the transaction (false: failed, said);
// each step writes a few hundred rows and returns 1 while there is more,
// 0 once committed, -1 on failure (said, rolled back). Between steps the
// caller may add to the tables (drain the rings); a final flush takes one
// step.
TPPROF_HIDDEN bool tpprof_store_flush_begin(bool final);
TPPROF_HIDDEN int tpprof_store_flush_step(void);
TPPROF_HIDDEN void tpprof_store_close(bool final);
// Whether the file open now was a recording already (an exec'd image's,
// reopened): its tables may hold an earlier image's rows. A new one is the
// empty recording's copy (schema.c).
TPPROF_HIDDEN bool tpprof_store_reopened(void);
// A forked child: drops the parent's handle unclosed.
TPPROF_HIDDEN void tpprof_store_abandon(void);

// Writes allocator_events (every flush) and, when final, the storage,
// tensor and aggregate tables (tensors.c); false on an SQLite error.
struct sqlite3;
TPPROF_HIDDEN bool tpprof_store_tensors_put(struct sqlite3 *db, bool final);
// The schema (schema.c): _make runs its statements and fills the kinds
// table on db (they are IF NOT EXISTS / OR REPLACE: harmless on a recording
// that has them); false on an SQLite error. _copy writes the build's copy
// of the empty recording they make (schema_gen.c) to path, which must not
// exist (O_EXCL), or, in_place, into the file at path, emptied first (this
// process's claimed file); false, with nothing left there (in place: an
// empty file), if it could not.
// _current: whether db was made by this recorder's _make (or is its copy):
// its user_version is the schema's hash; false too on an SQLite error.
TPPROF_HIDDEN bool tpprof_store_schema_make(struct sqlite3 *db);
TPPROF_HIDDEN bool tpprof_store_schema_current(struct sqlite3 *db);
TPPROF_HIDDEN bool tpprof_store_schema_copy(const char *path, bool in_place);
// The device memory tables (device.c): written (new events and samples,
// changed blocks, the device meta keys) every flush.
TPPROF_HIDDEN bool tpprof_store_device_put(struct sqlite3 *db, bool final);
// Writes the Python frames of the nodes written so far (py_frames) and
// meta.python (pyframes.c); false on an SQLite error. _reset: a new file.
TPPROF_HIDDEN bool tpprof_store_py_put(struct sqlite3 *db);
TPPROF_HIDDEN void tpprof_store_py_reset(void);
// The py_frames row of one node's ip, for a node written out of order (a
// forked child's inherited stack paths, store.c), when it is a Python frame
// without one; false on an SQLite error.
TPPROF_HIDDEN bool tpprof_store_py_node(struct sqlite3 *db, uint64_t ip);
// The autograd graph's tables (graph.c: graph_nodes, graph_edges,
// saved_tensors), at the final flush, from writer/graph.h; false on an
// SQLite error.
TPPROF_HIDDEN bool tpprof_store_graph_put(struct sqlite3 *db);

#endif
