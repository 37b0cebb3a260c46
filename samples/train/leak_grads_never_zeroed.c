/*
 * samples/train/leak_grads_never_zeroed.c - A MISTAKE ON PURPOSE: the
 * gradients are never zeroed, so each backward adds into the last one's.
 * Memory does not grow (the .grad tensors are added into in place and stay
 * allocated between steps, one per parameter), but every step's update uses
 * the sum of all gradients so far.  (The fix: tp_param_list_zero_grad
 * before each backward.)
 *
 * Usage: leak_grads_never_zeroed [steps] [--check]; --check exits 1 unless
 * the gradient's norm has more than tripled while the held bytes stayed
 * flat.
 */
#include <math.h>
#include "leak_common.h"

/* L1 norm of fc2.weight's gradient */
static double grad_norm(small_model *m) {
    double v = 0;
    tp_tensor *g = tp_tensor_grad(m->fc2.weight);
    tp_tensor *a = g ? MLP_OK(tp_abs(g)) : NULL;
    tp_tensor *s = a ? MLP_OK(tp_sum(a, 0, NULL, false)) : NULL;
    if (s) MLP_OK_STATUS(tp_tensor_item(s, &v));
    tp_tensor_release(s);
    tp_tensor_release(a);
    return v;
}

int main(int argc, char **argv) {
    int steps, check;
    if (!leak_args(argc, argv, &steps, &check)) return 2;
    small_model m;
    small_model_init(&m);
    tp_sgd opt;
    MLP_OK_STATUS(tp_sgd_init(&opt, &m.params, (tp_sgd_options){.lr = 0.01}));
    uint64_t start = 0, end = 0;
    double norm = 0, first_norm = 0;
    for (int s = 0; s < steps; s++) {
        tp_tensor *y;
        tp_tensor *logits = small_forward(&m, 100 + (uint64_t)s, &y);
        tp_tensor *loss = MLP_OK(tp_nn_cross_entropy(logits, y));
        /* the mistake: no tp_param_list_zero_grad here */
        MLP_OK_STATUS(tp_backward(loss, NULL, false));
        MLP_OK_STATUS(tp_sgd_step(&opt));
        tp_tensor_release(loss);
        tp_tensor_release(logits);
        tp_tensor_release(y);
        norm = grad_norm(&m);
        if (s == 0) first_norm = norm;
        if (s == 1) start = live_bytes();
        end = live_bytes();
        if (s % 10 == 0 || s == steps - 1)
            printf("step %3d  |fc2.weight.grad|_1 %.3e  held %8.1f KiB\n", s, norm, (double)end / 1024);
    }
    tp_sgd_free(&opt);
    small_model_free(&m);
    printf("gradient norm grew from %.3e to %.3e; held bytes changed by %lld\n", first_norm, norm,
           (long long)(end - start));
    if (check && !(end == start && norm > 3 * first_norm)) {
        fprintf(stderr, "leak_grads_never_zeroed: the mistake did not show\n");
        return 1;
    }
    return 0;
}
