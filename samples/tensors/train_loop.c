/*
 * samples/tensors/train_loop.c - a training-like loop that leaks nothing.
 *
 * Linear regression by hand-written gradient descent: forward (matmul + bias
 * broadcast), residual, loss, gradients (transposed matmul, reductions) and
 * in-place parameter updates, with views and temporaries every step.  Every
 * reference is released, so tpprof must report zero leaked storages and
 * zero lost bytes: the false-positive check.
 *
 * Usage: train_loop [steps] (default 50)
 */
#include "common.h"

#define N 128
#define D 16

int main(int argc, char **argv) {
    int steps = argc > 1 ? atoi(argv[1]) : 50;
    if (steps < 1) {
        fprintf(stderr, "usage: train_loop [steps >= 1]\n");
        return 2;
    }
    tp_tensor *x = CHECK(tp_randn(2, (int64_t[]){N, D}, TP_DTYPE_FLOAT32, 7));
    tp_tensor *w_true = CHECK(tp_randn(2, (int64_t[]){D, 1}, TP_DTYPE_FLOAT32, 8));
    tp_tensor *y = CHECK(tp_matmul(x, w_true));
    tp_tensor *w = CHECK(tp_zeros(2, (int64_t[]){D, 1}, TP_DTYPE_FLOAT32));
    tp_tensor *b = CHECK(tp_zeros(1, (int64_t[]){1}, TP_DTYPE_FLOAT32));
    double loss = 0;
    for (int s = 0; s < steps; s++) {
        tp_tensor *xw = CHECK(tp_matmul(x, w));         // (N, 1)
        tp_tensor *pred = CHECK(tp_add(xw, b));          // bias broadcast
        tp_tensor *err = CHECK(tp_sub(pred, y));         // (N, 1)
        tp_tensor *sq = CHECK(tp_mul(err, err));
        tp_tensor *l = CHECK(tp_mean(sq, 0, NULL, false));
        CHECK_STATUS(tp_tensor_item(l, &loss));
        tp_tensor *xt = CHECK(tp_tensor_t(x));           // (D, N) view
        tp_tensor *gw = CHECK(tp_matmul(xt, err));       // (D, 1)
        CHECK_STATUS(tp_binary_scalar_(TP_BINARY_OP_MUL, gw, 2.0 / N * 0.1));
        CHECK_STATUS(tp_sub_(w, gw));                    // w -= lr * grad
        tp_tensor *gb = CHECK(tp_mean(err, 0, NULL, false));
        CHECK_STATUS(tp_binary_scalar_(TP_BINARY_OP_MUL, gb, 2.0 * 0.1));
        CHECK_STATUS(tp_sub_(b, gb));
        tp_tensor *parts[] = {xw, pred, err, sq, l, xt, gw, gb};
        for (size_t i = 0; i < sizeof parts / sizeof *parts; i++) tp_tensor_release(parts[i]);
    }
    printf("train_loop: %d steps, final loss %.6f, w version %u\n", steps, loss, tp_tensor_version(w));
    tp_tensor *all[] = {x, w_true, y, w, b};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tp_tensor_release(all[i]);
    return loss < 1.0 ? 0 : 1;
}
