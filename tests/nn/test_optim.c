/*
 * tests/nn/test_optim.c - SGD and AdamW (src/optim/) against their update
 * rules written out in double, the option checks, and a small fit.
 */
#include <math.h>
#include <stdlib.h>

#include "tensorplay/tensorplay.h"
#include "../check.h"

#define SHAPE(...) ((int64_t[]){__VA_ARGS__})

static double at(const tp_tensor *t, int64_t i) { return ((const double *)tp_tensor_data(t))[i]; }

static tp_tensor *param(double a, double b) {
    tp_tensor *p = tp_linspace(a, b, 2, TP_DTYPE_FLOAT64);
    tp_tensor_set_requires_grad(p, true);
    return p;
}

static void set_grad(tp_tensor *p, double a, double b) {
    tp_tensor *g = tp_linspace(a, b, 2, TP_DTYPE_FLOAT64);
    tp_tensor_set_grad(p, g);
    tp_tensor_release(g);
}

static void test_sgd_momentum_matches_the_rule(void) {
    tp_tensor *p = param(1, 2);
    tp_param_list list = {0};
    tp_param_list_add(&list, p);
    tp_sgd opt;
    CHECK_EQ(tp_sgd_init(&opt, &list, (tp_sgd_options){.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01}),
             TP_STATUS_OK);
    double w = 1, buf = 0;
    double grads[3] = {0.5, -1.0, 2.0};
    for (int s = 0; s < 3; s++) {
        set_grad(p, grads[s], 0);
        CHECK_EQ(tp_sgd_step(&opt), TP_STATUS_OK);
        double d = grads[s] + 0.01 * w;
        buf = s == 0 ? d : 0.9 * buf + d;
        w -= 0.1 * buf;
        CHECK(fabs(at(p, 0) - w) < 1e-12);
    }
    CHECK_EQ(tp_tensor_version(p), 3);
    tp_sgd_free(&opt);
    /* nesterov */
    CHECK_EQ(tp_sgd_init(&opt, &list, (tp_sgd_options){.lr = 0.1, .nesterov = true}), TP_STATUS_INVALID_ARGUMENT);
    CHECK_STR(tp_last_error(), "Nesterov momentum requires a momentum and zero dampening");
    CHECK_EQ(tp_sgd_init(&opt, &list, (tp_sgd_options){.lr = -1}), TP_STATUS_INVALID_ARGUMENT);
    CHECK_STR(tp_last_error(), "Invalid learning rate: -1");
    CHECK_EQ(tp_sgd_init(&opt, &list, (tp_sgd_options){.lr = 0.5, .momentum = 0.5, .nesterov = true}), TP_STATUS_OK);
    double before = at(p, 1);
    set_grad(p, 0, 1);
    tp_sgd_step(&opt);
    CHECK(fabs(at(p, 1) - (before - 0.5 * (1 + 0.5 * 1))) < 1e-12);
    tp_sgd_free(&opt);
    tp_param_list_free(&list);
    tp_tensor_release(p);
}

static void test_adamw_matches_the_rule(void) {
    tp_tensor *p = param(0.5, -0.5), *q = param(1, 1); /* q gets no grad: skipped */
    tp_param_list list = {0};
    tp_param_list_add(&list, p);
    tp_param_list_add(&list, q);
    tp_adamw opt;
    tp_adamw_options o = {.lr = 1e-2, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 1e-2};
    CHECK_EQ(tp_adamw_init(&opt, &list, o), TP_STATUS_OK);
    double w = 0.5, m = 0, v = 0;
    double grads[4] = {0.3, -0.2, 0.05, 1.0};
    for (int t = 1; t <= 4; t++) {
        set_grad(p, grads[t - 1], 0);
        CHECK_EQ(tp_adamw_step(&opt), TP_STATUS_OK);
        double g = grads[t - 1];
        w *= 1 - o.lr * o.weight_decay;
        m = o.beta1 * m + (1 - o.beta1) * g;
        v = o.beta2 * v + (1 - o.beta2) * g * g;
        double bc1 = 1 - pow(o.beta1, t), bc2 = 1 - pow(o.beta2, t);
        w -= o.lr / bc1 * m / (sqrt(v) / sqrt(bc2) + o.eps);
        CHECK_MSG(fabs(at(p, 0) - w) < 1e-12, "step %d: %.15g vs %.15g", t, at(p, 0), w);
    }
    CHECK(at(q, 0) == 1.0 && tp_tensor_version(q) == 0);
    tp_adamw_free(&opt);
    CHECK_EQ(tp_adamw_init(&opt, &list, (tp_adamw_options){.lr = 1e-3, .beta1 = 1.0, .beta2 = 0.9}),
             TP_STATUS_INVALID_ARGUMENT);
    CHECK_STR(tp_last_error(), "Invalid beta parameter at index 0: 1");
    CHECK_EQ(tp_adamw_init(&opt, &list, (tp_adamw_options){.lr = 1e-3, .eps = -1}), TP_STATUS_INVALID_ARGUMENT);
    CHECK_STR(tp_last_error(), "Invalid epsilon value: -1");
    tp_param_list_free(&list);
    tp_tensor_release(q);
    tp_tensor_release(p);
}

