/*
 * tests/cuda/test_cuda_device.c - the CUDA device against the runtime test
 * double (fake/, two devices): enumeration, device strings, errors as
 * statuses, copies between host and devices, creation on a device, the
 * pinned-host allocator, streams and events, and the same-device check.
 */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>

#include "../check.h"
#include "fake/fake_cudart.h"
#include "tensorplay/tensorplay.h"
#include "tensorplay/cuda.h"

#define SHAPE(...) (int64_t[]){__VA_ARGS__}

static tpfake_api fake;

static tp_tensor *host_iota(int ndim, const int64_t *sizes, tp_dtype dtype) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= sizes[i];
    tp_tensor *a = tp_arange(0, (double)n, 1, dtype);
    tp_tensor *v = tp_tensor_view(a, ndim, sizes);
    tp_tensor_release(a);
    return v;
}

static bool same_values(const tp_tensor *a, const tp_tensor *b) {
    if (tp_tensor_numel(a) != tp_tensor_numel(b) || tp_tensor_dim(a) != tp_tensor_dim(b)) return false;
    tp_tensor *ca = tp_contiguous((tp_tensor *)a), *cb = tp_contiguous((tp_tensor *)b);
    bool same = true;
    tp_tensor *fa = tp_to_dtype(ca, TP_DTYPE_FLOAT64), *fb = tp_to_dtype(cb, TP_DTYPE_FLOAT64);
    const double *x = tp_tensor_data(fa), *y = tp_tensor_data(fb);
    for (int64_t i = 0; i < tp_tensor_numel(fa); i++) same = same && x[i] == y[i];
    tp_tensor_release(fa), tp_tensor_release(fb), tp_tensor_release(ca), tp_tensor_release(cb);
    return same;
}

// ----------------------------------------------------------------------------

static void test_devices_are_enumerated_and_parsed(void) {
    int n = -1;
    CHECK_EQ(tp_cuda_device_count(&n), TP_STATUS_OK);
    CHECK_EQ(n, 2);
    CHECK(tp_cuda_is_available());
    tp_device d;
    CHECK_EQ(tp_device_parse("cuda:1", &d), TP_STATUS_OK);
    CHECK_EQ(d.type, TP_DEVICE_TYPE_CUDA);
    CHECK_EQ(d.index, 1);
    CHECK_EQ(tp_device_parse("cuda", &d), TP_STATUS_OK);
    CHECK_EQ(d.index, -1);
    CHECK_EQ(tp_device_parse("cpu", &d), TP_STATUS_OK);
    CHECK_EQ(d.type, TP_DEVICE_TYPE_CPU);
    CHECK_EQ(tp_device_parse("gpu:0", &d), TP_STATUS_INVALID_ARGUMENT);
    CHECK_STR(tp_last_error(), "Expected one of cpu, cuda device type at start of device string: gpu:0");
    const char *bad[] = {"cuda:", "cuda:x", "cuda:01", "cuda:-1", "cuda:1x", "cpu:1", "cuda:40000", "cudax"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_EQ(tp_device_parse(bad[i], &d), TP_STATUS_INVALID_ARGUMENT);
        CHECK_CONTAINS(tp_last_error(), "Invalid device string");
    }
    int cur = -1;
    CHECK_EQ(tp_cuda_current_device(&cur), TP_STATUS_OK);
    CHECK_EQ(cur, 0);
    CHECK_EQ(tp_cuda_set_device(2), TP_STATUS_INVALID_ARGUMENT);
    CHECK_CONTAINS(tp_last_error(), "cudaErrorInvalidDevice: invalid device ordinal");
}

