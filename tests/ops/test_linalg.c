/*
 * tests/ops/test_linalg.c - matmul and bmm against a naive reference:
 * every torch.matmul shape case, transposed/sliced/broadcast operands (the
 * BLAS trans flags and the packing fallback), every dtype class, errors.
 */
#include "check.h"

/* Naive reference for 2-D a (n x k), b (k x m) via tp_tensor_get. */
static double ref_elem(const tp_tensor *a, const tp_tensor *b, int64_t i, int64_t j) {
    double acc = 0, x, y;
    for (int64_t k = 0; k < tp_tensor_size(a, 1); k++) {
        tp_tensor_get(a, (int64_t[]){i, k}, &x);
        tp_tensor_get(b, (int64_t[]){k, j}, &y);
        acc += x * y;
    }
    return acc;
}

static int check_mm(const tp_tensor *c, const tp_tensor *a, const tp_tensor *b, double tol) {
    int bad = 0;
    int64_t n = tp_tensor_size(a, 0), m = tp_tensor_size(b, 1);
    if (!shape_is(c, 2, (int64_t[]){n, m})) return 1;
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < m; j++) {
            double got, want = ref_elem(a, b, i, j);
            tp_tensor_get(c, (int64_t[]){i, j}, &got);
            if (fabs(got - want) > tol * (1 + fabs(want))) {
                if (!bad) fprintf(stderr, "  [%lld,%lld] got %g want %g\n", (long long)i, (long long)j, got, want);
                bad = 1;
            }
        }
    return bad;
}

static void test_mm_matches_reference_for_all_layouts(void) {
    tp_dtype dts[2] = {TP_DTYPE_FLOAT32, TP_DTYPE_FLOAT64};
    for (int d = 0; d < 2; d++) {
        tp_tensor *a = tp_randn(2, (int64_t[]){7, 5}, dts[d], 1);
        tp_tensor *b = tp_randn(2, (int64_t[]){5, 6}, dts[d], 2);
        tp_tensor *at = tp_randn(2, (int64_t[]){5, 7}, dts[d], 3);
        tp_tensor *bt = tp_randn(2, (int64_t[]){6, 5}, dts[d], 4);
        tp_tensor *att = tp_tensor_t(at), *btt = tp_tensor_t(bt); /* CblasTrans without copies */
        tp_tensor *big = tp_randn(2, (int64_t[]){14, 12}, dts[d], 5);
        tp_tensor *stepped = tp_tensor_slice(big, 0, 1, 14, 2);    /* 7x12, row stride 24 */
        tp_tensor *sl = tp_tensor_slice(stepped, 1, 2, 12, 2);     /* 7x5, col stride 2: packed */
        double tol = d == 0 ? 1e-5 : 1e-12;
        tp_tensor *c1 = tp_matmul(a, b), *c2 = tp_matmul(att, btt), *c3 = tp_matmul(sl, btt);
        tp_tensor *c4 = tp_matmul(a, btt);
        check_failures += check_mm(c1, a, b, tol);
        check_failures += check_mm(c2, att, btt, tol);
        check_failures += check_mm(c3, sl, btt, tol);
        check_failures += check_mm(c4, a, btt, tol);
        tp_tensor *t[] = {a, b, at, bt, att, btt, big, stepped, sl, c1, c2, c3, c4};
        for (int k = 0; k < 13; k++) tp_tensor_release(t[k]);
    }
}

