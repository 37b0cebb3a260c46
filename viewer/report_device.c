// report_device.c: report's device (CUDA) memory: its summary lines, the
// device leaks, peaks, top sites and bad frees as text, and the JSON
// `device` object (docs/report-json.md). Figures come from device.c; this
// file only prints. A recording without device tables prints nothing (one
// line when --device asked for one), and JSON says `"recorded": false`.
#define _POSIX_C_SOURCE 200809L
#include "viewer.h"

#include <inttypes.h>
#include <string.h>

#define DEVICE_TEXT_FRAMES 8

static const char *plural(uint64_t n) { return n == 1 ? "" : "s"; }

static const char *flag_words(int64_t flag) {
    switch (flag) {
    case TPPROF_DEV_FLAG_DOUBLE_FREE: return "double free";
    case TPPROF_DEV_FLAG_UNKNOWN_POINTER: return "free of a pointer never allocated";
    case TPPROF_DEV_FLAG_HOST_POINTER: return "free of a host pointer";
    default: return "bad free";
    }
}

static void device_name(int32_t device, char *buf, size_t size) {
    if (device == TPPROF_DEV_ALL)
        snprintf(buf, size, "all devices");
    else if (device < 0)
        snprintf(buf, size, "device ?");
    else
        snprintf(buf, size, "device %d", (int)device);
}

const char *tpprof_dev_stats_line(const tpprof_dev_stats *s, char *buf, size_t size) {
    char a[32], b[32], c[32];
    size_t n = 0;
#define PUT(...)                                                                                                 \
    do {                                                                                                         \
        int k_ = snprintf(buf + n, size - n, __VA_ARGS__);                                                       \
        if (k_ > 0) n = n + (size_t)k_ < size ? n + (size_t)k_ : size - 1;                                       \
    } while (0)
    buf[0] = 0;
    PUT("%s allocation%s, %s; peak %s", tpprof_format_count(s->allocations, a), plural(s->allocations),
        tpprof_format_size(s->allocated_bytes, b), tpprof_format_size(s->peak_bytes, c));
    if (s->peak_bytes)
        PUT(" at %.3f s", (double)s->peak_time_ns / 1e9);
    PUT("; at exit %s in %s block%s leaked", tpprof_format_size(s->leaked_bytes, a),
        tpprof_format_count(s->leaked_count, b), plural(s->leaked_count));
    if (s->reset_count)
        PUT(" (%s in %s ended by a device reset)", tpprof_format_size(s->reset_bytes, a),
            tpprof_format_count(s->reset_count, b));
    if (s->pool_reserved_peak >= 0)
        PUT("; pools reserved up to %s", tpprof_format_size((uint64_t)s->pool_reserved_peak, a));
#undef PUT
    return buf;
}

// The summary line of s, and its failed calls' line when it has any.
static void stats_line(const tpprof_dev_stats *s) {
    char a[32], b[32], c[32], line[512];
    printf("%s\n", tpprof_dev_stats_line(s, line, sizeof line));
    if (s->failed_calls || s->bad_frees) {
        printf("              %s failed call%s", tpprof_format_count(s->failed_calls, a), plural(s->failed_calls));
        if (s->oom_calls)
            printf(" (%s out of memory)", tpprof_format_count(s->oom_calls, b));
        printf(", %s bad free%s\n", tpprof_format_count(s->bad_frees, c), plural(s->bad_frees));
    }
}

