// cmd_fragmentation.c: `tpprof fragmentation DB`: a caching allocator's
// state at one moment, replayed from allocator_events (replay.c): each
// segment's block map, internal fragmentation (rounded minus requested),
// external fragmentation (free blocks stranded inside partly used
// segments: PyTorch's inactive split), the largest free block, which stacks
// own the blocks that split the biggest segments, and reserved vs allocated
// over the run. As text, JSON, or an SVG picture in the spirit of PyTorch's
// memory_viz.
//
// This file only chooses the moment and draws; it never writes the database.
#define _POSIX_C_SOURCE 200809L
#include "viewer.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

const char tpprof_usage_fragmentation[] =
    "usage: tpprof fragmentation DB [--at-exit | --at-peak | --at TIME | --at-event SEQ]\n"
    "                               [--allocator NAME] [--top N] [--format text|json|svg]\n"
    "\n"
    "Replay the caching allocators' events up to one moment and show each segment's\n"
    "blocks and how fragmented the allocator is.\n"
    "\n"
    "  --at-exit        when the recording ended (default)\n"
    "  --at-peak        the moment of the allocator's largest allocated total\n"
    "  --at TIME        after the events at or before TIME since the start: 2000000 (ns),\n"
    "                   250us, 20ms, 1.5s\n"
    "  --at-event SEQ   after the allocator event numbered SEQ (allocator_events.seq)\n"
    "  --allocator NAME only this allocator (default: every allocator that sent events)\n"
    "  --top N          segments listed and owners named in text (default 10; 0 = all)\n"
    "  --format F       text (default), json, or svg: segments as bars of blocks (allocated\n"
    "                   colored by owner stack, free hatched) over a reserved/allocated\n"
    "                   timeline; e.g. tpprof fragmentation DB --format svg > frag.svg\n"
    "\n"
    "Figures: internal fragmentation = rounded block sizes minus requested bytes over\n"
    "allocated blocks; inactive split = free blocks of segments that are split (PyTorch's\n"
    "inactive_split_bytes), the memory a request larger than each of them cannot use.\n";

enum { AT_EXIT, AT_PEAK, AT_TIME, AT_EVENT };
enum { FORMAT_TEXT, FORMAT_JSON, FORMAT_SVG };

typedef struct frag_options {
    const char *path, *allocator;
    int at, format;
    int64_t time_ns, seq;
    uint64_t top;
} frag_options;

#define SERIES_POINTS 400
#define OWNERS_SEGMENTS 5

// ---------------------------------------------------------------------------
// Figures over the whole run

// The reserved/allocated series after every event, cut to at most
// SERIES_POINTS (each kept point the last of its span; the peak always
// kept). New array (caller frees).
static tpprof_alloc_point *series_of(const tpprof_alloc_state *s, size_t *n) {
    *n = 0;
    tpprof_alloc_point *all = malloc((s->nevents + 1) * sizeof *all);
    if (!all)
        return NULL;
    int64_t reserved = 0, allocated = 0;
    for (size_t i = 0; i < s->nevents; i++) {
        const tpprof_alloc_event *e = &s->events[i];
        switch (e->action) {
        case TPPROF_ALLOC_SEGMENT_RESERVE: reserved += e->segment_size; break;
        case TPPROF_ALLOC_SEGMENT_RELEASE: reserved -= e->segment_size; break;
        case TPPROF_ALLOC_BLOCK_ALLOC: allocated += e->block_size; break;
        case TPPROF_ALLOC_BLOCK_FREE: allocated -= e->block_size; break;
        default: break;
        }
        all[i] = (tpprof_alloc_point){e->time_ns, reserved, allocated};
    }
    if (s->nevents <= SERIES_POINTS) {
        *n = s->nevents;
        return all;
    }
    size_t step = (s->nevents + SERIES_POINTS - 1) / SERIES_POINTS, m = 0;
    for (size_t i = 0; i < s->nevents; i++)
        if (i % step == step - 1 || i == s->nevents - 1 || i == s->peak_index)
            all[m++] = all[i];
    *n = m;
    return all;
}

// Allocated blocks of one segment grouped by stack.
typedef struct owner {
    int64_t segment, segment_size, stack_id, bytes, count;
} owner;

static int by_owner(const void *a, const void *b) {
    const owner *x = a, *y = b;
    if (x->segment_size != y->segment_size)
        return x->segment_size > y->segment_size ? -1 : 1;
    if (x->segment != y->segment)
        return x->segment < y->segment ? -1 : 1;
    if (x->bytes != y->bytes)
        return x->bytes > y->bytes ? -1 : 1;
    return (x->stack_id > y->stack_id) - (x->stack_id < y->stack_id);
}

