// gates.c: check's gates, in one table that `tpprof check` and `tpprof run`
// both parse and evaluate.
//
// A gate compares one figure of a recording with a limit (--max-lost-bytes
// N and the like) and, when it fails, names what to look at (the worst
// stack). Adding a gate is one row of `defs` below and its measure
// function: check, run (--max-..., --check "GATES"), their help texts and
// the JUnit names all come from the row. A row marked per_device takes
// [DEV:]N and may be given once per device and once for all together, each
// a gate of its own (a tpprof_gate_choice). Around the table: the
// recording must be whole (gaps.c) before a gate counts, --baseline
// compares three figures with an older recording, and suppressions
// (suppressions.c) take known leaks out before any leak gate sees them.
//
// This file prints only notes and warnings on stderr (with the caller's
// prefix; bad device frees and failed device calls are notes, never a
// failure); the commands print the gates' lines.
#define _POSIX_C_SOURCE 200809L
#include "viewer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

// ---------------------------------------------------------------------------
// Measures: the figure a gate compares, and what to name when it fails.

// What the lost gate measures (see tpprof_leak_counts_as_lost).
static uint64_t lost_bytes(const tpprof_profile *p) {
    const tpprof_summary *s = &p->summary;
    return s->lost_bytes + (s->leak_scanned ? 0 : s->unscanned_bytes);
}

// The costliest group of live blocks, restricted to those counted lost or not.
static const tpprof_leak *worst_leak(const tpprof_profile *p, bool lost_only) {
    const tpprof_leak *worst = NULL;
    for (size_t i = 0; i < p->nleaks; i++) {
        const tpprof_leak *l = &p->leaks[i];
        if (lost_only && !tpprof_leak_counts_as_lost(p, l))
            continue;
        if (!worst || l->bytes > worst->bytes)
            worst = l;
    }
    return worst;
}

static void where(const tpprof_profile *p, int64_t stack_id, uint64_t bytes, char *out, size_t size) {
    char frame[512];
    snprintf(out, size, ": %llu B in %s", (unsigned long long)bytes,
             tpprof_stacks_describe(p->stacks, stack_id, frame, sizeof frame));
}

static int measure_lost(const tpprof_gate_subject *subj, int32_t device, uint64_t *value, char *detail, size_t size) {
    (void)device;
    const tpprof_profile *p = subj->p;
    const tpprof_leak *w = worst_leak(p, true);
    if (w)
        where(p, w->stack_id, w->bytes, detail, size);
    *value = lost_bytes(p);
    return 0;
}

static int measure_leaked(const tpprof_gate_subject *subj, int32_t device, uint64_t *value, char *detail, size_t size) {
    (void)device;
    const tpprof_profile *p = subj->p;
    const tpprof_leak *w = worst_leak(p, false);
    if (w)
        where(p, w->stack_id, w->bytes, detail, size);
    *value = p->summary.leaked_bytes;
    return 0;
}

static int measure_peak(const tpprof_gate_subject *subj, int32_t device, uint64_t *value, char *detail, size_t size) {
    (void)device;
    const tpprof_profile *p = subj->p;
    const tpprof_site *w = NULL;
    for (size_t i = 0; i < p->nsites; i++)
        if (p->sites[i].peak_bytes && (!w || p->sites[i].peak_bytes > w->peak_bytes))
            w = &p->sites[i];
    if (w)
        where(p, w->stack_id, w->peak_bytes, detail, size);
    *value = p->summary.peak_bytes;
    return 0;
}

// " (a view of #N)" for a view, else "".
static const char *view_of(const tpprof_tensor *x, char *out, size_t size) {
    out[0] = 0;
    if (x->base_id && x->base_id != x->id)
        snprintf(out, size, " (a view of #%lld)", (long long)x->base_id);
    return out;
}

