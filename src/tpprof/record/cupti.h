// cupti.h: the optional CUPTI backend (`tpprof run --cupti`): libtpprof.so
// loaded by the CUDA driver as its injection library (CUDA_INJECTION64_PATH),
// so it sees the device memory calls of any program however it reaches the
// driver (a static cudart, cuBLAS, a framework), with the caller's stack.
//
// What it does, in InitializeInjection (the driver calls it once, from
// cuInit): dlopen libcupti (never linked: libtpprof.so must load where there
// is no CUDA), subscribe to the runtime and driver memory API callbacks
// (cupti_decode.c lists them) and enable the MEMORY2 and MEMORY_POOL activity
// records. Each API call is recorded at its exit, on the calling thread, with
// its stack (record/device.h), outermost call only: a cudaMalloc is one
// allocation, not also the cuMemAlloc_v2 it makes. Activity records are device
// truth: joined to the calls by correlation id, and recorded (without a
// stack) only when no callback recorded their call. Buffers are flushed at
// exit (cuptiActivityFlushAll, forced), before the recorder's final write:
// by an atexit handler of its own (registered after libcupti's, so it runs
// before libcupti tears itself down), and by the recorder's _exit,
// quick_exit and exec paths (process/lifecycle.c), which run no atexit
// handler.
// While it records, the interposition hooks record nothing
// (tpprof_device_hook_records, record/device.h).
//
// When libcupti cannot be loaded or another subscriber owns CUPTI (nsys, ncu,
// a framework's profiler: CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED),
// it says so in one line on stderr and stays off: the interposition hooks
// record as without --cupti. It never changes what a call returns.
#ifndef TPPROF_RECORD_CUPTI_H
#define TPPROF_RECORD_CUPTI_H

#include <stdbool.h>

#ifdef TPPROF_HAVE_CUPTI // built with the CUPTI headers (src/tpprof/meson.build)

// The injection entry the CUDA driver calls. Returns 1 (success) always:
// a failure of tpprof's must not fail the program's cuInit.
__attribute__((visibility("default"))) int InitializeInjection(void);

// Whether the backend subscribed and records device calls (the
// interposition hooks then leave them to it, so none is counted twice).
bool tpprof_cupti_active(void);

// Flush CUPTI's activity buffers into the recording now (forced): at _exit,
// quick_exit and exec, before the recorder's final write (exit has its
// atexit handler). Does nothing when not active. Not async-signal-safe.
void tpprof_cupti_flush(void);

#else // no backend in this build: never active, nothing to flush

static inline bool tpprof_cupti_active(void) { return false; }
static inline void tpprof_cupti_flush(void) {}

#endif
#endif
