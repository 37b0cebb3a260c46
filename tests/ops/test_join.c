/*
 * tests/ops/test_join.c - cat, stack, index_select: values on strided
 * inputs, new storage that never sees later writes, dtype promotion, and
 * every shape/bounds error with its message.
 */
#include "check.h"

static void test_cat_along_each_dim_with_strided_inputs(void) {
    tp_tensor *a = MAKE(TP_DTYPE_FLOAT32, SHAPE(2, 2), {1, 2, 3, 4});
    tp_tensor *b = MAKE(TP_DTYPE_FLOAT32, SHAPE(2, 2), {5, 6, 7, 8});
    tp_tensor *bt = tp_tensor_t(b);
    tp_tensor *c0 = tp_cat(2, (tp_tensor *[]){a, bt}, 0), *c1 = tp_cat(2, (tp_tensor *[]){a, bt}, -1);
    CHECK_SHAPE(c0, SHAPE(4, 2));
    CHECK_VALUES(c0, 0, {1, 2, 3, 4, 5, 7, 6, 8});
    CHECK_SHAPE(c1, SHAPE(2, 4));
    CHECK_VALUES(c1, 0, {1, 2, 5, 7, 3, 4, 6, 8});
    tp_tensor *t[] = {a, b, bt, c0, c1};
    for (int k = 0; k < 5; k++) tp_tensor_release(t[k]);
}

static void test_cat_is_new_storage_and_ignores_later_writes(void) {
    tp_tensor *a = tp_ones(1, (int64_t[]){3}, TP_DTYPE_INT64);
    tp_tensor *c = tp_cat(1, (tp_tensor *[]){a}, 0);
    CHECK(tp_tensor_storage(c) != tp_tensor_storage(a));
    tp_fill_(a, 9);
    CHECK_VALUES(c, 0, {1, 1, 1});
    CHECK_EQ(tp_tensor_version(c), 0);
    tp_tensor_release(a);
    tp_tensor_release(c);
}

static void test_cat_promotes_and_skips_legacy_empty(void) {
    tp_tensor *i = MAKE(TP_DTYPE_INT32, SHAPE(2), {1, 2});
    tp_tensor *f = MAKE(TP_DTYPE_FLOAT64, SHAPE(1), {0.5});
    tp_tensor *e = tp_empty(1, (int64_t[]){0}, TP_DTYPE_FLOAT32);
    tp_tensor *c = tp_cat(3, (tp_tensor *[]){i, e, f}, 0);
    CHECK_EQ(tp_tensor_dtype(c), TP_DTYPE_FLOAT64);
    CHECK_VALUES(c, 0, {1, 2, 0.5});
    tp_tensor *m = tp_zeros(2, (int64_t[]){1, 2}, TP_DTYPE_FLOAT32);
    tp_tensor *c2 = tp_cat(2, (tp_tensor *[]){e, m}, 0);
    CHECK_SHAPE(c2, SHAPE(1, 2));
    tp_tensor *t[] = {i, f, e, c, m, c2};
    for (int k = 0; k < 6; k++) tp_tensor_release(t[k]);
}

static void test_cat_errors(void) {
    tp_tensor *a = tp_zeros(2, (int64_t[]){2, 3}, TP_DTYPE_FLOAT32);
    tp_tensor *b = tp_zeros(2, (int64_t[]){2, 4}, TP_DTYPE_FLOAT32);
    tp_tensor *c = tp_zeros(3, (int64_t[]){2, 3, 1}, TP_DTYPE_FLOAT32);
    tp_tensor *s = tp_zeros(0, NULL, TP_DTYPE_FLOAT32);
    CHECK_ERROR(fails(tp_cat(2, (tp_tensor *[]){a, b}, 0)),
                "Sizes of tensors must match except in dimension 0. Expected size 3 but got size 4 for tensor number 1 in the list.");
    CHECK_ERROR(fails(tp_cat(2, (tp_tensor *[]){a, c}, 0)), "Tensors must have same number of dimensions: got 2 and 3");
    CHECK_ERROR(fails(tp_cat(2, (tp_tensor *[]){a, s}, 0)), "zero-dimensional tensor (at position 1) cannot be concatenated");
    CHECK_ERROR(fails(tp_cat(0, NULL, 0)), "expected a non-empty list of Tensors");
    CHECK_ERROR(fails(tp_cat(1, (tp_tensor *[]){a}, 2)), "Dimension out of range");
    tp_tensor *t[] = {a, b, c, s};
    for (int k = 0; k < 4; k++) tp_tensor_release(t[k]);
}

