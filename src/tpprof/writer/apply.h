// apply.h: applying one record to the writer's tables (the live table, the
// mappings, sites and totals, full mode's events), and the blocks from
// before the start (tpprof_writer_adopt_early). Included by merge.c only,
// where the merge loop calls apply() once per record: its code is here, not
// in a .c of its own, so that it still inlines into that loop as it did
// when it was part of writer.c (always_inline: the writer competes with the
// program for a CPU). Writer-owned (writer.h).
#ifndef TPPROF_WRITER_APPLY_H
#define TPPROF_WRITER_APPLY_H

#include "writer/device.h"
#include "writer/sites.h"
#include "writer/writer.h"
#include "base/base.h"
#include "base/mem.h"
#include "record/format.h"
#include "record/order.h"
#include "record/rings.h"


static void site_add(struct tpprof_site *s, uint64_t size) {
    tpprof_site_touch(s);
    s->alloc_count++;
    s->alloc_bytes += (int64_t)size;
    s->live_count++;
    s->live_bytes += (int64_t)size;
}

static void site_sub(struct tpprof_site *s, uint64_t size, bool whole) {
    tpprof_site_touch(s);
    s->freed_bytes += (int64_t)size;
    s->live_bytes -= (int64_t)size;
    if (whole) {
        s->free_count++;
        s->live_count--;
    }
}

// heap_free and heap_alloc run once per record of a malloc-heavy program:
// they are inlined into the merge loop (through apply), not called.
#define ALWAYS_INLINE static inline __attribute__((always_inline))

ALWAYS_INLINE void heap_free(struct tpprof_thread *t, uint64_t addr, bool temp_ok, uint64_t time) {
    struct tpprof_wstate *w = &tpprof_w;
    if (TPPROF_UNLIKELY(!w->live.cap)) return;
    struct tpprof_block *b = tpprof_live_probe(&w->live, addr);
    if (!b->addr) return; // not ours (allocated before start)
    uint64_t size = b->size;
    struct tpprof_site *s = &w->sites[b->site];
    bool mine = b->thread == (uint32_t)t->index, backs = b->backs;
    tpprof_live_erase(&w->live, b);
    if (TPPROF_UNLIKELY(s->kind == TPPROF_KIND_EARLY)) return; // from before the start (adopt_early)
    if (TPPROF_UNLIKELY(backs)) tpprof_obs_block_freed(addr, time);
    site_sub(s, size, true);
    if (t->w_last_alloc == addr) {
        if (temp_ok && mine) {
            s->temp_count++;
            s->temp_bytes += (int64_t)size;
        }
        t->w_last_alloc = 0;
    }
    w->heap_bytes -= (int64_t)size;
    w->heap_blocks--;
}

// heap_alloc's rare case, kept out of the loop.
static __attribute__((noinline)) void heap_free_unseen(struct tpprof_thread *t, uint64_t addr, uint64_t time) {
    heap_free(t, addr, false, time);
}

ALWAYS_INLINE void heap_alloc(struct tpprof_thread *t, uint64_t addr, uint64_t size, uint32_t sid, int kind, uint64_t time) {
    struct tpprof_wstate *w = &tpprof_w;
    struct tpprof_site *s = tpprof_site_get(sid, kind);
    if (!s) return;
    bool existed;
    struct tpprof_block *b = tpprof_live_insert(&w->live, addr, &existed);
    if (TPPROF_UNLIKELY(b && existed)) { // a free we never saw (the block came from before the start)
        heap_free_unseen(t, addr, time);
        b = tpprof_live_insert(&w->live, addr, &existed);
    }
    if (!b) return;
    *b = (struct tpprof_block){
        .addr = addr,
        .size = size,
        .site = (uint32_t)(s - w->sites),
        .thread = (uint32_t)t->index,
        .time_ns = time,
    };
    site_add(s, size);
    w->heap_bytes += (int64_t)size;
    w->heap_blocks++;
    w->alloc_calls++;
    t->w_last_alloc = addr;
    tpprof_check_peak(time);
}

static uint64_t page_up(uint64_t n) { return (n + 4095) & ~(uint64_t)4095; }

// Room for one more live mapping (the array may move).
static bool maps_room(void) {
    struct tpprof_wstate *w = &tpprof_w;
    if (w->nmaps < w->capmaps) return true;
    uint64_t ncap = w->capmaps ? w->capmaps * 2 : 64;
    struct tpprof_block *n = tpprof_mem_grow(w->maps, w->capmaps * sizeof *n, ncap * sizeof *n);
    if (!n) return false;
    w->maps = n;
    w->capmaps = ncap;
    return true;
}

