/*
 * tests/ops/test_elementwise.c - binary/unary math, comparisons, where:
 * broadcasting, strided operands, type promotion, scalars, in-place rules
 * (one version bump, views see it, no change on error), and the parallel
 * path agreeing with the serial one.
 */
#include "check.h"

static void test_add_contiguous_float32(void) {
    tp_tensor *a = MAKE(TP_DTYPE_FLOAT32, SHAPE(2, 3), {1, 2, 3, 4, 5, 6});
    tp_tensor *b = MAKE(TP_DTYPE_FLOAT32, SHAPE(2, 3), {10, 20, 30, 40, 50, 60});
    tp_tensor *c = tp_add(a, b), *d = tp_sub(a, b), *e = tp_mul(a, b), *f = tp_div(b, a);
    CHECK_VALUES(c, 0, {11, 22, 33, 44, 55, 66});
    CHECK_VALUES(d, 0, {-9, -18, -27, -36, -45, -54});
    CHECK_VALUES(e, 0, {10, 40, 90, 160, 250, 360});
    CHECK_VALUES(f, 0, {10, 10, 10, 10, 10, 10});
    CHECK_EQ(tp_tensor_dtype(c), TP_DTYPE_FLOAT32);
    CHECK_EQ(tp_tensor_version(a), 0);
    tp_tensor *t[] = {a, b, c, d, e, f};
    for (int i = 0; i < 6; i++) tp_tensor_release(t[i]);
}

static void test_broadcast_bias_row_and_column(void) {
    tp_tensor *x = MAKE(TP_DTYPE_FLOAT32, SHAPE(2, 3), {1, 2, 3, 4, 5, 6});
    tp_tensor *row = MAKE(TP_DTYPE_FLOAT32, SHAPE(3), {100, 200, 300});
    tp_tensor *col = MAKE(TP_DTYPE_FLOAT32, SHAPE(2, 1), {-1, 1});
    tp_tensor *a = tp_add(x, row), *b = tp_mul(col, x), *c = tp_sub(row, col);
    CHECK_VALUES(a, 0, {101, 202, 303, 104, 205, 306});
    CHECK_VALUES(b, 0, {-1, -2, -3, 4, 5, 6});
    CHECK_SHAPE(c, SHAPE(2, 3));
    CHECK_VALUES(c, 0, {101, 201, 301, 99, 199, 299});
    tp_tensor *bad = MAKE(TP_DTYPE_FLOAT32, SHAPE(4), {0, 0, 0, 0});
    CHECK_ERROR(fails(tp_add(x, bad)),
                "The size of tensor a (3) must match the size of tensor b (4) at non-singleton dimension 1");
    tp_tensor *t[] = {x, row, col, a, b, c, bad};
    for (int i = 0; i < 7; i++) tp_tensor_release(t[i]);
}

static void test_strided_operands_transposed_stepped_offset(void) {
    tp_tensor *base = tp_arange(0, 12, 1, TP_DTYPE_FLOAT64);
    tp_tensor *m = tp_tensor_view(base, 2, (int64_t[]){3, 4});
    tp_tensor *s = tp_tensor_slice(m, 1, 1, 4, 2);   /* 3x2: [[1,3],[5,7],[9,11]] offset 1 */
    tp_tensor *mt = tp_tensor_t(m);                  /* 4x3 */
    tp_tensor *top = tp_tensor_narrow(mt, 0, 1, 2);  /* rows 1..2 of the transpose: 2x3 */
    tp_tensor *st = tp_tensor_t(s);                  /* 2x3: [[1,5,9],[3,7,11]] */
    tp_tensor *r = tp_add(top, st);
    /* top = [[1,5,9],[2,6,10]] */
    CHECK_VALUES(r, 0, {2, 10, 18, 5, 13, 21});
    tp_tensor *i = tp_to_dtype(st, TP_DTYPE_INT32);
    tp_tensor *r2 = tp_mul(i, top); /* int32 * float64 -> float64 */
    CHECK_EQ(tp_tensor_dtype(r2), TP_DTYPE_FLOAT64);
    CHECK_VALUES(r2, 0, {1, 25, 81, 6, 42, 110});
    tp_tensor *t[] = {base, m, s, mt, top, st, r, i, r2};
    for (int k = 0; k < 9; k++) tp_tensor_release(t[k]);
}

