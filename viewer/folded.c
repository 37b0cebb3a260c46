// folded.c: `tpprof report --format folded`: folded stacks
// ("main;parse;malloc_site 4096"), the input of flamegraph.pl, inferno and
// speedscope. Frames are function names only, so that the calls of one
// function merge into one box; a frame without a name is its module.
#include "viewer.h"

#include <stdio.h>

#define MAX_FRAMES 2048 // 128 recorded frames, each possibly several inlined ones

static void folded_frame(FILE *out, const tpprof_frame *f) {
    const char *name = f->function;
    if (!name) {
        fprintf(out, "[%s]", f->module ? tpprof_basename(f->module) : "unknown");
        return;
    }
    for (const char *c = name; *c; c++)
        fputc(*c == ';' || *c == '\n' ? '_' : *c, out); // ';' separates frames
}

static void folded_line(const tpprof_profile *p, int64_t stack_id, uint64_t value) {
    static tpprof_frame frames[MAX_FRAMES];
    if (value == 0)
        return;
    size_t n = tpprof_stacks_frames(p->stacks, stack_id, frames, MAX_FRAMES, NULL);
    if (n == 0) {
        printf("[no stack] %llu\n", (unsigned long long)value);
        return;
    }
    for (size_t i = n; i-- > 0;) {
        folded_frame(stdout, &frames[i]);
        if (i)
            putchar(';');
    }
    printf(" %llu\n", (unsigned long long)value);
}

void tpprof_report_folded(const tpprof_profile *p, tpprof_folded_value what) {
    if (what == TPPROF_FOLDED_LEAKS) {
        for (size_t i = 0; i < p->nleaks; i++)
            folded_line(p, p->leaks[i].stack_id, p->leaks[i].bytes);
        return;
    }
    for (size_t i = 0; i < p->nsites; i++) {
        const tpprof_site *s = &p->sites[i];
        uint64_t v = what == TPPROF_FOLDED_PEAK ? s->peak_bytes
                     : what == TPPROF_FOLDED_TEMPORARY ? s->temp_count
                                                       : s->alloc_bytes;
        folded_line(p, s->stack_id, v);
    }
}