static void test_optimizers_refuse_unsupported_parameters(void) {
    tp_tensor *base = tp_zeros(2, SHAPE(3, 3), TP_DTYPE_FLOAT32);
    tp_tensor *t = tp_tensor_t(base);
    tp_tensor *ok = tp_zeros(2, SHAPE(3, 3), TP_DTYPE_FLOAT32);
    tp_tensor_set_requires_grad(ok, true);
    tp_param_list list = {0};
    tp_param_list_add(&list, ok);
    tp_param_list_add(&list, t);
    tp_sgd opt;
    CHECK_EQ(tp_sgd_init(&opt, &list, (tp_sgd_options){.lr = 0.1}), TP_STATUS_UNSUPPORTED);
    CHECK_STR(tp_last_error(), "sgd: parameter 1 is not contiguous");
    CHECK_EQ(tp_param_list_add(&list, NULL), TP_STATUS_INVALID_ARGUMENT);
    tp_param_list_free(&list);
    tp_tensor_release(ok);
    tp_tensor_release(t);
    tp_tensor_release(base);
}

static void test_a_small_fit_converges(void) {
    /* y = 3x - 1 from 32 points; one Linear(1, 1) with AdamW */
    tp_nn_linear fc;
    tp_nn_linear_init(&fc, (tp_nn_linear_options){.in_features = 1, .out_features = 1, .seed = 2});
    tp_param_list params = {0};
    tp_nn_linear_parameters(&fc, &params);
    tp_adamw opt;
    tp_adamw_init(&opt, &params, (tp_adamw_options){.lr = 0.1, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8});
    tp_tensor *x = tp_linspace(-1, 1, 32, TP_DTYPE_FLOAT32);
    tp_tensor *x2 = tp_tensor_view(x, 2, SHAPE(32, 1));
    tp_tensor *y = tp_binary_scalar(TP_BINARY_OP_MUL, x2, 3);
    tp_binary_scalar_(TP_BINARY_OP_SUB, y, 1);
    double first = 0, last = 0;
    for (int step = 0; step < 300; step++) {
        tp_param_list_zero_grad(&params, true);
        tp_tensor *pred = tp_nn_linear_forward(&fc, x2);
        tp_tensor *d = tp_ag_sub(pred, y);
        tp_tensor *sq = tp_ag_mul(d, d);
        tp_tensor *loss = tp_ag_mean(sq, 0, NULL, false);
        tp_tensor_item(loss, step == 0 ? &first : &last);
        CHECK_EQ(tp_backward(loss, NULL, false), TP_STATUS_OK);
        CHECK_EQ(tp_adamw_step(&opt), TP_STATUS_OK);
        tp_tensor *ts[] = {loss, sq, d, pred};
        for (int i = 0; i < 4; i++) tp_tensor_release(ts[i]);
    }
    CHECK_MSG(last < 1e-3 && last < first, "loss %g -> %g", first, last);
    double w = 0;
    tp_tensor_item(fc.weight, &w);
    CHECK(fabs(w - 3) < 0.05);
    tp_tensor_release(y);
    tp_tensor_release(x2);
    tp_tensor_release(x);
    tp_adamw_free(&opt);
    tp_param_list_free(&params);
    tp_nn_linear_free(&fc);
}

int main(void) {
    RUN_TEST(test_sgd_momentum_matches_the_rule);
    RUN_TEST(test_adamw_matches_the_rule);
    RUN_TEST(test_optimizers_refuse_unsupported_parameters);
    RUN_TEST(test_a_small_fit_converges);
    return CHECK_DONE();
}
