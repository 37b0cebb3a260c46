// verdict.h: the summary's first lines: lost or not, what is reachable (verdict.c).
// Private to viewer/; viewer.h includes every header of the viewer.
#ifndef TPPROF_VIEWER_VERDICT_H
#define TPPROF_VIEWER_VERDICT_H

#include "util.h"
#include "profile.h"

// ---------------------------------------------------------------------------
// verdict.c: the summary's first lines, as memcheck and LSan order them

enum {
    TPPROF_VERDICT_NO_LEAK = 0,     // nothing lost
    TPPROF_VERDICT_LEAK = 1,        // blocks no pointer reached at exit
    TPPROF_VERDICT_NOT_SCANNED = 2, // blocks live at exit, but no scan ran (killed, crashed)
};

typedef struct tpprof_verdict {
    int verdict;
    uint64_t lost_bytes, lost_count;           // what check's lost gate counts
    uint64_t reachable_bytes, reachable_count; // still referenced at exit: not leaks
    uint64_t late_bytes, late_count;           // unscanned: allocated after the scan
    char holder[256];      // the library that allocated most reachable bytes ("" if none)
    uint64_t holder_bytes; // ... and how many
} tpprof_verdict;

// Compute the verdict of a loaded profile (no database access).
void tpprof_verdict_of(const tpprof_profile *p, tpprof_verdict *v);
// "no_leak", "leak" or "not_scanned" (the JSON value; static string).
const char *tpprof_verdict_name(int verdict);
// "no leak: 0 B lost", "LEAK: 12.0 KiB lost in 2 blocks", ... into buf. Returns buf.
char *tpprof_verdict_headline(const tpprof_verdict *v, char *buf, size_t size);
// "256 MiB in 26 blocks still reachable at exit (referenced, not lost); most
// of it allocated by libopenblas.so.0: 256 MiB (100%)" into buf. Returns buf.
char *tpprof_verdict_reachable(const tpprof_verdict *v, char *buf, size_t size);

#endif
