// report_diff.c: `tpprof report --diff OLD.db`: what changed against an
// older recording, stack by stack (stacks matched by their function names,
// diff.c), as text and as the JSON `diff` object (docs/report-json.md).
// Figures come from diff.c; this file only orders and prints.
#define _POSIX_C_SOURCE 200809L
#include "viewer.h"

#include <stdlib.h>
#include <string.h>

// The first `top` of n rows (top 0: all).
static size_t cap_of(const tpprof_report_diff *c, size_t n) {
    return c->top && c->top < n ? (size_t)c->top : n;
}

static int by_leaked_change(const void *a, const void *b) {
    const tpprof_delta *x = *(const tpprof_delta *const *)a, *y = *(const tpprof_delta *const *)b;
    int64_t dx = llabs(x->leaked_new - x->leaked_old), dy = llabs(y->leaked_new - y->leaked_old);
    if (dx != dy)
        return dx > dy ? -1 : 1;
    return strcmp(x->key, y->key);
}

static int by_bytes_change(const void *a, const void *b) {
    const tpprof_delta *x = *(const tpprof_delta *const *)a, *y = *(const tpprof_delta *const *)b;
    int64_t dx = llabs(x->bytes_new - x->bytes_old), dy = llabs(y->bytes_new - y->bytes_old);
    if (dx != dy)
        return dx > dy ? -1 : 1;
    return strcmp(x->key, y->key);
}

// Rows whose leaked (leaks true) or allocated bytes changed, largest change
// first. New array of borrowed pointers (caller frees); *m its length.
static const tpprof_delta **changed_rows(const tpprof_delta *d, size_t n, bool leaks, size_t *m) {
    const tpprof_delta **v = malloc((n + 1) * sizeof *v);
    *m = 0;
    if (!v)
        return NULL;
    for (size_t i = 0; i < n; i++)
        if (leaks ? d[i].leaked_new != d[i].leaked_old : d[i].bytes_new != d[i].bytes_old)
            v[(*m)++] = &d[i];
    if (*m)
        qsort(v, *m, sizeof *v, leaks ? by_leaked_change : by_bytes_change);
    return v;
}

static char *signed_size(int64_t v, char buf[40]) {
    char s[32];
    snprintf(buf, 40, "%c%s", v < 0 ? '-' : '+', tpprof_format_size(v < 0 ? (uint64_t)-v : (uint64_t)v, s));
    return buf;
}

static char *signed_count(int64_t v, char buf[40]) {
    char s[32];
    snprintf(buf, 40, "%c%s", v < 0 ? '-' : '+', tpprof_format_count(v < 0 ? (uint64_t)-v : (uint64_t)v, s));
    return buf;
}

// The run and stack to show for a row: the new run's when it has the stack.
static const tpprof_profile *row_stack(const tpprof_report_diff *c, const tpprof_delta *d, int64_t *stack) {
    *stack = d->stack_new >= 0 ? d->stack_new : d->stack_old;
    return d->stack_new >= 0 ? c->now : c->old;
}

void tpprof_report_diff_text(const tpprof_report_diff *c) {
    const tpprof_summary *a = &c->old->summary, *b = &c->now->summary;
    char x[40], y[40], z[40];
    printf("\nChanges against %s (stacks matched by function names)\n", c->baseline);
    printf("  %-12s  %12s  %12s  %12s\n", "", "baseline", "now", "change");
    printf("  %-12s  %12s  %12s  %12s\n", "allocations", tpprof_format_count(a->allocations, x),
           tpprof_format_count(b->allocations, y),
           signed_count((int64_t)b->allocations - (int64_t)a->allocations, z));
    struct { const char *name; uint64_t old, now; } rows[] = {
        {"allocated", a->total_bytes, b->total_bytes},
        {"peak", a->peak_bytes, b->peak_bytes},
        {"leaked", a->leaked_bytes, b->leaked_bytes},
        {"lost", a->lost_bytes, b->lost_bytes},
    };
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++)
        printf("  %-12s  %12s  %12s  %12s\n", rows[i].name, tpprof_format_size(rows[i].old, x),
               tpprof_format_size(rows[i].now, y),
               signed_size((int64_t)rows[i].now - (int64_t)rows[i].old, z));
    for (int pass = 0; pass < 2; pass++) {
        bool leaks = pass == 0;
        size_t m = 0;
        const tpprof_delta **v = changed_rows(c->rows, c->n, leaks, &m);
        printf("\n  %s by stack (%zu changed)\n",
               leaks ? "Leaked at exit" : "Allocated over the run", m);
        size_t shown = cap_of(c, m);
        for (size_t i = 0; i < shown; i++) {
            int64_t before = leaks ? v[i]->leaked_old : v[i]->bytes_old;
            int64_t after = leaks ? v[i]->leaked_new : v[i]->bytes_new;
            int64_t stack = 0;
            const tpprof_profile *p = row_stack(c, v[i], &stack);
            tpprof_frame f[2];
            size_t nf = tpprof_stacks_frames(p->stacks, stack, f, 2, NULL);
            char site[512] = "(no stack recorded)", caller[512] = "";
            if (nf > 0)
                tpprof_frame_format(&f[0], site, sizeof site);
            if (nf > 1)
                tpprof_frame_format(&f[1], caller, sizeof caller);
            printf("  %12s  %10s -> %-10s  %s%s%s%s\n", signed_size(after - before, z),
                   tpprof_format_size((uint64_t)before, x), tpprof_format_size((uint64_t)after, y),
                   site, nf > 1 ? "  < " : "", caller, v[i]->stack_new < 0 ? "  (gone)" : "");
        }
        if (shown < m)
            printf("  ... %zu more stacks\n", m - shown);
        free(v);
    }
}

