/*
 * samples/train/leak_loss_history.c - LEAKS ON PURPOSE: a validation loss
 * computed with grad mode on is appended to a history list every step and
 * never backpropagated, so each entry keeps its whole graph alive: the
 * nodes, the leaves, and every activation saved for a backward that never
 * runs.  (The fix: compute it under no_grad, or keep tp_tensor_item's
 * double, or a tp_tensor_detach of it.)
 *
 * Usage: leak_loss_history [steps] [--check].  Without --check the history
 * is left alive at exit (the leak a profiler should name); --check releases
 * it at the end and exits 1 unless the held bytes grew by at least one
 * step's saved activations per step and went back down after.
 */
#include "leak_common.h"

int main(int argc, char **argv) {
    int steps, check;
    if (!leak_args(argc, argv, &steps, &check)) return 2;
    small_model m;
    small_model_init(&m);
    tp_sgd opt;
    MLP_OK_STATUS(tp_sgd_init(&opt, &m.params, (tp_sgd_options){.lr = 0.05}));
    tp_tensor **history = calloc((size_t)steps, sizeof *history);
    if (!history) return 1;
    uint64_t start = 0;
    for (int s = 0; s < steps; s++) {
        tp_tensor *y;
        tp_tensor *logits = small_forward(&m, 100 + (uint64_t)s, &y);
        tp_tensor *loss = MLP_OK(tp_nn_cross_entropy(logits, y));
        MLP_OK_STATUS(tp_param_list_zero_grad(&m.params, true));
        MLP_OK_STATUS(tp_backward(loss, NULL, false));
        MLP_OK_STATUS(tp_sgd_step(&opt));
        tp_tensor_release(loss);
        tp_tensor_release(logits);
        tp_tensor_release(y);
        /* the mistake: a loss with its graph, kept */
        tp_tensor *vy;
        tp_tensor *vlogits = small_forward(&m, 100000 + (uint64_t)s, &vy);
        history[s] = MLP_OK(tp_nn_cross_entropy(vlogits, vy));
        tp_tensor_release(vlogits);
        tp_tensor_release(vy);
        if (s == 0) start = live_bytes();
        if (s % 10 == 0 || s == steps - 1) printf("step %3d  held %8.1f KiB\n", s, (double)live_bytes() / 1024);
    }
    uint64_t end = live_bytes();
    tp_sgd_free(&opt);
    small_model_free(&m); /* the graphs still hold the parameters they used */
    if (!check) {
        /* the leak, left for a profiler to find at exit: every history
         * entry's graph, saved activations and leaves */
        printf("held by the history's graphs: %.1f KiB, left alive at exit\n", (double)(end - start) / 1024);
        return 0;
    }
    for (int s = 0; s < steps; s++) tp_tensor_release(history[s]);
    free(history);
    uint64_t after = live_bytes();
    printf("held by the history's graphs: %.1f KiB (%.1f KiB a step); after releasing it: %.1f KiB\n",
           (double)(end - start) / 1024, (double)(end - start) / 1024 / (steps - 1), (double)after / 1024);
    /* a step's saved activations: (64, 256) pre-activations and relu output, (64, 64) input */
    uint64_t per_step = 64 * 256 * 4;
    if (check && !(end - start >= per_step * (uint64_t)(steps - 1) && after < start)) {
        fprintf(stderr, "leak_loss_history: the leak did not show\n");
        return 1;
    }
    return 0;
}