static void test_vector_cases_drop_the_vector_dim(void) {
    tp_tensor *v = MAKE(TP_DTYPE_FLOAT64, SHAPE(3), {1, 2, 3});
    tp_tensor *w = MAKE(TP_DTYPE_FLOAT64, SHAPE(3), {4, 5, 6});
    tp_tensor *m = MAKE(TP_DTYPE_FLOAT64, SHAPE(2, 3), {1, 0, 2, 0, 1, 1});
    tp_tensor *dot = tp_matmul(v, w);
    CHECK_EQ(tp_tensor_dim(dot), 0);
    CHECK_VALUES(dot, 0, {32});
    tp_tensor *mv = tp_matmul(m, v);
    CHECK_SHAPE(mv, SHAPE(2));
    CHECK_VALUES(mv, 0, {7, 5});
    tp_tensor *mt = tp_tensor_t(m);
    tp_tensor *ones = MAKE(TP_DTYPE_FLOAT64, SHAPE(2), {1, 1});
    tp_tensor *vm = tp_matmul(ones, m);
    tp_tensor_release(ones);
    CHECK_SHAPE(vm, SHAPE(3));
    CHECK_VALUES(vm, 0, {1, 1, 3});
    tp_tensor *vmt = tp_matmul(v, mt);
    CHECK_VALUES(vmt, 0, {7, 5});
    tp_tensor *t[] = {v, w, m, dot, mv, mt, vm, vmt};
    for (int k = 0; k < 8; k++) tp_tensor_release(t[k]);
}

static void test_batched_broadcast_and_fold(void) {
    tp_tensor *a = tp_randn(3, (int64_t[]){4, 3, 5}, TP_DTYPE_FLOAT32, 10);
    tp_tensor *b = tp_randn(3, (int64_t[]){1, 5, 2}, TP_DTYPE_FLOAT32, 11);
    tp_tensor *b2 = tp_randn(2, (int64_t[]){5, 2}, TP_DTYPE_FLOAT32, 12);
    tp_tensor *c = tp_matmul(a, b), *c2 = tp_matmul(a, b2);
    CHECK_SHAPE(c, SHAPE(4, 3, 2));
    CHECK_SHAPE(c2, SHAPE(4, 3, 2));
    tp_tensor *b0 = tp_tensor_select(b, 0, 0);
    for (int64_t i = 0; i < 4; i++) {
        tp_tensor *ai = tp_tensor_select(a, 0, i), *ci = tp_tensor_select(c, 0, i);
        tp_tensor *c2i = tp_tensor_select(c2, 0, i);
        check_failures += check_mm(ci, ai, b0, 1e-5);
        check_failures += check_mm(c2i, ai, b2, 1e-5);
        tp_tensor_release(ai);
        tp_tensor_release(ci);
        tp_tensor_release(c2i);
    }
    /* batch broadcast both ways: (2,1,3,4) x (5,4,2) -> (2,5,3,2) */
    tp_tensor *x = tp_randn(4, (int64_t[]){2, 1, 3, 4}, TP_DTYPE_FLOAT64, 13);
    tp_tensor *y = tp_randn(3, (int64_t[]){5, 4, 2}, TP_DTYPE_FLOAT64, 14);
    tp_tensor *z = tp_matmul(x, y);
    CHECK_SHAPE(z, SHAPE(2, 5, 3, 2));
    tp_tensor *x1 = tp_tensor_select(x, 0, 1), *x11 = tp_tensor_select(x1, 0, 0);
    tp_tensor *y3 = tp_tensor_select(y, 0, 3);
    tp_tensor *z1 = tp_tensor_select(z, 0, 1), *z13 = tp_tensor_select(z1, 0, 3);
    check_failures += check_mm(z13, x11, y3, 1e-12);
    tp_tensor *be = tp_tensor_expand(b, 3, (int64_t[]){4, 5, 2});
    tp_tensor *bm = tp_bmm(a, be);
    tp_tensor_release(be);
    CHECK(bm && memcmp(tp_tensor_data(bm), tp_tensor_data(c), 4 * 3 * 2 * 4) == 0);
    tp_tensor *t[] = {a, b, b2, c, c2, b0, x, y, z, x1, x11, y3, z1, z13, bm};
    for (int k = 0; k < 15; k++) tp_tensor_release(t[k]);
}

