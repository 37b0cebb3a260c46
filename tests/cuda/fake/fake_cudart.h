/*
 * tests/cuda/fake/fake_cudart.h - the control side of the CUDA runtime test
 * double (fake_cudart.c, built as libcudart.so.13 in its own directory).
 *
 * A test puts that directory on LD_LIBRARY_PATH; libtensorplay's
 * dlopen("libcudart.so.13") then gets the double, which hands out host
 * memory as "device" memory, copies with memcpy, and completes events and
 * streams only when the test says so.  The test reaches these controls
 * with tpfake_open() (dlopen of the same SONAME: the same loaded copy).
 *
 * Kernels run on the host, one thread per launch (emulated_kernels.cpp),
 * unless set_kernels(0).
 *
 * Model: devices 0..n-1 (TPFAKE_DEVICES, default 1), each with a byte
 * limit for cudaMalloc + pool memory (default 1 GiB).  cudaEventRecord
 * gives an event a ticket on its stream; the event is complete once its
 * stream's completed ticket reaches it (tpfake_stream_complete, or any
 * synchronize call, which completes everything it waits for).  With
 * auto_complete on, every recorded event is complete at once.
 */
#ifndef TPFAKE_CUDART_H
#define TPFAKE_CUDART_H

#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>

typedef struct tpfake_api {
    void (*reset)(void);                         /* frees nothing the program holds; resets counters */
    void (*set_device_count)(int n);             /* 0 = cudaErrorNoDevice */
    void (*set_memory_limit)(int device, size_t bytes);
    size_t (*device_bytes_in_use)(int device);   /* cudaMalloc'd + pool reserved */
    int (*live_allocations)(int device);         /* cudaMalloc'd blocks not freed */
    void (*set_auto_complete)(int on);
    void (*stream_complete)(void *stream);       /* everything recorded on it so far */
    void (*complete_all)(void);
    int (*pending_events)(void);                 /* recorded, not complete, not destroyed */
    int (*live_streams)(void);
    int (*live_events)(void);
    uint64_t (*calls)(const char *name);         /* how often a cuda* function was called */
    void (*fail_next)(const char *name, int cuda_error); /* that function's next call fails */
    void (*set_kernels)(int on); /* 0: launches fail with cudaErrorNotSupported */
} tpfake_api;

/* The controls of the double the process has loaded (or loads it), or
 * zeroes if libcudart.so.13 is the real one. */
static inline tpfake_api tpfake_open(void) {
    tpfake_api a = {0};
    void *h = dlopen("libcudart.so.13", RTLD_NOW | RTLD_LOCAL);
    if (!h) return a;
#define TPFAKE_SYM(f) *(void **)&a.f = dlsym(h, "tpfake_" #f)
    TPFAKE_SYM(reset); TPFAKE_SYM(set_device_count); TPFAKE_SYM(set_memory_limit);
    TPFAKE_SYM(device_bytes_in_use); TPFAKE_SYM(live_allocations); TPFAKE_SYM(set_auto_complete);
    TPFAKE_SYM(stream_complete); TPFAKE_SYM(complete_all); TPFAKE_SYM(pending_events);
    TPFAKE_SYM(live_streams); TPFAKE_SYM(live_events); TPFAKE_SYM(calls); TPFAKE_SYM(fail_next);
    TPFAKE_SYM(set_kernels);
#undef TPFAKE_SYM
    return a;
}

#endif