// Owners of the blocks of the OWNERS_SEGMENTS biggest split segments,
// biggest segment first, then by bytes. New array (caller frees).
static owner *split_owners(const tpprof_alloc_state *s, size_t *n) {
    *n = 0;
    size_t cap = 0;
    owner *v = NULL;
    // The biggest split segments: pick by size, at most OWNERS_SEGMENTS.
    bool *chosen = calloc(s->nsegments + 1, sizeof *chosen);
    if (!chosen)
        return NULL;
    for (int round = 0; round < OWNERS_SEGMENTS; round++) {
        const tpprof_segment *best = NULL;
        for (size_t i = 0; i < s->nsegments; i++)
            if (!chosen[i] && s->segments[i].nblocks > 1 &&
                (!best || s->segments[i].size > best->size))
                best = &s->segments[i];
        if (!best)
            break;
        chosen[best - s->segments] = true;
        for (size_t k = 0; k < best->nblocks; k++) {
            const tpprof_block *b = &best->blocks[k];
            if (!b->allocated)
                continue;
            size_t i = 0;
            while (i < *n && !(v[i].segment == best->address && v[i].stack_id == b->stack_id))
                i++;
            if (i == *n) {
                owner *nv = tpprof_grow(v, *n, &cap, sizeof *nv);
                if (!nv) {
                    free(v);
                    free(chosen);
                    *n = 0;
                    return NULL;
                }
                v = nv;
                v[(*n)++] = (owner){best->address, best->size, b->stack_id, 0, 0};
            }
            v[i].bytes += b->size;
            v[i].count++;
        }
    }
    free(chosen);
    if (*n)
        qsort(v, *n, sizeof *v, by_owner);
    return v;
}

static const char *moment_name(int at) {
    return at == AT_EXIT ? "exit" : at == AT_PEAK ? "peak" : at == AT_TIME ? "time" : "event";
}

// The number of events that make the chosen moment.
static size_t moment_count(const tpprof_alloc_state *s, const frag_options *o) {
    switch (o->at) {
    case AT_PEAK: return s->nevents ? s->peak_index + 1 : 0;
    case AT_TIME: return tpprof_alloc_count_until(s, o->time_ns);
    case AT_EVENT: {
        size_t n = 0;
        while (n < s->nevents && s->events[n].seq <= o->seq)
            n++;
        return n;
    }
    default: return s->nevents;
    }
}

static int64_t moment_time(const tpprof_alloc_state *s, const frag_options *o) {
    if (o->at == AT_TIME)
        return o->time_ns;
    return s->replayed ? s->events[s->replayed - 1].time_ns : 0;
}

// ---------------------------------------------------------------------------
// Text

