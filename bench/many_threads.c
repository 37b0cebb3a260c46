/*
 * bench/many_threads.c - many threads allocating at once, for the writer's
 * merge of many rings (bench/tpprof_overhead.py's "many_threads" rows).
 *
 * THREADS threads (default 1000) start together and share TOTAL
 * malloc/free pairs of 64..163 B (default 2,000,000) between them, each
 * handing a block to whichever thread comes next through a shared slot one
 * time in eight, so the threads' records on one address stripe (glibc's
 * few arenas) interleave. Natively this is a few tens of milliseconds on 2
 * cores: what a profiler adds is its cost per event plus whatever grows
 * with the number of threads.
 *
 * Usage: many_threads [threads] [total]
 */
#define _DEFAULT_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

static pthread_barrier_t start;
static long per_thread;
static _Atomic(void *) shared_slot;

static void *run(void *arg) {
    unsigned r = (unsigned)(size_t)arg * 2654435761u;
    pthread_barrier_wait(&start);
    for (long i = 0; i < per_thread; i++) {
        r = r * 1103515245u + 12345u;
        void *volatile p = malloc(64 + (r >> 8) % 100);
        if ((r >> 20) % 8 == 0) free(atomic_exchange(&shared_slot, p));
        else free(p);
    }
    return NULL;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 1000;
    long total = argc > 2 ? atol(argv[2]) : 2000000;
    if (n < 1 || total < n) {
        fprintf(stderr, "usage: many_threads [threads >= 1] [total >= threads]\n");
        return 2;
    }
    per_thread = total / n;
    pthread_t *t = calloc((size_t)n, sizeof *t);
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setstacksize(&at, 128 << 10);
    if (!t || pthread_barrier_init(&start, NULL, (unsigned)n) != 0) return 1;
    for (int i = 0; i < n; i++)
        if (pthread_create(&t[i], &at, run, (void *)(size_t)i) != 0) {
            perror("many_threads: pthread_create");
            return 1;
        }
    for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
    free(atomic_exchange(&shared_slot, NULL));
    fprintf(stderr, "many_threads: threads=%d alloc_calls=%ld\n", n, per_thread * n);
    free(t);
    return 0;
}
