// gaps.h: what a recording is missing, in the words every command uses (gaps.c).
// Private to viewer/; viewer.h includes every header of the viewer.
#ifndef TPPROF_VIEWER_GAPS_H
#define TPPROF_VIEWER_GAPS_H

#include "util.h"
#include "profile.h"

// ---------------------------------------------------------------------------
// gaps.c: what a recording is missing (check refuses to vouch for it)

// How `tpprof run` saw the program end: exit status or killing signal.
typedef struct tpprof_program_end {
    bool signaled;
    int value;
} tpprof_program_end;

#define TPPROF_GAPS_MAX 8

// The reasons a recording cannot be vouched for, each a clause such as
// "incomplete: ..." or "17 events were dropped while recording (...)".
typedef struct tpprof_gaps {
    size_t n;
    char reason[TPPROF_GAPS_MAX][600];
} tpprof_gaps;

// Fill g with what p (read from path, which may be NULL) is missing: not
// complete (and why, as far as can be told: `end`, from `tpprof run`, may be
// NULL), events dropped, threads not recorded, allocations without a stack,
// a leak scan that did not finish, allocations made past the preload.
// Returns g->n; 0: nothing is missing.
size_t tpprof_profile_gaps(const tpprof_profile *p, const char *path, const tpprof_program_end *end,
                           tpprof_gaps *g);
// The reasons joined by "; " into out; returns out.
char *tpprof_gaps_join(const tpprof_gaps *g, char *out, size_t size);

#endif
