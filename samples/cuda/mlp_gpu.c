/*
 * samples/cuda/mlp_gpu.c - samples/mlp.c on a CUDA device: the same model,
 * data and hand-written SGD, with every tensor made on the device
 * (tp_*_on) and only the loss and accuracy read back (tp_tensor_item).
 * It then runs the same steps on the CPU and compares the final loss.
 *
 * Usage: mlp_gpu [iterations] [device] (default 60, cuda:0).  Without a
 * CUDA device it prints "SKIP: no CUDA device" and exits 77.  Exits 1 if
 * the loss did not fall or the two devices disagree by more than 1e-3.
 *
 * The original's description:
 *
 * The data: x ~ N(0, 1) of shape (batch, in); labels come from a hidden
 * "teacher" layer, y = argmax(x @ T).  The model: logits = relu(x @ W1 + b1)
 * @ W2 + b2, a numerically stable softmax (exp(z - max z) / sum), and
 * cross-entropy against one-hot labels.  Each iteration runs the forward
 * pass on a fresh batch, then one step of plain SGD with hand-written
 * gradients (there is no autograd yet), so the loss visibly falls.  The mix
 * is realistic: matmuls on transposed views (CblasTrans), bias broadcasts,
 * in-place updates, row and column reductions, comparisons and casts.
 *
 * Usage: mlp [iterations] (default 60).  Prints a short summary; exits 1
 * if the loss did not fall (the ops test suite runs it that way).
 */
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include "tensorplay/tensorplay.h"
#include "tensorplay/cuda.h"

static tp_device dev; /* where the model and data live */

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
    tp_tensor *r = OK(tp_randn_on(dev, ndim, sizes, TP_DTYPE_FLOAT32, seed));
    OK_STATUS(tp_binary_scalar_(TP_BINARY_OP_MUL, r, scale));
    return r;
}

static mlp mlp_new(uint64_t seed) {
    mlp m;
    m.w1 = scaled_randn(2, (int64_t[]){IN, HIDDEN}, 0.125, seed + 1); /* ~ 1/sqrt(IN) */
    m.b1 = OK(tp_full_on(dev, 1, (int64_t[]){HIDDEN}, 0.01, TP_DTYPE_FLOAT32));
    m.w2 = scaled_randn(2, (int64_t[]){HIDDEN, CLASSES}, 0.088, seed + 2);
    m.b2 = OK(tp_zeros_on(dev, 1, (int64_t[]){CLASSES}, TP_DTYPE_FLOAT32));
    return m;
}

static void mlp_free(mlp *m) { drop(4, (tp_tensor *[]){m->w1, m->b1, m->w2, m->b2}); }

typedef struct activations {
    tp_tensor *pre;    // (B, HIDDEN)  x @ W1 + b1
    tp_tensor *h;      // (B, HIDDEN)  relu(pre)
    tp_tensor *logits; // (B, CLASSES)
} activations;

static activations mlp_forward(const mlp *m, const tp_tensor *x) {
    activations a;
    a.pre = OK(tp_matmul(x, m->w1));
    OK_STATUS(tp_add_(a.pre, m->b1)); /* bias broadcast over rows, in place */
    a.h = OK(tp_relu(a.pre));
    tp_tensor *z = OK(tp_matmul(a.h, m->w2));
    a.logits = OK(tp_add(z, m->b2));
    tp_tensor_release(z);
    return a;
}

static void activations_free(activations *a) { drop(3, (tp_tensor *[]){a->pre, a->h, a->logits}); }

/* Row-wise softmax of (B, C). New reference. */
static tp_tensor *softmax_rows(const tp_tensor *z) {
    tp_tensor *mx = OK(tp_max(z, 1, (int[]){1}, true)); // (B, 1)
    tp_tensor *e = OK(tp_sub(z, mx));
    OK_STATUS(tp_unary_(TP_UNARY_OP_EXP, e));
    tp_tensor *s = OK(tp_sum(e, 1, (int[]){1}, true));  // (B, 1)
    OK_STATUS(tp_div_(e, s));
    drop(2, (tp_tensor *[]){mx, s});
    return e;
}