// Storages whose struct is alive at exit; the detail names the stack that
// took the most unmatched references, else the handle retains that keep
// tensors, else a tensor alive at exit that holds them (a view or an alias:
// the one the run summary names) and where it was made, else the biggest
// storage's creation.
static int measure_storages(const tpprof_gate_subject *subj, int32_t device, uint64_t *value, char *detail,
                            size_t size) {
    (void)device;
    const tpprof_profile *p = subj->p;
    tpprof_tensors t;
    if (tpprof_tensors_load(p->db, &t) != 0)
        return -1;
    uint64_t alive = 0;
    const tpprof_storage *biggest = NULL;
    for (size_t i = 0; i < t.nstorages; i++)
        if (tpprof_storage_alive(&t.storages[i])) {
            alive++;
            if (!biggest || t.storages[i].nbytes > biggest->nbytes)
                biggest = &t.storages[i];
        }
    char frame[512], base[64];
    uint64_t held = 0;
    const tpprof_tensor *lead = NULL;
    size_t ng = 0;
    tpprof_ref_group *groups = tpprof_ref_groups(&t, false, &ng);
    if (ng == 0) {
        free(groups);
        groups = tpprof_ref_groups(&t, true, &ng);
    }
    // Else the handle retains that keep tensors (and so their storages), else the biggest.
    size_t nh = 0;
    tpprof_ref_group *handles = ng ? NULL : tpprof_handle_groups(&t, &nh);
    if (ng)
        snprintf(detail, size, ": %llu storage%s held by a %s no release matched in %s",
                 (unsigned long long)groups[0].storages, groups[0].storages == 1 ? "" : "s",
                 tpprof_ref_op_name(groups[0].op),
                 tpprof_stacks_describe_caller(p->stacks, groups[0].stack_id, frame, sizeof frame));
    else if (nh)
        snprintf(detail, size,
                 ": %llu storage%s held by tensors a tp_tensor_retain no release matched keeps, in %s",
                 (unsigned long long)handles[0].storages, handles[0].storages == 1 ? "" : "s",
                 tpprof_stacks_describe_caller(p->stacks, handles[0].stack_id, frame, sizeof frame));
    else if ((lead = tpprof_tensors_holder_lead(&t, &held)) != NULL) // a view or alias holds them
        snprintf(detail, size, ": %llu storage%s held by tensors alive at exit, such as #%lld %s%s created in %s",
                 (unsigned long long)held, held == 1 ? "" : "s", (long long)lead->id, lead->sizes ? lead->sizes : "?",
                 view_of(lead, base, sizeof base),
                 tpprof_stacks_describe_caller(p->stacks, lead->created_stack, frame, sizeof frame));
    else if (biggest)
        snprintf(detail, size, ": the biggest, %lld B, created in %s", (long long)biggest->nbytes,
                 tpprof_stacks_describe_caller(p->stacks, biggest->created_stack, frame, sizeof frame));
    free(groups);
    free(handles);
    tpprof_tensors_free(&t);
    *value = alive;
    return 0;
}

// Inactive split bytes of every allocator at exit; the detail names the
// allocator with the most.
static int measure_split(const tpprof_gate_subject *subj, int32_t device, uint64_t *value, char *detail, size_t size) {
    (void)device;
    const tpprof_profile *p = subj->p;
    tpprof_alloc_state *s = NULL;
    size_t n = 0;
    if (tpprof_alloc_load(p->db, &s, &n) != 0)
        return -1;
    uint64_t total = 0, worst = 0;
    const char *worst_name = NULL;
    for (size_t i = 0; i < n; i++) {
        if (tpprof_alloc_replay(&s[i], s[i].nevents) != 0) {
            tpprof_alloc_states_free(s, n);
            return -1;
        }
        tpprof_frag f;
        tpprof_alloc_figures(&s[i], &f);
        total += (uint64_t)f.inactive_split_bytes;
        if (!worst_name || (uint64_t)f.inactive_split_bytes > worst) {
            worst = (uint64_t)f.inactive_split_bytes;
            worst_name = s[i].allocator;
        }
    }
    if (worst_name)
        snprintf(detail, size, ": %llu B in allocator '%s' (tpprof fragmentation shows the blocks)",
                 (unsigned long long)worst, worst_name);
    *value = total;
    tpprof_alloc_states_free(s, n);
    return 0;
}

