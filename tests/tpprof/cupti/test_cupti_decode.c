// test_cupti_decode.c: the CUPTI decoder (record/cupti_decode.c) on
// hand-built activity buffers in the CUPTI headers' own layouts
// (CUpti_ActivityMemory4, CUpti_ActivityMemoryPool3) and hand-built callback
// data with CUPTI's generated parameter structs: what each becomes, what is
// skipped, and that a buffer is walked to its end and no further.
//
// Usage: test_cupti_decode SCENARIO (one meson test per scenario).
#define _GNU_SOURCE
#include "record/cupti_decode.h"

#include "record/device.h"
#include "../../check.h"

#include <dlfcn.h>
#include <stdlib.h>

// ---------------------------------------------------------------------------
// Hand-built buffers

// 8-byte aligned, as CUPTI's buffers are.
static _Alignas(8) uint8_t buffer[4096];
static size_t used;

static CUpti_ActivityMemory4 *add_memory(CUpti_ActivityMemoryOperationType op, CUpti_ActivityMemoryKind kind,
                                         uint32_t corr, uint64_t address, uint64_t bytes) {
    CUpti_ActivityMemory4 *m = (CUpti_ActivityMemory4 *)(buffer + used);
    used += sizeof *m;
    memset(m, 0, sizeof *m);
    m->kind = CUPTI_ACTIVITY_KIND_MEMORY2;
    m->memoryOperationType = op;
    m->memoryKind = kind;
    m->correlationId = corr;
    m->address = address;
    m->bytes = bytes;
    m->timestamp = 1000 + corr;
    m->deviceId = 1;
    m->streamId = 7;
    return m;
}

static CUpti_ActivityMemoryPool3 *add_pool(CUpti_ActivityMemoryPoolOperationType op, uint32_t corr, uint64_t address,
                                           uint64_t size) {
    CUpti_ActivityMemoryPool3 *m = (CUpti_ActivityMemoryPool3 *)(buffer + used);
    used += sizeof *m;
    memset(m, 0, sizeof *m);
    m->kind = CUPTI_ACTIVITY_KIND_MEMORY_POOL;
    m->memoryPoolOperationType = op;
    m->memoryPoolType = CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL;
    m->correlationId = corr;
    m->deviceId = 2;
    m->address = address;
    m->size = size;
    m->timestamp = 5000;
    return m;
}

// A record of a kind the backend never enables, of a size only its kind
// tells: the walker below stops at it (as CUPTI walks it: by its kind).
static void add_kernel_marker(void) {
    CUpti_Activity *a = (CUpti_Activity *)(buffer + used);
    memset(a, 0, 64);
    a->kind = CUPTI_ACTIVITY_KIND_MARKER;
    used += 64;
}

// A walker with cuptiActivityGetNextRecord's contract for the two kinds
// decoded here (and 64-byte markers): *record NULL starts, then each record
// advances by its kind's size; the end is CUPTI_ERROR_MAX_LIMIT_REACHED.
static CUptiResult walk_by_size(uint8_t *buf, size_t valid, CUpti_Activity **record) {
    uint8_t *next = buf;
    if (*record) {
        size_t n = (*record)->kind == CUPTI_ACTIVITY_KIND_MEMORY2       ? sizeof(CUpti_ActivityMemory4)
                   : (*record)->kind == CUPTI_ACTIVITY_KIND_MEMORY_POOL ? sizeof(CUpti_ActivityMemoryPool3)
                   : (*record)->kind == CUPTI_ACTIVITY_KIND_MARKER      ? 64
                                                                         : 0;
        if (!n)
            return CUPTI_ERROR_INVALID_KIND;
        next = (uint8_t *)*record + n;
    }
    if (next + sizeof(CUpti_Activity) > buf + valid)
        return CUPTI_ERROR_MAX_LIMIT_REACHED;
    *record = (CUpti_Activity *)next;
    return CUPTI_SUCCESS;
}

static tpprof_cupti_event got[16];
static size_t ngot;

static void sink(const tpprof_cupti_event *e, void *arg) {
    (void)arg;
    if (ngot < 16)
        got[ngot++] = *e;
}