static void test_integer_and_half_matmul(void) {
    tp_tensor *a = MAKE(TP_DTYPE_INT32, SHAPE(2, 3), {1, 2, 3, 4, 5, 6});
    tp_tensor *b = MAKE(TP_DTYPE_INT32, SHAPE(3, 2), {7, 8, 9, 10, 11, 12});
    tp_tensor *c = tp_matmul(a, b);
    CHECK_EQ(tp_tensor_dtype(c), TP_DTYPE_INT32);
    CHECK_VALUES(c, 0, {58, 64, 139, 154});
    tp_tensor *at = tp_tensor_t(b), *bt = tp_tensor_t(a);
    tp_tensor *ct = tp_matmul(at, bt); /* (ab)^T */
    CHECK_VALUES(ct, 0, {58, 139, 64, 154});
    tp_tensor *h = tp_to_dtype(a, TP_DTYPE_FLOAT16), *hb = tp_to_dtype(b, TP_DTYPE_BFLOAT16);
    tp_tensor *hh = tp_to_dtype(b, TP_DTYPE_FLOAT16);
    tp_tensor *ch = tp_matmul(h, hh);
    CHECK_EQ(tp_tensor_dtype(ch), TP_DTYPE_FLOAT16);
    CHECK_VALUES(ch, 0, {58, 64, 139, 154});
    tp_tensor *u8 = tp_to_dtype(a, TP_DTYPE_INT8), *u8b = tp_to_dtype(b, TP_DTYPE_INT8);
    tp_tensor *cu = tp_matmul(u8, u8b); /* wraps mod 256 like PyTorch */
    CHECK_VALUES(cu, 0, {58, 64, 139 - 256, 154 - 256});
    CHECK_ERROR(fails(tp_matmul(h, hb)), "expected m1 and m2 to have the same dtype, but got: float16 != bfloat16");
    tp_tensor *t[] = {a, b, c, at, bt, ct, h, hb, hh, ch, u8, u8b, cu};
    for (int k = 0; k < 13; k++) tp_tensor_release(t[k]);
}

static void test_matmul_errors(void) {
    tp_tensor *a = tp_zeros(2, (int64_t[]){2, 3}, TP_DTYPE_FLOAT32);
    tp_tensor *b = tp_zeros(2, (int64_t[]){4, 5}, TP_DTYPE_FLOAT32);
    CHECK_ERROR(fails(tp_matmul(a, b)), "mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)");
    tp_tensor *v3 = tp_zeros(1, (int64_t[]){3}, TP_DTYPE_FLOAT32), *v4 = tp_zeros(1, (int64_t[]){4}, TP_DTYPE_FLOAT32);
    CHECK_ERROR(fails(tp_matmul(v3, v4)), "inconsistent tensor size, expected tensor [3] and src [4]");
    tp_tensor *s = tp_zeros(0, NULL, TP_DTYPE_FLOAT32);
    CHECK_ERROR(fails(tp_matmul(s, a)), "both arguments to matmul need to be at least 1D, but they are 0D and 2D");
    tp_tensor *bo = tp_zeros(2, (int64_t[]){2, 2}, TP_DTYPE_BOOL);
    CHECK_ERROR(fails(tp_matmul(bo, bo)), "not implemented for 'Bool'");
    CHECK_ERROR(fails(tp_bmm(a, a)), "batch1 must be a 3D tensor");
    tp_tensor *x = tp_zeros(3, (int64_t[]){2, 3, 4}, TP_DTYPE_FLOAT32), *y = tp_zeros(3, (int64_t[]){2, 5, 4}, TP_DTYPE_FLOAT32);
    CHECK_ERROR(fails(tp_bmm(x, y)), "Expected size for first two dimensions of batch2 tensor to be: [2, 4] but got: [2, 5].");
    tp_tensor *p = tp_zeros(3, (int64_t[]){2, 3, 4}, TP_DTYPE_FLOAT32), *q = tp_zeros(3, (int64_t[]){3, 4, 1}, TP_DTYPE_FLOAT32);
    CHECK_ERROR(fails(tp_matmul(p, q)), "must match the size of tensor b (3) at non-singleton dimension 0");
    /* empty inner dimension gives zeros */
    tp_tensor *e1 = tp_ones(2, (int64_t[]){2, 0}, TP_DTYPE_FLOAT32), *e2 = tp_ones(2, (int64_t[]){0, 3}, TP_DTYPE_FLOAT32);
    tp_tensor *z = tp_matmul(e1, e2);
    CHECK_SHAPE(z, SHAPE(2, 3));
    CHECK_VALUES(z, 0, {0, 0, 0, 0, 0, 0});
    tp_tensor *t[] = {a, b, v3, v4, s, bo, x, y, p, q, e1, e2, z};
    for (int k = 0; k < 13; k++) tp_tensor_release(t[k]);
}