// Graph-held bytes: the storages alive at exit that only autograd graphs
// alive then keep (autograd.c: they would go with the graphs); the detail
// names the biggest group: the graphs' root, the stack that made it, why
// they are alive.
static int measure_graph(const tpprof_gate_subject *subj, int32_t device, uint64_t *value, char *detail, size_t size) {
    (void)device;
    const tpprof_profile *p = subj->p;
    tpprof_tensors t;
    if (tpprof_tensors_load(p->db, &t) != 0)
        return -1;
    tpprof_autograd ag;
    if (tpprof_autograd_load(p->db, &ag) != 0) {
        tpprof_tensors_free(&t);
        return -1;
    }
    size_t ng = 0;
    tpprof_graph_held held;
    tpprof_graph_group *groups = tpprof_autograd_groups(&ag, &t, &ng, &held);
    char frame[512];
    if (ng && groups[0].alone_bytes)
        snprintf(detail, size, ": %llu storage%s (%llu B) kept by %llu graph%s whose root %s was made in %s; "
                 "graph alive: %s",
                 (unsigned long long)groups[0].alone_storages, groups[0].alone_storages == 1 ? "" : "s",
                 (unsigned long long)groups[0].alone_bytes, (unsigned long long)groups[0].graphs,
                 groups[0].graphs == 1 ? "" : "s", groups[0].root_name,
                 tpprof_stacks_describe_caller(p->stacks, groups[0].stack_id, frame, sizeof frame),
                 !groups[0].backward_ran ? "backward never ran" : groups[0].retained ? "retain_graph" : "backward ran");
    *value = held.alone_bytes;
    free(groups);
    tpprof_autograd_free(&ag);
    tpprof_tensors_free(&t);
    return 0;
}

// Device (CUDA) memory of one device, or of every device together
// (device.c); the detail names the biggest leak group of device memory on
// it, or the biggest site live at its peak, and the group's API.
static int measure_device(const tpprof_gate_subject *subj, int32_t device, bool peak, uint64_t *value, char *detail,
                          size_t size) {
    const tpprof_devices *d = subj->devices;
    if (!d->recorded)
        return 1;
    const tpprof_dev_stats *st = tpprof_devices_find(d, device);
    const tpprof_dev_group *w = NULL;
    if (!peak) {
        for (size_t j = 0; j < d->nleaks && !w; j++) // sorted by bytes
            if (d->leaks[j].cls == TPPROF_DEV_MEMORY && (device == TPPROF_DEV_ALL || d->leaks[j].device == device))
                w = &d->leaks[j];
    } else if (st && st->npeak_sites) {
        w = &st->peak_sites[0];
    }
    if (w) {
        where(subj->p, w->stack_id, w->bytes, detail, size);
        size_t len = strlen(detail);
        if (w->api && len < size)
            snprintf(detail + len, size - len, " (%s)", w->api);
    }
    *value = !st ? 0 : peak ? st->peak_bytes : st->leaked_bytes;
    return 0;
}

static int measure_device_leaked(const tpprof_gate_subject *subj, int32_t device, uint64_t *value, char *detail,
                                 size_t size) {
    return measure_device(subj, device, false, value, detail, size);
}

static int measure_device_peak(const tpprof_gate_subject *subj, int32_t device, uint64_t *value, char *detail,
                               size_t size) {
    return measure_device(subj, device, true, value, detail, size);
}

// ---------------------------------------------------------------------------
// The table. One row per gate, in the order their lines are printed.