static void test_copies_round_trip_through_devices(void) {
    tp_tensor *x = host_iota(2, SHAPE(3, 4), TP_DTYPE_FLOAT32);
    tp_tensor *g = tp_tensor_to(x, tp_device_cuda(0));
    CHECK(g != NULL);
    CHECK_EQ(tp_tensor_device(g).type, TP_DEVICE_TYPE_CUDA);
    CHECK_EQ(tp_tensor_device(g).index, 0);
    CHECK_STR(tp_storage_allocator(tp_tensor_storage(g))->name, "cuda_caching");
    CHECK(tp_tensor_storage(g) != tp_tensor_storage(x));
    /* .to the device it is on returns the same tensor */
    tp_tensor *same = tp_tensor_to(g, tp_device_cuda(0));
    CHECK(same == g);
    tp_tensor_release(same);
    /* device -> device */
    tp_tensor *g1 = tp_tensor_to(g, tp_device_cuda(1));
    CHECK(g1 && tp_tensor_device(g1).index == 1);
    tp_tensor *back = tp_tensor_to(g1, tp_device_cpu());
    CHECK(back && tp_tensor_device(back).type == TP_DEVICE_TYPE_CPU);
    CHECK(same_values(back, x));
    /* a strided device view comes back gathered: x.t() on the device */
    tp_tensor *gt = tp_tensor_t(g);
    tp_tensor *bt = tp_tensor_to(gt, tp_device_cpu());
    tp_tensor *xt = tp_tensor_t(x);
    CHECK(bt && tp_tensor_is_contiguous(bt) && same_values(bt, xt));
    /* reshape of a device view that cannot be a view copies on the device */
    tp_tensor *r = tp_tensor_reshape(gt, 1, SHAPE(12));
    tp_tensor *rx = tp_tensor_reshape(xt, 1, SHAPE(12)), *hr = r ? tp_tensor_to(r, tp_device_cpu()) : NULL;
    CHECK(r && !tp_tensor_is_view(r) && tp_tensor_device(r).type == TP_DEVICE_TYPE_CUDA);
    CHECK(hr && same_values(hr, rx));
    tp_tensor_release(r), tp_tensor_release(rx), tp_tensor_release(hr);
    /* device storages are not resized by memcpy */
    CHECK_EQ(tp_storage_resize(tp_tensor_storage(g), 8), TP_STATUS_UNSUPPORTED);
    CHECK_STR(tp_last_error(), "resize: a storage on cuda:0 cannot be resized");
    /* a strided device view moves to another device contiguous */
    tp_tensor *gt1 = tp_tensor_to(gt, tp_device_cuda(1));
    tp_tensor *bt1 = gt1 ? tp_tensor_to(gt1, tp_device_cpu()) : NULL;
    CHECK(gt1 && tp_tensor_is_contiguous(gt1) && tp_tensor_device(gt1).index == 1);
    CHECK(bt1 && same_values(bt1, bt));
    tp_tensor_release(gt1), tp_tensor_release(bt1);
    /* a strided host view goes up contiguous */
    tp_tensor *gxt = tp_tensor_to(xt, tp_device_cuda(0));
    CHECK(gxt && tp_tensor_is_contiguous(gxt));
    tp_tensor *bxt = tp_tensor_to(gxt, tp_device_cpu());
    CHECK(bxt && same_values(bxt, xt));
    /* item and get read one element back */
    double v = 0;
    CHECK_EQ(tp_tensor_get(g, SHAPE(2, 3), &v), TP_STATUS_OK);
    CHECK(v == 11.0);
    char *text = tp_tensor_to_string(g1);
    CHECK(text && strstr(text, "11."));
    free(text);
    tp_tensor *list[] = {gxt, bxt, xt, bt, gt, back, g1, g, x};
    for (size_t i = 0; i < sizeof list / sizeof list[0]; i++) tp_tensor_release(list[i]);
}

