// diff.h: two recordings matched stack by stack (diff.c).
// Private to viewer/; viewer.h includes every header of the viewer.
#ifndef TPPROF_VIEWER_DIFF_H
#define TPPROF_VIEWER_DIFF_H

#include "util.h"
#include "profile.h"

// ---------------------------------------------------------------------------
// diff.c

// A new string naming stack_id of p by its function names, innermost first,
// at most max_frames of them (0: all): equal across runs and builds when the
// call path is the same. NULL when out of memory.
char *tpprof_stack_key(const tpprof_profile *p, int64_t stack_id, size_t max_frames);

// Does the lost gate count this group? Lost blocks, and unscanned ones when
// no reachability scan ran (after a scan they were allocated later).
bool tpprof_leak_counts_as_lost(const tpprof_profile *p, const tpprof_leak *l);

// One stack key's totals in both runs (bytes; *_old from the baseline).
typedef struct tpprof_delta {
    char *key;                    // owned by the array
    int64_t stack_new, stack_old; // a stack with this key in each run, -1 if none
    int64_t leaked_new, leaked_old, lost_new, lost_old;
    int64_t bytes_new, bytes_old, calls_new, calls_old, peak_new, peak_old;
} tpprof_delta;

// Match the leaks and sites of two recordings by stack key (max_frames as
// for tpprof_stack_key). *out: a new array sorted by key, freed with
// tpprof_diff_free. 0 or -1 + error.
int tpprof_diff(const tpprof_profile *now, const tpprof_profile *old, size_t max_frames,
                tpprof_delta **out, size_t *n);
void tpprof_diff_free(tpprof_delta *d, size_t n);

#endif
