/*
 * tests/cuda/test_cuda_no_device.c - on a machine without a GPU (or without
 * a driver) every CUDA entry point fails with a status and "no CUDA device:
 * <cuda error name>: <text>", and the CPU keeps working.  Where a device
 * exists the test has nothing to check and skips.
 */
#include "../check.h"
#include "tensorplay/tensorplay.h"
#include "tensorplay/cuda.h"

int main(void) {
    if (tp_cuda_is_available()) {
        printf("SKIP: a CUDA device is present\n");
        return 77;
    }
    int n = -1;
    CHECK_EQ(tp_cuda_device_count(&n), TP_STATUS_UNSUPPORTED);
    CHECK_EQ(n, 0);
    CHECK_CONTAINS(tp_last_error(), "no CUDA device: ");
    /* the error's name and text, e.g. "cudaErrorInsufficientDriver: CUDA driver
     * version is insufficient for CUDA runtime version" or cudaErrorNoDevice */
    CHECK(strstr(tp_last_error(), "cudaError") || strstr(tp_last_error(), "could not be loaded"));
    fprintf(stderr, "(the message here: %s)\n", tp_last_error());
    tp_tensor *x = tp_ones(1, (int64_t[]){4}, TP_DTYPE_FLOAT32);
    CHECK(tp_tensor_to(x, tp_device_cuda(0)) == NULL);
    CHECK_EQ(tp_last_status(), TP_STATUS_UNSUPPORTED);
    CHECK_CONTAINS(tp_last_error(), "no CUDA device: ");
    CHECK(tp_zeros_on(tp_device_cuda(0), 1, (int64_t[]){4}, TP_DTYPE_FLOAT32) == NULL);
    CHECK_CONTAINS(tp_last_error(), "no CUDA device: ");
    tp_stream s;
    CHECK_EQ(tp_stream_create(tp_device_cuda(0), &s), TP_STATUS_UNSUPPORTED);
    CHECK(tp_event_create(tp_device_cuda(0), false) == NULL);
    tp_data_ptr dp;
    CHECK_EQ(tp_allocator_allocate(tp_allocator_get(TP_DEVICE_TYPE_CUDA), 16, &dp), TP_STATUS_UNSUPPORTED);
    CHECK_CONTAINS(tp_last_error(), "no CUDA device: ");
    CHECK_EQ(tp_cuda_empty_cache(), TP_STATUS_UNSUPPORTED);
    /* the CPU is unaffected */
    tp_tensor *y = tp_add(x, x);
    tp_tensor *s1 = tp_sum(y, 0, NULL, false);
    double v = 0;
    CHECK(s1 && tp_tensor_item(s1, &v) == TP_STATUS_OK && v == 8.0);
    tp_tensor_release(s1);
    tp_tensor_release(y);
    tp_tensor_release(x);
    return CHECK_DONE();
}
