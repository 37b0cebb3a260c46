// tensor_fold.c: short-lived tensors a thread makes and frees, which the
// recorder folds (src/tpprof/record/observe.c, "Folded views"), then
// tensors it leaks while still running when the process ends. A worker
// thread, the only one sending tensor events, runs OPS small ops (a view
// of a, a view of b, their sum on a new storage, all three freed), then
// leaks a view of a (made in fold_keep_view) and a sum (fold_keep_sum), and
// waits; main exits without a tensor event of its own. Prints
// "tensor_fold: done" and exits 0.
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "tensorplay/tensorplay.h"

#define OPS 20000

static tp_tensor *a, *b;
tp_tensor *volatile kept_view, *volatile kept_sum;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int done;

void fold_keep_view(void);
void fold_keep_sum(void);

// (Stores, not tail calls: the frames stay on the stacks.)
__attribute__((noinline)) void fold_keep_view(void) { kept_view = tp_tensor_narrow(a, 0, 2, 8); }

__attribute__((noinline)) void fold_keep_sum(void) { kept_sum = tp_add(a, b); }

static void *worker(void *arg) {
    (void)arg;
    a = tp_ones(1, (int64_t[]){16}, TP_DTYPE_FLOAT32);
    b = tp_ones(1, (int64_t[]){16}, TP_DTYPE_FLOAT32);
    if (!a || !b) exit(2);
    for (long i = 0; i < OPS; i++) {
        tp_tensor *va = tp_tensor_narrow(a, 0, i % 8, 8);
        tp_tensor *vb = tp_tensor_narrow(b, 0, 8 - i % 8, 8);
        tp_tensor *c = va && vb ? tp_add(va, vb) : NULL;
        if (!c) exit(2);
        tp_tensor_release(c);
        tp_tensor_release(vb);
        tp_tensor_release(va);
    }
    fold_keep_view();
    fold_keep_sum();
    if (!kept_view || !kept_sum) exit(2);
    pthread_mutex_lock(&mu);
    done = 1;
    pthread_cond_signal(&cv);
    pthread_mutex_unlock(&mu);
    pthread_mutex_lock(&mu);
    for (;;) pthread_cond_wait(&cv, &mu); // (never signalled again: still running at exit)
}

int main(void) {
    pthread_t t;
    if (pthread_create(&t, NULL, worker, NULL) != 0) return 2;
    pthread_mutex_lock(&mu);
    while (!done) pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    printf("tensor_fold: done\n");
    fflush(stdout);
    exit(0);
}
