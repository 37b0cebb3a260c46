/*
 * tests/autograd/test_gradcheck.c - every backward formula
 * (src/autograd/functions/), and the composite layers (LayerNorm's
 * formula, the LSTM cell), against central finite differences in float64,
 * as torch.autograd.gradcheck does.
 *
 * gradcheck(f, inputs): out = f(inputs); a fixed random w of out's shape;
 * the analytic gradient of sum(w * out) comes from tp_backward(out, w); the
 * numeric one perturbs each input element by +-eps (1e-6) and evaluates
 * sum(w * out) directly.  They must agree to 1e-6 + 1e-5 * |numeric|.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tensorplay/tensorplay.h"
#include "../check.h"

#define SHAPE(...) ((int64_t[]){__VA_ARGS__})

typedef tp_tensor *(*fn_t)(tp_tensor **in, const void *ctx);

static uint64_t seed = 100;

/* A float64 leaf of random values (positive in [0.5, 2) when positive). */
static tp_tensor *input(int ndim, const int64_t *sizes, bool positive) {
    tp_tensor *r = positive ? tp_rand(ndim, sizes, TP_DTYPE_FLOAT64, seed++)
                            : tp_randn(ndim, sizes, TP_DTYPE_FLOAT64, seed++);
    if (positive) {
        tp_binary_scalar_(TP_BINARY_OP_MUL, r, 1.5);
        tp_binary_scalar_(TP_BINARY_OP_ADD, r, 0.5);
    }
    tp_tensor_set_requires_grad(r, true);
    return r;
}

/* sum(w * out) in double, read through out's strides. */
static double weighted(const tp_tensor *out, const tp_tensor *w) {
    tp_tensor *c = tp_contiguous((tp_tensor *)out);
    const double *o = tp_tensor_data(c), *wd = tp_tensor_data(w);
    double s = 0;
    for (int64_t i = 0; i < tp_tensor_numel(c); i++) s += o[i] * wd[i];
    tp_tensor_release(c);
    return s;
}

static bool gradcheck_impl(const char *name, fn_t f, int n, tp_tensor **in, const void *ctx) {
    bool ok = true;
    for (int i = 0; i < n; i++) tp_tensor_set_grad(in[i], NULL);
    tp_tensor *out = f(in, ctx);
    if (!out) {
        fprintf(stderr, "  %s: forward failed: %s\n", name, tp_last_error());
        return false;
    }
    if (tp_tensor_dtype(out) != TP_DTYPE_FLOAT64) {
        fprintf(stderr, "  %s: output is not float64\n", name);
        tp_tensor_release(out);
        return false;
    }
    tp_tensor *w = tp_randn(tp_tensor_dim(out), tp_tensor_sizes(out), TP_DTYPE_FLOAT64, 7);
    if (tp_backward(out, w, false) != TP_STATUS_OK) {
        fprintf(stderr, "  %s: backward failed: %s\n", name, tp_last_error());
        ok = false;
    }
    tp_tensor_release(out);
    bool prev = tp_grad_set_enabled(false);
    const double eps = 1e-6;
    for (int i = 0; ok && i < n; i++) {
        if (!tp_tensor_requires_grad(in[i])) continue;
        double *x = tp_tensor_data(in[i]);
        tp_tensor *g = tp_tensor_grad(in[i]);
        tp_tensor *gc = g ? tp_contiguous(g) : NULL;
        const double *gd = gc ? tp_tensor_data(gc) : NULL;
        for (int64_t j = 0; j < tp_tensor_numel(in[i]); j++) {
            double keep = x[j];
            /* read each output before the next change: a view's output
             * shares the input's memory */
            x[j] = keep + eps;
            tp_tensor *op = f(in, ctx);
            double vp = weighted(op, w);
            tp_tensor_release(op);
            x[j] = keep - eps;
            tp_tensor *om = f(in, ctx);
            double vm = weighted(om, w);
            tp_tensor_release(om);
            x[j] = keep;
            double num = (vp - vm) / (2 * eps);
            double ana = gd ? gd[j] : 0.0;
            if (!(fabs(ana - num) <= 1e-6 + 1e-5 * fabs(num))) {
                fprintf(stderr, "  %s: input %d element %lld: analytic %.10g, numeric %.10g\n", name,
                        i, (long long)j, ana, num);
                ok = false;
                break;
            }
        }
        tp_tensor_release(gc);
    }
    tp_grad_set_enabled(prev);
    tp_tensor_release(w);
    return ok;
}

#define GRADCHECK(f, n, in, ctx) CHECK_MSG(gradcheck_impl(#f, f, n, in, ctx), "gradcheck %s", #f)

static void release_all(int n, tp_tensor **t) {
    for (int i = 0; i < n; i++) tp_tensor_release(t[i]);
}

// ----------------------------------------------------------------------------
// elementwise

static tp_tensor *f_binary(tp_tensor **in, const void *ctx) {
    return tp_ag_binary(*(const tp_binary_op *)ctx, in[0], in[1]);
}

static void test_binary_ops_with_broadcasting(void) {
    tp_binary_op ops[] = {TP_BINARY_OP_ADD, TP_BINARY_OP_SUB, TP_BINARY_OP_MUL, TP_BINARY_OP_DIV,
                          TP_BINARY_OP_POW};
    for (int k = 0; k < 5; k++) {
        bool pos = ops[k] == TP_BINARY_OP_POW || ops[k] == TP_BINARY_OP_DIV;
        tp_tensor *same[2] = {input(2, SHAPE(2, 3), pos), input(2, SHAPE(2, 3), pos)};
        GRADCHECK(f_binary, 2, same, &ops[k]);
        tp_tensor *bc[2] = {input(2, SHAPE(2, 3), pos), input(1, SHAPE(3), pos)};
        GRADCHECK(f_binary, 2, bc, &ops[k]);
        tp_tensor *outer[2] = {input(3, SHAPE(2, 1, 3), pos), input(2, SHAPE(4, 1), pos)};
        GRADCHECK(f_binary, 2, outer, &ops[k]);
        tp_tensor *scalar0d[2] = {input(0, NULL, pos), input(2, SHAPE(2, 2), pos)};
        GRADCHECK(f_binary, 2, scalar0d, &ops[k]);
        /* only one side requires grad */
        tp_tensor_set_requires_grad(bc[0], false);
        GRADCHECK(f_binary, 2, bc, &ops[k]);
        release_all(2, same);
        release_all(2, bc);
        release_all(2, outer);
        release_all(2, scalar0d);
    }
}