static void test_type_promotion_follows_pytorch(void) {
    tp_tensor *i8 = MAKE(TP_DTYPE_INT8, SHAPE(2), {100, -100});
    tp_tensor *u8 = MAKE(TP_DTYPE_UINT8, SHAPE(2), {200, 1});
    tp_tensor *r = tp_add(i8, u8);
    CHECK_EQ(tp_tensor_dtype(r), TP_DTYPE_INT16);
    CHECK_VALUES(r, 0, {300, -99});
    tp_tensor *w = tp_add(i8, i8); /* int8 wraps */
    CHECK_VALUES(w, 0, {-56, 56});
    tp_tensor *h = MAKE(TP_DTYPE_FLOAT16, SHAPE(2), {0.5, 1.5});
    tp_tensor *bf = MAKE(TP_DTYPE_BFLOAT16, SHAPE(2), {1, 2});
    tp_tensor *hb = tp_add(h, bf);
    CHECK_EQ(tp_tensor_dtype(hb), TP_DTYPE_FLOAT32);
    CHECK_VALUES(hb, 0, {1.5, 3.5});
    tp_tensor *hi = tp_mul(h, i8);
    CHECK_EQ(tp_tensor_dtype(hi), TP_DTYPE_FLOAT16);
    CHECK_VALUES(hi, 0, {50, -150});
    /* a 0-d float64 does not widen a float32 tensor; a 0-d float does widen ints */
    double two = 2;
    tp_tensor *z = tp_from_blob(&two, 0, NULL, NULL, TP_DTYPE_FLOAT64, NULL, NULL);
    tp_tensor *f32 = MAKE(TP_DTYPE_FLOAT32, SHAPE(2), {1, 2});
    tp_tensor *r1 = tp_mul(f32, z), *r2 = tp_mul(i8, z);
    CHECK_EQ(tp_tensor_dtype(r1), TP_DTYPE_FLOAT32);
    CHECK_EQ(tp_tensor_dtype(r2), TP_DTYPE_FLOAT64);
    CHECK_VALUES(r2, 0, {200, -200});
    tp_tensor *t[] = {i8, u8, r, w, h, bf, hb, hi, z, f32, r1, r2};
    for (int k = 0; k < 12; k++) tp_tensor_release(t[k]);
}

static void test_bool_and_integer_rules(void) {
    tp_tensor *p = MAKE(TP_DTYPE_BOOL, SHAPE(4), {0, 0, 1, 1});
    tp_tensor *q = MAKE(TP_DTYPE_BOOL, SHAPE(4), {0, 1, 0, 1});
    tp_tensor *or_ = tp_add(p, q), *and_ = tp_mul(p, q);
    CHECK_EQ(tp_tensor_dtype(or_), TP_DTYPE_BOOL);
    CHECK_VALUES(or_, 0, {0, 1, 1, 1});
    CHECK_VALUES(and_, 0, {0, 0, 0, 1});
    CHECK_ERROR(fails(tp_sub(p, q)), "Subtraction, the `-` operator, with two bool tensors is not supported");
    CHECK_ERROR(fails(tp_neg(p)), "Negation, the `-` operator, on a bool tensor is not supported");
    tp_tensor *a = MAKE(TP_DTYPE_INT32, SHAPE(3), {7, -7, 2});
    tp_tensor *b = MAKE(TP_DTYPE_INT32, SHAPE(3), {2, 2, 10});
    tp_tensor *d = tp_div(a, b); /* true division */
    CHECK_EQ(tp_tensor_dtype(d), TP_DTYPE_FLOAT32);
    CHECK_VALUES(d, 0, {3.5, -3.5, 0.2f});
    tp_tensor *pw = tp_pow(a, b);
    CHECK_EQ(tp_tensor_dtype(pw), TP_DTYPE_INT32);
    CHECK_VALUES(pw, 0, {49, 49, 1024});
    tp_tensor *t[] = {p, q, or_, and_, a, b, d, pw};
    for (int k = 0; k < 8; k++) tp_tensor_release(t[k]);
}

