// cmd_report.c: `tpprof report DB`: what a recording says, as text a person
// reads at a glance or as JSON (contract: docs/report-json.md).
//
// Sections: summary (always), leaks grouped by stack (lost first, then by
// bytes), the peak with the sites live at it, top sites by bytes and by
// calls, temporary allocations, the timeline; the stack-by-stack diff
// against an older recording is report_diff.c's, the folded format
// folded.c's, the HTML page html.c's. All numbers come from profile.c and
// timeline.c; this file only chooses, orders and prints. It never writes
// the database (profile.c may save symbols into a writable one).
#define _POSIX_C_SOURCE 200809L
#include "viewer.h"

#include <errno.h>
#include <glob.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char tpprof_usage_report[] =
    "usage: tpprof report DB... [--leaks] [--peak] [--top N] [--temporary] [--timeline]\n"
    "                        [--storages] [--lifetimes] [--diff OLD.db]\n"
    "                        [--format text|json|folded|html] [-o FILE] [--suppressions FILE]\n"
    "                        [--device N]\n"
    "\n"
    "Show what a recording holds. Without section flags every section is shown;\n"
    "with any, the summary and the chosen sections. Several recordings (or a quoted\n"
    "glob, 'tpprof.train.*.db') are merged as tpprof merge does and shown as one,\n"
    "with each recording's own verdict under the total's.\n"
    "\n"
    "  --leaks          blocks still allocated at exit, grouped by stack: lost first, then by bytes\n"
    "  --peak           the peak of heap + anonymous mmap bytes and the sites live at it\n"
    "  --top N          the N sites that allocated the most bytes and the most calls;\n"
    "                   N also caps every other list (default 10; 0 = no cap)\n"
    "  --temporary      sites whose blocks were freed before the thread's next allocation\n"
    "  --timeline       heap, mmap and RSS over time (at most 24 points in text, 200 in JSON)\n"
    "  --storages       tensor storages alive at exit with their tensors; references no release\n"
    "                   matched, by the stack that took them; storages whose data is gone but\n"
    "                   whose struct weak references hold; small views pinning big storages\n"
    "  --lifetimes      DataPtr lifetimes per allocator: creation to deleter, deleter to the\n"
    "                   backing block freed (count, mean, max)\n"
    "  --diff OLD.db    also compare with an older recording, stack by stack (stacks are\n"
    "                   matched by their function names, so line changes do not matter)\n"
    "  --format F       text (default), json (see docs/report-json.md), or folded:\n"
    "                   one line per stack, outermost frame first, for flame graph tools\n"
    "                   (bytes allocated; with --leaks bytes live at exit, with --peak\n"
    "                   bytes live at the peak, with --temporary temporary calls),\n"
    "                   or html: one self-contained page (summary, timeline, flame graph,\n"
    "                   leaks, storages, sharing graph, fragmentation) to open in a browser\n"
    "  -o FILE          write to FILE instead of stdout\n"
    "  --device N       device memory of CUDA device N only (the summary's device lines and the\n"
    "                   device leaks, peak and sites; host figures are unchanged)\n"
    "  --suppressions FILE  leave out the leaks LeakSanitizer's suppression file names\n"
    "                   (leak:PATTERN lines, '#' comments; repeatable); the summary says what\n"
    "                   each rule matched\n"
    "\n"
    "The database is opened read-only. If it was never symbolized, it is symbolized\n"
    "now, and the symbols are saved into it when the file is writable.\n";


// Frames read per site line to find the call into a library.
#define TPPROF_SITE_FRAMES 64
// ---------------------------------------------------------------------------
// Options

enum {
    SECTION_LEAKS = 1,
    SECTION_PEAK = 2,
    SECTION_TOP = 4,
    SECTION_TEMPORARY = 8,
    SECTION_ALL = 15,       // the timeline is shown only when asked for
    SECTION_TIMELINE = 16,
    SECTION_STORAGES = 32,  // shown by default when the recording has tensors
    SECTION_LIFETIMES = 64,
    SECTION_TENSORS = 96,
};

typedef struct report_options {
    const char *path;   // the database read (a merged copy of several)
    const char *shown;  // what the report calls it: path, or "N recordings: A, B, ..."
    const char *diff;   // baseline for --diff, or NULL
    unsigned sections;
    uint64_t top;       // list cap; 0 = no cap
    bool json;
    bool folded;        // --format folded: flame graph input
    bool html;          // --format html: one self-contained page
    const char *output; // -o FILE, or NULL: stdout
    tpprof_suppressions suppressions; // --suppressions FILE (applied at load)
    const char *suppressions_path;
    char *const *inputs; // several recordings (merged into path): each one's verdict
    size_t ninputs;
    const tpprof_tensors *tensors; // the tensor tables (empty when absent)
    const tpprof_backing *backings; // the storages live blocks back
    size_t nbackings;
    bool device_filtered;          // --device N
    int32_t device;
    const tpprof_devices *devices; // device memory (recorded false without its tables)
} report_options;


#define MAX_TEXT_FRAMES 8

static size_t cap_of(const report_options *o, size_t n) {
    return o->top && o->top < n ? (size_t)o->top : n;
}

// ---------------------------------------------------------------------------
// Site orderings

typedef int (*site_cmp)(const void *, const void *);

static int by_bytes(const void *a, const void *b) {
    const tpprof_site *x = *(tpprof_site *const *)a, *y = *(tpprof_site *const *)b;
    if (x->alloc_bytes != y->alloc_bytes)
        return x->alloc_bytes > y->alloc_bytes ? -1 : 1;
    if (x->alloc_count != y->alloc_count)
        return x->alloc_count > y->alloc_count ? -1 : 1;
    return (x->stack_id > y->stack_id) - (x->stack_id < y->stack_id);
}

static int by_calls(const void *a, const void *b) {
    const tpprof_site *x = *(tpprof_site *const *)a, *y = *(tpprof_site *const *)b;
    if (x->alloc_count != y->alloc_count)
        return x->alloc_count > y->alloc_count ? -1 : 1;
    return by_bytes(a, b);
}