static void test_creation_on_a_device(void) {
    tp_tensor *z = tp_zeros_on(tp_device_cuda(1), 2, SHAPE(5, 7), TP_DTYPE_INT32);
    CHECK(z && tp_tensor_device(z).index == 1);
    tp_tensor *hz = tp_tensor_to(z, tp_device_cpu());
    tp_tensor *ref = tp_zeros(2, SHAPE(5, 7), TP_DTYPE_INT32);
    CHECK(same_values(hz, ref));
    tp_tensor *r = tp_randn_on(tp_device_cuda(0), 1, SHAPE(100), TP_DTYPE_FLOAT32, 7);
    tp_tensor *hr = tp_tensor_to(r, tp_device_cpu());
    tp_tensor *rr = tp_randn(1, SHAPE(100), TP_DTYPE_FLOAT32, 7);
    CHECK(same_values(hr, rr)); /* one seed, the same numbers on every device */
    tp_tensor *a = tp_arange_on(tp_device_cuda(0), 0, 10, 2, TP_DTYPE_INT64);
    CHECK(a && tp_tensor_numel(a) == 5);
    tp_tensor *e = tp_empty_on(tp_device_cuda(0), 1, SHAPE(0), TP_DTYPE_FLOAT32);
    CHECK(e && tp_tensor_device(e).type == TP_DEVICE_TYPE_CUDA);
    /* full needs a kernel; a device that cannot run it is a clean error */
    fake.set_kernels(0);
    tp_tensor *f = tp_full_on(tp_device_cuda(0), 1, SHAPE(4), 3.0, TP_DTYPE_FLOAT32);
    CHECK(f == NULL);
    CHECK_EQ(tp_last_status(), TP_STATUS_UNSUPPORTED);
    CHECK_STR(tp_last_error(), "CUDA error: cudaErrorNotSupported: operation not supported "
                               "(launching tp_k_fill on cuda:0)");
    fake.set_kernels(1);
    f = tp_full_on(tp_device_cuda(1), 2, SHAPE(3, 2), 3.0, TP_DTYPE_BFLOAT16);
    tp_tensor *hf = tp_tensor_to(f, tp_device_cpu());
    tp_tensor *rf = tp_full(2, SHAPE(3, 2), 3.0, TP_DTYPE_BFLOAT16);
    CHECK(f && same_values(hf, rf));
    tp_tensor *list[] = {z, hz, ref, r, hr, rr, a, e, f, hf, rf};
    for (size_t i = 0; i < sizeof list / sizeof list[0]; i++) tp_tensor_release(list[i]);
}

static void test_bad_devices_and_mixed_devices_are_errors(void) {
    tp_tensor *x = tp_ones(1, SHAPE(4), TP_DTYPE_FLOAT32);
    CHECK(tp_tensor_to(x, tp_device_cuda(2)) == NULL);
    CHECK_EQ(tp_last_status(), TP_STATUS_INVALID_ARGUMENT);
    CHECK_STR(tp_last_error(), "to(): CUDA error: cudaErrorInvalidDevice: invalid device ordinal "
                               "(cuda:2, but 2 devices)");
    tp_tensor *g = tp_tensor_to(x, tp_device_cuda(0));
    tp_tensor *g1 = tp_tensor_to(x, tp_device_cuda(1));
    CHECK(tp_add(x, g) == NULL);
    CHECK_STR(tp_last_error(), "expected all tensors to be on the same device, but found cpu and cuda:0");
    CHECK(tp_add(g, x) == NULL);
    CHECK_STR(tp_last_error(), "expected all tensors to be on the same device, but found cpu and cuda:0");
    CHECK(tp_mul(g, g1) == NULL);
    CHECK_STR(tp_last_error(), "expected all tensors to be on the same device, but found cuda:0 and cuda:1");
    CHECK_EQ(tp_add_(x, g), TP_STATUS_INVALID_ARGUMENT);
    CHECK(tp_matmul(g, x) == NULL);
    CHECK_CONTAINS(tp_last_error(), "expected all tensors to be on the same device");
    tp_tensor *pair[] = {x, g};
    CHECK(tp_cat(2, pair, 0) == NULL);
    CHECK_CONTAINS(tp_last_error(), "but found cpu and cuda:0");
    CHECK(tp_stack(2, pair, 0) == NULL);
    CHECK_STR(tp_last_error(), "stack(): not implemented for cuda:0 tensors");
    /* An op whose kernel cannot run: a clean refusal, nothing changed. */
    fake.set_kernels(0);
    CHECK(tp_add(g, g) == NULL);
    CHECK_CONTAINS(tp_last_error(), "cudaErrorNotSupported");
    CHECK_EQ(tp_add_(g, g), TP_STATUS_UNSUPPORTED);
    CHECK_EQ(tp_tensor_version(g), 0);
    fake.set_kernels(1);
    tp_tensor *gg = tp_add(g, g), *hg = gg ? tp_tensor_to(gg, tp_device_cpu()) : NULL;
    tp_tensor *xx = tp_add(x, x);
    CHECK(hg && same_values(hg, xx));
    tp_tensor_release(gg), tp_tensor_release(hg), tp_tensor_release(xx);
    /* copy_ across devices moves the data first */
    tp_tensor *y = tp_zeros(1, SHAPE(4), TP_DTYPE_FLOAT32);
    CHECK_EQ(tp_copy_(y, g1), TP_STATUS_OK);
    CHECK(same_values(y, x));
    tp_tensor_release(y), tp_tensor_release(g1), tp_tensor_release(g), tp_tensor_release(x);
}

