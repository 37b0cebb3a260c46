// threads.c: leaks from 4 threads, and blocks freed by another thread.
//
// Thread i (0..3) leaks i+1 blocks of 1000+i bytes from thread_leak. Each
// thread also frees 20 blocks that main allocated (cross-thread frees: none
// of those may be reported). Exits 0.
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOINLINE __attribute__((noinline))

void *volatile sink;

struct arg { int i; void *handoff[20]; };

NOINLINE void thread_leak(int i) {
    for (int k = 0; k <= i; k++) sink = malloc(1000 + (size_t)i);
    sink = NULL;
}

NOINLINE void clobber_stack(void) {
    volatile char buf[16384];
    memset((char *)buf, 0, sizeof buf);
}

static void *run(void *p) {
    struct arg *a = p;
    thread_leak(a->i);
    for (int k = 0; k < 20; k++) free(a->handoff[k]);
    clobber_stack();
    return NULL;
}

int main(void) {
    pthread_t t[4];
    struct arg a[4];
    for (int i = 0; i < 4; i++) {
        a[i].i = i;
        for (int k = 0; k < 20; k++) a[i].handoff[k] = malloc(64 + (size_t)k);
        pthread_create(&t[i], NULL, run, &a[i]);
    }
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    printf("threads: done\n");
    return 0;
}