static void text_state(const tpprof_profile *p, const tpprof_alloc_state *s, const frag_options *o) {
    char a[32], b[32], c[32];
    tpprof_frag f;
    tpprof_alloc_figures(s, &f);
    printf("Allocator '%s'%s%s at %s: %s (after %zu of %zu events)\n", s->allocator,
           s->device ? " on " : "", s->device ? s->device : "", moment_name(o->at),
           tpprof_format_ns(moment_time(s, o), a), s->replayed, s->nevents);
    printf("  figures: segments=%lld reserved_bytes=%lld allocated_bytes=%lld requested_bytes=%lld "
           "internal_bytes=%lld inactive_split_bytes=%lld inactive_split=%lld free_bytes=%lld "
           "largest_free_bytes=%lld\n",
           (long long)f.segments, (long long)f.reserved, (long long)f.allocated,
           (long long)f.requested, (long long)f.internal, (long long)f.inactive_split_bytes,
           (long long)f.inactive_split, (long long)f.free_bytes, (long long)f.largest_free);
    printf("  reserved %s in %lld segment%s, allocated %s in %lld block%s\n",
           tpprof_format_size((uint64_t)f.reserved, a), (long long)f.segments,
           f.segments == 1 ? "" : "s", tpprof_format_size((uint64_t)f.allocated, b),
           (long long)f.blocks_allocated, f.blocks_allocated == 1 ? "" : "s");
    printf("  internal fragmentation %s (rounded minus requested, %.1f%% of allocated)\n",
           tpprof_format_size((uint64_t)f.internal, a),
           f.allocated ? 100.0 * (double)f.internal / (double)f.allocated : 0.0);
    printf("  external fragmentation %s in %lld inactive split block%s (free inside partly used "
           "segments, %.1f%% of reserved)\n",
           tpprof_format_size((uint64_t)f.inactive_split_bytes, a), (long long)f.inactive_split,
           f.inactive_split == 1 ? "" : "s",
           f.reserved ? 100.0 * (double)f.inactive_split_bytes / (double)f.reserved : 0.0);
    printf("  free %s in total, largest free block %s\n", tpprof_format_size((uint64_t)f.free_bytes, a),
           tpprof_format_size((uint64_t)f.largest_free, b));

    size_t nseg = o->top && o->top < s->nsegments ? (size_t)o->top : s->nsegments;
    printf("\n  Segments (address order; a block per line, allocated ones with their stack's "
           "innermost frame):\n");
    if (s->nsegments == 0)
        printf("    (none)\n");
    for (size_t i = 0; i < nseg; i++) {
        const tpprof_segment *g = &s->segments[i];
        printf("    segment 0x%" PRIx64 "  %s  %zu block%s\n", (uint64_t)g->address,
               tpprof_format_size((uint64_t)g->size, a), g->nblocks, g->nblocks == 1 ? "" : "s");
        size_t nb = g->nblocks < 16 ? g->nblocks : 16;
        for (size_t k = 0; k < nb; k++) {
            const tpprof_block *bl = &g->blocks[k];
            char frame[512];
            if (bl->allocated)
                printf("      0x%-9" PRIx64 "  %10s  allocated, requested %lld B  %s\n",
                       (uint64_t)bl->address, tpprof_format_size((uint64_t)bl->size, a),
                       (long long)bl->requested,
                       tpprof_stacks_describe_caller(p->stacks, bl->stack_id, frame, sizeof frame));
            else
                printf("      0x%-9" PRIx64 "  %10s  free%s\n", (uint64_t)bl->address,
                       tpprof_format_size((uint64_t)bl->size, a),
                       g->nblocks > 1 ? " (inactive split)" : "");
        }
        if (nb < g->nblocks)
            printf("      ... %zu more blocks\n", g->nblocks - nb);
    }
    if (nseg < s->nsegments)
        printf("    ... %zu more segments (--top 0 shows all)\n", s->nsegments - nseg);

    size_t nown = 0;
    owner *ow = split_owners(s, &nown);
    printf("\n  Who splits the biggest segments (allocated blocks by stack):\n");
    if (nown == 0)
        printf("    (no segment is split)\n");
    for (size_t i = 0; i < nown; i++) {
        printf("    segment 0x%" PRIx64 " (%s): %s in %lld block%s\n", (uint64_t)ow[i].segment,
               tpprof_format_size((uint64_t)ow[i].segment_size, a),
               tpprof_format_size((uint64_t)ow[i].bytes, b), (long long)ow[i].count,
               ow[i].count == 1 ? "" : "s");
        tpprof_print_stack(p->stacks, ow[i].stack_id, "        ", 4, true);
    }
    free(ow);

    size_t np = 0;
    tpprof_alloc_point *pts = series_of(s, &np);
    printf("\n  Reserved vs allocated over the run (%zu points, at most 24 shown):\n", np);
    printf("    %10s  %10s  %10s\n", "time", "reserved", "allocated");
    size_t step = np > 24 ? (np + 23) / 24 : 1;
    for (size_t i = 0; i < np; i += step)
        printf("    %10s  %10s  %10s\n", tpprof_format_ns(pts[i].time_ns, a),
               tpprof_format_size((uint64_t)pts[i].reserved, b),
               tpprof_format_size((uint64_t)pts[i].allocated, c));
    free(pts);
    printf("\n");
}

// ---------------------------------------------------------------------------
// JSON

