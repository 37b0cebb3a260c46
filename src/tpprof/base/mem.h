// mem.h: memory of tpprof's own (base/mem.c).
#ifndef TPPROF_BASE_MEM_H
#define TPPROF_BASE_MEM_H

#include "base/base.h"

// Own memory (mem.c): never from the tracked heap, so it is neither recorded
// nor scanned as a root.

TPPROF_HIDDEN void *tpprof_mem_map(size_t bytes);           // zeroed, or NULL
// Zeroed and every page present, or NULL: for a hash table about to be
// filled, whose probes read slots before writing them (a read of an
// untouched page maps the zero page, and the write after it faults again
// and flushes the TLB of every CPU the program runs on).
TPPROF_HIDDEN void *tpprof_mem_map_populated(size_t bytes);
// Zeroed, at a 2 MiB boundary, advised onto huge pages (MADV_HUGEPAGE) and
// populated for writing when it is that big, or NULL: for a big table about
// to be filled, whose lookups land anywhere in it. Unmapped with tpprof_mem_unmap(p, bytes) like the others.
TPPROF_HIDDEN void *tpprof_mem_map_huge(size_t bytes);
TPPROF_HIDDEN void tpprof_mem_unmap(void *p, size_t bytes);
TPPROF_HIDDEN void *tpprof_mem_grow(void *p, size_t old_bytes, size_t new_bytes);

#endif