static void test_allocation_failures_name_the_cuda_error(void) {
    /* (the caching allocator may hold segments of earlier tests: deltas) */
    int live = fake.live_allocations(0);
    tp_allocator_stats st0;
    tp_allocator_get_stats(tp_cuda_raw_allocator(), &st0);
    fake.fail_next("cudaMalloc", 2 /* cudaErrorMemoryAllocation */);
    tp_data_ptr dp;
    CHECK_EQ(tp_allocator_allocate(tp_cuda_raw_allocator(), 1000, &dp), TP_STATUS_OUT_OF_MEMORY);
    CHECK_STR(tp_last_error(), "CUDA error: cudaErrorMemoryAllocation: out of memory (cudaMalloc of "
                               "1000 bytes on cuda:0)");
    CHECK(dp.ptr == NULL);
    CHECK_EQ(tp_allocator_allocate(tp_cuda_raw_allocator(), 1000, &dp), TP_STATUS_OK);
    CHECK(dp.ptr != NULL && dp.device.type == TP_DEVICE_TYPE_CUDA);
    CHECK_EQ(fake.live_allocations(0), live + 1);
    tp_allocator_stats st;
    tp_allocator_get_stats(tp_cuda_raw_allocator(), &st);
    CHECK_EQ(st.current_bytes, st0.current_bytes + 1000);
    tp_data_ptr_clear(&dp);
    CHECK_EQ(fake.live_allocations(0), live);
    tp_allocator_get_stats(tp_cuda_raw_allocator(), &st);
    CHECK_EQ(st.current_bytes, st0.current_bytes);
    CHECK_EQ(st.free_count, st0.free_count + 1);
}

static void test_pinned_memory_allows_non_blocking_uploads(void) {
    tp_storage *s = tp_storage_new(64 * sizeof(float), tp_cuda_host_allocator(), false);
    CHECK(s && tp_storage_device(s).type == TP_DEVICE_TYPE_CPU);
    CHECK_STR(tp_storage_allocator(s)->name, "cuda_host");
    tp_tensor *h = tp_tensor_new_from_storage(s, 0, 1, SHAPE(64), NULL, TP_DTYPE_FLOAT32);
    tp_storage_release(s);
    CHECK_EQ(tp_fill_(h, 2.5), TP_STATUS_OK); /* CPU ops work on pinned memory */
    uint64_t syncs = fake.calls("cudaStreamSynchronize");
    tp_tensor *g = tp_tensor_to_ex(h, tp_device_cuda(0), true);
    CHECK(g != NULL);
    CHECK_EQ(fake.calls("cudaStreamSynchronize"), syncs); /* only enqueued */
    tp_tensor *g2 = tp_tensor_to_ex(h, tp_device_cuda(1), false);
    CHECK_EQ(fake.calls("cudaStreamSynchronize"), syncs + 1);
    tp_tensor *back = tp_tensor_to(g, tp_device_cpu());
    CHECK(same_values(back, h));
    tp_tensor_release(back), tp_tensor_release(g2), tp_tensor_release(g), tp_tensor_release(h);
}

static void *other_thread_stream(void *arg) {
    *(uint64_t *)arg = tp_stream_current(tp_device_cuda(0)).handle;
    return NULL;
}