static const tpprof_gate_def defs[] = {
    {.option = "--max-lost-bytes", .name = "max-lost-bytes", .what = "lost bytes", .measure = measure_lost,
     .help = "blocks unreachable at exit (default gate: 0 when no gate is given)"},
    {.option = "--max-leaked-bytes", .name = "max-leaked-bytes", .what = "leaked bytes", .measure = measure_leaked,
     .help = "all blocks still allocated at exit, reachable or not"},
    {.option = "--max-peak-bytes", .name = "max-peak-bytes", .what = "peak bytes", .measure = measure_peak,
     .help = "the peak of heap + anonymous mmap bytes"},
    {.option = "--max-leaked-storages", .name = "max-leaked-storages", .what = "leaked storages", .count = true,
     .measure = measure_storages, .help = "tensor storages whose struct is still alive at exit"},
    {.option = "--max-inactive-split-bytes", .name = "max-inactive-split-bytes", .what = "inactive split bytes",
     .measure = measure_split,
     .help = "free bytes stranded inside partly used segments of the caching\n"
             "                        allocators at exit (replayed from allocator_events)"},
    {.option = "--max-graph-held-bytes", .name = "max-graph-held-bytes", .what = "graph-held bytes",
     .measure = measure_graph,
     .help = "tensor storages alive at exit that only autograd graphs alive\n"
             "                        then keep (saved for a backward that never ran, or kept by\n"
             "                        retain_graph; not a weight the program still holds)"},
    {.option = "--max-device-leaked-bytes", .name = "max-device-leaked-bytes", .what = "leaked bytes",
     .per_device = true, .unrecorded = " (device memory was not recorded)", .measure = measure_device_leaked,
     .help = "device (CUDA) memory still allocated at exit or ended by a\n"
             "                        device reset, over all devices, or on device DEV (0:1G);\n"
             "                        repeatable (pinned host memory and VMM reservations not counted)"},
    {.option = "--max-device-peak-bytes", .name = "max-device-peak-bytes", .what = "peak bytes",
     .per_device = true, .unrecorded = " (device memory was not recorded)", .measure = measure_device_peak,
     .help = "the most device memory live at once, over all devices together,\n"
             "                        or on device DEV; repeatable"},
};

_Static_assert(sizeof defs / sizeof *defs <= TPPROF_GATES_MAX, "raise TPPROF_GATES_MAX");

const tpprof_gate_def *tpprof_gate_defs(size_t *n) {
    *n = sizeof defs / sizeof *defs;
    return defs;
}

// ---------------------------------------------------------------------------
// Options

void tpprof_gates_help(FILE *out) {
    for (size_t k = 0; k < sizeof defs / sizeof *defs; k++) {
        char head[64];
        snprintf(head, sizeof head, "%s %s", defs[k].option, defs[k].per_device ? "[DEV:]N" : "N");
        if (strlen(head) < 22)
            fprintf(out, "  %-22s%s\n", head, defs[k].help);
        else
            fprintf(out, "  %s\n                        %s\n", head, defs[k].help);
    }
    fputs("  --baseline OLD.db     compare leaked, lost and peak bytes with an older recording:\n"
          "  --max-growth PCT      ... each may grow by at most PCT percent (default 0)\n"
          "  --suppressions FILE   leave out of the leak gates the leaks a LeakSanitizer\n"
          "                        suppression file names (leak:PATTERN lines; repeatable)\n"
          "  --suppress PATTERN    the same for the blocks whose stack has a frame whose function\n"
          "                        or module file name matches the shell glob PATTERN\n"
          "                        (repeatable; e.g. 'g_type_*', 'libfontconfig.so*')\n"
          "  --allow-incomplete    what the recording is missing is a warning on stderr, not a\n"
          "                        failure (a recording with nothing in it still fails)\n"
          "\n"
          "Sizes take suffixes: 4096, 4k, 10M, 1G (powers of 1024). When no reachability scan\n"
          "ran (the recording is incomplete, or the program exec'd or died of a signal), the\n"
          "lost gate counts unscanned blocks as lost.\n",
          out);
}

