/*
 * tests/ops/test_reduce.c - sum/mean/max/min over dim sets with keepdim,
 * argmax, on contiguous, transposed and sliced inputs; dtype rules, NaN,
 * empty reductions, error messages, and split (parallel) reductions.
 */
#include "check.h"

static tp_tensor *mat23(tp_dtype dt) { return MAKE(dt, SHAPE(2, 3), {1, 5, 3, 4, 2, 6}); }

static void test_sum_over_each_dim_and_all(void) {
    tp_tensor *m = mat23(TP_DTYPE_FLOAT32);
    tp_tensor *s0 = tp_sum(m, 1, (int[]){0}, false), *s1 = tp_sum(m, 1, (int[]){-1}, true);
    tp_tensor *all = tp_sum(m, 0, NULL, false), *both = tp_sum(m, 2, (int[]){1, 0}, true);
    CHECK_SHAPE(s0, SHAPE(3));
    CHECK_VALUES(s0, 0, {5, 7, 9});
    CHECK_SHAPE(s1, SHAPE(2, 1));
    CHECK_VALUES(s1, 0, {9, 12});
    CHECK_EQ(tp_tensor_dim(all), 0);
    CHECK_VALUES(all, 0, {21});
    CHECK_SHAPE(both, SHAPE(1, 1));
    CHECK_VALUES(both, 0, {21});
    tp_tensor *t[] = {m, s0, s1, all, both};
    for (int k = 0; k < 5; k++) tp_tensor_release(t[k]);
}

static void test_reductions_on_strided_views(void) {
    tp_tensor *a = tp_arange(0, 24, 1, TP_DTYPE_FLOAT64);
    tp_tensor *c = tp_tensor_view(a, 3, (int64_t[]){2, 3, 4});
    tp_tensor *p = tp_tensor_permute(c, 3, (int[]){2, 0, 1}); /* 4x2x3 */
    tp_tensor *s = tp_tensor_slice(p, 0, 1, 4, 2);             /* rows 1 and 3: 2x2x3, offset 1 */
    tp_tensor *r = tp_sum(s, 2, (int[]){0, 2}, false);         /* over the two picked k and j */
    /* element [k, i, j] = 12 i + 4 j + k; k in {1, 3}, j in 0..2 */
    /* sum over k, j of 12 i + 4 j + k = 72 i + 8 * (0 + 1 + 2) + 3 * (1 + 3) */
    CHECK_VALUES(r, 0, {36, 108});
    tp_tensor *mx = tp_max(s, 1, (int[]){1}, false);           /* max over i: i = 1 */
    CHECK_SHAPE(mx, SHAPE(2, 3));
    CHECK_VALUES(mx, 0, {13, 17, 21, 15, 19, 23});
    tp_tensor *mn = tp_min(p, 2, (int[]){0, 1}, true);          /* min over k, i per j */
    CHECK_SHAPE(mn, SHAPE(1, 1, 3));
    CHECK_VALUES(mn, 0, {0, 4, 8});
    tp_tensor *t[] = {a, c, p, s, r, mx, mn};
    for (int k = 0; k < 7; k++) tp_tensor_release(t[k]);
}

