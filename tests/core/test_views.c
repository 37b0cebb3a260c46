/*
 * tests/core/test_views.c - zero-copy views with PyTorch's semantics and
 * error texts (src/core/views.c).
 */
#include "tensorplay/tensorplay.h"
#include "../check.h"
#include "tensor_helpers.h"

// ----------------------------------------------------------------------------
// sharing: storage, version counter, root base

static void test_view_shares_storage_and_version(void) {
    tp_tensor *x = make_tensor(2, SHAPE(3, 4), TP_DTYPE_FLOAT32);
    tp_tensor *v = tp_tensor_view(x, 1, SHAPE(12));
    CHECK(v != NULL);
    CHECK(tp_tensor_storage(v) == tp_tensor_storage(x));
    CHECK(tp_tensor_is_view(v));
    CHECK(tp_tensor_base(v) == x);
    tp_tensor_bump_version(v);
    CHECK_EQ(tp_tensor_version(x), 1);
    tp_tensor_bump_version(x);
    CHECK_EQ(tp_tensor_version(v), 2);
    ((float *)tp_tensor_data(v))[5] = 42.0f;
    CHECK(at_f32(x, SHAPE(1, 1)) == 42.0f);
    tp_tensor_release(v);
    tp_tensor_release(x);
}

static void test_slice_of_slice_matches_pytorch_geometry(void) {
    tp_tensor *x = make_tensor(2, SHAPE(3, 4), TP_DTYPE_FLOAT32);
    tp_tensor *a = tp_tensor_slice(x, 0, 1, INT64_MAX, 1); /* x[1:] */
    tp_tensor *v = tp_tensor_slice(a, 1, 1, INT64_MAX, 1); /* x[1:, 1:] */
    CHECK(shape_is(v, 2, SHAPE(2, 3), SHAPE(4, 1)));
    CHECK_EQ(tp_tensor_storage_offset(v), 5);
    CHECK((char *)tp_tensor_data(v) == (char *)tp_tensor_data(x) + 20);
    CHECK(tp_tensor_base(v) == x); /* the root, not a */
    tp_tensor *row = tp_tensor_select(v, 0, 0); /* x[1:, 1:][0] */
    CHECK(tp_tensor_base(row) == x);
    CHECK(at_f32(row, SHAPE(2)) == 7.0f);
    tp_tensor_release(row);
    tp_tensor_release(v);
    tp_tensor_release(a);
    tp_tensor_release(x);
}

static void test_view_keeps_its_base_alive(void) {
    tp_tensor *x = make_tensor(1, SHAPE(6), TP_DTYPE_FLOAT32);
    tp_tensor *v = tp_tensor_narrow(x, 0, 2, 3);
    CHECK_EQ(tp_tensor_use_count(x), 2);
    tp_tensor_release(x);
    CHECK(tp_tensor_base(v) == x);
    CHECK_EQ(tp_tensor_use_count(tp_tensor_base(v)), 1);
    CHECK(at_f32(v, SHAPE(0)) == 2.0f);
    tp_tensor_release(v);
}

static void test_detach_shares_version_but_is_not_a_view(void) {
    tp_tensor *x = make_tensor(2, SHAPE(2, 2), TP_DTYPE_FLOAT32);
    tp_tensor_set_requires_grad(x, true);
    tp_tensor *v = tp_tensor_slice(x, 0, 1, 2, 1);
    CHECK(tp_tensor_requires_grad(v));
    tp_tensor *d = tp_tensor_detach(v);
    CHECK(!tp_tensor_is_view(d));
    CHECK(tp_tensor_base(d) == NULL);
    CHECK(!tp_tensor_requires_grad(d));
    CHECK(tp_tensor_storage(d) == tp_tensor_storage(x));
    CHECK_EQ(tp_tensor_storage_offset(d), 2);
    tp_tensor_bump_version(d);
    CHECK_EQ(tp_tensor_version(x), 1);
    tp_tensor_release(d);
    tp_tensor_release(v);
    tp_tensor_release(x);
}