static void test_comparisons_give_bool(void) {
    tp_tensor *a = MAKE(TP_DTYPE_FLOAT32, SHAPE(2, 2), {1, 2, 3, NAN});
    tp_tensor *b = MAKE(TP_DTYPE_INT64, SHAPE(2), {2, 2});
    tp_binary_op ops[6] = {TP_BINARY_OP_EQ, TP_BINARY_OP_NE, TP_BINARY_OP_LT,
                           TP_BINARY_OP_LE, TP_BINARY_OP_GT, TP_BINARY_OP_GE};
    double want[6][4] = {{0, 1, 0, 0}, {1, 0, 1, 1}, {1, 0, 0, 0}, {1, 1, 0, 0}, {0, 0, 1, 0}, {0, 1, 1, 0}};
    for (int k = 0; k < 6; k++) {
        tp_tensor *r = tp_binary(ops[k], a, b);
        CHECK_EQ(tp_tensor_dtype(r), TP_DTYPE_BOOL);
        check_failures += check_values_(__FILE__, __LINE__, r, 4, want[k], 0);
        tp_tensor_release(r);
    }
    tp_tensor *s = tp_binary_scalar(TP_BINARY_OP_GT, a, 1.5);
    CHECK_VALUES(s, 0, {0, 1, 1, 0});
    tp_tensor_release(s);
    tp_tensor_release(a);
    tp_tensor_release(b);
}

static void test_unary_ops_and_integer_to_float(void) {
    tp_tensor *x = MAKE(TP_DTYPE_FLOAT64, SHAPE(4), {-2, -0.5, 0.5, 4});
    tp_unary_op ops[8] = {TP_UNARY_OP_NEG, TP_UNARY_OP_ABS, TP_UNARY_OP_EXP, TP_UNARY_OP_LOG,
                          TP_UNARY_OP_SQRT, TP_UNARY_OP_RELU, TP_UNARY_OP_TANH, TP_UNARY_OP_SIGMOID};
    for (int k = 0; k < 8; k++) {
        tp_tensor *r = tp_unary(ops[k], x);
        for (int i = 0; i < 4; i++) {
            double v = at(x, i), want;
            switch (ops[k]) {
            case TP_UNARY_OP_NEG: want = -v; break;
            case TP_UNARY_OP_ABS: want = fabs(v); break;
            case TP_UNARY_OP_EXP: want = exp(v); break;
            case TP_UNARY_OP_LOG: want = log(v); break;
            case TP_UNARY_OP_SQRT: want = sqrt(v); break;
            case TP_UNARY_OP_RELU: want = v > 0 ? v : 0; break;
            case TP_UNARY_OP_TANH: want = tanh(v); break;
            default: want = 1 / (1 + exp(-v)); break;
            }
            CHECK_NEAR(at(r, i), want, 1e-12);
        }
        tp_tensor_release(r);
    }
    tp_tensor *i = MAKE(TP_DTYPE_INT16, SHAPE(3), {1, 4, -9});
    tp_tensor *s = tp_sqrt(i), *n = tp_neg(i), *ab = tp_abs(i), *re = tp_relu(i);
    CHECK_EQ(tp_tensor_dtype(s), TP_DTYPE_FLOAT32);
    CHECK_VALUES(s, 0, {1, 2, NAN});
    CHECK_EQ(tp_tensor_dtype(n), TP_DTYPE_INT16);
    CHECK_VALUES(n, 0, {-1, -4, 9});
    CHECK_VALUES(ab, 0, {1, 4, 9});
    CHECK_VALUES(re, 0, {1, 4, 0});
    tp_tensor *t[] = {x, i, s, n, ab, re};
    for (int k = 0; k < 6; k++) tp_tensor_release(t[k]);
}

