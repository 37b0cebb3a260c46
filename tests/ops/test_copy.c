/*
 * tests/ops/test_copy.c - copy_, clone, contiguous, to_dtype, get/item,
 * fill_: strided and broadcast sources, dtype conversion, overlap rules,
 * storage identity and version counting.
 */
#include "check.h"

static void test_copy_broadcasts_and_converts_into_strided_dst(void) {
    tp_tensor *dst = tp_zeros(2, (int64_t[]){3, 2}, TP_DTYPE_INT32);
    tp_tensor *dt = tp_tensor_t(dst); /* 2x3 view, strides (1, 2) */
    tp_tensor *row = MAKE(TP_DTYPE_FLOAT64, SHAPE(3), {1.9, -2.5, 3});
    CHECK_EQ(tp_copy_(dt, row), TP_STATUS_OK);
    /* float -> int truncates toward zero; dst seen through its own layout */
    CHECK_VALUES(dst, 0, {1, 1, -2, -2, 3, 3});
    CHECK_EQ(tp_tensor_version(dst), 1); /* the view shares the counter */
    CHECK_EQ(tp_tensor_version(dt), 1);
    tp_tensor_release(dt);
    tp_tensor_release(dst);
    tp_tensor_release(row);
}

static void test_copy_from_sliced_offset_source(void) {
    tp_tensor *a = tp_arange(0, 12, 1, TP_DTYPE_FLOAT32);
    tp_tensor *m = tp_tensor_view(a, 2, (int64_t[]){3, 4});
    tp_tensor *s = tp_tensor_slice(m, 1, 1, 4, 2); /* columns 1, 3: offset 1, stride 2 */
    tp_tensor *dst = tp_empty(2, (int64_t[]){3, 2}, TP_DTYPE_FLOAT16);
    CHECK_EQ(tp_copy_(dst, s), TP_STATUS_OK);
    CHECK_VALUES(dst, 0, {1, 3, 5, 7, 9, 11});
    tp_tensor_release(dst);
    tp_tensor_release(s);
    tp_tensor_release(m);
    tp_tensor_release(a);
}

static void test_copy_rejects_shape_mismatch_and_overlapping_dst(void) {
    tp_tensor *a = tp_zeros(1, (int64_t[]){2}, TP_DTYPE_FLOAT32);
    tp_tensor *b = tp_zeros(1, (int64_t[]){3}, TP_DTYPE_FLOAT32);
    CHECK_ERROR(tp_copy_(a, b) != TP_STATUS_OK,
                "The size of tensor a (2) must match the size of tensor b (3) at non-singleton dimension 0");
    tp_tensor *c = tp_zeros(2, (int64_t[]){1, 2}, TP_DTYPE_FLOAT32);
    CHECK_ERROR(tp_copy_(a, c) != TP_STATUS_OK, "output with shape [2] doesn't match the broadcast shape [1, 2]");
    tp_tensor *e = tp_tensor_expand(a, 2, (int64_t[]){3, 2});
    tp_tensor *src = tp_ones(2, (int64_t[]){3, 2}, TP_DTYPE_FLOAT32);
    CHECK_ERROR(tp_copy_(e, src) != TP_STATUS_OK, "more than one element of the written-to tensor");
    CHECK_EQ(tp_tensor_version(a), 0); /* failures leave the target untouched */
    CHECK_VALUES(a, 0, {0, 0});
    tp_tensor_release(a);
    tp_tensor_release(b);
    tp_tensor_release(c);
    tp_tensor_release(e);
    tp_tensor_release(src);
}

static void test_copy_between_overlapping_views_reads_before_writing(void) {
    tp_tensor *a = tp_arange(0, 5, 1, TP_DTYPE_INT64);
    tp_tensor *lo = tp_tensor_narrow(a, 0, 0, 4), *hi = tp_tensor_narrow(a, 0, 1, 4);
    CHECK_EQ(tp_copy_(hi, lo), TP_STATUS_OK); /* a[1:] = a[:4] */
    CHECK_VALUES(a, 0, {0, 0, 1, 2, 3});
    tp_tensor_release(lo);
    tp_tensor_release(hi);
    tp_tensor_release(a);
}

