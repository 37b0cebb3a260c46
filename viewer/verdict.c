// verdict.c: the first thing a user reads about a recording, in the order
// memcheck and LeakSanitizer use: is anything definitely lost (the verdict),
// then what is still reachable at exit, and which library allocated most of
// that (OpenBLAS's buffers, a cache): still referenced, so not a leak.
//
// It decides nothing of its own: "lost" is exactly what `check`'s lost gate
// counts (tpprof_leak_counts_as_lost), so the verdict and the gate agree.
// This file only computes and formats; the commands print.
#define _POSIX_C_SOURCE 200809L
#include "viewer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// The C library, the loader, the C++ runtime and libgcc allocate on behalf
// of their callers (fopen, operator new, dlopen): a block they allocated is
// held by whoever called them.
static bool module_is_runtime_of_language(const char *module) {
    static const char *const prefixes[] = {"libc.so", "libc-", "ld-linux", "ld-", "libstdc++",
                                           "libgcc_s", "libm.so", "libpthread"};
    const char *base = tpprof_basename(module);
    for (size_t i = 0; i < sizeof prefixes / sizeof *prefixes; i++)
        if (strncmp(base, prefixes[i], strlen(prefixes[i])) == 0)
            return true;
    return false;
}

// The module (basename, borrowed) a leak group is charged to: its innermost
// frame outside the language runtimes and the tensor runtime (which
// allocates storages for its caller); NULL when no frame names one.
static const char *holder_of(const tpprof_profile *p, int64_t stack_id) {
    tpprof_frame f[64];
    size_t n = tpprof_stacks_frames(p->stacks, stack_id, f, sizeof f / sizeof *f, NULL);
    for (size_t i = 0; i < n; i++)
        if (f[i].module && !module_is_runtime_of_language(f[i].module) && !tpprof_frame_is_stdlib(&f[i]) &&
            !tpprof_frame_is_runtime(&f[i]))
            return tpprof_basename(f[i].module);
    for (size_t i = 0; i < n; i++)
        if (f[i].module)
            return tpprof_basename(f[i].module);
    return NULL;
}

void tpprof_verdict_of(const tpprof_profile *p, tpprof_verdict *v) {
    memset(v, 0, sizeof *v);
    const tpprof_summary *s = &p->summary;
    for (size_t i = 0; i < p->nleaks; i++) {
        const tpprof_leak *l = &p->leaks[i];
        if (tpprof_leak_counts_as_lost(p, l)) {
            v->lost_bytes += l->bytes;
            v->lost_count += l->count;
        } else if (l->reachability == TPPROF_REACH_UNSCANNED) {
            v->late_bytes += l->bytes;
            v->late_count += l->count;
        }
    }
    v->reachable_bytes = s->reachable_bytes;
    v->reachable_count = s->reachable_count;
    v->verdict = v->lost_bytes == 0 && v->lost_count == 0 ? TPPROF_VERDICT_NO_LEAK
                 : s->leak_scanned || s->lost_count ? TPPROF_VERDICT_LEAK
                                                    : TPPROF_VERDICT_NOT_SCANNED;
    // Reachable bytes by holding module: the few distinct modules of one
    // recording fit a small linear table.
    struct holder { const char *module; uint64_t bytes; } by[64];
    size_t nby = 0;
    for (size_t i = 0; i < p->nleaks; i++) {
        const tpprof_leak *l = &p->leaks[i];
        if (l->reachability != TPPROF_REACH_REACHABLE)
            continue;
        const char *m = holder_of(p, l->stack_id);
        if (!m)
            m = "(no stack recorded)";
        size_t k = 0;
        while (k < nby && strcmp(by[k].module, m) != 0)
            k++;
        if (k == nby) {
            if (nby == sizeof by / sizeof *by)
                continue;
            by[nby++] = (struct holder){m, 0};
        }
        by[k].bytes += l->bytes;
    }
    for (size_t k = 0; k < nby; k++)
        if (by[k].bytes > v->holder_bytes) {
            v->holder_bytes = by[k].bytes;
            snprintf(v->holder, sizeof v->holder, "%s", by[k].module);
        }
}

const char *tpprof_verdict_name(int verdict) {
    return verdict == TPPROF_VERDICT_NO_LEAK ? "no_leak"
           : verdict == TPPROF_VERDICT_LEAK  ? "leak"
                                             : "not_scanned";
}