static void test_streams_and_events(void) {
    tp_stream def = tp_stream_current(tp_device_cuda(0));
    CHECK_EQ(def.handle, 0);
    tp_stream s;
    CHECK_EQ(tp_stream_create(tp_device_cuda(0), &s), TP_STATUS_OK);
    CHECK(s.handle != 0);
    CHECK_EQ(tp_stream_set_current(s), TP_STATUS_OK);
    CHECK_EQ(tp_stream_current(tp_device_cuda(0)).handle, s.handle);
    CHECK_EQ(tp_stream_current(tp_device_cuda(1)).handle, 0); /* per device */
    uint64_t seen = 1;
    pthread_t th;
    pthread_create(&th, NULL, other_thread_stream, &seen);
    pthread_join(th, NULL);
    CHECK_EQ(seen, 0); /* per thread */
    tp_event *e = tp_event_create(tp_device_cuda(0), false);
    CHECK(e != NULL);
    CHECK_EQ(tp_event_record(e, s), TP_STATUS_OK);
    bool done = true;
    CHECK_EQ(tp_event_query(e, &done), TP_STATUS_OK);
    CHECK(!done);
    CHECK_EQ(tp_stream_query(s, &done), TP_STATUS_OK);
    CHECK(!done);
    CHECK_EQ(tp_stream_wait_event(def, e), TP_STATUS_OK);
    CHECK_EQ(tp_event_synchronize(e), TP_STATUS_OK);
    CHECK_EQ(tp_event_query(e, &done), TP_STATUS_OK);
    CHECK(done);
    CHECK_EQ(tp_event_record(e, tp_stream_default(tp_device_cuda(1))), TP_STATUS_INVALID_ARGUMENT);
    CHECK_STR(tp_last_error(), "event_record: the event is on cuda:0, the stream on cuda:1");
    CHECK_EQ(tp_device_synchronize(tp_device_cuda(0)), TP_STATUS_OK);
    CHECK_EQ(tp_stream_destroy(def), TP_STATUS_INVALID_ARGUMENT);
    CHECK_STR(tp_last_error(), "stream_destroy: the default stream");
    CHECK_EQ(tp_stream_destroy(s), TP_STATUS_OK);
    CHECK_EQ(tp_stream_current(tp_device_cuda(0)).handle, 0); /* falls back to the default */
    tp_event_destroy(e);
    CHECK_EQ(fake.live_events(), 0);
    CHECK(tp_event_create(tp_device_cuda(7), false) == NULL);
    CHECK_CONTAINS(tp_last_error(), "invalid device ordinal");
}

static void test_matmul_workspace_comes_from_the_runtimes_allocator(void) {
    tp_tensor *a = tp_randn_on(tp_device_cuda(0), 2, SHAPE(8, 4), TP_DTYPE_FLOAT32, 1);
    tp_tensor *b = tp_randn_on(tp_device_cuda(0), 2, SHAPE(4, 3), TP_DTYPE_FLOAT32, 2);
    tp_tensor *c = tp_matmul(a, b);
    CHECK(c != NULL);
    void *blas = dlopen("libcublas.so.13", RTLD_NOW | RTLD_NOLOAD);
    void *(*ws_of)(size_t *) = blas ? (void *(*)(size_t *))dlsym(blas, "tpfake_cublas_workspace") : NULL;
    CHECK(ws_of != NULL);
    size_t size = 0;
    uint64_t ws = ws_of ? (uint64_t)(uintptr_t)ws_of(&size) : 0;
    CHECK_EQ(size, 32u << 20);
    /* the workspace is a block of the caching allocator of cuda:0, cached again */
    tp_caching_snapshot *snap = tp_caching_allocator_snapshot(tp_cuda_caching_allocator_of(tp_device_cuda(0)));
    bool found = false;
    for (size_t i = 0; snap && i < snap->nsegments; i++)
        for (size_t j = 0; j < snap->segments[i].nblocks; j++)
            found = found || (snap->segments[i].blocks[j].address == ws && !snap->segments[i].blocks[j].allocated);
    CHECK(found);
    tp_caching_snapshot_free(snap);
    if (blas) dlclose(blas);
    tp_tensor_release(a), tp_tensor_release(b), tp_tensor_release(c);
}

int main(void) {
    fake = tpfake_open();
    if (!fake.reset) {
        fprintf(stderr, "this test needs the libcudart.so.13 test double on LD_LIBRARY_PATH\n");
        return 1;
    }
    RUN_TEST(test_devices_are_enumerated_and_parsed);
    RUN_TEST(test_copies_round_trip_through_devices);
    RUN_TEST(test_creation_on_a_device);
    RUN_TEST(test_bad_devices_and_mixed_devices_are_errors);
    RUN_TEST(test_allocation_failures_name_the_cuda_error);
    RUN_TEST(test_pinned_memory_allows_non_blocking_uploads);
    RUN_TEST(test_streams_and_events);
    RUN_TEST(test_matmul_workspace_comes_from_the_runtimes_allocator);
    return CHECK_DONE();
}
