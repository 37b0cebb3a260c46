/*
 * src/cuda/cuda_api.c - loads libcudart.so.13 (and, on demand, cuBLAS) into
 * the function tables of cuda_api.h, turns CUDA errors into tp_status, and
 * keeps the per-thread device and stream state.
 *
 * The library is found by its SONAME first (so LD_LIBRARY_PATH can put the
 * test double of tests/cuda/fake in front), then at the toolkit path the
 * build saw.  Loading happens once; a failure is remembered and reported
 * the same way on every later call.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cuda_api.h"

#ifndef TP_CUDART_PATH
#define TP_CUDART_PATH ""
#endif
#ifndef TP_CUBLAS_PATH
#define TP_CUBLAS_PATH ""
#endif

// ----------------------------------------------------------------------------
// errors

static tp_status status_of(cudaError_t err) {
    switch (err) {
    case cudaErrorMemoryAllocation: return TP_STATUS_OUT_OF_MEMORY;
    case cudaErrorInvalidDevice:
    case cudaErrorInvalidValue: return TP_STATUS_INVALID_ARGUMENT;
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorStubLibrary:
    case cudaErrorNotSupported: return TP_STATUS_UNSUPPORTED;
    default: return TP_STATUS_INTERNAL;
    }
}

static tp__cuda_api api;
static const tp__cuda_api *api_ok;
static char load_error[512];

static const char *err_name(cudaError_t err) {
    const char *s = api.cudaGetErrorName ? api.cudaGetErrorName(err) : NULL;
    return s ? s : "cudaError?";
}
static const char *err_text(cudaError_t err) {
    const char *s = api.cudaGetErrorString ? api.cudaGetErrorString(err) : NULL;
    return s ? s : "unknown CUDA error";
}

tp_status tp__cuda_error(cudaError_t err, const char *fmt, ...) {
    char ctx[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx, sizeof ctx, fmt, ap);
    va_end(ap);
    /* A sticky error must not leak into the next, unrelated call. */
    if (api.cudaGetLastError) api.cudaGetLastError();
    return tp__error(status_of(err), "CUDA error: %s: %s (%s)", err_name(err), err_text(err), ctx);
}

// ----------------------------------------------------------------------------
// loading

static void *open_first(const char *soname, const char *path) {
    void *h = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
    if (!h && path[0]) h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    return h;
}

