// storages.c: the tensor-level sections of `tpprof report` (--storages,
// --lifetimes), as text and as JSON (contract: docs/report-json.md), and
// the stack printers every command shares.
//
// The numbers come from tensors.c; this file only orders and prints them.
// It never writes the database.
#define _POSIX_C_SOURCE 200809L
#include "viewer.h"

#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#define MAX_FRAMES 2048 // 128 recorded frames, each possibly several inlined ones
#define MAX_TEXT_FRAMES 8

// ---------------------------------------------------------------------------
// Stacks, shared by the commands

void tpprof_print_stack(const tpprof_stacks *st, int64_t stack_id, const char *indent,
                        size_t max_frames, bool from_caller) {
    static tpprof_frame all[MAX_FRAMES];
    size_t n = tpprof_stacks_frames(st, stack_id, all, MAX_FRAMES, NULL);
    size_t skip = from_caller ? tpprof_stacks_first_caller(all, n) : 0;
    tpprof_frame *frames = all + skip;
    n -= skip;
    // Frames outside main (libc's start-up code) say nothing to a reader.
    for (size_t i = 0; i < n; i++)
        if (frames[i].function && strcmp(frames[i].function, "main") == 0) {
            n = i + 1;
            break;
        }
    char buf[1024];
    if (n == 0)
        printf("%s(no stack recorded)\n", indent);
    // Below the innermost frame, a run of the standard library's own frames
    // (Rust's Vec growing through RawVec and the allocator, C++'s
    // std::vector) is said in one line, so the program's frames show.
    size_t lib = tpprof_frames_past_stdlib(frames, n, 1);
    size_t folded = lib - 1 >= 2 && lib < n ? lib - 1 : 0;
    size_t shown = 0, total = n - folded;
    for (size_t i = 0; i < n && shown < max_frames; i++) {
        if (i == 1 && folded) {
            printf("%s(%zu frames of the standard library)\n", indent, folded);
            i = lib - 1;
            continue;
        }
        printf("%s%s%s\n", indent, tpprof_frame_format(&frames[i], buf, sizeof buf),
               i == 0 && skip ? "  (called into the runtime)" : "");
        shown++;
    }
    if (total > shown)
        printf("%s... %zu more frame%s\n", indent, total - shown, total - shown == 1 ? "" : "s");
}

void tpprof_json_stack(tpprof_json *j, const tpprof_stacks *st, int64_t stack_id) {
    static tpprof_frame frames[MAX_FRAMES];
    size_t n = tpprof_stacks_frames(st, stack_id, frames, MAX_FRAMES, NULL);
    tpprof_json_key(j, "stack");
    tpprof_json_array_begin(j);
    for (size_t i = 0; i < n; i++) {
        const tpprof_frame *f = &frames[i];
        tpprof_json_object_begin_inline(j);
        tpprof_json_kv_string(j, "function", f->function);
        tpprof_json_kv_string(j, "file", f->file);
        tpprof_json_key(j, "line");
        if (f->line > 0)
            tpprof_json_int(j, f->line);
        else
            tpprof_json_null(j);
        tpprof_json_kv_string(j, "module", f->module);
        tpprof_json_kv_address(j, "ip", f->ip);
        tpprof_json_object_end(j);
    }
    tpprof_json_array_end(j);
}

char *tpprof_format_ns(int64_t ns, char buf[32]) {
    double v = (double)ns;
    if (ns < 0)
        snprintf(buf, 32, "-");
    else if (ns < 1000)
        snprintf(buf, 32, "%lld ns", (long long)ns);
    else if (ns < 1000000)
        snprintf(buf, 32, "%.1f us", v / 1e3);
    else if (ns < 1000000000)
        snprintf(buf, 32, "%.1f ms", v / 1e6);
    else
        snprintf(buf, 32, "%.2f s", v / 1e9);
    return buf;
}

// ---------------------------------------------------------------------------
// Storages alive at the end, in the order a reader wants them: the ones
// with references no tensor explains first, then by size.

static const tpprof_tensors *sort_ctx;

static int64_t unmatched_of(const tpprof_tensors *t, int64_t storage, bool weak) {
    int64_t n = 0;
    size_t nr = 0;
    const tpprof_ref *refs = tpprof_tensors_refs(t, storage, &nr);
    for (size_t i = 0; i < nr; i++)
        if (tpprof_ref_unmatched(&refs[i], weak))
            n += refs[i].count;
    return n;
}