static void test_float32_unary_same_for_every_layout(void) {
    tp_tensor *x = MAKE(TP_DTYPE_FLOAT32, SHAPE(2, 3), {-3, -0.25, 0.5, 1, 2.5, 7});
    tp_tensor *xt = tp_tensor_t(x);
    tp_unary_op ops[8] = {TP_UNARY_OP_NEG, TP_UNARY_OP_ABS, TP_UNARY_OP_EXP, TP_UNARY_OP_LOG,
                          TP_UNARY_OP_SQRT, TP_UNARY_OP_RELU, TP_UNARY_OP_TANH, TP_UNARY_OP_SIGMOID};
    for (int k = 0; k < 8; k++) {
        tp_tensor *r = tp_unary(ops[k], x), *rt = tp_unary(ops[k], xt);
        CHECK_EQ(tp_tensor_dtype(r), TP_DTYPE_FLOAT32);
        for (int i = 0; i < 6; i++) {
            double v = at(x, i), want;
            switch (ops[k]) {
            case TP_UNARY_OP_NEG: want = -v; break;
            case TP_UNARY_OP_ABS: want = fabs(v); break;
            case TP_UNARY_OP_EXP: want = exp(v); break;
            case TP_UNARY_OP_LOG: want = log(v); break;
            case TP_UNARY_OP_SQRT: want = sqrt(v); break;
            case TP_UNARY_OP_RELU: want = v > 0 ? v : 0; break;
            case TP_UNARY_OP_TANH: want = tanh(v); break;
            default: want = 1 / (1 + exp(-v)); break;
            }
            CHECK_NEAR(at(r, i), want, 1e-6 * (1 + fabs(want)));
            /* the transposed input gives bit-identical results */
            CHECK_EQ(at(rt, (i % 3) * 2 + i / 3) == at(r, i) || isnan(at(r, i)), 1);
        }
        tp_tensor_release(r);
        tp_tensor_release(rt);
    }
    tp_tensor_release(xt);
    tp_tensor_release(x);
}

static void test_scalar_ops_keep_or_promote_dtype(void) {
    tp_tensor *i = MAKE(TP_DTYPE_INT32, SHAPE(3), {1, 2, 3});
    tp_tensor *a = tp_binary_scalar(TP_BINARY_OP_MUL, i, 2);
    CHECK_EQ(tp_tensor_dtype(a), TP_DTYPE_INT32);
    CHECK_VALUES(a, 0, {2, 4, 6});
    tp_tensor *b = tp_binary_scalar(TP_BINARY_OP_ADD, i, 0.5);
    CHECK_EQ(tp_tensor_dtype(b), TP_DTYPE_FLOAT32);
    CHECK_VALUES(b, 0, {1.5, 2.5, 3.5});
    tp_tensor *h = MAKE(TP_DTYPE_FLOAT16, SHAPE(1), {3});
    tp_tensor *c = tp_binary_scalar(TP_BINARY_OP_DIV, h, 4.0);
    CHECK_EQ(tp_tensor_dtype(c), TP_DTYPE_FLOAT16);
    CHECK_VALUES(c, 0, {0.75});
    tp_tensor *bo = MAKE(TP_DTYPE_BOOL, SHAPE(2), {1, 0});
    tp_tensor *d = tp_binary_scalar(TP_BINARY_OP_ADD, bo, 3);
    CHECK_EQ(tp_tensor_dtype(d), TP_DTYPE_INT64);
    CHECK_VALUES(d, 0, {4, 3});
    tp_tensor *e = tp_binary_scalar(TP_BINARY_OP_POW, i, 2);
    CHECK_VALUES(e, 0, {1, 4, 9});
    CHECK_ERROR(fails(tp_binary_scalar(TP_BINARY_OP_POW, i, -1)), "Integers to negative integer powers");
    tp_tensor *t[] = {i, a, b, h, c, bo, d, e};
    for (int k = 0; k < 8; k++) tp_tensor_release(t[k]);
}

