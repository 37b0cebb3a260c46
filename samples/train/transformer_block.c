/*
 * samples/train/transformer_block.c - one pre-norm transformer block
 * (single-head causal self-attention + a GELU MLP, each behind a LayerNorm
 * and a residual) trained a few steps on a synthetic task: predict, at
 * each position, the token one position back (position 0: itself), which
 * the block can only solve by attending to its neighbour.
 *
 *   x = emb(tokens) + pos                                 (B, T, D)
 *   h = x + proj(softmax(mask + q k^T / sqrt(D)) v),  q, k, v = lin(ln1(x))
 *   y = h + fc2(gelu(fc1(ln2(h))))
 *   loss = cross_entropy(head(y) as (B*T, V), targets)
 *
 * Usage: transformer_block [steps] (default 60).  Exits 1 unless the mean
 * loss of the last 5 steps is below 80% of the first 5's (the nn suite runs
 * it).  Everything is released at exit.
 */
#include <math.h>
#include "mlp_model.h" /* MLP_OK, MLP_OK_STATUS */

enum { B = 16, T = 8, D = 32, V = 16 };

typedef struct block {
    tp_nn_embedding emb, pos;
    tp_nn_layer_norm ln1, ln2;
    tp_nn_linear q, k, v, proj, fc1, fc2, head;
    tp_param_list params;
    tp_tensor *mask; /* (T, T): 0 on and below the diagonal, -1e9 above */
} block;

static void block_init(block *m) {
    *m = (block){0};
    MLP_OK_STATUS(tp_nn_embedding_init(&m->emb, (tp_nn_embedding_options){.num_embeddings = V, .embedding_dim = D, .seed = 1}));
    MLP_OK_STATUS(tp_nn_embedding_init(&m->pos, (tp_nn_embedding_options){.num_embeddings = T, .embedding_dim = D, .seed = 2}));
    MLP_OK_STATUS(tp_nn_layer_norm_init(&m->ln1, (tp_nn_layer_norm_options){.normalized_size = D}));
    MLP_OK_STATUS(tp_nn_layer_norm_init(&m->ln2, (tp_nn_layer_norm_options){.normalized_size = D}));
    tp_nn_linear *lins[] = {&m->q, &m->k, &m->v, &m->proj, &m->fc1, &m->fc2, &m->head};
    int64_t ins[] = {D, D, D, D, D, 4 * D, D}, outs[] = {D, D, D, D, 4 * D, D, V};
    for (int i = 0; i < 7; i++)
        MLP_OK_STATUS(tp_nn_linear_init(lins[i], (tp_nn_linear_options){.in_features = ins[i], .out_features = outs[i], .seed = 10 + (uint64_t)i}));
    MLP_OK_STATUS(tp_nn_embedding_parameters(&m->emb, &m->params));
    MLP_OK_STATUS(tp_nn_embedding_parameters(&m->pos, &m->params));
    MLP_OK_STATUS(tp_nn_layer_norm_parameters(&m->ln1, &m->params));
    MLP_OK_STATUS(tp_nn_layer_norm_parameters(&m->ln2, &m->params));
    for (int i = 0; i < 7; i++) MLP_OK_STATUS(tp_nn_linear_parameters(lins[i], &m->params));
    m->mask = MLP_OK(tp_zeros(2, (int64_t[]){T, T}, TP_DTYPE_FLOAT32));
    float *mk = tp_tensor_data(m->mask);
    for (int i = 0; i < T; i++)
        for (int j = i + 1; j < T; j++) mk[i * T + j] = -1e9f;
}

static void block_free(block *m) {
    tp_param_list_free(&m->params);
    tp_nn_embedding_free(&m->emb);
    tp_nn_embedding_free(&m->pos);
    tp_nn_layer_norm_free(&m->ln1);
    tp_nn_layer_norm_free(&m->ln2);
    tp_nn_linear *lins[] = {&m->q, &m->k, &m->v, &m->proj, &m->fc1, &m->fc2, &m->head};
    for (int i = 0; i < 7; i++) tp_nn_linear_free(lins[i]);
    tp_tensor_release(m->mask);
}

/* Temporaries of one forward, released together. */
typedef struct pool {
    tp_tensor *t[64];
    int n;
} pool;

static tp_tensor *keep(pool *p, tp_tensor *t) {
    if (!t) {
        fprintf(stderr, "transformer_block: %s\n", tp_last_error());
        exit(1);
    }
    p->t[p->n++] = t;
    return t;
}

static void pool_release(pool *p) {
    for (int i = 0; i < p->n; i++) tp_tensor_release(p->t[i]);
    p->n = 0;
}

