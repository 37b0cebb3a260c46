/*
 * tests/nn/test_nn.c - layers, initializers and parameter lists
 * (src/nn/): shapes, PyTorch's default initial distributions, what each
 * forward computes, that gradients reach every parameter, bad input.
 */
#include <math.h>
#include <stdlib.h>

#include "tensorplay/tensorplay.h"
#include "../check.h"

#define SHAPE(...) ((int64_t[]){__VA_ARGS__})

static double at(const tp_tensor *t, int64_t i) {
    tp_tensor *c = tp_contiguous((tp_tensor *)t);
    tp_tensor *d = tp_to_dtype(c, TP_DTYPE_FLOAT64);
    double v = ((const double *)tp_tensor_data(d))[i];
    tp_tensor_release(d);
    tp_tensor_release(c);
    return v;
}

static void test_linear_init_forward_and_parameters(void) {
    tp_nn_linear fc;
    CHECK_EQ(tp_nn_linear_init(&fc, (tp_nn_linear_options){.in_features = 16, .out_features = 4, .seed = 3}),
             TP_STATUS_OK);
    CHECK_EQ(tp_tensor_size(fc.weight, 0), 4);
    CHECK_EQ(tp_tensor_size(fc.weight, 1), 16);
    CHECK(tp_tensor_requires_grad(fc.weight) && tp_tensor_is_leaf(fc.weight));
    CHECK_EQ(tp_tensor_dtype(fc.weight), TP_DTYPE_FLOAT32);
    double lo = 1, hi = -1;
    for (int i = 0; i < 64; i++) {
        double v = at(fc.weight, i);
        lo = v < lo ? v : lo;
        hi = v > hi ? v : hi;
    }
    CHECK(lo >= -0.25 && hi <= 0.25 && hi - lo > 0.3); /* U(-1/sqrt(16), 1/sqrt(16)) */
    tp_nn_linear same;
    tp_nn_linear_init(&same, (tp_nn_linear_options){.in_features = 16, .out_features = 4, .seed = 3});
    CHECK(at(same.weight, 7) == at(fc.weight, 7) && at(same.bias, 2) == at(fc.bias, 2));
    tp_nn_linear_free(&same);

    tp_tensor *x = tp_ones(2, SHAPE(5, 16), TP_DTYPE_FLOAT32);
    tp_tensor *y = tp_nn_linear_forward(&fc, x);
    CHECK_EQ(tp_tensor_size(y, 0), 5);
    CHECK_EQ(tp_tensor_size(y, 1), 4);
    double expect = at(fc.bias, 1);
    for (int j = 0; j < 16; j++) expect += at(fc.weight, 16 + j);
    CHECK(fabs(at(y, 1) - expect) < 1e-5);
    tp_param_list params = {0};
    CHECK_EQ(tp_nn_linear_parameters(&fc, &params), TP_STATUS_OK);
    CHECK_EQ(params.count, 2);
    CHECK(params.items[0] == fc.weight && params.items[1] == fc.bias);
    tp_tensor *l = tp_ag_sum(y, 0, NULL, false);
    CHECK_EQ(tp_backward(l, NULL, false), TP_STATUS_OK);
    CHECK(at(tp_tensor_grad(fc.bias), 0) == 5.0);    /* 5 rows */
    CHECK(at(tp_tensor_grad(fc.weight), 0) == 5.0);  /* sum of ones */
    /* zero_grad: filled with zeros, then dropped */
    CHECK_EQ(tp_param_list_zero_grad(&params, false), TP_STATUS_OK);
    CHECK(tp_tensor_grad(fc.bias) && at(tp_tensor_grad(fc.bias), 0) == 0.0);
    CHECK_EQ(tp_param_list_zero_grad(&params, true), TP_STATUS_OK);
    CHECK(tp_tensor_grad(fc.bias) == NULL && tp_tensor_grad(fc.weight) == NULL);
    tp_param_list_free(&params);
    CHECK(params.items == NULL && params.count == 0);
    tp_tensor_release(l);
    tp_tensor_release(y);
    tp_tensor_release(x);
    tp_nn_linear_free(&fc);
    CHECK(fc.weight == NULL);
}

