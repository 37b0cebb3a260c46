/*
 * tests/core/test_tensor.c - TensorImpl construction, bounds checks,
 * lifetime, fields, the version counter and the autograd slots
 * (src/core/tensor.c).  The adopting constructor the runtime's creators use
 * is internal (src/core/internal.h).
 */
#include <stdlib.h>

#include "tensorplay/tensorplay.h"
#include "../../src/core/internal.h"
#include "../check.h"
#include "tensor_helpers.h"

// ----------------------------------------------------------------------------
// construction

static void test_new_tensor_is_contiguous_over_its_storage(void) {
    tp_storage *s = tp_storage_new(48, NULL, false);
    tp_tensor *t = tp_tensor_new_from_storage(s, 0, 2, SHAPE(3, 4), NULL, TP_DTYPE_FLOAT32);
    CHECK(t != NULL);
    CHECK(shape_is(t, 2, SHAPE(3, 4), SHAPE(4, 1)));
    CHECK_EQ(tp_tensor_numel(t), 12);
    CHECK_EQ(tp_tensor_itemsize(t), 4);
    CHECK_EQ(tp_tensor_nbytes(t), 48);
    CHECK_EQ(tp_tensor_dtype(t), TP_DTYPE_FLOAT32);
    CHECK_EQ(tp_tensor_device(t).type, TP_DEVICE_TYPE_CPU);
    CHECK(tp_tensor_storage(t) == s);
    CHECK(tp_tensor_data(t) == tp_storage_data(s));
    CHECK(tp_tensor_is_contiguous(t));
    CHECK(!tp_tensor_is_view(t));
    CHECK(tp_tensor_base(t) == NULL);
    CHECK_EQ(tp_storage_use_count(s), 2); /* ours + the tensor's */
    CHECK(tp_tensor_id(t) != 0 && tp_tensor_id(t) != tp_storage_id(s));
    tp_tensor_release(t);
    CHECK_EQ(tp_storage_use_count(s), 1);
    tp_storage_release(s);
}

static void test_data_pointer_includes_offset_times_itemsize(void) {
    tp_storage *s = tp_storage_new(80, NULL, false);
    tp_tensor *t = tp_tensor_new_from_storage(s, 3, 1, SHAPE(4), NULL, TP_DTYPE_FLOAT64);
    CHECK_EQ(tp_tensor_storage_offset(t), 3);
    CHECK(tp_tensor_data(t) == (char *)tp_storage_data(s) + 24);
    tp_tensor_release(t);
    tp_storage_release(s);
}

static void test_geometry_past_the_storage_is_out_of_bounds(void) {
    tp_storage *s = tp_storage_new(24, NULL, false);
    CHECK(tp_tensor_new_from_storage(s, 0, 2, SHAPE(3, 3), SHAPE(3, 1), TP_DTYPE_FLOAT32) == NULL);
    CHECK_EQ(tp_last_status(), TP_STATUS_OUT_OF_BOUNDS);
    CHECK_STR(tp_last_error(),
              "setStorage: sizes [3, 3], strides [3, 1], storage offset 0, and itemsize 4 "
              "requiring a storage size of 36 are out of bounds for storage of size 24");
    /* The offset counts too: 5 floats from offset 2 need 28 bytes. */
    CHECK(tp_tensor_new_from_storage(s, 2, 1, SHAPE(5), NULL, TP_DTYPE_FLOAT32) == NULL);
    CHECK_STR(tp_last_error(),
              "setStorage: sizes [5], strides [1], storage offset 2, and itemsize 4 requiring a "
              "storage size of 28 are out of bounds for storage of size 24");
    /* Exactly filling the storage is fine. */
    tp_tensor *t = tp_tensor_new_from_storage(s, 2, 1, SHAPE(4), NULL, TP_DTYPE_FLOAT32);
    CHECK(t != NULL);
    tp_tensor_release(t);
    CHECK_EQ(tp_storage_use_count(s), 1); /* failed calls kept no reference */
    tp_storage_release(s);
}

