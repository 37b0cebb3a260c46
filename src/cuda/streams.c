/*
 * src/cuda/streams.c - streams and events: the per-thread current stream of
 * each device, creation, synchronization and waits.
 *
 * The current stream is thread-local and starts as the legacy default
 * stream (handle 0) on every device, as c10's getCurrentCUDAStream does.
 * This file keeps no registry of streams: a tp_stream is a value and the
 * caller owns the streams it creates.
 */
#include <stdlib.h>

#include "cuda_api.h"

#define TP__MAX_DEVICES 64

static _Thread_local cudaStream_t current[TP__MAX_DEVICES];

cudaStream_t tp__cuda_current_stream(int index) {
    return index >= 0 && index < TP__MAX_DEVICES ? current[index] : NULL;
}

static int resolve(tp_device d) {
    if (d.type != TP_DEVICE_TYPE_CUDA) return -1;
    return d.index < 0 ? tp__cuda_current_index() : d.index;
}

tp_stream tp_stream_default(tp_device device) {
    tp_stream s = {tp_device_cuda(resolve(device)), 0};
    return s;
}

tp_stream tp_stream_current(tp_device device) {
    int index = resolve(device);
    tp_stream s = {tp_device_cuda(index), (uint64_t)(uintptr_t)tp__cuda_current_stream(index)};
    return s;
}

static int check_stream(tp_stream s, const char *what) {
    int index = tp__cuda_check_device(s.device, what);
    if (index >= TP__MAX_DEVICES) {
        tp__error(TP_STATUS_UNSUPPORTED, "%s: cuda:%d is past the %d devices supported", what,
                  index, TP__MAX_DEVICES);
        return -1;
    }
    return index;
}

tp_status tp_stream_set_current(tp_stream s) {
    int index = check_stream(s, "stream_set_current");
    if (index < 0) return tp_last_status();
    current[index] = (cudaStream_t)(uintptr_t)s.handle;
    return TP_STATUS_OK;
}

tp_status tp_stream_create(tp_device device, tp_stream *out) {
    if (!out) return tp__error(TP_STATUS_INVALID_ARGUMENT, "stream_create: NULL output");
    tp_stream probe = {device, 0};
    int index = check_stream(probe, "stream_create");
    if (index < 0) return tp_last_status();
    const tp__cuda_api *c = tp__cuda();
    int prev = tp__cuda_device_enter(index);
    if (prev < 0) return tp_last_status();
    cudaStream_t h = NULL;
    cudaError_t err = c->cudaStreamCreateWithFlags(&h, cudaStreamNonBlocking);
    tp__cuda_device_restore(prev);
    if (err != cudaSuccess) return tp__cuda_error(err, "cudaStreamCreateWithFlags on cuda:%d", index);
    out->device = tp_device_cuda(index);
    out->handle = (uint64_t)(uintptr_t)h;
    return TP_STATUS_OK;
}

tp_status tp_stream_destroy(tp_stream s) {
    int index = check_stream(s, "stream_destroy");
    if (index < 0) return tp_last_status();
    if (s.handle == 0)
        return tp__error(TP_STATUS_INVALID_ARGUMENT, "stream_destroy: the default stream");
    if (current[index] == (cudaStream_t)(uintptr_t)s.handle) current[index] = NULL;
    cudaError_t err = tp__cuda()->cudaStreamDestroy((cudaStream_t)(uintptr_t)s.handle);
    if (err != cudaSuccess) return tp__cuda_error(err, "cudaStreamDestroy");
    return TP_STATUS_OK;
}

tp_status tp_stream_synchronize(tp_stream s) {
    if (check_stream(s, "stream_synchronize") < 0) return tp_last_status();
    cudaError_t err = tp__cuda()->cudaStreamSynchronize((cudaStream_t)(uintptr_t)s.handle);
    if (err != cudaSuccess) return tp__cuda_error(err, "cudaStreamSynchronize");
    return TP_STATUS_OK;
}