// ---------------------------------------------------------------------------
// Activity records

static void test_memory2_records_become_allocations_and_frees_by_kind(void) {
    used = ngot = 0;
    add_memory(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 10, 0x7f0000, 4096);
    CUpti_ActivityMemory4 *async =
        add_memory(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 11, 0x7f1000, 8192);
    async->isAsync = 1;
    async->memoryPoolConfig.memoryPoolType = CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL;
    async->memoryPoolConfig.address = 0xabc000;
    add_memory(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, CUPTI_ACTIVITY_MEMORY_KIND_MANAGED, 12, 0x7f2000, 100);
    add_memory(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, CUPTI_ACTIVITY_MEMORY_KIND_PINNED, 13, 0x5000, 64);
    add_memory(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 14, 0x7f0000, 4096);
    size_t skipped = 99;
    size_t n = tpprof_cupti_walk(buffer, used, walk_by_size, sink, NULL, &skipped);
    CHECK_EQ_U64(n, 5);
    CHECK_EQ_U64(skipped, 0);
    CHECK_EQ_U64(got[0].op, TPPROF_DEV_OP_ALLOC);
    CHECK_EQ_U64(got[0].kind_code, TPPROF_DEV_KIND_DEVICE);
    CHECK_EQ_U64(got[0].device, 1);
    CHECK_EQ_U64(got[0].address, 0x7f0000);
    CHECK_EQ_U64(got[0].size, 4096);
    CHECK_EQ_U64(got[0].correlation, 10);
    CHECK_EQ_U64(got[0].stream, 7);
    CHECK_EQ_U64(got[0].time_ns, 1010);
    CHECK_EQ_U64(got[0].pool, 0);
    CHECK_STR_EQ(got[0].api, "cupti:device");
    CHECK_EQ_U64(got[1].kind_code, TPPROF_DEV_KIND_ASYNC);
    CHECK_EQ_U64(got[1].pool, 0xabc000);
    CHECK_STR_EQ(got[1].api, "cupti:async");
    CHECK_EQ_U64(got[2].kind_code, TPPROF_DEV_KIND_MANAGED);
    CHECK_EQ_U64(got[3].kind_code, TPPROF_DEV_KIND_PINNED_HOST);
    CHECK_EQ_U64((uint64_t)(int64_t)got[3].device, (uint64_t)-1); // pinned host has no device
    CHECK_EQ_U64(got[4].op, TPPROF_DEV_OP_FREE);
    CHECK_EQ_U64(got[4].address, 0x7f0000);
}

static void test_pool_records_become_pool_events(void) {
    used = ngot = 0;
    add_pool(CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_CREATED, 20, 0xabc000, 0);
    add_pool(CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_TRIMMED, 21, 0xabc000, 1 << 20);
    add_pool(CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_DESTROYED, 22, 0xabc000, 0);
    CHECK_EQ_U64(tpprof_cupti_walk(buffer, used, walk_by_size, sink, NULL, NULL), 3);
    CHECK_EQ_U64(got[0].op, TPPROF_DEV_OP_POOL_CREATE);
    CHECK_EQ_U64(got[1].op, TPPROF_DEV_OP_POOL_TRIM);
    CHECK_EQ_U64(got[1].size, 1 << 20);
    CHECK_EQ_U64(got[2].op, TPPROF_DEV_OP_POOL_DESTROY);
    for (size_t i = 0; i < 3; i++) {
        CHECK_EQ_U64(got[i].pool, 0xabc000);
        CHECK_EQ_U64(got[i].device, 2);
        CHECK_EQ_U64(got[i].kind_code, TPPROF_DEV_KIND_ASYNC);
        CHECK_STR_EQ(got[i].api, "cupti:pool");
    }
}

