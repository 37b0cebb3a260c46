// replay.c: allocator_events (docs/schema-tensors.md) replayed into each
// segment's block map, as PyTorch's memory_viz rebuilds a caching
// allocator's state from its trace: a reserve makes a segment of one free
// block, a split cuts a free remainder off the end of the block holding it,
// an alloc marks a block used, a free marks it free, a merge replaces the
// blocks it covers by one free block, a release drops the segment.
//
// The replay trusts the events' order, not their times; an event naming a
// segment never reserved (a recording that started late) creates it. It
// never prints and never writes the database.
#define _POSIX_C_SOURCE 200809L
#include "viewer.h"

#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

// ---------------------------------------------------------------------------
// Loading

static int push_event(tpprof_alloc_state *s, size_t *cap, const tpprof_alloc_event *e) {
    tpprof_alloc_event *v = tpprof_grow(s->events, s->nevents, cap, sizeof *v);
    if (!v)
        return -1;
    s->events = v;
    s->events[s->nevents++] = *e;
    return 0;
}

int tpprof_alloc_load(tpprof_db *db, tpprof_alloc_state **out, size_t *n) {
    *out = NULL;
    *n = 0;
    if (!tpprof_db_has_table(db, "allocator_events"))
        return 0;
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db->sql,
                           "SELECT seq, time_ns, allocator, action, device, segment, segment_size, "
                           "block, block_size, requested, stack_id FROM allocator_events "
                           "ORDER BY allocator, seq",
                           -1, &st, NULL) != SQLITE_OK)
        return tpprof_db_error(db, "reading allocator_events");
    tpprof_alloc_state *v = NULL;
    size_t nv = 0, cap = 0;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        const char *name = (const char *)sqlite3_column_text(st, 2);
        if (!name)
            name = "";
        if (nv == 0 || strcmp(v[nv - 1].allocator, name) != 0) {
            tpprof_alloc_state *nvv = realloc(v, (nv + 1) * sizeof *v);
            if (!nvv)
                goto oom;
            v = nvv;
            v[nv] = (tpprof_alloc_state){.allocator = strdup(name)};
            const unsigned char *dev = sqlite3_column_text(st, 4);
            v[nv].device = dev ? strdup((const char *)dev) : NULL;
            nv++;
            cap = 0;
        }
        tpprof_alloc_event e = {
            .seq = sqlite3_column_int64(st, 0),
            .time_ns = sqlite3_column_int64(st, 1),
            .action = sqlite3_column_int64(st, 3),
            .segment = sqlite3_column_int64(st, 5),
            .segment_size = sqlite3_column_int64(st, 6),
            .block = sqlite3_column_int64(st, 7),
            .block_size = sqlite3_column_int64(st, 8),
            .requested = sqlite3_column_int64(st, 9),
            .stack_id = sqlite3_column_int64(st, 10),
        };
        if (push_event(&v[nv - 1], &cap, &e))
            goto oom;
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) {
        tpprof_alloc_states_free(v, nv);
        return tpprof_db_error(db, "reading allocator_events");
    }
    // The peak of each allocator: the first event after which its allocated
    // total is largest.
    for (size_t i = 0; i < nv; i++) {
        int64_t allocated = 0;
        for (size_t k = 0; k < v[i].nevents; k++) {
            const tpprof_alloc_event *e = &v[i].events[k];
            if (e->action == TPPROF_ALLOC_BLOCK_ALLOC)
                allocated += e->block_size;
            else if (e->action == TPPROF_ALLOC_BLOCK_FREE)
                allocated -= e->block_size;
            if (allocated > v[i].peak_allocated) {
                v[i].peak_allocated = allocated;
                v[i].peak_index = k;
            }
        }
    }
    *out = v;
    *n = nv;
    return 0;
oom:
    sqlite3_finalize(st);
    tpprof_alloc_states_free(v, nv);
    return tpprof_error_set("out of memory");
}