tp_status tp_stream_query(tp_stream s, bool *done) {
    if (!done) return tp__error(TP_STATUS_INVALID_ARGUMENT, "stream_query: NULL output");
    if (check_stream(s, "stream_query") < 0) return tp_last_status();
    cudaError_t err = tp__cuda()->cudaStreamQuery((cudaStream_t)(uintptr_t)s.handle);
    if (err == cudaErrorNotReady) {
        tp__cuda()->cudaGetLastError();
        *done = false;
        return TP_STATUS_OK;
    }
    if (err != cudaSuccess) return tp__cuda_error(err, "cudaStreamQuery");
    *done = true;
    return TP_STATUS_OK;
}

// ----------------------------------------------------------------------------
// events

struct tp_event {
    cudaEvent_t handle;
    int device;
};

tp_event *tp_event_create(tp_device device, bool enable_timing) {
    tp_stream probe = {device, 0};
    int index = check_stream(probe, "event_create");
    if (index < 0) return NULL;
    tp_event *e = calloc(1, sizeof *e);
    if (!e) {
        tp__error(TP_STATUS_OUT_OF_MEMORY, "event_create: no memory");
        return NULL;
    }
    int prev = tp__cuda_device_enter(index);
    if (prev < 0) return free(e), NULL;
    cudaError_t err = tp__cuda()->cudaEventCreateWithFlags(
        &e->handle, enable_timing ? cudaEventDefault : cudaEventDisableTiming);
    tp__cuda_device_restore(prev);
    if (err != cudaSuccess) {
        tp__cuda_error(err, "cudaEventCreateWithFlags on cuda:%d", index);
        free(e);
        return NULL;
    }
    e->device = index;
    return e;
}

void tp_event_destroy(tp_event *e) {
    if (!e) return;
    tp__cuda()->cudaEventDestroy(e->handle);
    free(e);
}

tp_status tp_event_record(tp_event *e, tp_stream s) {
    if (!e) return tp__error(TP_STATUS_INVALID_ARGUMENT, "event_record: NULL event");
    int index = check_stream(s, "event_record");
    if (index < 0) return tp_last_status();
    if (index != e->device)
        return tp__error(TP_STATUS_INVALID_ARGUMENT,
                         "event_record: the event is on cuda:%d, the stream on cuda:%d", e->device,
                         index);
    cudaError_t err = tp__cuda()->cudaEventRecord(e->handle, (cudaStream_t)(uintptr_t)s.handle);
    if (err != cudaSuccess) return tp__cuda_error(err, "cudaEventRecord");
    return TP_STATUS_OK;
}

tp_status tp_event_query(tp_event *e, bool *done) {
    if (!e || !done) return tp__error(TP_STATUS_INVALID_ARGUMENT, "event_query: NULL argument");
    cudaError_t err = tp__cuda()->cudaEventQuery(e->handle);
    if (err == cudaErrorNotReady) {
        tp__cuda()->cudaGetLastError();
        *done = false;
        return TP_STATUS_OK;
    }
    if (err != cudaSuccess) return tp__cuda_error(err, "cudaEventQuery");
    *done = true;
    return TP_STATUS_OK;
}

tp_status tp_event_synchronize(tp_event *e) {
    if (!e) return tp__error(TP_STATUS_INVALID_ARGUMENT, "event_synchronize: NULL event");
    cudaError_t err = tp__cuda()->cudaEventSynchronize(e->handle);
    if (err != cudaSuccess) return tp__cuda_error(err, "cudaEventSynchronize");
    return TP_STATUS_OK;
}

tp_status tp_event_elapsed_ms(tp_event *start, tp_event *end, float *out) {
    if (!start || !end || !out)
        return tp__error(TP_STATUS_INVALID_ARGUMENT, "event_elapsed_ms: NULL argument");
    cudaError_t err = tp__cuda()->cudaEventElapsedTime(out, start->handle, end->handle);
    if (err != cudaSuccess) return tp__cuda_error(err, "cudaEventElapsedTime");
    return TP_STATUS_OK;
}

tp_status tp_stream_wait_event(tp_stream s, tp_event *e) {
    if (!e) return tp__error(TP_STATUS_INVALID_ARGUMENT, "stream_wait_event: NULL event");
    if (check_stream(s, "stream_wait_event") < 0) return tp_last_status();
    cudaError_t err =
        tp__cuda()->cudaStreamWaitEvent((cudaStream_t)(uintptr_t)s.handle, e->handle, 0);
    if (err != cudaSuccess) return tp__cuda_error(err, "cudaStreamWaitEvent");
    return TP_STATUS_OK;
}
