// test_stacks_reuse.c: arena chunks the writer released (stacks.c) are kept,
// a few of them, and the chunks the arena reaches next are those, not fresh
// mappings: the kept ones stay capped, the new stacks written into them keep
// exactly their own frames (a reused chunk is not zeroed: a stale frame of
// an older stack must not show through), and every stack has its id.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "record/rings.h"
#include "record/stacks.h"
#include "../check.h"

__thread struct tpprof_thread *tpprof_self;

// 40,000 stacks of 40 frames: 328 bytes each, 13 MiB of arena; then as
// many, one in four of them 3 frames long: 10 MiB.
enum { STACKS = 40000, DEPTH = 40, SHORT = 3 };
static uintptr_t frames[2][STACKS][DEPTH];
static uint32_t ids[2][STACKS];

int main(void) {
    if (!tpprof_stacks_init()) return 1;
    for (int g = 0; g < 2; g++)
        for (int k = 0; k < STACKS; k++)
            for (int i = 0; i < DEPTH; i++)
                frames[g][k][i] = 0x400000u + (((uintptr_t)g * STACKS + (uintptr_t)k) * DEPTH + (uintptr_t)i) * 16;
    CHECK(tpprof_stack_arena_spares() == 0);
    for (int k = 0; k < STACKS; k++) ids[0][k] = tpprof_stack_intern(frames[0][k], DEPTH);
    for (int k = 0; k < STACKS; k++) tpprof_stack_release(ids[0][k]);
    size_t kept = tpprof_stack_arena_spares();
    CHECK_MSG(kept >= 4 && kept <= 8, "%zu chunks kept after releasing 12 full ones", kept);
    // Some of the next stacks are short (a stale longer record under them
    // would differ in its length word and its frames past the third).
    for (int k = 0; k < STACKS; k++) ids[1][k] = tpprof_stack_intern(frames[1][k], k % 4 == 3 ? SHORT : DEPTH);
    CHECK_MSG(tpprof_stack_arena_spares() == 0, "%zu chunks still kept while the arena took 10 new ones",
              tpprof_stack_arena_spares());
    int bad = 0, n;
    for (int k = 0; k < STACKS; k++) {
        int want = k % 4 == 3 ? SHORT : DEPTH;
        const uintptr_t *f = tpprof_stack_frames(ids[1][k], &n);
        if (!ids[1][k] || !f || n != want || memcmp(f, frames[1][k], (size_t)want * sizeof *f) != 0) bad++;
    }
    CHECK_MSG(bad == 0, "%d of %d stacks written into reused chunks read back wrong", bad, STACKS);
    // Released again: kept up to the cap, the rest unmapped.
    for (int k = 0; k < STACKS; k++) tpprof_stack_release(ids[1][k]);
    CHECK(tpprof_stack_arena_spares() <= 8);
    CHECK(tpprof_stack_arena_chunks() <= 1);
    return CHECK_DONE();
}