static void json_state(tpprof_json *j, const tpprof_profile *p, const tpprof_alloc_state *s,
                       const frag_options *o) {
    tpprof_frag f;
    tpprof_alloc_figures(s, &f);
    tpprof_json_object_begin(j);
    tpprof_json_kv_string(j, "allocator", s->allocator);
    tpprof_json_kv_string(j, "device", s->device);
    tpprof_json_kv_string(j, "at", moment_name(o->at));
    tpprof_json_kv_int(j, "time_ns", moment_time(s, o));
    tpprof_json_kv_int(j, "events_replayed", (int64_t)s->replayed);
    tpprof_json_kv_int(j, "events_total", (int64_t)s->nevents);
    tpprof_json_key(j, "figures");
    tpprof_json_object_begin(j);
    tpprof_json_kv_int(j, "segments", f.segments);
    tpprof_json_kv_int(j, "reserved_bytes", f.reserved);
    tpprof_json_kv_int(j, "allocated_bytes", f.allocated);
    tpprof_json_kv_int(j, "requested_bytes", f.requested);
    tpprof_json_kv_int(j, "internal_fragmentation_bytes", f.internal);
    tpprof_json_kv_int(j, "inactive_split_bytes", f.inactive_split_bytes);
    tpprof_json_kv_int(j, "inactive_split", f.inactive_split);
    tpprof_json_kv_int(j, "free_bytes", f.free_bytes);
    tpprof_json_kv_int(j, "largest_free_bytes", f.largest_free);
    tpprof_json_kv_int(j, "allocated_blocks", f.blocks_allocated);
    tpprof_json_kv_int(j, "free_blocks", f.blocks_free);
    tpprof_json_object_end(j);
    tpprof_json_key(j, "segments");
    tpprof_json_array_begin(j);
    for (size_t i = 0; i < s->nsegments; i++) {
        const tpprof_segment *g = &s->segments[i];
        tpprof_json_object_begin(j);
        tpprof_json_kv_address(j, "address", g->address);
        tpprof_json_kv_int(j, "size", g->size);
        tpprof_json_key(j, "blocks");
        tpprof_json_array_begin(j);
        for (size_t k = 0; k < g->nblocks; k++) {
            const tpprof_block *b = &g->blocks[k];
            tpprof_json_object_begin(j);
            tpprof_json_kv_address(j, "address", b->address);
            tpprof_json_kv_int(j, "size", b->size);
            const char *state = b->allocated ? "allocated" : g->nblocks > 1 ? "inactive_split" : "free";
            tpprof_json_kv_string(j, "state", state);
            tpprof_json_kv_int(j, "requested", b->requested);
            if (b->allocated)
                tpprof_json_stack(j, p->stacks, b->stack_id);
            tpprof_json_object_end(j);
        }
        tpprof_json_array_end(j);
        tpprof_json_object_end(j);
    }
    tpprof_json_array_end(j);
    size_t nown = 0;
    owner *ow = split_owners(s, &nown);
    tpprof_json_key(j, "split_owners");
    tpprof_json_array_begin(j);
    for (size_t i = 0; i < nown; i++) {
        tpprof_json_object_begin(j);
        tpprof_json_kv_address(j, "segment", ow[i].segment);
        tpprof_json_kv_int(j, "segment_size", ow[i].segment_size);
        tpprof_json_kv_int(j, "bytes", ow[i].bytes);
        tpprof_json_kv_int(j, "count", ow[i].count);
        tpprof_json_stack(j, p->stacks, ow[i].stack_id);
        tpprof_json_object_end(j);
    }
    tpprof_json_array_end(j);
    free(ow);
    size_t np = 0;
    tpprof_alloc_point *pts = series_of(s, &np);
    tpprof_json_key(j, "series");
    tpprof_json_array_begin(j);
    for (size_t i = 0; i < np; i++) {
        tpprof_json_object_begin_inline(j);
        tpprof_json_kv_int(j, "time_ns", pts[i].time_ns);
        tpprof_json_kv_int(j, "reserved_bytes", pts[i].reserved);
        tpprof_json_kv_int(j, "allocated_bytes", pts[i].allocated);
        tpprof_json_object_end(j);
    }
    tpprof_json_array_end(j);
    free(pts);
    tpprof_json_object_end(j);
}

// ---------------------------------------------------------------------------
// SVG: segments as bars of blocks, then the reserved/allocated timeline

#define SVG_WIDTH 1100
#define SVG_LABEL 170 // left column: segment address and size
#define SVG_BAR_H 22
#define SVG_GAP 10
#define SVG_MAX_SEGMENTS 40
#define SVG_LEGEND_OWNERS 10
#define SVG_CHART_H 220

static const char *palette[] = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#b07aa1",
                                "#76b7b2", "#edc948", "#9c755f", "#ff9da7", "#86bcb6"};
#define NPALETTE (sizeof palette / sizeof *palette)

static void xml_text(const char *s) {
    for (; s && *s; s++) {
        switch (*s) {
        case '<': fputs("&lt;", stdout); break;
        case '>': fputs("&gt;", stdout); break;
        case '&': fputs("&amp;", stdout); break;
        case '"': fputs("&quot;", stdout); break;
        default: putchar(*s);
        }
    }
}

typedef struct stack_color {
    int64_t stack_id, bytes;
} stack_color;

static int by_color_bytes(const void *a, const void *b) {
    const stack_color *x = a, *y = b;
    if (x->bytes != y->bytes)
        return x->bytes > y->bytes ? -1 : 1;
    return (x->stack_id > y->stack_id) - (x->stack_id < y->stack_id);
}

// Stacks owning allocated blocks, most bytes first: the first NPALETTE - 1
// get their own color, the rest share the last ("other").
static stack_color *owner_colors(const tpprof_alloc_state *s, size_t *n) {
    *n = 0;
    size_t cap = 0;
    stack_color *v = NULL;
    for (size_t i = 0; i < s->nsegments; i++)
        for (size_t k = 0; k < s->segments[i].nblocks; k++) {
            const tpprof_block *b = &s->segments[i].blocks[k];
            if (!b->allocated)
                continue;
            size_t x = 0;
            while (x < *n && v[x].stack_id != b->stack_id)
                x++;
            if (x == *n) {
                stack_color *nv = tpprof_grow(v, *n, &cap, sizeof *nv);
                if (!nv) {
                    free(v);
                    *n = 0;
                    return NULL;
                }
                v = nv;
                v[(*n)++] = (stack_color){b->stack_id, 0};
            }
            v[x].bytes += b->size;
        }
    if (*n)
        qsort(v, *n, sizeof *v, by_color_bytes);
    return v;
}

static const char *color_of(const stack_color *c, size_t n, int64_t stack) {
    for (size_t i = 0; i < n && i < NPALETTE - 1; i++)
        if (c[i].stack_id == stack)
            return palette[i];
    return palette[NPALETTE - 1];
}