static void test_any_layout_gives_the_contiguous_answer(void) {
    uint64_t seed = 4242;
    tp_dtype dts[4] = {TP_DTYPE_FLOAT32, TP_DTYPE_FLOAT64, TP_DTYPE_INT32, TP_DTYPE_FLOAT16};
    for (int iter = 0; iter < 120; iter++) {
        int na = 1 + (int)(test_rng(&seed) % 4), nb = 1 + (int)(test_rng(&seed) % 4);
        int64_t n = 1 + (int64_t)(test_rng(&seed) % 6), k = 1 + (int64_t)(test_rng(&seed) % 6);
        int64_t m = 1 + (int64_t)(test_rng(&seed) % 6);
        int64_t as[4], bs[4];
        /* batch dims: broadcastable (1 or the shared size) */
        int64_t batch[2] = {1 + (int64_t)(test_rng(&seed) % 3), 1 + (int64_t)(test_rng(&seed) % 3)};
        for (int d = 0; d < na - 2; d++) as[d] = test_rng(&seed) % 2 ? batch[d + 4 - na] : 1;
        for (int d = 0; d < nb - 2; d++) bs[d] = test_rng(&seed) % 2 ? batch[d + 4 - nb] : 1;
        if (na == 1) as[0] = k;
        else { as[na - 2] = n; as[na - 1] = k; }
        if (nb == 1) bs[0] = k;
        else { bs[nb - 2] = k; bs[nb - 1] = m; }
        tp_dtype dt = dts[test_rng(&seed) % 4];
        tp_tensor *a = random_view(&seed, na, as, dt), *b = random_view(&seed, nb, bs, dt);
        tp_tensor *ca = tp_contiguous(a), *cb = tp_contiguous(b);
        tp_tensor *r = tp_matmul(a, b), *rc = tp_matmul(ca, cb);
        double tol = dt == TP_DTYPE_FLOAT16 ? 1e-2 : dt == TP_DTYPE_FLOAT32 ? 1e-5 : 1e-12;
        bool ok = r && rc && tp_tensor_numel(r) == tp_tensor_numel(rc) &&
                  shape_is(r, tp_tensor_dim(rc), tp_tensor_sizes(rc));
        for (int64_t e = 0; ok && e < tp_tensor_numel(r); e++)
            ok = fabs(at(r, e) - at(rc, e)) <= tol * (1 + fabs(at(rc, e)));
        if (!ok) {
            fprintf(stderr, "  iteration %d: %d-d x %d-d dtype %d differs (%s)\n", iter, na, nb, dt, tp_last_error());
            check_failures++;
        }
        tp_tensor *t[] = {a, b, ca, cb, r, rc};
        for (int q = 0; q < 6; q++) tp_tensor_release(t[q]);
    }
}

int main(void) {
    RUN_TEST(test_mm_matches_reference_for_all_layouts);
    RUN_TEST(test_vector_cases_drop_the_vector_dim);
    RUN_TEST(test_batched_broadcast_and_fold);
    RUN_TEST(test_integer_and_half_matmul);
    RUN_TEST(test_matmul_errors);
    RUN_TEST(test_any_layout_gives_the_contiguous_answer);
    return CHECK_DONE();
}
