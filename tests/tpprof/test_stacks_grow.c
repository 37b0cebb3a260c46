// test_stacks_grow.c: the stack depot (stacks.c) grows with the program: with
// a first table of 256 slots (TPPROF_TEST_STACK_SLOT_BITS=8), 200,000 distinct
// stacks from one thread and then from four at once all get an id that gives
// their frames back, none is counted as dropped, a stack interned before the
// growth keeps its id, and the depot made new tables to hold them.
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "record/rings.h"
#include "record/stacks.h"
#include "../check.h"

__thread struct tpprof_thread *tpprof_self;

enum { STACKS = 200000, THREADS = 4, DEPTH = 8 };
static uintptr_t (*frames)[DEPTH];
static int depth[STACKS];
static uint32_t *ids[THREADS];
static uint32_t first_ids[STACKS];

static void make_stacks(void) {
    frames = calloc(STACKS, sizeof *frames);
    for (int k = 0; k < STACKS; k++) {
        depth[k] = 1 + k % DEPTH;
        for (int i = 0; i < depth[k]; i++) frames[k][i] = 0x400000u + ((uintptr_t)k * DEPTH + (uintptr_t)i) * 16;
    }
}

static bool frames_of(uint32_t id, int k) {
    int got;
    const uintptr_t *f = tpprof_stack_frames(id, &got);
    return f && got == depth[k] && memcmp(f, frames[k], sizeof(uintptr_t) * (size_t)got) == 0;
}

static void test_one_thread_grows_and_keeps_ids(void) {
    int bad = 0;
    for (int k = 0; k < STACKS; k++) {
        first_ids[k] = tpprof_stack_intern(frames[k], depth[k]);
        if (!first_ids[k] || !frames_of(first_ids[k], k)) bad++;
    }
    CHECK_MSG(bad == 0, "%d of %d stacks without an id or with wrong frames", bad, STACKS);
    CHECK_MSG(tpprof_stack_count() == STACKS + 1, "%u ids for %d stacks", tpprof_stack_count(), STACKS);
    CHECK_MSG(tpprof_stack_levels() >= 8, "%d tables for %d stacks from a first of 256 slots", tpprof_stack_levels(),
              STACKS);
    CHECK_MSG(atomic_load(&tpprof_stacks_full) == 0, "%llu dropped", (unsigned long long)atomic_load(&tpprof_stacks_full));
    // In reverse order: the per-thread cache holds the last ones only, so
    // these go to the tables, the oldest (first level) ones last.
    int moved = 0;
    for (int k = STACKS - 1; k >= 0; k--)
        if (tpprof_stack_intern(frames[k], depth[k]) != first_ids[k]) moved++;
    CHECK_MSG(moved == 0, "%d stacks got another id the second time", moved);
}

static void *intern_all(void *arg) {
    int t = (int)(intptr_t)arg;
    for (int j = 0; j < STACKS; j++) {
        int k = (int)(((uint64_t)j * 7919 + (uint64_t)t * 104729) % STACKS);
        ids[t][k] = tpprof_stack_intern(frames[k], depth[k]);
    }
    return NULL;
}

static void test_threads_find_them(void) {
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++) {
        ids[t] = calloc(STACKS, sizeof *ids[t]);
        pthread_create(&th[t], NULL, intern_all, (void *)(intptr_t)t);
    }
    for (int t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
    int bad = 0;
    for (int t = 0; t < THREADS; t++)
        for (int k = 0; k < STACKS; k++)
            if (ids[t][k] != first_ids[k]) bad++;
    CHECK_MSG(bad == 0, "%d lookups of known stacks from 4 threads gave another id", bad);
    CHECK_MSG(tpprof_stack_count() == STACKS + 1, "%u ids after the threads", tpprof_stack_count());
}

// New stacks from four threads at once while the depot grows: each gets an
// id with its frames (two threads racing with a new table may each give one
// stack an id: allowed, the writer merges them), none dropped.
static void *intern_new(void *arg) {
    int t = (int)(intptr_t)arg;
    for (int j = 0; j < STACKS; j++) {
        int k = (int)(((uint64_t)j * 7919 + (uint64_t)t * 104729) % STACKS);
        uintptr_t f[DEPTH + 1];
        memcpy(f, frames[k], sizeof(uintptr_t) * (size_t)depth[k]);
        f[depth[k]] = 0x7f0000000000u; // another caller: a new stack
        uint32_t id = tpprof_stack_intern(f, depth[k] + 1);
        int got;
        const uintptr_t *back = tpprof_stack_frames(id, &got);
        ids[t][k] = back && got == depth[k] + 1 && memcmp(back, f, sizeof(uintptr_t) * (size_t)got) == 0 ? id : 0;
    }
    return NULL;
}

static void test_threads_add_at_once(void) {
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++) pthread_create(&th[t], NULL, intern_new, (void *)(intptr_t)t);
    for (int t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
    int bad = 0;
    for (int t = 0; t < THREADS; t++)
        for (int k = 0; k < STACKS; k++)
            if (!ids[t][k]) bad++;
    CHECK_MSG(bad == 0, "%d new stacks from 4 threads without an id or with wrong frames", bad);
    uint32_t n = tpprof_stack_count() - 1 - STACKS;
    CHECK_MSG(n >= STACKS && n < STACKS + STACKS / 10, "%u ids for %d new stacks", n, STACKS);
    CHECK_MSG(atomic_load(&tpprof_stacks_full) == 0, "%llu dropped", (unsigned long long)atomic_load(&tpprof_stacks_full));
}

int main(void) {
    setenv("TPPROF_TEST_STACK_SLOT_BITS", "8", 1);
    if (!tpprof_stacks_init()) return 1;
    make_stacks();
    test_one_thread_grows_and_keeps_ids();
    test_threads_find_them();
    test_threads_add_at_once();
    return CHECK_DONE();
}