// maps_at, the index by start address: a munmap of a whole mapping and an
// mmap the kernel placed (not MAP_FIXED) cost one lookup, not a pass over
// every mapping (60,000 live mappings took 4.9 s to unmap, 0.4 s natively;
// a program may hold up to vm.max_map_count, 65,530 by default). Only a
// partial munmap and a MAP_FIXED or mremap'd mapping pass over them all.
static bool maps_index_lost; // out of memory once: every lookup passes over them all

static void maps_index(uint64_t i) {
    if (!tpprof_map_put(&tpprof_w.maps_at, tpprof_w.maps[i].addr, (uint32_t)(i + 1))) maps_index_lost = true;
}

static void maps_unindex(uint64_t i) {
    struct tpprof_wstate *w = &tpprof_w;
    if (tpprof_map_get(&w->maps_at, w->maps[i].addr) == i + 1) tpprof_map_take(&w->maps_at, w->maps[i].addr);
}

// Takes mapping i out of the array (the last one moves into its place).
static void maps_remove(uint64_t i) {
    struct tpprof_wstate *w = &tpprof_w;
    maps_unindex(i);
    if (i + 1 < w->nmaps) {
        w->maps[i] = w->maps[w->nmaps - 1];
        maps_index(i);
    }
    w->nmaps--;
}

// The mapping starting at addr, or -1 (the index is lost only when out of
// memory: then the callers pass over all of them).
int64_t tpprof_writer_map_at(uint64_t addr) {
    struct tpprof_wstate *w = &tpprof_w;
    uint32_t k = maps_index_lost ? 0 : tpprof_map_get(&w->maps_at, addr);
    return k && k <= w->nmaps && w->maps[k - 1].addr == addr ? (int64_t)k - 1 : -1;
}

// Removes [lo, hi) from mapping i, which it overlaps; a mapping cut in the
// middle becomes two (the right piece is appended). *removed: i went whole,
// and its place now holds another mapping (the last one moved in). Returns
// false when out of memory.
// maps_cut_reserved: the last maps_cut cut into a reservation (a mapping of
// kind mmap_reserved).
static bool maps_cut_reserved;

static bool map_cut_one(uint64_t i, uint64_t lo, uint64_t hi, uint64_t time, bool *removed) {
    struct tpprof_wstate *w = &tpprof_w;
    struct tpprof_block *m = &w->maps[i];
    uint64_t mlo = m->addr, mhi = m->addr + m->size;
    *removed = false;
    if (w->sites[m->site].kind == TPPROF_KIND_MMAP_RESERVED) maps_cut_reserved = true;
    if (m->backs) { // a storage's mapping, or part of it, is gone
        tpprof_obs_block_freed(m->addr, time);
        m->backs = 0;
    }
    uint64_t clo = lo > mlo ? lo : mlo, chi = hi < mhi ? hi : mhi;
    struct tpprof_site *s = &w->sites[m->site];
    bool whole = clo == mlo && chi == mhi;
    site_sub(s, chi - clo, whole);
    if (s->kind == TPPROF_KIND_MMAP) w->mmap_bytes -= (int64_t)(chi - clo);
    if (whole) {
        maps_remove(i);
        *removed = true;
    } else if (clo > mlo && chi < mhi) { // hole: keep the left part here, append the right
        if (!maps_room()) return false;
        m = &w->maps[i];
        struct tpprof_block right = *m;
        right.addr = chi;
        right.size = mhi - chi;
        m->size = clo - mlo;
        w->maps[w->nmaps++] = right;
        maps_index(w->nmaps - 1);
        s->live_count++; // one mapping became two pieces
    } else if (clo == mlo) {
        maps_unindex(i);
        m->addr = chi;
        m->size = mhi - chi;
        maps_index(i);
    } else {
        m->size = clo - mlo;
    }
    return true;
}

// Removes [lo, hi) from the live mappings (munmap, or a mapping replaced by a
// MAP_FIXED one). A range that is exactly one mapping is found by its start;
// any other passes over them all.
static void maps_cut(uint64_t lo, uint64_t hi, uint64_t time) {
    struct tpprof_wstate *w = &tpprof_w;
    bool removed;
    maps_cut_reserved = false;
    int64_t k = tpprof_writer_map_at(lo);
    if (k >= 0 && w->maps[k].addr + w->maps[k].size == hi) {
        map_cut_one((uint64_t)k, lo, hi, time, &removed);
        return;
    }
    for (uint64_t i = 0; i < w->nmaps; i++) {
        const struct tpprof_block *m = &w->maps[i];
        if (hi <= m->addr || lo >= m->addr + m->size) continue;
        if (!map_cut_one(i, lo, hi, time, &removed)) return;
        if (removed) i--; // the mapping moved into i is still to look at
    }
}

