// gaps.c: what a recording is missing, said once for every command.
//
// `tpprof check` vouches for a recording only when nothing is missing from
// it; `report` and `run`'s summary name the same gaps in the same words,
// because they all come from tpprof_profile_gaps. The words keep tpprof's
// own failures (a write that failed, a full file system, dropped events, a
// full stack table) apart from the program's (a SIGKILL), and never blame
// the program for tpprof's.
//
// This file reads only what profile.c loaded (docs/schema.md's meta keys)
// and whether the file system the recording is on is full; it prints nothing.
#define _GNU_SOURCE
#include "viewer.h"

#include <signal.h>
#include <stdarg.h>
#include <string.h>

static void add(tpprof_gaps *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void add(tpprof_gaps *g, const char *fmt, ...) {
    if (g->n == TPPROF_GAPS_MAX)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g->reason[g->n++], sizeof g->reason[0], fmt, ap);
    va_end(ap);
}

// Why the recording stops before the end, as one clause.
static void incomplete(const tpprof_profile *p, const char *path, const tpprof_program_end *end,
                       tpprof_gaps *g) {
    const tpprof_summary *s = &p->summary;
    char full[128];
    bool is_full = path && tpprof_fs_full(path, full, sizeof full);
    if (s->still_running)
        add(g, "incomplete: the program is still running (this is what it had flushed so far)");
    else if (end && end->signaled && (end->value == SIGKILL || end->value == SIGSTOP))
        add(g, "incomplete: the program was killed by signal %d (%s), which tpprof cannot catch; what it "
               "did after the last flush is missing", end->value, strsignal(end->value));
    else if (end && end->signaled)
        add(g, "incomplete: the program was killed by signal %d (%s) before tpprof finished writing",
            end->value, strsignal(end->value));
    else if (end)
        add(g, "incomplete: tpprof stopped writing before the program ended (a write failed: %s)",
            is_full ? full : "tpprof's warning while the program ran says why");
    else if (is_full)
        add(g, "incomplete: tpprof could not finish writing it: %s", full);
    else
        add(g, "incomplete: it ends before the program did (the program was killed by a signal tpprof "
               "cannot catch, such as SIGKILL, or tpprof could not write)");
}

size_t tpprof_profile_gaps(const tpprof_profile *p, const char *path, const tpprof_program_end *end,
                           tpprof_gaps *g) {
    const tpprof_summary *s = &p->summary;
    g->n = 0;
    if (!s->complete)
        incomplete(p, path, end, g);
    if (s->dropped_events)
        add(g, "%lld events were dropped while recording (a dropped free makes a freed block look leaked)",
            (long long)s->dropped_events);
    if (s->threads_unrecorded)
        add(g, "%lld threads were not recorded (tpprof could not give them an event buffer)",
            (long long)s->threads_unrecorded);
    if (s->events_unrecorded)
        add(g, "%lld allocations and frees were not recorded (%s)", (long long)s->events_unrecorded,
            s->threads_unrecorded ? "those threads', or a signal handler's made inside one of tpprof's hooks"
                                  : "a signal handler's, made while its thread was inside one of tpprof's hooks");
    if (s->stacks_full)
        add(g, "%lld allocations have no stack (tpprof ran out of memory for the stack table)", (long long)s->stacks_full);
    if (s->complete && !s->leak_scanned && s->unscanned_count && p->end_reason &&
        strcmp(p->end_reason, "exit") == 0)
        add(g, "the leak scan did not finish: %llu blocks were not scanned",
            (unsigned long long)s->unscanned_count);
    if (p->malloc_owner)
        add(g, "%s defines its own malloc (a jemalloc or mimalloc linked in?): the allocations made "
               "through it were not recorded", p->malloc_owner);
    for (size_t i = 0; i < p->nbypassing; i++)
        add(g, "%s called the C library's allocator directly (loaded with RTLD_DEEPBIND?): its "
               "allocations were not recorded, and blocks it freed may look leaked", p->bypassing[i]);
    return g->n;
}

char *tpprof_gaps_join(const tpprof_gaps *g, char *out, size_t size) {
    size_t k = 0;
    out[0] = 0;
    for (size_t i = 0; i < g->n && k + 1 < size; i++) {
        int w = snprintf(out + k, size - k, "%s%s", i ? "; " : "", g->reason[i]);
        k += w > 0 ? (size_t)w : 0;
    }
    return out;
}