static void test_dtype_rules_for_sum_mean(void) {
    tp_tensor *b = MAKE(TP_DTYPE_BOOL, SHAPE(4), {1, 0, 1, 1});
    tp_tensor *sb = tp_sum(b, 0, NULL, false);
    CHECK_EQ(tp_tensor_dtype(sb), TP_DTYPE_INT64);
    CHECK_VALUES(sb, 0, {3});
    tp_tensor *i8 = MAKE(TP_DTYPE_INT8, SHAPE(3), {100, 100, 100});
    tp_tensor *si = tp_sum(i8, 0, NULL, false); /* no int8 overflow: accumulates in int64 */
    CHECK_EQ(tp_tensor_dtype(si), TP_DTYPE_INT64);
    CHECK_VALUES(si, 0, {300});
    CHECK_ERROR(fails(tp_mean(i8, 0, NULL, false)),
                "mean(): could not infer output dtype. Input dtype must be either a floating point or complex dtype. Got: Char");
    tp_tensor *h = MAKE(TP_DTYPE_FLOAT16, SHAPE(2, 2), {1, 2, 3, 5});
    tp_tensor *mh = tp_mean(h, 1, (int[]){1}, false);
    CHECK_EQ(tp_tensor_dtype(mh), TP_DTYPE_FLOAT16);
    CHECK_VALUES(mh, 0, {1.5, 4});
    tp_tensor *mx = tp_max(i8, 0, NULL, false);
    CHECK_EQ(tp_tensor_dtype(mx), TP_DTYPE_INT8);
    tp_tensor *t[] = {b, sb, i8, si, h, mh, mx};
    for (int k = 0; k < 7; k++) tp_tensor_release(t[k]);
}

static void test_argmax_first_maximum_and_nan(void) {
    tp_tensor *m = MAKE(TP_DTYPE_FLOAT32, SHAPE(2, 4), {1, 7, 7, 2, NAN, 3, NAN, 9});
    tp_tensor *a1 = tp_argmax(m, 1, false), *a0 = tp_argmax(m, 0, true);
    CHECK_EQ(tp_tensor_dtype(a1), TP_DTYPE_INT64);
    CHECK_VALUES(a1, 0, {1, 0});
    CHECK_SHAPE(a0, SHAPE(1, 4));
    CHECK_VALUES(a0, 0, {1, 0, 1, 1});
    tp_tensor *mx = tp_max(m, 1, (int[]){1}, false), *mn = tp_min(m, 1, (int[]){0}, false);
    CHECK_VALUES(mx, 0, {7, NAN});
    CHECK_VALUES(mn, 0, {NAN, 3, NAN, 2});
    tp_tensor *t = tp_tensor_t(m);
    tp_tensor *at_ = tp_argmax(t, 0, false);
    CHECK_VALUES(at_, 0, {1, 0});
    tp_tensor *ts[] = {m, a1, a0, mx, mn, t, at_};
    for (int k = 0; k < 7; k++) tp_tensor_release(ts[k]);
}

static void test_empty_and_bad_dims(void) {
    tp_tensor *e = tp_zeros(2, (int64_t[]){0, 3}, TP_DTYPE_FLOAT32);
    tp_tensor *s = tp_sum(e, 1, (int[]){0}, false);
    CHECK_VALUES(s, 0, {0, 0, 0});
    tp_tensor *mean = tp_mean(e, 0, NULL, false);
    CHECK_VALUES(mean, 0, {NAN});
    CHECK_ERROR(fails(tp_max(e, 0, NULL, false)),
                "max(): Expected reduction dim to be specified for input.numel() == 0.");
    CHECK_ERROR(fails(tp_argmax(e, 0, false)), "argmax(): Expected reduction dim 0 to have non-zero size.");
    tp_tensor *ok = tp_max(e, 1, (int[]){1}, false); /* nothing to reduce into: empty result */
    CHECK_SHAPE(ok, SHAPE(0));
    tp_tensor *m = mat23(TP_DTYPE_INT32);
    CHECK_ERROR(fails(tp_sum(m, 2, (int[]){1, -1}, false)), "dim 1 appears multiple times in the list of dims");
    CHECK_ERROR(fails(tp_sum(m, 1, (int[]){2}, false)), "Dimension out of range");
    tp_tensor *t[] = {e, s, mean, ok, m};
    for (int k = 0; k < 5; k++) tp_tensor_release(t[k]);
}

