// handoff.c: two threads that hand blocks to each other through a queue, so
// nearly every block is freed by the thread that did not allocate it, and
// freed addresses come back from the allocator to either thread: the order
// the recorder gives cross-thread events must put every free of an address
// before its next allocation, whichever threads made them. Each thread
// allocates HANDOFF_BLOCKS blocks of 16..256 B and frees every block the
// other sends; each leaks one block of 3000 + id B at the end (handoff_leak).
// Prints "handoff: N blocks" and exits 0.
#define _DEFAULT_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HANDOFF_BLOCKS 200000
#define QUEUE 256

struct queue {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    void *slot[QUEUE];
    unsigned head, tail;
    int closed;
};

static struct queue q[2] = {
    {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, {0}, 0, 0, 0},
    {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, {0}, 0, 0, 0},
};

void *volatile sink;

__attribute__((noinline)) void handoff_leak(int id) { sink = malloc(3000 + (size_t)id); sink = NULL; }

// Puts p into q (waits while full); NULL closes it.
static void put(struct queue *qu, void *p) {
    pthread_mutex_lock(&qu->mu);
    while (qu->tail - qu->head == QUEUE) pthread_cond_wait(&qu->cv, &qu->mu);
    if (p) qu->slot[qu->tail++ % QUEUE] = p;
    else qu->closed = 1;
    pthread_cond_broadcast(&qu->cv);
    pthread_mutex_unlock(&qu->mu);
}

// Frees whatever q holds; returns 0 once it is closed and empty.
static int drain(struct queue *qu, int wait) {
    pthread_mutex_lock(&qu->mu);
    while (wait && qu->head == qu->tail && !qu->closed) pthread_cond_wait(&qu->cv, &qu->mu);
    int n = 0;
    while (qu->head != qu->tail) {
        free(qu->slot[qu->head++ % QUEUE]);
        n++;
    }
    int open = !qu->closed || n;
    pthread_cond_broadcast(&qu->cv);
    pthread_mutex_unlock(&qu->mu);
    return open;
}

static void *run(void *arg) {
    int id = (int)(intptr_t)arg;
    struct queue *out = &q[id], *in = &q[1 - id];
    uint64_t x = 0x9E3779B97F4A7C15ull * (uint64_t)(id + 1);
    for (int i = 0; i < HANDOFF_BLOCKS; i++) {
        x ^= x >> 12, x ^= x << 25, x ^= x >> 27;
        char *p = malloc(16 + (size_t)(x % 241));
        p[0] = (char)i;
        put(out, p);
        if ((i & 15) == 0) drain(in, 0);
    }
    put(out, NULL);
    while (drain(in, 1)) {
    }
    handoff_leak(id);
    return NULL;
}

int main(void) {
    pthread_t t[2];
    for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, run, (void *)(intptr_t)i);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    printf("handoff: %d blocks\n", 2 * HANDOFF_BLOCKS);
    return 0;
}
