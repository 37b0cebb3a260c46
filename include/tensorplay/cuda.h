/*
 * tensorplay/cuda.h - the CUDA device: availability, streams and events,
 * its allocators and their statistics.  In a build without CUDA (meson
 * -Dcuda=disabled, or no nvcc) every function here still links and fails
 * with TP_STATUS_UNSUPPORTED ("TensorPlay was built without CUDA ...").
 * The device-generic calls (tp_tensor_to, tp_zeros_on, ...) are in device.h.
 *
 *     int n = 0;
 *     if (tp_cuda_device_count(&n) != TP_STATUS_OK)   // "no CUDA device: cudaErrorNoDevice: ..."
 *         return fprintf(stderr, "%s\n", tp_last_error()), 77;
 *     tp_stream side;
 *     tp_stream_create(tp_device_cuda(0), &side);
 *     tp_tensor *x = tp_zeros_on(tp_device_cuda(0), 1, (int64_t[]){1 << 20}, TP_DTYPE_FLOAT32);
 *     tp_stream_set_current(side);  ... ops on x run on `side` ...
 *     tp_tensor_record_stream(x, side);   // x's block waits for side before reuse
 *     tp_stream_set_current(tp_stream_default(tp_device_cuda(0)));
 *     tp_tensor_release(x);               // freed now, reused once side passes this point
 *     tp_stream_destroy(side);
 *
 * libtensorplay reaches the CUDA runtime only through dlopen("libcudart.so.13")
 * (and libcublas.so.13 for matmul): it links against neither, so a CUDA
 * build still runs its CPU paths where neither is installed.  Every CUDA
 * failure is a tp_status with the CUDA error's name and text in
 * tp_last_error(); none aborts.
 *
 * Streams: a tp_stream is a value (device + cudaStream_t as a number),
 * like c10::Stream.  Each thread has a current stream per device, at first
 * the legacy default stream (handle 0, which synchronizes with every other
 * blocking stream); ops, copies and allocations use it.
 *
 * Allocators (each a tp_allocator; storages say which one made them):
 *   "cuda"          cudaMalloc/cudaFree, no caching (tp_cuda_raw_allocator)
 *   "cuda_caching"  the caching allocator of caching_allocator.h on
 *                   cudaMalloc segments, one per device, blocks kept per
 *                   stream (the default)
 *   "cuda_async"    cudaMallocAsync/cudaFreeAsync on the device's default
 *                   memory pool (TP_ALLOC_CONF=backend:cudaMallocAsync)
 *   "cuda_host"     pinned host memory (cudaHostAlloc) for non-blocking copies
 * The CUDA slot of the allocator registry holds "cuda_caching" or
 * "cuda_async" as TP_ALLOC_CONF's backend says, read on first use.
 */
#ifndef TENSORPLAY_CUDA_H
#define TENSORPLAY_CUDA_H

#include <stdbool.h>
#include <stdint.h>
#include "tensorplay/allocator.h"
#include "tensorplay/caching_allocator.h"
#include "tensorplay/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

// ----------------------------------------------------------------------------
// devices

/* How many CUDA devices this process sees.  Fails with
 * TP_STATUS_UNSUPPORTED and "no CUDA device: <cuda error name>: <text>"
 * when libcudart cannot be loaded, there is no driver or no device. */
tp_status tp_cuda_device_count(int *out);
/* tp_cuda_device_count() succeeded with at least one device. */
bool tp_cuda_is_available(void);
/* The calling thread's current device / makes index current (cudaSetDevice). */
tp_status tp_cuda_current_device(int *out);
tp_status tp_cuda_set_device(int index);
/* Blocks until everything queued on the device is done. */
tp_status tp_device_synchronize(tp_device device);

// ----------------------------------------------------------------------------
// streams

typedef struct tp_stream {
    tp_device device;
    uint64_t handle; /* the cudaStream_t; 0 = the legacy default stream */
} tp_stream;

