// storages.h: report's tensor sections and the stack printers commands share (storages.c).
// Private to viewer/; viewer.h includes every header of the viewer.
#ifndef TPPROF_VIEWER_STORAGES_H
#define TPPROF_VIEWER_STORAGES_H

#include "util.h"
#include "db.h"
#include "stacks.h"
#include "profile.h"
#include "tensors.h"
#include "json.h"

// ---------------------------------------------------------------------------
// storages.c: report's tensor sections and the stack printers commands share

// Print a stack innermost first, one frame a line after indent, at most
// max_frames, stopping at main. from_caller: start at the first frame
// outside the tensor runtime (saying how many runtime frames were skipped).
void tpprof_print_stack(const tpprof_stacks *st, int64_t stack_id, const char *indent,
                        size_t max_frames, bool from_caller);
// Write "stack": [frames...] (every frame) as the next key of j.
void tpprof_json_stack(tpprof_json *j, const tpprof_stacks *st, int64_t stack_id);
// "850 ns", "12.5 us", "3.2 ms", "1.50 s". Writes into buf, returns buf.
char *tpprof_format_ns(int64_t ns, char buf[32]);

// The --storages section (cap: list length, 0 = all) and its JSON keys
// (storages, unmatched_by_stack, weak_by_stack, pinned_views).
void tpprof_report_storages_text(const tpprof_profile *p, const tpprof_tensors *t, size_t cap);
void tpprof_report_storages_json(tpprof_json *j, const tpprof_profile *p, const tpprof_tensors *t);
// The storages whose data is alive at exit in a block still live then (not
// those a reused block held before), each with the block's leak group (stack, kind, reachability: a tpprof_leak's key), so
// a leak is shown as the storages it backs.
typedef struct tpprof_backing {
    int64_t storage_id, stack_id, kind;
    int reachability;
} tpprof_backing;
// Loads them (none when the recording has no tensor tables). 0, or -1 with
// tpprof_error() set.
int tpprof_backings_load(tpprof_db *db, const tpprof_tensors *t, tpprof_backing **out, size_t *n);
// Under a leak's stack: "backs storage #4 (16.0 KiB, cpu): ..." for up to 3
// of the storages its blocks back.
void tpprof_report_leak_storages_text(const tpprof_profile *p, const tpprof_tensors *t, const tpprof_backing *b,
                                      size_t nb, const tpprof_leak *l, const char *indent);
// Whether b's block is one of the leak group l's.
static inline bool tpprof_backing_in(const tpprof_backing *b, const tpprof_leak *l) {
    return b->stack_id == l->stack_id && b->kind == l->kind && b->reachability == l->reachability;
}
// The leak's "storages" key: the ids of the storages its blocks back.
void tpprof_report_leak_storages_json(tpprof_json *j, const tpprof_backing *b, size_t nb, const tpprof_leak *l);
// The --lifetimes section (with the longest per-storage release delays) and
// its JSON key (lifetimes); cap bounds the per-storage rows.
void tpprof_report_lifetimes_text(const tpprof_tensors *t, size_t cap);
void tpprof_report_lifetimes_json(tpprof_json *j, const tpprof_tensors *t, size_t cap);

#endif