// Choose row k with this device and limit: a row (and device) already
// chosen takes the new limit, else the choice goes after the last of its
// row or of an earlier one, so that the list is in the table's order and
// a row's in the order given. 0, or -1 + error.
static int choose(tpprof_gate_options *o, size_t k, int32_t device, uint64_t limit) {
    size_t at = 0;
    for (size_t c = 0; c < o->nchosen; c++) {
        if (o->chosen[c].def == (int)k && o->chosen[c].device == device) {
            o->chosen[c].limit = limit;
            return 0;
        }
        if (o->chosen[c].def <= (int)k)
            at = c + 1;
    }
    if (o->nchosen == TPPROF_GATES_MAX)
        return tpprof_error_set("%s: more than %d gates", defs[k].option, TPPROF_GATES_MAX);
    memmove(&o->chosen[at + 1], &o->chosen[at], (o->nchosen - at) * sizeof *o->chosen);
    o->nchosen++;
    tpprof_gate_choice *c = &o->chosen[at];
    *c = (tpprof_gate_choice){.def = (int)k, .device = device, .limit = limit};
    if (device == TPPROF_DEV_ALL) {
        snprintf(c->name, sizeof c->name, "%s", defs[k].name);
        snprintf(c->what, sizeof c->what, "%s%s", defs[k].per_device ? "device " : "", defs[k].what);
    } else {
        snprintf(c->name, sizeof c->name, "%s-dev%d", defs[k].name, (int)device);
        snprintf(c->what, sizeof c->what, "device %d %s", (int)device, defs[k].what);
    }
    return 0;
}

int tpprof_gate_option(tpprof_gate_options *o, int argc, char **argv, int *i) {
    const char *v = NULL;
    int r;
    for (size_t k = 0; k < sizeof defs / sizeof *defs; k++)
        if ((r = tpprof_opt(argc, argv, i, defs[k].option, &v)) != 0) {
            int32_t device = TPPROF_DEV_ALL;
            uint64_t limit = 0;
            if (r < 0 || (defs[k].per_device ? tpprof_parse_device_size(defs[k].option, v, &device, &limit)
                          : defs[k].count    ? tpprof_parse_count(defs[k].option, v, &limit)
                                             : tpprof_parse_size(defs[k].option, v, &limit)))
                return -1;
            return choose(o, k, device, limit) == 0 ? 1 : -1;
        }
    if ((r = tpprof_opt(argc, argv, i, "--max-growth", &v)) != 0) {
        if (r < 0 || tpprof_parse_percent("--max-growth", v, &o->max_growth))
            return -1;
        o->has_growth = true;
    } else if (strcmp(argv[*i], "--allow-incomplete") == 0) {
        o->allow_incomplete = true;
    } else if ((r = tpprof_opt(argc, argv, i, "--baseline", &v)) != 0) {
        if (r < 0)
            return -1;
        o->baseline = v;
    } else if ((r = tpprof_opt(argc, argv, i, "--suppress", &v)) != 0) {
        if (r < 0 || tpprof_suppressions_add(&o->suppressions, v, true) != 0)
            return -1;
    } else if ((r = tpprof_opt(argc, argv, i, "--suppressions", &v)) != 0) {
        if (r < 0 || tpprof_suppressions_load(v, &o->suppressions) != 0)
            return -1;
    } else {
        return 0;
    }
    return 1;
}

