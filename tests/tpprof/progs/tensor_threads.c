// tensor_threads.c: views made on one thread and freed on another (a
// loader handing batches to a consumer). 2000 views of one base tensor are
// made by a producer thread and released by a consumer thread; one more
// view is kept (leaked, made in threads_keep) and the base released, so at
// exit one storage is alive, held by the kept view and, through it, the
// base. Prints "tensor_threads: done" and exits 0.
#include <pthread.h>
#include <stdio.h>

#include "tensorplay/tensorplay.h"

#define VIEWS 2000

static tp_tensor *views[VIEWS];
static tp_tensor *base;

static void *producer(void *arg) {
    (void)arg;
    for (int i = 0; i < VIEWS; i++) views[i] = tp_tensor_narrow(base, 0, i % 8, 4);
    return NULL;
}

static void *consumer(void *arg) {
    (void)arg;
    for (int i = 0; i < VIEWS; i++) tp_tensor_release(views[i]);
    return NULL;
}

tp_tensor *volatile kept;

__attribute__((noinline)) void threads_keep(void) { kept = tp_tensor_narrow(base, 0, 1, 4); }

int main(void) {
    base = tp_ones(1, (int64_t[]){16}, TP_DTYPE_FLOAT32);
    if (!base) return 2;
    pthread_t t;
    if (pthread_create(&t, NULL, producer, NULL) != 0 || pthread_join(t, NULL) != 0) return 2;
    for (int i = 0; i < VIEWS; i++)
        if (!views[i]) return 2;
    if (pthread_create(&t, NULL, consumer, NULL) != 0 || pthread_join(t, NULL) != 0) return 2;
    threads_keep();
    tp_tensor_release(base);
    printf("tensor_threads: done\n");
    return 0;
}
