/*
 * samples/train/charlstm.c - a character-level LSTM (embedding, one LSTM
 * cell unrolled over the sequence, a linear head) trained on the short text
 * below, with every tensor's memory from the deferred-free allocator: the
 * RNN time-step case, where each step makes many same-sized small tensors
 * and frees them together after backward; the queue is flushed once per
 * training step.
 *
 * Usage: charlstm [steps] (default 40).  Exits 1 unless the mean loss of
 * the last 5 steps is below 85% of the first 5's (the nn suite runs it).
 * Everything is released, and the allocator destroyed, at exit.
 */
#include <string.h>
#include "mlp_model.h" /* MLP_OK, MLP_OK_STATUS */

/* The text it learns (written for this sample). */
static const char text[] =
    "the quick brown fox jumps over the lazy dog. the lazy dog sleeps in the sun. "
    "the brown fox runs to the river and the dog follows the fox to the river. "
    "a tensor holds numbers, a graph holds tensors, and a step frees the graph. "
    "the fox and the dog rest by the river until the sun goes down. ";

enum { BATCH = 8, SEQ = 16, EMB = 16, HIDDEN = 64 };

typedef struct model {
    tp_nn_embedding emb;
    tp_nn_lstm_cell cell;
    tp_nn_linear head;
    tp_param_list params;
    int vocab;
    int index_of[256];
} model;

static void model_init(model *m) {
    *m = (model){0};
    for (int i = 0; i < 256; i++) m->index_of[i] = -1;
    for (const char *c = text; *c; c++)
        if (m->index_of[(unsigned char)*c] < 0) m->index_of[(unsigned char)*c] = m->vocab++;
    MLP_OK_STATUS(tp_nn_embedding_init(&m->emb, (tp_nn_embedding_options){.num_embeddings = m->vocab, .embedding_dim = EMB, .seed = 1}));
    MLP_OK_STATUS(tp_nn_lstm_cell_init(&m->cell, (tp_nn_lstm_cell_options){.input_size = EMB, .hidden_size = HIDDEN, .seed = 2}));
    MLP_OK_STATUS(tp_nn_linear_init(&m->head, (tp_nn_linear_options){.in_features = HIDDEN, .out_features = m->vocab, .seed = 3}));
    MLP_OK_STATUS(tp_nn_embedding_parameters(&m->emb, &m->params));
    MLP_OK_STATUS(tp_nn_lstm_cell_parameters(&m->cell, &m->params));
    MLP_OK_STATUS(tp_nn_linear_parameters(&m->head, &m->params));
}

static void model_free(model *m) {
    tp_param_list_free(&m->params);
    tp_nn_embedding_free(&m->emb);
    tp_nn_lstm_cell_free(&m->cell);
    tp_nn_linear_free(&m->head);
}

