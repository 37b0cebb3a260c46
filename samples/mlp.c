/*
 * samples/mlp.c - a 2-layer MLP forward pass on synthetic, seeded data,
 * written only against the public tensorplay API.
 *
 * The data: x ~ N(0, 1) of shape (batch, in); labels come from a hidden
 * "teacher" layer, y = argmax(x @ T).  The model: logits = relu(x @ W1 + b1)
 * @ W2 + b2, then a numerically stable softmax (exp(z - max z) / sum),
 * cross-entropy loss against one-hot labels, and accuracy.  It runs a few
 * batches and prints a short summary.  There is no training here (no
 * autograd yet): the point is a realistic mix of matmul, broadcasting,
 * reductions, views and temporaries, e.g. to run under `tpprof`.
 *
 * Usage: mlp [iterations] (default 5)
 */
#include <stdio.h>
#include <stdlib.h>
#include "tensorplay/tensorplay.h"

#define BATCH 256
#define IN 64
#define HIDDEN 128
#define CLASSES 10

// ----------------------------------------------------------------------------
// error handling: every call is checked; the first failure ends the program

static tp_tensor *ok(tp_tensor *t, const char *what) {
    if (!t) {
        fprintf(stderr, "mlp: %s failed: %s\n", what, tp_last_error());
        exit(1);
    }
    return t;
}
#define OK(call) ok((call), #call)

static void ok_status(tp_status st, const char *what) {
    if (st != TP_STATUS_OK) {
        fprintf(stderr, "mlp: %s failed: %s\n", what, tp_last_error());
        exit(1);
    }
}
#define OK_STATUS(call) ok_status((call), #call)

/* Releases a list of temporaries. */
static void drop(int n, tp_tensor **ts) {
    for (int i = 0; i < n; i++) tp_tensor_release(ts[i]);
}

// ----------------------------------------------------------------------------
// the model

typedef struct mlp {
    tp_tensor *w1, *b1, *w2, *b2; /* (IN, HIDDEN), (HIDDEN), (HIDDEN, CLASSES), (CLASSES) */
} mlp;

static tp_tensor *scaled_randn(int ndim, const int64_t *sizes, double scale, uint64_t seed) {
    tp_tensor *r = OK(tp_randn(ndim, sizes, TP_DTYPE_FLOAT32, seed));
    tp_tensor *s = OK(tp_binary_scalar(TP_BINARY_OP_MUL, r, scale));
    tp_tensor_release(r);
    return s;
}

static mlp mlp_new(uint64_t seed) {
    mlp m;
    m.w1 = scaled_randn(2, (int64_t[]){IN, HIDDEN}, 0.125, seed + 1); /* ~ 1/sqrt(IN) */
    m.b1 = OK(tp_full(1, (int64_t[]){HIDDEN}, 0.01, TP_DTYPE_FLOAT32));
    m.w2 = scaled_randn(2, (int64_t[]){HIDDEN, CLASSES}, 0.088, seed + 2);
    m.b2 = OK(tp_zeros(1, (int64_t[]){CLASSES}, TP_DTYPE_FLOAT32));
    return m;
}

static void mlp_free(mlp *m) { drop(4, (tp_tensor *[]){m->w1, m->b1, m->w2, m->b2}); }

/* logits (BATCH, CLASSES) for x (BATCH, IN). New reference. */
static tp_tensor *mlp_forward(const mlp *m, const tp_tensor *x) {
    tp_tensor *h = OK(tp_matmul(x, m->w1));  // (B, HIDDEN)
    OK_STATUS(tp_add_(h, m->b1)); /* bias broadcast over rows, in place */
    OK_STATUS(tp_relu_(h));
    tp_tensor *z = OK(tp_matmul(h, m->w2));  // (B, CLASSES)
    tp_tensor *logits = OK(tp_add(z, m->b2));
    drop(2, (tp_tensor *[]){h, z});
    return logits;
}