// ----------------------------------------------------------------------------
// view and reshape

static void test_view_infers_one_dimension(void) {
    tp_tensor *x = make_tensor(2, SHAPE(3, 4), TP_DTYPE_FLOAT32);
    tp_tensor *v = tp_tensor_view(x, 3, SHAPE(2, -1, 2));
    CHECK(shape_is(v, 3, SHAPE(2, 3, 2), SHAPE(6, 2, 1)));
    tp_tensor_release(v);
    CHECK(tp_tensor_view(x, 2, SHAPE(-1, -1)) == NULL);
    CHECK_STR(tp_last_error(), "only one dimension can be inferred");
    CHECK(tp_tensor_view(x, 2, SHAPE(5, -1)) == NULL);
    CHECK_STR(tp_last_error(), "shape '[5, -1]' is invalid for input of size 12");
    CHECK(tp_tensor_view(x, 2, SHAPE(5, 2)) == NULL);
    CHECK_STR(tp_last_error(), "shape '[5, 2]' is invalid for input of size 12");
    CHECK(tp_tensor_view(x, 2, SHAPE(-3, 4)) == NULL);
    CHECK_STR(tp_last_error(), "invalid shape dimension -3");
    tp_tensor_release(x);
    tp_tensor *e = make_tensor(2, SHAPE(0, 4), TP_DTYPE_FLOAT32);
    CHECK(tp_tensor_view(e, 2, SHAPE(0, -1)) == NULL);
    CHECK_STR(tp_last_error(),
              "cannot reshape tensor of 0 elements into shape [0, -1] because the unspecified "
              "dimension size -1 can be any value and is ambiguous");
    tp_tensor *e2 = tp_tensor_view(e, 3, SHAPE(2, 0, 2));
    CHECK(shape_is(e2, 3, SHAPE(2, 0, 2), NULL));
    tp_tensor_release(e2);
    tp_tensor_release(e);
}

static void test_view_works_on_non_contiguous_input_when_strides_allow(void) {
    tp_tensor *x = make_tensor(2, SHAPE(4, 6), TP_DTYPE_FLOAT32);
    tp_tensor *cols = tp_tensor_slice(x, 1, 0, 3, 1); /* x[:, :3]: sizes (4,3) strides (6,1) */
    CHECK(!tp_tensor_is_contiguous(cols));
    tp_tensor *split = tp_tensor_view(cols, 3, SHAPE(2, 2, 3)); /* splitting dim 0 is fine */
    CHECK(split != NULL);
    CHECK(shape_is(split, 3, SHAPE(2, 2, 3), SHAPE(12, 6, 1)));
    CHECK(at_f32(split, SHAPE(1, 1, 2)) == 20.0f);
    CHECK(tp_tensor_view(cols, 1, SHAPE(12)) == NULL); /* merging rows is not */
    CHECK_STR(tp_last_error(),
              "view size is not compatible with input tensor's size and stride (at least one "
              "dimension spans across two contiguous subspaces). Use .reshape(...) instead.");
    /* A transposed tensor can gain size-1 dims. */
    tp_tensor *t = tp_tensor_t(x);
    tp_tensor *t1 = tp_tensor_view(t, 3, SHAPE(6, 1, 4));
    CHECK(t1 != NULL);
    CHECK(at_f32(t1, SHAPE(5, 0, 3)) == at_f32(t, SHAPE(5, 3)));
    tp_tensor_release(t1);
    tp_tensor_release(t);
    tp_tensor_release(split);
    tp_tensor_release(cols);
    tp_tensor_release(x);
}

static void test_reshape_is_a_view_when_possible(void) {
    tp_tensor *x = make_tensor(2, SHAPE(3, 4), TP_DTYPE_FLOAT32);
    tp_tensor *r = tp_tensor_reshape(x, 2, SHAPE(4, 3));
    CHECK(r != NULL);
    CHECK(tp_tensor_is_view(r));
    CHECK(tp_tensor_storage(r) == tp_tensor_storage(x));
    tp_tensor_release(r);
    tp_tensor_release(x);
}

