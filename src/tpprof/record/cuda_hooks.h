// cuda_hooks.h: the CUDA entry points tpprof wraps, and where their real
// functions are kept (record/cuda_runtime.c, record/cuda_driver.c,
// record/procaddr.c).
//
// Each hooked entry point is an exported function of libtpprof.so with the
// entry point's own name (a program or library that links CUDA dynamically
// calls it), and the same function is what procaddr.c hands out, in place of
// the real one, from dlsym, dlvsym, cuGetProcAddress and
// cudaGetDriverEntryPoint(ByVersion) (how the static runtime and NVIDIA's
// libraries reach the driver). Its real function is kept in a slot: the
// first real pointer a lookup returned for that name, else (a direct call)
// the next definition after libtpprof.so (RTLD_NEXT). A slot never holds a
// pointer into libtpprof.so.
#ifndef TPPROF_RECORD_CUDA_HOOKS_H
#define TPPROF_RECORD_CUDA_HOOKS_H

#include <stdint.h>

#include "base/base.h"

struct tpprof_cuhook {
    const char *name;
    void *wrapper;
    _Atomic(void *) *real; // the slot
};

// The two tables (NULL name ends each).
TPPROF_HIDDEN extern const struct tpprof_cuhook tpprof_cuda_runtime_hooks[];
TPPROF_HIDDEN extern const struct tpprof_cuhook tpprof_cuda_driver_hooks[];

// The hook named `name`, or NULL.
TPPROF_HIDDEN const struct tpprof_cuhook *tpprof_cuhook_find(const char *name);
// What to hand out for `real`, the function a lookup found for hook h: h's
// wrapper (real kept in its slot), or real itself (NULL, a pointer into
// libtpprof.so, or a function other than the one the slot already holds).
TPPROF_HIDDEN void *tpprof_cuhook_wrap(const struct tpprof_cuhook *h, void *real);
// The real function of hook h: its slot, else the next definition after
// libtpprof.so; NULL when there is none (the hook then returns an error).
TPPROF_HIDDEN void *tpprof_cuhook_real(const struct tpprof_cuhook *h);
// Whether p points into libtpprof.so.
TPPROF_HIDDEN int tpprof_in_self(const void *p);

// The C library's dlsym and dlvsym (procaddr.c finds them in libc's own
// symbol table, since libtpprof.so defines both names).
TPPROF_HIDDEN void *tpprof_real_dlsym(void *handle, const char *name);

// A handle of the library the runtime's hooks were found in by a lookup
// (dlsym on a handle: libtensorplay opens libcudart RTLD_LOCAL), for the
// runtime's own queries (cudaGetDevice & co.); NULL: RTLD_NEXT.
TPPROF_HIDDEN extern _Atomic(void *) tpprof_cudart_handle;

// Wraps what a driver entry-point lookup returned in *pfn for base name
// `symbol` (cuGetProcAddress's naming: "cuMemAlloc", version 3020 gives
// cuMemAlloc_v2), requested version and flags (bit 1: per-thread default
// stream, which gives the _ptsz forms).
TPPROF_HIDDEN void tpprof_cu_wrap_entry(const char *symbol, void **pfn, int version, uint64_t flags);

// cudaGetDevice / the current context's device, for a record (-1 unknown).
TPPROF_HIDDEN int32_t tpprof_cudart_device(void);
TPPROF_HIDDEN int32_t tpprof_cu_device(void);

#endif