static void test_other_records_are_skipped_and_the_walk_stops_at_the_end(void) {
    used = ngot = 0;
    add_memory(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE, 30, 0x1000, 10);
    add_memory(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_INVALID, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 31, 0x2000, 10);
    add_kernel_marker();
    add_pool(CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_INVALID, 32, 0xabc000, 0);
    add_memory(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 33, 0x3000, 10);
    size_t skipped = 0;
    CHECK_EQ_U64(tpprof_cupti_walk(buffer, used, walk_by_size, sink, NULL, &skipped), 1);
    CHECK_EQ_U64(skipped, 4); // pageable host memory, no operation, a marker, a pool record without one
    CHECK_EQ_U64(got[0].correlation, 33);
    // valid cuts the last record off: it is not read.
    ngot = 0;
    CHECK_EQ_U64(tpprof_cupti_walk(buffer, used - sizeof(CUpti_ActivityMemory4), walk_by_size, sink, NULL, NULL), 0);
    // Nothing to walk.
    CHECK_EQ_U64(tpprof_cupti_walk(buffer, 0, walk_by_size, sink, NULL, NULL), 0);
    CHECK_EQ_U64(tpprof_cupti_walk(NULL, 100, walk_by_size, sink, NULL, NULL), 0);
    tpprof_cupti_event e;
    CHECK(!tpprof_cupti_decode_activity(NULL, &e));
}

// The real libcupti's walker on the same hand-built buffer, where the
// toolkit's libcupti is installed (it walks without a driver): the layouts
// the decoder was built with are the ones CUPTI uses. Skipped without it.
static void test_real_cupti_walks_the_hand_built_buffer(void) {
    void *h = dlopen("libcupti.so.13", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        h = dlopen("/usr/local/cuda/lib64/libcupti.so", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "skip: no libcupti here (%s)\n", dlerror());
        return;
    }
    tpprof_cupti_next_fn next = (tpprof_cupti_next_fn)dlsym(h, "cuptiActivityGetNextRecord");
    CHECK(next != NULL);
    if (!next)
        return;
    used = ngot = 0;
    add_memory(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 40, 0x7f0000, 4096);
    add_pool(CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_CREATED, 41, 0xabc000, 0);
    add_memory(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 42, 0x7f0000, 4096);
    CHECK_EQ_U64(tpprof_cupti_walk(buffer, used, next, sink, NULL, NULL), 3);
    CHECK_EQ_U64(got[0].correlation, 40);
    CHECK_EQ_U64(got[1].op, TPPROF_DEV_OP_POOL_CREATE);
    CHECK_EQ_U64(got[2].correlation, 42);
    CHECK_EQ_U64(got[2].op, TPPROF_DEV_OP_FREE);
}

// ---------------------------------------------------------------------------
// Callback data

static CUpti_CallbackData exit_site(const void *params, int *result, uint32_t corr) {
    return (CUpti_CallbackData){.callbackSite = CUPTI_API_EXIT, .functionParams = params,
                                .functionReturnValue = result, .correlationId = corr};
}