/* a^T @ b for 2-D a, b: a transposed view, no copy. New reference. */
static tp_tensor *matmul_tn(tp_tensor *a, tp_tensor *b) {
    tp_tensor *at = OK(tp_tensor_t(a));
    tp_tensor *r = OK(tp_matmul(at, b));
    tp_tensor_release(at);
    return r;
}

/* w -= lr * g (g is consumed). */
static void sgd(tp_tensor *w, tp_tensor *g, double lr) {
    OK_STATUS(tp_binary_scalar_(TP_BINARY_OP_MUL, g, lr));
    OK_STATUS(tp_sub_(w, g));
    tp_tensor_release(g);
}

// ----------------------------------------------------------------------------
// one iteration: forward, loss, accuracy, backward, update

typedef struct step_result {
    double loss, accuracy;
} step_result;

static step_result train_step(mlp *m, const tp_tensor *teacher, uint64_t seed, double lr) {
    tp_tensor *x = OK(tp_randn_on(dev, 2, (int64_t[]){BATCH, IN}, TP_DTYPE_FLOAT32, seed));
    tp_tensor *t = OK(tp_matmul(x, teacher));
    tp_tensor *y = OK(tp_argmax(t, 1, false)); // (B) int64

    activations a = mlp_forward(m, x);
    tp_tensor *p = softmax_rows(a.logits);

    /* one-hot labels: y[:, None] == arange(C) */
    tp_tensor *classes = OK(tp_arange_on(dev, 0, CLASSES, 1, TP_DTYPE_INT64));
    tp_tensor *ycol = OK(tp_tensor_unsqueeze(y, 1)); // (B, 1) view
    tp_tensor *onehot_b = OK(tp_binary(TP_BINARY_OP_EQ, ycol, classes));
    tp_tensor *onehot = OK(tp_to_dtype(onehot_b, TP_DTYPE_FLOAT32));

    /* cross-entropy: mean over rows of -sum(onehot * log p) */
    tp_tensor *logp = OK(tp_log(p));
    OK_STATUS(tp_mul_(logp, onehot));
    tp_tensor *row = OK(tp_sum(logp, 1, (int[]){1}, false));
    tp_tensor *loss = OK(tp_mean(row, 0, NULL, false));

    /* accuracy: mean(argmax p == y) */
    tp_tensor *pred = OK(tp_argmax(p, 1, false));
    tp_tensor *hit_b = OK(tp_binary(TP_BINARY_OP_EQ, pred, y));
    tp_tensor *hit = OK(tp_to_dtype(hit_b, TP_DTYPE_FLOAT32));
    tp_tensor *acc = OK(tp_mean(hit, 0, NULL, false));

    step_result r = {0, 0};
    OK_STATUS(tp_tensor_item(loss, &r.loss));
    r.loss = -r.loss;
    OK_STATUS(tp_tensor_item(acc, &r.accuracy));

    /* backward: dz = (p - onehot) / B */
    tp_tensor *dz = OK(tp_sub(p, onehot));                      // (B, C)
    OK_STATUS(tp_binary_scalar_(TP_BINARY_OP_DIV, dz, BATCH));
    tp_tensor *dw2 = matmul_tn(a.h, dz);                         // (H, C)
    tp_tensor *db2 = OK(tp_sum(dz, 1, (int[]){0}, false));        // (C): a column reduction
    tp_tensor *w2t = OK(tp_tensor_t(m->w2));
    tp_tensor *dh = OK(tp_matmul(dz, w2t));                      // (B, H)
    tp_tensor *active_b = OK(tp_binary_scalar(TP_BINARY_OP_GT, a.pre, 0));
    tp_tensor *active = OK(tp_to_dtype(active_b, TP_DTYPE_FLOAT32));
    OK_STATUS(tp_mul_(dh, active));                              // through relu
    tp_tensor *dw1 = matmul_tn(x, dh);                           // (IN, H)
    tp_tensor *db1 = OK(tp_sum(dh, 1, (int[]){0}, false));        // (H)

    sgd(m->w2, dw2, lr);
    sgd(m->b2, db2, lr);
    sgd(m->w1, dw1, lr);
    sgd(m->b1, db1, lr);

    activations_free(&a);
    drop(19, (tp_tensor *[]){x, t, y, p, classes, ycol, onehot_b, onehot, logp, row, loss, pred, hit_b, hit,
                             acc, dz, w2t, dh, active_b});
    tp_tensor_release(active);
    return r;
}