static int by_peak(const void *a, const void *b) {
    const tpprof_site *x = *(tpprof_site *const *)a, *y = *(tpprof_site *const *)b;
    if (x->peak_bytes != y->peak_bytes)
        return x->peak_bytes > y->peak_bytes ? -1 : 1;
    return by_bytes(a, b);
}

static int by_temp(const void *a, const void *b) {
    const tpprof_site *x = *(tpprof_site *const *)a, *y = *(tpprof_site *const *)b;
    if (x->temp_count != y->temp_count)
        return x->temp_count > y->temp_count ? -1 : 1;
    if (x->temp_bytes != y->temp_bytes)
        return x->temp_bytes > y->temp_bytes ? -1 : 1;
    return by_bytes(a, b);
}

// Moves v[0..n)'s first k in cmp's order to v[0..k), sorted; the rest
// stay after them in no order. A report shows the first --top (10) of a
// PyTorch run's 700,000 sites, whose full sorts, three of them, were a
// fifth of `report`'s time: a heap of the k first seen keeps its worst at
// the root, and a site that does not beat it costs one comparison.
static void first_k(tpprof_site **v, size_t n, size_t k, site_cmp cmp) {
    if (k * 8 >= n) {
        qsort(v, n, sizeof *v, cmp);
        return;
    }
    // v[0..k) as a heap whose root is the last in cmp's order.
    for (size_t i = 1; i < k; i++)
        for (size_t c = i, up; c > 0 && cmp(&v[up = (c - 1) / 2], &v[c]) < 0; c = up) {
            tpprof_site *t = v[up];
            v[up] = v[c];
            v[c] = t;
        }
    for (size_t i = k; i < n; i++) {
        if (cmp(&v[i], &v[0]) >= 0)
            continue;
        tpprof_site *t = v[0];
        v[0] = v[i];
        v[i] = t;
        for (size_t c = 0;;) { // sift the new root down
            size_t l = 2 * c + 1, r = l + 1, m = c;
            if (l < k && cmp(&v[m], &v[l]) < 0)
                m = l;
            if (r < k && cmp(&v[m], &v[r]) < 0)
                m = r;
            if (m == c)
                break;
            t = v[m];
            v[m] = v[c];
            v[c] = t;
            c = m;
        }
    }
    qsort(v, k, sizeof *v, cmp);
}

// Sites passing `keep` (NULL: all), the first `k` of them in cmp's order
// (0: all). New array (caller frees) of borrowed pointers; *n gets its
// length, all the sites kept, the first min(k, *n) sorted.
static tpprof_site **sorted_sites(const tpprof_profile *p, site_cmp cmp,
                                  bool (*keep)(const tpprof_site *), size_t k, size_t *n) {
    tpprof_site **v = malloc((p->nsites + 1) * sizeof *v);
    *n = 0;
    if (!v)
        return NULL;
    for (size_t i = 0; i < p->nsites; i++)
        if (!keep || keep(&p->sites[i]))
            v[(*n)++] = &p->sites[i];
    if (*n)
        first_k(v, *n, k && k < *n ? k : *n, cmp);
    return v;
}

static bool live_at_peak(const tpprof_site *s) { return s->peak_bytes > 0 || s->peak_count > 0; }
static bool has_temporary(const tpprof_site *s) { return s->temp_count > 0; }

// ---------------------------------------------------------------------------
// Text

static void text_stack(const tpprof_profile *p, int64_t stack_id, const char *indent) {
    tpprof_print_stack(p->stacks, stack_id, indent, MAX_TEXT_FRAMES, false);
}

// One recording of several: its verdict, with the same suppressions (what
// they match here is not added to the merged recording's counts). 0, or -1
// + error.
static int input_verdict(const report_options *o, const char *path, tpprof_verdict *v) {
    tpprof_profile *p = tpprof_profile_load(path);
    if (!p)
        return -1;
    tpprof_suppressions rules = o->suppressions; // a shallow copy: counts of its own
    tpprof_suppression *copy = rules.n ? malloc(rules.n * sizeof *copy) : NULL;
    if (rules.n && copy) {
        memcpy(copy, rules.rules, rules.n * sizeof *copy);
        rules.rules = copy;
        tpprof_suppressions_apply(p, &rules);
    }
    tpprof_verdict_of(p, v);
    free(copy);
    tpprof_profile_free(p);
    return 0;
}

