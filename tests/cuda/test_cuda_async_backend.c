/*
 * tests/cuda/test_cuda_async_backend.c - TP_ALLOC_CONF=backend:cudaMallocAsync
 * (set by meson) switches the CUDA slot to the stream-ordered allocator on
 * the device's default pool; its reserved/used figures, release threshold,
 * record_stream and out-of-memory retry, against the runtime double.
 */
#include <stdlib.h>

#include "../check.h"
#include "fake/fake_cudart.h"
#include "tensorplay/tensorplay.h"
#include "tensorplay/cuda.h"

#define SHAPE(...) (int64_t[]){__VA_ARGS__}
#define MIB ((int64_t)1 << 20)

static tpfake_api fake;

static tp_cuda_pool_stats pool(void) {
    tp_cuda_pool_stats s = {0};
    CHECK_EQ(tp_cuda_async_pool_stats(tp_device_cuda(0), &s), TP_STATUS_OK);
    return s;
}

static void test_backend_comes_from_tp_alloc_conf(void) {
    CHECK_STR(tp_cuda_allocator_backend(), "cudaMallocAsync");
    tp_tensor *x = tp_empty_on(tp_device_cuda(0), 1, SHAPE(MIB), TP_DTYPE_UINT8);
    CHECK(x != NULL);
    CHECK_STR(tp_storage_allocator(tp_tensor_storage(x))->name, "cuda_async");
    CHECK_EQ(fake.calls("cudaMallocAsync"), 1);
    tp_tensor_release(x);
    CHECK_EQ(fake.calls("cudaFreeAsync"), 1);
    tp_device_synchronize(tp_device_cuda(0));
}

static void test_pool_figures_and_release_threshold(void) {
    tp_device_synchronize(tp_device_cuda(0));
    CHECK_EQ(pool().reserved_bytes, 0);
    tp_tensor *x = tp_empty_on(tp_device_cuda(0), 1, SHAPE(4 * MIB), TP_DTYPE_UINT8);
    tp_cuda_pool_stats s = pool();
    CHECK_EQ(s.used_bytes, 4 * MIB);
    CHECK_EQ(s.reserved_bytes, 4 * MIB);
    tp_tensor_release(x);
    s = pool();
    CHECK_EQ(s.used_bytes, 0);
    CHECK_EQ(s.reserved_bytes, 4 * MIB); /* kept until the stream synchronizes */
    tp_stream_synchronize(tp_stream_default(tp_device_cuda(0)));
    CHECK_EQ(pool().reserved_bytes, 0); /* threshold 0: all of it goes back */

    CHECK_EQ(tp_cuda_async_set_release_threshold(tp_device_cuda(0), UINT64_MAX), TP_STATUS_OK);
    CHECK_EQ(pool().release_threshold, UINT64_MAX);
    x = tp_empty_on(tp_device_cuda(0), 1, SHAPE(4 * MIB), TP_DTYPE_UINT8);
    tp_tensor_release(x);
    tp_stream_synchronize(tp_stream_default(tp_device_cuda(0)));
    CHECK_EQ(pool().reserved_bytes, 4 * MIB); /* kept for reuse */
    CHECK_EQ(pool().reserved_peak, 4 * MIB);
    CHECK_EQ(tp_cuda_empty_cache(), TP_STATUS_OK); /* trims the pool */
    CHECK_EQ(pool().reserved_bytes, 0);
    tp_cuda_async_set_release_threshold(tp_device_cuda(0), 0);
}

static void test_record_stream_orders_the_free_after_the_other_stream(void) {
    tp_stream side;
    tp_stream_create(tp_device_cuda(0), &side);
    tp_tensor *x = tp_empty_on(tp_device_cuda(0), 1, SHAPE(1000), TP_DTYPE_UINT8);
    CHECK_EQ(tp_tensor_record_stream(x, side), TP_STATUS_OK);
    uint64_t waits = fake.calls("cudaStreamWaitEvent"), records = fake.calls("cudaEventRecord");
    tp_tensor_release(x);
    CHECK_EQ(fake.calls("cudaEventRecord"), records + 1);
    CHECK_EQ(fake.calls("cudaStreamWaitEvent"), waits + 1);
    CHECK_EQ(fake.live_events(), 0);
    tp_stream_destroy(side);
}

static void test_out_of_memory_trims_the_pool_and_retries_once(void) {
    fake.set_memory_limit(0, 16 * MIB);
    uint64_t syncs = fake.calls("cudaDeviceSynchronize");
    fake.fail_next("cudaMallocAsync", 2);
    tp_tensor *x = tp_empty_on(tp_device_cuda(0), 1, SHAPE(MIB), TP_DTYPE_UINT8);
    CHECK(x != NULL); /* the retry succeeded */
    CHECK_EQ(fake.calls("cudaDeviceSynchronize"), syncs + 1);
    tp_tensor *y = tp_empty_on(tp_device_cuda(0), 1, SHAPE(32 * MIB), TP_DTYPE_UINT8);
    CHECK(y == NULL);
    CHECK_EQ(tp_last_status(), TP_STATUS_OUT_OF_MEMORY);
    CHECK_STR(tp_last_error(), "CUDA error: cudaErrorMemoryAllocation: out of memory (cudaMallocAsync "
                               "of 33554432 bytes on cuda:0, after emptying the pool)");
    CHECK_EQ(pool().num_ooms, 1);
    tp_tensor_release(x);
    fake.set_memory_limit(0, (size_t)1 << 30);
}

int main(void) {
    fake = tpfake_open();
    if (!fake.reset) {
        fprintf(stderr, "this test needs the libcudart.so.13 test double on LD_LIBRARY_PATH\n");
        return 1;
    }
    RUN_TEST(test_backend_comes_from_tp_alloc_conf);
    RUN_TEST(test_pool_figures_and_release_threshold);
    RUN_TEST(test_record_stream_orders_the_free_after_the_other_stream);
    RUN_TEST(test_out_of_memory_trims_the_pool_and_retries_once);
    return CHECK_DONE();
}