static void test_linear_bad_input(void) {
    tp_nn_linear fc;
    CHECK_EQ(tp_nn_linear_init(&fc, (tp_nn_linear_options){.in_features = 0, .out_features = 4}),
             TP_STATUS_INVALID_ARGUMENT);
    CHECK_EQ(tp_nn_linear_init(&fc, (tp_nn_linear_options){.in_features = 3, .out_features = 2, .no_bias = true}),
             TP_STATUS_OK);
    CHECK(fc.bias == NULL);
    tp_tensor *x = tp_ones(2, SHAPE(2, 4), TP_DTYPE_FLOAT32);
    CHECK(tp_nn_linear_forward(&fc, x) == NULL);
    CHECK_CONTAINS(tp_last_error(), "mat1 and mat2 shapes cannot be multiplied");
    tp_tensor_release(x);
    tp_nn_linear_free(&fc);
}

static void test_layer_norm_normalizes_the_last_dim(void) {
    tp_nn_layer_norm ln;
    CHECK_EQ(tp_nn_layer_norm_init(&ln, (tp_nn_layer_norm_options){.normalized_size = 6}), TP_STATUS_OK);
    CHECK(ln.eps == 1e-5 && at(ln.weight, 0) == 1.0 && at(ln.bias, 5) == 0.0);
    tp_tensor *x = tp_randn(2, SHAPE(3, 6), TP_DTYPE_FLOAT32, 9);
    tp_binary_scalar_(TP_BINARY_OP_MUL, x, 5);
    tp_binary_scalar_(TP_BINARY_OP_ADD, x, 2);
    tp_tensor *y = tp_nn_layer_norm_forward(&ln, x);
    for (int r = 0; r < 3; r++) {
        double m = 0, v = 0;
        for (int j = 0; j < 6; j++) m += at(y, r * 6 + j) / 6;
        for (int j = 0; j < 6; j++) v += (at(y, r * 6 + j) - m) * (at(y, r * 6 + j) - m) / 6;
        CHECK(fabs(m) < 1e-5 && fabs(v - 1) < 1e-3);
    }
    tp_tensor *w = tp_randn(2, SHAPE(3, 6), TP_DTYPE_FLOAT32, 10);
    CHECK_EQ(tp_backward(y, w, false), TP_STATUS_OK);
    CHECK(tp_tensor_grad(ln.weight) != NULL && tp_tensor_grad(ln.bias) != NULL);
    tp_tensor *bad = tp_ones(2, SHAPE(3, 5), TP_DTYPE_FLOAT32);
    CHECK(tp_nn_layer_norm_forward(&ln, bad) == NULL);
    CHECK_CONTAINS(tp_last_error(), "Given normalized_shape=[6], expected input with shape [*, 6]");
    tp_tensor_release(bad);
    tp_tensor_release(w);
    tp_tensor_release(y);
    tp_tensor_release(x);
    tp_nn_layer_norm_free(&ln);
}

static void test_embedding_picks_rows_and_sums_repeated_gradients(void) {
    tp_nn_embedding emb;
    CHECK_EQ(tp_nn_embedding_init(&emb, (tp_nn_embedding_options){.num_embeddings = 5, .embedding_dim = 3, .seed = 1}),
             TP_STATUS_OK);
    tp_tensor *idx = tp_arange(0, 4, 1, TP_DTYPE_INT64);
    int64_t *p = tp_tensor_data(idx);
    p[0] = 4; p[1] = 1; p[2] = 4; p[3] = 0;
    tp_tensor *idx2 = tp_tensor_view(idx, 2, SHAPE(2, 2));
    tp_tensor *e = tp_nn_embedding_forward(&emb, idx2);
    CHECK_EQ(tp_tensor_dim(e), 3);
    CHECK_EQ(tp_tensor_size(e, 2), 3);
    CHECK(at(e, 0) == at(emb.weight, 12) && at(e, 3) == at(emb.weight, 3));
    tp_tensor *s = tp_ag_sum(e, 0, NULL, false);
    CHECK_EQ(tp_backward(s, NULL, false), TP_STATUS_OK);
    tp_tensor *g = tp_tensor_grad(emb.weight);
    CHECK(at(g, 12) == 2.0 && at(g, 3) == 1.0 && at(g, 0) == 1.0 && at(g, 6) == 0.0);
    tp_tensor *f = tp_ones(1, SHAPE(2), TP_DTYPE_FLOAT32);
    CHECK(tp_nn_embedding_forward(&emb, f) == NULL);
    CHECK_CONTAINS(tp_last_error(), "'indices' to have one of the following scalar types: Long, Int");
    p[1] = 7;
    CHECK(tp_nn_embedding_forward(&emb, idx) == NULL); /* index_select's range check */
    tp_tensor_release(f);
    tp_tensor_release(s);
    tp_tensor_release(e);
    tp_tensor_release(idx2);
    tp_tensor_release(idx);
    tp_nn_embedding_free(&emb);
}