static void text_summary(const tpprof_profile *p, const report_options *o) {
    const tpprof_summary *s = &p->summary;
    char a[32], b[32], c[32], d[32], e[32], f[32];
    printf("tpprof report: %s\n", o->shown);
    // The verdict first, as memcheck and LSan put "definitely lost" before
    // "still reachable": a reachable buffer is not what a newcomer should read first.
    tpprof_verdict v;
    char line[512];
    tpprof_verdict_of(p, &v);
    printf("  verdict     %s\n", tpprof_verdict_headline(&v, line, sizeof line));
    for (size_t i = 0; o->ninputs > 1 && i < o->ninputs; i++) {
        tpprof_verdict one;
        if (input_verdict(o, o->inputs[i], &one) == 0)
            printf("  recording   %s: %s\n", o->inputs[i], tpprof_verdict_headline(&one, line, sizeof line));
        else
            printf("  recording   %s: cannot be read: %s\n", o->inputs[i], tpprof_error());
    }
    printf("  reachable   %s\n", tpprof_verdict_reachable(&v, line, sizeof line));
    printf("  program     %s", p->exe ? p->exe : "(unknown)");
    if (s->pid)
        printf(" (pid %" PRId64 ")", s->pid);
    if (s->duration_ns)
        printf(", ran %.3f s", (double)s->duration_ns / 1e9);
    printf(", %s%s", s->complete ? "complete" : s->still_running ? "INCOMPLETE (still running)" : "INCOMPLETE",
           p->mode && strcmp(p->mode, "full") == 0 ? ", full mode" : "");
    if (s->end_signal)
        printf(", died of signal %d (%s)%s", s->end_signal, strsignal(s->end_signal),
               s->leak_scanned ? "" : ": the live set at that moment, not scanned");
    printf("\n");
    printf("  calls       %s allocations, %s frees, %s temporary\n",
           tpprof_format_count(s->allocations, a), tpprof_format_count(s->frees, b),
           tpprof_format_count(s->temporary_count, c));
    printf("  allocated   %s in total\n", tpprof_format_size(s->total_bytes, a));
    printf("  peak        %s", tpprof_format_size(s->peak_bytes, a));
    if (s->peak_bytes)
        printf(" at %.3f s", (double)s->peak_time_ns / 1e9);
    printf(" (heap + anonymous mmap)\n");
    printf("  at exit     %s in %s blocks still allocated: lost %s in %s, reachable %s in %s",
           tpprof_format_size(s->leaked_bytes, a), tpprof_format_count(s->leaked_count, b),
           tpprof_format_size(s->lost_bytes, c), tpprof_format_count(s->lost_count, d),
           tpprof_format_size(s->reachable_bytes, e), tpprof_format_count(s->reachable_count, f));
    if (s->unscanned_count)
        printf(", not scanned %s in %s", tpprof_format_size(s->unscanned_bytes, c),
               tpprof_format_count(s->unscanned_count, d));
    printf("\n");
    if (s->reserved_count)
        printf("  reserved    %s in %s PROT_NONE mappings (address space, not memory; not counted above), "
               "%s of it still reserved at exit\n",
               tpprof_format_size(s->reserved_total_bytes, a), tpprof_format_count(s->reserved_count, b),
               tpprof_format_size(s->reserved_bytes, c));
    for (size_t i = 0; i < o->suppressions.n; i++) {
        char line[1200];
        printf("  suppressed  %s\n", tpprof_suppression_describe(&o->suppressions.rules[i], line, sizeof line));
    }
    if (s->libc_count)
        printf("  libc        %s in %s blocks the C library keeps to the end (its caches, stdio buffers): "
               "not leaks\n",
               tpprof_format_size(s->libc_bytes, a), tpprof_format_count(s->libc_count, b));
    tpprof_report_device_summary_text(o->devices);
    // What the recording is missing, in check's and run's words (gaps.c).
    tpprof_gaps gaps;
    tpprof_profile_gaps(p, o->path, NULL, &gaps);
    for (size_t i = 0; i < gaps.n; i++)
        printf("  MISSING     %s\n", gaps.reason[i]);
    if (s->live_from_sites)
        printf("  NOTE        the recording has no live set (it is incomplete): the leaks are what each\n"
               "              site still had allocated at the last flush, not scanned\n");
    tpprof_profile_warn_skipped(p, stdout, "  NOTE        ");
    if (p->symbolized_now)
        printf("  symbols     resolved now%s\n",
               p->symbols_saved ? " and saved into the database" : " (kept in memory: read-only file)");
}

static void text_leaks(const tpprof_profile *p, const report_options *o) {
    char a[32], b[32];
    printf("\nLeaks: %s in %s blocks from %zu stacks (lost first, then by size)\n",
           tpprof_format_size(p->summary.leaked_bytes, a),
           tpprof_format_count(p->summary.leaked_count, b), p->nleaks);
    if (p->nleaks == 0) {
        printf("  none: every block was freed%s\n",
               p->summary.libc_count ? " (but what the C library keeps to the end: the libc line above)" : "");
        return;
    }
    size_t n = cap_of(o, p->nleaks);
    for (size_t i = 0; i < n; i++) {
        const tpprof_leak *l = &p->leaks[i];
        printf("  %10s in %6s block%s  %-9s  %s\n", tpprof_format_size(l->bytes, a),
               tpprof_format_count(l->count, b), l->count == 1 ? " " : "s",
               tpprof_reach_name(l->reachability), tpprof_profile_kind(p, l->kind));
        text_stack(p, l->stack_id, "      ");
        tpprof_report_leak_storages_text(p, o->tensors, o->backings, o->nbackings, l, "      ");
    }
    if (n < p->nleaks) {
        uint64_t rest = 0;
        for (size_t i = n; i < p->nleaks; i++)
            rest += p->leaks[i].bytes;
        printf("  ... %zu more stacks with %s (--top 0 shows all)\n", p->nleaks - n,
               tpprof_format_size(rest, a));
    }
}

static void text_peak(const tpprof_profile *p, const report_options *o) {
    char a[32], b[32];
    printf("\nPeak: %s", tpprof_format_size(p->summary.peak_bytes, a));
    if (p->summary.peak_bytes)
        printf(" at %.3f s", (double)p->summary.peak_time_ns / 1e9);
    printf("; live at that moment by site:\n");
    size_t n = 0;
    tpprof_site **v = sorted_sites(p, by_peak, live_at_peak, cap_of(o, p->nsites), &n);
    if (n == 0)
        printf("  (no site was live at the peak)\n");
    size_t shown = cap_of(o, n);
    for (size_t i = 0; i < shown; i++) {
        printf("  %10s in %6s block%s  %s\n", tpprof_format_size(v[i]->peak_bytes, a),
               tpprof_format_count(v[i]->peak_count, b), v[i]->peak_count == 1 ? " " : "s",
               tpprof_profile_kind(p, v[i]->kind));
        text_stack(p, v[i]->stack_id, "      ");
    }
    if (shown < n)
        printf("  ... %zu more sites\n", n - shown);
    free(v);
}

// Module names are paths as the loader gave them; the executable's is
// meta.exe (compare base names too, in case one of them is relative).
static bool is_exe_module(const tpprof_profile *p, const char *module) {
    if (!p->exe)
        return false;
    if (strcmp(module, p->exe) == 0)
        return true;
    const char *a = strrchr(module, '/'), *b = strrchr(p->exe, '/');
    return strcmp(a ? a + 1 : module, b ? b + 1 : p->exe) == 0;
}

