// run_files.h: the recordings one `tpprof run` leaves beside its own
// (run_files.c): their names, the "also recorded" lines, and folding them
// into one, which starts while the program still runs.
// Private to viewer/; viewer.h includes every header of the viewer.
//
//     tpprof_run_files *f = tpprof_run_files_new(db, &started, fold);
//     while the program runs:
//         if (!tpprof_run_files_poll(f)) wait a little for the program;
//     after it:
//         tpprof_run_files_list(f, shown);   // "tpprof: also recorded: ..."
//         tpprof_run_files_fold(f);          // the rest, then the one file
//         tpprof_run_files_symbolize_apart(f);
//     tpprof_run_files_free(f);
#ifndef TPPROF_VIEWER_RUN_FILES_H
#define TPPROF_VIEWER_RUN_FILES_H

#include "util.h"

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

typedef struct tpprof_run_files tpprof_run_files;

// The recordings of a run whose launched process records into db (an
// absolute path), written at or after since; fold: whether
// tpprof_run_files_fold may fold them (not --keep-processes). A new object
// (free with tpprof_run_files_free), or NULL when out of memory.
tpprof_run_files *tpprof_run_files_new(const char *db, const struct timespec *since, bool fold);
void tpprof_run_files_free(tpprof_run_files *f);

// While the program runs: reads the recordings of the processes that have
// ended (their figures for the list, --keep-processes too) and, with more
// of them than the list names, folds them into the run's one recording as
// they come, a few a call. Whether it did any work (the caller waits for the program when
// not: a scan for new recordings is made at most every 50 ms).
bool tpprof_run_files_poll(tpprof_run_files *f);

// The recording of the last program the launched process became by exec:
// <db without .db>.exec<N>.db for the highest N written this run (the
// recorder numbers them 1, 2, ... in turn), or db itself; *execs = N.
void tpprof_run_last_image(const char *db, const struct timespec *since, char *out, size_t size, int *execs);
// Whether path was modified at or after since.
bool tpprof_run_written_since(const char *path, const struct timespec *since);

// After the program: names the most telling of the run's other recordings
// than shown (the summary's), on stderr.
void tpprof_run_files_list(tpprof_run_files *f, const char *shown);
// Folds the run's recordings into one when there are more than the list
// names (as `tpprof merge`, docs/tpprof-cli.md); what cannot be folded
// stays apart. Returns how many were folded (0: none).
size_t tpprof_run_files_fold(tpprof_run_files *f);
// Symbolizes, in place, every recording of the run still apart.
void tpprof_run_files_symbolize_apart(tpprof_run_files *f);

#endif