int tpprof_gate_options_parse_string(tpprof_gate_options *o, const char *gates) {
    // Split at blanks (no quoting: a gate's value never has one); the
    // pieces must outlive o (--baseline keeps a pointer), so o owns them.
    char *copy = strdup(gates);
    if (!copy)
        return tpprof_error_set("out of memory");
    char *words[64];
    int n = 0;
    for (char *save = NULL, *w = strtok_r(copy, " \t\n", &save); w; w = strtok_r(NULL, " \t\n", &save)) {
        if (n == 64) {
            free(copy);
            return tpprof_error_set("--check: more than 64 words");
        }
        words[n++] = w;
    }
    char **kept = realloc(o->owned, (o->nowned + 1) * sizeof *kept);
    if (!kept) {
        free(copy);
        return tpprof_error_set("out of memory");
    }
    o->owned = kept;
    o->owned[o->nowned++] = copy;
    for (int i = 0; i < n; i++) {
        int r = tpprof_gate_option(o, n, words, &i);
        if (r < 0) {
            char why[1024];
            snprintf(why, sizeof why, "%s", tpprof_error());
            return tpprof_error_set("--check: %s", why);
        }
        if (r == 0)
            return tpprof_error_set("--check: '%s' is not a gate (see tpprof check --help)", words[i]);
    }
    return 0;
}

bool tpprof_gate_options_any(const tpprof_gate_options *o) {
    return o->nchosen > 0 || o->baseline != NULL;
}

int tpprof_gate_options_finish(tpprof_gate_options *o) {
    if (o->has_growth && !o->baseline)
        return tpprof_error_set("--max-growth needs --baseline OLD.db");
    if (!tpprof_gate_options_any(o)) // the table's first row: --max-lost-bytes 0
        return choose(o, 0, TPPROF_DEV_ALL, 0);
    return 0;
}

void tpprof_gate_options_free(tpprof_gate_options *o) {
    tpprof_suppressions_free(&o->suppressions);
    for (size_t i = 0; i < o->nowned; i++)
        free(o->owned[i]);
    free(o->owned);
    o->owned = NULL;
    o->nowned = 0;
}

// ---------------------------------------------------------------------------
// Suppressions and notes

void tpprof_gates_suppress(tpprof_gate_options *o, tpprof_profile *p, tpprof_profile *old, const char *prefix) {
    if (!o->suppressions.n)
        return;
    if (old) { // the baseline loses the same leaks; only p's are counted
        tpprof_suppressions_apply(old, &o->suppressions);
        tpprof_suppressions_reset(&o->suppressions);
    }
    tpprof_suppressions_apply(p, &o->suppressions);
    uint64_t bytes = 0, blocks = 0;
    for (size_t i = 0; i < o->suppressions.n; i++) {
        bytes += o->suppressions.rules[i].bytes;
        blocks += o->suppressions.rules[i].count;
    }
    if (blocks)
        fprintf(stderr, "%snote: %llu B in %llu blocks suppressed\n", prefix, (unsigned long long)bytes,
                (unsigned long long)blocks);
    for (size_t i = 0; i < o->suppressions.n; i++) {
        char line[1200];
        fprintf(stderr, "%snote: suppressed %s\n", prefix,
                tpprof_suppression_describe(&o->suppressions.rules[i], line, sizeof line));
    }
}

void tpprof_gates_note_ending(const tpprof_profile *p, const char *path, const char *prefix) {
    const tpprof_summary *s = &p->summary;
    if (s->end_signal)
        fprintf(stderr, "%snote: the program of %s died of signal %d (%s)\n", prefix, path, s->end_signal,
                strsignal(s->end_signal));
    if (s->unscanned_count && !s->leak_scanned)
        fprintf(stderr, "%snote: %s: %llu B in %llu blocks were never scanned and count as lost (%s)\n",
                prefix, path, (unsigned long long)s->unscanned_bytes, (unsigned long long)s->unscanned_count,
                !s->complete                                          ? "the recording is incomplete"
                : p->end_reason && strcmp(p->end_reason, "exec") == 0 ? "the program exec'd another"
                : s->end_signal                                       ? "the program died of a signal"
                                                                      : "no scan ran");
}

