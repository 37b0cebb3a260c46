// tensor_race.c: threads sending observer events at once, after the main
// thread sent them alone for a while (so it owned the observer stripe, see
// src/tpprof/obsorder.c, and the first worker to send one takes it away
// while main may be inside its window). Main makes and frees 1000 views of
// a shared base; then 4 workers, started together, each make 3000 views of
// the base, add each to a tensor of their own and free both, while main
// goes on making and freeing views; everything is released but one view
// main keeps (made in race_keep). Prints "tensor_race: done", exits 0.
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>

#include "tensorplay/tensorplay.h"

#define WORKERS 4
#define ROUNDS 3000

static tp_tensor *base;
static pthread_barrier_t start;
static _Atomic int failed;

static void views(int n) {
    for (int i = 0; i < n; i++) {
        tp_tensor *v = tp_tensor_narrow(base, 0, i % 8, 8);
        if (!v) failed = 1;
        tp_tensor_release(v);
    }
}

static void *worker(void *arg) {
    (void)arg;
    tp_tensor *own = tp_ones(1, (int64_t[]){8}, TP_DTYPE_FLOAT32);
    if (!own) failed = 1;
    pthread_barrier_wait(&start);
    for (int i = 0; i < ROUNDS && own; i++) {
        tp_tensor *v = tp_tensor_narrow(base, 0, i % 8, 8);
        tp_tensor *sum = v ? tp_add(v, own) : NULL;
        if (!sum) failed = 1;
        tp_tensor_release(sum);
        tp_tensor_release(v);
    }
    tp_tensor_release(own);
    return NULL;
}

tp_tensor *volatile kept;

__attribute__((noinline)) void race_keep(void) { kept = tp_tensor_narrow(base, 0, 2, 8); }

int main(void) {
    base = tp_ones(1, (int64_t[]){16}, TP_DTYPE_FLOAT32);
    if (!base || pthread_barrier_init(&start, NULL, WORKERS + 1) != 0) return 2;
    views(1000);
    pthread_t t[WORKERS];
    for (int i = 0; i < WORKERS; i++)
        if (pthread_create(&t[i], NULL, worker, NULL) != 0) return 2;
    pthread_barrier_wait(&start);
    views(3000);
    for (int i = 0; i < WORKERS; i++) pthread_join(t[i], NULL);
    race_keep();
    tp_tensor_release(base);
    if (failed) return 3;
    printf("tensor_race: done\n");
    return 0;
}