char *tpprof_verdict_headline(const tpprof_verdict *v, char *buf, size_t size) {
    char a[32], b[32];
    tpprof_format_size(v->lost_bytes, a);
    tpprof_format_count(v->lost_count, b);
    switch (v->verdict) {
    case TPPROF_VERDICT_NO_LEAK:
        snprintf(buf, size, "no leak: 0 B lost");
        break;
    case TPPROF_VERDICT_LEAK:
        snprintf(buf, size, "LEAK: %s lost in %s block%s", a, b, v->lost_count == 1 ? "" : "s");
        break;
    default:
        snprintf(buf, size, "POSSIBLE LEAK: %s in %s block%s still allocated at exit, not scanned "
                            "(the run did not end by exit)", a, b, v->lost_count == 1 ? "" : "s");
    }
    return buf;
}

char *tpprof_verdict_reachable(const tpprof_verdict *v, char *buf, size_t size) {
    char a[32], b[32], c[32];
    if (v->reachable_count == 0) {
        snprintf(buf, size, "nothing still reachable at exit");
        return buf;
    }
    tpprof_format_size(v->reachable_bytes, a);
    tpprof_format_count(v->reachable_count, b);
    int n = snprintf(buf, size, "%s in %s block%s still reachable at exit (referenced, not lost)", a, b,
                     v->reachable_count == 1 ? "" : "s");
    if (v->holder[0] && n >= 0 && (size_t)n < size)
        snprintf(buf + n, size - (size_t)n, "; most of it allocated by %s: %s (%.0f%%)", v->holder,
                 tpprof_format_size(v->holder_bytes, c),
                 100.0 * (double)v->holder_bytes / (double)(v->reachable_bytes ? v->reachable_bytes : 1));
    return buf;
}

bool tpprof_verdict_graphs(const tpprof_profile *p, const tpprof_tensors *t, char *buf, size_t size) {
    buf[0] = 0;
    tpprof_autograd g;
    if (tpprof_autograd_load(p->db, &g) != 0)
        return false;
    uint64_t alive = 0, graphs = 0;
    for (size_t i = 0; i < g.nnodes; i++)
        if (tpprof_gnode_alive(&g.nodes[i])) {
            alive++;
            graphs += tpprof_autograd_root(&g, &g.nodes[i]) == &g.nodes[i];
        }
    if (!alive) {
        tpprof_autograd_free(&g);
        return false;
    }
    size_t ng = 0;
    tpprof_graph_held held;
    tpprof_graph_group *groups = tpprof_autograd_groups(&g, t, &ng, &held);
    char a[32], b[32], at[512];
    if (!ng) {
        snprintf(buf, size, "graphs: %llu autograd graph%s (%llu node%s) alive at exit, keeping no storage",
                 (unsigned long long)graphs, graphs == 1 ? "" : "s", (unsigned long long)alive, alive == 1 ? "" : "s");
    } else {
        // groups[0] holds the most graph-held bytes (then the most kept).
        const tpprof_graph_group *top = &groups[0];
        int n = snprintf(buf, size, "graphs: %s in %llu storage%s kept by %llu autograd graph%s (root %s made in %s); %s",
                         tpprof_format_size(held.alone_bytes, a), (unsigned long long)held.alone_storages,
                         held.alone_storages == 1 ? "" : "s", (unsigned long long)graphs, graphs == 1 ? "" : "s",
                         top->root_name, tpprof_stacks_describe_caller(p->stacks, top->stack_id, at, sizeof at),
                         !top->backward_ran ? "backward never ran" : top->retained ? "retain_graph" : "backward ran");
        // Storages the graphs keep that the program holds too: not graph-held.
        if (held.storages > held.alone_storages && n >= 0 && (size_t)n < size)
            snprintf(buf + n, size - (size_t)n, "; they also keep %s in %llu storage%s the program still holds",
                     tpprof_format_size(held.bytes - held.alone_bytes, b),
                     (unsigned long long)(held.storages - held.alone_storages),
                     held.storages - held.alone_storages == 1 ? "" : "s");
    }
    free(groups);
    tpprof_autograd_free(&g);
    return true;
}
