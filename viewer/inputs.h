// inputs.h: several recordings on a command line, globs expanded (inputs.c), and merging them into one (cmd_merge.c).
// Private to viewer/; viewer.h includes every header of the viewer.
#ifndef TPPROF_VIEWER_INPUTS_H
#define TPPROF_VIEWER_INPUTS_H

#include "util.h"
#include "db.h"

// ---------------------------------------------------------------------------
// inputs.c: the recordings a command names (several, or a quoted glob)

typedef struct tpprof_inputs {
    char **v; // owned copies, in the order named (a glob's sorted)
    size_t n, cap;
} tpprof_inputs;

// Add a database argument; a pattern with *, ? or [ that names no file is
// expanded as a glob. A recording named twice is an error. 0 or -1 + error.
int tpprof_inputs_add(tpprof_inputs *in, const char *arg);
void tpprof_inputs_free(tpprof_inputs *in);

// ---------------------------------------------------------------------------
// cmd_merge.c

// Merge the recordings inputs[0..n) into a new database at out_path
// (docs/schema.md, "Merged recordings"); refuses an existing out_path.
// quiet: no warning for an input that cannot be symbolized.
// symbolize_inputs: each input is symbolized first, in place when writable
// (a later report of it reads its saved symbols); else they are merged as
// they are and the frames none of them named are symbolized once in the
// merged recording, each (module, offset) once for all the processes
// (*lookups, when not NULL: how many addresses that looked up). 0, or -1 +
// error (nothing left at out_path).
int tpprof_merge(const char *out_path, char *const *inputs, size_t n, bool quiet, bool symbolize_inputs,
                 size_t *lookups);

// The same merge an input at a time, as the inputs come (`tpprof run` folds
// each process's recording as the process ends): begin makes out_path (a
// new file; NULL + error); add copies one input, unsymbolized, as process
// number `process` (1..65535, each once; 0: one past the highest so far;
// numbers may be left out; open: the input open already, borrowed, or
// NULL), 0 or -1 + error (the merge is then to be
// abandoned); end indexes, writes the meta and symbolizes the frames once
// for all the inputs (as tpprof_merge with symbolize_inputs false), 0 or -1
// + error (nothing left at out_path); abandon removes out_path. end and
// abandon free the merge.
typedef struct tpprof_merging tpprof_merging;
tpprof_merging *tpprof_merge_begin(const char *out_path);
int tpprof_merge_add(tpprof_merging *m, const char *input, int64_t process, tpprof_db *open);
size_t tpprof_merge_count(const tpprof_merging *m); // inputs added (0 for NULL)
int tpprof_merge_end(tpprof_merging *m, size_t *lookups);
void tpprof_merge_abandon(tpprof_merging *m);

#endif