static void test_clone_makes_new_storage_at_version_zero(void) {
    tp_tensor *a = tp_arange(0, 6, 1, TP_DTYPE_FLOAT32);
    tp_fill_(a, 2);
    tp_tensor *v = tp_tensor_view(a, 2, (int64_t[]){2, 3});
    tp_tensor *t = tp_tensor_t(v);
    tp_tensor *c = tp_clone(t);
    CHECK(tp_tensor_storage(c) != tp_tensor_storage(a));
    CHECK(tp_tensor_is_contiguous(c));
    CHECK_EQ(tp_tensor_version(c), 0);
    CHECK(!tp_tensor_is_view(c));
    tp_fill_(a, 7);
    CHECK_VALUES(c, 0, {2, 2, 2, 2, 2, 2});
    tp_tensor_release(c);
    tp_tensor_release(t);
    tp_tensor_release(v);
    tp_tensor_release(a);
}

static void test_contiguous_returns_same_tensor_only_when_contiguous(void) {
    tp_tensor *a = tp_arange(0, 6, 1, TP_DTYPE_FLOAT64);
    tp_tensor *m = tp_tensor_view(a, 2, (int64_t[]){2, 3});
    tp_tensor *same = tp_contiguous(m);
    CHECK(same == m);
    CHECK_EQ(tp_tensor_use_count(m), 2);
    tp_tensor *t = tp_tensor_t(m);
    tp_tensor *c = tp_contiguous(t);
    CHECK(c != t && tp_tensor_is_contiguous(c));
    CHECK_VALUES(c, 0, {0, 3, 1, 4, 2, 5});
    tp_tensor_release(c);
    tp_tensor_release(t);
    tp_tensor_release(same);
    tp_tensor_release(m);
    tp_tensor_release(a);
}

static void test_to_dtype_same_is_identity_else_new_storage(void) {
    tp_tensor *a = MAKE(TP_DTYPE_FLOAT32, SHAPE(4), {-1.5, 0.5, 2.7, 300});
    tp_tensor *same = tp_to_dtype(a, TP_DTYPE_FLOAT32);
    CHECK(same == a);
    tp_tensor *i = tp_to_dtype(a, TP_DTYPE_INT8);
    CHECK(tp_tensor_storage(i) != tp_tensor_storage(a));
    CHECK_VALUES(i, 0, {-1, 0, 2, 44}); /* 300 wraps in int8 */
    tp_tensor *u = tp_to_dtype(a, TP_DTYPE_UINT8);
    CHECK_VALUES(u, 0, {255, 0, 2, 44});
    tp_tensor *b = tp_to_dtype(a, TP_DTYPE_BOOL);
    CHECK_VALUES(b, 0, {1, 1, 1, 1});
    tp_tensor *h = tp_to_dtype(a, TP_DTYPE_BFLOAT16);
    CHECK_VALUES(h, 0, {-1.5, 0.5, 2.703125, 300});
    /* int64 -> int64 through other integers stays exact beyond 2^53 */
    int64_t big[2] = {(INT64_C(1) << 60) + 1, -7};
    tp_tensor *bl = tp_from_blob(big, 1, (int64_t[]){2}, NULL, TP_DTYPE_INT64, NULL, NULL);
    tp_tensor *bc = tp_clone(bl);
    CHECK(((int64_t *)tp_tensor_data(bc))[0] == (INT64_C(1) << 60) + 1);
    CHECK_ERROR(fails(tp_to_dtype(a, (tp_dtype)42)), "invalid dtype");
    tp_tensor_release(bc);
    tp_tensor_release(bl);
    tp_tensor_release(h);
    tp_tensor_release(b);
    tp_tensor_release(u);
    tp_tensor_release(i);
    tp_tensor_release(same);
    tp_tensor_release(a);
}

