// graph_kept.c: a loss kept with its graph while the program also keeps its
// weight (a model alive at exit), for ../test_train_samples.c: the weight's
// storage is one the graph keeps but not graph-held (its own tensor keeps
// it too); the activation the graph saved is graph-held.
//
//   w (16, 16) leaf, requires grad, kept by the program
//   h = relu(x @ w)     ReluBackward0 saves h (16 x 16 floats, 1 KiB)
//   loss = sum(h)       kept, never backpropagated
#include <stdio.h>

#include "tensorplay/tensorplay.h"

static tp_tensor *loss_kept, *w;

int main(void) {
    int64_t sz[2] = {16, 16};
    w = tp_randn(2, sz, TP_DTYPE_FLOAT32, 1);
    tp_tensor_set_requires_grad(w, true);
    tp_tensor *x = tp_randn(2, sz, TP_DTYPE_FLOAT32, 2);
    tp_tensor *xw = tp_ag_matmul(x, w);
    tp_tensor *h = tp_ag_unary(TP_UNARY_OP_RELU, xw);
    loss_kept = tp_ag_sum(h, 0, NULL, false);
    tp_tensor_release(h);
    tp_tensor_release(xw);
    tp_tensor_release(x);
    if (!loss_kept) {
        fprintf(stderr, "graph_kept: %s\n", tp_last_error());
        return 1;
    }
    double v = 0;
    tp_tensor_item(loss_kept, &v);
    printf("loss %g kept with its graph\n", v);
    return 0; // loss_kept and w: alive at exit, reachable (globals)
}