// A round step for an axis covering [0, max] in about `ticks` steps.
static double nice_step(double max, int ticks) {
    if (max <= 0)
        return 1;
    double raw = max / ticks, mag = pow(10, floor(log10(raw))), r = raw / mag;
    return (r <= 1 ? 1 : r <= 2 ? 2 : r <= 5 ? 5 : 10) * mag;
}

// The allocator's title and its figures at the moment; returns the y below.
static double svg_title(const tpprof_alloc_state *s, const frag_options *o, double y) {
    char a[32], b[32], c[32];
    tpprof_frag f;
    tpprof_alloc_figures(s, &f);
    printf("<text x=\"10\" y=\"%.0f\" class=\"title\">Allocator '", y + 18);
    xml_text(s->allocator);
    printf("' at %s (%s): reserved %s, allocated %s in %lld segments</text>\n", moment_name(o->at),
           tpprof_format_ns(moment_time(s, o), a), tpprof_format_size((uint64_t)f.reserved, b),
           tpprof_format_size((uint64_t)f.allocated, c), (long long)f.segments);
    y += 26;
    printf("<text x=\"10\" y=\"%.0f\">internal fragmentation %s", y + 14,
           tpprof_format_size((uint64_t)f.internal, a));
    printf(" · inactive split %s in %lld blocks", tpprof_format_size((uint64_t)f.inactive_split_bytes, b),
           (long long)f.inactive_split);
    printf(" · largest free block %s of %s free</text>\n",
           tpprof_format_size((uint64_t)f.largest_free, a), tpprof_format_size((uint64_t)f.free_bytes, c));
    return y + 28;
}

// One segment's bar at y: its blocks, coloured by owner stack, free ones
// hatched.
static void svg_segment(const tpprof_profile *p, const tpprof_segment *g, const stack_color *colors,
                        size_t ncolors, double scale, double y) {
    char a[32];
    printf("<text x=\"10\" y=\"%.0f\" class=\"mono\">0x%" PRIx64 "</text>\n", y + 10, (uint64_t)g->address);
    printf("<text x=\"10\" y=\"%.0f\" class=\"small\">%s, %zu blocks</text>\n", y + 21,
           tpprof_format_size((uint64_t)g->size, a), g->nblocks);
    for (size_t k = 0; k < g->nblocks; k++) {
        const tpprof_block *bl = &g->blocks[k];
        double x = SVG_LABEL + (double)(bl->address - g->address) * scale;
        double w = (double)bl->size * scale;
        if (w < (bl->allocated ? 2 : 1)) // a small allocation stays visible
            w = bl->allocated ? 2 : 1;
        printf("<rect x=\"%.1f\" y=\"%.0f\" width=\"%.1f\" height=\"%d\" fill=\"%s\" "
               "stroke=\"#333\" stroke-width=\"0.5\"><title>0x%" PRIx64 " %s %s",
               x, y, w, SVG_BAR_H, bl->allocated ? color_of(colors, ncolors, bl->stack_id) : "url(#hatch)",
               (uint64_t)bl->address, tpprof_format_size((uint64_t)bl->size, a),
               bl->allocated ? "allocated" : "free");
        if (bl->allocated) {
            char frame[512];
            printf(", requested %lld B, ", (long long)bl->requested);
            xml_text(tpprof_stacks_describe_caller(p->stacks, bl->stack_id, frame, sizeof frame));
        }
        printf("</title></rect>\n");
        if (w > 56)
            printf("<text x=\"%.1f\" y=\"%.0f\" class=\"%s\" text-anchor=\"middle\">%s</text>\n", x + w / 2,
                   y + 15, bl->allocated ? "inbar" : "inbarfree", tpprof_format_size((uint64_t)bl->size, a));
    }
}

// Segment bars, one scale for all: a 2 MiB segment is a tenth of a 20 MiB
// one. Returns the y below.
static double svg_segments(const tpprof_profile *p, const tpprof_alloc_state *s, const stack_color *colors,
                           size_t ncolors, double y) {
    int64_t biggest = 1;
    for (size_t i = 0; i < s->nsegments; i++)
        if (s->segments[i].size > biggest)
            biggest = s->segments[i].size;
    double bar_w = SVG_WIDTH - SVG_LABEL - 20, scale = bar_w / (double)biggest;
    size_t nseg = s->nsegments < SVG_MAX_SEGMENTS ? s->nsegments : SVG_MAX_SEGMENTS;
    if (nseg == 0) {
        printf("<text x=\"10\" y=\"%.0f\">(no segment at this moment)</text>\n", y + 14);
        y += 24;
    }
    for (size_t i = 0; i < nseg; i++) {
        svg_segment(p, &s->segments[i], colors, ncolors, scale, y);
        y += SVG_BAR_H + SVG_GAP;
    }
    if (nseg < s->nsegments) {
        printf("<text x=\"10\" y=\"%.0f\">... %zu more segments not drawn</text>\n", y + 12,
               s->nsegments - nseg);
        y += 20;
    }
    return y;
}

