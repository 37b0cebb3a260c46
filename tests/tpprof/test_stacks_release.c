// test_stacks_release.c: the writer's tpprof_stack_release (stacks.c): once
// every stack of an arena chunk is released its 1 MiB goes (a few are kept
// for reuse: test_stacks_reuse.c; only the chunk
// being filled stays), a released id has no frames, the others keep theirs,
// and a stack interned again after its release keeps its id; so whatever
// the order of the releases.
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "record/rings.h"
#include "record/stacks.h"
#include "../check.h"

__thread struct tpprof_thread *tpprof_self;

enum { STACKS = 100000, DEPTH = 16 };
static uintptr_t frames[STACKS][DEPTH];
static uint32_t ids[STACKS];

int main(void) {
    if (!tpprof_stacks_init()) return 1;
    for (int k = 0; k < STACKS; k++)
        for (int i = 0; i < DEPTH; i++) frames[k][i] = 0x400000u + ((uintptr_t)k * DEPTH + (uintptr_t)i) * 16;
    for (int k = 0; k < STACKS; k++) ids[k] = tpprof_stack_intern(frames[k], DEPTH);
    size_t before = tpprof_stack_arena_chunks(); // 100,000 x 136 bytes: 13 chunks
    CHECK_MSG(before >= 12, "%zu chunks for %d stacks of %d frames", before, STACKS, DEPTH);
    // All but the last 1000: their chunks go, the last chunk stays.
    for (int k = 0; k < STACKS - 1000; k++) tpprof_stack_release(ids[k]);
    size_t after = tpprof_stack_arena_chunks();
    CHECK_MSG(after <= 2, "%zu chunks still mapped after releasing all but 1000 stacks (%zu before)", after, before);
    int n, bad = 0;
    for (int k = 0; k < STACKS - 1000; k++)
        if (tpprof_stack_frames(ids[k], &n) || n != 0) bad++;
    CHECK_MSG(bad == 0, "%d released ids still have frames", bad);
    for (int k = STACKS - 1000; k < STACKS; k++) {
        const uintptr_t *f = tpprof_stack_frames(ids[k], &n);
        if (!f || n != DEPTH || memcmp(f, frames[k], sizeof frames[k]) != 0) bad++;
    }
    CHECK_MSG(bad == 0, "%d of the stacks not released lost their frames", bad);
    // Interned again (the per-thread cache holds the last ones; the first
    // ones come from the table): the same id, frames or not.
    bad = 0;
    for (int k = 0; k < STACKS; k++)
        if (tpprof_stack_intern(frames[k], DEPTH) != ids[k]) bad++;
    CHECK_MSG(bad == 0, "%d stacks got another id after release", bad);
    tpprof_stack_release(0); // no-ops
    tpprof_stack_release(ids[0]);
    // Released newest first (as a writer merging many threads' rings may
    // release a chunk's last stacks after later chunks' first): the
    // chunks still go as each one's last stack is released.
    static uintptr_t more[STACKS][DEPTH];
    static uint32_t more_ids[STACKS];
    for (int k = 0; k < STACKS; k++)
        for (int i = 0; i < DEPTH; i++) more[k][i] = 0x90000000u + ((uintptr_t)k * DEPTH + (uintptr_t)i) * 16;
    for (int k = 0; k < STACKS; k++) more_ids[k] = tpprof_stack_intern(more[k], DEPTH);
    size_t grown = tpprof_stack_arena_chunks();
    for (int k = STACKS - 1001; k >= 0; k--) tpprof_stack_release(more_ids[k]);
    size_t left = tpprof_stack_arena_chunks();
    CHECK_MSG(grown >= after + 12 && left <= after + 2, "newest first: %zu chunks, %zu after releasing all but 1000",
              grown, left);
    return CHECK_DONE();
}