/* Row-wise softmax of (B, C). New reference. */
static tp_tensor *softmax_rows(const tp_tensor *z) {
    tp_tensor *mx = OK(tp_max(z, 1, (int[]){1}, true));  // (B, 1)
    tp_tensor *shifted = OK(tp_sub(z, mx));
    tp_tensor *e = OK(tp_exp(shifted));
    tp_tensor *s = OK(tp_sum(e, 1, (int[]){1}, true));   // (B, 1)
    tp_tensor *p = OK(tp_div(e, s));
    drop(4, (tp_tensor *[]){mx, shifted, e, s});
    return p;
}

// ----------------------------------------------------------------------------
// one batch

typedef struct batch_result {
    double loss, accuracy;
} batch_result;

static batch_result run_batch(const mlp *m, const tp_tensor *teacher, uint64_t seed) {
    tp_tensor *x = OK(tp_randn(2, (int64_t[]){BATCH, IN}, TP_DTYPE_FLOAT32, seed));
    tp_tensor *t = OK(tp_matmul(x, teacher));
    tp_tensor *y = OK(tp_argmax(t, 1, false));                       // (B) int64

    tp_tensor *logits = mlp_forward(m, x);
    tp_tensor *p = softmax_rows(logits);

    /* one-hot labels: arange(C) == y[:, None] */
    tp_tensor *classes = OK(tp_arange(0, CLASSES, 1, TP_DTYPE_INT64));
    tp_tensor *ycol = OK(tp_tensor_unsqueeze(y, 1));                 // (B, 1) view
    tp_tensor *onehot_b = OK(tp_binary(TP_BINARY_OP_EQ, ycol, classes));
    tp_tensor *onehot = OK(tp_to_dtype(onehot_b, TP_DTYPE_FLOAT32));

    /* cross-entropy: mean over rows of -sum(onehot * log p) */
    tp_tensor *logp = OK(tp_log(p));
    tp_tensor *picked = OK(tp_mul(onehot, logp));
    tp_tensor *row = OK(tp_sum(picked, 1, (int[]){1}, false));
    tp_tensor *nll = OK(tp_neg(row));
    tp_tensor *loss = OK(tp_mean(nll, 0, NULL, false));

    /* accuracy: mean(argmax p == y) */
    tp_tensor *pred = OK(tp_argmax(p, 1, false));
    tp_tensor *hit_b = OK(tp_binary(TP_BINARY_OP_EQ, pred, y));
    tp_tensor *hit = OK(tp_to_dtype(hit_b, TP_DTYPE_FLOAT32));
    tp_tensor *acc = OK(tp_mean(hit, 0, NULL, false));

    batch_result r = {0, 0};
    tp_tensor_item(loss, &r.loss);
    tp_tensor_item(acc, &r.accuracy);
    drop(18, (tp_tensor *[]){x, t, y, logits, p, classes, ycol, onehot_b, onehot, logp, picked, row,
                             nll, loss, pred, hit_b, hit, acc});
    return r;
}

int main(int argc, char **argv) {
    int iters = argc > 1 ? atoi(argv[1]) : 5;
    if (iters < 1) iters = 1;
    mlp m = mlp_new(2024);
    tp_tensor *teacher = OK(tp_randn(2, (int64_t[]){IN, CLASSES}, TP_DTYPE_FLOAT32, 7));
    printf("mlp: batch %d, %d -> %d -> %d, %d kernel threads\n", BATCH, IN, HIDDEN, CLASSES,
           tp_get_num_threads());
    double total_loss = 0, total_acc = 0;
    for (int i = 0; i < iters; i++) {
        batch_result r = run_batch(&m, teacher, 100 + (uint64_t)i);
        printf("  batch %d: loss %.4f  accuracy %.3f\n", i, r.loss, r.accuracy);
        total_loss += r.loss;
        total_acc += r.accuracy;
    }
    printf("mean loss %.4f (chance: ln 10 = 2.3026), mean accuracy %.3f (chance 0.100)\n",
           total_loss / iters, total_acc / iters);
    /* the logits of two fresh samples, printed as PyTorch would print them */
    tp_tensor *x = OK(tp_randn(2, (int64_t[]){2, IN}, TP_DTYPE_FLOAT32, 1));
    tp_tensor *logits = mlp_forward(&m, x);
    tp_tensor_print(logits, stdout);
    drop(3, (tp_tensor *[]){x, logits, teacher});
    mlp_free(&m);
    return 0;
}