// Bad device frees and failed device calls: said, never a failure (a
// program may free a host pointer with cudaFree and go on).
static void note_device(const tpprof_profile *p, const tpprof_devices *d, const char *path, const char *prefix) {
    if (!d->recorded)
        return;
    uint64_t failed = tpprof_devices_calls_failed(d), bad = tpprof_devices_bad_frees(d);
    if (bad) {
        uint64_t by_flag[TPPROF_DEV_FLAG_HOST_POINTER + 1] = {0};
        for (size_t i = 0; i < d->nbad; i++)
            if (d->bad[i].flag >= 0 && d->bad[i].flag <= TPPROF_DEV_FLAG_HOST_POINTER)
                by_flag[d->bad[i].flag] += d->bad[i].count;
        char frame[512] = "";
        if (d->nbad)
            tpprof_stacks_describe(p->stacks, d->bad[0].stack_id, frame, sizeof frame);
        fprintf(stderr,
                "%snote: %s: %llu bad device free%s (%llu double, %llu of a pointer never allocated, "
                "%llu of a host pointer)%s%s\n",
                prefix, path, (unsigned long long)bad, bad == 1 ? "" : "s",
                (unsigned long long)by_flag[TPPROF_DEV_FLAG_DOUBLE_FREE],
                (unsigned long long)by_flag[TPPROF_DEV_FLAG_UNKNOWN_POINTER],
                (unsigned long long)by_flag[TPPROF_DEV_FLAG_HOST_POINTER], d->nbad ? ", the first in " : "", frame);
    }
    if (failed)
        fprintf(stderr, "%snote: %s: %llu device call%s failed (recorded as failed, not as allocations)\n", prefix,
                path, (unsigned long long)failed, failed == 1 ? "" : "s");
}

// ---------------------------------------------------------------------------
// Evaluation

static void gate_limit(tpprof_gate *g, const tpprof_gate_choice *c, int choice, uint64_t value, bool unrecorded,
                       const char *detail) {
    const tpprof_gate_def *d = &defs[c->def];
    g->name = c->name;
    g->def = c->def;
    g->choice = choice;
    g->value = value;
    g->limit = c->limit;
    g->failed = !unrecorded && value > c->limit;
    g->unrecorded = unrecorded;
    snprintf(g->line, sizeof g->line, "%s %s %llu %s %llu%s", g->failed ? "FAIL" : "PASS", c->what,
             (unsigned long long)value, g->failed ? ">" : "<=", (unsigned long long)c->limit,
             g->failed ? detail : unrecorded && d->unrecorded ? d->unrecorded : "");
}

// Baseline: growth per quantity, the worst stack being the one that grew
// most. Stacks of two runs are matched by their innermost function names
// (diff.c).
#define KEY_FRAMES 4

enum { Q_LEAKED, Q_LOST, Q_PEAK };

static void grew_most(const tpprof_profile *now, const tpprof_delta *d, size_t n, int q, char *out, size_t size) {
    const tpprof_delta *best = NULL;
    int64_t best_growth = 0;
    for (size_t i = 0; i < n; i++) {
        int64_t growth = q == Q_LEAKED ? d[i].leaked_new - d[i].leaked_old
                         : q == Q_LOST ? d[i].lost_new - d[i].lost_old
                                       : d[i].peak_new - d[i].peak_old;
        if (d[i].stack_new >= 0 && growth > best_growth) {
            best = &d[i];
            best_growth = growth;
        }
    }
    out[0] = 0;
    if (best) {
        char frame[512];
        snprintf(out, size, ": +%lld B in %s", (long long)best_growth,
                 tpprof_stacks_describe(now->stacks, best->stack_new, frame, sizeof frame));
    }
}