static void test_runtime_callbacks_read_their_parameters_at_exit(void) {
    tpprof_cupti_event e;
    int ok = 0, oom = 2;
    void *dev = (void *)0x7f0000;
    cudaMalloc_v3020_params m = {.devPtr = &dev, .size = 4096};
    CUpti_CallbackData cb = exit_site(&m, &ok, 5);
    CHECK(tpprof_cupti_decode_callback(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, &cb, &e));
    CHECK_EQ_U64(e.op, TPPROF_DEV_OP_ALLOC);
    CHECK_EQ_U64(e.kind_code, TPPROF_DEV_KIND_DEVICE);
    CHECK_EQ_U64(e.address, 0x7f0000);
    CHECK_EQ_U64(e.size, 4096);
    CHECK_EQ_U64(e.result, 0);
    CHECK_EQ_U64(e.correlation, 5);
    CHECK_STR_EQ(e.api, "cudaMalloc");
    // A failed call: its status, no address (the output was never written).
    cb = exit_site(&m, &oom, 6);
    CHECK(tpprof_cupti_decode_callback(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, &cb, &e));
    CHECK_EQ_U64(e.result, 2);
    CHECK_EQ_U64(e.address, 0);
    // Stream-ordered, per-thread default stream form.
    cudaMallocAsync_ptsz_v11020_params a = {.devPtr = &dev, .size = 512, .hStream = (cudaStream_t)0x55};
    cb = exit_site(&a, &ok, 7);
    CHECK(tpprof_cupti_decode_callback(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_ptsz_v11020,
                                       &cb, &e));
    CHECK_EQ_U64(e.kind_code, TPPROF_DEV_KIND_ASYNC);
    CHECK_EQ_U64(e.stream, 0x55);
    CHECK_STR_EQ(e.api, "cudaMallocAsync_ptsz");
    cudaFreeAsync_v11020_params f = {.devPtr = dev, .hStream = (cudaStream_t)0x55};
    cb = exit_site(&f, &ok, 8);
    CHECK(tpprof_cupti_decode_callback(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_v11020, &cb, &e));
    CHECK_EQ_U64(e.op, TPPROF_DEV_OP_FREE);
    CHECK_EQ_U64(e.address, 0x7f0000);
    // Pitched: the pitch the runtime chose times the rows.
    size_t pitch = 1024;
    cudaMallocPitch_v3020_params p = {.devPtr = &dev, .pitch = &pitch, .width = 1000, .height = 3};
    cb = exit_site(&p, &ok, 9);
    CHECK(tpprof_cupti_decode_callback(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMallocPitch_v3020, &cb, &e));
    CHECK_EQ_U64(e.kind_code, TPPROF_DEV_KIND_PITCH);
    CHECK_EQ_U64(e.size, 3072);
    // Pinned host memory and pools.
    void *host = (void *)0x5000;
    cudaHostAlloc_v3020_params h = {.pHost = &host, .size = 64};
    cb = exit_site(&h, &ok, 10);
    CHECK(tpprof_cupti_decode_callback(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaHostAlloc_v3020, &cb, &e));
    CHECK_EQ_U64(e.kind_code, TPPROF_DEV_KIND_PINNED_HOST);
    CHECK_EQ_U64(e.address, 0x5000);
    cudaMemPool_t pool = (cudaMemPool_t)0xabc000;
    cudaMemPoolTrimTo_v11020_params t = {.memPool = pool, .minBytesToKeep = 100};
    cb = exit_site(&t, &ok, 11);
    CHECK(tpprof_cupti_decode_callback(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMemPoolTrimTo_v11020, &cb, &e));
    CHECK_EQ_U64(e.op, TPPROF_DEV_OP_POOL_TRIM);
    CHECK_EQ_U64(e.pool, 0xabc000);
    CHECK_EQ_U64(e.size, 100);
}

