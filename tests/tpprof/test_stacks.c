// test_stacks.c: unit tests of the lock-free stack depot (stacks.c): the same
// frames always get the same id, different frames different ids, from many
// threads at once, and an id gives its frames back.
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "record/rings.h"
#include "record/stacks.h"
#include "../check.h"

// stacks.c registers its per-thread cache with the thread's ring struct,
// which these threads do not have.
__thread struct tpprof_thread *tpprof_self;

enum { STACKS = 4000, THREADS = 4, DEPTH = 24 };
static uintptr_t frames[STACKS][DEPTH];
static int depth[STACKS];
static uint32_t ids[THREADS][STACKS];

// Stack k: depth 1..24, frames derived from k; stacks 2j and 2j+1 share all
// but their innermost frame, like two call sites in one function.
static void make_stacks(void) {
    for (int k = 0; k < STACKS; k++) {
        depth[k] = 1 + (k / 2) % DEPTH;
        for (int i = 0; i < depth[k]; i++) frames[k][i] = 0x400000u + (uintptr_t)((k / 2) * 131 + i * 7) * 16;
        frames[k][0] += (uintptr_t)(k & 1) * 4;
    }
}

static void *intern_all(void *arg) {
    int t = (int)(intptr_t)arg;
    for (int r = 0; r < 3; r++) // again and again: cache hits and table hits
        for (int j = 0; j < STACKS; j++) {
            int k = (j * 7 + t * 1013) % STACKS; // each thread in its own order
            uint32_t id = tpprof_stack_intern(frames[k], depth[k]);
            if (r == 0) ids[t][k] = id;
            else if (ids[t][k] != id) ids[t][k] = 0;
        }
    return NULL;
}

static void test_same_frames_same_id_across_threads(void) {
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++) pthread_create(&th[t], NULL, intern_all, (void *)(intptr_t)t);
    for (int t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
    for (int k = 0; k < STACKS; k++) {
        CHECK_MSG(ids[0][k] != 0, "stack %d got an id", k);
        for (int t = 1; t < THREADS; t++) CHECK_MSG(ids[t][k] == ids[0][k], "stack %d: thread %d disagrees", k, t);
    }
}

static void test_different_frames_different_ids(void) {
    uint32_t n = tpprof_stack_count();
    CHECK_MSG(n == STACKS + 1, "%u ids for %d stacks (ids start at 1)", n, STACKS);
    char *seen = calloc(n + 1, 1);
    for (int k = 0; k < STACKS; k++) {
        uint32_t id = ids[0][k];
        CHECK_MSG(id < n + 1 && !seen[id], "id %u given twice", id);
        if (id < n + 1) seen[id] = 1;
    }
    free(seen);
}

static void test_id_gives_its_frames_back(void) {
    for (int k = 0; k < STACKS; k++) {
        int got;
        const uintptr_t *f = tpprof_stack_frames(ids[0][k], &got);
        CHECK_MSG(got == depth[k] && f && memcmp(f, frames[k], sizeof(uintptr_t) * (size_t)got) == 0, "frames of %d", k);
    }
    int got;
    CHECK_MSG(tpprof_stack_frames(0, &got) == NULL && got == 0, "id 0 has no frames");
}

// A thread with more hot stacks than its cache's sets hold 4 to a set
// (40,000 in the big cache's 65,536 entries: about 6% of them do not fit
// their set) finds nearly all of them in its cache once they are known:
// a stack pushed out of its full set waits in its second set. Each lookup
// still gives the stack's own id.
enum { MANY = 40000, MANY_DEPTH = 12 };
static void test_a_cache_fuller_than_its_sets_still_finds_its_stacks(void) {
    static uintptr_t f[MANY][MANY_DEPTH];
    static uint32_t first[MANY];
    for (int k = 0; k < MANY; k++)
        for (int i = 0; i < MANY_DEPTH; i++) f[k][i] = 0x7f0000000000u + (uintptr_t)(k * 977 + i * 13) * 8;
    int wrong = 0;
    uint32_t before = 0;
    for (int r = 0; r < 4; r++) {
        if (r == 3) before = tpprof_stack_cache_misses();
        for (int k = 0; k < MANY; k++) {
            uint32_t id = tpprof_stack_intern(f[k], MANY_DEPTH);
            if (r == 0) first[k] = id;
            else wrong += id != first[k];
        }
    }
    uint32_t missed = tpprof_stack_cache_misses() - before;
    CHECK_MSG(wrong == 0, "%d lookups gave another id", wrong);
    CHECK_MSG(missed < MANY / 100, "%u of %d lookups missed the cache", missed, MANY);
    for (int k = 0; k < MANY; k += 97) {
        int got;
        const uintptr_t *fr = tpprof_stack_frames(first[k], &got);
        CHECK_MSG(got == MANY_DEPTH && fr && memcmp(fr, f[k], sizeof f[k]) == 0, "frames of %d", k);
    }
}

int main(void) {
    if (!tpprof_stacks_init()) return 1;
    make_stacks();
    test_same_frames_same_id_across_threads();
    test_different_frames_different_ids();
    test_id_gives_its_frames_back();
    test_a_cache_fuller_than_its_sets_still_finds_its_stacks();
    return CHECK_DONE();
}