static void test_inplace_bumps_version_once_and_views_see_it(void) {
    tp_tensor *a = tp_arange(0, 6, 1, TP_DTYPE_FLOAT32);
    tp_tensor *m = tp_tensor_view(a, 2, (int64_t[]){2, 3});
    tp_tensor *one = tp_ones(1, (int64_t[]){3}, TP_DTYPE_FLOAT32);
    CHECK_EQ(tp_add_(m, one), TP_STATUS_OK);
    CHECK_EQ(tp_tensor_version(a), 1);
    CHECK_EQ(tp_tensor_version(m), 1);
    CHECK_VALUES(a, 0, {1, 2, 3, 4, 5, 6});
    CHECK_EQ(tp_mul_(m, m), TP_STATUS_OK); /* exact alias is fine */
    CHECK_VALUES(a, 0, {1, 4, 9, 16, 25, 36});
    CHECK_EQ(tp_tensor_version(a), 2);
    CHECK_EQ(tp_binary_scalar_(TP_BINARY_OP_SUB, m, 1), TP_STATUS_OK);
    CHECK_EQ(tp_relu_(m), TP_STATUS_OK);
    CHECK_EQ(tp_unary_(TP_UNARY_OP_SQRT, a), TP_STATUS_OK);
    CHECK_EQ(tp_tensor_version(m), 5);
    CHECK_VALUES(a, 1e-6, {0, sqrt(3), sqrt(8), sqrt(15), sqrt(24), sqrt(35)});
    /* in place through a transposed view writes the right elements */
    tp_tensor *mt = tp_tensor_t(m);
    tp_tensor *col = MAKE(TP_DTYPE_FLOAT32, SHAPE(2), {100, 200});
    tp_fill_(a, 0);
    CHECK_EQ(tp_add_(mt, col), TP_STATUS_OK);
    CHECK_VALUES(a, 0, {100, 100, 100, 200, 200, 200});
    tp_tensor *t[] = {a, m, one, mt, col};
    for (int k = 0; k < 5; k++) tp_tensor_release(t[k]);
}

static void test_inplace_errors_leave_target_unchanged(void) {
    tp_tensor *i = MAKE(TP_DTYPE_INT64, SHAPE(3), {1, 2, 3});
    tp_tensor *f = MAKE(TP_DTYPE_FLOAT32, SHAPE(3), {0.5, 0.5, 0.5});
    CHECK_ERROR(tp_add_(i, f) != TP_STATUS_OK, "result type Float can't be cast to the desired output type Long");
    CHECK_ERROR(tp_div_(i, i) != TP_STATUS_OK, "result type Float can't be cast to the desired output type Long");
    CHECK_ERROR(tp_unary_(TP_UNARY_OP_EXP, i) != TP_STATUS_OK, "can't be cast");
    tp_tensor *big = tp_ones(2, (int64_t[]){2, 3}, TP_DTYPE_INT64);
    CHECK_ERROR(tp_add_(i, big) != TP_STATUS_OK, "output with shape [3] doesn't match the broadcast shape [2, 3]");
    tp_tensor *e = tp_tensor_expand(i, 2, (int64_t[]){2, 3});
    CHECK_ERROR(tp_add_(e, big) != TP_STATUS_OK, "more than one element of the written-to tensor");
    CHECK_EQ(tp_tensor_version(i), 0);
    CHECK_VALUES(i, 0, {1, 2, 3});
    CHECK_EQ(tp_add_(f, i), TP_STATUS_OK); /* float += long is fine */
    CHECK_VALUES(f, 0, {1.5, 2.5, 3.5});
    tp_tensor *t[] = {i, f, big, e};
    for (int k = 0; k < 4; k++) tp_tensor_release(t[k]);
}

static void test_inplace_with_overlapping_operand_uses_old_values(void) {
    tp_tensor *a = MAKE(TP_DTYPE_FLOAT64, SHAPE(2, 2), {1, 2, 3, 4});
    tp_tensor *row0 = tp_tensor_select(a, 0, 0);
    CHECK_EQ(tp_add_(a, row0), TP_STATUS_OK);
    CHECK_VALUES(a, 0, {2, 4, 4, 6});
    CHECK_EQ(tp_tensor_version(a), 1);
    tp_tensor_release(row0);
    tp_tensor_release(a);
}