static void test_reshape_copies_when_strides_forbid_a_view(void) {
    tp_tensor *x = make_tensor(2, SHAPE(3, 4), TP_DTYPE_FLOAT32);
    tp_tensor_set_requires_grad(x, true);
    tp_tensor *t = tp_tensor_transpose(x, 0, 1); /* (4, 3) strides (1, 4) */
    tp_tensor_bump_version(x);
    tp_tensor *r = tp_tensor_reshape(t, 1, SHAPE(-1));
    CHECK(r != NULL);
    CHECK(!tp_tensor_is_view(r));
    CHECK(tp_tensor_storage(r) != tp_tensor_storage(x));
    CHECK(shape_is(r, 1, SHAPE(12), SHAPE(1)));
    CHECK_EQ(tp_tensor_version(r), 0); /* its own counter */
    CHECK(tp_tensor_requires_grad(r));
    /* row-major order of t = column-major order of x */
    static const float expect[12] = {0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11};
    for (int i = 0; i < 12; i++) CHECK(((float *)tp_tensor_data(r))[i] == expect[i]);
    tp_tensor_release(r);
    /* A copy from a sliced, offset view. */
    tp_tensor *s = tp_tensor_slice(x, 1, 1, 3, 1); /* x[:, 1:3]: (3, 2) strides (4, 1) */
    tp_tensor *rs = tp_tensor_reshape(s, 1, SHAPE(6));
    CHECK(!tp_tensor_is_view(rs));
    static const float expect_s[6] = {1, 2, 5, 6, 9, 10};
    for (int i = 0; i < 6; i++) CHECK(((float *)tp_tensor_data(rs))[i] == expect_s[i]);
    tp_tensor_release(rs);
    tp_tensor_release(s);
    /* x[:, 1::2] is evenly strided (4 = 2 * 2): reshape stays a view, stride 2. */
    tp_tensor *odd = tp_tensor_slice(x, 1, 1, 4, 2);
    tp_tensor *flat = tp_tensor_reshape(odd, 1, SHAPE(6));
    CHECK(tp_tensor_is_view(flat));
    CHECK(shape_is(flat, 1, SHAPE(6), SHAPE(2)));
    CHECK(at_f32(flat, SHAPE(5)) == 11.0f);
    tp_tensor_release(flat);
    tp_tensor_release(odd);
    tp_tensor_release(t);
    tp_tensor_release(x);
}

static void test_reshape_copy_of_3d_permutation_keeps_row_major_order(void) {
    tp_tensor *x = make_tensor(3, SHAPE(2, 3, 4), TP_DTYPE_FLOAT32);
    tp_tensor *p = tp_tensor_permute(x, 3, (const int[]){2, 0, 1}); /* (4, 2, 3) */
    tp_tensor *r = tp_tensor_reshape(p, 2, SHAPE(8, 3));
    CHECK(r != NULL && !tp_tensor_is_view(r));
    const float *flat = tp_tensor_data(r);
    int n = 0;
    for (int64_t i = 0; i < 4; i++)
        for (int64_t j = 0; j < 2; j++)
            for (int64_t k = 0; k < 3; k++, n++)
                CHECK(flat[n] == (float)(j * 12 + k * 4 + i)); /* p[i,j,k] = x[j,k,i] */
    CHECK_EQ(n, 24);
    tp_tensor_release(r);
    tp_tensor_release(p);
    tp_tensor_release(x);
}

// ----------------------------------------------------------------------------
// reordering dims

