/*
 * src/cuda/cuda_api.h - the one door between the runtime and the CUDA
 * runtime library: a table of libcudart (and cuBLAS) function pointers,
 * filled once from dlopen("libcudart.so.13").
 *
 * Why a table and not plain calls: libtensorplay must load and run its CPU
 * paths on machines without CUDA, must turn "no driver / no device" into a
 * tp_status instead of a loader error, and its tests must be able to put a
 * test double in place of libcudart (tests/cuda/fake/, found through
 * LD_LIBRARY_PATH because it carries the real SONAME).  Nothing else in
 * src/cuda calls a cuda* function directly; device code is loaded as a
 * fatbin through the same table (cudaLibraryLoadData), so the library has
 * no link-time dependency on cudart at all.
 *
 * This file must not grow policy: allocators, streams and ops live in
 * their own files and only call through tp__cuda().
 */
#ifndef TENSORPLAY_CUDA_API_H
#define TENSORPLAY_CUDA_API_H

#include <stdbool.h>
#include <cuda_runtime_api.h>
#include <cublas_v2.h>

#include "../core/internal.h"
#include "tensorplay/cuda.h"

/* Every libcudart function the runtime uses; all are required. */
#define TP__CUDART_FUNCS(X)                                                          \
    X(cudaGetErrorName) X(cudaGetErrorString) X(cudaGetLastError)                    \
    X(cudaRuntimeGetVersion) X(cudaDriverGetVersion)                                 \
    X(cudaGetDeviceCount) X(cudaSetDevice) X(cudaGetDevice) X(cudaDeviceGetAttribute) \
    X(cudaMemGetInfo) X(cudaDeviceSynchronize)                                       \
    X(cudaMalloc) X(cudaFree) X(cudaHostAlloc) X(cudaFreeHost)                       \
    X(cudaMemcpy) X(cudaMemcpyAsync) X(cudaMemsetAsync)                              \
    X(cudaStreamCreateWithFlags) X(cudaStreamDestroy) X(cudaStreamSynchronize)       \
    X(cudaStreamQuery) X(cudaStreamWaitEvent)                                        \
    X(cudaEventCreateWithFlags) X(cudaEventDestroy) X(cudaEventRecord)               \
    X(cudaEventQuery) X(cudaEventSynchronize) X(cudaEventElapsedTime)                \
    X(cudaMallocAsync) X(cudaFreeAsync) X(cudaDeviceGetDefaultMemPool)               \
    X(cudaMemPoolSetAttribute) X(cudaMemPoolGetAttribute) X(cudaMemPoolTrimTo)       \
    X(cudaLibraryLoadData) X(cudaLibraryUnload) X(cudaLibraryGetKernel)              \
    X(cudaLaunchKernel)

/* cuBLAS, loaded on the first matmul (optional: without it matmul fails). */
#define TP__CUBLAS_FUNCS(X)                                                          \
    X(cublasCreate_v2) X(cublasDestroy_v2) X(cublasSetStream_v2)                     \
    X(cublasSetWorkspace_v2) X(cublasGemmEx) X(cublasGemmStridedBatchedEx)           \
    X(cublasGetStatusName) X(cublasGetStatusString) X(cublasSetMathMode)

typedef struct tp__cuda_api {
#define TP__CUDA_FIELD(name) __typeof__(name) *name;
    TP__CUDART_FUNCS(TP__CUDA_FIELD)
    int device_count;
    int runtime_version, driver_version;
    void *handle;
} tp__cuda_api;

typedef struct tp__cublas_api {
    TP__CUBLAS_FUNCS(TP__CUDA_FIELD)
#undef TP__CUDA_FIELD
    void *handle;
} tp__cublas_api;

/* The table, or NULL with the error set ("no CUDA device: <name>: <text>")
 * when libcudart cannot be loaded or sees no device.  Decided once per
 * process; cheap after the first call. */
const tp__cuda_api *tp__cuda(void);

/* The cuBLAS table, or NULL with the error set. */
const tp__cublas_api *tp__cublas(void);

/* Records err of `what` (printf-style context) as the thread's error:
 * "CUDA error: cudaErrorMemoryAllocation: out of memory (cudaMalloc of 64
 * bytes on cuda:0)".  Returns the status it maps to (OUT_OF_MEMORY for
 * allocation failures, INVALID_ARGUMENT for a bad device ordinal or value,
 * UNSUPPORTED for no device or driver, INTERNAL for the rest). */
tp_status tp__cuda_error(cudaError_t err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Checks that device is cuda:N with 0 <= N < count (index -1 = current),
 * returns the index or -1 with the error set. */
int tp__cuda_check_device(tp_device device, const char *what);

/* The thread's current CUDA device (cudaGetDevice), 0 if it cannot say. */
int tp__cuda_current_index(void);

/* Device guard: makes `index` current, returns the previous one (or -1 with
 * the error set); restore with tp__cuda_device_restore(prev). */
int tp__cuda_device_enter(int index);
void tp__cuda_device_restore(int prev);

/* The current stream of this thread on device index (legacy default = 0). */
cudaStream_t tp__cuda_current_stream(int index);

#endif
