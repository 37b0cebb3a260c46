/*
 * src/cuda/cuda_internal.h - what the files of src/cuda share beyond the
 * CUDA table: the allocator a new device storage comes from, pinned-memory
 * detection, and the kernel launcher.  Private to src/cuda.
 */
#ifndef TENSORPLAY_CUDA_INTERNAL_H
#define TENSORPLAY_CUDA_INTERNAL_H

#include "cuda_api.h"

#define TP__CUDA_MAX_DEVICES 64

/* The allocator a new storage on the current device comes from: the
 * registry's CUDA slot, with the built-in dispatcher resolved to the backend
 * it stands for (so a storage names "cuda_caching" or "cuda_async").
 * NULL with the error set on a bad TP_ALLOC_CONF. */
tp_allocator *tp__cuda_storage_allocator(void);

/* True for a storage from tp_cuda_host_allocator(). */
bool tp__cuda_is_pinned(const tp_storage *s);

/* record_stream for the async backend: false if dp is not one of its blocks. */
bool tp__cuda_async_record_stream(const tp_data_ptr *dp, cudaStream_t stream);

/* Launches kernel `name` of the embedded fatbin on the current device and
 * stream with a 1-D grid covering n threads (block 256).  args as for
 * cudaLaunchKernel.  n == 0 launches nothing. */
tp_status tp__cuda_launch(const char *name, int64_t n, void **args);
/* The same with an explicit grid and block size. */
tp_status tp__cuda_launch_grid(const char *name, unsigned grid, unsigned block, void **args);

/* tp_caching_event_ops.annotate for the CUDA caching allocators: NVTX
 * memory-API heaps and regions (nvtx.c). */
void tp__cuda_nvtx_annotate(void *user, uint32_t action, uint64_t segment, uint64_t segment_size,
                            uint64_t block, uint64_t block_size);

#endif