static int by_interest(const void *a, const void *b) {
    const tpprof_storage *x = *(tpprof_storage *const *)a, *y = *(tpprof_storage *const *)b;
    bool ux = unmatched_of(sort_ctx, x->id, false) > 0, uy = unmatched_of(sort_ctx, y->id, false) > 0;
    if (ux != uy)
        return ux ? -1 : 1;
    if (x->nbytes != y->nbytes)
        return x->nbytes > y->nbytes ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

// Storages whose struct is alive at the end; data_released chooses those
// whose data is gone (true) or kept (false). New array of borrowed pointers.
static const tpprof_storage **alive_storages(const tpprof_tensors *t, bool data_released,
                                             size_t *n) {
    const tpprof_storage **v = malloc((t->nstorages + 1) * sizeof *v);
    *n = 0;
    if (!v)
        return NULL;
    for (size_t i = 0; i < t->nstorages; i++) {
        const tpprof_storage *s = &t->storages[i];
        if (tpprof_storage_alive(s) && tpprof_storage_data_alive(s) != data_released)
            v[(*n)++] = s;
    }
    sort_ctx = t;
    if (*n)
        qsort(v, *n, sizeof *v, by_interest);
    return v;
}

static size_t tensors_holding(const tpprof_tensors *t, int64_t storage, bool at_peak) {
    size_t n = 0, non = 0;
    const size_t *on = tpprof_tensors_on(t, storage, &non);
    for (size_t i = 0; i < non; i++) {
        const tpprof_tensor *x = &t->tensors[on[i]];
        if (at_peak ? x->at_peak : tpprof_tensor_alive(x))
            n++;
    }
    return n;
}

// "tensor #3 [16, 64] float32, strides [64, 1], offset 0, view of #2",
// then "created in f (a.c:9)" and, for a base whose live views hold it (a
// view holds its base: the base is alive while any of them is, whatever the
// program did with its own reference), "held by its views #4, #5".
// Then each tp_tensor_retain of it no release matched, by stack:
// "1 handle retain no release matched, in history_push (h.c:27)".
static void text_tensor_line(const tpprof_profile *p, const tpprof_tensors *t, const tpprof_tensor *x,
                             const char *indent) {
    char at[512];
    printf("%stensor #%lld %s %s, strides %s, offset %lld", indent, (long long)x->id,
           x->sizes ? x->sizes : "?", x->dtype ? x->dtype : "?", x->strides ? x->strides : "?",
           (long long)x->offset);
    if (x->base_id)
        printf(", view of #%lld", (long long)x->base_id);
    printf("\n");
    if (x->created_stack > 0)
        printf("%s  created in %s\n", indent,
               tpprof_stacks_describe_caller(p->stacks, x->created_stack, at, sizeof at));
    size_t nh = 0;
    const tpprof_handle_ref *h = tpprof_tensors_handles(t, x->id, &nh);
    for (size_t i = 0; i < nh; i++)
        if (tpprof_handle_unmatched(&h[i]))
            printf("%s  %lld handle retain%s no release matched, in %s\n", indent, (long long)h[i].count,
                   h[i].count == 1 ? "" : "s", tpprof_stacks_describe_caller(p->stacks, h[i].stack_id, at, sizeof at));
    size_t alive = tpprof_tensors_live_views(t, x->id);
    if (!alive)
        return;
    size_t nv = 0, shown = 0;
    const size_t *views = tpprof_tensors_views_of(t, x->id, &nv);
    printf("%s  held by its view%s", indent, alive == 1 ? "" : "s");
    for (size_t i = 0; i < nv && shown < 8; i++)
        if (tpprof_tensor_alive(&t->tensors[views[i]]))
            printf("%s #%lld", shown++ ? "," : "", (long long)t->tensors[views[i]].id);
    if (alive > shown)
        printf(" and %zu more", alive - shown);
    printf("\n");
}

static const char *group_why(const tpprof_graph_group *x) {
    return !x->backward_ran ? "backward never ran" : x->retained ? "retain_graph" : "backward ran";
}

// "; its root NllLossBackward0 created in main (train.c:40)" when node is
// not its graph's root.
static void text_root_of(const tpprof_profile *p, const tpprof_autograd *g, const tpprof_gnode *node) {
    const tpprof_gnode *root = tpprof_autograd_root(g, node);
    char at[512];
    if (root != node)
        printf("; its root %s created in %s", root->name,
               tpprof_stacks_describe_caller(p->stacks, root->created_stack, at, sizeof at));
}

// The nodes alive at exit that keep s: "saved by MmBackward0 (node #12, as
// tensor #14) created in forward (model.c:88); graph alive: backward never
// ran", and for a leaf alive on it that nodes hold as an input, "tensor #2
// is a leaf input of 5 graph nodes alive at exit, such as AddmmBackward0
// (node #84) created in ...".
static void text_saved_by(const tpprof_profile *p, const tpprof_tensors *t, const tpprof_autograd *g,
                          const tpprof_storage *s, const char *indent) {
    const tpprof_gsaved *h[8];
    size_t n = tpprof_autograd_holders(g, s->id, h, 8);
    char at[512];
    for (size_t i = 0; i < n && i < 8; i++) {
        const tpprof_gnode *node = tpprof_autograd_node(g, h[i]->node_id);
        printf("%ssaved by %s (node #%lld, as tensor #%lld) created in %s; graph alive: %s", indent, node->name,
               (long long)node->id, (long long)h[i]->tensor_id,
               tpprof_stacks_describe_caller(p->stacks, node->created_stack, at, sizeof at), tpprof_gnode_why(node));
        text_root_of(p, g, node);
        printf("\n");
    }
    if (n > 8)
        printf("%s... saved by %zu more nodes\n", indent, n - 8);
    size_t non = 0;
    const size_t *on = tpprof_tensors_on(t, s->id, &non);
    for (size_t i = 0; i < non; i++) {
        const tpprof_tensor *x = &t->tensors[on[i]];
        const tpprof_gleaf *l[1];
        size_t nl = tpprof_tensor_alive(x) ? tpprof_autograd_leaf_holders(g, x->id, l, 1) : 0;
        if (!nl)
            continue;
        const tpprof_gnode *node = tpprof_autograd_node(g, l[0]->node_id);
        printf("%stensor #%lld is a leaf input of %zu graph node%s alive at exit, such as %s (node #%lld) created "
               "in %s; graph alive: %s",
               indent, (long long)x->id, nl, nl == 1 ? "" : "s", node->name, (long long)node->id,
               tpprof_stacks_describe_caller(p->stacks, node->created_stack, at, sizeof at), tpprof_gnode_why(node));
        text_root_of(p, g, node);
        printf("\n");
    }
    // A gradient on it: its leaf holds it, and nodes hold the leaf.
    for (size_t i = 0; i < non; i++) {
        const tpprof_tensor *x = &t->tensors[on[i]];
        const tpprof_tensor *owner = tpprof_tensor_alive(x) ? tpprof_autograd_grad_owner(g, t, x->id) : NULL;
        const tpprof_gleaf *l[1];
        size_t nl = owner ? tpprof_autograd_leaf_holders(g, owner->id, l, 1) : 0;
        if (!nl)
            continue;
        const tpprof_gnode *node = tpprof_autograd_node(g, l[0]->node_id);
        printf("%stensor #%lld is the grad of tensor #%lld, a leaf input of %zu graph node%s alive at exit, such as "
               "%s (node #%lld) created in %s; graph alive: %s",
               indent, (long long)x->id, (long long)owner->id, nl, nl == 1 ? "" : "s", node->name, (long long)node->id,
               tpprof_stacks_describe_caller(p->stacks, node->created_stack, at, sizeof at), tpprof_gnode_why(node));
        text_root_of(p, g, node);
        printf("\n");
    }
}

// The storages graphs keep, one line each in the words of the issue
// ("storage #41 (4.0 MiB) saved by MmBackward0 created in forward
// (model.c:88); graph alive: backward never ran"), then by the stack that
// built each graph (its root node's creation).
static void text_graph_held(const tpprof_profile *p, const tpprof_tensors *t, const tpprof_autograd *g, size_t cap) {
    char a[32], b[32], at[512];
    size_t ng = 0;
    tpprof_graph_held held;
    tpprof_graph_group *groups = tpprof_autograd_groups(g, t, &ng, &held);
    size_t alive = 0;
    for (size_t i = 0; i < g->nnodes; i++)
        alive += tpprof_gnode_alive(&g->nodes[i]);
    printf("\nGraph-held: %s in %llu storage%s only autograd graphs keep alive at exit (they go with the graphs); "
           "graphs keep %llu storage%s (%s) in all",
           tpprof_format_size(held.alone_bytes, a), (unsigned long long)held.alone_storages,
           held.alone_storages == 1 ? "" : "s", (unsigned long long)held.storages, held.storages == 1 ? "" : "s",
           tpprof_format_size(held.bytes, b));
    printf(" (%zu graph node%s alive", alive, alive == 1 ? "" : "s");
    if (g->created)
        printf(" of %lld made", (long long)g->created);
    printf(")\n");
    if (!g->present)
        printf("  (no autograd graph in this recording: the runtime sent no graph events, or the recorder "
               "predates them)\n");
    size_t shown = 0;
    for (size_t i = 0; i < t->nstorages && (!cap || shown < cap); i++) {
        const tpprof_storage *s = &t->storages[i];
        int how;
        const tpprof_gnode *node = tpprof_autograd_storage_node(g, t, s, &how, NULL);
        if (!node)
            continue;
        printf("  storage #%lld (%s) %s %s created in %s; graph alive: %s%s\n", (long long)s->id,
               tpprof_format_size((uint64_t)s->nbytes, a),
               how == TPPROF_GKEEP_SAVED  ? "saved by"
               : how == TPPROF_GKEEP_LEAF ? "a leaf input of"
                                          : "the grad of a leaf input of",
               node->name,
               tpprof_stacks_describe_caller(p->stacks, node->created_stack, at, sizeof at), tpprof_gnode_why(node),
               tpprof_autograd_keeps_alone(g, t, s) ? "" : " (also kept otherwise)");
        shown++;
    }
    if (shown < held.storages)
        printf("  ... %llu more storages (--top 0 shows all)\n", (unsigned long long)(held.storages - shown));
    printf("\nGraphs keeping storages, by the stack that built them (where the root node was made): %zu stack%s\n",
           ng, ng == 1 ? "" : "s");
    if (ng == 0)
        printf("  none: no graph alive at exit keeps a storage\n");
    for (size_t i = 0; i < ng && (!cap || i < cap); i++) {
        printf("  %llu graph%s, %llu node%s, %llu storage%s (%s), %s only theirs: root %s; graph alive: %s\n",
               (unsigned long long)groups[i].graphs, groups[i].graphs == 1 ? "" : "s",
               (unsigned long long)groups[i].nodes, groups[i].nodes == 1 ? "" : "s",
               (unsigned long long)groups[i].storages, groups[i].storages == 1 ? "" : "s",
               tpprof_format_size(groups[i].bytes, a), tpprof_format_size(groups[i].alone_bytes, b),
               groups[i].root_name, group_why(&groups[i]));
        tpprof_print_stack(p->stacks, groups[i].stack_id, "      ", MAX_TEXT_FRAMES, true);
    }
    free(groups);
}

static void text_storage(const tpprof_profile *p, const tpprof_tensors *t, const tpprof_autograd *g,
                         const tpprof_storage *s) {
    char a[32];
    printf("  storage #%lld  %s  %s on %s  strong %lld, weak %lld", (long long)s->id,
           tpprof_format_size((uint64_t)s->nbytes, a), s->allocator ? s->allocator : "(borrowed)",
           s->device ? s->device : "?", (long long)s->strong, (long long)s->weak);
    size_t held = tensors_holding(t, s->id, false);
    printf("; %zu tensor%s\n", held, held == 1 ? "" : "s");
    size_t non = 0;
    const size_t *on = tpprof_tensors_on(t, s->id, &non);
    for (size_t i = 0; i < non; i++)
        if (tpprof_tensor_alive(&t->tensors[on[i]]))
            text_tensor_line(p, t, &t->tensors[on[i]], "      ");
    text_saved_by(p, t, g, s, "      ");
    int64_t unmatched = unmatched_of(t, s->id, false);
    if (unmatched > 0) {
        printf("      strong count is %lld but tensors hold %lld: %lld reference%s no release "
               "matched, taken at:\n",
               (long long)s->strong, (long long)(s->strong - unmatched), (long long)unmatched,
               unmatched == 1 ? "" : "s");
        size_t nr = 0;
        const tpprof_ref *refs = tpprof_tensors_refs(t, s->id, &nr);
        for (size_t i = 0; i < nr; i++) {
            const tpprof_ref *r = &refs[i];
            if (!tpprof_ref_unmatched(r, false))
                continue;
            printf("        %lld x %s\n", (long long)r->count, tpprof_ref_op_name(r->op));
            tpprof_print_stack(p->stacks, r->stack_id, "          ", 4, true);
        }
    }
}

// handles: groups of tensor handles (tpprof_handle_groups), counted as
// handles and with no op; else references, with their op.
static void text_groups(const tpprof_profile *p, const tpprof_ref_group *g, size_t n, size_t cap, bool handles) {
    char a[32];
    size_t shown = cap && cap < n ? cap : n;
    for (size_t i = 0; i < shown; i++) {
        printf("  %llu storage%s (%s), %llu %s%s%s%s\n", (unsigned long long)g[i].storages,
               g[i].storages == 1 ? "" : "s", tpprof_format_size(g[i].bytes, a), (unsigned long long)g[i].refs,
               handles ? "handle" : "reference", g[i].refs == 1 ? "" : "s", handles ? "" : "  ",
               handles ? "" : tpprof_ref_op_name(g[i].op));
        tpprof_print_stack(p->stacks, g[i].stack_id, "      ", MAX_TEXT_FRAMES, true);
    }
    if (shown < n)
        printf("  ... %zu more stacks\n", n - shown);
}

// A section of groups: its title with the number of stacks, `none` when
// there are none, then the groups (freed here).
static void text_group_section(const tpprof_profile *p, const char *title, const char *none, tpprof_ref_group *g,
                               size_t ng, size_t cap, bool handles) {
    printf("\n%s: %zu stack%s\n", title, ng, ng == 1 ? "" : "s");
    if (ng == 0) printf("  none: %s\n", none);
    text_groups(p, g, ng, cap, handles);
    free(g);
}

static void text_pinned(const tpprof_profile *p, const tpprof_tensors *t, bool at_peak, size_t cap) {
    size_t n = 0;
    tpprof_pinned *v = tpprof_pinned_views(t, at_peak, &n);
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += v[i].pinned_bytes;
    char a[32], b[32];
    printf("  %s: %s pinned in %zu storage%s\n", at_peak ? "at the peak" : "at exit",
           tpprof_format_size(total, a), n, n == 1 ? "" : "s");
    size_t shown = cap && cap < n ? cap : n;
    for (size_t i = 0; i < shown; i++) {
        const tpprof_tensor *x = tpprof_tensors_tensor(t, v[i].tensor_id);
        printf("    tensor #%lld %s %s covers %s of storage #%lld (%s, %.1f%%): %llu B pinned\n",
               (long long)v[i].tensor_id, x && x->sizes ? x->sizes : "?",
               x && x->dtype ? x->dtype : "?", tpprof_format_size(v[i].covered_bytes, a),
               (long long)v[i].storage_id, tpprof_format_size(v[i].storage_bytes, b),
               100.0 * (double)v[i].covered_bytes / (double)v[i].storage_bytes,
               (unsigned long long)v[i].pinned_bytes);
        const tpprof_tensor *base = v[i].held_base ? tpprof_tensors_tensor(t, v[i].held_base) : NULL;
        if (base)
            printf("      its base #%lld %s is alive only as far as the view keeps it (a view holds "
                   "its base): pinned unless #%lld is still used\n",
                   (long long)base->id, base->sizes ? base->sizes : "?", (long long)base->id);
        if (x)
            tpprof_print_stack(p->stacks, x->created_stack, "        ", 4, true);
    }
    if (shown < n)
        printf("    ... %zu more\n", n - shown);
    free(v);
}

void tpprof_report_storages_text(const tpprof_profile *p, const tpprof_tensors *t, size_t cap) {
    char a[32], b[32];
    tpprof_autograd ag;
    if (tpprof_autograd_load(p->db, &ag) != 0) { // the rest can still be shown
        fprintf(stderr, "tpprof: the autograd graph is left out: %s\n", tpprof_error());
        memset(&ag, 0, sizeof ag);
    }
    size_t nlive = 0, nreleased = 0;
    const tpprof_storage **live = alive_storages(t, false, &nlive);
    const tpprof_storage **released = alive_storages(t, true, &nreleased);
    uint64_t live_bytes = 0;
    for (size_t i = 0; i < nlive; i++)
        live_bytes += (uint64_t)live[i]->nbytes;
    printf("\nStorages alive at exit: %zu holding %s of data, %zu more with data released "
           "(struct held by weak references)\n",
           nlive, tpprof_format_size(live_bytes, a), nreleased);
    if (!t->attached && t->nstorages == 0)
        printf("  (no tensor data in this recording: the program did not use libtensorplay, or "
               "the recorder predates it)\n");
    size_t shown = cap && cap < nlive ? cap : nlive;
    for (size_t i = 0; i < shown; i++)
        text_storage(p, t, &ag, live[i]);
    if (shown < nlive)
        printf("  ... %zu more storages (--top 0 shows all)\n", nlive - shown);
    text_graph_held(p, t, &ag, cap);
    tpprof_autograd_free(&ag);

    size_t ng = 0;
    tpprof_ref_group *g = tpprof_ref_groups(t, false, &ng);
    text_group_section(p, "Unmatched references by stack (taken, never released; no tensor holds them)",
                       "every strong reference alive at exit belongs to a tensor", g, ng, cap, false);
    g = tpprof_handle_groups(t, &ng);
    text_group_section(p, "Tensor handles by stack (tp_tensor_retain, never released; they keep their tensors alive)",
                       "no tensor alive at exit is held by a handle retain no release matched", g, ng, cap, true);

    printf("\nData released, struct still held by weak references: %zu storage%s\n", nreleased,
           nreleased == 1 ? "" : "s");
    shown = cap && cap < nreleased ? cap : nreleased;
    for (size_t i = 0; i < shown; i++) {
        const tpprof_storage *s = released[i];
        printf("  storage #%lld  %s  %s, data released at %s, weak %lld\n", (long long)s->id,
               tpprof_format_size((uint64_t)s->nbytes, a),
               s->allocator ? s->allocator : "(borrowed)",
               s->data_released_ns == TPPROF_NO_TIME ? "?" : tpprof_format_ns(s->data_released_ns, b),
               (long long)s->weak);
        size_t nr = 0;
        const tpprof_ref *refs = tpprof_tensors_refs(t, s->id, &nr);
        for (size_t k = 0; k < nr; k++) {
            char frame[512];
            if (refs[k].op != TPPROF_REF_WEAK_RETAIN)
                continue;
            printf("      %lld weak reference%s taken in %s\n", (long long)refs[k].count,
                   refs[k].count == 1 ? "" : "s",
                   tpprof_stacks_describe_caller(p->stacks, refs[k].stack_id, frame, sizeof frame));
        }
    }
    g = tpprof_ref_groups(t, true, &ng);
    if (ng) {
        printf("  weak references by stack (the holders):\n");
        text_groups(p, g, ng, cap, false);
    }
    free(g);

    printf("\nSmall views pinning big storages (the tensor covering most of a storage of at least "
           "%s covers under %.0f%% of it)\n",
           tpprof_format_size(TPPROF_PIN_MIN_BYTES, a), TPPROF_PIN_FRACTION * 100);
    text_pinned(p, t, false, cap);
    text_pinned(p, t, true, cap);
    free(live);
    free(released);
}

// ---------------------------------------------------------------------------
// JSON

static void json_tensor(tpprof_json *j, const tpprof_profile *p, const tpprof_tensors *t, const tpprof_tensor *x) {
    tpprof_json_object_begin(j);
    tpprof_json_tensor_fields(j, x);
    tpprof_json_stack(j, p->stacks, x->created_stack);
    tpprof_json_key(j, "handle_retains");
    tpprof_json_array_begin(j);
    size_t nh = 0;
    const tpprof_handle_ref *h = tpprof_tensors_handles(t, x->id, &nh);
    for (size_t i = 0; i < nh; i++) {
        if (!tpprof_handle_unmatched(&h[i]))
            continue;
        tpprof_json_object_begin(j);
        tpprof_json_kv_int(j, "count", h[i].count);
        tpprof_json_stack(j, p->stacks, h[i].stack_id);
        tpprof_json_object_end(j);
    }
    tpprof_json_array_end(j);
    tpprof_json_object_end(j);
}

static void json_refs(tpprof_json *j, const tpprof_profile *p, const tpprof_tensors *t,
                      const char *key, int64_t storage, bool weak) {
    tpprof_json_key(j, key);
    tpprof_json_array_begin(j);
    size_t nr = 0;
    const tpprof_ref *refs = tpprof_tensors_refs(t, storage, &nr);
    for (size_t i = 0; i < nr; i++) {
        const tpprof_ref *r = &refs[i];
        if (!tpprof_ref_unmatched(r, weak))
            continue;
        tpprof_json_object_begin(j);
        tpprof_json_kv_int(j, "count", r->count);
        tpprof_json_kv_string(j, "op", tpprof_ref_op_name(r->op));
        tpprof_json_stack(j, p->stacks, r->stack_id);
        tpprof_json_object_end(j);
    }
    tpprof_json_array_end(j);
}

// Writes groups g[0..n) under key, and frees them.
static void json_groups(tpprof_json *j, const tpprof_profile *p, const char *key, tpprof_ref_group *g, size_t n) {
    tpprof_json_key(j, key);
    tpprof_json_array_begin(j);
    for (size_t i = 0; i < n; i++) {
        tpprof_json_object_begin(j);
        tpprof_json_kv_string(j, "op", tpprof_ref_op_name(g[i].op));
        tpprof_json_kv_int(j, "storages", (int64_t)g[i].storages);
        tpprof_json_kv_int(j, "count", (int64_t)g[i].refs);
        tpprof_json_kv_int(j, "bytes", (int64_t)g[i].bytes);
        tpprof_json_stack(j, p->stacks, g[i].stack_id);
        tpprof_json_object_end(j);
    }
    tpprof_json_array_end(j);
    free(g);
}

static void json_pinned(tpprof_json *j, const tpprof_profile *p, const tpprof_tensors *t,
                        bool at_peak) {
    size_t n = 0;
    tpprof_pinned *v = tpprof_pinned_views(t, at_peak, &n);
    for (size_t i = 0; i < n; i++) {
        const tpprof_tensor *x = tpprof_tensors_tensor(t, v[i].tensor_id);
        tpprof_json_object_begin(j);
        tpprof_json_kv_string(j, "when", at_peak ? "peak" : "exit");
        tpprof_json_kv_int(j, "tensor", v[i].tensor_id);
        tpprof_json_kv_int(j, "storage", v[i].storage_id);
        tpprof_json_kv_int(j, "storage_bytes", (int64_t)v[i].storage_bytes);
        tpprof_json_kv_int(j, "covered_bytes", (int64_t)v[i].covered_bytes);
        tpprof_json_kv_int(j, "pinned_bytes", (int64_t)v[i].pinned_bytes);
        tpprof_json_kv_id(j, "held_base", v[i].held_base);
        if (x) {
            tpprof_json_kv_dims(j, "sizes", x, false);
            tpprof_json_kv_dims(j, "strides", x, true);
            tpprof_json_kv_string(j, "dtype", x->dtype);
        }
        tpprof_json_stack(j, p->stacks, x ? x->created_stack : 0);
        tpprof_json_object_end(j);
    }
    free(v);
}

// "saved_by" and "leaf_input_of": the nodes alive at exit that keep
// storage s, by a saved tensor or by a leaf input alive on it.
static void json_node_ref(tpprof_json *j, const tpprof_profile *p, const tpprof_autograd *g, int64_t node_id,
                          int64_t tensor) {
    const tpprof_gnode *node = tpprof_autograd_node(g, node_id);
    const tpprof_gnode *root = tpprof_autograd_root(g, node);
    tpprof_json_object_begin(j);
    tpprof_json_kv_int(j, "node", node->id);
    tpprof_json_kv_string(j, "name", node->name);
    tpprof_json_kv_int(j, "tensor", tensor);
    tpprof_json_kv_bool(j, "backward_ran", node->backward_ran);
    tpprof_json_kv_bool(j, "retain_graph", node->retained);
    tpprof_json_kv_string(j, "graph_alive", tpprof_gnode_why(node));
    tpprof_json_kv_int(j, "root", root->id);
    tpprof_json_kv_string(j, "root_name", root->name);
    tpprof_json_stack(j, p->stacks, node->created_stack);
    tpprof_json_object_end(j);
}

static void json_saved_by(tpprof_json *j, const tpprof_profile *p, const tpprof_tensors *t, const tpprof_autograd *g,
                          const tpprof_storage *s) {
    tpprof_json_key(j, "saved_by");
    tpprof_json_array_begin(j);
    const tpprof_gsaved *h[64];
    size_t n = tpprof_autograd_holders(g, s->id, h, 64);
    for (size_t i = 0; i < n && i < 64; i++)
        json_node_ref(j, p, g, h[i]->node_id, h[i]->tensor_id);
    tpprof_json_array_end(j);
    tpprof_json_key(j, "leaf_input_of");
    tpprof_json_array_begin(j);
    size_t non = 0;
    const size_t *on = tpprof_tensors_on(t, s->id, &non);
    for (size_t i = 0; i < non; i++) {
        const tpprof_tensor *x = &t->tensors[on[i]];
        const tpprof_gleaf *l[64];
        size_t nl = tpprof_tensor_alive(x) ? tpprof_autograd_leaf_holders(g, x->id, l, 64) : 0;
        for (size_t k = 0; k < nl && k < 64; k++)
            json_node_ref(j, p, g, l[k]->node_id, x->id);
    }
    tpprof_json_array_end(j);
    // The nodes holding a leaf whose .grad is on s ("tensor": that leaf).
    tpprof_json_key(j, "grad_of_leaf_input_of");
    tpprof_json_array_begin(j);
    for (size_t i = 0; i < non; i++) {
        const tpprof_tensor *x = &t->tensors[on[i]];
        const tpprof_tensor *owner = tpprof_tensor_alive(x) ? tpprof_autograd_grad_owner(g, t, x->id) : NULL;
        const tpprof_gleaf *l[64];
        size_t nl = owner ? tpprof_autograd_leaf_holders(g, owner->id, l, 64) : 0;
        for (size_t k = 0; k < nl && k < 64; k++)
            json_node_ref(j, p, g, l[k]->node_id, owner->id);
    }
    tpprof_json_array_end(j);
    tpprof_json_kv_bool(j, "only_graphs_keep", tpprof_autograd_keeps_alone(g, t, s));
}

// "graph_held" and "graphs_by_stack" (docs/report-json.md).
static void json_graph_held(tpprof_json *j, const tpprof_profile *p, const tpprof_tensors *t,
                            const tpprof_autograd *g) {
    size_t ng = 0, alive = 0;
    tpprof_graph_held held;
    tpprof_graph_group *groups = tpprof_autograd_groups(g, t, &ng, &held);
    for (size_t i = 0; i < g->nnodes; i++)
        alive += tpprof_gnode_alive(&g->nodes[i]);
    tpprof_json_key(j, "graph_held");
    tpprof_json_object_begin(j);
    tpprof_json_kv_bool(j, "recorded", g->present);
    tpprof_json_kv_int(j, "bytes", (int64_t)held.alone_bytes);
    tpprof_json_kv_int(j, "storages", (int64_t)held.alone_storages);
    tpprof_json_kv_int(j, "kept_bytes", (int64_t)held.bytes);
    tpprof_json_kv_int(j, "kept_storages", (int64_t)held.storages);
    tpprof_json_kv_int(j, "nodes_alive", (int64_t)alive);
    tpprof_json_kv_int(j, "nodes_created", g->created);
    tpprof_json_object_end(j);
    tpprof_json_key(j, "graphs_by_stack");
    tpprof_json_array_begin(j);
    for (size_t i = 0; i < ng; i++) {
        tpprof_json_object_begin(j);
        tpprof_json_kv_string(j, "root_name", groups[i].root_name);
        tpprof_json_kv_string(j, "graph_alive", group_why(&groups[i]));
        tpprof_json_kv_int(j, "graphs", (int64_t)groups[i].graphs);
        tpprof_json_kv_int(j, "nodes", (int64_t)groups[i].nodes);
        tpprof_json_kv_int(j, "storages", (int64_t)groups[i].alone_storages);
        tpprof_json_kv_int(j, "bytes", (int64_t)groups[i].alone_bytes);
        tpprof_json_kv_int(j, "kept_storages", (int64_t)groups[i].storages);
        tpprof_json_kv_int(j, "kept_bytes", (int64_t)groups[i].bytes);
        tpprof_json_stack(j, p->stacks, groups[i].stack_id);
        tpprof_json_object_end(j);
    }
    tpprof_json_array_end(j);
    free(groups);
}

void tpprof_report_storages_json(tpprof_json *j, const tpprof_profile *p, const tpprof_tensors *t) {
    tpprof_autograd ag;
    if (tpprof_autograd_load(p->db, &ag) != 0) {
        fprintf(stderr, "tpprof: the autograd graph is left out: %s\n", tpprof_error());
        memset(&ag, 0, sizeof ag);
    }
    tpprof_json_key(j, "storages");
    tpprof_json_array_begin(j);
    for (int pass = 0; pass < 2; pass++) {
        size_t n = 0;
        const tpprof_storage **v = alive_storages(t, pass == 1, &n);
        for (size_t i = 0; i < n; i++) {
            const tpprof_storage *s = v[i];
            tpprof_json_object_begin(j);
            tpprof_json_kv_int(j, "id", s->id);
            tpprof_json_kv_int(j, "nbytes", s->nbytes);
            tpprof_json_kv_string(j, "allocator", s->allocator);
            tpprof_json_kv_string(j, "device", s->device);
            tpprof_json_kv_int(j, "strong", s->strong);
            tpprof_json_kv_int(j, "weak", s->weak);
            tpprof_json_kv_bool(j, "data_released", !tpprof_storage_data_alive(s));
            tpprof_json_key(j, "tensors");
            tpprof_json_array_begin(j);
            size_t non = 0;
            const size_t *on = tpprof_tensors_on(t, s->id, &non);
            for (size_t k = 0; k < non; k++)
                if (tpprof_tensor_alive(&t->tensors[on[k]]))
                    json_tensor(j, p, t, &t->tensors[on[k]]);
            tpprof_json_array_end(j);
            json_refs(j, p, t, "unmatched_retains", s->id, false);
            json_refs(j, p, t, "weak_holders", s->id, true);
            json_saved_by(j, p, t, &ag, s);
            tpprof_json_stack(j, p->stacks, s->created_stack);
            tpprof_json_object_end(j);
        }
        free(v);
    }
    tpprof_json_array_end(j);
    size_t n = 0;
    tpprof_ref_group *g = tpprof_ref_groups(t, false, &n);
    json_groups(j, p, "unmatched_by_stack", g, n);
    g = tpprof_ref_groups(t, true, &n);
    json_groups(j, p, "weak_by_stack", g, n);
    g = tpprof_handle_groups(t, &n);
    json_groups(j, p, "handles_by_stack", g, n);
    tpprof_json_key(j, "pinned_views");
    tpprof_json_array_begin(j);
    json_pinned(j, p, t, false);
    json_pinned(j, p, t, true);
    tpprof_json_array_end(j);
    json_graph_held(j, p, t, &ag);
    tpprof_autograd_free(&ag);
}

// ---------------------------------------------------------------------------
// Leaks shown as the storages they back

int tpprof_backings_load(tpprof_db *db, const tpprof_tensors *t, tpprof_backing **out, size_t *n) {
    *out = NULL;
    *n = 0;
    if ((!t->attached && !t->nstorages) || !tpprof_db_has_table(db, "storages"))
        return 0;
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db->sql,
                           "SELECT s.id, b.stack_id, b.kind, b.reachability FROM storages s JOIN live_blocks b"
                           " ON b.address = s.block_address WHERE s.block_address IS NOT NULL"
                           " AND s.block_freed_ns IS NULL ORDER BY s.id",
                           -1, &st, NULL) != SQLITE_OK)
        return tpprof_db_error(db, "reading the storages' blocks");
    size_t cap = 0;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        // Only a storage whose data is alive at exit backs the block: a
        // caching allocator's segment (never freed) once held the data of
        // storages freed long before.
        const tpprof_storage *s = tpprof_tensors_storage(t, sqlite3_column_int64(st, 0));
        if (!s || !tpprof_storage_data_alive(s))
            continue;
        tpprof_backing *grown = tpprof_grow(*out, *n, &cap, sizeof *grown);
        if (!grown) {
            sqlite3_finalize(st);
            free(*out);
            *out = NULL;
            *n = 0;
            return -1;
        }
        *out = grown;
        (*out)[(*n)++] = (tpprof_backing){
            .storage_id = sqlite3_column_int64(st, 0),
            .stack_id = sqlite3_column_int64(st, 1),
            .kind = sqlite3_column_int64(st, 2),
            .reachability = tpprof_reach_of(sqlite3_column_int64(st, 3)),
        };
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) {
        free(*out);
        *out = NULL;
        *n = 0;
        return tpprof_db_error(db, "reading the storages' blocks");
    }
    return 0;
}