void tpprof_report_device_summary_text(const tpprof_devices *d) {
    char a[32], b[32], c[32], e[32], dev[32];
    if (!d->recorded) {
        if (d->filtered)
            printf("  device      device memory: not recorded\n");
        return;
    }
    if (d->nblocks == 0 && d->ndevices == 0 && d->pinned.failed_calls == 0) {
        device_name(d->filter_device, dev, sizeof dev);
        printf("  device      no device memory was allocated%s%s; capture %s\n", d->filtered ? " on " : "",
               d->filtered ? dev : "", d->capture ? d->capture : "unknown");
        return;
    }
    for (size_t i = 0; i < d->ndevices; i++) {
        const tpprof_dev_stats *s = &d->devices[i];
        device_name(s->device, dev, sizeof dev);
        printf("  %-11s ", dev);
        stats_line(s);
    }
    if (d->pinned.allocations || d->pinned.failed_calls || d->pinned.bad_frees) {
        printf("  pinned host ");
        stats_line(&d->pinned);
    }
    const tpprof_dev_stats *t = &d->total;
    if (t->vmm_reservations || t->vmm_mappings)
        printf("  VMM         %s reservation%s (%s of address space), %s mapping%s (%s): not counted as memory "
               "(their physical handles are)\n",
               tpprof_format_count(t->vmm_reservations, a), plural(t->vmm_reservations),
               tpprof_format_size(t->vmm_reserved_bytes, b), tpprof_format_count(t->vmm_mappings, c),
               plural(t->vmm_mappings), tpprof_format_size(t->vmm_mapped_bytes, e));
    uint64_t failed = tpprof_devices_calls_failed(d), bad = tpprof_devices_bad_frees(d);
    printf("  device      capture %s; %s failed call%s, %s bad free%s", d->capture ? d->capture : "unknown",
           tpprof_format_count(failed, a), plural(failed), tpprof_format_count(bad, b), plural(bad));
    if (failed)
        printf(" (a failed call is recorded, never counted as an allocation)");
    printf("\n");
}

static void print_group(const tpprof_profile *p, const tpprof_dev_group *g, const char *state) {
    char a[32], b[32], dev[32];
    device_name(g->device, dev, sizeof dev);
    printf("  %10s in %6s block%s  %-9s %-18s %s%s%s\n", tpprof_format_size(g->bytes, a),
           tpprof_format_count(g->count, b), g->count == 1 ? " " : "s", g->cls == TPPROF_DEV_PINNED ? "host" : dev,
           tpprof_profile_kind(p, g->kind), g->api ? g->api : "?", state ? "  " : "", state ? state : "");
    tpprof_print_stack(p->stacks, g->stack_id, "      ", DEVICE_TEXT_FRAMES, false);
}

static size_t cap(size_t top, size_t n) { return top && top < n ? top : n; }

void tpprof_report_device_leaks_text(const tpprof_profile *p, const tpprof_devices *d, size_t top) {
    if (!d->recorded)
        return;
    char a[32], b[32];
    const tpprof_dev_stats *t = &d->total;
    size_t memory = 0; // groups of device memory (pinned host and address space come after)
    for (size_t i = 0; i < d->nleaks; i++)
        memory += d->leaks[i].cls == TPPROF_DEV_MEMORY;
    printf("\nDevice leaks: %s in %s block%s of device memory from %zu stack%s (alive at exit, or ended by a "
           "device reset)\n",
           tpprof_format_size(t->leaked_bytes, a), tpprof_format_count(t->leaked_count, b), plural(t->leaked_count),
           memory, plural(memory));
    if (d->nleaks == 0)
        printf("  none: every device block was freed\n");
    size_t n = cap(top, d->nleaks);
    for (size_t i = 0; i < n; i++) {
        const tpprof_dev_group *g = &d->leaks[i];
        char state[96];
        snprintf(state, sizeof state, "%s%s%s", g->ended_by ? "ended by " : "alive at exit",
                 g->ended_by ? g->ended_by : "", g->cls == TPPROF_DEV_ADDRESS ? " (address space, not counted)" : "");
        print_group(p, g, state);
    }
    if (n < d->nleaks)
        printf("  ... %zu more stacks (--top 0 shows all)\n", d->nleaks - n);
    if (d->nbad) {
        printf("\nDevice bad frees: %s (the program's return codes were left as they were)\n",
               tpprof_format_count(d->bad_frees, a));
        for (size_t i = 0; i < cap(top, d->nbad); i++) {
            const tpprof_dev_bad *x = &d->bad[i];
            char dev[32];
            device_name(x->device, dev, sizeof dev);
            printf("  %6s  %s  %s  %s, first at 0x%" PRIx64 "\n", tpprof_format_count(x->count, a),
                   flag_words(x->flag), dev, x->api ? x->api : "?", (uint64_t)x->address);
            tpprof_print_stack(p->stacks, x->stack_id, "      ", DEVICE_TEXT_FRAMES, false);
        }
    }
}

