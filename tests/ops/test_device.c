/*
 * tests/ops/test_device.c - the device-generic entry points (device.h) in
 * any build and on any machine: a CPU target is the CPU path, a CUDA
 * target without CUDA (not built, no driver, no device) is a status with a
 * message, never a crash, and the same-device check names both devices.
 */
#include "check.h"
#include "tensorplay/tensorplay.h"
#include "tensorplay/cuda.h"

static void test_to_the_cpu_returns_the_same_tensor(void) {
    tp_tensor *x = tp_ones(1, (int64_t[]){3}, TP_DTYPE_FLOAT32);
    tp_tensor *y = tp_tensor_to(x, tp_device_cpu());
    CHECK(y == x);
    CHECK_EQ(tp_tensor_use_count(x), 2);
    tp_tensor_release(y);
    tp_tensor *z = tp_full_on(tp_device_cpu(), 1, (int64_t[]){2}, 4.0, TP_DTYPE_INT32);
    double v = 0;
    CHECK(z && tp_tensor_get(z, (int64_t[]){1}, &v) == TP_STATUS_OK && v == 4.0);
    tp_tensor *r = tp_randn_on(tp_device_cpu(), 1, (int64_t[]){5}, TP_DTYPE_FLOAT32, 3);
    CHECK(r && tp_tensor_device(r).type == TP_DEVICE_TYPE_CPU);
    tp_tensor_release(r), tp_tensor_release(z), tp_tensor_release(x);
}

static void test_cuda_without_cuda_is_a_status(void) {
    tp_tensor *x = tp_ones(1, (int64_t[]){3}, TP_DTYPE_FLOAT32);
    tp_tensor *g = tp_tensor_to(x, tp_device_cuda(0));
    if (g) { /* a machine with a GPU: nothing to check here */
        tp_tensor_release(g);
    } else {
        CHECK_EQ(tp_last_status(), TP_STATUS_UNSUPPORTED);
        const char *e = tp_last_error();
        CHECK(strstr(e, "TensorPlay was built without CUDA") || strstr(e, "no CUDA device: "));
        CHECK(tp_zeros_on(tp_device_cuda(0), 1, (int64_t[]){3}, TP_DTYPE_FLOAT32) == NULL);
        CHECK(tp_arange_on(tp_device_cuda(0), 0, 3, 1, TP_DTYPE_FLOAT32) == NULL);
    }
    int n = -1;
    if (tp_cuda_device_count(&n) != TP_STATUS_OK) { /* cuda.h links in every build */
        CHECK_EQ(n, 0);
        const char *e = tp_last_error();
        CHECK(strstr(e, "TensorPlay was built without CUDA") || strstr(e, "no CUDA device: "));
        CHECK(!tp_cuda_is_available());
        tp_stream s;
        CHECK_EQ(tp_stream_create(tp_device_cuda(0), &s), TP_STATUS_UNSUPPORTED);
    }
    CHECK(tp_tensor_to(x, (tp_device){9, 0}) == NULL);
    CHECK_STR(tp_last_error(), "to(): invalid device type 9");
    CHECK(tp_tensor_to(NULL, tp_device_cpu()) == NULL);
    tp_tensor_release(x);
}

static void test_mixed_devices_are_refused_with_pytorchs_text(void) {
    /* A storage tagged cuda:0 over host bytes: enough to reach the check,
     * which comes before anything reads the data. */
    static float buf[4];
    tp_data_ptr dp = {.ptr = buf, .device = {TP_DEVICE_TYPE_CUDA, 0}};
    tp_storage *s = tp_storage_new_with_data_ptr(dp, sizeof buf, NULL, false);
    tp_tensor *g = tp_tensor_new_from_storage(s, 0, 1, (int64_t[]){4}, NULL, TP_DTYPE_FLOAT32);
    tp_storage_release(s);
    tp_tensor *x = tp_ones(1, (int64_t[]){4}, TP_DTYPE_FLOAT32);
    CHECK(tp_add(x, g) == NULL);
    CHECK_STR(tp_last_error(), "expected all tensors to be on the same device, but found cpu and cuda:0");
    CHECK(tp_sub(g, x) == NULL);
    CHECK_STR(tp_last_error(), "expected all tensors to be on the same device, but found cpu and cuda:0");
    CHECK_EQ(tp_mul_(x, g), TP_STATUS_INVALID_ARGUMENT);
    CHECK(tp_matmul(x, g) == NULL);
    CHECK_STR(tp_last_error(), "expected all tensors to be on the same device, but found cpu and cuda:0");
    CHECK(tp_where(x, x, g) == NULL);
    CHECK_EQ(tp_tensor_version(x), 0);
    tp_tensor_release(x), tp_tensor_release(g);
}

int main(void) {
    RUN_TEST(test_to_the_cpu_returns_the_same_tensor);
    RUN_TEST(test_cuda_without_cuda_is_a_status);
    RUN_TEST(test_mixed_devices_are_refused_with_pytorchs_text);
    return CHECK_DONE();
}