typedef struct scalar_case {
    tp_binary_op op;
    double s;
} scalar_case;

static tp_tensor *f_scalar(tp_tensor **in, const void *ctx) {
    const scalar_case *c = ctx;
    return tp_ag_binary_scalar(c->op, in[0], c->s);
}

static void test_scalar_ops(void) {
    scalar_case cases[] = {{TP_BINARY_OP_ADD, 2}, {TP_BINARY_OP_SUB, 0.5}, {TP_BINARY_OP_MUL, -3},
                           {TP_BINARY_OP_DIV, 4}, {TP_BINARY_OP_POW, 2.5}, {TP_BINARY_OP_POW, -1}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        tp_tensor *x = input(2, SHAPE(3, 2), true);
        GRADCHECK(f_scalar, 1, &x, &cases[k]);
        tp_tensor_release(x);
    }
}

static tp_tensor *f_unary(tp_tensor **in, const void *ctx) {
    return tp_ag_unary(*(const tp_unary_op *)ctx, in[0]);
}

static void test_unary_ops(void) {
    for (int op = 0; op < TP_UNARY_OP_COUNT; op++) {
        bool pos = op == TP_UNARY_OP_LOG || op == TP_UNARY_OP_SQRT;
        tp_tensor *x = input(2, SHAPE(4, 3), pos);
        tp_unary_op u = (tp_unary_op)op;
        GRADCHECK(f_unary, 1, &x, &u);
        tp_tensor_release(x);
    }
}

// In place on a tensor with history (a leaf that requires grad is refused):
// each input goes through a recorded copy first, then the in-place op.
static tp_tensor *f_binary_inplace(tp_tensor **in, const void *ctx) {
    tp_tensor *t = tp_ag_binary_scalar(TP_BINARY_OP_MUL, in[0], 1.0);
    if (t && tp_ag_binary_(*(const tp_binary_op *)ctx, t, in[1]) != TP_STATUS_OK) {
        tp_tensor_release(t);
        return NULL;
    }
    return t;
}

static tp_tensor *f_scalar_inplace(tp_tensor **in, const void *ctx) {
    const scalar_case *c = ctx;
    tp_tensor *t = tp_ag_binary_scalar(TP_BINARY_OP_MUL, in[0], 1.0);
    if (t && tp_ag_binary_scalar_(c->op, t, c->s) != TP_STATUS_OK) {
        tp_tensor_release(t);
        return NULL;
    }
    return t;
}

static tp_tensor *f_unary_inplace(tp_tensor **in, const void *ctx) {
    tp_tensor *t = tp_ag_binary_scalar(TP_BINARY_OP_MUL, in[0], 1.0);
    if (t && tp_ag_unary_(*(const tp_unary_op *)ctx, t) != TP_STATUS_OK) {
        tp_tensor_release(t);
        return NULL;
    }
    return t;
}

static void test_in_place_ops(void) {
    tp_binary_op ops[] = {TP_BINARY_OP_ADD, TP_BINARY_OP_SUB, TP_BINARY_OP_MUL, TP_BINARY_OP_DIV,
                          TP_BINARY_OP_POW};
    for (int k = 0; k < 5; k++) {
        bool pos = ops[k] == TP_BINARY_OP_POW || ops[k] == TP_BINARY_OP_DIV;
        tp_tensor *same[2] = {input(2, SHAPE(2, 3), pos), input(2, SHAPE(2, 3), pos)};
        CHECK_MSG(gradcheck_impl("binary_", f_binary_inplace, 2, same, &ops[k]), "binary_ op %d", (int)ops[k]);
        tp_tensor *bc[2] = {input(2, SHAPE(2, 3), pos), input(1, SHAPE(3), pos)};
        CHECK_MSG(gradcheck_impl("binary_ broadcast", f_binary_inplace, 2, bc, &ops[k]), "binary_ op %d, b broadcast",
                  (int)ops[k]);
        tp_tensor_set_requires_grad(bc[0], false); /* only b needs a gradient: the copy has none */
        CHECK_MSG(gradcheck_impl("binary_ b only", f_binary_inplace, 2, bc, &ops[k]), "binary_ op %d, b only",
                  (int)ops[k]);
        release_all(2, same);
        release_all(2, bc);
    }
    scalar_case cases[] = {{TP_BINARY_OP_ADD, 2}, {TP_BINARY_OP_SUB, 0.5}, {TP_BINARY_OP_MUL, -3},
                           {TP_BINARY_OP_DIV, 4}, {TP_BINARY_OP_POW, 2.5}, {TP_BINARY_OP_POW, -1}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        tp_tensor *x = input(2, SHAPE(3, 2), true);
        CHECK_MSG(gradcheck_impl("binary_scalar_", f_scalar_inplace, 1, &x, &cases[k]), "scalar case %zu", k);
        tp_tensor_release(x);
    }
    for (int op = 0; op < TP_UNARY_OP_COUNT; op++) {
        bool pos = op == TP_UNARY_OP_LOG || op == TP_UNARY_OP_SQRT;
        tp_tensor *x = input(2, SHAPE(4, 3), pos);
        tp_unary_op u = (tp_unary_op)op;
        CHECK_MSG(gradcheck_impl("unary_", f_unary_inplace, 1, &x, &u), "unary_ op %d", op);
        tp_tensor_release(x);
    }
}