static void peak_of(const tpprof_profile *p, const tpprof_dev_stats *s, const char *name, size_t top) {
    char a[32];
    printf("\nDevice peak: %s %s", name, tpprof_format_size(s->peak_bytes, a));
    if (s->peak_bytes)
        printf(" at %.3f s", (double)s->peak_time_ns / 1e9);
    printf("; live at that moment by site:\n");
    if (s->npeak_sites == 0)
        printf("  (nothing was live)\n");
    size_t n = cap(top, s->npeak_sites);
    for (size_t i = 0; i < n; i++)
        print_group(p, &s->peak_sites[i], NULL);
    if (n < s->npeak_sites)
        printf("  ... %zu more sites\n", s->npeak_sites - n);
}

void tpprof_report_device_peak_text(const tpprof_profile *p, const tpprof_devices *d, size_t top) {
    if (!d->recorded || (d->ndevices == 0 && d->pinned.allocations == 0))
        return;
    char dev[32];
    for (size_t i = 0; i < d->ndevices; i++) {
        device_name(d->devices[i].device, dev, sizeof dev);
        peak_of(p, &d->devices[i], dev, top);
    }
    if (d->ndevices > 1)
        peak_of(p, &d->total, "all devices together", top);
    if (d->pinned.allocations)
        peak_of(p, &d->pinned, "pinned host", top);
}

void tpprof_report_device_top_text(const tpprof_profile *p, const tpprof_devices *d, size_t top) {
    if (!d->recorded || d->nsites == 0)
        return;
    printf("\nTop device sites by bytes:\n");
    size_t n = cap(top, d->nsites);
    for (size_t i = 0; i < n; i++)
        print_group(p, &d->sites[i], d->sites[i].cls == TPPROF_DEV_ADDRESS ? "(address space, not counted)" : NULL);
    if (n < d->nsites)
        printf("  ... %zu more sites\n", d->nsites - n);
}

// ---------------------------------------------------------------------------
// JSON

static void json_device(tpprof_json *j, int32_t device) {
    if (device == TPPROF_DEV_ALL)
        tpprof_json_null(j);
    else
        tpprof_json_int(j, device);
}

static void json_group(tpprof_json *j, const tpprof_profile *p, const tpprof_dev_group *g, bool leak) {
    tpprof_json_object_begin(j);
    tpprof_json_key(j, "device");
    json_device(j, g->device);
    tpprof_json_kv_string(j, "kind", tpprof_profile_kind(p, g->kind));
    tpprof_json_kv_string(j, "api", g->api);
    tpprof_json_kv_bool(j, "counted", g->cls != TPPROF_DEV_ADDRESS);
    tpprof_json_kv_uint(j, "bytes", g->bytes);
    tpprof_json_kv_uint(j, "count", g->count);
    if (leak)
        tpprof_json_kv_string(j, "ended_by", g->ended_by);
    tpprof_json_stack(j, p->stacks, g->stack_id);
    tpprof_json_object_end(j);
}

static void json_groups(tpprof_json *j, const tpprof_profile *p, const char *key, const tpprof_dev_group *g, size_t n,
                        bool leak) {
    tpprof_json_key(j, key);
    tpprof_json_array_begin(j);
    for (size_t i = 0; i < n; i++)
        json_group(j, p, &g[i], leak);
    tpprof_json_array_end(j);
}

