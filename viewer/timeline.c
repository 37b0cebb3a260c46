// timeline.c: the `timeline` table (samples every ~10 ms of the run) cut
// down to at most N points for `report --timeline`.
//
// A long run has hundreds of thousands of samples; a reader wants a shape.
// Samples are grouped into N equal runs and each group is represented by its
// sample with the most heap + mmap bytes, so short peaks survive the cut.
// This file only reads; it does not print.
#include "viewer.h"

#include <sqlite3.h>
#include <stdlib.h>

int tpprof_timeline_load(tpprof_db *db, size_t max_points, tpprof_sample **out, size_t *n) {
    *out = NULL;
    *n = 0;
    int64_t has = 0, count = 0;
    if (tpprof_db_scalar(db, "SELECT COUNT(*) FROM sqlite_master WHERE name = 'timeline'", &has))
        return -1;
    if (!has || max_points == 0)
        return 0;
    if (tpprof_db_scalar(db, "SELECT COUNT(*) FROM timeline", &count))
        return -1;
    if (count <= 0)
        return 0;
    size_t per = ((size_t)count + max_points - 1) / max_points; // samples per point
    size_t points = ((size_t)count + per - 1) / per;
    tpprof_sample *v = calloc(points, sizeof *v);
    if (!v)
        return tpprof_error_set("out of memory");
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db->sql,
                           "SELECT time_ns, heap_bytes, heap_blocks, mmap_bytes, alloc_calls, "
                           "free_calls, rss_bytes FROM timeline ORDER BY time_ns",
                           -1, &st, NULL) != SQLITE_OK) {
        free(v);
        return tpprof_db_error(db, "reading timeline");
    }
    size_t i = 0;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW && i / per < points) {
        tpprof_sample s;
        int64_t col[7];
        for (int c = 0; c < 7; c++) {
            col[c] = sqlite3_column_int64(st, c); // NULL reads as 0
            if (c > 0 && col[c] < 0)
                col[c] = 0;
        }
        s.time_ns = col[0];
        s.heap_bytes = (uint64_t)col[1];
        s.heap_blocks = (uint64_t)col[2];
        s.mmap_bytes = (uint64_t)col[3];
        s.alloc_calls = (uint64_t)col[4];
        s.free_calls = (uint64_t)col[5];
        s.rss_bytes = (uint64_t)col[6];
        tpprof_sample *slot = &v[i / per];
        if (i % per == 0 || s.heap_bytes + s.mmap_bytes > slot->heap_bytes + slot->mmap_bytes)
            *slot = s;
        i++;
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE && rc != SQLITE_ROW) {
        free(v);
        return tpprof_db_error(db, "reading timeline");
    }
    *out = v;
    *n = (i + per - 1) / per;
    return 0;
}