static void gate_growth(tpprof_gate *g, const char *name, const char *what, uint64_t now, uint64_t old,
                        double max_pct, const char *detail) {
    g->name = name;
    g->def = -1;
    g->choice = -1;
    g->value = now;
    g->limit = old;
    double pct = old ? 100.0 * ((double)now - (double)old) / (double)old : (now ? INFINITY : 0.0);
    g->failed = pct > max_pct;
    char pct_text[32];
    if (isinf(pct))
        snprintf(pct_text, sizeof pct_text, "from 0");
    else
        snprintf(pct_text, sizeof pct_text, "%+.1f%%", pct);
    snprintf(g->line, sizeof g->line, "%s %s %llu vs baseline %llu (%s) %s %g%%%s", g->failed ? "FAIL" : "PASS",
             what, (unsigned long long)now, (unsigned long long)old, pct_text, g->failed ? ">" : "<=", max_pct,
             g->failed ? detail : "");
}

static void gates_of_baseline(tpprof_gate *g, const tpprof_profile *p, const tpprof_profile *old,
                              const tpprof_gate_options *o, const char *prefix) {
    const tpprof_summary *s = &p->summary, *b = &old->summary;
    char detail[1024];
    tpprof_delta *d = NULL;
    size_t nd = 0;
    if (tpprof_diff(p, old, KEY_FRAMES, &d, &nd) != 0)
        fprintf(stderr, "%snote: %s; stacks not named\n", prefix, tpprof_error());
    grew_most(p, d, nd, Q_LEAKED, detail, sizeof detail);
    gate_growth(&g[0], "baseline-leaked-bytes", "leaked bytes", s->leaked_bytes, b->leaked_bytes, o->max_growth,
                detail);
    grew_most(p, d, nd, Q_LOST, detail, sizeof detail);
    gate_growth(&g[1], "baseline-lost-bytes", "lost bytes", lost_bytes(p), lost_bytes(old), o->max_growth, detail);
    grew_most(p, d, nd, Q_PEAK, detail, sizeof detail);
    gate_growth(&g[2], "baseline-peak-bytes", "peak bytes", s->peak_bytes, b->peak_bytes, o->max_growth, detail);
    tpprof_diff_free(d, nd);
}

int tpprof_gates_evaluate(const tpprof_gate_options *o, const tpprof_profile *p, const char *path,
                          const tpprof_profile *old, const char *prefix, tpprof_gate *g) {
    size_t n = 0;
    // The recording itself first: nothing missing from it (gaps.c). No PASS
    // line: every recording is meant to be whole.
    tpprof_gaps gaps;
    if (tpprof_profile_gaps(p, path, NULL, &gaps) != 0) {
        char why[sizeof g->line - 64];
        tpprof_gaps_join(&gaps, why, sizeof why);
        if (o->allow_incomplete) {
            fprintf(stderr, "%swarning: cannot vouch for %s: %s\n", prefix, path, why);
        } else {
            g[n] = (tpprof_gate){.name = "complete-recording", .def = -1, .choice = -1, .failed = true};
            snprintf(g[n].line, sizeof g[n].line, "FAIL recording cannot be vouched for: %s", why);
            n++;
        }
    }
    tpprof_devices devices;
    if (tpprof_devices_load(p, false, 0, &devices) != 0)
        return -1;
    note_device(p, &devices, path, prefix);
    const tpprof_gate_subject subject = {.p = p, .devices = &devices};
    for (size_t c = 0; c < o->nchosen; c++) {
        const tpprof_gate_choice *ch = &o->chosen[c];
        uint64_t value = 0;
        char detail[1024] = "";
        int r = defs[ch->def].measure(&subject, ch->device, &value, detail, sizeof detail);
        if (r < 0) {
            tpprof_devices_free(&devices);
            return -1;
        }
        gate_limit(&g[n++], ch, (int)c, r == 1 ? 0 : value, r == 1, detail);
    }
    tpprof_devices_free(&devices);
    if (old) {
        gates_of_baseline(g + n, p, old, o, prefix);
        n += 3;
    }
    return (int)n;
}