#define LEAK_STORAGES_SHOWN 3

void tpprof_report_leak_storages_text(const tpprof_profile *p, const tpprof_tensors *t, const tpprof_backing *b,
                                      size_t nb, const tpprof_leak *l, const char *indent) {
    size_t shown = 0, more = 0;
    char a[32], frame[512];
    for (size_t i = 0; i < nb; i++) {
        if (!tpprof_backing_in(&b[i], l))
            continue;
        const tpprof_storage *s = tpprof_tensors_storage(t, b[i].storage_id);
        if (!s)
            continue;
        if (shown == LEAK_STORAGES_SHOWN) {
            more++;
            continue;
        }
        shown++;
        printf("%sbacks storage #%lld (%s, %s): strong %lld", indent, (long long)s->id,
               tpprof_format_size((uint64_t)s->nbytes, a), s->device ? s->device : "?", (long long)s->strong);
        size_t non = 0, alive = 0;
        const size_t *on = tpprof_tensors_on(t, s->id, &non);
        const tpprof_tensor *kept = NULL; // the first live tensor a handle retain keeps
        int64_t nkept = 0, kept_at = 0;
        for (size_t k = 0; k < non; k++) {
            const tpprof_tensor *x = &t->tensors[on[k]];
            if (!tpprof_tensor_alive(x))
                continue;
            printf("%s #%lld %s", alive++ ? "," : "; tensors", (long long)x->id, x->sizes ? x->sizes : "?");
            if (x->base_id)
                printf(" (view of #%lld)", (long long)x->base_id);
            if (!kept && (nkept = tpprof_tensors_unmatched_handles(t, x->id, &kept_at)) > 0)
                kept = x;
        }
        if (!alive)
            printf("; no tensor");
        if (kept)
            printf("; #%lld kept by %lld tp_tensor_retain%s no release matched, in %s", (long long)kept->id,
                   (long long)nkept, nkept == 1 ? "" : "s",
                   tpprof_stacks_describe_caller(p->stacks, kept_at, frame, sizeof frame));
        int64_t unmatched = unmatched_of(t, s->id, false);
        if (unmatched > 0) {
            size_t nr = 0;
            const tpprof_ref *refs = tpprof_tensors_refs(t, s->id, &nr);
            for (size_t k = 0; k < nr; k++)
                if (tpprof_ref_unmatched(&refs[k], false)) {
                    printf("; %lld reference%s no release matched, the first a %s in %s", (long long)unmatched,
                           unmatched == 1 ? "" : "s", tpprof_ref_op_name(refs[k].op),
                           tpprof_stacks_describe_caller(p->stacks, refs[k].stack_id, frame, sizeof frame));
                    break;
                }
        }
        printf("\n");
    }
    if (more)
        printf("%s... and %zu more storage%s\n", indent, more, more == 1 ? "" : "s");
}

