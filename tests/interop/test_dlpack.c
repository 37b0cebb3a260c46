/*
 * tests/interop/test_dlpack.c - DLPack export and import
 * (src/interop/dlpack.c): zero-copy both ways, strides and offsets kept,
 * the deleter run exactly once, consumed structs not reusable, version and
 * read-only handling, bad input.  The exchange with NumPy is
 * test_dlpack_numpy.py.
 */
#include <stdlib.h>
#include <string.h>

#include "tensorplay/tensorplay.h"
#include "../check.h"

#define SHAPE(...) ((int64_t[]){__VA_ARGS__})

static double get(const tp_tensor *t, int64_t i, int64_t j) {
    double v = -1;
    tp_tensor_get(t, (int64_t[]){i, j}, &v);
    return v;
}

static void test_export_is_zero_copy_with_offset_and_strides(void) {
    tp_tensor *a = tp_arange(0, 12, 1, TP_DTYPE_FLOAT32);
    tp_tensor *m = tp_tensor_view(a, 2, SHAPE(3, 4));
    tp_tensor *v = tp_tensor_slice(m, 0, 1, 3, 1);
    tp_tensor *t = tp_tensor_transpose(v, 0, 1); /* (4, 2), strides (1, 4), offset 4 */
    uint32_t before = tp_tensor_use_count(t);
    DLManagedTensorVersioned *d = tp_to_dlpack(t);
    CHECK(d != NULL);
    CHECK_EQ(d->version.major, 1);
    CHECK_EQ(d->version.minor, 1);
    CHECK_EQ(d->flags, 0);
    CHECK_EQ(d->dl_tensor.device.device_type, kDLCPU);
    CHECK_EQ(d->dl_tensor.ndim, 2);
    CHECK(d->dl_tensor.dtype.code == kDLFloat && d->dl_tensor.dtype.bits == 32 && d->dl_tensor.dtype.lanes == 1);
    CHECK(d->dl_tensor.shape[0] == 4 && d->dl_tensor.shape[1] == 2);
    CHECK(d->dl_tensor.strides[0] == 1 && d->dl_tensor.strides[1] == 4);
    CHECK(d->dl_tensor.data == tp_storage_data(tp_tensor_storage(a)));
    CHECK_EQ(d->dl_tensor.byte_offset, 16);
    CHECK_EQ(tp_tensor_use_count(t), before + 1); /* the struct holds t */
    float *p = (float *)((char *)d->dl_tensor.data + d->dl_tensor.byte_offset);
    CHECK(p[1 * 1 + 1 * 4] == 9.0f); /* t[1][1] = m[2][1] */
    tp_tensor_release(t);
    tp_tensor_release(v);
    tp_tensor_release(m);
    tp_tensor_release(a);
    CHECK(p[0] == 4.0f); /* the struct keeps the memory alive */
    d->deleter(d);       /* releases the last reference */
}

static int deleter_calls;
static void count_deleter(DLManagedTensorVersioned *self) {
    deleter_calls++;
    free(self->dl_tensor.data);
    free(self->dl_tensor.shape);
    free(self);
}

/* A producer's tensor: 2x3 doubles 0..5 with row-major strides NULL. */
static DLManagedTensorVersioned *produce(uint64_t flags, uint32_t major) {
    DLManagedTensorVersioned *m = calloc(1, sizeof *m);
    double *data = malloc(6 * sizeof *data);
    int64_t *shape = malloc(2 * sizeof *shape);
    for (int i = 0; i < 6; i++) data[i] = i;
    shape[0] = 2;
    shape[1] = 3;
    m->version = (DLPackVersion){major, 0};
    m->deleter = count_deleter;
    m->flags = flags;
    m->dl_tensor = (DLTensor){.data = data, .device = {kDLCPU, 0}, .ndim = 2,
                              .dtype = {kDLFloat, 64, 1}, .shape = shape, .strides = NULL};
    return m;
}

static void test_import_is_zero_copy_and_runs_the_deleter_once(void) {
    deleter_calls = 0;
    DLManagedTensorVersioned *m = produce(0, 1);
    double *data = m->dl_tensor.data;
    tp_tensor *t = tp_from_dlpack(&m);
    CHECK(t != NULL);
    CHECK(m == NULL); /* consumed */
    CHECK(tp_tensor_data(t) == data);
    CHECK_EQ(tp_tensor_dtype(t), TP_DTYPE_FLOAT64);
    CHECK(get(t, 1, 2) == 5.0);
    data[4] = 40;
    CHECK(get(t, 1, 1) == 40.0);
    tp_tensor *v = tp_tensor_slice(t, 1, 1, 3, 1);
    tp_tensor_release(t);
    CHECK_EQ(deleter_calls, 0); /* the view keeps the storage */
    tp_tensor_release(v);
    CHECK_EQ(deleter_calls, 1);
    /* consumed: a second import is refused */
    CHECK(tp_from_dlpack(&m) == NULL);
    CHECK_STR(tp_last_error(), "a DLPack tensor can be consumed only once (got NULL)");
    CHECK_EQ(deleter_calls, 1);
}