static void load_cudart(void) {
    void *h = open_first("libcudart.so.13", TP_CUDART_PATH);
    if (!h) {
        const char *why = dlerror();
        snprintf(load_error, sizeof load_error,
                 "no CUDA device: libcudart.so.13 could not be loaded: %s", why ? why : "?");
        return;
    }
#define TP__LOAD(name)                                                                         \
    if (!(api.name = (__typeof__(api.name))dlsym(h, #name))) {                                 \
        snprintf(load_error, sizeof load_error, "no CUDA device: libcudart.so.13 lacks " #name); \
        memset(&api, 0, sizeof api);                                                           \
        dlclose(h);                                                                            \
        return;                                                                                \
    }
    TP__CUDART_FUNCS(TP__LOAD)
    api.handle = h;
    api.cudaRuntimeGetVersion(&api.runtime_version);
    api.cudaDriverGetVersion(&api.driver_version);
    int n = 0;
    cudaError_t err = api.cudaGetDeviceCount(&n);
    if (err == cudaSuccess && n <= 0) err = cudaErrorNoDevice;
    if (err != cudaSuccess) {
        api.cudaGetLastError();
        snprintf(load_error, sizeof load_error, "no CUDA device: %s: %s", err_name(err),
                 err_text(err));
        return; /* the library stays loaded: its error texts are still useful */
    }
    api.device_count = n;
    api_ok = &api;
}

static pthread_once_t load_once = PTHREAD_ONCE_INIT;

const tp__cuda_api *tp__cuda(void) {
    pthread_once(&load_once, load_cudart);
    if (!api_ok) tp__error(TP_STATUS_UNSUPPORTED, "%s", load_error);
    return api_ok;
}

static tp__cublas_api blas;
static const tp__cublas_api *blas_ok;
static char blas_error[512];

static void load_cublas(void) {
    void *h = open_first("libcublas.so.13", TP_CUBLAS_PATH);
    if (!h) {
        const char *why = dlerror();
        snprintf(blas_error, sizeof blas_error, "cuBLAS unavailable: %s", why ? why : "?");
        return;
    }
#define TP__LOAD_BLAS(name)                                                               \
    if (!(blas.name = (__typeof__(blas.name))dlsym(h, #name))) {                          \
        snprintf(blas_error, sizeof blas_error, "cuBLAS unavailable: it lacks " #name);   \
        dlclose(h);                                                                       \
        return;                                                                           \
    }
    TP__CUBLAS_FUNCS(TP__LOAD_BLAS)
    blas.handle = h;
    blas_ok = &blas;
}

static pthread_once_t blas_once = PTHREAD_ONCE_INIT;

const tp__cublas_api *tp__cublas(void) {
    pthread_once(&blas_once, load_cublas);
    if (!blas_ok) tp__error(TP_STATUS_UNSUPPORTED, "%s", blas_error);
    return blas_ok;
}

// ----------------------------------------------------------------------------
// devices

tp_status tp_cuda_device_count(int *out) {
    if (!out) return tp__error(TP_STATUS_INVALID_ARGUMENT, "cuda_device_count: NULL output");
    *out = 0;
    const tp__cuda_api *c = tp__cuda();
    if (!c) return TP_STATUS_UNSUPPORTED;
    *out = c->device_count;
    return TP_STATUS_OK;
}

bool tp_cuda_is_available(void) {
    pthread_once(&load_once, load_cudart);
    return api_ok != NULL;
}

int tp__cuda_current_index(void) {
    int d = 0;
    if (api_ok && api.cudaGetDevice(&d) != cudaSuccess) {
        api.cudaGetLastError();
        d = 0;
    }
    return d;
}

int tp__cuda_check_device(tp_device device, const char *what) {
    const tp__cuda_api *c = tp__cuda();
    if (!c) return -1;
    if (device.type != TP_DEVICE_TYPE_CUDA) {
        tp__error(TP_STATUS_INVALID_ARGUMENT, "%s: not a CUDA device", what);
        return -1;
    }
    int index = device.index < 0 ? tp__cuda_current_index() : device.index;
    if (index >= c->device_count) {
        tp__error(TP_STATUS_INVALID_ARGUMENT,
                  "%s: CUDA error: cudaErrorInvalidDevice: invalid device ordinal (cuda:%d, but "
                  "%d device%s)", what, index, c->device_count, c->device_count == 1 ? "" : "s");
        return -1;
    }
    return index;
}

tp_status tp_cuda_current_device(int *out) {
    if (!out) return tp__error(TP_STATUS_INVALID_ARGUMENT, "cuda_current_device: NULL output");
    if (!tp__cuda()) return TP_STATUS_UNSUPPORTED;
    *out = tp__cuda_current_index();
    return TP_STATUS_OK;
}

tp_status tp_cuda_set_device(int index) {
    if (index < 0)
        return tp__error(TP_STATUS_INVALID_ARGUMENT, "cuda_set_device: negative device %d", index);
    if (tp__cuda_check_device(tp_device_cuda(index), "cuda_set_device") < 0)
        return tp_last_status();
    cudaError_t err = api.cudaSetDevice(index);
    if (err != cudaSuccess) return tp__cuda_error(err, "cudaSetDevice(%d)", index);
    return TP_STATUS_OK;
}

int tp__cuda_device_enter(int index) {
    int prev = tp__cuda_current_index();
    if (prev == index) return prev;
    cudaError_t err = api.cudaSetDevice(index);
    if (err != cudaSuccess) {
        tp__cuda_error(err, "cudaSetDevice(%d)", index);
        return -1;
    }
    return prev;
}

void tp__cuda_device_restore(int prev) {
    if (prev >= 0 && tp__cuda_current_index() != prev) api.cudaSetDevice(prev);
}

tp_status tp_device_synchronize(tp_device device) {
    int index = tp__cuda_check_device(device, "device_synchronize");
    if (index < 0) return tp_last_status();
    int prev = tp__cuda_device_enter(index);
    if (prev < 0) return tp_last_status();
    cudaError_t err = api.cudaDeviceSynchronize();
    tp__cuda_device_restore(prev);
    if (err != cudaSuccess) return tp__cuda_error(err, "cudaDeviceSynchronize on cuda:%d", index);
    return TP_STATUS_OK;
}
