// crowd.c: CROWD_THREADS threads at once, started together, that allocate
// into shared slots and free what they displace: the threads share glibc's
// few arenas, so one address stripe's tickets are taken by many threads in
// turn, and nearly every block is freed by a thread that did not allocate
// it. The merge then has many rings whose heads wait for another ring's
// record. Each thread allocates CROWD_BLOCKS blocks of 16..256 B and leaks
// one block of 5000 + id % 4 B at the end (crowd_leak); main frees what the
// slots still hold. Prints "crowd: N blocks" and exits 0.
#define _DEFAULT_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define CROWD_THREADS 256
#define CROWD_BLOCKS 2000
#define SLOTS 1024

static _Atomic(void *) slot[SLOTS];
static pthread_barrier_t start;
void *volatile sink;

__attribute__((noinline)) void crowd_leak(int id) { sink = malloc(5000 + (size_t)(id % 4)); sink = NULL; }

__attribute__((noinline)) void *crowd_block(size_t n) { return malloc(n); }

static void *run(void *arg) {
    int id = (int)(intptr_t)arg;
    uint64_t rng = 0x9E3779B97F4A7C15ULL * (uint64_t)(id + 1);
    pthread_barrier_wait(&start);
    for (int i = 0; i < CROWD_BLOCKS; i++) {
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        void *p = crowd_block(16 + rng % 241);
        void *old = atomic_exchange(&slot[(rng >> 20) % SLOTS], p);
        free(old);
    }
    crowd_leak(id);
    return NULL;
}

int main(void) {
    pthread_t t[CROWD_THREADS];
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setstacksize(&at, 256 << 10);
    pthread_barrier_init(&start, NULL, CROWD_THREADS);
    for (int i = 0; i < CROWD_THREADS; i++)
        if (pthread_create(&t[i], &at, run, (void *)(intptr_t)i) != 0) {
            perror("crowd: pthread_create");
            return 1;
        }
    for (int i = 0; i < CROWD_THREADS; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < SLOTS; i++) free(atomic_exchange(&slot[i], NULL));
    printf("crowd: %d blocks\n", CROWD_THREADS * CROWD_BLOCKS);
    return 0;
}