static void test_transpose_permute_and_t_swap_sizes_and_strides(void) {
    tp_tensor *x = make_tensor(3, SHAPE(2, 3, 4), TP_DTYPE_FLOAT32);
    tp_tensor *tr = tp_tensor_transpose(x, 0, -1);
    CHECK(shape_is(tr, 3, SHAPE(4, 3, 2), SHAPE(1, 4, 12)));
    CHECK(!tp_tensor_is_contiguous(tr));
    CHECK(tp_tensor_base(tr) == x);
    tp_tensor *p = tp_tensor_permute(x, 3, (const int[]){1, 2, 0});
    CHECK(shape_is(p, 3, SHAPE(3, 4, 2), SHAPE(4, 1, 12)));
    CHECK(at_f32(p, SHAPE(2, 3, 1)) == 12 + 8 + 3);
    CHECK(tp_tensor_permute(x, 2, (const int[]){1, 0}) == NULL);
    CHECK_STR(tp_last_error(), "number of dims don't match in permute");
    CHECK(tp_tensor_permute(x, 3, (const int[]){1, 1, 0}) == NULL);
    CHECK_STR(tp_last_error(), "repeated dim in permute");
    CHECK(tp_tensor_permute(x, 3, (const int[]){0, 1, 3}) == NULL);
    CHECK_STR(tp_last_error(), "Dimension out of range (expected to be in range of [-3, 2], but got 3)");
    CHECK(tp_tensor_t(x) == NULL);
    CHECK_STR(tp_last_error(), "t() expects a tensor with <= 2 dimensions, but self is 3D");
    tp_tensor *m = make_tensor(2, SHAPE(2, 5), TP_DTYPE_FLOAT32);
    tp_tensor *mt = tp_tensor_t(m);
    CHECK(shape_is(mt, 2, SHAPE(5, 2), SHAPE(1, 5)));
    tp_tensor *vec = make_tensor(1, SHAPE(5), TP_DTYPE_FLOAT32);
    tp_tensor *vt = tp_tensor_t(vec);
    CHECK(shape_is(vt, 1, SHAPE(5), SHAPE(1)));
    CHECK(tp_tensor_is_view(vt));
    tp_tensor_release(vt);
    tp_tensor_release(vec);
    tp_tensor_release(mt);
    tp_tensor_release(m);
    tp_tensor_release(p);
    tp_tensor_release(tr);
    tp_tensor_release(x);
}

static void test_dim_out_of_range_uses_pytorch_message(void) {
    tp_tensor *x = make_tensor(2, SHAPE(2, 3), TP_DTYPE_FLOAT32);
    CHECK(tp_tensor_transpose(x, 0, 2) == NULL);
    CHECK_EQ(tp_last_status(), TP_STATUS_OUT_OF_BOUNDS);
    CHECK_STR(tp_last_error(), "Dimension out of range (expected to be in range of [-2, 1], but got 2)");
    CHECK(tp_tensor_unsqueeze(x, 3) == NULL);
    CHECK_STR(tp_last_error(), "Dimension out of range (expected to be in range of [-3, 2], but got 3)");
    CHECK(tp_tensor_squeeze_dim(x, -3) == NULL);
    CHECK_STR(tp_last_error(), "Dimension out of range (expected to be in range of [-2, 1], but got -3)");
    tp_tensor_release(x);
}

// ----------------------------------------------------------------------------
// narrow, slice, select

