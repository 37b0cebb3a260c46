// device.c: device memory events into the rings. THE HOT PATH (of CUDA
// programs: called once per device allocation or free, after the real call).
//
// tpprof_device_record is the one way a device event enters the recording,
// for the interposing hooks (cuda_runtime.c, cuda_driver.c) and any other
// recorder (the CUPTI backend). It takes the same guard as the malloc hooks,
// captures the caller's stack, and appends one fixed-size TPPROF_OP_DEVICE
// record; no lock, no syscall, no CUDA call. The writer applies it
// (writer/device.c). What device a call ran on, and what a pool holds, is
// asked of CUDA by the hooks themselves (cuda_runtime.c, cuda_driver.c),
// before they call this.
#define _GNU_SOURCE
#include "record/device.h"
#include "record/format.h"
#include "record/order.h"
#include "record/rings.h"
#include "record/stacks.h"

_Atomic(const char *) tpprof_device_capture;
_Atomic uint64_t tpprof_device_wrapped;
__thread int tpprof_device_depth TPPROF_TLS;
atomic_bool tpprof_device_by_cupti;

// noinline, so the stack walk starts at a frame of tpprof's (left out) and
// not inside the caller's inlined body.
__attribute__((noinline)) void tpprof_device_record_pool(uint32_t op, uint32_t kind_code, int32_t device,
                                                         uint64_t stream, uint64_t pool, uint64_t address,
                                                         uint64_t size, int32_t result, const char *api,
                                                         int with_stack, uint64_t reserved) {
    if (tpprof_guard || !atomic_load_explicit(&tpprof_active, memory_order_relaxed)) return;
    if (op == 0 || op >= TPPROF_DEV_OP_COUNT || kind_code == 0 || kind_code >= TPPROF_DEV_KIND_COUNT) return;
    tpprof_guard = TPPROF_GUARD_HOOK;
    struct tpprof_thread *t = tpprof_self ? tpprof_self : tpprof_thread_get();
    if (!t) {
        atomic_fetch_add_explicit(&tpprof_unrecorded_events, 1, memory_order_relaxed);
        tpprof_guard = 0;
        return;
    }
    uint32_t sid = with_stack ? tpprof_capture_at(tpprof_cfg.depth, (uintptr_t)__builtin_frame_address(0)) : 0;
    if (tpprof_ring_reserve(t, TPPROF_DEVICE_WORDS + 1)) {
        // Ordered with the other events on the address (a free on another
        // thread is applied after the allocation it frees), and exactly
        // against every other thread's events when big, as host blocks are.
        // In full mode every record ends with a timestamp word the merge
        // reads (format.h), this one too.
        uint64_t w[TPPROF_DEVICE_WORDS + 1];
        w[0] = tpprof_hdr(tpprof_order_tag(tpprof_stripe_of(address), size >= TPPROF_BIG_BYTES), TPPROF_OP_DEVICE, 0);
        w[1] = (uint64_t)op | (uint64_t)kind_code << 8 | (uint64_t)(uint32_t)device << 32;
        w[2] = stream;
        w[3] = pool;
        w[4] = address;
        w[5] = size;
        w[6] = (uint64_t)(uint32_t)result | (uint64_t)sid << 32;
        w[7] = (uint64_t)(uintptr_t)api;
        w[8] = tpprof_now_ns();
        w[9] = reserved;
        int n = TPPROF_DEVICE_WORDS;
        if (tpprof_cfg.full) w[n++] = w[8];
        tpprof_ring_put(t, w, n);
    }
    tpprof_guard = 0;
}

void tpprof_device_record(uint32_t op, uint32_t kind_code, int32_t device, uint64_t stream, uint64_t pool,
                          uint64_t address, uint64_t size, int32_t result, const char *api, int with_stack) {
    tpprof_device_record_pool(op, kind_code, device, stream, pool, address, size, result, api, with_stack,
                              UINT64_MAX);
}