/* Trains for iters steps on device d; returns the first and last results. */
static void train(tp_device d, int iters, step_result *first, step_result *last, bool verbose) {
    dev = d;
    const double lr = 0.5;
    mlp m = mlp_new(2024);
    tp_tensor *teacher = OK(tp_randn_on(dev, 2, (int64_t[]){IN, CLASSES}, TP_DTYPE_FLOAT32, 7));
    for (int i = 0; i < iters; i++) {
        step_result r = train_step(&m, teacher, 100 + (uint64_t)i, lr);
        if (i == 0) *first = r;
        *last = r;
        if (verbose && (i % 10 == 0 || i == iters - 1))
            printf("  step %3d: loss %.4f  accuracy %.3f\n", i, r.loss, r.accuracy);
    }
    if (verbose) { /* logits for two fresh samples, read back for printing */
        tp_tensor *x = OK(tp_randn_on(dev, 2, (int64_t[]){2, IN}, TP_DTYPE_FLOAT32, 1));
        activations a = mlp_forward(&m, x);
        OK_STATUS(tp_tensor_print(a.logits, stdout));
        activations_free(&a);
        tp_tensor_release(x);
    }
    tp_tensor_release(teacher);
    mlp_free(&m);
}

int main(int argc, char **argv) {
    int iters = argc > 1 ? atoi(argv[1]) : 60;
    if (iters < 1) iters = 1;
    tp_device gpu;
    if (tp_device_parse(argc > 2 ? argv[2] : "cuda:0", &gpu) != TP_STATUS_OK) {
        fprintf(stderr, "mlp_gpu: %s\n", tp_last_error());
        return 2;
    }
    int n = 0;
    if (tp_cuda_device_count(&n) != TP_STATUS_OK) {
        printf("SKIP: no CUDA device (%s)\n", tp_last_error());
        return 77;
    }
    char name[16];
    printf("mlp_gpu: batch %d, %d -> %d -> %d on %s (%s allocator)\n", BATCH, IN, HIDDEN, CLASSES,
           tp_device_str(gpu, name, sizeof name), tp_cuda_allocator_backend());
    step_result first = {0, 0}, last = {0, 0}, cfirst, clast;
    train(gpu, iters, &first, &last, true);
    OK_STATUS(tp_device_synchronize(gpu));
    train(tp_device_cpu(), iters, &cfirst, &clast, false);
    printf("loss %.4f -> %.4f, accuracy %.3f -> %.3f; the CPU's final loss %.4f (difference %.2g)\n",
           first.loss, last.loss, first.accuracy, last.accuracy, clast.loss, fabs(clast.loss - last.loss));
    tp_caching_allocator *ca = tp_cuda_caching_allocator_of(gpu);
    if (ca) {
        tp_caching_allocator_stats st;
        tp_caching_allocator_get_stats(ca, &st);
        printf("caching allocator on %s: peak allocated %lld bytes, peak reserved %lld bytes, "
               "%llu blocks handed out\n", name, (long long)st.allocated_bytes.peak,
               (long long)st.reserved_bytes.peak, (unsigned long long)st.allocation.allocated);
    }
    if (iters > 1 && !(last.loss < first.loss)) {
        fprintf(stderr, "mlp_gpu: the loss did not fall\n");
        return 1;
    }
    if (fabs(clast.loss - last.loss) > 1e-3) {
        fprintf(stderr, "mlp_gpu: the GPU and CPU losses differ\n");
        return 1;
    }
    return 0;
}
