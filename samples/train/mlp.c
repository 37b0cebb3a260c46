/*
 * samples/train/mlp.c - trains the 784-512-512-10 MLP of mlp_model.h with
 * autograd and AdamW on synthetic data (batch 256, a fresh batch each
 * step), and checks that the loss falls.
 *
 * Usage: train_mlp [steps] (default 40).  Prints the loss every 10 steps;
 * exits 1 unless the mean loss of the last 5 steps is below 90% of the
 * mean of the first 5 (the 'nn' test suite runs it that way).  At exit
 * every tensor it made has been released: zero storages alive.
 */
#include "mlp_model.h"

int main(int argc, char **argv) {
    int steps = argc > 1 ? atoi(argv[1]) : 40;
    if (steps < 10) {
        fprintf(stderr, "train_mlp: steps must be at least 10\n");
        return 2;
    }
    mlp_model m;
    mlp_model_init(&m, 1);
    tp_adamw opt;
    MLP_OK_STATUS(tp_adamw_init(&opt, &m.params, mlp_adamw_options()));
    double first = 0, last = 0;
    for (int s = 0; s < steps; s++) {
        double loss = mlp_step(&m, &opt, 256, 1000 + (uint64_t)s);
        if (s < 5) first += loss / 5;
        if (s >= steps - 5) last += loss / 5;
        if (s % 10 == 0 || s == steps - 1) printf("step %3d  loss %.4f\n", s, loss);
    }
    tp_adamw_free(&opt);
    mlp_model_free(&m);
    printf("mean loss: first 5 steps %.4f, last 5 steps %.4f\n", first, last);
    if (!(last < 0.9 * first)) {
        fprintf(stderr, "train_mlp: the loss did not fall (%.4f -> %.4f)\n", first, last);
        return 1;
    }
    return 0;
}
