// sites.h: the writer's sites and peak, the parts each event takes inline
// (writer.c's apply); the trie and the slow paths are in sites.c.
// Writer-owned (writer.h): never on a program thread.
#ifndef TPPROF_WRITER_SITES_H
#define TPPROF_WRITER_SITES_H

#include "writer/writer.h"
#include "base/base.h"

// depot id -> index+1 of the site last used with it: a call site nearly
// always allocates with one kind, so this skips two hash lookups.
struct tpprof_site_hints {
    uint32_t *at;
    uint32_t cap;
};
TPPROF_HIDDEN extern struct tpprof_site_hints tpprof_site_hints;

// The site of (depot stack sid, kind), made if new (its stack interned in
// the trie); NULL if memory ran out. _slow also remembers it as sid's hint.
TPPROF_HIDDEN struct tpprof_site *tpprof_site_lookup(uint32_t sid, int kind);
TPPROF_HIDDEN __attribute__((noinline)) struct tpprof_site *tpprof_site_get_slow(uint32_t sid, int kind);

// The trie's child of node `parent` (0: a root) for return address ip, or
// 0 when it has none (tests; the walk in sites.c uses it inline).
TPPROF_HIDDEN uint32_t tpprof_writer_trie_child(uint32_t parent, uint64_t ip);

// Once per allocation: the hint's hit inline, the rest not.
static inline struct tpprof_site *tpprof_site_get(uint32_t sid, int kind) {
    const struct tpprof_site_hints *h = &tpprof_site_hints;
    if (TPPROF_LIKELY(sid < h->cap && h->at[sid])) {
        struct tpprof_site *s = &tpprof_w.sites[h->at[sid] - 1];
        if (TPPROF_LIKELY(s->kind == (uint32_t)kind)) return s;
    }
    return tpprof_site_get_slow(sid, kind);
}

// Copy-on-write snapshot of the per-site live totals at the global peak:
// before a site changes, it saves its value unless it already did since the
// last new peak. So a new peak costs O(1), not a copy of every site. A
// site that becomes dirty is counted in tpprof_w.nchanged (state.h).
static inline void tpprof_site_touch(struct tpprof_site *s) {
    if (!tpprof_site_snapped(s)) {
        s->snap_epoch = tpprof_w.peak_epoch & TPPROF_SITE_EPOCH_MASK;
        s->snap_count = s->live_count;
        s->snap_bytes = s->live_bytes;
    }
    tpprof_site_dirty(s);
}

static inline void tpprof_check_peak(uint64_t t) {
    struct tpprof_wstate *w = &tpprof_w;
    int64_t total = w->heap_bytes + w->mmap_bytes;
    if (total > w->peak_bytes) {
        w->peak_bytes = total;
        w->peak_time_ns = t;
        w->peak_epoch++;
    }
}

#endif
