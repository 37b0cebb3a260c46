// html_flame.c: the HTML report's flame graph data: every site's and leak
// group's stack merged into one tree of function names (outermost frame at
// the root, as flamegraph.pl folds them), each node carrying its inclusive
// bytes allocated, calls, bytes live at the peak, bytes live at exit and, of
// those, bytes lost.
//
// A big recording has hundreds of thousands of nodes, most of them far too
// narrow to draw: nodes under 1/10000 of every metric's total are left out
// (their values stay in their parent's), and the threshold doubles until at
// most FLAME_MAX_NODES remain, so the page stays small whatever the run.
// Writes JSON only; html/report.js draws it.
#define _POSIX_C_SOURCE 200809L
#include "viewer.h"

#include <stdlib.h>
#include <string.h>

#define FLAME_MAX_NODES 20000
#define FLAME_FRAMES 2048
enum { M_BYTES, M_CALLS, M_PEAK, M_LEAKED, M_LOST, M_COUNT };
static const char *const metric_names[M_COUNT] = {"bytes", "calls", "peak", "leaked", "lost"};

typedef struct flame {
    // Nodes: a parent always comes before its children (index 0: the root).
    int32_t *parent, *name;
    uint64_t *v[M_COUNT];
    size_t n, cap;
    // (parent, name) -> node + 1 (0: empty), linear probing.
    uint64_t *keys;
    uint32_t *slots;
    size_t hcap;
    // Interned names: strings and a hash index of them.
    char **names;
    size_t nnames, names_cap;
    uint32_t *name_slots; // name id + 1
    size_t ncap;
} flame;

static uint64_t mix(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return x;
}

