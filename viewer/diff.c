// diff.c: two recordings side by side, stack by stack, for `check --baseline`
// and `report --diff`.
//
// Stack ids mean nothing across runs, so stacks are matched by a key made of
// their function names, innermost first (the module file name stands in for
// a frame without one). Line numbers are left out on purpose: the baseline is
// usually an older build, and an edit above a function must not make all its
// stacks look new. Entries of both runs are sorted by key and merged, so the
// cost is O(n log n) in the number of sites and leak groups.
// This file computes; it does not print.
#define _POSIX_C_SOURCE 200809L
#include "viewer.h"

#include <stdlib.h>
#include <string.h>

// ---------------------------------------------------------------------------
// Keys

char *tpprof_stack_key(const tpprof_profile *p, int64_t stack_id, size_t max_frames) {
    static tpprof_frame frames[2048];
    size_t cap = max_frames && max_frames < 2048 ? max_frames : 2048;
    size_t n = tpprof_stacks_frames(p->stacks, stack_id, frames, cap, NULL);
    size_t size = 64, used = 0;
    for (size_t i = 0; i < n; i++)
        size += strlen(frames[i].function ? frames[i].function
                                          : tpprof_basename(frames[i].module)) + 4;
    char *key = malloc(size);
    if (!key)
        return NULL;
    key[0] = 0;
    for (size_t i = 0; i < n; i++) {
        const char *name = frames[i].function;
        int w = name ? snprintf(key + used, size - used, "%s|", name)
                     : snprintf(key + used, size - used, "?@%s|",
                                frames[i].module ? tpprof_basename(frames[i].module) : "");
        if (w < 0 || (size_t)w >= size - used)
            break;
        used += (size_t)w;
    }
    return key;
}

bool tpprof_leak_counts_as_lost(const tpprof_profile *p, const tpprof_leak *l) {
    return l->reachability == TPPROF_REACH_LOST ||
           (l->reachability == TPPROF_REACH_UNSCANNED && !p->summary.leak_scanned);
}

// ---------------------------------------------------------------------------
// Merge

typedef struct entry {
    char *key;
    int side; // 0 new, 1 old
    int64_t stack_id;
    int64_t leaked, lost, bytes, calls, peak;
} entry;

static int cmp_entry(const void *a, const void *b) {
    return strcmp(((const entry *)a)->key, ((const entry *)b)->key);
}

static int push(entry **v, size_t *n, size_t *cap, const tpprof_profile *p, int side,
                int64_t stack_id, size_t key_frames, entry values) {
    entry *grown = tpprof_grow(*v, *n, cap, sizeof *grown);
    if (!grown)
        return -1;
    *v = grown;
    values.key = tpprof_stack_key(p, stack_id, key_frames);
    if (!values.key)
        return tpprof_error_set("out of memory");
    values.side = side;
    values.stack_id = stack_id;
    (*v)[(*n)++] = values;
    return 0;
}

static int collect(entry **v, size_t *n, size_t *cap, const tpprof_profile *p, int side,
                   size_t key_frames) {
    for (size_t i = 0; i < p->nleaks; i++) {
        const tpprof_leak *l = &p->leaks[i];
        entry e = {.leaked = (int64_t)l->bytes,
                   .lost = tpprof_leak_counts_as_lost(p, l) ? (int64_t)l->bytes : 0};
        if (push(v, n, cap, p, side, l->stack_id, key_frames, e) != 0)
            return -1;
    }
    for (size_t i = 0; i < p->nsites; i++) {
        const tpprof_site *s = &p->sites[i];
        entry e = {.bytes = (int64_t)s->alloc_bytes,
                   .calls = (int64_t)s->alloc_count,
                   .peak = (int64_t)s->peak_bytes};
        if (push(v, n, cap, p, side, s->stack_id, key_frames, e) != 0)
            return -1;
    }
    return 0;
}

int tpprof_diff(const tpprof_profile *now, const tpprof_profile *old, size_t key_frames,
                tpprof_delta **out, size_t *count) {
    entry *v = NULL;
    size_t n = 0, cap = 0;
    *out = NULL;
    *count = 0;
    int rc = collect(&v, &n, &cap, now, 0, key_frames);
    if (rc == 0)
        rc = collect(&v, &n, &cap, old, 1, key_frames);
    tpprof_delta *d = rc == 0 ? calloc(n + 1, sizeof *d) : NULL;
    if (rc == 0 && !d)
        rc = tpprof_error_set("out of memory");
    if (rc == 0 && n)
        qsort(v, n, sizeof *v, cmp_entry);
    size_t m = 0;
    for (size_t i = 0; rc == 0 && i < n;) {
        tpprof_delta *x = &d[m++];
        x->key = v[i].key;
        v[i].key = NULL; // moved
        x->stack_new = x->stack_old = -1;
        size_t j = i;
        for (; j < n && (j == i || strcmp(v[j].key, x->key) == 0); j++) {
            const entry *e = &v[j];
            int64_t *side[5] = {e->side ? &x->leaked_old : &x->leaked_new,
                                e->side ? &x->lost_old : &x->lost_new,
                                e->side ? &x->bytes_old : &x->bytes_new,
                                e->side ? &x->calls_old : &x->calls_new,
                                e->side ? &x->peak_old : &x->peak_new};
            *side[0] += e->leaked;
            *side[1] += e->lost;
            *side[2] += e->bytes;
            *side[3] += e->calls;
            *side[4] += e->peak;
            int64_t *stack = e->side ? &x->stack_old : &x->stack_new;
            if (*stack < 0)
                *stack = e->stack_id;
        }
        i = j;
    }
    for (size_t i = 0; i < n; i++)
        free(v[i].key);
    free(v);
    if (rc != 0) {
        tpprof_diff_free(d, m);
        return -1;
    }
    *out = d;
    *count = m;
    return 0;
}

void tpprof_diff_free(tpprof_delta *d, size_t n) {
    for (size_t i = 0; d && i < n; i++)
        free(d[i].key);
    free(d);
}
