/*
 * tests/cuda/test_cuda_dlpack.c - DLPack for CUDA tensors against the
 * runtime test double (fake/, two devices): a cuda:1 tensor goes out as
 * kDLCUDA device 1 with its data pointer, comes back zero-copy on the same
 * device, the producer's deleter runs exactly once; a read-only import is
 * copied on its device; a device that does not exist is refused (deleter
 * still run once).
 */
#include <stdlib.h>

#include "../check.h"
#include "fake/fake_cudart.h"
#include "tensorplay/tensorplay.h"
#include "tensorplay/cuda.h"
#include "tensorplay/dlpack.h"

#define SHAPE(...) (int64_t[]){__VA_ARGS__}

static tp_tensor *device_iota(int index, int64_t n) {
    tp_tensor *h = tp_arange(0, (double)n, 1, TP_DTYPE_FLOAT32);
    tp_tensor *d = tp_tensor_to(h, tp_device_cuda(index));
    tp_tensor_release(h);
    return d;
}

static float host_value(const tp_tensor *d, int64_t i) {
    tp_tensor *h = tp_tensor_to((tp_tensor *)d, tp_device_cpu());
    tp_tensor *c = h ? tp_contiguous(h) : NULL;
    float v = c ? ((const float *)tp_tensor_data(c))[i] : -1.0f;
    tp_tensor_release(c);
    tp_tensor_release(h);
    return v;
}

static void test_cuda_tensor_round_trips_zero_copy_on_its_device(void) {
    tp_tensor *d = device_iota(1, 12);
    tp_tensor *v = tp_tensor_view(d, 2, SHAPE(3, 4));
    tp_tensor *s = tp_tensor_select(v, 0, 1); /* [4, 5, 6, 7]: byte offset 16 */
    DLManagedTensorVersioned *m = tp_to_dlpack(s);
    CHECK(m != NULL);
    CHECK_EQ(m->dl_tensor.device.device_type, kDLCUDA);
    CHECK_EQ(m->dl_tensor.device.device_id, 1);
    CHECK(m->dl_tensor.data == tp_tensor_data(d));
    CHECK_EQ(m->dl_tensor.byte_offset, 16u);
    tp_tensor *back = tp_from_dlpack(&m);
    CHECK(back != NULL && m == NULL);
    CHECK_EQ(tp_tensor_device(back).type, TP_DEVICE_TYPE_CUDA);
    CHECK_EQ(tp_tensor_device(back).index, 1);
    CHECK((char *)tp_tensor_data(back) == (char *)tp_tensor_data(d) + 16);
    CHECK(host_value(back, 2) == 6.0f);
    /* zero-copy: a write through the import shows in the original */
    CHECK_EQ(tp_fill_(back, 9.0), TP_STATUS_OK);
    CHECK(host_value(d, 5) == 9.0f);
    tp_tensor_release(s);
    tp_tensor_release(v);
    tp_tensor_release(d);
    /* back holds the export (and so d's storage) until it goes */
    CHECK(host_value(back, 0) == 9.0f);
    tp_tensor_release(back);
}

static int deleter_calls;
static void count_deleter(DLManagedTensorVersioned *self) {
    deleter_calls++;
    free(self);
}

/* A producer's kDLCUDA tensor over device memory d holds (borrowed). */
static DLManagedTensorVersioned *produce(tp_tensor *d, int device_id, uint64_t flags) {
    static int64_t shape[1] = {4};
    DLManagedTensorVersioned *m = calloc(1, sizeof *m);
    m->version = (DLPackVersion){DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
    m->deleter = count_deleter;
    m->flags = flags;
    m->dl_tensor = (DLTensor){.data = tp_tensor_data(d), .device = {kDLCUDA, device_id}, .ndim = 1,
                              .dtype = {kDLFloat, 32, 1}, .shape = shape, .strides = NULL, .byte_offset = 4};
    return m;
}

static void test_foreign_cuda_memory_is_wrapped_and_its_deleter_runs_once(void) {
    tp_tensor *d = device_iota(0, 8);
    deleter_calls = 0;
    DLManagedTensorVersioned *m = produce(d, 0, 0);
    tp_tensor *t = tp_from_dlpack(&m);
    CHECK(t != NULL);
    CHECK(host_value(t, 0) == 1.0f && host_value(t, 3) == 4.0f);
    CHECK_EQ(deleter_calls, 0);
    tp_tensor_release(t);
    CHECK_EQ(deleter_calls, 1);
    /* read-only: copied on the device, the producer let go at once */
    m = produce(d, 0, DLPACK_FLAG_BITMASK_READ_ONLY);
    t = tp_from_dlpack(&m);
    CHECK(t != NULL);
    CHECK_EQ(deleter_calls, 2);
    CHECK_EQ(tp_tensor_device(t).type, TP_DEVICE_TYPE_CUDA);
    CHECK((char *)tp_tensor_data(t) != (char *)tp_tensor_data(d) + 4);
    CHECK(host_value(t, 1) == 2.0f);
    tp_tensor_release(t);
    CHECK_EQ(deleter_calls, 2);
    /* a device that does not exist: refused, deleter run once */
    m = produce(d, 5, 0);
    CHECK(tp_from_dlpack(&m) == NULL);
    CHECK_EQ(tp_last_status(), TP_STATUS_INVALID_ARGUMENT);
    CHECK_STR(tp_last_error(), "from_dlpack: CUDA device 5 does not exist (2 devices)");
    CHECK_EQ(deleter_calls, 3);
    tp_tensor_release(d);
}

int main(void) {
    tpfake_api fake = tpfake_open();
    if (!fake.reset) {
        fprintf(stderr, "this test needs the libcudart.so.13 test double on LD_LIBRARY_PATH\n");
        return 1;
    }
    RUN_TEST(test_cuda_tensor_round_trips_zero_copy_on_its_device);
    RUN_TEST(test_foreign_cuda_memory_is_wrapped_and_its_deleter_runs_once);
    return CHECK_DONE();
}