// fixed: the program chose the place (MAP_FIXED, mremap), which may lie over
// parts of live mappings; else the kernel found it free, so only a mapping
// we still hold live at that very address (its munmap was not seen) can be
// there.
static void map_add(struct tpprof_thread *t, uint64_t addr, uint64_t len, uint32_t sid, int kind, uint64_t time,
                    bool fixed) {
    struct tpprof_wstate *w = &tpprof_w;
    len = page_up(len);
    maps_cut_reserved = false;
    if (fixed || maps_index_lost || tpprof_writer_map_at(addr) >= 0) maps_cut(addr, addr + len, time);
    // Memory committed inside a reservation (MAP_FIXED over part of it, or
    // mprotect: map_commit): the program reaches it through the reservation.
    bool carved = maps_cut_reserved && kind != TPPROF_KIND_MMAP_RESERVED;
    struct tpprof_site *s = tpprof_site_get(sid, kind);
    if (!s) return;
    if (!maps_room()) return;
    struct tpprof_block *m = &w->maps[w->nmaps++];
    memset(m, 0, sizeof *m);
    m->addr = addr;
    m->size = len;
    m->site = (uint32_t)(s - w->sites);
    m->thread = (uint32_t)t->index;
    m->carved = carved;
    m->time_ns = time;
    maps_index(w->nmaps - 1);
    site_add(s, len);
    if (kind == TPPROF_KIND_MMAP) w->mmap_bytes += (int64_t)len;
    w->alloc_calls++;
    tpprof_check_peak(time);
}

// mprotect made [addr, addr + len) accessible: its reserved parts become
// mappings of kind mmap with the stack of that call (memory the program may
// now touch); the rest of the range (code a JIT flips between writable and
// executable, say) stays as it was.
static void map_commit(struct tpprof_thread *t, uint64_t seq, uint64_t addr, uint64_t len, uint32_t sid,
                       uint64_t time) {
    struct tpprof_wstate *w = &tpprof_w;
    uint64_t lo = addr, hi = addr + page_up(len);
    for (int pass = 0; pass < 4096; pass++) { // one reserved part at a time: map_add reorders the array
                                              // (bounded: out of memory, a part may stay)
        uint64_t plo = 0, phi = 0;
        for (uint64_t i = 0; i < w->nmaps && phi == 0; i++) {
            const struct tpprof_block *m = &w->maps[i];
            if (w->sites[m->site].kind != TPPROF_KIND_MMAP_RESERVED || hi <= m->addr || lo >= m->addr + m->size)
                continue;
            plo = lo > m->addr ? lo : m->addr;
            phi = hi < m->addr + m->size ? hi : m->addr + m->size;
        }
        if (phi == 0) return;
        map_add(t, plo, phi - plo, sid, TPPROF_KIND_MMAP, time, true);
        if (tpprof_cfg.full) tpprof_writer_keep_event(t, seq, 7, TPPROF_KIND_MMAP, time, plo, phi - plo, sid, 0);
    }
}

static int map_kind_at(uint64_t addr) {
    struct tpprof_wstate *w = &tpprof_w;
    for (uint64_t i = 0; i < w->nmaps; i++)
        if (addr >= w->maps[i].addr && addr < w->maps[i].addr + w->maps[i].size &&
            w->sites[w->maps[i].site].kind != TPPROF_KIND_EARLY)
            return (int)w->sites[w->maps[i].site].kind;
    return TPPROF_KIND_MMAP;
}

void tpprof_writer_keep_event(struct tpprof_thread *t, uint64_t seq, int op, int kind, uint64_t time, uint64_t addr,
                              uint64_t size, uint32_t sid, uint64_t old) {
    struct tpprof_wstate *w = &tpprof_w;
    if (w->nevents == w->capevents) {
        uint64_t ncap = w->capevents ? w->capevents * 2 : 1 << 16;
        struct tpprof_event *n = tpprof_mem_grow(w->events, w->capevents * sizeof *n, ncap * sizeof *n);
        if (!n) return;
        w->events = n;
        w->capevents = ncap;
    }
    struct tpprof_event *e = &w->events[w->nevents++];
    e->seq = seq;
    e->time_ns = time;
    e->tid = (uint32_t)t->index;
    e->op = (uint32_t)op;
    e->kind = (uint32_t)kind;
    e->stack = sid ? tpprof_writer_leaf_of(sid) : 0;
    e->addr = addr;
    e->size = size;
    e->old_addr = old;
}