// Legend: owner stacks by bytes, then free. Returns the y below.
static double svg_legend(const tpprof_profile *p, const stack_color *colors, size_t ncolors, double y) {
    char a[32];
    y += 6;
    printf("<text x=\"10\" y=\"%.0f\" class=\"head\">Blocks by owner stack (innermost frame)</text>\n",
           y + 12);
    y += 20;
    size_t nl = ncolors < NPALETTE - 1 ? ncolors : NPALETTE - 1;
    for (size_t i = 0; i < nl; i++) {
        char frame[512];
        printf("<rect x=\"10\" y=\"%.0f\" width=\"14\" height=\"12\" fill=\"%s\"/>\n", y, palette[i]);
        printf("<text x=\"30\" y=\"%.0f\">%s  ", y + 10, tpprof_format_size((uint64_t)colors[i].bytes, a));
        xml_text(tpprof_stacks_describe_caller(p->stacks, colors[i].stack_id, frame, sizeof frame));
        printf("</text>\n");
        y += 17;
    }
    if (ncolors > nl) {
        int64_t rest = 0;
        for (size_t i = nl; i < ncolors; i++)
            rest += colors[i].bytes;
        printf("<rect x=\"10\" y=\"%.0f\" width=\"14\" height=\"12\" fill=\"%s\"/>\n", y,
               palette[NPALETTE - 1]);
        printf("<text x=\"30\" y=\"%.0f\">%s  %zu other stacks</text>\n", y + 10,
               tpprof_format_size((uint64_t)rest, a), ncolors - nl);
        y += 17;
    }
    printf("<rect x=\"10\" y=\"%.0f\" width=\"14\" height=\"12\" fill=\"url(#hatch)\" stroke=\"#333\" "
           "stroke-width=\"0.5\"/>\n",
           y);
    printf("<text x=\"30\" y=\"%.0f\">free (cached; in a split segment: inactive split)</text>\n", y + 10);
    return y + 28;
}

// The chart's frame: its box, grid lines and axis labels (spans in ms or s
// and in MiB).
static void svg_chart_axes(double cx, double cy, double cw, double ch, double tspan, double tstep,
                           double vspan, double vstep, bool ms) {
    printf("<rect x=\"%.0f\" y=\"%.0f\" width=\"%.0f\" height=\"%.0f\" fill=\"#fafafa\" stroke=\"#999\"/>\n",
           cx, cy, cw, ch);
    for (double v = 0; v <= vspan + 1e-9; v += vstep) {
        double yy = cy + ch - v / vspan * ch;
        printf("<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", cx, yy,
               cx + cw, yy);
        printf("<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\" class=\"small\">%g MiB</text>\n",
               cx - 6, yy + 4, v);
    }
    for (double t = 0; t <= tspan + 1e-9; t += tstep) {
        double xx = cx + t / tspan * cw;
        printf("<line x1=\"%.1f\" y1=\"%.0f\" x2=\"%.1f\" y2=\"%.0f\" stroke=\"#999\"/>\n", xx,
               cy + ch, xx, cy + ch + 4);
        printf("<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\" class=\"small\">%g</text>\n", xx,
               cy + ch + 16, t);
    }
    printf("<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">time (%s)</text>\n", cx + cw / 2,
           cy + ch + 32, ms ? "ms" : "s");
}

// The chart's legend box, drawn over the lines.
static void svg_chart_legend(double cx, double cy) {
    double lx = cx + 10, ly = cy + 8;
    printf("<rect x=\"%.0f\" y=\"%.0f\" width=\"150\" height=\"40\" fill=\"white\" stroke=\"#ccc\"/>\n",
           lx, ly);
    printf("<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"#4e79a7\" stroke-width=\"2\"/>"
           "<text x=\"%.0f\" y=\"%.0f\">reserved</text>\n",
           lx + 8, ly + 13, lx + 30, ly + 13, lx + 36, ly + 17);
    printf("<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"#f28e2b\" stroke-width=\"2\"/>"
           "<text x=\"%.0f\" y=\"%.0f\">allocated</text>\n",
           lx + 8, ly + 30, lx + 30, ly + 30, lx + 36, ly + 34);
}

