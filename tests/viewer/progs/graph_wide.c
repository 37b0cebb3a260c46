// graph_wide.c: one graph through a cat of 40 inputs, each made by a node
// of its own, kept alive at exit, for ../test_train_samples.c: every edge
// of the CatBackward0 node is recorded, so the recording shows one graph
// of 42 nodes, not the cat's first inputs' graph and 24 more.
//
//   a[i] (1, 4) leaf, requires grad, released by the program (i < 40)
//   b[i] = a[i] * 2     MulBackward1 (a scalar: nothing saved)
//   loss = sum(cat(b))  CatBackward0 (40 node edges), SumBackward0; kept
#include <stdio.h>

#include "tensorplay/tensorplay.h"

#define N 40

static tp_tensor *loss_kept;

int main(void) {
    tp_tensor *b[N];
    int64_t sz[2] = {1, 4};
    for (int i = 0; i < N; i++) {
        tp_tensor *a = tp_randn(2, sz, TP_DTYPE_FLOAT32, (uint64_t)i + 1);
        tp_tensor_set_requires_grad(a, true);
        b[i] = tp_ag_binary_scalar(TP_BINARY_OP_MUL, a, 2.0);
        tp_tensor_release(a);
        if (!b[i]) {
            fprintf(stderr, "graph_wide: %s\n", tp_last_error());
            return 1;
        }
    }
    tp_tensor *c = tp_ag_cat(N, b, 0);
    for (int i = 0; i < N; i++) tp_tensor_release(b[i]);
    loss_kept = c ? tp_ag_sum(c, 0, NULL, false) : NULL;
    tp_tensor_release(c);
    if (!loss_kept) {
        fprintf(stderr, "graph_wide: %s\n", tp_last_error());
        return 1;
    }
    printf("a cat of %d inputs kept with its graph\n", N);
    return 0;
}
