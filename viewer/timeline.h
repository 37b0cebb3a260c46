// timeline.h: the sampled timeline, cut down to a few points (timeline.c).
// Private to viewer/; viewer.h includes every header of the viewer.
#ifndef TPPROF_VIEWER_TIMELINE_H
#define TPPROF_VIEWER_TIMELINE_H

#include "util.h"
#include "db.h"

// ---------------------------------------------------------------------------
// timeline.c

typedef struct tpprof_sample {
    int64_t time_ns;
    uint64_t heap_bytes, heap_blocks, mmap_bytes, alloc_calls, free_calls, rss_bytes;
} tpprof_sample;

// At most max_points samples of the `timeline` table in time order, each the
// largest (heap + mmap) of its group of consecutive samples. *out is a new
// array (caller frees; NULL when the table is empty or absent). 0 or -1 + error.
int tpprof_timeline_load(tpprof_db *db, size_t max_points, tpprof_sample **out, size_t *n);

#endif