static void test_narrow_moves_the_offset(void) {
    tp_tensor *x = make_tensor(2, SHAPE(6, 2), TP_DTYPE_FLOAT32);
    tp_tensor *n = tp_tensor_narrow(x, 0, 1, 3);
    CHECK(shape_is(n, 2, SHAPE(3, 2), SHAPE(2, 1)));
    CHECK_EQ(tp_tensor_storage_offset(n), 2);
    tp_tensor *neg = tp_tensor_narrow(x, 0, -2, 2); /* start counts from the end */
    CHECK_EQ(tp_tensor_storage_offset(neg), 8);
    tp_tensor *empty = tp_tensor_narrow(x, 0, 6, 0);
    CHECK(empty != NULL && tp_tensor_numel(empty) == 0);
    CHECK(tp_tensor_narrow(x, 0, 4, 3) == NULL);
    CHECK_EQ(tp_last_status(), TP_STATUS_OUT_OF_BOUNDS);
    CHECK_STR(tp_last_error(), "start (4) + length (3) exceeds dimension size (6).");
    CHECK(tp_tensor_narrow(x, 0, 7, 0) == NULL);
    CHECK_STR(tp_last_error(), "start out of range (expected to be in range of [-6, 6], but got 7)");
    CHECK(tp_tensor_narrow(x, 1, 0, -1) == NULL);
    CHECK_STR(tp_last_error(), "narrow(): length must be non-negative.");
    tp_tensor *s = make_tensor(0, NULL, TP_DTYPE_FLOAT32);
    CHECK(tp_tensor_narrow(s, 0, 0, 1) == NULL);
    CHECK_STR(tp_last_error(), "narrow() cannot be applied to a 0-dim tensor.");
    tp_tensor_release(s);
    tp_tensor_release(empty);
    tp_tensor_release(neg);
    tp_tensor_release(n);
    tp_tensor_release(x);
}

static void test_slice_clamps_like_python_and_steps(void) {
    tp_tensor *x = make_tensor(1, SHAPE(10), TP_DTYPE_FLOAT32);
    tp_tensor *a = tp_tensor_slice(x, 0, 1, 8, 3); /* x[1:8:3] = 1, 4, 7 */
    CHECK(shape_is(a, 1, SHAPE(3), SHAPE(3)));
    CHECK_EQ(tp_tensor_storage_offset(a), 1);
    CHECK(at_f32(a, SHAPE(2)) == 7.0f);
    tp_tensor *b = tp_tensor_slice(x, 0, -3, 100, 1); /* x[-3:100] = 7, 8, 9 */
    CHECK(shape_is(b, 1, SHAPE(3), SHAPE(1)));
    CHECK_EQ(tp_tensor_storage_offset(b), 7);
    tp_tensor *c = tp_tensor_slice(x, 0, -100, -8, 1); /* x[-100:-8] = 0, 1 */
    CHECK(shape_is(c, 1, SHAPE(2), NULL));
    tp_tensor *d = tp_tensor_slice(x, 0, 6, 2, 1); /* empty */
    CHECK(shape_is(d, 1, SHAPE(0), NULL));
    tp_tensor *e = tp_tensor_slice(x, 0, 0, INT64_MAX, INT64_MAX); /* x[::huge] = 0 */
    CHECK(shape_is(e, 1, SHAPE(1), NULL));
    tp_tensor *m = make_tensor(2, SHAPE(3, 4), TP_DTYPE_FLOAT32);
    tp_tensor *huge = tp_tensor_slice(m, 0, 1, INT64_MAX, INT64_MAX); /* m[1::huge] */
    CHECK(shape_is(huge, 2, SHAPE(1, 4), NULL));
    CHECK(at_f32(huge, SHAPE(0, 3)) == 7.0f);
    tp_tensor_release(huge);
    tp_tensor_release(m);
    CHECK(tp_tensor_slice(x, 0, 0, 5, 0) == NULL);
    CHECK_STR(tp_last_error(), "slice step must be positive");
    CHECK(tp_tensor_slice(x, 0, 0, 5, -1) == NULL);
    CHECK_STR(tp_last_error(), "slice step must be positive");
    tp_tensor_release(e);
    tp_tensor_release(d);
    tp_tensor_release(c);
    tp_tensor_release(b);
    tp_tensor_release(a);
    tp_tensor_release(x);
}