// copy_/fill_ overwrite: the old value's history gets zeros, so the
// result times in[0] has d/d in[0] = the new value only.
static tp_tensor *f_overwrite(tp_tensor **in, const void *ctx) {
    tp_tensor *t = tp_ag_binary_scalar(TP_BINARY_OP_MUL, in[0], 1.0);
    tp_status st = !t ? tp_last_status() : ctx ? tp_ag_copy_(t, in[1]) : tp_ag_fill_(t, 2.5);
    tp_tensor *r = st == TP_STATUS_OK ? tp_ag_mul(t, in[0]) : NULL;
    tp_tensor_release(t);
    return r;
}

static void test_copy_and_fill_in_place(void) {
    tp_tensor *in[2] = {input(2, SHAPE(2, 3), false), input(1, SHAPE(3), false)};
    static const int copy = 1;
    CHECK_MSG(gradcheck_impl("copy_", f_overwrite, 2, in, &copy), "copy_ (src broadcast)");
    CHECK_MSG(gradcheck_impl("fill_", f_overwrite, 1, in, NULL), "fill_");
    tp_tensor *t = tp_ag_binary_scalar(TP_BINARY_OP_MUL, in[0], 1.0);
    CHECK_EQ(tp_ag_copy_(t, in[1]), TP_STATUS_OK);
    CHECK_STR(tp_tensor_grad_fn_name(t), "CopyBackwards");
    CHECK_EQ(tp_ag_fill_(t, 0), TP_STATUS_OK);
    CHECK_STR(tp_tensor_grad_fn_name(t), "FillBackward0");
    CHECK_EQ(tp_ag_fill_(in[0], 0), TP_STATUS_INVALID_ARGUMENT); /* a leaf that requires grad */
    tp_tensor_release(t);
    release_all(2, in);
}

static tp_tensor *f_squeeze(tp_tensor **in, const void *ctx) {
    (void)ctx;
    return tp_ag_squeeze(in[0]);
}

static void test_squeeze_all(void) {
    tp_tensor *x = input(4, SHAPE(1, 3, 1, 2), false);
    GRADCHECK(f_squeeze, 1, &x, NULL);
    tp_tensor *y = tp_ag_squeeze(x);
    CHECK_EQ(tp_tensor_dim(y), 2);
    CHECK_STR(tp_tensor_grad_fn_name(y), "SqueezeBackward0");
    tp_tensor_release(y);
    tp_tensor_release(x);
}

static tp_tensor *f_gelu(tp_tensor **in, const void *ctx) { (void)ctx; return tp_ag_gelu(in[0]); }

static void test_gelu(void) {
    tp_tensor *x = input(1, SHAPE(7), false);
    GRADCHECK(f_gelu, 1, &x, NULL);
    tp_tensor_release(x);
}

// ----------------------------------------------------------------------------
// reductions

typedef struct red_case {
    bool mean, keepdim;
    int ndims;
    int dims[3];
} red_case;

static tp_tensor *f_reduce(tp_tensor **in, const void *ctx) {
    const red_case *c = ctx;
    return c->mean ? tp_ag_mean(in[0], c->ndims, c->dims, c->keepdim)
                   : tp_ag_sum(in[0], c->ndims, c->dims, c->keepdim);
}

static void test_sum_and_mean(void) {
    red_case cases[] = {
        {false, false, 0, {0}}, {true, false, 0, {0}},     {false, true, 1, {1}},
        {false, false, 1, {-1}}, {true, true, 2, {0, 2}}, {true, false, 2, {2, 0}},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        tp_tensor *x = input(3, SHAPE(2, 3, 4), false);
        GRADCHECK(f_reduce, 1, &x, &cases[k]);
        tp_tensor_release(x);
    }
}

// ----------------------------------------------------------------------------
// linear algebra

static tp_tensor *f_matmul(tp_tensor **in, const void *ctx) { (void)ctx; return tp_ag_matmul(in[0], in[1]); }
static tp_tensor *f_bmm(tp_tensor **in, const void *ctx) { (void)ctx; return tp_ag_bmm(in[0], in[1]); }
static tp_tensor *f_linear(tp_tensor **in, const void *ctx) {
    return tp_ag_linear(in[0], in[1], ctx ? in[2] : NULL);
}
static tp_tensor *f_matmul_transposed(tp_tensor **in, const void *ctx) {
    (void)ctx;
    tp_tensor *bt = tp_ag_t(in[1]);
    tp_tensor *r = tp_ag_matmul(in[0], bt);
    tp_tensor_release(bt);
    return r;
}

static void test_matmul_cases(void) {
    struct { int na; int64_t a[4]; int nb; int64_t b[4]; } cases[] = {
        {2, {3, 4}, 2, {4, 5}},
        {1, {4}, 2, {4, 5}},
        {2, {3, 4}, 1, {4}},
        {1, {4}, 1, {4}},
        {3, {2, 3, 4}, 2, {4, 5}},
        {4, {2, 1, 3, 4}, 3, {5, 4, 2}},
        {1, {4}, 3, {2, 4, 3}},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        tp_tensor *in[2] = {input(cases[k].na, cases[k].a, false), input(cases[k].nb, cases[k].b, false)};
        CHECK_MSG(gradcheck_impl("matmul", f_matmul, 2, in, NULL), "matmul case %zu", k);
        release_all(2, in);
    }
    tp_tensor *t[2] = {input(2, SHAPE(3, 4), false), input(2, SHAPE(5, 4), false)};
    GRADCHECK(f_matmul_transposed, 2, t, NULL);
    release_all(2, t);
    tp_tensor *b[2] = {input(3, SHAPE(2, 3, 4), false), input(3, SHAPE(2, 4, 2), false)};
    GRADCHECK(f_bmm, 2, b, NULL);
    release_all(2, b);
}

