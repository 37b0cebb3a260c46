/*
 * bench/train_step.c - one training step of the 784-512-512-10 MLP
 * (samples/train/mlp_model.h: batch 256, data made each step, forward +
 * backward + AdamW), timed; bench/train_step.sh runs it next to the same
 * step in PyTorch (bench/train_step_torch.py).
 *
 * Prints, as medians over the timed steps (after 3 warm-up steps):
 *   step      wall ms and process CPU ms of one whole step;
 *   record    forward with grad recording minus forward under no_grad
 *             (node creation, saved-tensor aliases);
 *   walk      tp_backward over the same graph with every formula replaced
 *             by a no-op (tp__backward_noop: the dependency count, the
 *             ready stack, the saved tensors' release);
 *   bookkeeping = record + walk, also as a share of the step.
 *
 * Usage: train_step [steps] [threads]   (defaults 30, 1).  Built by meson,
 * never run as a test.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "../samples/train/mlp_model.h"
#include "../src/autograd/autograd_internal.h"

static double clock_ms(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv) {
    int steps = argc > 1 ? atoi(argv[1]) : 30;
    int threads = argc > 2 ? atoi(argv[2]) : 1;
    if (steps < 1 || threads < 1) {
        fprintf(stderr, "usage: train_step [steps >= 1] [threads >= 1]\n");
        return 2;
    }
    MLP_OK_STATUS(tp_set_num_threads(threads));
    mlp_model m;
    mlp_model_init(&m, 1);
    tp_adamw opt;
    MLP_OK_STATUS(tp_adamw_init(&opt, &m.params, mlp_adamw_options()));
    double *wall = calloc((size_t)steps, sizeof *wall), *cpu = calloc((size_t)steps, sizeof *cpu);
    double *fwd = calloc((size_t)steps, sizeof *fwd), *fwd_ng = calloc((size_t)steps, sizeof *fwd_ng);
    double *walk = calloc((size_t)steps, sizeof *walk);
    if (!wall || !cpu || !fwd || !fwd_ng || !walk) return 1;
    double loss = 0;
    for (int s = 0; s < 3; s++) loss = mlp_step(&m, &opt, 256, 500 + (uint64_t)s);
    for (int s = 0; s < steps; s++) {
        double w0 = clock_ms(CLOCK_MONOTONIC), c0 = clock_ms(CLOCK_PROCESS_CPUTIME_ID);
        loss = mlp_step(&m, &opt, 256, 1000 + (uint64_t)s);
        wall[s] = clock_ms(CLOCK_MONOTONIC) - w0;
        cpu[s] = clock_ms(CLOCK_PROCESS_CPUTIME_ID) - c0;
    }
    /* the bookkeeping: the same forward with and without recording, then a
     * formula-free walk of the recorded graph (process CPU time: the
     * machine these run on is shared) */
    tp_tensor *x, *y;
    mlp_batch(&m, 256, 7, &x, &y);
    for (int s = 0; s < steps; s++) {
        bool prev = tp_grad_set_enabled(false);
        double c0 = clock_ms(CLOCK_PROCESS_CPUTIME_ID);
        tp_tensor *l0 = mlp_forward(&m, x);
        tp_tensor *ce0 = MLP_OK(tp_nn_cross_entropy(l0, y));
        fwd_ng[s] = clock_ms(CLOCK_PROCESS_CPUTIME_ID) - c0;
        tp_grad_set_enabled(prev);
        tp_tensor_release(ce0);
        tp_tensor_release(l0);
        c0 = clock_ms(CLOCK_PROCESS_CPUTIME_ID);
        tp_tensor *l1 = mlp_forward(&m, x);
        tp_tensor *ce1 = MLP_OK(tp_nn_cross_entropy(l1, y));
        fwd[s] = clock_ms(CLOCK_PROCESS_CPUTIME_ID) - c0;
        tp__backward_noop = true;
        c0 = clock_ms(CLOCK_PROCESS_CPUTIME_ID);
        MLP_OK_STATUS(tp_backward(ce1, NULL, false));
        walk[s] = clock_ms(CLOCK_PROCESS_CPUTIME_ID) - c0;
        tp__backward_noop = false;
        tp_tensor_release(ce1);
        tp_tensor_release(l1);
    }
    tp_tensor_release(x);
    tp_tensor_release(y);
    double step_wall = median(wall, steps), step_cpu = median(cpu, steps);
    double record = median(fwd, steps) - median(fwd_ng, steps), walk_ms = median(walk, steps);
    printf("libtensorplay  threads %d  steps %d  final loss %.4f\n", threads, steps, loss);
    printf("step           wall %.2f ms  cpu %.2f ms (medians)\n", step_wall, step_cpu);
    printf("forward        cpu %.3f ms recording, %.3f ms under no_grad\n", median(fwd, steps), median(fwd_ng, steps));
    printf("bookkeeping    record %.3f ms + walk %.3f ms = %.3f ms = %.2f%% of the step's cpu\n", record,
           walk_ms, record + walk_ms, 100.0 * (record + walk_ms) / step_cpu);
    free(wall);
    free(cpu);
    free(fwd);
    free(fwd_ng);
    free(walk);
    tp_adamw_free(&opt);
    mlp_model_free(&m);
    return 0;
}