/* The legacy default stream of device (index -1 = current device). */
tp_stream tp_stream_default(tp_device device);
/* This thread's current stream on device (index -1 = current device). */
tp_stream tp_stream_current(tp_device device);
/* Makes s this thread's current stream on s.device. */
tp_status tp_stream_set_current(tp_stream s);
/* A new non-blocking stream on device (cudaStreamNonBlocking: it does not
 * wait for the legacy default stream).  Destroy it with tp_stream_destroy
 * after its work is done (tensors recorded on it keep no reference). */
tp_status tp_stream_create(tp_device device, tp_stream *out);
tp_status tp_stream_destroy(tp_stream s); /* the default stream is refused */
tp_status tp_stream_synchronize(tp_stream s);
/* *done = everything queued on s has finished. */
tp_status tp_stream_query(tp_stream s, bool *done);

typedef struct tp_event tp_event;
/* A new event on device (timing off unless asked); NULL with the error set. */
tp_event *tp_event_create(tp_device device, bool enable_timing);
void tp_event_destroy(tp_event *e); /* NULL is ignored */
/* Captures the work queued on s so far. */
tp_status tp_event_record(tp_event *e, tp_stream s);
tp_status tp_event_query(tp_event *e, bool *done);
tp_status tp_event_synchronize(tp_event *e);
/* Milliseconds between two completed timing events. */
tp_status tp_event_elapsed_ms(tp_event *start, tp_event *end, float *out);
/* Work queued on s after this call waits for e. */
tp_status tp_stream_wait_event(tp_stream s, tp_event *e);

// ----------------------------------------------------------------------------
// allocators

tp_allocator *tp_cuda_raw_allocator(void);     /* borrowed, static */
tp_allocator *tp_cuda_caching_allocator(void); /* borrowed, static */
tp_allocator *tp_cuda_async_allocator(void);   /* borrowed, static */
tp_allocator *tp_cuda_host_allocator(void);    /* borrowed, static */

/* "native" (the caching allocator) or "cudaMallocAsync": the backend the
 * registry's CUDA slot uses, from TP_ALLOC_CONF (read once).  NULL with the
 * error set on a bad TP_ALLOC_CONF. */
const char *tp_cuda_allocator_backend(void);

/* PyTorch's record_stream: t's storage is in use on s, so when it is freed
 * its block is not reused (caching) or released (async) before the work
 * queued on s by then has finished.  Not needed for t's own allocation
 * stream.  A storage from another allocator is left alone (raw cudaFree
 * waits for the device anyway). */
tp_status tp_tensor_record_stream(tp_tensor *t, tp_stream s);

/* Returns the cached, wholly free segments of every device's caching
 * allocator to cudaFree, after waiting for the events of blocks freed
 * while in use on other streams; trims the async pools to their used size. */
tp_status tp_cuda_empty_cache(void);

/* The caching allocator of device (borrowed; NULL with the error set if the
 * device does not exist): its stats, snapshot and config as in
 * caching_allocator.h.  Created on first use. */
tp_caching_allocator *tp_cuda_caching_allocator_of(tp_device device);

/* The async backend's pool on a device (cudaMemPoolAttr* figures). */
typedef struct tp_cuda_pool_stats {
    uint64_t reserved_bytes;    /* memory the pool holds from the driver */
    uint64_t reserved_peak;
    uint64_t used_bytes;        /* of it, handed out and not freed */
    uint64_t used_peak;
    uint64_t release_threshold; /* reserved memory kept past a synchronize */
    uint64_t alloc_count, free_count, num_ooms;
} tp_cuda_pool_stats;
tp_status tp_cuda_async_pool_stats(tp_device device, tp_cuda_pool_stats *out);
/* Bytes the pool keeps cached across synchronizations (default 0, as
 * CUDA's; UINT64_MAX keeps everything). */
tp_status tp_cuda_async_set_release_threshold(tp_device device, uint64_t bytes);

#ifdef __cplusplus
}
#endif
#endif