static void test_linear(void) {
    tp_tensor *in[3] = {input(3, SHAPE(2, 3, 4), false), input(2, SHAPE(5, 4), false),
                        input(1, SHAPE(5), false)};
    GRADCHECK(f_linear, 3, in, (void *)1);
    GRADCHECK(f_linear, 2, in, NULL);
    release_all(3, in);
    tp_tensor *x = input(2, SHAPE(3, 4), false);
    tp_tensor *w = input(2, SHAPE(2, 4), false);
    tp_tensor *y = tp_ag_linear(x, w, NULL);
    CHECK_STR(tp_tensor_grad_fn_name(y), "MmBackward0");
    tp_tensor_release(y);
    tp_tensor *wrong = input(2, SHAPE(4, 3), false);
    tp_tensor *bad = tp_ag_linear(x, wrong, NULL);
    tp_tensor_release(wrong);
    CHECK(bad == NULL);
    CHECK_CONTAINS(tp_last_error(), "mat1 and mat2 shapes cannot be multiplied");
    tp_tensor_release(w);
    tp_tensor_release(x);
}

// ----------------------------------------------------------------------------
// views, joins, indexing

static tp_tensor *f_view(tp_tensor **in, const void *ctx) {
    tp_tensor *x = in[0];
    switch (*(const int *)ctx) {
    case 0: return tp_ag_view(x, 2, SHAPE(6, 4));
    case 1: { tp_tensor *t = tp_ag_transpose(x, 0, 2); tp_tensor *r = tp_ag_reshape(t, 1, SHAPE(-1)); tp_tensor_release(t); return r; }
    case 2: return tp_ag_permute(x, 3, (int[]){2, 0, 1});
    case 3: return tp_ag_narrow(x, 1, 1, 2);
    case 4: return tp_ag_slice(x, 2, 0, 4, 2);
    case 5: return tp_ag_select(x, 1, -1);
    case 6: { tp_tensor *u = tp_ag_unsqueeze(x, 1); tp_tensor *r = tp_ag_expand(u, 4, SHAPE(2, 5, 3, 4)); tp_tensor_release(u); return r; }
    case 7: { tp_tensor *s = tp_ag_slice(x, 0, 0, 1, 1); tp_tensor *r = tp_ag_squeeze_dim(s, 0); tp_tensor_release(s); return r; }
    default: { /* a view of a view, used twice */
        tp_tensor *a = tp_ag_slice(x, 2, 1, 3, 1);
        tp_tensor *s0 = tp_ag_select(a, 0, 0);
        tp_tensor *r = tp_ag_mul(s0, s0);
        tp_tensor_release(a);
        tp_tensor_release(s0);
        return r;
    }
    }
}

static void test_views(void) {
    for (int k = 0; k <= 8; k++) {
        tp_tensor *x = input(3, SHAPE(2, 3, 4), false);
        CHECK_MSG(gradcheck_impl("view", f_view, 1, &x, &k), "view case %d", k);
        tp_tensor_release(x);
    }
}

/* as_strided: sizes/strides/offset on the storage, through a plain input,
 * a transposed one and a slice of it (its storage offset not 0). */
static tp_tensor *f_as_strided(tp_tensor **in, const void *ctx) {
    tp_tensor *x = in[0];
    switch (*(const int *)ctx) {
    case 0: return tp_ag_as_strided(x, 2, SHAPE(3, 2), SHAPE(4, 1), 5); /* a window: the rest gets 0 */
    case 1: return tp_ag_as_strided(x, 2, SHAPE(4, 6), SHAPE(1, 4), 0); /* the whole storage, transposed */
    case 2: { /* the input a transposed view, the output a strided window of the storage */
        tp_tensor *t = tp_ag_transpose(x, 0, 2);
        tp_tensor *r = tp_ag_as_strided(t, 3, SHAPE(2, 2, 2), SHAPE(12, 4, 2), 1);
        tp_tensor_release(t);
        return r;
    }
    case 3: { /* the input at storage offset 12 (an output must stay on the
               * input's elements: one reaching past them reads values that
               * are not its input's, as in PyTorch) */
        tp_tensor *sl = tp_ag_slice(x, 0, 1, 2, 1);
        tp_tensor *r = tp_ag_as_strided(sl, 2, SHAPE(3, 3), SHAPE(1, 4), 13);
        tp_tensor_release(sl);
        return r;
    }
    default: { /* an as_strided of an as_strided, used twice */
        tp_tensor *a = tp_ag_as_strided(x, 2, SHAPE(2, 6), SHAPE(12, 2), 0);
        tp_tensor *r = tp_ag_mul(a, a);
        tp_tensor_release(a);
        return r;
    }
    }
}

static void test_as_strided(void) {
    for (int k = 0; k <= 4; k++) {
        tp_tensor *x = input(3, SHAPE(2, 3, 4), false);
        CHECK_MSG(gradcheck_impl("as_strided", f_as_strided, 1, &x, &k), "as_strided case %d", k);
        tp_tensor_release(x);
    }
}

/* Overlapping elements (stride 0, or strides that meet) are refused when a
 * node would be made, with a message; without one the view is made. */
