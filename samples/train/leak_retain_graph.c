/*
 * samples/train/leak_retain_graph.c - LEAKS ON PURPOSE: backward with
 * retain_graph left on, and each step's loss kept in a list for logging.
 * Keeping the loss alone would hold only its graph's nodes (backward frees
 * the saved tensors); with retain_graph every step's saved activations stay
 * too.  (The fix: no retain_graph, and log tp_tensor_item's double.)
 *
 * (The other classic retain_graph case, a recurrent state carried across
 * steps without detach, fails here as in PyTorch as soon as the optimizer
 * has updated a weight an older step saved: "one of the variables needed
 * for gradient computation has been modified by an inplace operation".)
 *
 * Usage: leak_retain_graph [steps] [--check].  Without --check the
 * retain_graph run's losses (and their graphs) are left alive at exit, the
 * leak a profiler should name; --check releases them and exits 1 unless the
 * held bytes grew by a step's saved activations each step with
 * retain_graph, and by no more than the kept losses without it.
 */
#include "leak_common.h"

/* Runs the loop; returns the growth of the held bytes from step 0 on. */
static uint64_t run(int steps, bool retain_graph, bool release_at_end) {
    small_model m;
    small_model_init(&m);
    tp_sgd opt;
    MLP_OK_STATUS(tp_sgd_init(&opt, &m.params, (tp_sgd_options){.lr = 0.05}));
    tp_tensor **losses = calloc((size_t)steps, sizeof *losses);
    if (!losses) exit(1);
    uint64_t start = 0, end = 0;
    for (int s = 0; s < steps; s++) {
        tp_tensor *y;
        tp_tensor *logits = small_forward(&m, 100 + (uint64_t)s, &y);
        losses[s] = MLP_OK(tp_nn_cross_entropy(logits, y));
        MLP_OK_STATUS(tp_param_list_zero_grad(&m.params, true));
        MLP_OK_STATUS(tp_backward(losses[s], NULL, retain_graph));
        MLP_OK_STATUS(tp_sgd_step(&opt));
        tp_tensor_release(logits);
        tp_tensor_release(y);
        if (s == 0) start = live_bytes();
        end = live_bytes();
        if (retain_graph && (s % 10 == 0 || s == steps - 1))
            printf("step %3d  held %8.1f KiB\n", s, (double)end / 1024);
    }
    tp_sgd_free(&opt);
    small_model_free(&m); /* the kept graphs still hold the parameters */
    if (!release_at_end) return end - start; /* the leak, left for a profiler at exit */
    for (int s = 0; s < steps; s++) tp_tensor_release(losses[s]);
    free(losses);
    return end - start;
}

int main(int argc, char **argv) {
    int steps, check;
    if (!leak_args(argc, argv, &steps, &check)) return 2;
    uint64_t retained = run(steps, true, check);
    uint64_t plain = run(steps, false, true);
    printf("held growth over %d steps with the losses kept: %.1f KiB with retain_graph, %.1f KiB "
           "without\n", steps, (double)retained / 1024, (double)plain / 1024);
    /* a step saves at least its (64, 256) relu output and (64, 64) input */
    if (check && !(retained >= (uint64_t)(steps - 1) * (64 * 256 + 64 * 64) * 4 &&
                   plain <= (uint64_t)steps * 64)) {
        fprintf(stderr, "leak_retain_graph: the leak did not show\n");
        return 1;
    }
    return 0;
}