// Which frame names the caller of a site.  Inside the executable it is the
// direct caller.  Inside a shared library (OpenBLAS under libtensorplay,
// libstdc++) the innermost frame and its direct caller are the same for many
// stacks, so it is the program's own frame that led there (the first frame in
// the executable), else the first frame outside the innermost frame's module.
// In a Python program it is the innermost Python frame above the site of the
// program's own (past the standard library's and installed packages'), else
// the innermost Python frame.
static size_t site_caller_index(const tpprof_profile *p, const tpprof_frame *f, size_t n) {
    if (n < 2)
        return n;
    // A Python program: the Python line that led there (inside libpython
    // or an extension such as libtorch, the native frames are the
    // interpreter's or the library's, not the program's).
    size_t py = tpprof_frames_first_python(f, n, 1);
    if (py < n)
        return py;
    // Frames of the language's standard library (Rust's alloc:: and core::,
    // linked into the program; C++'s std:: templates) are passed over: the
    // caller is the program's own code.
    if (!f[0].module || is_exe_module(p, f[0].module)) {
        size_t i = tpprof_frames_past_stdlib(f, n, 1);
        return i < n ? i : 1;
    }
    for (size_t i = 1; i < n; i++)
        if (f[i].module && is_exe_module(p, f[i].module) && f[i].function &&
            strcmp(f[i].function, "_start") != 0 && !tpprof_frame_is_stdlib(&f[i]))
            return i;
    for (size_t i = 1; i < n; i++)
        if (f[i].module && is_exe_module(p, f[i].module) && f[i].function &&
            strcmp(f[i].function, "_start") != 0)
            return i;
    for (size_t i = 1; i < n; i++)
        if (f[i].module && strcmp(f[i].module, f[0].module) != 0)
            return i;
    return 1;
}

// One line per site: the numbers, then the innermost frame and its caller
// (for a site inside a library: the frame that called into that library).
static void text_site_line(const tpprof_profile *p, const tpprof_site *s, uint64_t bytes,
                           uint64_t calls) {
    tpprof_frame f[TPPROF_SITE_FRAMES];
    size_t n = tpprof_stacks_frames(p->stacks, s->stack_id, f, TPPROF_SITE_FRAMES, NULL);
    char a[32], b[32], site[512] = "(no stack recorded)", caller[512] = "";
    if (n > 0)
        tpprof_frame_format(&f[0], site, sizeof site);
    size_t ci = site_caller_index(p, f, n);
    if (ci < n)
        tpprof_frame_format(&f[ci], caller, sizeof caller);
    printf("  %10s  %10s  %-14s  %s%s%s\n", tpprof_format_size(bytes, a),
           tpprof_format_count(calls, b), tpprof_profile_kind(p, s->kind), site,
           ci < n ? "  < " : "", caller);
}

static void text_top(const tpprof_profile *p, const report_options *o) {
    size_t n = 0;
    tpprof_site **v = sorted_sites(p, by_bytes, NULL, cap_of(o, p->nsites), &n);
    size_t shown = cap_of(o, n);
    printf("\nTop %zu sites by bytes allocated\n", shown);
    printf("  %10s  %10s  %-14s  %s\n", "bytes", "calls", "kind", "site  < caller");
    for (size_t i = 0; i < shown; i++)
        text_site_line(p, v[i], v[i]->alloc_bytes, v[i]->alloc_count);
    if (n)
        first_k(v, n, shown, by_calls);
    printf("\nTop %zu sites by allocation calls\n", shown);
    printf("  %10s  %10s  %-14s  %s\n", "bytes", "calls", "kind", "site  < caller");
    for (size_t i = 0; i < shown; i++)
        text_site_line(p, v[i], v[i]->alloc_bytes, v[i]->alloc_count);
    free(v);
}

static void text_temporary(const tpprof_profile *p, const report_options *o) {
    char a[32], b[32], c[32];
    const tpprof_summary *s = &p->summary;
    printf("\nTemporary allocations: %s of %s calls (%.1f%%), %s\n",
           tpprof_format_count(s->temporary_count, a), tpprof_format_count(s->allocations, b),
           s->allocations ? 100.0 * (double)s->temporary_count / (double)s->allocations : 0.0,
           tpprof_format_size(s->temporary_bytes, c));
    size_t n = 0;
    tpprof_site **v = sorted_sites(p, by_temp, has_temporary, cap_of(o, p->nsites), &n);
    size_t shown = cap_of(o, n);
    if (n)
        printf("  %10s  %10s  %-14s  %s\n", "bytes", "calls", "kind", "site  < caller");
    for (size_t i = 0; i < shown; i++)
        text_site_line(p, v[i], v[i]->temp_bytes, v[i]->temp_count);
    if (shown < n)
        printf("  ... %zu more sites\n", n - shown);
    free(v);
}

#define TIMELINE_TEXT_POINTS 24
#define TIMELINE_BAR 32

static void text_timeline(const tpprof_profile *p) {
    tpprof_sample *v = NULL;
    size_t n = 0;
    if (tpprof_timeline_load(p->db, TIMELINE_TEXT_POINTS, &v, &n) != 0) {
        fprintf(stderr, "tpprof report: warning: %s\n", tpprof_error());
        return;
    }
    printf("\nTimeline: heap + mmap over time (%zu points; each the largest of its span)\n", n);
    if (n == 0) {
        printf("  (no samples recorded)\n");
        return;
    }
    uint64_t max = 1;
    for (size_t i = 0; i < n; i++)
        if (v[i].heap_bytes + v[i].mmap_bytes > max)
            max = v[i].heap_bytes + v[i].mmap_bytes;
    printf("  %9s  %10s  %10s  %10s\n", "time", "heap", "mmap", "rss");
    for (size_t i = 0; i < n; i++) {
        char a[32], b[32], c[32], bar[TIMELINE_BAR + 1];
        uint64_t total = v[i].heap_bytes + v[i].mmap_bytes;
        size_t len = (size_t)((double)total / (double)max * TIMELINE_BAR + 0.5);
        for (size_t k = 0; k < len && k < TIMELINE_BAR; k++)
            bar[k] = '#';
        bar[len < TIMELINE_BAR ? len : TIMELINE_BAR] = 0;
        printf("  %7.3f s  %10s  %10s  %10s  %s\n", (double)v[i].time_ns / 1e9,
               tpprof_format_size(v[i].heap_bytes, a), tpprof_format_size(v[i].mmap_bytes, b),
               tpprof_format_size(v[i].rss_bytes, c), bar);
    }
    free(v);
}