static void test_as_strided_refuses_overlap(void) {
    tp_tensor *x = input(2, SHAPE(3, 4), false);
    tp_tensor *y = tp_ag_as_strided(x, 2, SHAPE(3, 3), SHAPE(1, 1), 0);
    CHECK(y == NULL);
    CHECK(tp_last_status() == TP_STATUS_UNSUPPORTED);
    CHECK_MSG(strstr(tp_last_error(), "as_strided: the gradient through an output whose elements overlap "
                                      "(sizes [3, 3], strides [1, 1])") != NULL,
              "%s", tp_last_error());
    y = tp_ag_as_strided(x, 2, SHAPE(2, 4), SHAPE(0, 1), 0); /* a broadcast row */
    CHECK(y == NULL && strstr(tp_last_error(), "strides [0, 1]"));
    tp_tensor *e = tp_ag_expand(x, 3, SHAPE(2, 3, 4)); /* an input that overlaps */
    y = e ? tp_ag_as_strided(e, 1, SHAPE(4), SHAPE(1), 0) : NULL;
    CHECK(e && y == NULL && strstr(tp_last_error(), "through an input whose elements overlap"));
    tp_tensor_release(e);
    bool prev = tp_grad_set_enabled(false);
    y = tp_ag_as_strided(x, 2, SHAPE(3, 3), SHAPE(1, 1), 0);
    CHECK(y && !tp_tensor_requires_grad(y));
    tp_tensor_release(y);
    tp_grad_set_enabled(prev);
    /* non-overlapping with size-1 dims of any stride is fine */
    y = tp_ag_as_strided(x, 3, SHAPE(1, 3, 2), SHAPE(0, 4, 2), 1);
    CHECK_MSG(y && strcmp(tp_tensor_grad_fn_name(y), "AsStridedBackward0") == 0, "%s", tp_last_error());
    tp_tensor_release(y);
    tp_tensor_release(x);
}

static tp_tensor *f_cat(tp_tensor **in, const void *ctx) { return tp_ag_cat(3, in, *(const int *)ctx); }
static tp_tensor *f_stack(tp_tensor **in, const void *ctx) { (void)ctx; return tp_ag_stack(2, in, 1); }

static void test_cat_and_stack(void) {
    int d1 = 1;
    tp_tensor *in[3] = {input(2, SHAPE(2, 3), false), input(2, SHAPE(2, 1), false), input(2, SHAPE(2, 2), false)};
    tp_tensor_set_requires_grad(in[1], false);
    GRADCHECK(f_cat, 3, in, &d1);
    release_all(3, in);
    int d0 = 0;
    tp_tensor *r[3] = {input(2, SHAPE(1, 3), false), input(2, SHAPE(2, 3), false), input(2, SHAPE(3, 3), false)};
    GRADCHECK(f_cat, 3, r, &d0);
    release_all(3, r);
    tp_tensor *s[2] = {input(2, SHAPE(2, 3), false), input(2, SHAPE(2, 3), false)};
    GRADCHECK(f_stack, 2, s, NULL);
    release_all(2, s);
}

static tp_tensor *f_index_select(tp_tensor **in, const void *ctx) {
    const int *dim = ctx;
    tp_tensor *idx = tp_arange(0, 4, 1, TP_DTYPE_INT64);
    int64_t *p = tp_tensor_data(idx);
    p[0] = 2; p[1] = 0; p[2] = 2; p[3] = 1; /* a repeated row sums */
    tp_tensor *r = tp_ag_index_select(in[0], *dim, idx);
    tp_tensor_release(idx);
    return r;
}

static void test_index_select(void) {
    for (int dim = 0; dim < 2; dim++) {
        tp_tensor *x = input(2, SHAPE(3, 3), false);
        GRADCHECK(f_index_select, 1, &x, &dim);
        tp_tensor_release(x);
    }
}

// ----------------------------------------------------------------------------
// softmax and cross-entropy

static tp_tensor *f_softmax(tp_tensor **in, const void *ctx) {
    int c = *(const int *)ctx;
    return c < 2 ? tp_ag_softmax(in[0], c ? 0 : -1) : tp_ag_log_softmax(in[0], c == 2 ? -1 : 1);
}

static void test_softmax_and_log_softmax(void) {
    for (int c = 0; c < 4; c++) {
        tp_tensor *x = input(3, SHAPE(2, 3, 4), false);
        CHECK_MSG(gradcheck_impl("softmax", f_softmax, 1, &x, &c), "softmax case %d", c);
        tp_tensor_release(x);
    }
}

static tp_tensor *f_cross_entropy(tp_tensor **in, const void *ctx) {
    return tp_ag_cross_entropy(in[0], ctx);
}

static void test_cross_entropy(void) {
    tp_tensor *x = input(2, SHAPE(4, 5), false);
    tp_tensor *target = tp_arange(0, 4, 1, TP_DTYPE_INT64);
    ((int64_t *)tp_tensor_data(target))[3] = 4;
    GRADCHECK(f_cross_entropy, 1, &x, target);
    /* the value is log-sum-exp stable: logits of 1000 do not overflow */
    tp_tensor *big = tp_full(2, SHAPE(4, 5), 1000.0, TP_DTYPE_FLOAT32);
    tp_tensor *l = tp_ag_cross_entropy(big, target);
    double v = NAN;
    tp_tensor_item(l, &v);
    CHECK(fabs(v - log(5.0)) < 1e-4);
    tp_tensor_release(l);
    ((int64_t *)tp_tensor_data(target))[1] = 5;
    CHECK(tp_ag_cross_entropy(x, target) == NULL);
    CHECK_STR(tp_last_error(), "Target 5 is out of bounds.");
    tp_tensor_release(big);
    tp_tensor_release(target);
    tp_tensor_release(x);
}

// ----------------------------------------------------------------------------
// a composite: layer norm written with the ops above

