// device.h: device memory events, the hot path's side (record/device.c).
//
// What the CUDA hooks (record/cuda_runtime.c, record/cuda_driver.c, reached
// directly or through record/procaddr.c's wrapped lookups) and any other
// recorder of device memory (the CUPTI backend) call: one function, which
// appends one TPPROF_OP_DEVICE record to the calling thread's ring. The
// writer turns those into device_events, device_blocks and device_timeline
// (writer/device.c, store/device.c; docs/schema.md, docs/device.md).
//
//     // after the real call returned r:
//     tpprof_device_record(TPPROF_DEV_OP_ALLOC, TPPROF_DEV_KIND_DEVICE, dev, 0, 0,
//                          (uint64_t)(uintptr_t)ptr, size, r, "cudaMalloc", 1);
//
// Nothing here takes a lock or calls CUDA; `api` must have static storage
// (its pointer goes into the ring and is read by the writer later).
#ifndef TPPROF_RECORD_DEVICE_H
#define TPPROF_RECORD_DEVICE_H

#include <stdint.h>

#include "base/base.h"

// device_events.op
enum tpprof_dev_op {
    TPPROF_DEV_OP_ALLOC = 1,
    TPPROF_DEV_OP_FREE = 2,
    TPPROF_DEV_OP_POOL_CREATE = 3,
    TPPROF_DEV_OP_POOL_DESTROY = 4,
    TPPROF_DEV_OP_POOL_TRIM = 5,
    TPPROF_DEV_OP_DEVICE_RESET = 6, // also a context destroyed (api says which)
    TPPROF_DEV_OP_VA_RESERVE = 7,
    TPPROF_DEV_OP_VA_FREE = 8,
    TPPROF_DEV_OP_PHYS_CREATE = 9,
    TPPROF_DEV_OP_PHYS_RELEASE = 10,
    TPPROF_DEV_OP_MAP = 11,
    TPPROF_DEV_OP_UNMAP = 12,
    TPPROF_DEV_OP_COUNT = 13,
};

// kind_code: 1..8, in the order of the kind names ('cuda_device', ...);
// the kinds table's id is TPPROF_DEV_KIND_BASE + kind_code.
enum tpprof_dev_kind {
    TPPROF_DEV_KIND_DEVICE = 1,
    TPPROF_DEV_KIND_ASYNC = 2,
    TPPROF_DEV_KIND_MANAGED = 3,
    TPPROF_DEV_KIND_PITCH = 4,
    TPPROF_DEV_KIND_PINNED_HOST = 5,
    TPPROF_DEV_KIND_VMM_RESERVE = 6,
    TPPROF_DEV_KIND_VMM_PHYSICAL = 7,
    TPPROF_DEV_KIND_VMM_MAPPING = 8,
    TPPROF_DEV_KIND_COUNT = 9,
};
// kinds.id of kind_code k: after the host kinds (record/format.h).
#define TPPROF_DEV_KIND_BASE 12

// Records one device memory event made by the calling thread, with its host
// stack when with_stack (the stack of the hook's caller: tpprof's own frames
// are left out). op and kind_code as above; device: the ordinal, -1 unknown
// (pinned host); stream, pool: the handles (0 none); address: the device
// pointer (a physical handle's value for PHYS_*); result: the status the call
// returned (0 success: anything else is recorded as a failed call, never as
// memory). Does nothing while recording is off or the thread is inside
// tpprof. Never fails, never blocks beyond a full ring's wait.
TPPROF_HIDDEN void tpprof_device_record(uint32_t op, uint32_t kind_code, int32_t device, uint64_t stream, uint64_t pool,
                                        uint64_t address, uint64_t size, int32_t result, const char *api,
                                        int with_stack);
// The same, also carrying a sample of what the pool `pool` holds reserved
// (bytes; UINT64_MAX: no sample), for the device timeline's reserved column.
TPPROF_HIDDEN void tpprof_device_record_pool(uint32_t op, uint32_t kind_code, int32_t device, uint64_t stream,
                                             uint64_t pool, uint64_t address, uint64_t size, int32_t result,
                                             const char *api, int with_stack, uint64_t reserved);

// 'interpose' once a CUDA entry point went through a tpprof hook, 'cupti'
// once the CUPTI backend subscribed (it overrides), else 'none':
// meta.device_capture.
TPPROF_HIDDEN extern _Atomic(const char *) tpprof_device_capture;
// Driver entry points handed out wrapped (cuGetProcAddress, dlsym,
// cudaGetDriverEntryPoint): meta.device_entry_points_wrapped.
TPPROF_HIDDEN extern _Atomic uint64_t tpprof_device_wrapped;

// The calling thread's depth inside device API calls (the hooks'): only the
// outermost call records (a dynamic cudaMalloc calls cuMemAlloc_v2).
TPPROF_HIDDEN extern __thread int tpprof_device_depth TPPROF_TLS;

// Set by the CUPTI backend (record/cupti.c) once it subscribed: from then on
// it records every device memory call, and the interposition hooks record
// none (each call is counted once). Never cleared.
TPPROF_HIDDEN extern atomic_bool tpprof_device_by_cupti;

// Whether an interposition hook entered now records its call (at its exit):
// the thread's outermost device call, outside tpprof, while recording, and
// no CUPTI backend recording device calls. The one test both hook files
// (cuda_runtime.c, cuda_driver.c) make. A hook that passed it keeps
// tpprof_device_depth raised over its real call, which is how the CUPTI
// backend, started inside that call (the program's first call runs cuInit,
// which loads it), knows to leave that one call to the hook.
static inline int tpprof_device_hook_records(void) {
    return tpprof_device_depth == 0 && !tpprof_guard && atomic_load_explicit(&tpprof_active, memory_order_relaxed) &&
           !atomic_load_explicit(&tpprof_device_by_cupti, memory_order_relaxed);
}

// A hook's two halves around its real call, the shape of every hook in both
// hook files:
//
//     if (!tpprof_device_hook_enter()) return real(p, n);   // not recorded
//     int r = real(p, n);
//     int32_t dev = tpprof_cu_device();                       // asked inside
//     return tpprof_device_hook_leave(r, TPPROF_DEV_OP_ALLOC, TPPROF_DEV_KIND_DEVICE, dev,
//                                     r == 0 && p ? *p : 0, n, "cuMemAlloc_v2");
//
// enter: whether this call records (tpprof_device_hook_records), and if so
// raises tpprof_device_depth over it. leave: lowers it again, records one
// event (stream and pool 0; _pool: a pool call, kind TPPROF_DEV_KIND_ASYNC,
// with what the pool holds reserved or UINT64_MAX) and gives r back. Inline:
// a hook costs what it did written out by hand.
static inline bool tpprof_device_hook_enter(void) {
    if (!tpprof_device_hook_records()) return false;
    tpprof_device_depth++;
    return true;
}
static inline int tpprof_device_hook_leave(int r, uint32_t op, uint32_t kind_code, int32_t device, uint64_t address,
                                           uint64_t size, const char *api) {
    tpprof_device_depth--;
    tpprof_device_record(op, kind_code, device, 0, 0, address, size, r, api, 1);
    return r;
}
static inline int tpprof_device_hook_leave_pool(int r, uint32_t op, int32_t device, uint64_t stream, uint64_t pool,
                                                uint64_t address, uint64_t size, const char *api, uint64_t reserved) {
    tpprof_device_depth--;
    tpprof_device_record_pool(op, TPPROF_DEV_KIND_ASYNC, device, stream, pool, address, size, r, api, 1, reserved);
    return r;
}

#endif