// ---------------------------------------------------------------------------
// JSON

static void json_stack(tpprof_json *j, const tpprof_profile *p, int64_t stack_id) {
    tpprof_json_stack(j, p->stacks, stack_id);
}

static void json_site(tpprof_json *j, const tpprof_profile *p, const tpprof_site *s) {
    tpprof_json_object_begin(j);
    tpprof_json_kv_string(j, "kind", tpprof_profile_kind(p, s->kind));
    tpprof_json_kv_uint(j, "alloc_count", s->alloc_count);
    tpprof_json_kv_uint(j, "alloc_bytes", s->alloc_bytes);
    tpprof_json_kv_uint(j, "free_count", s->free_count);
    tpprof_json_kv_uint(j, "freed_bytes", s->freed_bytes);
    tpprof_json_kv_uint(j, "temp_count", s->temp_count);
    tpprof_json_kv_uint(j, "temp_bytes", s->temp_bytes);
    tpprof_json_kv_uint(j, "peak_count", s->peak_count);
    tpprof_json_kv_uint(j, "peak_bytes", s->peak_bytes);
    json_stack(j, p, s->stack_id);
    tpprof_json_object_end(j);
}

static void json_site_list(tpprof_json *j, const tpprof_profile *p, const report_options *o,
                           const char *key, site_cmp cmp, bool (*keep)(const tpprof_site *)) {
    size_t n = 0;
    tpprof_site **v = sorted_sites(p, cmp, keep, cap_of(o, p->nsites), &n);
    tpprof_json_key(j, key);
    tpprof_json_array_begin(j);
    for (size_t i = 0; i < cap_of(o, n); i++)
        json_site(j, p, v[i]);
    tpprof_json_array_end(j);
    free(v);
}

// The "program" object: what ran, how the recording went, what it misses.
static void json_program(tpprof_json *j, const tpprof_profile *p, const report_options *o) {
    const tpprof_summary *s = &p->summary;
    tpprof_json_key(j, "program");
    tpprof_json_object_begin(j);
    tpprof_json_kv_string(j, "exe", p->exe);
    tpprof_json_kv_int(j, "pid", s->pid);
    tpprof_json_kv_string(j, "mode", p->mode);
    tpprof_json_kv_bool(j, "complete", s->complete);
    tpprof_json_kv_bool(j, "still_running", s->still_running);
    tpprof_json_kv_id(j, "end_signal", s->end_signal); // null: it did not die of a signal
    tpprof_json_kv_int(j, "duration_ns", s->duration_ns);
    tpprof_json_kv_string(j, "tool_version", p->tool_version);
    tpprof_json_kv_string(j, "malloc_replaced_by", p->malloc_owner);
    tpprof_json_kv_string(j, "malloc_skipped", p->malloc_skipped);
    tpprof_json_kv_int(j, "dropped_events", s->dropped_events);
    tpprof_json_kv_int(j, "stacks_full", s->stacks_full);
    tpprof_json_key(j, "bypassing_modules");
    tpprof_json_array_begin_inline(j);
    for (size_t i = 0; i < p->nbypassing; i++)
        tpprof_json_string(j, p->bypassing[i]);
    tpprof_json_array_end(j);
    tpprof_json_kv_int(j, "threads_unrecorded", s->threads_unrecorded);
    tpprof_json_kv_int(j, "events_unrecorded", s->events_unrecorded);
    // What the recording is missing, as the text report and check say it.
    tpprof_gaps gaps;
    tpprof_profile_gaps(p, o->path, NULL, &gaps);
    tpprof_json_key(j, "missing");
    tpprof_json_array_begin(j);
    for (size_t i = 0; i < gaps.n; i++)
        tpprof_json_string(j, gaps.reason[i]);
    tpprof_json_array_end(j);
    tpprof_json_object_end(j);
}

// The "summary" object, the verdict included.
static void json_summary(tpprof_json *j, const tpprof_profile *p) {
    const tpprof_summary *s = &p->summary;
    tpprof_json_key(j, "summary");
    tpprof_json_object_begin(j);
    tpprof_json_kv_uint(j, "allocations", s->allocations);
    tpprof_json_kv_uint(j, "frees", s->frees);
    tpprof_json_kv_uint(j, "total_bytes", s->total_bytes);
    tpprof_json_kv_uint(j, "temporary_count", s->temporary_count);
    tpprof_json_kv_uint(j, "temporary_bytes", s->temporary_bytes);
    tpprof_json_kv_uint(j, "peak_bytes", s->peak_bytes);
    tpprof_json_kv_int(j, "peak_time_ns", s->peak_time_ns);
    tpprof_json_kv_uint(j, "leaked_bytes", s->leaked_bytes);
    tpprof_json_kv_uint(j, "leaked_count", s->leaked_count);
    tpprof_json_kv_uint(j, "lost_bytes", s->lost_bytes);
    tpprof_json_kv_uint(j, "lost_count", s->lost_count);
    tpprof_json_kv_uint(j, "reachable_bytes", s->reachable_bytes);
    tpprof_json_kv_uint(j, "reachable_count", s->reachable_count);
    tpprof_json_kv_uint(j, "unscanned_bytes", s->unscanned_bytes);
    tpprof_json_kv_uint(j, "unscanned_count", s->unscanned_count);
    tpprof_json_kv_uint(j, "reserved_total_bytes", s->reserved_total_bytes);
    tpprof_json_kv_uint(j, "reserved_count", s->reserved_count);
    tpprof_json_kv_uint(j, "reserved_bytes", s->reserved_bytes);
    tpprof_json_kv_uint(j, "libc_bytes", s->libc_bytes);
    tpprof_json_kv_uint(j, "libc_count", s->libc_count);
    tpprof_json_kv_bool(j, "live_from_sites", s->live_from_sites);
    tpprof_verdict v;
    tpprof_verdict_of(p, &v);
    tpprof_json_kv_string(j, "verdict", tpprof_verdict_name(v.verdict));
    tpprof_json_kv_uint(j, "verdict_lost_bytes", v.lost_bytes);
    tpprof_json_kv_uint(j, "verdict_lost_count", v.lost_count);
    tpprof_json_kv_string(j, "reachable_top_module", v.holder[0] ? v.holder : NULL);
    tpprof_json_kv_uint(j, "reachable_top_module_bytes", v.holder_bytes);
    tpprof_json_object_end(j);
}