static void test_select_removes_a_dim(void) {
    tp_tensor *x = make_tensor(2, SHAPE(3, 4), TP_DTYPE_FLOAT32);
    tp_tensor *col = tp_tensor_select(x, 1, -1); /* x[:, -1] */
    CHECK(shape_is(col, 1, SHAPE(3), SHAPE(4)));
    CHECK_EQ(tp_tensor_storage_offset(col), 3);
    CHECK(at_f32(col, SHAPE(2)) == 11.0f);
    tp_tensor *one = tp_tensor_select(col, 0, 1);
    CHECK_EQ(tp_tensor_dim(one), 0);
    CHECK(*(float *)tp_tensor_data(one) == 7.0f);
    CHECK(tp_tensor_select(x, 0, 3) == NULL);
    CHECK_EQ(tp_last_status(), TP_STATUS_OUT_OF_BOUNDS);
    CHECK_STR(tp_last_error(), "select(): index 3 out of range for tensor of size [3, 4] at dimension 0");
    CHECK(tp_tensor_select(x, -1, -5) == NULL);
    CHECK_STR(tp_last_error(), "select(): index -5 out of range for tensor of size [3, 4] at dimension 1");
    CHECK(tp_tensor_select(one, 0, 0) == NULL);
    CHECK_STR(tp_last_error(), "select() cannot be applied to a 0-dim tensor.");
    tp_tensor_release(one);
    tp_tensor_release(col);
    tp_tensor_release(x);
}

// ----------------------------------------------------------------------------
// squeeze, unsqueeze, expand

static void test_squeeze_and_unsqueeze_follow_pytorch_strides(void) {
    tp_tensor *x = make_tensor(4, SHAPE(1, 3, 1, 2), TP_DTYPE_FLOAT32);
    tp_tensor *s = tp_tensor_squeeze(x);
    CHECK(shape_is(s, 2, SHAPE(3, 2), SHAPE(2, 1)));
    tp_tensor *s2 = tp_tensor_squeeze_dim(x, 2);
    CHECK(shape_is(s2, 3, SHAPE(1, 3, 2), SHAPE(6, 2, 1)));
    tp_tensor *same = tp_tensor_squeeze_dim(x, 1); /* size 3: unchanged, still a view */
    CHECK(shape_is(same, 4, SHAPE(1, 3, 1, 2), NULL));
    CHECK(tp_tensor_is_view(same));
    tp_tensor *u0 = tp_tensor_unsqueeze(s, 0);
    CHECK(shape_is(u0, 3, SHAPE(1, 3, 2), SHAPE(6, 2, 1)));
    tp_tensor *u1 = tp_tensor_unsqueeze(s, 1);
    CHECK(shape_is(u1, 3, SHAPE(3, 1, 2), SHAPE(2, 2, 1)));
    tp_tensor *ul = tp_tensor_unsqueeze(s, -1);
    CHECK(shape_is(ul, 3, SHAPE(3, 2, 1), SHAPE(2, 1, 1)));
    tp_tensor *eight = make_tensor(8, SHAPE(1, 1, 1, 1, 1, 1, 1, 1), TP_DTYPE_FLOAT32);
    CHECK(tp_tensor_unsqueeze(eight, 0) == NULL);
    CHECK_STR(tp_last_error(), "tensors have between 0 and 8 dimensions, got 9");
    tp_tensor_release(eight);
    tp_tensor_release(ul);
    tp_tensor_release(u1);
    tp_tensor_release(u0);
    tp_tensor_release(same);
    tp_tensor_release(s2);
    tp_tensor_release(s);
    tp_tensor_release(x);
}