static void json_pair(tpprof_json *j, const char *key, int64_t old, int64_t now) {
    tpprof_json_key(j, key);
    tpprof_json_object_begin_inline(j);
    tpprof_json_kv_int(j, "old", old);
    tpprof_json_kv_int(j, "new", now);
    tpprof_json_kv_int(j, "delta", now - old);
    tpprof_json_object_end(j);
}

void tpprof_report_diff_json(tpprof_json *j, const tpprof_report_diff *c) {
    const tpprof_summary *a = &c->old->summary, *b = &c->now->summary;
    tpprof_json_key(j, "diff");
    tpprof_json_object_begin(j);
    tpprof_json_kv_string(j, "baseline", c->baseline);
    tpprof_json_key(j, "summary");
    tpprof_json_object_begin(j);
    json_pair(j, "allocations", (int64_t)a->allocations, (int64_t)b->allocations);
    json_pair(j, "total_bytes", (int64_t)a->total_bytes, (int64_t)b->total_bytes);
    json_pair(j, "peak_bytes", (int64_t)a->peak_bytes, (int64_t)b->peak_bytes);
    json_pair(j, "leaked_bytes", (int64_t)a->leaked_bytes, (int64_t)b->leaked_bytes);
    json_pair(j, "lost_bytes", (int64_t)a->lost_bytes, (int64_t)b->lost_bytes);
    tpprof_json_object_end(j);
    for (int pass = 0; pass < 2; pass++) {
        bool leaks = pass == 0;
        size_t m = 0;
        const tpprof_delta **v = changed_rows(c->rows, c->n, leaks, &m);
        tpprof_json_key(j, leaks ? "leaks" : "sites");
        tpprof_json_array_begin(j);
        for (size_t i = 0; i < cap_of(c, m); i++) {
            const tpprof_delta *d = v[i];
            tpprof_json_object_begin(j);
            if (leaks) {
                tpprof_json_kv_uint(j, "bytes_old", (uint64_t)d->leaked_old);
                tpprof_json_kv_uint(j, "bytes_new", (uint64_t)d->leaked_new);
                tpprof_json_kv_int(j, "delta", d->leaked_new - d->leaked_old);
                tpprof_json_kv_uint(j, "lost_old", (uint64_t)d->lost_old);
                tpprof_json_kv_uint(j, "lost_new", (uint64_t)d->lost_new);
            } else {
                tpprof_json_kv_uint(j, "alloc_bytes_old", (uint64_t)d->bytes_old);
                tpprof_json_kv_uint(j, "alloc_bytes_new", (uint64_t)d->bytes_new);
                tpprof_json_kv_int(j, "delta", d->bytes_new - d->bytes_old);
                tpprof_json_kv_uint(j, "alloc_count_old", (uint64_t)d->calls_old);
                tpprof_json_kv_uint(j, "alloc_count_new", (uint64_t)d->calls_new);
            }
            tpprof_json_kv_bool(j, "in_new", d->stack_new >= 0);
            int64_t stack = 0;
            const tpprof_profile *p = row_stack(c, d, &stack);
            tpprof_json_stack(j, p->stacks, stack);
            tpprof_json_object_end(j);
        }
        tpprof_json_array_end(j);
        free(v);
    }
    tpprof_json_object_end(j);
}

int tpprof_report_diff_load(tpprof_report_diff *c, const tpprof_profile *now, const char *baseline, uint64_t top) {
    *c = (tpprof_report_diff){.now = now, .baseline = baseline, .top = top};
    c->old = tpprof_profile_load(baseline);
    if (!c->old || tpprof_diff(now, c->old, 0, &c->rows, &c->n) != 0)
        return -1;
    return 0;
}

void tpprof_report_diff_free(tpprof_report_diff *c) {
    tpprof_diff_free(c->rows, c->n);
    tpprof_profile_free(c->old);
    c->rows = NULL;
    c->old = NULL;
    c->n = 0;
}