static void json_report(const tpprof_profile *p, const report_options *o,
                        const tpprof_report_diff *diff) {
    tpprof_json j;
    const tpprof_summary *s = &p->summary;
    tpprof_json_document_begin(&j, stdout, "tpprof-report", 1, o->shown);

    json_program(&j, p, o);
    json_summary(&j, p);

    if (o->ninputs > 1) {
        tpprof_json_key(&j, "recordings");
        tpprof_json_array_begin(&j);
        for (size_t i = 0; i < o->ninputs; i++) {
            tpprof_verdict one;
            if (input_verdict(o, o->inputs[i], &one) != 0)
                continue; // (merge read it a moment ago)
            tpprof_json_object_begin_inline(&j);
            tpprof_json_kv_string(&j, "path", o->inputs[i]);
            tpprof_json_kv_string(&j, "verdict", tpprof_verdict_name(one.verdict));
            tpprof_json_kv_uint(&j, "lost_bytes", one.lost_bytes);
            tpprof_json_kv_uint(&j, "lost_count", one.lost_count);
            tpprof_json_kv_uint(&j, "reachable_bytes", one.reachable_bytes);
            tpprof_json_object_end(&j);
        }
        tpprof_json_array_end(&j);
    }
    if (o->suppressions_path) {
        tpprof_json_key(&j, "suppressions");
        tpprof_json_array_begin(&j);
        for (size_t i = 0; i < o->suppressions.n; i++) {
            const tpprof_suppression *r = &o->suppressions.rules[i];
            tpprof_json_object_begin_inline(&j);
            tpprof_json_kv_string(&j, "pattern", r->pattern);
            tpprof_json_kv_uint(&j, "bytes", r->bytes);
            tpprof_json_kv_uint(&j, "count", r->count);
            tpprof_json_kv_uint(&j, "stacks", r->groups);
            tpprof_json_object_end(&j);
        }
        tpprof_json_array_end(&j);
    }
    tpprof_report_device_json(&j, p, o->devices, (size_t)o->top);
    if (o->sections & SECTION_LEAKS) {
        tpprof_json_key(&j, "leaks");
        tpprof_json_array_begin(&j);
        for (size_t i = 0; i < p->nleaks; i++) {
            const tpprof_leak *l = &p->leaks[i];
            tpprof_json_object_begin(&j);
            tpprof_json_kv_uint(&j, "bytes", l->bytes);
            tpprof_json_kv_uint(&j, "count", l->count);
            tpprof_json_kv_string(&j, "kind", tpprof_profile_kind(p, l->kind));
            tpprof_json_kv_string(&j, "reachability",
                                  tpprof_reach_name(l->reachability));
            json_stack(&j, p, l->stack_id);
            tpprof_report_leak_storages_json(&j, o->backings, o->nbackings, l);
            tpprof_json_object_end(&j);
        }
        tpprof_json_array_end(&j);
    }
    if (o->sections & SECTION_PEAK) {
        tpprof_json_key(&j, "peak");
        tpprof_json_object_begin(&j);
        tpprof_json_kv_uint(&j, "bytes", s->peak_bytes);
        tpprof_json_kv_int(&j, "time_ns", s->peak_time_ns);
        json_site_list(&j, p, o, "sites", by_peak, live_at_peak);
        tpprof_json_object_end(&j);
    }
    if (o->sections & SECTION_TOP) {
        json_site_list(&j, p, o, "top", by_bytes, NULL);
        json_site_list(&j, p, o, "top_by_calls", by_calls, NULL);
    }
    if (o->sections & SECTION_TEMPORARY)
        json_site_list(&j, p, o, "temporary", by_temp, has_temporary);
    if (o->sections & SECTION_TIMELINE) {
        tpprof_sample *v = NULL;
        size_t n = 0;
        if (tpprof_timeline_load(p->db, 200, &v, &n) != 0)
            fprintf(stderr, "tpprof report: warning: %s\n", tpprof_error());
        tpprof_json_key(&j, "timeline");
        tpprof_json_array_begin(&j);
        for (size_t i = 0; i < n; i++) {
            tpprof_json_object_begin_inline(&j);
            tpprof_json_kv_int(&j, "time_ns", v[i].time_ns);
            tpprof_json_kv_uint(&j, "heap_bytes", v[i].heap_bytes);
            tpprof_json_kv_uint(&j, "heap_blocks", v[i].heap_blocks);
            tpprof_json_kv_uint(&j, "mmap_bytes", v[i].mmap_bytes);
            tpprof_json_kv_uint(&j, "rss_bytes", v[i].rss_bytes);
            tpprof_json_kv_uint(&j, "alloc_calls", v[i].alloc_calls);
            tpprof_json_kv_uint(&j, "free_calls", v[i].free_calls);
            tpprof_json_object_end(&j);
        }
        tpprof_json_array_end(&j);
        free(v);
    }
    if (o->sections & SECTION_STORAGES)
        tpprof_report_storages_json(&j, p, o->tensors);
    if (o->sections & SECTION_LIFETIMES)
        tpprof_report_lifetimes_json(&j, o->tensors, (size_t)o->top);
    if (diff)
        tpprof_report_diff_json(&j, diff);
    tpprof_json_object_end(&j);
    tpprof_json_finish(&j);
}