static void test_where_broadcasts_all_three(void) {
    tp_tensor *c = MAKE(TP_DTYPE_BOOL, SHAPE(2, 1), {1, 0});
    tp_tensor *a = MAKE(TP_DTYPE_INT32, SHAPE(3), {1, 2, 3});
    tp_tensor *b = MAKE(TP_DTYPE_FLOAT32, SHAPE(1), {-1});
    tp_tensor *w = tp_where(c, a, b);
    CHECK_EQ(tp_tensor_dtype(w), TP_DTYPE_FLOAT32);
    CHECK_SHAPE(w, SHAPE(2, 3));
    CHECK_VALUES(w, 0, {1, 2, 3, -1, -1, -1});
    CHECK_ERROR(fails(tp_where(a, a, b)), "where expected condition to be a boolean tensor, but got a tensor with dtype Int");
    tp_tensor *t[] = {c, a, b, w};
    for (int k = 0; k < 4; k++) tp_tensor_release(t[k]);
}

static void test_parallel_path_matches_serial(void) {
    int64_t n = 1 << 20;
    tp_tensor *a = tp_rand(2, (int64_t[]){1024, 1024}, TP_DTYPE_FLOAT32, 1);
    tp_tensor *b = tp_rand(1, (int64_t[]){1024}, TP_DTYPE_FLOAT32, 2);
    tp_tensor *at_ = tp_tensor_t(a);
    int saved = tp_get_num_threads();
    CHECK_EQ(tp_set_num_threads(4), TP_STATUS_OK);
    tp_tensor *p1 = tp_add(a, b), *p2 = tp_mul(at_, b), *p3 = tp_exp(at_);
    CHECK_EQ(tp_set_num_threads(1), TP_STATUS_OK);
    tp_tensor *s1 = tp_add(a, b), *s2 = tp_mul(at_, b), *s3 = tp_exp(at_);
    tp_set_num_threads(saved);
    CHECK(memcmp(tp_tensor_data(p1), tp_tensor_data(s1), (size_t)n * 4) == 0);
    CHECK(memcmp(tp_tensor_data(p2), tp_tensor_data(s2), (size_t)n * 4) == 0);
    CHECK(memcmp(tp_tensor_data(p3), tp_tensor_data(s3), (size_t)n * 4) == 0);
    /* spot-check values against the definition */
    CHECK_NEAR(at(p1, 5 * 1024 + 7), (float)(at(a, 5 * 1024 + 7) + at(b, 7)), 0);
    CHECK_NEAR(at(p2, 5 * 1024 + 7), (float)(at(a, 7 * 1024 + 5) * at(b, 7)), 0);
    CHECK_ERROR(tp_set_num_threads(0) != TP_STATUS_OK, "set_num_threads");
    tp_tensor *t[] = {a, b, at_, p1, p2, p3, s1, s2, s3};
    for (int k = 0; k < 9; k++) tp_tensor_release(t[k]);
}

static void test_empty_and_zero_dim_shapes(void) {
    tp_tensor *e = tp_zeros(2, (int64_t[]){0, 3}, TP_DTYPE_FLOAT32);
    tp_tensor *row = tp_ones(1, (int64_t[]){3}, TP_DTYPE_FLOAT32);
    tp_tensor *r = tp_add(e, row);
    CHECK_SHAPE(r, SHAPE(0, 3));
    CHECK_EQ(tp_add_(e, row), TP_STATUS_OK);
    CHECK_EQ(tp_tensor_version(e), 1);
    double x = 2, y = 5;
    tp_tensor *sx = tp_from_blob(&x, 0, NULL, NULL, TP_DTYPE_FLOAT64, NULL, NULL);
    tp_tensor *sy = tp_from_blob(&y, 0, NULL, NULL, TP_DTYPE_FLOAT64, NULL, NULL);
    tp_tensor *p = tp_pow(sx, sy);
    CHECK_EQ(tp_tensor_dim(p), 0);
    CHECK_VALUES(p, 0, {32});
    tp_tensor *t[] = {e, row, r, sx, sy, p};
    for (int k = 0; k < 6; k++) tp_tensor_release(t[k]);
}

static void test_large_inplace_bumps_once_on_parallel_path(void) {
    int saved = tp_get_num_threads();
    tp_set_num_threads(4);
    tp_tensor *a = tp_zeros(2, (int64_t[]){512, 512}, TP_DTYPE_FLOAT64);
    tp_tensor *at_ = tp_tensor_t(a);
    tp_tensor *col = tp_arange(0, 512, 1, TP_DTYPE_FLOAT64);
    CHECK_EQ(tp_add_(at_, col), TP_STATUS_OK); /* a[i][j] += i, written through the transpose */
    CHECK_EQ(tp_tensor_version(a), 1);
    CHECK_EQ(at(a, 300 * 512 + 7), 300);
    CHECK_EQ(at(a, 511 * 512 + 511), 511);
    tp_set_num_threads(saved);
    tp_tensor_release(col);
    tp_tensor_release(at_);
    tp_tensor_release(a);
}

