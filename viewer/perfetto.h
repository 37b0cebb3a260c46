// perfetto.h: export --format perfetto: Chrome trace-event JSON (perfetto.c).
// Private to viewer/; viewer.h includes every header of the viewer.
#ifndef TPPROF_VIEWER_PERFETTO_H
#define TPPROF_VIEWER_PERFETTO_H

#include "util.h"
#include "profile.h"
#include "tensors.h"

// ---------------------------------------------------------------------------
// perfetto.c: export --format perfetto

// Write p (x: its tensor tables; path: the database, named in the trace's
// otherData) as Chrome trace-event JSON; past max_events allocation events
// on a thread (0: no cap) the rest are counted on a counter track, with a
// note. 0 or -1 + error.
int tpprof_export_perfetto(FILE *out, const tpprof_profile *p, const tpprof_tensors *x, const char *path,
                           uint64_t max_events);

#endif