// ---------------------------------------------------------------------------
// Several recordings

typedef struct report_inputs {
    tpprof_inputs in; // what was named
    char *merged;     // the temporary merged database (owned), NULL for one input
    char *dir;        // its directory (owned)
    char shown[512];
} report_inputs;

static int merge_inputs(report_inputs *in) {
    const char *tmp = getenv("TMPDIR");
    char dir[600];
    if (!tmp || !*tmp || strlen(tmp) > 500)
        tmp = "/tmp";
    snprintf(dir, sizeof dir, "%s/tpprof-report-XXXXXX", tmp);
    if (!mkdtemp(dir))
        return tpprof_error_set("cannot make a temporary directory in %s: %s", tmp, strerror(errno));
    in->dir = strdup(dir);
    in->merged = malloc(strlen(dir) + sizeof "/merged.db");
    if (!in->dir || !in->merged)
        return tpprof_error_set("out of memory");
    sprintf(in->merged, "%s/merged.db", dir);
    int n = snprintf(in->shown, sizeof in->shown, "%zu recordings:", in->in.n);
    for (size_t i = 0; i < in->in.n && n > 0 && (size_t)n < sizeof in->shown; i++)
        n += snprintf(in->shown + n, sizeof in->shown - (size_t)n, " %s", in->in.v[i]);
    return tpprof_merge(in->merged, in->in.v, in->in.n, false, true, NULL);
}

static void inputs_free(report_inputs *in) {
    if (in->merged) {
        unlink(in->merged);
        free(in->merged);
    }
    if (in->dir) {
        rmdir(in->dir);
        free(in->dir);
    }
    tpprof_inputs_free(&in->in);
}

// ---------------------------------------------------------------------------
// Command

// Reads the command line into o and chosen (the section flags named) and
// merges several recordings (in). 0; 1 after --help; -1 + error.
static int report_args(int argc, char **argv, report_inputs *in, report_options *o, unsigned *chosen) {
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        int r;
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(tpprof_usage_report, stdout);
            return 1;
        } else if (strcmp(argv[i], "--leaks") == 0) {
            *chosen |= SECTION_LEAKS;
        } else if (strcmp(argv[i], "--peak") == 0) {
            *chosen |= SECTION_PEAK;
        } else if (strcmp(argv[i], "--temporary") == 0) {
            *chosen |= SECTION_TEMPORARY;
        } else if (strcmp(argv[i], "--timeline") == 0) {
            *chosen |= SECTION_TIMELINE;
        } else if (strcmp(argv[i], "--storages") == 0) {
            *chosen |= SECTION_STORAGES;
        } else if (strcmp(argv[i], "--lifetimes") == 0) {
            *chosen |= SECTION_LIFETIMES;
        } else if ((r = tpprof_opt(argc, argv, &i, "--top", &v)) != 0) {
            if (r < 0 || tpprof_parse_count("--top", v, &o->top) != 0)
                return -1;
            *chosen |= SECTION_TOP;
        } else if ((r = tpprof_opt(argc, argv, &i, "--diff", &v)) != 0) {
            if (r < 0)
                return -1;
            o->diff = v;
        } else if ((r = tpprof_opt(argc, argv, &i, "--format", &v)) != 0) {
            if (r < 0)
                return -1;
            o->json = strcmp(v, "json") == 0;
            o->folded = strcmp(v, "folded") == 0;
            o->html = strcmp(v, "html") == 0;
            if (!o->json && !o->folded && !o->html && strcmp(v, "text") != 0) {
                tpprof_error_set("--format: expected text, json, folded or html, got '%s'", v);
                return -1;
            }
        } else if ((r = tpprof_opt(argc, argv, &i, "--suppressions", &v)) != 0) {
            if (r < 0 || tpprof_suppressions_load(v, &o->suppressions) != 0)
                return -1;
            o->suppressions_path = v; // several: each file's rules appended
        } else if ((r = tpprof_opt(argc, argv, &i, "--device", &v)) != 0) {
            uint64_t ordinal = 0;
            if (r < 0 || tpprof_parse_count("--device", v, &ordinal) != 0)
                return -1;
            if (ordinal > INT32_MAX) {
                tpprof_error_set("--device: %s is not a device ordinal", v);
                return -1;
            }
            o->device_filtered = true;
            o->device = (int32_t)ordinal;
        } else if ((r = tpprof_opt(argc, argv, &i, "-o", &v)) != 0 ||
                   (r = tpprof_opt(argc, argv, &i, "--output", &v)) != 0) {
            if (r < 0)
                return -1;
            o->output = v;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            tpprof_error_set("unknown option '%s' (see tpprof report --help)", argv[i]);
            return -1;
        } else if (tpprof_inputs_add(&in->in, argv[i]) != 0) {
            return -1;
        }
    }
    // Several recordings (or a glob naming several): merged into a
    // temporary database, reported as one program (tpprof merge).
    if (in->in.n == 1) {
        o->path = in->in.v[0];
    } else if (in->in.n > 1) {
        if (merge_inputs(in) != 0)
            return -1;
        o->path = in->merged;
    }
    o->shown = in->in.n > 1 ? in->shown : o->path;
    o->inputs = in->in.v;
    o->ninputs = in->in.n;
    if (!o->path) {
        tpprof_error_set("missing the database (usage: tpprof report DB [options])");
        return -1;
    }
    o->sections = *chosen ? *chosen : SECTION_ALL;
    if (o->html)
        o->sections = SECTION_ALL | SECTION_TENSORS; // the page has every section
    return 0;
}

// The recording and what the sections read (owned; report_data_free).
typedef struct report_data {
    tpprof_profile *p;
    tpprof_tensors tensors;
    bool tensors_loaded, devices_loaded;
    tpprof_backing *backings; // (only the leaks section shows them)
    tpprof_devices devices;
    tpprof_report_diff diff; // --diff
} report_data;