static void test_driver_callbacks_cover_vmm_and_the_enter_site_is_ignored(void) {
    tpprof_cupti_event e;
    int ok = 0;
    CUdeviceptr va = 0x7f10000000;
    cuMemAddressReserve_params r = {.ptr = &va, .size = 1 << 26};
    CUpti_CallbackData cb = exit_site(&r, &ok, 1);
    CHECK(tpprof_cupti_decode_callback(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemAddressReserve, &cb, &e));
    CHECK_EQ_U64(e.op, TPPROF_DEV_OP_VA_RESERVE);
    CHECK_EQ_U64(e.kind_code, TPPROF_DEV_KIND_VMM_RESERVE);
    CHECK_EQ_U64(e.address, 0x7f10000000);
    CUmemGenericAllocationHandle handle = 77;
    cuMemCreate_params c = {.handle = &handle, .size = 1 << 21};
    cb = exit_site(&c, &ok, 2);
    CHECK(tpprof_cupti_decode_callback(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemCreate, &cb, &e));
    CHECK_EQ_U64(e.op, TPPROF_DEV_OP_PHYS_CREATE);
    CHECK_EQ_U64(e.kind_code, TPPROF_DEV_KIND_VMM_PHYSICAL);
    CHECK_EQ_U64(e.address, 77);
    cuMemMap_params m = {.ptr = va, .size = 1 << 21, .handle = handle};
    cb = exit_site(&m, &ok, 3);
    CHECK(tpprof_cupti_decode_callback(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemMap, &cb, &e));
    CHECK_EQ_U64(e.op, TPPROF_DEV_OP_MAP);
    CHECK_EQ_U64(e.kind_code, TPPROF_DEV_KIND_VMM_MAPPING);
    CHECK_EQ_U64(e.size, 1 << 21);
    cuMemUnmap_params u = {.ptr = va, .size = 1 << 21};
    cb = exit_site(&u, &ok, 4);
    CHECK(tpprof_cupti_decode_callback(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemUnmap, &cb, &e));
    CHECK_EQ_U64(e.op, TPPROF_DEV_OP_UNMAP);
    cuMemRelease_params rel = {.handle = handle};
    cb = exit_site(&rel, &ok, 5);
    CHECK(tpprof_cupti_decode_callback(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemRelease, &cb, &e));
    CHECK_EQ_U64(e.op, TPPROF_DEV_OP_PHYS_RELEASE);
    CHECK_EQ_U64(e.address, 77);
    cuDevicePrimaryCtxReset_v2_params reset = {.dev = 1};
    cb = exit_site(&reset, &ok, 6);
    CHECK(tpprof_cupti_decode_callback(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuDevicePrimaryCtxReset_v2,
                                       &cb, &e));
    CHECK_EQ_U64(e.op, TPPROF_DEV_OP_DEVICE_RESET);
    CHECK_EQ_U64(e.device, 1);
    // The ENTER site, a call that is no memory call, another domain: nothing.
    CUdeviceptr d = 0;
    cuMemAlloc_v2_params a = {.dptr = &d, .bytesize = 10};
    cb = exit_site(&a, &ok, 7);
    cb.callbackSite = CUPTI_API_ENTER;
    CHECK(!tpprof_cupti_decode_callback(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, &cb, &e));
    cb.callbackSite = CUPTI_API_EXIT;
    CHECK(!tpprof_cupti_decode_callback(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &cb, &e));
    CHECK(!tpprof_cupti_decode_callback(CUPTI_CB_DOMAIN_RESOURCE, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, &cb, &e));
    CHECK(!tpprof_cupti_decode_callback(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, NULL, &e));
    // A NULL output pointer (the program's bad call) reads as no address.
    a.dptr = NULL;
    CHECK(tpprof_cupti_decode_callback(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, &cb, &e));
    CHECK_EQ_U64(e.address, 0);
}

static void test_every_subscribed_callback_decodes(void) {
    // Each listed cbid decodes to an event from zeroed parameters (NULL
    // output pointers): the lists and the decoder agree.
    static _Alignas(16) uint8_t zeros[256];
    int ok = 0;
    CUpti_CallbackData cb = exit_site(zeros, &ok, 1);
    tpprof_cupti_event e;
    for (size_t i = 0; i < tpprof_cupti_runtime_ncbids; i++)
        CHECK_MSG(tpprof_cupti_decode_callback(CUPTI_CB_DOMAIN_RUNTIME_API, tpprof_cupti_runtime_cbids[i], &cb, &e),
                  "runtime cbid %u", (unsigned)tpprof_cupti_runtime_cbids[i]);
    for (size_t i = 0; i < tpprof_cupti_driver_ncbids; i++)
        CHECK_MSG(tpprof_cupti_decode_callback(CUPTI_CB_DOMAIN_DRIVER_API, tpprof_cupti_driver_cbids[i], &cb, &e),
                  "driver cbid %u", (unsigned)tpprof_cupti_driver_cbids[i]);
}

int main(int argc, char **argv) {
    static const check_scenario scenarios[] = {
        {"memory2", test_memory2_records_become_allocations_and_frees_by_kind},
        {"pool", test_pool_records_become_pool_events},
        {"skipped", test_other_records_are_skipped_and_the_walk_stops_at_the_end},
        {"real_walker", test_real_cupti_walks_the_hand_built_buffer},
        {"runtime_callbacks", test_runtime_callbacks_read_their_parameters_at_exit},
        {"driver_callbacks", test_driver_callbacks_cover_vmm_and_the_enter_site_is_ignored},
        {"every_cbid", test_every_subscribed_callback_decodes},
    };
    return check_run_scenarios(argc > 1 ? argv[1] : NULL, scenarios, sizeof scenarios / sizeof *scenarios);
}
