// device_entry.h: the recorder's hot-path entry for one device (CUDA) memory
// event, as the CUPTI backend (record/cupti.c) calls it.
//
// THE DECLARATION BELOW IS NOT DEFINED ON THIS BRANCH. It is the one the
// interposition half declares in record/device.h (branch wip-21c), which
// implements it: the event goes into the calling thread's ring with the time,
// the thread and, when with_stack is set, the calling thread's stack (the
// same stack tables as host allocations). At merge this header is replaced by
// an include of record/device.h; until then the unit tests link a test
// implementation (tests/tpprof/cupti/).
#ifndef TPPROF_RECORD_DEVICE_ENTRY_H
#define TPPROF_RECORD_DEVICE_ENTRY_H

#include <stdint.h>

// device_events.op (docs/schema.md)
enum {
    TPPROF_DEVICE_OP_ALLOC = 1,
    TPPROF_DEVICE_OP_FREE = 2,
    TPPROF_DEVICE_OP_POOL_CREATE = 3,
    TPPROF_DEVICE_OP_POOL_DESTROY = 4,
    TPPROF_DEVICE_OP_POOL_TRIM = 5,
    TPPROF_DEVICE_OP_DEVICE_RESET = 6,
    TPPROF_DEVICE_OP_VA_RESERVE = 7,
    TPPROF_DEVICE_OP_VA_FREE = 8,
    TPPROF_DEVICE_OP_PHYS_CREATE = 9,
    TPPROF_DEVICE_OP_PHYS_RELEASE = 10,
    TPPROF_DEVICE_OP_MAP = 11,
    TPPROF_DEVICE_OP_UNMAP = 12,
};

// kind_code: the device kinds in this order (their ids in `kinds` are the
// recorder's).
enum {
    TPPROF_DEVICE_KIND_DEVICE = 1,       // cuda_device
    TPPROF_DEVICE_KIND_ASYNC = 2,        // cuda_async
    TPPROF_DEVICE_KIND_MANAGED = 3,      // cuda_managed
    TPPROF_DEVICE_KIND_PITCH = 4,        // cuda_pitch
    TPPROF_DEVICE_KIND_PINNED_HOST = 5,  // cuda_pinned_host
    TPPROF_DEVICE_KIND_VMM_RESERVE = 6,  // cuda_vmm_reserve
    TPPROF_DEVICE_KIND_VMM_PHYSICAL = 7, // cuda_vmm_physical
    TPPROF_DEVICE_KIND_VMM_MAPPING = 8,  // cuda_vmm_mapping
};

// Record one device event. device: ordinal, -1 unknown or pinned host.
// result: the status the call returned (0 success). api: a static string,
// the entry point the program called. Safe on any thread; never blocks.
void tpprof_device_record(uint32_t op, uint32_t kind_code, int32_t device, uint64_t stream, uint64_t pool,
                          uint64_t address, uint64_t size, int32_t result, const char *api, int with_stack);

#endif