// Loads the recording o names and what its sections read into d, and
// points o at them. 0, or -1 with the message printed (d is then for
// report_data_free still).
static int report_load(report_options *o, unsigned chosen, report_data *d) {
    d->p = tpprof_profile_load(o->path);
    if (!d->p)
        goto failed;
    // Suppressed leaks leave every section and figure, the verdict included.
    tpprof_suppressions_apply(d->p, &o->suppressions);
    if (tpprof_tensors_load(d->p->db, &d->tensors) != 0)
        goto failed;
    d->tensors_loaded = true;
    // By default the tensor sections appear when the recording has tensors;
    // JSON always has their keys.
    if (!chosen && (o->json || d->tensors.attached || d->tensors.nstorages))
        o->sections |= SECTION_TENSORS;
    o->tensors = &d->tensors;
    tpprof_backing *backings = NULL;
    if ((o->sections & SECTION_LEAKS) && tpprof_backings_load(d->p->db, &d->tensors, &backings, &o->nbackings) != 0)
        goto failed;
    o->backings = d->backings = backings;
    if (tpprof_devices_load(d->p, o->device_filtered, o->device, &d->devices) != 0)
        goto failed;
    d->devices_loaded = true;
    o->devices = &d->devices;
    if (o->diff && tpprof_report_diff_load(&d->diff, d->p, o->diff, o->top) != 0) {
        fprintf(stderr, "tpprof report: --diff: %s\n", tpprof_error());
        return -1;
    }
    return 0;
failed:
    fprintf(stderr, "tpprof report: %s\n", tpprof_error());
    return -1;
}

static void report_data_free(report_data *d) {
    if (d->devices_loaded)
        tpprof_devices_free(&d->devices);
    tpprof_report_diff_free(&d->diff);
    free(d->backings);
    if (d->tensors_loaded)
        tpprof_tensors_free(&d->tensors);
    tpprof_profile_free(d->p);
}

// The text report: the summary and the chosen sections.
static void report_text(const report_options *o, const report_data *d) {
    const tpprof_profile *p = d->p;
    text_summary(p, o);
    if (o->sections & SECTION_LEAKS) {
        text_leaks(p, o);
        tpprof_report_device_leaks_text(p, &d->devices, (size_t)o->top);
    }
    if (o->sections & SECTION_PEAK) {
        text_peak(p, o);
        tpprof_report_device_peak_text(p, &d->devices, (size_t)o->top);
    }
    if (o->sections & SECTION_TOP) {
        text_top(p, o);
        tpprof_report_device_top_text(p, &d->devices, (size_t)o->top);
    }
    if (o->sections & SECTION_TEMPORARY)
        text_temporary(p, o);
    if (o->sections & SECTION_TIMELINE)
        text_timeline(p);
    if (o->sections & SECTION_STORAGES)
        tpprof_report_storages_text(p, &d->tensors, (size_t)o->top);
    if (o->sections & SECTION_LIFETIMES)
        tpprof_report_lifetimes_text(&d->tensors, (size_t)o->top);
    if (o->diff)
        tpprof_report_diff_text(&d->diff);
}

// Writes the report in o's format, to -o's file or stdout. The exit status.
static int report_write(const report_options *o, const report_data *d, unsigned chosen) {
    // -o: the output file replaces stdout for every format (opened only now,
    // so a bad database leaves no empty file behind).
    FILE *file = NULL, *saved_stdout = stdout;
    if (o->output && !(file = fopen(o->output, "w"))) {
        fprintf(stderr, "tpprof report: cannot write %s: %s\n", o->output, strerror(errno));
        return TPPROF_EXIT_USAGE;
    }
    if (file)
        stdout = file;
    int status = TPPROF_EXIT_OK;
    if (o->html) {
        if (tpprof_report_html(stdout, d->p, &d->tensors, d->backings, o->nbackings, o->path) != 0) {
            fprintf(stderr, "tpprof report: %s\n", tpprof_error());
            status = TPPROF_EXIT_USAGE;
        }
    } else if (o->folded) {
        tpprof_report_folded(d->p, chosen & SECTION_LEAKS       ? TPPROF_FOLDED_LEAKS
                                   : chosen & SECTION_PEAK      ? TPPROF_FOLDED_PEAK
                                   : chosen & SECTION_TEMPORARY ? TPPROF_FOLDED_TEMPORARY
                                                                : TPPROF_FOLDED_ALLOCATED);
    } else if (o->json) {
        json_report(d->p, o, o->diff ? &d->diff : NULL);
    } else {
        report_text(o, d);
    }
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "tpprof report: cannot write %s: %s\n", o->output ? o->output : "stdout", strerror(errno));
        status = TPPROF_EXIT_USAGE;
    }
    if (file) {
        stdout = saved_stdout;
        if (fclose(file) != 0 && status == TPPROF_EXIT_OK) {
            fprintf(stderr, "tpprof report: cannot write %s: %s\n", o->output, strerror(errno));
            status = TPPROF_EXIT_USAGE;
        }
    }
    return status;
}

static int report_main(int argc, char **argv, report_inputs *in) {
    report_options o = {.top = 10};
    unsigned chosen = 0;
    int r = report_args(argc, argv, in, &o, &chosen);
    if (r != 0) {
        if (r < 0)
            fprintf(stderr, "tpprof report: %s\n", tpprof_error());
        tpprof_suppressions_free(&o.suppressions);
        return r < 0 ? TPPROF_EXIT_USAGE : TPPROF_EXIT_OK;
    }
    report_data d = {0};
    int status = report_load(&o, chosen, &d) == 0 ? report_write(&o, &d, chosen) : TPPROF_EXIT_USAGE;
    report_data_free(&d);
    tpprof_suppressions_free(&o.suppressions);
    return status;
}

int tpprof_cmd_report(int argc, char **argv) {
    report_inputs in = {0};
    int status = report_main(argc, argv, &in);
    inputs_free(&in);
    return status;
}
