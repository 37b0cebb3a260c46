// graph_grad.c: a graph kept by retain_graph whose weight has a gradient,
// for ../test_train_samples.c: a parameter holds its .grad with a handle
// of the runtime's own, so the grad goes with the parameter; graph-held
// when only the graph keeps the parameter ("drop"), not when the program
// keeps it too ("keep").
//
//   w (16, 16) leaf, requires grad; x (16, 16)
//   h = relu(x @ w)     MmBackward0 saves x (w's gradient needs it), ReluBackward0 h;
//                       w is the Mm node's leaf input
//   loss = sum(h)       backward with retain_graph: w.grad (16 x 16), kept
//
// usage: graph_grad drop|keep
#include <stdio.h>
#include <string.h>

#include "tensorplay/tensorplay.h"

static tp_tensor *loss_kept, *w;

int main(int argc, char **argv) {
    bool drop = argc > 1 && strcmp(argv[1], "drop") == 0;
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
    if (!loss_kept || tp_backward(loss_kept, NULL, true) != TP_STATUS_OK || !tp_tensor_grad(w)) {
        fprintf(stderr, "graph_grad: %s\n", tp_last_error());
        return 1;
    }
    if (drop) { // only the graph (its MmBackward0 node) holds w now
        tp_tensor_release(w);
        w = NULL;
    }
    printf("loss kept with its graph, w %s\n", drop ? "dropped" : "kept");
    return 0; // loss_kept (and w): alive at exit, reachable (globals)
}