// Timeline: reserved and allocated over the run, the moment marked.
// Returns the y of the chart's bottom edge, labels included.
static double svg_timeline(const tpprof_alloc_state *s, const frag_options *o, double y) {
    size_t np = 0;
    tpprof_alloc_point *pts = series_of(s, &np);
    double cx = 90, cw = SVG_WIDTH - cx - 30, ch = SVG_CHART_H, cy = y + 24;
    printf("<text x=\"10\" y=\"%.0f\" class=\"head\">Reserved and allocated over the run</text>\n",
           y + 12);
    int64_t tmax = 1, vmax = 1;
    for (size_t i = 0; i < np; i++) {
        if (pts[i].time_ns > tmax)
            tmax = pts[i].time_ns;
        if (pts[i].reserved > vmax)
            vmax = pts[i].reserved;
        if (pts[i].allocated > vmax)
            vmax = pts[i].allocated;
    }
    bool ms = tmax < 2000000000;
    double tunit = ms ? 1e6 : 1e9, vunit = 1048576.0;
    double tstep = nice_step((double)tmax / tunit, 8), vstep = nice_step((double)vmax / vunit, 5);
    double tspan = ceil((double)tmax / tunit / tstep) * tstep, vspan = ceil((double)vmax / vunit / vstep) * vstep;
    if (tspan <= 0)
        tspan = tstep;
    if (vspan <= 0)
        vspan = vstep;
    svg_chart_axes(cx, cy, cw, ch, tspan, tstep, vspan, vstep, ms);
    for (int line = 0; line < 2; line++) {
        printf("<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"",
               line == 0 ? "#4e79a7" : "#f28e2b");
        // Steps: a value holds until the next event.
        double prev_y = cy + ch;
        printf("%.1f,%.1f ", cx, prev_y);
        for (size_t i = 0; i < np; i++) {
            double xx = cx + (double)pts[i].time_ns / tunit / tspan * cw;
            double v = (double)(line == 0 ? pts[i].reserved : pts[i].allocated) / vunit;
            double yy = cy + ch - v / vspan * ch;
            printf("%.1f,%.1f %.1f,%.1f ", xx, prev_y, xx, yy);
            prev_y = yy;
        }
        printf("%.1f,%.1f\"/>\n", cx + cw, prev_y);
    }
    double mx = cx + (double)moment_time(s, o) / tunit / tspan * cw;
    printf("<line x1=\"%.1f\" y1=\"%.0f\" x2=\"%.1f\" y2=\"%.0f\" stroke=\"#c00\" "
           "stroke-dasharray=\"4 3\"/>\n",
           mx, cy, mx, cy + ch);
    printf("<text x=\"%.1f\" y=\"%.0f\" class=\"small\" fill=\"#c00\">%s</text>\n", mx + 3, cy + 12,
           moment_name(o->at));
    svg_chart_legend(cx, cy);
    free(pts);
    return cy + ch + 48;
}

// One allocator's part of the picture from y0: title and figures, segment
// bars, the owners' legend, the timeline. *height: how tall it came out.
static void svg_state(const tpprof_profile *p, const tpprof_alloc_state *s, const frag_options *o,
                      double y0, double *height) {
    double y = svg_title(s, o, y0);
    size_t ncolors = 0;
    stack_color *colors = owner_colors(s, &ncolors);
    y = svg_segments(p, s, colors, ncolors, y);
    y = svg_legend(p, colors, ncolors, y);
    free(colors);
    *height = svg_timeline(s, o, y) - y0;
}

static void svg_report(const tpprof_profile *p, tpprof_alloc_state *s, size_t n,
                       const frag_options *o) {
    // Draw into a temporary file first: the height is known only at the end.
    FILE *body = tmpfile();
    FILE *saved = stdout;
    if (body)
        stdout = body;
    double y = 10;
    for (size_t i = 0; i < n; i++) {
        double h = 0;
        svg_state(p, &s[i], o, y, &h);
        y += h + 20;
    }
    if (n == 0)
        printf("<text x=\"10\" y=\"30\">No allocator events in this recording.</text>\n");
    fflush(stdout);
    stdout = saved;
    printf("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%.0f\" "
           "viewBox=\"0 0 %d %.0f\" font-family=\"sans-serif\" font-size=\"12\">\n",
           SVG_WIDTH, y < 60 ? 60 : y, SVG_WIDTH, y < 60 ? 60 : y);
    printf("<defs><pattern id=\"hatch\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" "
           "patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" fill=\"#e6e6e6\"/>"
           "<line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#aaa\" stroke-width=\"2\"/></pattern>"
           "<style>.title{font-size:15px;font-weight:bold}.head{font-weight:bold}"
           ".small{font-size:10px}.mono{font-family:monospace;font-size:11px}"
           ".inbar{font-size:10px;fill:white}.inbarfree{font-size:10px;fill:#444}</style></defs>\n");
    printf("<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
    if (body) {
        rewind(body);
        char buf[8192];
        size_t got;
        while ((got = fread(buf, 1, sizeof buf, body)) > 0)
            fwrite(buf, 1, got, stdout);
        fclose(body);
    }
    printf("</svg>\n");
}

// ---------------------------------------------------------------------------
// Command

static int parse(int argc, char **argv, frag_options *o) {
    int moments = 0;
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        int r;
        if (strcmp(argv[i], "--at-exit") == 0) {
            o->at = AT_EXIT;
            moments++;
        } else if (strcmp(argv[i], "--at-peak") == 0) {
            o->at = AT_PEAK;
            moments++;
        } else if ((r = tpprof_opt(argc, argv, &i, "--at-event", &v)) != 0) {
            uint64_t seq = 0;
            if (r < 0 || tpprof_parse_count("--at-event", v, &seq) != 0)
                return -1;
            o->seq = (int64_t)seq;
            o->at = AT_EVENT;
            moments++;
        } else if ((r = tpprof_opt(argc, argv, &i, "--at", &v)) != 0) {
            if (r < 0 || tpprof_parse_time("--at", v, &o->time_ns) != 0)
                return -1;
            o->at = AT_TIME;
            moments++;
        } else if ((r = tpprof_opt(argc, argv, &i, "--allocator", &v)) != 0) {
            if (r < 0)
                return -1;
            o->allocator = v;
        } else if ((r = tpprof_opt(argc, argv, &i, "--top", &v)) != 0) {
            if (r < 0 || tpprof_parse_count("--top", v, &o->top) != 0)
                return -1;
        } else if ((r = tpprof_opt(argc, argv, &i, "--format", &v)) != 0) {
            if (r < 0)
                return -1;
            if (strcmp(v, "text") == 0)
                o->format = FORMAT_TEXT;
            else if (strcmp(v, "json") == 0)
                o->format = FORMAT_JSON;
            else if (strcmp(v, "svg") == 0)
                o->format = FORMAT_SVG;
            else
                return tpprof_error_set("--format: expected text, json or svg, got '%s'", v);
        } else if (tpprof_opt_database("fragmentation", argv[i], &o->path) != 0) {
            return -1;
        }
    }
    if (!o->path)
        return tpprof_error_set("missing the database (usage: tpprof fragmentation DB [options])");
    if (moments > 1)
        return tpprof_error_set("choose one moment: --at-exit, --at-peak, --at TIME or --at-event SEQ");
    return 0;
}