static void test_zero_element_tensor_needs_no_storage_bytes(void) {
    tp_storage *s = tp_storage_new(0, NULL, false);
    tp_tensor *t = tp_tensor_new_from_storage(s, 100, 2, SHAPE(0, 5), SHAPE(5, 1),
                                              TP_DTYPE_FLOAT32);
    CHECK(t != NULL);
    CHECK_EQ(tp_tensor_numel(t), 0);
    CHECK_EQ(tp_tensor_nbytes(t), 0);
    CHECK(tp_tensor_is_contiguous(t));
    CHECK(tp_tensor_data(t) == NULL);
    tp_tensor_release(t);
    tp_tensor *scalar = tp_tensor_new_from_storage(s, 0, 0, NULL, NULL, TP_DTYPE_FLOAT32);
    CHECK(scalar == NULL); /* a 0-dim tensor has one element: 4 bytes */
    tp_storage_release(s);
}

static void test_zero_dim_tensor_has_one_element(void) {
    tp_tensor *t = make_tensor(0, NULL, TP_DTYPE_INT64);
    CHECK(t != NULL);
    CHECK_EQ(tp_tensor_dim(t), 0);
    CHECK_EQ(tp_tensor_numel(t), 1);
    CHECK_EQ(tp_tensor_nbytes(t), 8);
    CHECK(tp_tensor_is_contiguous(t));
    CHECK_EQ(tp_tensor_size(t, 0), -1);
    CHECK_STR(tp_last_error(), "Dimension specified as 0 but tensor has no dimensions");
    tp_tensor_release(t);
}

