/*
 * bench/many_sites.c - tens of thousands of distinct allocation stacks, all
 * busy: what a big program (a framework with its dispatcher, many models)
 * looks like to tpprof's writer. Each call walks a random path down a
 * binary recursion 16 deep, each level with two call sites, and allocates
 * and frees at the bottom: up to 65,536 stacks of 18+ frames.
 *
 * Under tpprof, check what the recording kept:
 *     LD_PRELOAD=build/src/tpprof/libtpprof.so TPPROF_OUTPUT=/tmp/ms.db build/bench/many_sites 5
 *     sqlite3 /tmp/ms.db "SELECT count(*), sum(alloc_count) FROM sites;
 *                         SELECT value FROM meta WHERE key = 'dropped_events'"
 * sum(alloc_count) is the printed number of calls (+ stdio's buffer), and
 * dropped_events 0: the writer's periodic commits drain the rings while
 * they write (src/tpprof/store/store.c), and grow their period when they are slow (writer.c).
 *
 * Usage: many_sites [seconds] (default 3)
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static void *volatile sink;
static volatile int side;

__attribute__((noinline)) static void level(unsigned path, int depth) {
    if (depth == 0) {
        sink = malloc(32);
        free(sink);
        return;
    }
    // Two call sites (the stores after them keep the compiler from merging them).
    if (path & 1) {
        level(path >> 1, depth - 1);
        side = 1;
    } else {
        level(path >> 1, depth - 1);
        side = 2;
    }
}

int main(int argc, char **argv) {
    int seconds = argc > 1 ? atoi(argv[1]) : 3;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    unsigned long calls = 0;
    unsigned x = 1;
    do {
        for (int i = 0; i < 10000; i++) {
            x = x * 1103515245u + 12345u;
            level(x >> 8, 16);
            calls++;
        }
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while (t.tv_sec - t0.tv_sec < seconds);
    printf("calls=%lu seconds=%d\n", calls, seconds);
    return 0;
}
