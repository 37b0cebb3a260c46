// run_preflight.h: what `tpprof run` refuses before starting the program (run_preflight.c).
// Private to viewer/; viewer.h includes every header of the viewer.
#ifndef TPPROF_VIEWER_RUN_PREFLIGHT_H
#define TPPROF_VIEWER_RUN_PREFLIGHT_H

#include "util.h"

// ---------------------------------------------------------------------------
// run_preflight.c: what `tpprof run` refuses before starting the program

// 0 when the preload can record cmd[0] (or it is no ELF file: a script, or
// not found: exec will say), else -1 + error saying why in one line (a
// statically linked program; one built with a sanitizer whose runtime it
// loads dynamically).
int tpprof_run_refuse_unrecordable(char **cmd);
// Can the recorder create its database at path (absolute, %p expanded): the
// folder exists and can be written into, no component is longer than
// NAME_MAX, and what the recorder deletes first (path and its -wal, -shm,
// -journal) is a tpprof recording's or absent? 0, or -1 + error.
int tpprof_run_check_output(const char *path);

#endif