/* One step on BATCH windows of SEQ + 1 characters from seeded offsets. */
static double step(model *m, tp_adamw *opt, uint64_t seed) {
    int64_t n = (int64_t)strlen(text);
    tp_tensor *r = MLP_OK(tp_rand(1, (int64_t[]){BATCH}, TP_DTYPE_FLOAT64, seed));
    int64_t start[BATCH];
    for (int b = 0; b < BATCH; b++) start[b] = (int64_t)(((const double *)tp_tensor_data(r))[b] * (double)(n - SEQ - 1));
    tp_tensor_release(r);
    tp_tensor *h = MLP_OK(tp_zeros(2, (int64_t[]){BATCH, HIDDEN}, TP_DTYPE_FLOAT32));
    tp_tensor *c = MLP_OK(tp_zeros(2, (int64_t[]){BATCH, HIDDEN}, TP_DTYPE_FLOAT32));
    tp_tensor *total = NULL;
    for (int t = 0; t < SEQ; t++) {
        tp_tensor *in = MLP_OK(tp_empty(1, (int64_t[]){BATCH}, TP_DTYPE_INT64));
        tp_tensor *target = MLP_OK(tp_empty(1, (int64_t[]){BATCH}, TP_DTYPE_INT64));
        for (int b = 0; b < BATCH; b++) {
            ((int64_t *)tp_tensor_data(in))[b] = m->index_of[(unsigned char)text[start[b] + t]];
            ((int64_t *)tp_tensor_data(target))[b] = m->index_of[(unsigned char)text[start[b] + t + 1]];
        }
        tp_tensor *e = MLP_OK(tp_nn_embedding_forward(&m->emb, in));
        tp_tensor *h2, *c2;
        MLP_OK_STATUS(tp_nn_lstm_cell_forward(&m->cell, e, h, c, &h2, &c2));
        tp_tensor *logits = MLP_OK(tp_nn_linear_forward(&m->head, h2));
        tp_tensor *loss = MLP_OK(tp_nn_cross_entropy(logits, target));
        tp_tensor *sum = total ? MLP_OK(tp_ag_add(total, loss)) : tp_tensor_retain(loss);
        tp_tensor *ts[] = {in, target, e, h, c, logits, loss, total};
        for (int i = 0; i < 8; i++) tp_tensor_release(ts[i]);
        h = h2;
        c = c2;
        total = sum;
    }
    tp_tensor *mean = MLP_OK(tp_ag_binary_scalar(TP_BINARY_OP_DIV, total, SEQ));
    double value = 0;
    MLP_OK_STATUS(tp_tensor_item(mean, &value));
    MLP_OK_STATUS(tp_param_list_zero_grad(&m->params, true));
    MLP_OK_STATUS(tp_backward(mean, NULL, false));
    MLP_OK_STATUS(tp_adamw_step(opt));
    tp_tensor *ts[] = {mean, total, h, c};
    for (int i = 0; i < 4; i++) tp_tensor_release(ts[i]);
    return value;
}

int main(int argc, char **argv) {
    int steps = argc > 1 ? atoi(argv[1]) : 40;
    if (steps < 10) {
        fprintf(stderr, "charlstm: steps must be at least 10\n");
        return 2;
    }
    /* every storage from here on comes from the deferred allocator */
    tp_deferred_allocator *deferred = tp_deferred_allocator_new(tp_allocator_cpu(), 0, 0);
    if (!deferred) {
        fprintf(stderr, "charlstm: %s\n", tp_last_error());
        return 1;
    }
    MLP_OK_STATUS(tp_allocator_set(TP_DEVICE_TYPE_CPU, tp_deferred_allocator_as_allocator(deferred)));
    model m;
    model_init(&m);
    tp_adamw opt;
    MLP_OK_STATUS(tp_adamw_init(&opt, &m.params, (tp_adamw_options){.lr = 1e-2, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8}));
    double first = 0, last = 0;
    size_t freed = 0;
    for (int s = 0; s < steps; s++) {
        double loss = step(&m, &opt, 5 + (uint64_t)s);
        freed += tp_deferred_allocator_flush(deferred); /* the step's temporaries, at once */
        if (s < 5) first += loss / 5;
        if (s >= steps - 5) last += loss / 5;
        if (s % 10 == 0 || s == steps - 1) printf("step %3d  loss %.4f\n", s, loss);
    }
    tp_adamw_free(&opt);
    model_free(&m);
    MLP_OK_STATUS(tp_allocator_set(TP_DEVICE_TYPE_CPU, NULL));
    tp_deferred_allocator_stats st;
    tp_deferred_allocator_get_stats(deferred, &st);
    tp_deferred_allocator_destroy(deferred);
    printf("vocabulary %d; deferred frees: %zu blocks in %llu flushes; %llu blocks live at the end\n", m.vocab,
           freed, (unsigned long long)st.flush_count, (unsigned long long)st.live_count);
    printf("mean loss: first 5 steps %.4f, last 5 steps %.4f\n", first, last);
    if (!(last < 0.85 * first)) {
        fprintf(stderr, "charlstm: the loss did not fall enough (%.4f -> %.4f)\n", first, last);
        return 1;
    }
    return 0;
}