static void test_stack_inserts_a_dim(void) {
    tp_tensor *a = MAKE(TP_DTYPE_INT16, SHAPE(2), {1, 2});
    tp_tensor *b = MAKE(TP_DTYPE_INT16, SHAPE(2), {3, 4});
    tp_tensor *s0 = tp_stack(2, (tp_tensor *[]){a, b}, 0), *s1 = tp_stack(2, (tp_tensor *[]){a, b}, -1);
    CHECK_SHAPE(s0, SHAPE(2, 2));
    CHECK_VALUES(s0, 0, {1, 2, 3, 4});
    CHECK_SHAPE(s1, SHAPE(2, 2));
    CHECK_VALUES(s1, 0, {1, 3, 2, 4});
    CHECK(tp_tensor_storage(s0) != tp_tensor_storage(a));
    tp_tensor *c = MAKE(TP_DTYPE_INT16, SHAPE(3), {1, 2, 3});
    CHECK_ERROR(fails(tp_stack(2, (tp_tensor *[]){a, c}, 0)),
                "stack expects each tensor to be equal size, but got [2] at entry 0 and [3] at entry 1");
    CHECK_ERROR(fails(tp_stack(0, NULL, 0)), "stack expects a non-empty TensorList");
    tp_tensor *t[] = {a, b, s0, s1, c};
    for (int k = 0; k < 5; k++) tp_tensor_release(t[k]);
}

static void test_index_select_gathers_and_checks_bounds(void) {
    tp_tensor *base = tp_arange(0, 12, 1, TP_DTYPE_FLOAT32);
    tp_tensor *m = tp_tensor_view(base, 2, (int64_t[]){3, 4});
    tp_tensor *mt = tp_tensor_t(m); /* 4x3 */
    tp_tensor *i64 = MAKE(TP_DTYPE_INT64, SHAPE(3), {2, 0, 2});
    tp_tensor *i32 = MAKE(TP_DTYPE_INT32, SHAPE(2), {3, 1});
    tp_tensor *r0 = tp_index_select(m, 0, i64), *r1 = tp_index_select(mt, 0, i32);
    tp_tensor *r2 = tp_index_select(m, 1, i32);
    CHECK_SHAPE(r0, SHAPE(3, 4));
    CHECK_VALUES(r0, 0, {8, 9, 10, 11, 0, 1, 2, 3, 8, 9, 10, 11});
    CHECK_VALUES(r1, 0, {3, 7, 11, 1, 5, 9});
    CHECK_VALUES(r2, 0, {3, 1, 7, 5, 11, 9});
    CHECK(tp_tensor_storage(r0) != tp_tensor_storage(base));
    tp_tensor *bad = MAKE(TP_DTYPE_INT64, SHAPE(2), {0, 3});
    CHECK_ERROR(fails(tp_index_select(m, 0, bad)), "index out of range in self");
    tp_tensor *neg = MAKE(TP_DTYPE_INT64, SHAPE(1), {-1});
    CHECK_ERROR(fails(tp_index_select(m, 0, neg)), "index -1 is out of bounds for dimension 0 with size 3");
    tp_tensor *fl = MAKE(TP_DTYPE_FLOAT32, SHAPE(1), {0});
    CHECK_ERROR(fails(tp_index_select(m, 0, fl)), "Expected dtype int32 or int64 for index");
    CHECK_ERROR(fails(tp_index_select(m, 0, m)), "Index is supposed to be a vector");
    tp_tensor *t[] = {base, m, mt, i64, i32, r0, r1, r2, bad, neg, fl};
    for (int k = 0; k < 11; k++) tp_tensor_release(t[k]);
}

static void test_allocation_failure_in_join_and_matmul_paths(void) {
    tp_tensor *a = tp_ones(2, (int64_t[]){20, 20}, TP_DTYPE_FLOAT32);
    tp_tensor *i = tp_zeros(1, (int64_t[]){20}, TP_DTYPE_INT64);
    limit_begin(1024);
    CHECK_ERROR(fails(tp_cat(2, (tp_tensor *[]){a, a}, 0)), "failed to allocate");
    CHECK_ERROR(fails(tp_stack(2, (tp_tensor *[]){a, a}, 0)), "failed to allocate");
    CHECK_ERROR(fails(tp_index_select(a, 1, i)), "failed to allocate");
    CHECK_ERROR(fails(tp_matmul(a, a)), "failed to allocate");
    tp_tensor *s = tp_sum(a, 1, (int[]){1}, false); /* 80 bytes: fits */
    CHECK(s != NULL);
    tp_tensor_release(s);
    limit_end();
    tp_tensor_release(i);
    tp_tensor_release(a);
}

int main(void) {
    RUN_TEST(test_cat_along_each_dim_with_strided_inputs);
    RUN_TEST(test_cat_is_new_storage_and_ignores_later_writes);
    RUN_TEST(test_cat_promotes_and_skips_legacy_empty);
    RUN_TEST(test_cat_errors);
    RUN_TEST(test_stack_inserts_a_dim);
    RUN_TEST(test_index_select_gathers_and_checks_bounds);
    RUN_TEST(test_allocation_failure_in_join_and_matmul_paths);
    return CHECK_DONE();
}