static void test_dropout_is_seeded_and_scaled(void) {
    tp_tensor *x = tp_ones(1, SHAPE(1000), TP_DTYPE_FLOAT32);
    tp_tensor_set_requires_grad(x, true);
    tp_nn_dropout a = {.p = 0.25, .seed = 42}, b = {.p = 0.25, .seed = 42};
    tp_tensor *ya = tp_nn_dropout_forward(&a, x, true), *yb = tp_nn_dropout_forward(&b, x, true);
    int zeros = 0, same = 1;
    for (int i = 0; i < 1000; i++) {
        double v = at(ya, i);
        zeros += v == 0;
        CHECK(v == 0 || fabs(v - 1 / 0.75) < 1e-6);
        same &= v == at(yb, i);
    }
    CHECK(same);
    CHECK(zeros > 200 && zeros < 300);
    tp_tensor *ya2 = tp_nn_dropout_forward(&a, x, true); /* the next call: another mask */
    int differ = 0;
    for (int i = 0; i < 1000; i++) differ += at(ya2, i) != at(ya, i);
    CHECK(differ > 0);
    tp_tensor *s = tp_ag_sum(ya, 0, NULL, false);
    CHECK_EQ(tp_backward(s, NULL, false), TP_STATUS_OK);
    CHECK(at(tp_tensor_grad(x), 0) == at(ya, 0)); /* the mask itself */
    tp_tensor *ev = tp_nn_dropout_forward(&a, x, false);
    CHECK(ev == x);
    tp_nn_dropout bad = {.p = 1.5};
    CHECK(tp_nn_dropout_forward(&bad, x, true) == NULL);
    CHECK_STR(tp_last_error(), "dropout probability has to be between 0 and 1, but got 1.5");
    tp_tensor *ts[] = {ev, s, ya2, yb, ya, x};
    for (int i = 0; i < 6; i++) tp_tensor_release(ts[i]);
}

static void test_functional_activations(void) {
    tp_tensor *x = tp_linspace(-2, 2, 5, TP_DTYPE_FLOAT64);
    tp_tensor *r = tp_nn_relu(x), *g = tp_nn_gelu(x);
    CHECK(at(r, 0) == 0 && at(r, 4) == 2);
    CHECK(fabs(at(g, 4) - 1.9544997361036416) < 1e-12); /* torch.nn.functional.gelu(2.) */
    CHECK(fabs(at(g, 0) + 0.04550026389635842) < 1e-12);
    tp_tensor_release(g);
    tp_tensor_release(r);
    tp_tensor_release(x);
}

static void test_initializers(void) {
    tp_tensor *t = tp_empty(1, SHAPE(4000), TP_DTYPE_FLOAT64);
    CHECK_EQ(tp_nn_init_normal_(t, 3.0, 2.0, 5), TP_STATUS_OK);
    double m = 0;
    for (int i = 0; i < 4000; i++) m += at(t, i) / 4000;
    CHECK(fabs(m - 3.0) < 0.15);
    CHECK_EQ(tp_nn_init_uniform_(t, 1.0, 0.0, 5), TP_STATUS_INVALID_ARGUMENT);
    CHECK_EQ(tp_nn_init_normal_(t, 0, -1, 5), TP_STATUS_INVALID_ARGUMENT);
    tp_tensor_release(t);
}

int main(void) {
    RUN_TEST(test_linear_init_forward_and_parameters);
    RUN_TEST(test_linear_bad_input);
    RUN_TEST(test_layer_norm_normalizes_the_last_dim);
    RUN_TEST(test_embedding_picks_rows_and_sums_repeated_gradients);
    RUN_TEST(test_dropout_is_seeded_and_scaled);
    RUN_TEST(test_functional_activations);
    RUN_TEST(test_initializers);
    return CHECK_DONE();
}
