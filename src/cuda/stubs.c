/*
 * src/cuda/stubs.c - include/tensorplay/cuda.h in a build without CUDA
 * (meson -Dcuda=disabled, or no nvcc): every call links and fails with
 * TP_STATUS_UNSUPPORTED ("TensorPlay was built without CUDA ..."), so a
 * program written for a GPU builds everywhere and says why it cannot run.
 * Compiled only when the real src/cuda is not.
 */
#include "../core/internal.h"
#include "tensorplay/cuda.h"

static tp_status no(void) {
    return tp__error(TP_STATUS_UNSUPPORTED, "TensorPlay was built without CUDA (meson -Dcuda=enabled)");
}

tp_status tp_cuda_device_count(int *out) {
    if (out) *out = 0;
    return no();
}
bool tp_cuda_is_available(void) { return false; }
tp_status tp_cuda_current_device(int *out) {
    if (out) *out = 0;
    return no();
}
tp_status tp_cuda_set_device(int index) { (void)index; return no(); }
tp_status tp_device_synchronize(tp_device device) { (void)device; return no(); }

tp_stream tp_stream_default(tp_device device) {
    tp_stream s = {device, 0};
    return s;
}
tp_stream tp_stream_current(tp_device device) { return tp_stream_default(device); }
tp_status tp_stream_set_current(tp_stream s) { (void)s; return no(); }
tp_status tp_stream_create(tp_device device, tp_stream *out) {
    (void)device, (void)out;
    return no();
}
tp_status tp_stream_destroy(tp_stream s) { (void)s; return no(); }
tp_status tp_stream_synchronize(tp_stream s) { (void)s; return no(); }
tp_status tp_stream_query(tp_stream s, bool *done) {
    (void)s, (void)done;
    return no();
}
tp_event *tp_event_create(tp_device device, bool enable_timing) {
    (void)device, (void)enable_timing;
    no();
    return NULL;
}
void tp_event_destroy(tp_event *e) { (void)e; }
tp_status tp_event_record(tp_event *e, tp_stream s) { (void)e, (void)s; return no(); }
tp_status tp_event_query(tp_event *e, bool *done) { (void)e, (void)done; return no(); }
tp_status tp_event_synchronize(tp_event *e) { (void)e; return no(); }
tp_status tp_event_elapsed_ms(tp_event *a, tp_event *b, float *out) {
    (void)a, (void)b, (void)out;
    return no();
}
tp_status tp_stream_wait_event(tp_stream s, tp_event *e) { (void)s, (void)e; return no(); }

static tp_status refuse_allocate(tp_allocator *self, size_t nbytes, tp_data_ptr *out) {
    (void)self, (void)nbytes, (void)out;
    return no();
}
static tp_allocator raw = {.name = "cuda", .allocate = refuse_allocate};
static tp_allocator caching = {.name = "cuda_caching", .allocate = refuse_allocate};
static tp_allocator async = {.name = "cuda_async", .allocate = refuse_allocate};
static tp_allocator host = {.name = "cuda_host", .allocate = refuse_allocate};
tp_allocator *tp_cuda_raw_allocator(void) { return &raw; }
tp_allocator *tp_cuda_caching_allocator(void) { return &caching; }
tp_allocator *tp_cuda_async_allocator(void) { return &async; }
tp_allocator *tp_cuda_host_allocator(void) { return &host; }

const char *tp_cuda_allocator_backend(void) {
    no();
    return NULL;
}
tp_status tp_tensor_record_stream(tp_tensor *t, tp_stream s) { (void)t, (void)s; return no(); }
tp_status tp_cuda_empty_cache(void) { return no(); }
tp_caching_allocator *tp_cuda_caching_allocator_of(tp_device device) {
    (void)device;
    no();
    return NULL;
}
tp_status tp_cuda_async_pool_stats(tp_device device, tp_cuda_pool_stats *out) {
    (void)device, (void)out;
    return no();
}
tp_status tp_cuda_async_set_release_threshold(tp_device device, uint64_t bytes) {
    (void)device, (void)bytes;
    return no();
}