static void test_split_reduction_matches_serial(void) {
    tp_tensor *x = tp_randn(1, (int64_t[]){1 << 20}, TP_DTYPE_FLOAT32, 3);
    tp_tensor *xi = tp_binary_scalar(TP_BINARY_OP_MUL, x, 1000);
    tp_tensor *ii = tp_to_dtype(xi, TP_DTYPE_INT32);
    int saved = tp_get_num_threads();
    tp_set_num_threads(4);
    tp_tensor *p_sum = tp_sum(ii, 0, NULL, false), *p_max = tp_argmax(x, 0, false);
    tp_tensor *p_mean = tp_mean(x, 0, NULL, false);
    tp_set_num_threads(1);
    tp_tensor *s_sum = tp_sum(ii, 0, NULL, false), *s_max = tp_argmax(x, 0, false);
    tp_tensor *s_mean = tp_mean(x, 0, NULL, false);
    tp_set_num_threads(saved);
    CHECK_EQ(at(p_sum, 0), at(s_sum, 0));
    CHECK_EQ(at(p_max, 0), at(s_max, 0));
    CHECK_NEAR(at(p_mean, 0), at(s_mean, 0), 1e-6);
    /* the reference, computed here */
    long long want = 0;
    const int32_t *d = tp_tensor_data(ii);
    for (int64_t i = 0; i < (1 << 20); i++) want += d[i];
    CHECK_EQ(at(p_sum, 0), want);
    tp_tensor *t[] = {x, xi, ii, p_sum, p_max, p_mean, s_sum, s_max, s_mean};
    for (int k = 0; k < 9; k++) tp_tensor_release(t[k]);
}

static void test_many_outputs_parallel_against_reference(void) {
    int saved = tp_get_num_threads();
    tp_set_num_threads(4);
    tp_tensor *x = tp_rand(2, (int64_t[]){512, 256}, TP_DTYPE_FLOAT64, 9);
    tp_tensor *s0 = tp_sum(x, 1, (int[]){0}, false), *s1 = tp_sum(x, 1, (int[]){1}, true);
    tp_tensor *m1 = tp_max(x, 1, (int[]){1}, false);
    const double *d = tp_tensor_data(x);
    for (int j = 0; j < 256; j += 51) {
        double want = 0;
        for (int i = 0; i < 512; i++) want += d[i * 256 + j];
        CHECK_NEAR(at(s0, j), want, 1e-9);
    }
    for (int i = 0; i < 512; i += 97) {
        double want = 0, mx = -1;
        for (int j = 0; j < 256; j++) {
            want += d[i * 256 + j];
            if (d[i * 256 + j] > mx) mx = d[i * 256 + j];
        }
        CHECK_NEAR(at(s1, i), want, 1e-9);
        CHECK_EQ(at(m1, i) == mx, 1);
    }
    tp_set_num_threads(saved);
    tp_tensor *t[] = {x, s0, s1, m1};
    for (int k = 0; k < 4; k++) tp_tensor_release(t[k]);
}

static void test_outer_and_inner_dims_of_contiguous_4d(void) {
    /* regression: the iterator once merged dims by comparing against
     * pre-merge strides, and summed the first 35 elements here */
    tp_tensor *base = tp_arange(0, 7 * 6 * 7 * 5, 1, TP_DTYPE_INT32);
    tp_tensor *c = tp_tensor_view(base, 4, (int64_t[]){7, 6, 7, 5});
    tp_tensor *r = tp_sum(c, 2, (int[]){0, 3}, false);
    CHECK_SHAPE(r, SHAPE(6, 7));
    /* element [j, k] = sum over i < 7, l < 5 of 210 i + 35 j + 5 k + l */
    bool ok = r != NULL;
    for (int j = 0; ok && j < 6; j++)
        for (int k = 0; k < 7; k++) ok &= at(r, j * 7 + k) == 210 * 21 * 5 + 35 * (35 * j + 5 * k) + 7 * 10;
    CHECK(ok);
    tp_tensor_release(r);
    tp_tensor_release(c);
    tp_tensor_release(base);
}