static uint64_t str_hash(const char *s) {
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

static int intern(flame *f, const char *s) {
    if (f->nnames * 2 >= f->ncap) {
        size_t cap = f->ncap ? f->ncap * 2 : 1024;
        uint32_t *slots = calloc(cap, sizeof *slots);
        if (!slots)
            return -1;
        for (size_t i = 0; i < f->nnames; i++) {
            size_t h = str_hash(f->names[i]) & (cap - 1);
            while (slots[h])
                h = (h + 1) & (cap - 1);
            slots[h] = (uint32_t)i + 1;
        }
        free(f->name_slots);
        f->name_slots = slots;
        f->ncap = cap;
    }
    size_t h = str_hash(s) & (f->ncap - 1);
    while (f->name_slots[h]) {
        if (strcmp(f->names[f->name_slots[h] - 1], s) == 0)
            return (int)f->name_slots[h] - 1;
        h = (h + 1) & (f->ncap - 1);
    }
    char **v = tpprof_grow(f->names, f->nnames, &f->names_cap, sizeof *v);
    if (!v)
        return -1;
    f->names = v;
    if (!(f->names[f->nnames] = strdup(s)))
        return -1;
    f->name_slots[h] = (uint32_t)f->nnames + 1;
    return (int)f->nnames++;
}

static int add_node(flame *f, int32_t parent, int32_t name) {
    if (f->n == f->cap) {
        size_t cap = f->cap ? f->cap * 2 : 1024;
        int32_t *p = realloc(f->parent, cap * sizeof *p);
        if (!p)
            return -1;
        f->parent = p;
        int32_t *nm = realloc(f->name, cap * sizeof *nm);
        if (!nm)
            return -1;
        f->name = nm;
        for (int m = 0; m < M_COUNT; m++) {
            uint64_t *v = realloc(f->v[m], cap * sizeof *v);
            if (!v)
                return -1;
            f->v[m] = v;
        }
        f->cap = cap;
    }
    f->parent[f->n] = parent;
    f->name[f->n] = name;
    for (int m = 0; m < M_COUNT; m++)
        f->v[m][f->n] = 0;
    return (int)f->n++;
}

static int child(flame *f, int32_t parent, int32_t name) {
    if (f->n * 2 >= f->hcap) {
        size_t cap = f->hcap ? f->hcap * 2 : 4096;
        uint64_t *keys = calloc(cap, sizeof *keys);
        uint32_t *slots = calloc(cap, sizeof *slots);
        if (!keys || !slots) {
            free(keys);
            free(slots);
            return -1;
        }
        for (size_t i = 1; i < f->n; i++) {
            uint64_t k = (uint64_t)(uint32_t)f->parent[i] << 32 | (uint32_t)f->name[i];
            size_t h = mix(k) & (cap - 1);
            while (slots[h])
                h = (h + 1) & (cap - 1);
            keys[h] = k;
            slots[h] = (uint32_t)i + 1;
        }
        free(f->keys);
        free(f->slots);
        f->keys = keys;
        f->slots = slots;
        f->hcap = cap;
    }
    uint64_t k = (uint64_t)(uint32_t)parent << 32 | (uint32_t)name;
    size_t h = mix(k) & (f->hcap - 1);
    while (f->slots[h]) {
        if (f->keys[h] == k)
            return (int)f->slots[h] - 1;
        h = (h + 1) & (f->hcap - 1);
    }
    int node = add_node(f, parent, name);
    if (node < 0)
        return -1;
    f->keys[h] = k;
    f->slots[h] = (uint32_t)node + 1;
    return node;
}

// A frame's label: its function, else [module], else its address.
static const char *label(const tpprof_frame *fr, char *buf, size_t size) {
    if (fr->function)
        return fr->function;
    if (fr->module)
        snprintf(buf, size, "[%s]", tpprof_basename(fr->module));
    else
        snprintf(buf, size, "0x%llx", (unsigned long long)fr->ip);
    return buf;
}

static int add_stack(flame *f, const tpprof_profile *p, int64_t stack_id, const uint64_t v[M_COUNT]) {
    static tpprof_frame frames[FLAME_FRAMES];
    size_t n = tpprof_stacks_frames(p->stacks, stack_id, frames, FLAME_FRAMES, NULL);
    int32_t node = 0;
    for (int m = 0; m < M_COUNT; m++)
        f->v[m][0] += v[m];
    if (n == 0) {
        int nm = intern(f, "[no stack recorded]");
        node = nm < 0 ? -1 : child(f, 0, nm);
        if (node < 0)
            return -1;
        for (int m = 0; m < M_COUNT; m++)
            f->v[m][node] += v[m];
        return 0;
    }
    for (size_t i = n; i-- > 0;) {
        char buf[64];
        int nm = intern(f, label(&frames[i], buf, sizeof buf));
        if (nm < 0 || (node = child(f, node, nm)) < 0)
            return -1;
        for (int m = 0; m < M_COUNT; m++)
            f->v[m][node] += v[m];
    }
    return 0;
}

static void flame_free(flame *f) {
    free(f->parent);
    free(f->name);
    for (int m = 0; m < M_COUNT; m++)
        free(f->v[m]);
    free(f->keys);
    free(f->slots);
    for (size_t i = 0; i < f->nnames; i++)
        free(f->names[i]);
    free(f->names);
    free(f->name_slots);
}

// Whether node i is wide enough to keep at threshold 1/denominator of some
// metric's total.
static bool wide(const flame *f, size_t i, uint64_t denominator) {
    for (int m = 0; m < M_COUNT; m++)
        if (f->v[m][i] > 0 && f->v[m][i] * denominator >= f->v[m][0])
            return true;
    return false;
}

int tpprof_html_flame(FILE *out, const tpprof_profile *p) {
    flame f = {0};
    int rc = -1;
    if (add_node(&f, -1, 0) < 0 || intern(&f, "all") != 0)
        goto done;
    for (size_t i = 0; i < p->nsites; i++) {
        const tpprof_site *s = &p->sites[i];
        if (p->reserved_kind && s->kind == p->reserved_kind)
            continue; // address space, not memory
        uint64_t v[M_COUNT] = {s->alloc_bytes, s->alloc_count, s->peak_bytes, 0, 0};
        if (add_stack(&f, p, s->stack_id, v) != 0)
            goto done;
    }
    for (size_t i = 0; i < p->nleaks; i++) {
        const tpprof_leak *l = &p->leaks[i];
        uint64_t v[M_COUNT] = {0, 0, 0, l->bytes, tpprof_leak_counts_as_lost(p, l) ? l->bytes : 0};
        if (add_stack(&f, p, l->stack_id, v) != 0)
            goto done;
    }
    // Choose the threshold, then number the kept nodes (parents come first,
    // and a parent is at least as wide as its child, so every kept node's
    // parent is kept).
    uint64_t denominator = 10000;
    size_t kept = 0;
    for (;;) {
        kept = 1;
        for (size_t i = 1; i < f.n; i++)
            kept += wide(&f, i, denominator);
        if (kept <= FLAME_MAX_NODES || denominator < 2)
            break;
        denominator /= 2;
    }
    int32_t *index = malloc(f.n * sizeof *index);
    if (!index)
        goto done;
    // Only the names of kept nodes are written, renumbered in order of use.
    int32_t *name_index = malloc(f.nnames * sizeof *name_index);
    if (!name_index) {
        free(index);
        goto done;
    }
    for (size_t i = 0; i < f.nnames; i++)
        name_index[i] = -1;
    size_t k = 0, names = 0;
    fprintf(out, "{\"total_nodes\":%zu,\"names\":[", f.n);
    for (size_t i = 0; i < f.n; i++) {
        index[i] = i == 0 || wide(&f, i, denominator) ? (int32_t)k++ : -1;
        if (index[i] >= 0 && name_index[f.name[i]] < 0) {
            name_index[f.name[i]] = (int32_t)names;
            if (names++)
                fputc(',', out);
            tpprof_html_json_string(out, f.names[f.name[i]]);
        }
    }
    fputs("],\"parent\":[", out);
    for (size_t i = 0, w = 0; i < f.n; i++)
        if (index[i] >= 0)
            fprintf(out, w++ ? ",%d" : "%d", i == 0 ? -1 : index[f.parent[i]]);
    fputs("],\"name\":[", out);
    for (size_t i = 0, w = 0; i < f.n; i++)
        if (index[i] >= 0)
            fprintf(out, w++ ? ",%d" : "%d", name_index[f.name[i]]);
    fputs("],\"v\":{", out);
    for (int m = 0; m < M_COUNT; m++) {
        fprintf(out, "%s\"%s\":[", m ? "," : "", metric_names[m]);
        for (size_t i = 0, w = 0; i < f.n; i++)
            if (index[i] >= 0)
                fprintf(out, w++ ? ",%llu" : "%llu", (unsigned long long)f.v[m][i]);
        fputc(']', out);
    }
    fputs("}}", out);
    free(index);
    free(name_index);
    rc = 0;
done:
    if (rc != 0)
        tpprof_error_set("out of memory building the flame graph");
    flame_free(&f);
    return rc;
}
