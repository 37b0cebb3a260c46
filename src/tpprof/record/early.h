// early.h: blocks allocated before the start (early.c), and whether the
// runtime's observer is attached (observe.c).
#ifndef TPPROF_RECORD_EARLY_H
#define TPPROF_RECORD_EARLY_H

#include "base/base.h"

// Blocks allocated before the start (early.c): 1 until the constructor is
// done; meanwhile the hooks note blocks with tpprof_early_alloc/free.
TPPROF_HIDDEN extern _Atomic int tpprof_early;
TPPROF_HIDDEN void tpprof_early_alloc(const void *p, size_t n);
TPPROF_HIDDEN void tpprof_early_free(const void *p);
TPPROF_HIDDEN void tpprof_early_map(const void *p, size_t len); // an anonymous, writable mapping
TPPROF_HIDDEN void tpprof_early_unmap(const void *p, size_t len);
// Ends the noting; adopt (if not NULL) gets every block and mapping still there.
TPPROF_HIDDEN void tpprof_early_end(void (*adopt)(uint64_t addr, uint64_t size, bool mapping));

// ---------------------------------------------------------------------------
// Runtime observer (observe.c): 1 once libtensorplay attached our observer
// (TPPROF_TENSORS=0 declines).
TPPROF_HIDDEN extern _Atomic int tpprof_obs_attached;

#endif