static void json_stats(tpprof_json *j, const tpprof_profile *p, const tpprof_dev_stats *s, size_t top) {
    tpprof_json_object_begin(j);
    tpprof_json_key(j, "device");
    json_device(j, s->device);
    tpprof_json_kv_uint(j, "allocations", s->allocations);
    tpprof_json_kv_uint(j, "allocated_bytes", s->allocated_bytes);
    tpprof_json_kv_uint(j, "frees", s->frees);
    tpprof_json_kv_uint(j, "peak_bytes", s->peak_bytes);
    tpprof_json_kv_int(j, "peak_time_ns", s->peak_time_ns);
    tpprof_json_kv_uint(j, "leaked_bytes", s->leaked_bytes);
    tpprof_json_kv_uint(j, "leaked_count", s->leaked_count);
    tpprof_json_kv_uint(j, "reset_bytes", s->reset_bytes);
    tpprof_json_kv_uint(j, "reset_count", s->reset_count);
    tpprof_json_kv_uint(j, "failed_calls", s->failed_calls);
    tpprof_json_kv_uint(j, "oom_calls", s->oom_calls);
    tpprof_json_kv_uint(j, "bad_frees", s->bad_frees);
    tpprof_json_key(j, "pool_reserved_peak_bytes");
    if (s->pool_reserved_peak < 0)
        tpprof_json_null(j);
    else
        tpprof_json_int(j, s->pool_reserved_peak);
    tpprof_json_kv_uint(j, "vmm_reservations", s->vmm_reservations);
    tpprof_json_kv_uint(j, "vmm_reserved_bytes", s->vmm_reserved_bytes);
    tpprof_json_kv_uint(j, "vmm_mappings", s->vmm_mappings);
    tpprof_json_kv_uint(j, "vmm_mapped_bytes", s->vmm_mapped_bytes);
    json_groups(j, p, "peak_sites", s->peak_sites, cap(top, s->npeak_sites), false);
    tpprof_json_object_end(j);
}

void tpprof_report_device_json(tpprof_json *j, const tpprof_profile *p, const tpprof_devices *d, size_t top) {
    tpprof_json_key(j, "device");
    tpprof_json_object_begin(j);
    tpprof_json_kv_bool(j, "recorded", d->recorded);
    tpprof_json_kv_string(j, "capture", d->capture);
    tpprof_json_key(j, "filter");
    if (d->filtered)
        tpprof_json_int(j, d->filter_device);
    else
        tpprof_json_null(j);
    if (!d->recorded) {
        tpprof_json_object_end(j);
        return;
    }
    tpprof_json_kv_uint(j, "calls_failed", tpprof_devices_calls_failed(d));
    tpprof_json_kv_uint(j, "bad_frees", tpprof_devices_bad_frees(d));
    tpprof_json_key(j, "devices");
    tpprof_json_array_begin(j);
    for (size_t i = 0; i < d->ndevices; i++)
        json_stats(j, p, &d->devices[i], top);
    tpprof_json_array_end(j);
    tpprof_json_key(j, "total");
    json_stats(j, p, &d->total, top);
    tpprof_json_key(j, "pinned_host");
    json_stats(j, p, &d->pinned, top);
    json_groups(j, p, "leaks", d->leaks, d->nleaks, true);
    json_groups(j, p, "top", d->sites, cap(top, d->nsites), false);
    tpprof_json_key(j, "bad_free_list");
    tpprof_json_array_begin(j);
    for (size_t i = 0; i < d->nbad; i++) {
        const tpprof_dev_bad *x = &d->bad[i];
        tpprof_json_object_begin(j);
        tpprof_json_kv_string(j, "flag", tpprof_device_flag_name(x->flag));
        tpprof_json_kv_int(j, "device", x->device);
        tpprof_json_kv_string(j, "api", x->api);
        tpprof_json_kv_address(j, "address", x->address);
        tpprof_json_kv_uint(j, "count", x->count);
        tpprof_json_stack(j, p->stacks, x->stack_id);
        tpprof_json_object_end(j);
    }
    tpprof_json_array_end(j);
    tpprof_json_object_end(j);
}