static void test_bad_geometry_is_rejected_with_pytorch_messages(void) {
    tp_storage *s = tp_storage_new(4096, NULL, false);
    CHECK(tp_tensor_new_from_storage(s, 0, 2, SHAPE(-1, 3), NULL, TP_DTYPE_FLOAT32) == NULL);
    CHECK_EQ(tp_last_status(), TP_STATUS_INVALID_ARGUMENT);
    CHECK_STR(tp_last_error(), "Trying to create tensor with negative dimension -1: [-1, 3]");
    CHECK(tp_tensor_new_from_storage(s, 0, 2, SHAPE(2, 2), SHAPE(-1, 1), TP_DTYPE_FLOAT32) ==
          NULL);
    CHECK_STR(tp_last_error(),
              "as_strided: Negative strides are not supported at the moment, got strides: [-1, 1]");
    CHECK(tp_tensor_new_from_storage(s, -1, 1, SHAPE(2), NULL, TP_DTYPE_FLOAT32) == NULL);
    CHECK_STR(tp_last_error(), "Tensor: invalid storage offset -1");
    int64_t nine[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    CHECK(tp_tensor_new_from_storage(s, 0, 9, nine, NULL, TP_DTYPE_FLOAT32) == NULL);
    CHECK_STR(tp_last_error(), "tensors have between 0 and 8 dimensions, got 9");
    CHECK(tp_tensor_new_from_storage(s, 0, 1, SHAPE(2), NULL, (tp_dtype)42) == NULL);
    CHECK_STR(tp_last_error(), "tensor: invalid dtype 42");
    CHECK(tp_tensor_new_from_storage(NULL, 0, 1, SHAPE(2), NULL, TP_DTYPE_FLOAT32) == NULL);
    CHECK_STR(tp_last_error(), "tensor: storage is NULL");
    CHECK_EQ(tp_storage_use_count(s), 1);
    tp_storage_release(s);
}

static void test_numel_overflow_is_an_error_not_a_wrap(void) {
    tp_storage *s = tp_storage_new(16, NULL, false);
    int64_t huge = (int64_t)1 << 32;
    CHECK(tp_tensor_new_from_storage(s, 0, 2, SHAPE(huge, huge), NULL, TP_DTYPE_FLOAT32) == NULL);
    CHECK_STR(tp_last_error(), "numel of shape [4294967296, 4294967296] overflows int64");
    /* Fits int64 as a count, but not as bytes of a storage. */
    CHECK(tp_tensor_new_from_storage(s, 0, 1, SHAPE(INT64_MAX / 2), NULL, TP_DTYPE_FLOAT64) ==
          NULL);
    CHECK(tp_last_status() == TP_STATUS_OUT_OF_BOUNDS);
    /* A 0 anywhere makes the product 0 even if the rest would overflow. */
    tp_tensor *z = tp_tensor_new_from_storage(s, 0, 3, SHAPE(huge, huge, 0), NULL,
                                              TP_DTYPE_FLOAT32);
    CHECK(z != NULL);
    CHECK_EQ(tp_tensor_numel(z), 0);
    tp_tensor_release(z);
    tp_storage_release(s);
}

// ----------------------------------------------------------------------------
// adopting the storage's creation reference

/* A storage over malloc'ed bytes whose deleter counts its runs. */
static int deleter_runs;
static void counting_free(void *ctx) {
    deleter_runs++;
    free(ctx);
}
static tp_storage *counted_storage(size_t nbytes) {
    void *p = malloc(nbytes ? nbytes : 1);
    tp_data_ptr dp = {.ptr = p, .ctx = p, .deleter = counting_free, .device = tp_device_cpu()};
    return tp_storage_new_with_data_ptr(dp, nbytes, NULL, false);
}

static void test_adopting_tensor_holds_the_only_reference(void) {
    deleter_runs = 0;
    tp_storage *s = counted_storage(48);
    tp_tensor *t = tp__tensor_make(s, 0, 2, SHAPE(3, 4), NULL, TP_DTYPE_FLOAT32, NULL, NULL,
                                   TP__STORAGE_REF_ADOPT);
    CHECK(t != NULL);
    CHECK(tp_tensor_storage(t) == s);
    CHECK(shape_is(t, 2, SHAPE(3, 4), SHAPE(4, 1)));
    CHECK(!tp_tensor_is_view(t));
    CHECK_EQ(tp_tensor_version(t), 0);
    CHECK_EQ(tp_storage_use_count(s), 1); /* adopted, not retained */
    tp_storage_weak_retain(s);            /* to look at the struct after the tensor */
    tp_tensor_release(t);
    CHECK_EQ(tp_storage_use_count(s), 0);
    CHECK_EQ(deleter_runs, 1);
    CHECK_EQ(tp_storage_weak_count(s), 1); /* ours alone */
    tp_storage_weak_release(s);
}

/* Every refusal consumes the reference it was given: exactly one release,
 * the data freed once, and the message of the refusal kept. */
static void test_failed_adoption_releases_the_storage_exactly_once(void) {
    int64_t nine[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    struct {
        int ndim;
        const int64_t *sizes, *strides;
        int64_t offset;
        tp_dtype dtype;
        tp_status status;
        const char *message;
    } bad[] = {
        {1, SHAPE(2), NULL, 0, (tp_dtype)42, TP_STATUS_INVALID_ARGUMENT,
         "tensor: invalid dtype 42"},
        {2, SHAPE(-1, 3), NULL, 0, TP_DTYPE_FLOAT32, TP_STATUS_INVALID_ARGUMENT,
         "Trying to create tensor with negative dimension -1: [-1, 3]"},
        {9, nine, NULL, 0, TP_DTYPE_FLOAT32, TP_STATUS_INVALID_ARGUMENT,
         "tensors have between 0 and 8 dimensions, got 9"},
        {1, SHAPE(5), NULL, 0, TP_DTYPE_FLOAT32, TP_STATUS_OUT_OF_BOUNDS,
         "setStorage: sizes [5], strides [1], storage offset 0, and itemsize 4 requiring a "
         "storage size of 20 are out of bounds for storage of size 16"},
        {1, SHAPE(2), NULL, -1, TP_DTYPE_FLOAT32, TP_STATUS_INVALID_ARGUMENT,
         "Tensor: invalid storage offset -1"},
        {2, SHAPE(2, 2), SHAPE(-1, 1), 0, TP_DTYPE_FLOAT32, TP_STATUS_INVALID_ARGUMENT,
         "as_strided: Negative strides are not supported at the moment, got strides: [-1, 1]"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        deleter_runs = 0;
        tp_storage *s = counted_storage(16);
        tp_storage_weak_retain(s); /* keeps the struct readable: a second release would show */
        tp_clear_error();
        CHECK(tp__tensor_make(s, bad[k].offset, bad[k].ndim, bad[k].sizes, bad[k].strides,
                              bad[k].dtype, NULL, NULL, TP__STORAGE_REF_ADOPT) == NULL);
        CHECK_EQ(tp_last_status(), bad[k].status);
        CHECK_STR(tp_last_error(), bad[k].message);
        CHECK_EQ(tp_storage_use_count(s), 0);
        CHECK_EQ(tp_storage_weak_count(s), 1);
        CHECK_EQ(deleter_runs, 1);
        tp_storage_weak_release(s);
    }
    /* Nothing to adopt: an error, and nothing released. */
    CHECK(tp__tensor_make(NULL, 0, 1, SHAPE(2), NULL, TP_DTYPE_FLOAT32, NULL, NULL,
                          TP__STORAGE_REF_ADOPT) == NULL);
    CHECK_STR(tp_last_error(), "tensor: storage is NULL");
}

// ----------------------------------------------------------------------------
// lifetime and fields

static void test_retain_release_counts_the_handle(void) {
    tp_tensor *t = make_tensor(1, SHAPE(4), TP_DTYPE_FLOAT32);
    CHECK_EQ(tp_tensor_use_count(t), 1);
    CHECK(tp_tensor_retain(t) == t);
    CHECK_EQ(tp_tensor_use_count(t), 2);
    tp_tensor_release(t);
    CHECK_EQ(tp_tensor_use_count(t), 1);
    CHECK(tp_tensor_retain(NULL) == NULL);
    tp_tensor_release(NULL);
    tp_tensor_release(t);
}

static void test_last_tensor_release_frees_the_storage_data(void) {
    tp_allocator_stats before, after;
    tp_allocator_get_stats(tp_allocator_cpu(), &before);
    tp_tensor *t = make_tensor(2, SHAPE(10, 10), TP_DTYPE_FLOAT64);
    tp_storage *s = tp_tensor_storage(t);
    tp_storage_weak_retain(s);
    tp_tensor_release(t);
    CHECK_EQ(tp_storage_use_count(s), 0);
    CHECK(tp_storage_weak_lock(s) == NULL);
    tp_allocator_get_stats(tp_allocator_cpu(), &after);
    CHECK_EQ(after.current_bytes, before.current_bytes);
    tp_storage_weak_release(s);
}

static void test_size_and_stride_wrap_negative_dims(void) {
    tp_tensor *t = make_tensor(3, SHAPE(2, 3, 4), TP_DTYPE_FLOAT32);
    CHECK_EQ(tp_tensor_size(t, -1), 4);
    CHECK_EQ(tp_tensor_size(t, 0), 2);
    CHECK_EQ(tp_tensor_stride(t, -3), 12);
    CHECK_EQ(tp_tensor_stride(t, 1), 4);
    CHECK_EQ(tp_tensor_size(t, 3), -1);
    CHECK_EQ(tp_last_status(), TP_STATUS_OUT_OF_BOUNDS);
    CHECK_STR(tp_last_error(), "Dimension out of range (expected to be in range of [-3, 2], but got 3)");
    CHECK_EQ(tp_tensor_stride(t, -4), 0);
    CHECK_STR(tp_last_error(), "Dimension out of range (expected to be in range of [-3, 2], but got -4)");
    tp_tensor_release(t);
}

static void test_contiguity_ignores_strides_of_size_one_dims(void) {
    tp_storage *s = tp_storage_new(4096, NULL, false);
    tp_tensor *a = tp_tensor_new_from_storage(s, 0, 3, SHAPE(2, 1, 3), SHAPE(3, 99, 1),
                                              TP_DTYPE_FLOAT32);
    CHECK(tp_tensor_is_contiguous(a));
    tp_tensor *b = tp_tensor_new_from_storage(s, 0, 2, SHAPE(2, 3), SHAPE(1, 2), TP_DTYPE_FLOAT32);
    CHECK(!tp_tensor_is_contiguous(b));
    tp_tensor *c = tp_tensor_new_from_storage(s, 0, 2, SHAPE(2, 3), SHAPE(3, 0), TP_DTYPE_FLOAT32);
    CHECK(!tp_tensor_is_contiguous(c));
    tp_tensor_release(a);
    tp_tensor_release(b);
    tp_tensor_release(c);
    tp_storage_release(s);
}

// ----------------------------------------------------------------------------
// version counter

static void test_bump_version_increments_from_zero(void) {
    tp_tensor *t = make_tensor(1, SHAPE(3), TP_DTYPE_FLOAT32);
    CHECK_EQ(tp_tensor_version(t), 0);
    tp_tensor_bump_version(t);
    tp_tensor_bump_version(t);
    CHECK_EQ(tp_tensor_version(t), 2);
    /* Another tensor on the same storage is not a view: own counter. */
    tp_tensor *u = tp_tensor_new_from_storage(tp_tensor_storage(t), 0, 1, SHAPE(3), NULL,
                                              TP_DTYPE_FLOAT32);
    CHECK_EQ(tp_tensor_version(u), 0);
    tp_tensor_release(u);
    tp_tensor_release(t);
}

// ----------------------------------------------------------------------------
// autograd slots

static void test_only_floating_tensors_may_require_grad(void) {
    tp_tensor *i = make_tensor(1, SHAPE(3), TP_DTYPE_INT32);
    CHECK_EQ(tp_tensor_set_requires_grad(i, true), TP_STATUS_INVALID_ARGUMENT);
    CHECK_STR(tp_last_error(),
              "only Tensors of floating point and complex dtype can require gradients");
    CHECK(!tp_tensor_requires_grad(i));
    CHECK_EQ(tp_tensor_set_requires_grad(i, false), TP_STATUS_OK);
    static const tp_dtype floats[] = {TP_DTYPE_FLOAT32, TP_DTYPE_FLOAT64, TP_DTYPE_FLOAT16,
                                      TP_DTYPE_BFLOAT16};
    for (int k = 0; k < 4; k++) {
        tp_tensor *f = make_tensor(1, SHAPE(3), floats[k]);
        CHECK_EQ(tp_tensor_set_requires_grad(f, true), TP_STATUS_OK);
        CHECK(tp_tensor_requires_grad(f));
        tp_tensor_release(f);
    }
    tp_tensor_release(i);
}

static void test_grad_slot_holds_a_matching_tensor(void) {
    tp_tensor *t = make_tensor(2, SHAPE(2, 3), TP_DTYPE_FLOAT32);
    tp_tensor *g = make_tensor(2, SHAPE(2, 3), TP_DTYPE_FLOAT32);
    CHECK(tp_tensor_grad(t) == NULL);
    CHECK_EQ(tp_tensor_set_grad(t, g), TP_STATUS_OK);
    CHECK(tp_tensor_grad(t) == g);
    CHECK_EQ(tp_tensor_use_count(g), 2); /* the slot holds a reference */
    tp_tensor *wrong_size = make_tensor(2, SHAPE(3, 2), TP_DTYPE_FLOAT32);
    tp_tensor *wrong_type = make_tensor(2, SHAPE(2, 3), TP_DTYPE_FLOAT64);
    CHECK_EQ(tp_tensor_set_grad(t, wrong_size), TP_STATUS_INVALID_ARGUMENT);
    CHECK_STR(tp_last_error(), "assigned grad has data of a different size");
    CHECK_EQ(tp_tensor_set_grad(t, wrong_type), TP_STATUS_INVALID_ARGUMENT);
    CHECK_STR(tp_last_error(), "assigned grad has data of a different type");
    CHECK_EQ(tp_tensor_set_grad(t, t), TP_STATUS_INVALID_ARGUMENT);
    CHECK_STR(tp_last_error(), "can't assign Variable as its own grad");
    CHECK(tp_tensor_grad(t) == g); /* failures left the slot alone */
    CHECK_EQ(tp_tensor_set_grad(t, NULL), TP_STATUS_OK);
    CHECK(tp_tensor_grad(t) == NULL);
    CHECK_EQ(tp_tensor_use_count(g), 1);
    /* A tensor released with its grad set releases the grad too (ASan checks). */
    CHECK_EQ(tp_tensor_set_grad(t, g), TP_STATUS_OK);
    tp_tensor_release(g);
    tp_tensor_release(wrong_size);
    tp_tensor_release(wrong_type);
    tp_tensor_release(t);
}

static void test_null_and_mismatched_arguments_are_errors(void) {
    CHECK_EQ(tp_tensor_size(NULL, 0), -1);
    CHECK_STR(tp_last_error(), "size: tensor is NULL");
    CHECK_EQ(tp_tensor_stride(NULL, 0), 0);
    CHECK_STR(tp_last_error(), "stride: tensor is NULL");
    CHECK_EQ(tp_tensor_set_requires_grad(NULL, true), TP_STATUS_INVALID_ARGUMENT);
    CHECK_STR(tp_last_error(), "set_requires_grad: tensor is NULL");
    CHECK_EQ(tp_tensor_set_grad(NULL, NULL), TP_STATUS_INVALID_ARGUMENT);
    CHECK_STR(tp_last_error(), "set_grad: tensor is NULL");
    tp_storage *s = tp_storage_new(64, NULL, false);
    CHECK(tp_tensor_new_from_storage(s, 0, 2, NULL, NULL, TP_DTYPE_FLOAT32) == NULL);
    CHECK_STR(tp_last_error(), "sizes is NULL for a 2-dim tensor");
    CHECK(tp_tensor_new_from_storage(s, 0, -1, NULL, NULL, TP_DTYPE_FLOAT32) == NULL);
    CHECK_STR(tp_last_error(), "tensors have between 0 and 8 dimensions, got -1");
    /* A grad on another device is refused (a hand-made CUDA-tagged storage). */
    static char buf[64];
    tp_data_ptr dp = {.ptr = buf, .device = {TP_DEVICE_TYPE_CUDA, 0}};
    tp_storage *cs = tp_storage_new_with_data_ptr(dp, sizeof buf, NULL, false);
    tp_tensor *g = tp_tensor_new_from_storage(cs, 0, 1, SHAPE(4), NULL, TP_DTYPE_FLOAT32);
    CHECK_EQ(tp_tensor_device(g).type, TP_DEVICE_TYPE_CUDA);
    tp_tensor *t = tp_tensor_new_from_storage(s, 0, 1, SHAPE(4), NULL, TP_DTYPE_FLOAT32);
    CHECK_EQ(tp_tensor_set_grad(t, g), TP_STATUS_INVALID_ARGUMENT);
    CHECK_STR(tp_last_error(), "assigned grad has data located on a different device");
    tp_tensor_release(t);
    tp_tensor_release(g);
    tp_storage_release(cs);
    tp_storage_release(s);
    /* Field readers tolerate NULL. */
    CHECK_EQ(tp_tensor_dim(NULL), 0);
    CHECK_EQ(tp_tensor_numel(NULL), 0);
    CHECK(tp_tensor_data(NULL) == NULL);
    CHECK(!tp_tensor_is_view(NULL));
    CHECK_EQ(tp_tensor_version(NULL), 0);
}

int main(void) {
    RUN_TEST(test_new_tensor_is_contiguous_over_its_storage);
    RUN_TEST(test_data_pointer_includes_offset_times_itemsize);
    RUN_TEST(test_geometry_past_the_storage_is_out_of_bounds);
    RUN_TEST(test_zero_element_tensor_needs_no_storage_bytes);
    RUN_TEST(test_zero_dim_tensor_has_one_element);
    RUN_TEST(test_bad_geometry_is_rejected_with_pytorch_messages);
    RUN_TEST(test_numel_overflow_is_an_error_not_a_wrap);
    RUN_TEST(test_adopting_tensor_holds_the_only_reference);
    RUN_TEST(test_failed_adoption_releases_the_storage_exactly_once);
    RUN_TEST(test_retain_release_counts_the_handle);
    RUN_TEST(test_last_tensor_release_frees_the_storage_data);
    RUN_TEST(test_size_and_stride_wrap_negative_dims);
    RUN_TEST(test_contiguity_ignores_strides_of_size_one_dims);
    RUN_TEST(test_bump_version_increments_from_zero);
    RUN_TEST(test_only_floating_tensors_may_require_grad);
    RUN_TEST(test_grad_slot_holds_a_matching_tensor);
    RUN_TEST(test_null_and_mismatched_arguments_are_errors);
    return CHECK_DONE();
}