static tp_tensor *f_layernorm(tp_tensor **in, const void *ctx) {
    (void)ctx;
    tp_tensor *x = in[0];
    tp_tensor *mu = tp_ag_mean(x, 1, (int[]){-1}, true);
    tp_tensor *xc = tp_ag_sub(x, mu);
    tp_tensor *sq = tp_ag_mul(xc, xc);
    tp_tensor *var = tp_ag_mean(sq, 1, (int[]){-1}, true);
    tp_tensor *ve = tp_ag_binary_scalar(TP_BINARY_OP_ADD, var, 1e-5);
    tp_tensor *sd = tp_ag_unary(TP_UNARY_OP_SQRT, ve);
    tp_tensor *y = tp_ag_div(xc, sd);
    tp_tensor *yw = tp_ag_mul(y, in[1]);
    tp_tensor *r = tp_ag_add(yw, in[2]);
    tp_tensor *ts[] = {mu, xc, sq, var, ve, sd, y, yw};
    release_all(8, ts);
    return r;
}

static void test_composite_layer_norm(void) {
    tp_tensor *in[3] = {input(2, SHAPE(3, 5), false), input(1, SHAPE(5), false), input(1, SHAPE(5), false)};
    GRADCHECK(f_layernorm, 3, in, NULL);
    release_all(3, in);
}

// ----------------------------------------------------------------------------
// conv2d

typedef struct conv_case {
    int64_t stride, pad;
    bool bias;
} conv_case;

static tp_tensor *f_conv(tp_tensor **in, const void *ctx) {
    const conv_case *c = ctx;
    return tp_ag_conv2d(in[0], in[1], c->bias ? in[2] : NULL, c->stride, c->stride, c->pad, c->pad);
}

static void test_conv2d(void) {
    conv_case cases[] = {{1, 0, true}, {2, 1, true}, {1, 1, false}, {2, 0, false}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        tp_tensor *in[3] = {input(4, SHAPE(2, 2, 5, 4), false), input(4, SHAPE(3, 2, 3, 2), false),
                            input(1, SHAPE(3), false)};
        CHECK_MSG(gradcheck_impl("conv2d", f_conv, 3, in, &cases[k]), "conv2d case %zu", k);
        release_all(3, in);
    }
    /* a 1x1 kernel is a matmul over channels: check the value too */
    tp_tensor *x = input(4, SHAPE(1, 2, 1, 1), false), *w = input(4, SHAPE(1, 2, 1, 1), false);
    tp_tensor *y = tp_ag_conv2d(x, w, NULL, 1, 1, 0, 0);
    const double *xd = tp_tensor_data(x), *wd = tp_tensor_data(w);
    CHECK(y && fabs(((const double *)tp_tensor_data(y))[0] - (xd[0] * wd[0] + xd[1] * wd[1])) < 1e-12);
    CHECK_STR(tp_tensor_grad_fn_name(y), "ConvolutionBackward0");
    tp_tensor_release(y);
    tp_tensor *big = input(4, SHAPE(1, 2, 4, 4), false);
    CHECK(tp_ag_conv2d(x, big, NULL, 1, 1, 0, 0) == NULL);
    CHECK_CONTAINS(tp_last_error(), "Kernel size can't be greater than actual input size");
    tp_tensor_release(big);
    tp_tensor_release(w);
    tp_tensor_release(x);
}

// ----------------------------------------------------------------------------
// LSTM cell (nn.h), through everything above

static tp_nn_lstm_cell lstm;

static tp_tensor *f_lstm(tp_tensor **in, const void *ctx) {
    tp_tensor *h = NULL, *c = NULL;
    tp_nn_lstm_cell_forward(&lstm, in[0], in[1], in[2], &h, &c);
    /* both outputs: h' + 2 c' */
    tp_tensor *c2 = c ? tp_ag_binary_scalar(TP_BINARY_OP_MUL, c, 2) : NULL;
    tp_tensor *r = c2 ? tp_ag_add(h, c2) : NULL;
    (void)ctx;
    tp_tensor_release(c2);
    tp_tensor_release(h);
    tp_tensor_release(c);
    return r;
}

static tp_tensor *f_lstm_weights(tp_tensor **in, const void *ctx) {
    (void)ctx;
    tp_tensor *keep[4] = {lstm.weight_ih, lstm.weight_hh, lstm.bias_ih, lstm.bias_hh};
    lstm.weight_ih = in[3];
    lstm.weight_hh = in[4];
    lstm.bias_ih = in[5];
    lstm.bias_hh = in[6];
    tp_tensor *r = f_lstm(in, NULL);
    lstm.weight_ih = keep[0];
    lstm.weight_hh = keep[1];
    lstm.bias_ih = keep[2];
    lstm.bias_hh = keep[3];
    return r;
}

