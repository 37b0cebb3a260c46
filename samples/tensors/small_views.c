/*
 * samples/tensors/small_views.c - a list that keeps small views of big
 * activations alive.
 *
 * Each step computes a (1024, 1024) float32 "activation" (4 MiB) and keeps
 * only its first row for logging, as a view: keep_row() stores
 * tp_tensor_select(act, 0, 0), 4 KiB of elements that pin the whole 4 MiB
 * storage.  Nothing leaks in the malloc sense (everything is released at
 * exit), yet at the peak almost all memory is pinned by tiny views.
 *
 * Usage: small_views [steps] (default 6)
 */
#include "common.h"

#define MAX_STEPS 64

static tp_tensor *kept[MAX_STEPS];

__attribute__((noinline)) static void keep_row(int step, tp_tensor *act) {
    kept[step] = CHECK(tp_tensor_select(act, 0, 0)); /* a view: pins act's storage */
}

int main(int argc, char **argv) {
    int steps = argc > 1 ? atoi(argv[1]) : 6;
    if (steps < 1 || steps > MAX_STEPS) {
        fprintf(stderr, "usage: small_views [steps 1..%d]\n", MAX_STEPS);
        return 2;
    }
    for (int i = 0; i < steps; i++) {
        tp_tensor *x = CHECK(tp_rand(2, (int64_t[]){1024, 1024}, TP_DTYPE_FLOAT32, (uint64_t)i + 1));
        tp_tensor *act = CHECK(tp_relu(x));
        tp_tensor_release(x);
        keep_row(i, act);
        tp_tensor_release(act); /* the view keeps all 4 MiB alive */
    }
    double first = 0;
    CHECK_STATUS(tp_tensor_get(kept[steps - 1], (int64_t[]){0}, &first));
    printf("small_views: kept %d rows of 1024 floats, pinning %d x 4 MiB (last[0] = %.4f)\n", steps,
           steps, first);
    for (int i = 0; i < steps; i++) tp_tensor_release(kept[i]);
    return 0;
}