int tpprof_cmd_fragmentation(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(tpprof_usage_fragmentation, stdout);
            return TPPROF_EXIT_OK;
        }
    frag_options o = {.top = 10};
    if (parse(argc, argv, &o) != 0) {
        fprintf(stderr, "tpprof fragmentation: %s\n", tpprof_error());
        return TPPROF_EXIT_USAGE;
    }
    tpprof_profile *p = tpprof_profile_load(o.path);
    if (!p) {
        fprintf(stderr, "tpprof fragmentation: %s\n", tpprof_error());
        return TPPROF_EXIT_USAGE;
    }
    tpprof_alloc_state *s = NULL;
    size_t n = 0;
    int status = TPPROF_EXIT_OK;
    if (tpprof_alloc_load(p->db, &s, &n) != 0) {
        status = TPPROF_EXIT_USAGE;
        goto done;
    }
    if (o.allocator) {
        // Keep only the named allocator's state at the front.
        size_t kept = 0;
        for (size_t i = 0; i < n; i++)
            if (strcmp(s[i].allocator, o.allocator) == 0) {
                tpprof_alloc_state tmp = s[kept];
                s[kept++] = s[i];
                s[i] = tmp;
            }
        if (kept == 0) {
            tpprof_error_set("no allocator named '%s' sent events in '%s'", o.allocator, o.path);
            status = TPPROF_EXIT_USAGE;
            goto done;
        }
        for (size_t i = kept; i < n; i++)
            tpprof_alloc_state_clear(&s[i]);
        n = kept;
    }
    for (size_t i = 0; i < n; i++)
        if (tpprof_alloc_replay(&s[i], moment_count(&s[i], &o)) != 0) {
            status = TPPROF_EXIT_USAGE;
            goto done;
        }
    if (o.format == FORMAT_SVG) {
        svg_report(p, s, n, &o);
    } else if (o.format == FORMAT_JSON) {
        tpprof_json j;
        tpprof_json_document_begin(&j, stdout, "tpprof-fragmentation", 1, o.path);
        tpprof_json_key(&j, "allocators");
        tpprof_json_array_begin(&j);
        for (size_t i = 0; i < n; i++)
            json_state(&j, p, &s[i], &o);
        tpprof_json_array_end(&j);
        tpprof_json_object_end(&j);
        tpprof_json_finish(&j);
    } else {
        if (n == 0)
            printf("No allocator events in %s (no caching allocator was used, or the recorder "
                   "predates allocator_events).\n",
                   o.path);
        for (size_t i = 0; i < n; i++)
            text_state(p, &s[i], &o);
    }
done:
    if (status != TPPROF_EXIT_OK)
        fprintf(stderr, "tpprof fragmentation: %s\n", tpprof_error());
    tpprof_alloc_states_free(s, n);
    tpprof_profile_free(p);
    if (status == TPPROF_EXIT_OK && fflush(stdout) != 0)
        status = TPPROF_EXIT_USAGE;
    return status;
}