void tpprof_report_leak_storages_json(tpprof_json *j, const tpprof_backing *b, size_t nb, const tpprof_leak *l) {
    tpprof_json_key(j, "storages");
    tpprof_json_array_begin(j);
    for (size_t i = 0; i < nb; i++)
        if (tpprof_backing_in(&b[i], l))
            tpprof_json_int(j, b[i].storage_id);
    tpprof_json_array_end(j);
}

// ---------------------------------------------------------------------------
// DataPtr lifetimes

static int64_t mean(int64_t sum, int64_t count) { return count ? sum / count : 0; }

static int by_delay(const void *a, const void *b) {
    const tpprof_storage *x = *(tpprof_storage *const *)a, *y = *(tpprof_storage *const *)b;
    int64_t dx = x->block_freed_ns - x->data_released_ns, dy = y->block_freed_ns - y->data_released_ns;
    if (dx != dy)
        return dx > dy ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

void tpprof_report_lifetimes_text(const tpprof_tensors *t, size_t cap) {
    char a[32], b[32], c[32], d[32];
    printf("\nDataPtr lifetimes by allocator (live: created to deleter; delay: deleter to the "
           "block freed)\n");
    if (t->nlifetimes == 0) {
        printf("  (no storage released its data in this recording)\n");
        return;
    }
    printf("  %-12s  %8s  %8s  %10s  %10s  %10s  %10s\n", "allocator", "count", "timed", "live mean", "live max",
           "delay mean", "delay max");
    bool sampled = false;
    for (size_t i = 0; i < t->nlifetimes; i++) {
        const tpprof_lifetime *l = &t->lifetimes[i];
        sampled |= l->live_count < l->count;
        printf("  %-12s  %8lld  %8lld  %10s  %10s  %10s  %10s\n", l->allocator ? l->allocator : "?",
               (long long)l->count, (long long)l->live_count, tpprof_format_ns(mean(l->live_ns_sum, l->live_count), a),
               l->live_count ? tpprof_format_ns(l->live_ns_max, b) : "-",
               tpprof_format_ns(mean(l->delay_ns_sum, l->delay_count), c),
               tpprof_format_ns(l->delay_ns_max, d));
    }
    if (sampled)
        printf("  (live times of the timed storages: all of 64 KiB or more, each thread's first 64 of each "
               "allocator, 1 in 8 of the rest; TPPROF_LIFETIMES=all times every one)\n");
    // Per storage, where the recording kept the rows: the longest delays.
    const tpprof_storage **v = malloc((t->nstorages + 1) * sizeof *v);
    size_t n = 0;
    for (size_t i = 0; v && i < t->nstorages; i++) {
        const tpprof_storage *s = &t->storages[i];
        if (s->data_released_ns != TPPROF_NO_TIME && s->block_freed_ns != TPPROF_NO_TIME &&
            s->block_freed_ns > s->data_released_ns)
            v[n++] = s;
    }
    if (n) {
        qsort(v, n, sizeof *v, by_delay);
        size_t shown = cap && cap < n ? cap : n;
        printf("  longest release delays (of the storages the recording kept):\n");
        for (size_t i = 0; i < shown; i++)
            printf("    storage #%lld  %s  %s: block freed %s after the deleter ran\n",
                   (long long)v[i]->id, tpprof_format_size((uint64_t)v[i]->nbytes, a),
                   v[i]->allocator ? v[i]->allocator : "(borrowed)",
                   tpprof_format_ns(v[i]->block_freed_ns - v[i]->data_released_ns, b));
        if (shown < n)
            printf("    ... %zu more\n", n - shown);
    }
    free(v);
}

void tpprof_report_lifetimes_json(tpprof_json *j, const tpprof_tensors *t, size_t cap) {
    tpprof_json_key(j, "lifetimes");
    tpprof_json_array_begin(j);
    for (size_t i = 0; i < t->nlifetimes; i++) {
        const tpprof_lifetime *l = &t->lifetimes[i];
        tpprof_json_object_begin(j);
        tpprof_json_kv_string(j, "allocator", l->allocator);
        tpprof_json_kv_int(j, "count", l->count);
        tpprof_json_kv_int(j, "live_count", l->live_count);
        tpprof_json_kv_int(j, "live_ns_mean", mean(l->live_ns_sum, l->live_count));
        tpprof_json_kv_int(j, "live_ns_max", l->live_ns_max);
        tpprof_json_kv_int(j, "release_delay_ns_mean",
                           mean(l->delay_ns_sum, l->delay_count));
        tpprof_json_kv_int(j, "release_delay_ns_max", l->delay_ns_max);
        tpprof_json_kv_int(j, "release_delay_count", l->delay_count);
        // Per storage, where the recording kept the storage's row.
        tpprof_json_key(j, "storages");
        tpprof_json_array_begin(j);
        size_t shown = 0;
        for (size_t k = 0; k < t->nstorages && (!cap || shown < cap); k++) {
            const tpprof_storage *s = &t->storages[k];
            if (!s->allocator || !l->allocator || strcmp(s->allocator, l->allocator) != 0 ||
                s->data_released_ns == TPPROF_NO_TIME || s->created_ns == TPPROF_NO_TIME)
                continue;
            tpprof_json_object_begin_inline(j);
            tpprof_json_kv_int(j, "id", s->id);
            tpprof_json_kv_int(j, "nbytes", s->nbytes);
            tpprof_json_kv_int(j, "live_ns", s->data_released_ns - s->created_ns);
            tpprof_json_key(j, "release_delay_ns");
            if (s->block_freed_ns != TPPROF_NO_TIME)
                tpprof_json_int(j, s->block_freed_ns - s->data_released_ns);
            else
                tpprof_json_null(j);
            tpprof_json_object_end(j);
            shown++;
        }
        tpprof_json_array_end(j);
        tpprof_json_object_end(j);
    }
    tpprof_json_array_end(j);
}