static void test_lstm_cell(void) {
    CHECK_EQ(tp_nn_lstm_cell_init(&lstm, (tp_nn_lstm_cell_options){.input_size = 3, .hidden_size = 2,
                                                                   .dtype = TP_DTYPE_FLOAT64, .seed = 4}),
             TP_STATUS_OK);
    tp_tensor *in[7] = {input(2, SHAPE(2, 3), false), input(2, SHAPE(2, 2), false), input(2, SHAPE(2, 2), false),
                        input(2, SHAPE(8, 3), false), input(2, SHAPE(8, 2), false), input(1, SHAPE(8), false),
                        input(1, SHAPE(8), false)};
    GRADCHECK(f_lstm, 3, in, NULL);
    GRADCHECK(f_lstm_weights, 7, in, NULL);
    /* the value of one unit against the formula written out */
    tp_tensor *h = NULL, *c = NULL;
    CHECK_EQ(tp_nn_lstm_cell_forward(&lstm, in[0], in[1], in[2], &h, &c), TP_STATUS_OK);
    const double *x = tp_tensor_data(in[0]), *h0 = tp_tensor_data(in[1]), *c0 = tp_tensor_data(in[2]);
    const double *wi = tp_tensor_data(lstm.weight_ih), *wh = tp_tensor_data(lstm.weight_hh);
    const double *bi = tp_tensor_data(lstm.bias_ih), *bh = tp_tensor_data(lstm.bias_hh);
    double gate[4];
    for (int gi = 0; gi < 4; gi++) { /* batch row 0, unit 1 */
        int row = gi * 2 + 1;
        double v = bi[row] + bh[row];
        for (int j = 0; j < 3; j++) v += x[j] * wi[row * 3 + j];
        for (int j = 0; j < 2; j++) v += h0[j] * wh[row * 2 + j];
        gate[gi] = v;
    }
    double sg_i = 1 / (1 + exp(-gate[0])), sg_f = 1 / (1 + exp(-gate[1])), tg = tanh(gate[2]),
           sg_o = 1 / (1 + exp(-gate[3]));
    double c1 = sg_f * c0[1] + sg_i * tg, h1 = sg_o * tanh(c1);
    CHECK(fabs(((const double *)tp_tensor_data(c))[1] - c1) < 1e-12);
    CHECK(fabs(((const double *)tp_tensor_data(h))[1] - h1) < 1e-12);
    tp_tensor_release(h);
    tp_tensor_release(c);
    release_all(7, in);
    tp_nn_lstm_cell_free(&lstm);
}

// ----------------------------------------------------------------------------
// where, max/min, copies

static tp_tensor *f_where(tp_tensor **in, const void *ctx) {
    tp_tensor *cond = tp_binary_scalar(TP_BINARY_OP_GT, ctx, 0); /* fixed: from a constant */
    tp_tensor *r = tp_ag_where(cond, in[0], in[1]);
    tp_tensor_release(cond);
    return r;
}

static void test_where(void) {
    tp_tensor *c = tp_randn(2, SHAPE(3, 4), TP_DTYPE_FLOAT64, 1234);
    tp_tensor *in[2] = {input(2, SHAPE(3, 4), false), input(1, SHAPE(4), false)};
    GRADCHECK(f_where, 2, in, c);
    release_all(2, in);
    tp_tensor_release(c);
}

typedef struct ext_case {
    bool max, keepdim;
    int ndims;
    int dims[2];
} ext_case;

static tp_tensor *f_extreme(tp_tensor **in, const void *ctx) {
    const ext_case *c = ctx;
    return c->max ? tp_ag_max(in[0], c->ndims, c->dims, c->keepdim) : tp_ag_min(in[0], c->ndims, c->dims, c->keepdim);
}

static void test_max_and_min(void) {
    ext_case cases[] = {{true, false, 1, {1}}, {false, true, 1, {0}}, {true, false, 0, {0}}, {false, false, 2, {0, 2}}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        tp_tensor *x = input(3, SHAPE(2, 3, 4), false);
        CHECK_MSG(gradcheck_impl("max/min", f_extreme, 1, &x, &cases[k]), "max/min case %zu", k);
        tp_tensor_release(x);
    }
    /* ties share the gradient evenly, as PyTorch's amax */
    tp_tensor *t = tp_full(1, SHAPE(4), 2.0, TP_DTYPE_FLOAT64);
    ((double *)tp_tensor_data(t))[3] = 1.0;
    tp_tensor_set_requires_grad(t, true);
    tp_tensor *m = tp_ag_max(t, 0, NULL, false);
    CHECK_EQ(tp_backward(m, NULL, false), TP_STATUS_OK);
    const double *g = tp_tensor_data(tp_tensor_grad(t));
    CHECK(fabs(g[0] - 1.0 / 3) < 1e-15 && fabs(g[2] - 1.0 / 3) < 1e-15 && g[3] == 0.0);
    tp_tensor_release(m);
    tp_tensor_release(t);
}

static tp_tensor *f_copies(tp_tensor **in, const void *ctx) {
    (void)ctx;
    tp_tensor *tr = tp_ag_t(in[0]);
    tp_tensor *c = tp_ag_contiguous(tr);
    tp_tensor *f = tp_ag_to_dtype(c, TP_DTYPE_FLOAT32);
    tp_tensor *sq = tp_ag_mul(f, f);
    tp_tensor *d = tp_ag_to_dtype(sq, TP_DTYPE_FLOAT64);
    tp_tensor *r = tp_ag_clone(d);
    tp_tensor *ts[] = {tr, c, f, sq, d};
    release_all(5, ts);
    return r;
}

static void test_copies_pass_the_gradient(void) {
    tp_tensor *x = input(2, SHAPE(2, 3), true);
    tp_tensor *out = f_copies(&x, NULL);
    CHECK_STR(tp_tensor_grad_fn_name(out), "CloneBackward0");
    tp_tensor *w = tp_ones(2, SHAPE(3, 2), TP_DTYPE_FLOAT64);
    CHECK_EQ(tp_backward(out, w, false), TP_STATUS_OK);
    const double *xd = tp_tensor_data(x), *g = tp_tensor_data(tp_tensor_grad(x));
    CHECK_EQ(tp_tensor_dtype(tp_tensor_grad(x)), TP_DTYPE_FLOAT64);
    for (int i = 0; i < 6; i++) CHECK(fabs(g[i] - 2 * (float)xd[i]) < 1e-5); /* through float32 */
    tp_tensor *i64 = tp_ag_to_dtype(x, TP_DTYPE_INT64);
    CHECK(!tp_tensor_requires_grad(i64));
    tp_tensor *same = tp_ag_contiguous(x);
    CHECK(same == x);
    tp_tensor_release(same);
    tp_tensor_release(i64);
    tp_tensor_release(w);
    tp_tensor_release(out);
    tp_tensor_release(x);
}

// ----------------------------------------------------------------------------
// the float32 loops of the fused kernels agree with their float64 twins
// (the finite differences above run in float64 only)