static void test_expand_broadcasts_with_zero_strides(void) {
    tp_tensor *x = make_tensor(2, SHAPE(3, 1), TP_DTYPE_FLOAT32);
    tp_tensor *e = tp_tensor_expand(x, 3, SHAPE(2, 3, 4));
    CHECK(shape_is(e, 3, SHAPE(2, 3, 4), SHAPE(0, 1, 0)));
    CHECK(at_f32(e, SHAPE(1, 2, 3)) == 2.0f);
    CHECK(tp_tensor_base(e) == x);
    tp_tensor *keep = tp_tensor_expand(x, 2, SHAPE(-1, 5));
    CHECK(shape_is(keep, 2, SHAPE(3, 5), SHAPE(1, 0)));
    tp_tensor *lead1 = tp_tensor_expand(x, 3, SHAPE(1, 3, 1)); /* new size-1 dim keeps a stride */
    CHECK(shape_is(lead1, 3, SHAPE(1, 3, 1), SHAPE(3, 1, 1)));
    tp_tensor *y = make_tensor(2, SHAPE(2, 3), TP_DTYPE_FLOAT32);
    CHECK(tp_tensor_expand(y, 2, SHAPE(2, 4)) == NULL);
    CHECK_STR(tp_last_error(),
              "The expanded size of the tensor (4) must match the existing size (3) at "
              "non-singleton dimension 1.  Target sizes: [2, 4].  Tensor sizes: [2, 3]");
    CHECK(tp_tensor_expand(y, 1, SHAPE(3)) == NULL);
    CHECK_STR(tp_last_error(),
              "expand(torch.FloatTensor{[2, 3]}, size=[3]): the number of sizes provided (1) "
              "must be greater or equal to the number of dimensions in the tensor (2)");
    CHECK(tp_tensor_expand(y, 3, SHAPE(-1, 2, 3)) == NULL);
    CHECK_STR(tp_last_error(),
              "The expanded size of the tensor (-1) isn't allowed in a leading, non-existing "
              "dimension 0");
    tp_tensor_release(y);
    tp_tensor_release(lead1);
    tp_tensor_release(keep);
    tp_tensor_release(e);
    tp_tensor_release(x);
}

// ----------------------------------------------------------------------------
// as_strided

static void test_as_strided_allows_overlap_but_not_overrun(void) {
    tp_tensor *x = make_tensor(1, SHAPE(6), TP_DTYPE_FLOAT32); /* 24 bytes */
    tp_tensor *win = tp_tensor_as_strided(x, 2, SHAPE(4, 3), SHAPE(1, 1), 0); /* sliding windows */
    CHECK(win != NULL);
    CHECK(at_f32(win, SHAPE(3, 2)) == 5.0f);
    CHECK(tp_tensor_base(win) == x);
    tp_tensor *off = tp_tensor_as_strided(win, 1, SHAPE(2), SHAPE(2), 3);
    CHECK(off != NULL && tp_tensor_base(off) == x);
    CHECK(at_f32(off, SHAPE(1)) == 5.0f);
    CHECK(tp_tensor_as_strided(x, 2, SHAPE(3, 3), SHAPE(3, 1), 0) == NULL);
    CHECK_EQ(tp_last_status(), TP_STATUS_OUT_OF_BOUNDS);
    CHECK_STR(tp_last_error(),
              "setStorage: sizes [3, 3], strides [3, 1], storage offset 0, and itemsize 4 "
              "requiring a storage size of 36 are out of bounds for storage of size 24");
    tp_tensor_release(off);
    tp_tensor_release(win);
    tp_tensor_release(x);
}