static void test_allocation_failure_leaves_everything_unchanged(void) {
    tp_tensor *a = tp_arange(0, 1000, 1, TP_DTYPE_FLOAT64);
    tp_tensor *lo = tp_tensor_narrow(a, 0, 0, 999), *hi = tp_tensor_narrow(a, 0, 1, 999);
    limit_begin(1024);
    CHECK_ERROR(fails(tp_add(a, a)), "failed to allocate");
    CHECK_ERROR(fails(tp_exp(a)), "failed to allocate");
    /* hi += lo overlaps, so lo must be copied aside first: that copy fails */
    CHECK_ERROR(tp_add_(hi, lo) != TP_STATUS_OK, "failed to allocate");
    CHECK_EQ(tp_last_status(), TP_STATUS_OUT_OF_MEMORY);
    limit_end();
    CHECK_EQ(tp_tensor_version(a), 0);
    CHECK_EQ(at(a, 1), 1);
    CHECK_EQ(at(a, 999), 999);
    CHECK_EQ(tp_add_(hi, lo), TP_STATUS_OK); /* and works once memory is back */
    CHECK_EQ(at(a, 999), 999 + 998);
    tp_tensor_release(lo);
    tp_tensor_release(hi);
    tp_tensor_release(a);
}

static void test_any_layout_gives_the_contiguous_answer(void) {
    uint64_t seed = 12345;
    tp_dtype dts[5] = {TP_DTYPE_FLOAT32, TP_DTYPE_FLOAT64, TP_DTYPE_FLOAT16, TP_DTYPE_INT32, TP_DTYPE_INT8};
    int saved = tp_get_num_threads(), big = 0;
    for (int iter = 0; iter < 300; iter++) {
        tp_set_num_threads(iter % 2 ? 3 : 1);
        int ndim = 1 + (int)(test_rng(&seed) % 4);
        int64_t sizes[4];
        for (int d = 0; d < ndim; d++) sizes[d] = 1 + (int64_t)(test_rng(&seed) % 9);
        if (iter % 25 == 0) { /* a big 2-D case: tiles and the pool kick in */
            ndim = 2;
            sizes[0] = 200 + (int64_t)(test_rng(&seed) % 200);
            sizes[1] = 200 + (int64_t)(test_rng(&seed) % 200);
        }
        tp_dtype da = dts[test_rng(&seed) % 5], db = dts[test_rng(&seed) % 5];
        tp_tensor *a = random_view(&seed, ndim, sizes, da);
        big += tp_tensor_numel(a) >= 65536;
        /* b broadcasts: some of a's dims set to 1, and maybe fewer dims */
        int64_t bs[4];
        int bn = ndim - (int)(test_rng(&seed) % 2);
        for (int d = 0; d < bn; d++) bs[d] = test_rng(&seed) % 3 == 0 ? 1 : sizes[d + ndim - bn];
        tp_tensor *b = random_view(&seed, bn, bs, db);
        tp_tensor *ca = tp_contiguous(a), *cb = tp_contiguous(b);
        tp_binary_op op = (tp_binary_op)(test_rng(&seed) % TP_BINARY_OP_COUNT);
        tp_tensor *r = tp_binary(op, a, b), *rc = tp_binary(op, ca, cb);
        if (!same_tensor(r, rc)) {
            fprintf(stderr, "  iteration %d: op %d, %d-d, dtypes %d %d differ\n", iter, op, ndim, da, db);
            check_failures++;
        }
        tp_unary_op uop = (tp_unary_op)(test_rng(&seed) % TP_UNARY_OP_COUNT);
        tp_tensor *u = tp_unary(uop, a), *uc = tp_unary(uop, ca);
        if (!same_tensor(u, uc)) {
            fprintf(stderr, "  iteration %d: unary %d differs\n", iter, uop);
            check_failures++;
        }
        /* in place into the strided view itself: a op= b, when the dtype allows */
        tp_tensor *ra = tp_clone(a);
        tp_clear_error();
        tp_status st = tp_binary_(TP_BINARY_OP_ADD, a, b), stc = tp_binary_(TP_BINARY_OP_ADD, ra, cb);
        CHECK_EQ(st, stc);
        if (st == TP_STATUS_OK && !same_tensor(a, ra)) {
            fprintf(stderr, "  iteration %d: in-place add differs\n", iter);
            check_failures++;
        }
        tp_tensor *t[] = {a, b, ca, cb, r, rc, u, uc, ra};
        for (int k = 0; k < 9; k++) tp_tensor_release(t[k]);
    }
    CHECK(big >= 2); /* the seed does reach the parallel, tiled paths */
    tp_set_num_threads(saved);
}

