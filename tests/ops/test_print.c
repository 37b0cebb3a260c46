/*
 * tests/ops/test_print.c - tp_tensor_to_string against the exact text
 * PyTorch 1.13 prints for the same tensors (default print options).
 */
#include "check.h"

static void expect_str(tp_tensor *t, const char *want, int line) {
    char *s = tp_tensor_to_string(t);
    if (!s || strcmp(s, want) != 0) {
        fprintf(stderr, "%s:%d: printed\n%s\nexpected\n%s\n", __FILE__, line, s ? s : "(null)", want);
        check_failures++;
    }
    free(s);
    tp_tensor_release(t);
}
#define EXPECT_STR(t, want) expect_str((t), (want), __LINE__)

static void test_float_integer_mode(void) {
    tp_tensor *a = tp_arange(0, 4, 1, TP_DTYPE_FLOAT32);
    EXPECT_STR(tp_tensor_view(a, 2, (int64_t[]){2, 2}), "tensor([[0., 1.],\n        [2., 3.]])");
    EXPECT_STR(MAKE(TP_DTYPE_FLOAT64, SHAPE(2), {1, -20}), "tensor([  1., -20.], dtype=torch.float64)");
    tp_tensor_release(a);
}

static void test_float_fixed_and_scientific(void) {
    EXPECT_STR(MAKE(TP_DTYPE_FLOAT32, SHAPE(3), {1.5, -2.25, 3}), "tensor([ 1.5000, -2.2500,  3.0000])");
    EXPECT_STR(MAKE(TP_DTYPE_FLOAT32, SHAPE(2), {1e-5, 1}), "tensor([1.0000e-05, 1.0000e+00])");
    EXPECT_STR(MAKE(TP_DTYPE_FLOAT32, SHAPE(3), {NAN, 1.5, INFINITY}), "tensor([   nan, 1.5000,    inf])");
    EXPECT_STR(MAKE(TP_DTYPE_FLOAT32, SHAPE(2), {-0.5, 100.25}), "tensor([ -0.5000, 100.2500])");
    EXPECT_STR(MAKE(TP_DTYPE_FLOAT16, SHAPE(2), {0.5, 2}), "tensor([0.5000, 2.0000], dtype=torch.float16)");
}

static void test_scalars_ints_bools(void) {
    double v = 3.5, w = 2;
    tp_tensor *s = tp_from_blob(&v, 0, NULL, NULL, TP_DTYPE_FLOAT64, NULL, NULL);
    tp_tensor *s32 = tp_to_dtype(s, TP_DTYPE_FLOAT32);
    EXPECT_STR(s32, "tensor(3.5000)");
    tp_tensor *s2 = tp_from_blob(&w, 0, NULL, NULL, TP_DTYPE_FLOAT64, NULL, NULL);
    tp_tensor *s2f = tp_to_dtype(s2, TP_DTYPE_FLOAT32);
    EXPECT_STR(s2f, "tensor(2.)");
    EXPECT_STR(MAKE(TP_DTYPE_INT32, SHAPE(3), {1, -20, 3}), "tensor([  1, -20,   3], dtype=torch.int32)");
    EXPECT_STR(MAKE(TP_DTYPE_INT64, SHAPE(2), {7, 8}), "tensor([7, 8])");
    EXPECT_STR(MAKE(TP_DTYPE_BOOL, SHAPE(2), {1, 0}), "tensor([ True, False])");
    tp_tensor *a = tp_arange(0, 8, 1, TP_DTYPE_INT64);
    EXPECT_STR(tp_tensor_view(a, 3, (int64_t[]){2, 2, 2}),
               "tensor([[[0, 1],\n         [2, 3]],\n\n        [[4, 5],\n         [6, 7]]])");
    tp_tensor_release(a);
    tp_tensor_release(s);
    tp_tensor_release(s2);
}

static void test_empty_and_strided(void) {
    EXPECT_STR(tp_zeros(2, (int64_t[]){0, 3}, TP_DTYPE_FLOAT32), "tensor([], size=(0, 3))");
    EXPECT_STR(tp_zeros(1, (int64_t[]){0}, TP_DTYPE_INT32), "tensor([], dtype=torch.int32)");
    tp_tensor *a = tp_arange(0, 6, 1, TP_DTYPE_INT64);
    tp_tensor *m = tp_tensor_view(a, 2, (int64_t[]){2, 3});
    EXPECT_STR(tp_tensor_t(m), "tensor([[0, 3],\n        [1, 4],\n        [2, 5]])");
    tp_tensor_release(m);
    tp_tensor_release(a);
}

static void test_summarized_and_wrapped(void) {
    EXPECT_STR(tp_arange(0, 2000, 1, TP_DTYPE_FLOAT32),
               "tensor([0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 1.9970e+03, 1.9980e+03,\n"
               "        1.9990e+03])");
    EXPECT_STR(tp_arange(0, 30, 1, TP_DTYPE_INT64),
               "tensor([ 0,  1,  2,  3,  4,  5,  6,  7,  8,  9, 10, 11, 12, 13, 14, 15, 16, 17,\n"
               "        18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29])");
    tp_tensor *a = tp_arange(0, 2000, 1, TP_DTYPE_INT64);
    EXPECT_STR(tp_tensor_view(a, 2, (int64_t[]){1000, 2}),
               "tensor([[   0,    1],\n        [   2,    3],\n        [   4,    5],\n        ...,\n"
               "        [1994, 1995],\n        [1996, 1997],\n        [1998, 1999]])");
    tp_tensor_release(a);
}

static void test_print_writes_a_line(void) {
    FILE *f = tmpfile();
    tp_tensor *a = MAKE(TP_DTYPE_INT64, SHAPE(2), {1, 2});
    CHECK_EQ(tp_tensor_print(a, f), TP_STATUS_OK);
    rewind(f);
    char buf[64] = {0};
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    CHECK_EQ(n, strlen("tensor([1, 2])\n"));
    CHECK_STR(buf, "tensor([1, 2])\n");
    fclose(f);
    CHECK_ERROR(tp_tensor_print(a, NULL) != TP_STATUS_OK, "stream is NULL");
    tp_tensor_release(a);
}

int main(void) {
    RUN_TEST(test_float_integer_mode);
    RUN_TEST(test_float_fixed_and_scientific);
    RUN_TEST(test_scalars_ints_bools);
    RUN_TEST(test_empty_and_strided);
    RUN_TEST(test_summarized_and_wrapped);
    RUN_TEST(test_print_writes_a_line);
    return CHECK_DONE();
}