static void test_bad_shape_arguments_are_errors(void) {
    tp_tensor *x = make_tensor(1, SHAPE(4), TP_DTYPE_FLOAT32);
    int64_t nine[9] = {1, 1, 1, 1, 1, 1, 1, 1, 4};
    CHECK(tp_tensor_view(x, 9, nine) == NULL);
    CHECK_STR(tp_last_error(), "tensors have between 0 and 8 dimensions, got 9");
    CHECK(tp_tensor_reshape(x, 2, NULL) == NULL);
    CHECK_STR(tp_last_error(), "sizes is NULL for a 2-dim shape");
    CHECK(tp_tensor_expand(x, 9, nine) == NULL);
    CHECK_STR(tp_last_error(), "tensors have between 0 and 8 dimensions, got 9");
    CHECK(tp_tensor_expand(x, 2, SHAPE(-2, 4)) == NULL);
    CHECK_STR(tp_last_error(), "Trying to create tensor with negative dimension -2: [-2, 4]");
    CHECK(tp_tensor_as_strided(x, 1, SHAPE(2), NULL, 0) == NULL);
    CHECK_STR(tp_last_error(), "as_strided: strides is NULL");
    CHECK(tp_tensor_as_strided(x, 1, SHAPE(2), SHAPE(-1), 0) == NULL);
    CHECK_STR(tp_last_error(),
              "as_strided: Negative strides are not supported at the moment, got strides: [-1]");
    CHECK(tp_tensor_as_strided(x, 1, SHAPE(2), SHAPE(1), -1) == NULL);
    CHECK_STR(tp_last_error(), "Tensor: invalid storage offset -1");
    CHECK(tp_tensor_permute(x, 1, NULL) == NULL);
    CHECK_STR(tp_last_error(), "number of dims don't match in permute");
    tp_tensor *s = make_tensor(0, NULL, TP_DTYPE_FLOAT32);
    CHECK(tp_tensor_slice(s, 0, 0, 1, 1) == NULL);
    CHECK_STR(tp_last_error(), "slice() cannot be applied to a 0-dim tensor.");
    /* 0-dim tensors accept dims 0 and -1 where PyTorch does. */
    tp_tensor *st = tp_tensor_transpose(s, 0, -1);
    CHECK(st != NULL && tp_tensor_dim(st) == 0);
    tp_tensor *su = tp_tensor_unsqueeze(s, -1);
    CHECK(shape_is(su, 1, SHAPE(1), SHAPE(1)));
    tp_tensor *sq = tp_tensor_squeeze_dim(s, 0);
    CHECK(sq != NULL && tp_tensor_dim(sq) == 0);
    tp_tensor_release(sq);
    tp_tensor_release(su);
    tp_tensor_release(st);
    tp_tensor_release(s);
    tp_tensor_release(x);
}

static void test_null_tensor_arguments_are_errors(void) {
    CHECK(tp_tensor_view(NULL, 1, SHAPE(1)) == NULL);
    CHECK_STR(tp_last_error(), "view: tensor is NULL");
    CHECK(tp_tensor_detach(NULL) == NULL);
    CHECK_STR(tp_last_error(), "detach: tensor is NULL");
    CHECK(tp_tensor_expand(NULL, 1, SHAPE(1)) == NULL);
    CHECK_EQ(tp_last_status(), TP_STATUS_INVALID_ARGUMENT);
}

int main(void) {
    RUN_TEST(test_view_shares_storage_and_version);
    RUN_TEST(test_slice_of_slice_matches_pytorch_geometry);
    RUN_TEST(test_view_keeps_its_base_alive);
    RUN_TEST(test_detach_shares_version_but_is_not_a_view);
    RUN_TEST(test_view_infers_one_dimension);
    RUN_TEST(test_view_works_on_non_contiguous_input_when_strides_allow);
    RUN_TEST(test_reshape_is_a_view_when_possible);
    RUN_TEST(test_reshape_copies_when_strides_forbid_a_view);
    RUN_TEST(test_reshape_copy_of_3d_permutation_keeps_row_major_order);
    RUN_TEST(test_transpose_permute_and_t_swap_sizes_and_strides);
    RUN_TEST(test_dim_out_of_range_uses_pytorch_message);
    RUN_TEST(test_narrow_moves_the_offset);
    RUN_TEST(test_slice_clamps_like_python_and_steps);
    RUN_TEST(test_select_removes_a_dim);
    RUN_TEST(test_squeeze_and_unsqueeze_follow_pytorch_strides);
    RUN_TEST(test_expand_broadcasts_with_zero_strides);
    RUN_TEST(test_as_strided_allows_overlap_but_not_overrun);
    RUN_TEST(test_bad_shape_arguments_are_errors);
    RUN_TEST(test_null_tensor_arguments_are_errors);
    return CHECK_DONE();
}