static void test_get_and_item_check_bounds(void) {
    tp_tensor *a = tp_arange(0, 6, 1, TP_DTYPE_INT16);
    tp_tensor *m = tp_tensor_view(a, 2, (int64_t[]){2, 3});
    double v = 0;
    CHECK_EQ(tp_tensor_get(m, (int64_t[]){1, -1}, &v), TP_STATUS_OK);
    CHECK_EQ(v, 5);
    CHECK_ERROR(tp_tensor_get(m, (int64_t[]){2, 0}, &v) != TP_STATUS_OK,
                "index 2 is out of bounds for dimension 0 with size 2");
    CHECK_ERROR(tp_tensor_item(m, &v) != TP_STATUS_OK, "a Tensor with 6 elements cannot be converted to Scalar");
    tp_tensor *one = tp_tensor_select(m, 1, 2);
    tp_tensor *s = tp_tensor_select(one, 0, 1);
    CHECK_EQ(tp_tensor_item(s, &v), TP_STATUS_OK);
    CHECK_EQ(v, 5);
    tp_tensor_release(s);
    tp_tensor_release(one);
    tp_tensor_release(m);
    tp_tensor_release(a);
}

static void test_fill_writes_through_views_and_bumps_once(void) {
    tp_tensor *a = tp_zeros(2, (int64_t[]){3, 4}, TP_DTYPE_FLOAT32);
    tp_tensor *col = tp_tensor_select(a, 1, 2);
    CHECK_EQ(tp_fill_(col, 9), TP_STATUS_OK);
    CHECK_EQ(tp_tensor_version(a), 1);
    CHECK_VALUES(a, 0, {0, 0, 9, 0, 0, 0, 9, 0, 0, 0, 9, 0});
    tp_tensor *row = tp_tensor_select(a, 0, 0);
    tp_tensor *e = tp_tensor_expand(row, 2, (int64_t[]){5, 4});
    CHECK_ERROR(tp_fill_(e, 1) != TP_STATUS_OK, "more than one element of the written-to tensor");
    CHECK_EQ(tp_tensor_version(a), 1);
    tp_tensor_release(e);
    tp_tensor_release(row);
    tp_tensor_release(col);
    tp_tensor_release(a);
}

static void test_contiguous_of_large_transpose(void) {
    int saved = tp_get_num_threads();
    tp_set_num_threads(4);
    tp_tensor *a = tp_arange(0, 600 * 700, 1, TP_DTYPE_INT32);
    tp_tensor *m = tp_tensor_view(a, 2, (int64_t[]){600, 700});
    tp_tensor *t = tp_tensor_t(m);
    tp_tensor *c = tp_contiguous(t);
    const int32_t *d = tp_tensor_data(c);
    int bad = 0;
    for (int i = 0; i < 700; i++)
        for (int j = 0; j < 600; j++) bad += d[i * 600 + j] != j * 700 + i;
    CHECK_EQ(bad, 0);
    tp_set_num_threads(saved);
    tp_tensor_release(c);
    tp_tensor_release(t);
    tp_tensor_release(m);
    tp_tensor_release(a);
}

int main(void) {
    RUN_TEST(test_copy_broadcasts_and_converts_into_strided_dst);
    RUN_TEST(test_copy_from_sliced_offset_source);
    RUN_TEST(test_copy_rejects_shape_mismatch_and_overlapping_dst);
    RUN_TEST(test_copy_between_overlapping_views_reads_before_writing);
    RUN_TEST(test_clone_makes_new_storage_at_version_zero);
    RUN_TEST(test_contiguous_returns_same_tensor_only_when_contiguous);
    RUN_TEST(test_to_dtype_same_is_identity_else_new_storage);
    RUN_TEST(test_get_and_item_check_bounds);
    RUN_TEST(test_fill_writes_through_views_and_bumps_once);
    RUN_TEST(test_contiguous_of_large_transpose);
    return CHECK_DONE();
}
