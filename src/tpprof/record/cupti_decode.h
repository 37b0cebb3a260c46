// cupti_decode.h: what CUPTI hands the CUPTI backend (record/cupti.c), turned
// into device events: an API callback's parameters at its exit, and the
// MEMORY2 and MEMORY_POOL activity records of a completed buffer.
//
// Pure functions over CUPTI's own structs (the layouts of the CUPTI headers
// the build found): no CUPTI call, no allocation, no state, so they are
// tested on hand-built callback data and activity buffers.
//
//   tpprof_cupti_event e;
//   if (tpprof_cupti_decode_callback(domain, cbid, cbdata, &e))
//       record e with the calling thread's stack;
//   tpprof_cupti_walk(buffer, valid, cuptiActivityGetNextRecord, sink, arg);
#ifndef TPPROF_RECORD_CUPTI_DECODE_H
#define TPPROF_RECORD_CUPTI_DECODE_H

#include <cupti.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

// One device event, in the terms of record/device.h.
typedef struct tpprof_cupti_event {
    uint32_t op;         // TPPROF_DEV_OP_*
    uint32_t kind_code;  // TPPROF_DEV_KIND_*
    int32_t device;      // -1 unknown (the decoder never knows it from callback data) or pinned host
    int32_t result;      // the call's status (activity records: 0, they describe what happened)
    uint64_t stream, pool, address, size;
    uint32_t correlation; // CUPTI's correlation id, joining callbacks and activity records
    uint64_t time_ns;     // activity records: CUPTI's timestamp; callbacks: 0
    const char *api;      // static string: the entry point, or "cupti:<kind>" for an activity record
} tpprof_cupti_event;

// The memory callbacks the backend subscribes to, per domain (ids of
// cupti_runtime_cbid.h and cupti_driver_cbid.h), n of each.
extern const CUpti_CallbackId tpprof_cupti_runtime_cbids[];
extern const size_t tpprof_cupti_runtime_ncbids;
extern const CUpti_CallbackId tpprof_cupti_driver_cbids[];
extern const size_t tpprof_cupti_driver_ncbids;

// A memory API callback at CUPTI_API_EXIT: true and *e filled (address read
// from the call's output pointer when it succeeded, 0 when it failed),
// false for a callback that is not one of the memory APIs above, or an
// ENTER site. cb is borrowed (valid only inside the callback).
bool tpprof_cupti_decode_callback(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const CUpti_CallbackData *cb,
                                  tpprof_cupti_event *e);

// The context a cuCtxDestroy_v2 callback destroys (its parameter), else
// NULL: the backend asks its device at ENTER, while it still exists.
CUcontext tpprof_cupti_destroyed_context(CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                                         const CUpti_CallbackData *cb);

// One activity record: true and *e filled for a MEMORY2 allocation or
// release and for a MEMORY_POOL create, destroy or trim; false for any other
// kind or operation (skipped). r is borrowed.
bool tpprof_cupti_decode_activity(const CUpti_Activity *r, tpprof_cupti_event *e);

// CUPTI's record iterator: cuptiActivityGetNextRecord's signature.
typedef CUptiResult (*tpprof_cupti_next_fn)(uint8_t *buffer, size_t valid, CUpti_Activity **record);

// Walk the records of a completed buffer with `next`, calling sink for each
// decoded event. Returns how many events were decoded; *skipped (may be
// NULL) gets the records that were not memory events.
size_t tpprof_cupti_walk(uint8_t *buffer, size_t valid, tpprof_cupti_next_fn next,
                         void (*sink)(const tpprof_cupti_event *e, void *arg), void *arg, size_t *skipped);

#endif
