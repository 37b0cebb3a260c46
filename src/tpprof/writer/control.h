// control.h: what process/ asks of the writer (writer.c): start, end,
// fork, exec, pause.
#ifndef TPPROF_WRITER_CONTROL_H
#define TPPROF_WRITER_CONTROL_H

#include "base/base.h"

// Writer (writer.c).

// Opens the database at `path` and starts the writer thread; false (after
// the one stderr line) if the database cannot be written.
TPPROF_HIDDEN bool tpprof_writer_start(const char *path);
// Claims `path` for this process's recording before the start (store.h's
// tpprof_store_claim): 1 claimed, 0 held by another live process, -1 not
// openable (the start says why).
TPPROF_HIDDEN int tpprof_writer_claim(const char *path);
// Drains the rings and classifies the live blocks (atexit; `sp`: the
// exiting thread's stack pointer, registers spilled above it).
TPPROF_HIDDEN void tpprof_writer_leak_scan(uintptr_t sp);
// Drains the rings, writes everything and closes the database. EXIT: after
// the leak scan, complete=1; EXEC: complete=1, end_reason=exec, no scan;
// QUICK (_exit): complete=0, live blocks unscanned.
enum tpprof_end { TPPROF_END_EXIT, TPPROF_END_EXEC, TPPROF_END_QUICK };
TPPROF_HIDDEN void tpprof_writer_finish(enum tpprof_end how);
TPPROF_HIDDEN void tpprof_writer_exec_failed(void);
// Holds the writer still (its lock) while a program's dup2 takes the number
// of a file of tpprof's; resume reopens that file elsewhere (statm) and lets
// the writer go on.
TPPROF_HIDDEN void tpprof_writer_pause(void);
TPPROF_HIDDEN void tpprof_writer_resume(int taken);
// How many threads of the process are tpprof's (the writer: 0 or 1), for
// the program's view of its own thread count (procstat.c).
TPPROF_HIDDEN int tpprof_writer_threads(void);
// The main thread called pthread_exit (lifecycle.c): the writer ends the
// process once it is the last thread (writer.c).
TPPROF_HIDDEN extern _Atomic int tpprof_main_exited;
// Turns recording on, once the writer started: the blocks noted before the
// start (early.c) become the writer's, for the leak scan only.
TPPROF_HIDDEN void tpprof_writer_go(void);
// A signal is ending the process: writes everything, the live set scanned
// from sp if sp is not 0 (lifecycle.c's handler).
TPPROF_HIDDEN void tpprof_writer_end_signal(int sig, uintptr_t sp);
TPPROF_HIDDEN void tpprof_writer_fork_prepare(void);
TPPROF_HIDDEN void tpprof_writer_fork_parent(void);
TPPROF_HIDDEN void tpprof_writer_fork_child(const char *path);

#endif