static void test_round_trip_through_our_own_export(void) {
    tp_tensor *a = tp_arange(0, 6, 1, TP_DTYPE_INT64);
    DLManagedTensorVersioned *d = tp_to_dlpack(a);
    tp_tensor *b = tp_from_dlpack(&d);
    CHECK(b && tp_tensor_data(b) == tp_tensor_data(a));
    CHECK(tp_tensor_storage(b) != tp_tensor_storage(a));
    CHECK_EQ(tp_tensor_use_count(a), 2); /* the export holds a until b's storage goes */
    tp_tensor_release(b);
    CHECK_EQ(tp_tensor_use_count(a), 1);
    tp_tensor_release(a);
    /* unversioned */
    tp_tensor *c = tp_ones(1, SHAPE(3), TP_DTYPE_BOOL);
    DLManagedTensor *u = tp_to_dlpack_unversioned(c);
    CHECK(u->dl_tensor.dtype.code == kDLBool && u->dl_tensor.dtype.bits == 8);
    tp_tensor *e = tp_from_dlpack_unversioned(&u);
    CHECK(e && u == NULL && tp_tensor_dtype(e) == TP_DTYPE_BOOL);
    tp_tensor_release(e);
    tp_tensor_release(c);
}

static void test_other_major_version_only_calls_the_deleter(void) {
    deleter_calls = 0;
    DLManagedTensorVersioned *m = produce(0, 2);
    CHECK(tp_from_dlpack(&m) == NULL);
    CHECK_EQ(tp_last_status(), TP_STATUS_UNSUPPORTED);
    CHECK_STR(tp_last_error(), "from_dlpack: DLPack version 2.0 is not supported (major version 1 expected)");
    CHECK_EQ(deleter_calls, 1);
    CHECK(m == NULL);
}

static void test_read_only_is_copied(void) {
    deleter_calls = 0;
    DLManagedTensorVersioned *m = produce(DLPACK_FLAG_BITMASK_READ_ONLY, 1);
    tp_tensor *t = tp_from_dlpack(&m);
    CHECK(t != NULL);
    CHECK_EQ(deleter_calls, 1); /* copied, producer let go at once */
    CHECK(get(t, 1, 0) == 3.0);
    tp_tensor_release(t);
    CHECK_EQ(deleter_calls, 1);
}

static void test_bad_imports_fail_and_still_delete(void) {
    deleter_calls = 0;
    DLManagedTensorVersioned *m = produce(0, 1);
    m->dl_tensor.device.device_type = kDLOpenCL;
    CHECK(tp_from_dlpack(&m) == NULL);
    CHECK_STR(tp_last_error(), "from_dlpack: device type 4 is not supported (CPU and CUDA only)");
    m = produce(0, 1);
    m->dl_tensor.dtype.lanes = 4;
    CHECK(tp_from_dlpack(&m) == NULL);
    CHECK_EQ(tp_last_status(), TP_STATUS_UNSUPPORTED);
    m = produce(0, 1);
    m->dl_tensor.dtype = (DLDataType){kDLComplex, 64, 1};
    CHECK(tp_from_dlpack(&m) == NULL);
    CHECK_STR(tp_last_error(), "from_dlpack: unsupported dtype (code 5, 64 bits)");
    m = produce(0, 1);
    int64_t strides[2] = {-3, 1};
    m->dl_tensor.strides = strides;
    CHECK(tp_from_dlpack(&m) == NULL);
    CHECK_CONTAINS(tp_last_error(), "negative stride");
    CHECK_EQ(deleter_calls, 4);
    CHECK(tp_to_dlpack(NULL) == NULL);
    CHECK(tp_from_dlpack(NULL) == NULL);
}

int main(void) {
    RUN_TEST(test_export_is_zero_copy_with_offset_and_strides);
    RUN_TEST(test_import_is_zero_copy_and_runs_the_deleter_once);
    RUN_TEST(test_round_trip_through_our_own_export);
    RUN_TEST(test_other_major_version_only_calls_the_deleter);
    RUN_TEST(test_read_only_is_copied);
    RUN_TEST(test_bad_imports_fail_and_still_delete);
    return CHECK_DONE();
}