static int version_events;
static void count_versions(void *user, const tp_obs_event *ev) {
    (void)user;
    if (ev->kind == TP_OBS_VERSION_BUMPED) version_events++;
}

static void test_observer_sees_exactly_one_bump_per_inplace_op(void) {
    static const tp_observer obs = {
        .abi_version = TP_OBSERVER_ABI_VERSION, .struct_size = sizeof obs, .on_event = count_versions,
    };
    const tp_observer *saved = tp_observer_get();
    CHECK_EQ(tp_observer_set(&obs), 0);
    version_events = 0;
    tp_tensor *a = tp_full(1, (int64_t[]){100000}, 2, TP_DTYPE_FLOAT32); /* factories do not bump */
    tp_tensor *b = tp_ones(1, (int64_t[]){100000}, TP_DTYPE_FLOAT32);
    tp_tensor *c = tp_add(a, b);
    CHECK_EQ(version_events, 0);
    CHECK_EQ(tp_add_(a, b), TP_STATUS_OK);
    CHECK_EQ(version_events, 1);
    CHECK_EQ(tp_unary_(TP_UNARY_OP_SQRT, a), TP_STATUS_OK);
    CHECK_EQ(tp_fill_(b, 3), TP_STATUS_OK);
    CHECK_EQ(tp_copy_(c, a), TP_STATUS_OK);
    CHECK_EQ(version_events, 4);
    tp_tensor *i = tp_zeros(1, (int64_t[]){100000}, TP_DTYPE_INT32);
    CHECK(tp_add_(i, a) != TP_STATUS_OK); /* float into int: refused, no bump */
    CHECK_EQ(version_events, 4);
    tp_observer_set(saved);
    tp_tensor *t[] = {a, b, c, i};
    for (int k = 0; k < 4; k++) tp_tensor_release(t[k]);
}

int main(void) {
    RUN_TEST(test_add_contiguous_float32);
    RUN_TEST(test_broadcast_bias_row_and_column);
    RUN_TEST(test_strided_operands_transposed_stepped_offset);
    RUN_TEST(test_type_promotion_follows_pytorch);
    RUN_TEST(test_bool_and_integer_rules);
    RUN_TEST(test_comparisons_give_bool);
    RUN_TEST(test_unary_ops_and_integer_to_float);
    RUN_TEST(test_float32_unary_same_for_every_layout);
    RUN_TEST(test_scalar_ops_keep_or_promote_dtype);
    RUN_TEST(test_inplace_bumps_version_once_and_views_see_it);
    RUN_TEST(test_inplace_errors_leave_target_unchanged);
    RUN_TEST(test_inplace_with_overlapping_operand_uses_old_values);
    RUN_TEST(test_where_broadcasts_all_three);
    RUN_TEST(test_parallel_path_matches_serial);
    RUN_TEST(test_empty_and_zero_dim_shapes);
    RUN_TEST(test_large_inplace_bumps_once_on_parallel_path);
    RUN_TEST(test_allocation_failure_leaves_everything_unchanged);
    RUN_TEST(test_any_layout_gives_the_contiguous_answer);
    RUN_TEST(test_observer_sees_exactly_one_bump_per_inplace_op);
    return CHECK_DONE();
}