static bool close_tensors(tp_tensor *a, tp_tensor *b, double tol) {
    if (!a || !b || tp_tensor_numel(a) != tp_tensor_numel(b) || tp_tensor_dtype(a) != tp_tensor_dtype(b)) return false;
    for (int64_t k = 0; k < tp_tensor_numel(a); k++) {
        double x = at(a, k), y = at(b, k);
        if (!(fabs(x - y) <= tol * (1 + fabs(y))) && !(isnan(x) && isnan(y))) return false;
    }
    return shape_is(a, tp_tensor_dim(b), tp_tensor_sizes(b));
}

static void test_any_layout_gives_the_contiguous_answer(void) {
    uint64_t seed = 777;
    tp_dtype dts[4] = {TP_DTYPE_FLOAT32, TP_DTYPE_FLOAT64, TP_DTYPE_INT16, TP_DTYPE_BFLOAT16};
    int saved = tp_get_num_threads();
    for (int iter = 0; iter < 200; iter++) {
        tp_set_num_threads(iter % 2 ? 3 : 1);
        int ndim = 1 + (int)(test_rng(&seed) % 4);
        int64_t sizes[4];
        for (int d = 0; d < ndim; d++) sizes[d] = 1 + (int64_t)(test_rng(&seed) % 7);
        if (iter % 6 == 0) {
            ndim = 2;
            sizes[0] = 100 + (int64_t)(test_rng(&seed) % 400);
            sizes[1] = 100 + (int64_t)(test_rng(&seed) % 400);
        }
        tp_dtype dt = dts[test_rng(&seed) % 4];
        tp_tensor *a = random_view(&seed, ndim, sizes, dt), *c = tp_contiguous(a);
        int dims[4], nd = 0;
        for (int d = 0; d < ndim; d++)
            if (test_rng(&seed) % 2) dims[nd++] = d;
        bool keep = test_rng(&seed) % 2;
        /* float sums may add in another order per layout: compare with a tolerance */
        double tol = tp_dtype_is_floating(dt) ? (dt == TP_DTYPE_BFLOAT16 ? 1e-2 : 1e-5) : 0;
        tp_tensor *r[5] = {tp_sum(a, nd, dims, keep), tp_max(a, nd, dims, keep), tp_min(a, nd, dims, keep),
                           tp_argmax(a, dims[0] * (nd > 0), keep),
                           tp_dtype_is_floating(dt) ? tp_mean(a, nd, dims, keep) : tp_sum(a, 0, NULL, keep)};
        tp_tensor *rc[5] = {tp_sum(c, nd, dims, keep), tp_max(c, nd, dims, keep), tp_min(c, nd, dims, keep),
                            tp_argmax(c, dims[0] * (nd > 0), keep),
                            tp_dtype_is_floating(dt) ? tp_mean(c, nd, dims, keep) : tp_sum(c, 0, NULL, keep)};
        for (int k = 0; k < 5; k++) {
            if (!close_tensors(r[k], rc[k], k == 0 || k == 4 ? tol : 0)) {
                fprintf(stderr, "  iteration %d: reduction %d (%d-d, dtype %d, %d dims) differs\n", iter, k,
                        ndim, dt, nd);
                check_failures++;
            }
            tp_tensor_release(r[k]);
            tp_tensor_release(rc[k]);
        }
        tp_tensor_release(a);
        tp_tensor_release(c);
    }
    tp_set_num_threads(saved);
}

int main(void) {
    RUN_TEST(test_sum_over_each_dim_and_all);
    RUN_TEST(test_reductions_on_strided_views);
    RUN_TEST(test_dtype_rules_for_sum_mean);
    RUN_TEST(test_argmax_first_maximum_and_nan);
    RUN_TEST(test_empty_and_bad_dims);
    RUN_TEST(test_split_reduction_matches_serial);
    RUN_TEST(test_many_outputs_parallel_against_reference);
    RUN_TEST(test_outer_and_inner_dims_of_contiguous_4d);
    RUN_TEST(test_any_layout_gives_the_contiguous_answer);
    return CHECK_DONE();
}