// Applies one record made at `time` and returns its words (without full
// mode's timestamp); the thread's first-seen and last times are the merge's
// to keep. Inlined into the merge loop, its one caller: ALLOC and FREE, most
// of the records, come first and know their length.
ALWAYS_INLINE int apply(struct tpprof_thread *t, const uint64_t *r, uint64_t time) {
    struct tpprof_wstate *w = &tpprof_w;
    int op = (int)(r[0] >> 4 & 15), kind = (int)(r[0] & 15);
    uint64_t seq = w->order++;
    if (TPPROF_LIKELY(op == TPPROF_OP_ALLOC_PACKED || op == TPPROF_OP_ALLOC)) {
        uint64_t size = op == TPPROF_OP_ALLOC_PACKED ? tpprof_packed_size(r) : r[2];
        uint32_t sid = tpprof_alloc_sid(r, op);
        heap_alloc(t, r[1], size, sid, kind, time);
        if (tpprof_cfg.full) tpprof_writer_keep_event(t, seq, TPPROF_OP_ALLOC, kind, time, r[1], size, sid, 0);
        return tpprof_op_words(op);
    }
    if (TPPROF_LIKELY(op == TPPROF_OP_FREE)) {
        w->free_calls++;
        heap_free(t, r[1], true, time);
        if (tpprof_cfg.full) tpprof_writer_keep_event(t, seq, op, 0, time, r[1], 0, 0, 0);
        return tpprof_op_words(TPPROF_OP_FREE);
    }
    switch (op) {
    case TPPROF_OP_MMAP: {
        uint64_t len = r[2] & ~TPPROF_MMAP_FIXED;
        map_add(t, r[1], len, (uint32_t)r[3], kind, time, (r[2] & TPPROF_MMAP_FIXED) != 0);
        if (tpprof_cfg.full) tpprof_writer_keep_event(t, seq, op, kind, time, r[1], len, (uint32_t)r[3], 0);
        break;
    }
    case TPPROF_OP_REALLOC_FREE:
        heap_free(t, r[1], false, time);
        break;
    case TPPROF_OP_REALLOC:
        heap_alloc(t, r[1], r[2], (uint32_t)r[3], kind, time);
        if (tpprof_cfg.full) tpprof_writer_keep_event(t, seq, op, kind, time, r[1], r[2], (uint32_t)r[3], r[4]);
        break;
    case TPPROF_OP_COMMIT:
        map_commit(t, seq, r[1], r[2], (uint32_t)r[3], time);
        break;
    case TPPROF_OP_MUNMAP:
        w->free_calls++;
        maps_cut(r[1], r[1] + page_up(r[2]), time);
        if (tpprof_cfg.full) tpprof_writer_keep_event(t, seq, op, 0, time, r[1], r[2], 0, 0);
        break;
    case TPPROF_OP_MREMAP: {
        int k = map_kind_at(r[4]);
        maps_cut(r[4], r[4] + page_up(r[5]), time);
        map_add(t, r[1], r[2], (uint32_t)r[3], k, time, true);
        if (tpprof_cfg.full) tpprof_writer_keep_event(t, seq, op, k, time, r[1], r[2], (uint32_t)r[3], r[4]);
        break;
    }
    case TPPROF_OP_OBS:
        tpprof_obs_apply(t, r, time, seq);
        break;
    case TPPROF_OP_DEVICE:
        tpprof_device_apply(t, r, seq);
        break;
    default:
        break;
    }
    return tpprof_rec_words(r);
}

// Blocks and mappings from before the start (early.c) are held under a site
// of kind 0, which no allocation has: the leak scan sees them and looks inside
// them, but they are not allocations of the recording (not counted in the
// totals, the timeline or the peak), and neither the site nor the blocks are
// written (store/store.c). A free of one only takes it out (heap_free).
void tpprof_writer_adopt_early(uint64_t addr, uint64_t size, bool mapping) {
    struct tpprof_wstate *w = &tpprof_w;
    struct tpprof_site *s = tpprof_site_lookup(0, TPPROF_KIND_EARLY);
    if (!s) return;
    if (mapping) { // unlike map_add: no site_add, no mmap_bytes
        if (!maps_room()) return;
        w->maps[w->nmaps++] = (struct tpprof_block){.addr = addr, .size = page_up(size), .site = (uint32_t)(s - w->sites)};
        maps_index(w->nmaps - 1);
        return;
    }
    bool existed;
    struct tpprof_block *b = tpprof_live_insert(&w->live, addr, &existed);
    if (!b || existed) return;
    *b = (struct tpprof_block){.addr = addr, .size = size, .site = (uint32_t)(s - w->sites)};
}

#endif