/* grads of sum(w * f(inputs)) for float64 inputs and their float32 copies */
static bool float32_matches(const char *name, fn_t f, int n, tp_tensor **in64, const void *ctx) {
    tp_tensor *in32[4];
    for (int i = 0; i < n; i++) {
        in32[i] = tp_to_dtype(in64[i], TP_DTYPE_FLOAT32);
        tp_tensor_set_requires_grad(in32[i], true);
        tp_tensor_set_grad(in64[i], NULL);
    }
    tp_tensor *o64 = f(in64, ctx), *o32 = f(in32, ctx);
    bool ok = o64 && o32 && tp_tensor_dtype(o32) == TP_DTYPE_FLOAT32;
    tp_tensor *w = ok ? tp_randn(tp_tensor_dim(o64), tp_tensor_sizes(o64), TP_DTYPE_FLOAT64, 11) : NULL;
    ok = ok && tp_backward(o64, w, false) == TP_STATUS_OK && tp_backward(o32, w, false) == TP_STATUS_OK;
    for (int i = 0; ok && i < n; i++) {
        tp_tensor *g64 = tp_tensor_grad(in64[i]), *g32 = tp_tensor_grad(in32[i]);
        tp_tensor *c = g32 ? tp_to_dtype(g32, TP_DTYPE_FLOAT64) : NULL;
        tp_tensor *cc = c ? tp_contiguous(c) : NULL, *gc = g64 ? tp_contiguous(g64) : NULL;
        for (int64_t j = 0; cc && gc && j < tp_tensor_numel(gc); j++) {
            double a = ((const double *)tp_tensor_data(gc))[j], b = ((const double *)tp_tensor_data(cc))[j];
            if (!(fabs(a - b) <= 1e-4 + 1e-4 * fabs(a))) {
                fprintf(stderr, "  %s: input %d element %lld: float64 %.8g, float32 %.8g\n", name, i,
                        (long long)j, a, b);
                ok = false;
                break;
            }
        }
        ok = ok && cc && gc;
        tp_tensor_release(c);
        tp_tensor_release(cc);
        tp_tensor_release(gc);
    }
    tp_tensor_release(w);
    tp_tensor_release(o64);
    tp_tensor_release(o32);
    for (int i = 0; i < n; i++) tp_tensor_release(in32[i]);
    return ok;
}

static tp_tensor *f_ce_float(tp_tensor **in, const void *ctx) {
    (void)ctx;
    tp_tensor *t = tp_arange(0, 4, 1, TP_DTYPE_INT64);
    tp_tensor *r = tp_ag_cross_entropy(in[0], t);
    tp_tensor_release(t);
    return r;
}

static void test_float32_kernels_agree_with_float64(void) {
    for (int op = 0; op < TP_UNARY_OP_COUNT; op++) {
        tp_tensor *x = input(2, SHAPE(3, 4), op == TP_UNARY_OP_LOG || op == TP_UNARY_OP_SQRT);
        tp_unary_op u = (tp_unary_op)op;
        CHECK_MSG(float32_matches("unary", f_unary, 1, &x, &u), "unary op %d", op);
        tp_tensor_release(x);
    }
    tp_tensor *x = input(2, SHAPE(4, 6), false);
    CHECK(float32_matches("gelu", f_gelu, 1, &x, NULL));
    for (int c = 0; c < 4; c++) {
        tp_tensor *y = input(3, SHAPE(2, 3, 4), false);
        CHECK_MSG(float32_matches("softmax", f_softmax, 1, &y, &c), "softmax case %d", c);
        tp_tensor_release(y);
    }
    CHECK(float32_matches("cross_entropy", f_ce_float, 1, &x, NULL));
    tp_tensor_release(x);
    tp_tensor *lin[3] = {input(2, SHAPE(5, 4), false), input(2, SHAPE(3, 4), false), input(1, SHAPE(3), false)};
    CHECK(float32_matches("linear", f_linear, 3, lin, (void *)1));
    release_all(3, lin);
    conv_case cc = {2, 1, true};
    tp_tensor *conv[3] = {input(4, SHAPE(2, 2, 5, 4), false), input(4, SHAPE(3, 2, 3, 2), false),
                          input(1, SHAPE(3), false)};
    CHECK(float32_matches("conv2d", f_conv, 3, conv, &cc));
    release_all(3, conv);
    tp_tensor *idx[1] = {input(2, SHAPE(3, 3), false)};
    int d0 = 0;
    CHECK(float32_matches("index_select", f_index_select, 1, idx, &d0));
    release_all(1, idx);
}

int main(void) {
    RUN_TEST(test_float32_kernels_agree_with_float64);
    RUN_TEST(test_where);
    RUN_TEST(test_max_and_min);
    RUN_TEST(test_copies_pass_the_gradient);
    RUN_TEST(test_conv2d);
    RUN_TEST(test_lstm_cell);
    RUN_TEST(test_binary_ops_with_broadcasting);
    RUN_TEST(test_scalar_ops);
    RUN_TEST(test_unary_ops);
    RUN_TEST(test_in_place_ops);
    RUN_TEST(test_squeeze_all);
    RUN_TEST(test_copy_and_fill_in_place);
    RUN_TEST(test_gelu);
    RUN_TEST(test_sum_and_mean);
    RUN_TEST(test_matmul_cases);
    RUN_TEST(test_linear);
    RUN_TEST(test_views);
    RUN_TEST(test_as_strided);
    RUN_TEST(test_as_strided_refuses_overlap);
    RUN_TEST(test_cat_and_stack);
    RUN_TEST(test_index_select);
    RUN_TEST(test_softmax_and_log_softmax);
    RUN_TEST(test_cross_entropy);
    RUN_TEST(test_composite_layer_norm);
    return CHECK_DONE();
}
