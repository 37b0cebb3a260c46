// viewer.h: the pieces the `tpprof` commands share, private to viewer/: an
// umbrella over one small header per file (X.c declares in X.h; stacks.h
// also holds pyframes.c, report.h report_device.c, report_diff.c, folded.c
// and html*.c, inputs.h cmd_merge.c's merge), each including the headers it
// stands on, and the commands' entry points below. A .c file includes
// viewer.h.
//
// The viewer knows a recording only through docs/schema.md: it never includes
// src/ headers. Layers, bottom up:
//   util.c       sizes, numbers, the thread-local error message
//   db.c         opening and validating a database (read-only or read-write)
//   symbolize.c  ip -> (function, file, line, module) frames with libdw
//   stacks.c     the stack trie and the symbols, loaded into memory once
//   profile.c    summary, leaks, sites: everything report and check show
//   gaps.c       what a recording is missing, in the words every command uses
//   timeline.c   the sampled timeline, cut down to a few points
//   diff.c       two recordings matched stack by stack (report_diff.c
//                prints them for report --diff)
//   json.c       a small streaming JSON writer
//   device.c     device (CUDA) memory: per-device figures, leaks, peaks
//                (report_device.c prints them)
//   tensors.c    storages, tensors, references and DataPtr lifetimes
//                (docs/schema-tensors.md), and what they mean: unmatched
//                retains, weak holders, small views pinning big storages
//   replay.c     allocator_events replayed into block maps (fragmentation)
//   run_preflight.c  what `tpprof run` refuses before starting the program
//   run_files.c  the recordings a run leaves: listed, folded as their processes end
//   verdict.c    the summary's first lines: lost or not, what is reachable
//   suppressions.c  LeakSanitizer suppression files applied to a profile
//   gates.c      check's gates in one table (check and run parse it)
//   inputs.c     several recordings on a command line, globs expanded
//   folded.c     report --format folded: flame graph input
//   html*.c      report --format html: the page (html.c), its data
//                (html_data.c: timeline, live sets) and flame tree
//                (html_flame.c); its script and style are html/ files
//   perfetto.c   export --format perfetto: Chrome trace-event JSON
//   cmd_*.c      one file per command; main.c dispatches
//
// Errors: functions that can fail return NULL or -1 and leave one line in
// tpprof_error() (no trailing newline). Commands print it and exit 2.
#ifndef TPPROF_VIEWER_H
#define TPPROF_VIEWER_H

#include "util.h"
#include "db.h"
#include "symbolize.h"
#include "stacks.h"
#include "profile.h"
#include "device.h"
#include "gaps.h"
#include "run_preflight.h"
#include "run_files.h"
#include "diff.h"
#include "verdict.h"
#include "timeline.h"
#include "tensors.h"
#include "autograd.h"
#include "replay.h"
#include "json.h"
#include "storages.h"
#include "report.h"
#include "suppressions.h"
#include "gates.h"
#include "inputs.h"
#include "perfetto.h"

// ---------------------------------------------------------------------------
// Commands: argv[0] is the command name. Each returns the process exit status.

int tpprof_cmd_run(int argc, char **argv);
int tpprof_cmd_report(int argc, char **argv);
int tpprof_cmd_check(int argc, char **argv);
int tpprof_cmd_graph(int argc, char **argv);
int tpprof_cmd_fragmentation(int argc, char **argv);
int tpprof_cmd_export(int argc, char **argv);
int tpprof_cmd_merge(int argc, char **argv);

extern const char tpprof_usage_run[], tpprof_usage_report[],
    tpprof_usage_graph[], tpprof_usage_fragmentation[], tpprof_usage_export[],
    tpprof_usage_merge[];

#endif