static void clear_segments(tpprof_alloc_state *s) {
    for (size_t i = 0; i < s->nsegments; i++)
        free(s->segments[i].blocks);
    s->nsegments = 0;
}

void tpprof_alloc_state_clear(tpprof_alloc_state *s) {
    clear_segments(s);
    free(s->segments);
    free(s->events);
    free(s->allocator);
    free(s->device);
    *s = (tpprof_alloc_state){0};
}

void tpprof_alloc_states_free(tpprof_alloc_state *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        tpprof_alloc_state_clear(&s[i]);
    free(s);
}

// ---------------------------------------------------------------------------
// Segments and blocks

// Segments stay sorted by address, blocks within a segment too: lookups are
// binary searches (a small pool can hold thousands of blocks per segment).
static size_t segment_lower_bound(const tpprof_alloc_state *s, int64_t address) {
    size_t lo = 0, hi = s->nsegments;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (s->segments[mid].address < address)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static tpprof_segment *find_segment(tpprof_alloc_state *s, int64_t address) {
    size_t i = segment_lower_bound(s, address);
    return i < s->nsegments && s->segments[i].address == address ? &s->segments[i] : NULL;
}

static tpprof_segment *add_segment(tpprof_alloc_state *s, int64_t address, int64_t size,
                                   int64_t stack) {
    tpprof_segment *v = tpprof_grow(s->segments, s->nsegments, &s->cap, sizeof *v);
    if (!v)
        return NULL;
    s->segments = v;
    tpprof_block *blocks = malloc(8 * sizeof *blocks);
    if (!blocks)
        return NULL;
    size_t i = segment_lower_bound(s, address);
    memmove(&s->segments[i + 1], &s->segments[i], (s->nsegments - i) * sizeof *s->segments);
    s->nsegments++;
    tpprof_segment *g = &s->segments[i];
    *g = (tpprof_segment){.address = address, .size = size, .stack_id = stack,
                          .blocks = blocks, .nblocks = 1, .cap = 8};
    g->blocks[0] = (tpprof_block){.address = address, .size = size};
    return g;
}

// Insert b at index i of g's blocks.
static int insert_block(tpprof_segment *g, size_t i, tpprof_block b) {
    tpprof_block *v = tpprof_grow(g->blocks, g->nblocks, &g->cap, sizeof *v);
    if (!v)
        return -1;
    g->blocks = v;
    memmove(&g->blocks[i + 1], &g->blocks[i], (g->nblocks - i) * sizeof *g->blocks);
    g->blocks[i] = b;
    g->nblocks++;
    return 0;
}

// The index of the block containing address, or nblocks.
static size_t block_at(const tpprof_segment *g, int64_t address) {
    size_t lo = 0, hi = g->nblocks; // first block starting after address
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (g->blocks[mid].address <= address)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return g->nblocks;
    const tpprof_block *b = &g->blocks[lo - 1];
    return address < b->address + b->size ? lo - 1 : g->nblocks;
}

// Make [address, address + size) one block of its own (cutting the block
// that holds it) and return its index, or nblocks when outside the segment.
static size_t carve(tpprof_segment *g, int64_t address, int64_t size) {
    size_t i = block_at(g, address);
    if (i == g->nblocks)
        return i;
    tpprof_block *b = &g->blocks[i];
    if (b->address < address) {
        tpprof_block head = *b;
        head.size = address - b->address;
        b->size -= head.size;
        b->address = address;
        if (insert_block(g, i, head))
            return g->nblocks;
        i++;
        b = &g->blocks[i];
    }
    if (b->size > size) {
        tpprof_block tail = {.address = address + size, .size = b->size - size};
        b->size = size;
        if (insert_block(g, i + 1, tail))
            return g->nblocks;
    }
    return i;
}

static int apply(tpprof_alloc_state *s, const tpprof_alloc_event *e) {
    tpprof_segment *g = find_segment(s, e->segment);
    if (e->action == TPPROF_ALLOC_SEGMENT_RELEASE) {
        if (g) {
            free(g->blocks);
            size_t i = (size_t)(g - s->segments);
            memmove(g, g + 1, (s->nsegments - i - 1) * sizeof *g);
            s->nsegments--;
        }
        return 0;
    }
    if (!g) {
        int64_t size = e->segment_size > 0 ? e->segment_size : e->block_size;
        g = add_segment(s, e->segment, size, e->stack_id);
        if (!g)
            return tpprof_error_set("out of memory");
    }
    switch (e->action) {
    case TPPROF_ALLOC_SEGMENT_RESERVE:
        g->stack_id = e->stack_id;
        return 0;
    case TPPROF_ALLOC_BLOCK_SPLIT: {
        // The remainder cut off the end of the block holding it: a free block.
        size_t i = carve(g, e->block, e->block_size);
        if (i < g->nblocks)
            g->blocks[i] = (tpprof_block){.address = e->block, .size = g->blocks[i].size};
        return 0;
    }
    case TPPROF_ALLOC_BLOCK_ALLOC: {
        size_t i = carve(g, e->block, e->block_size);
        if (i < g->nblocks) {
            g->blocks[i].allocated = true;
            g->blocks[i].requested = e->requested;
            g->blocks[i].stack_id = e->stack_id;
        }
        return 0;
    }
    case TPPROF_ALLOC_BLOCK_FREE: {
        size_t i = block_at(g, e->block);
        if (i < g->nblocks) {
            g->blocks[i].allocated = false;
            g->blocks[i].requested = 0;
        }
        return 0;
    }
    case TPPROF_ALLOC_BLOCK_MERGE: {
        // Every block inside [block, block + size) becomes one free block.
        int64_t lo = e->block, hi = e->block + e->block_size;
        size_t first = block_at(g, lo);
        if (first == g->nblocks || g->blocks[first].address != lo)
            return 0; // not on a block boundary: nothing this replay can trust
        size_t end = first;
        while (end < g->nblocks && g->blocks[end].address + g->blocks[end].size <= hi)
            end++;
        if (end == first)
            return 0;
        g->blocks[first] = (tpprof_block){.address = lo, .size = e->block_size};
        memmove(&g->blocks[first + 1], &g->blocks[end], (g->nblocks - end) * sizeof *g->blocks);
        g->nblocks -= end - first - 1;
        return 0;
    }
    default:
        return 0; // an action this viewer does not know changes nothing it shows
    }
}

int tpprof_alloc_replay(tpprof_alloc_state *s, size_t count) {
    clear_segments(s);
    if (count > s->nevents)
        count = s->nevents;
    for (size_t i = 0; i < count; i++)
        if (apply(s, &s->events[i]))
            return -1;
    s->replayed = count;
    return 0;
}

size_t tpprof_alloc_count_until(const tpprof_alloc_state *s, int64_t time_ns) {
    size_t n = 0;
    while (n < s->nevents && s->events[n].time_ns <= time_ns)
        n++;
    return n;
}

void tpprof_alloc_figures(const tpprof_alloc_state *s, tpprof_frag *f) {
    *f = (tpprof_frag){0};
    for (size_t i = 0; i < s->nsegments; i++) {
        const tpprof_segment *g = &s->segments[i];
        f->segments++;
        f->reserved += g->size;
        for (size_t k = 0; k < g->nblocks; k++) {
            const tpprof_block *b = &g->blocks[k];
            if (b->allocated) {
                f->blocks_allocated++;
                f->allocated += b->size;
                f->requested += b->requested;
                continue;
            }
            f->blocks_free++;
            f->free_bytes += b->size;
            if (b->size > f->largest_free)
                f->largest_free = b->size;
            // PyTorch's inactive_split: a free block of a segment that is split.
            if (g->nblocks > 1) {
                f->inactive_split++;
                f->inactive_split_bytes += b->size;
            }
        }
    }
    f->internal = f->allocated - f->requested;
}