static double step(block *m, tp_adamw *opt, uint64_t seed) {
    pool p = {0};
    /* tokens (B, T) uniform in [0, V); targets shifted by one */
    tp_tensor *r = keep(&p, tp_rand(2, (int64_t[]){B, T}, TP_DTYPE_FLOAT64, seed));
    tp_tensor *tok = keep(&p, tp_empty(2, (int64_t[]){B, T}, TP_DTYPE_INT64));
    tp_tensor *tgt = keep(&p, tp_empty(1, (int64_t[]){B * T}, TP_DTYPE_INT64));
    const double *rd = tp_tensor_data(r);
    int64_t *td = tp_tensor_data(tok), *gd = tp_tensor_data(tgt);
    for (int i = 0; i < B * T; i++) td[i] = (int64_t)(rd[i] * V);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) gd[b * T + t] = td[b * T + (t ? t - 1 : 0)];
    tp_tensor *positions = keep(&p, tp_arange(0, T, 1, TP_DTYPE_INT64));

    tp_tensor *x = keep(&p, tp_ag_add(keep(&p, tp_nn_embedding_forward(&m->emb, tok)),
                                      keep(&p, tp_nn_embedding_forward(&m->pos, positions))));
    tp_tensor *a = keep(&p, tp_nn_layer_norm_forward(&m->ln1, x));
    tp_tensor *q = keep(&p, tp_nn_linear_forward(&m->q, a));
    tp_tensor *k = keep(&p, tp_nn_linear_forward(&m->k, a));
    tp_tensor *v = keep(&p, tp_nn_linear_forward(&m->v, a));
    tp_tensor *kt = keep(&p, tp_ag_transpose(k, 1, 2));
    tp_tensor *s = keep(&p, tp_ag_bmm(q, kt));                                        /* (B, T, T) */
    tp_tensor *ss = keep(&p, tp_ag_binary_scalar(TP_BINARY_OP_MUL, s, 1.0 / sqrt(D)));
    tp_tensor *sm = keep(&p, tp_ag_add(ss, m->mask));
    tp_tensor *att = keep(&p, tp_ag_softmax(sm, -1));
    tp_tensor *ctx = keep(&p, tp_ag_bmm(att, v));                                     /* (B, T, D) */
    tp_tensor *h = keep(&p, tp_ag_add(x, keep(&p, tp_nn_linear_forward(&m->proj, ctx))));
    tp_tensor *b2 = keep(&p, tp_nn_layer_norm_forward(&m->ln2, h));
    tp_tensor *f = keep(&p, tp_nn_gelu(keep(&p, tp_nn_linear_forward(&m->fc1, b2))));
    tp_tensor *y = keep(&p, tp_ag_add(h, keep(&p, tp_nn_linear_forward(&m->fc2, f))));
    tp_tensor *logits = keep(&p, tp_nn_linear_forward(&m->head, y));                  /* (B, T, V) */
    tp_tensor *flat = keep(&p, tp_ag_reshape(logits, 2, (int64_t[]){B * T, V}));
    tp_tensor *loss = keep(&p, tp_nn_cross_entropy(flat, tgt));
    double value = 0;
    MLP_OK_STATUS(tp_tensor_item(loss, &value));
    MLP_OK_STATUS(tp_param_list_zero_grad(&m->params, true));
    MLP_OK_STATUS(tp_backward(loss, NULL, false));
    MLP_OK_STATUS(tp_adamw_step(opt));
    pool_release(&p);
    return value;
}

int main(int argc, char **argv) {
    int steps = argc > 1 ? atoi(argv[1]) : 60;
    if (steps < 10) {
        fprintf(stderr, "transformer_block: steps must be at least 10\n");
        return 2;
    }
    block m;
    block_init(&m);
    tp_adamw opt;
    MLP_OK_STATUS(tp_adamw_init(&opt, &m.params, (tp_adamw_options){.lr = 1e-2, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8}));
    double first = 0, last = 0;
    for (int s = 0; s < steps; s++) {
        double loss = step(&m, &opt, 77 + (uint64_t)s);
        if (s < 5) first += loss / 5;
        if (s >= steps - 5) last += loss / 5;
        if (s % 10 == 0 || s == steps - 1) printf("step %3d  loss %.4f\n", s, loss);
    }
    tp_adamw_free(&opt);
    block_free(&m);
    printf("mean loss: first 5 steps %.4f, last 5 steps %.4f\n", first, last);
    if (!(last < 0.8 * first)) {
        fprintf(stderr, "transformer_block: the loss did not fall enough (%.4f -> %.4f)\n", first, last);
        return 1;
    }
    return 0;
}
