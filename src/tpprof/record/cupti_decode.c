// cupti_decode.c: CUPTI callback data and activity records -> device events
// (cupti_decode.h). Pure: reads the structs it is given, nothing else. The
// parameter structs are CUPTI's generated ones (generated_cuda_meta.h,
// generated_cuda_runtime_api_meta.h), so a layout change in a newer CUDA is
// a compile error here, not a wrong address. cupti.h includes them (they
// have no include guards of their own: never include them again).
//
// A free names no kind the caller knows: it carries its API's family (a
// cudaFree cuda_device, a cudaFreeAsync cuda_async) and the recorder matches
// it to its block by address.
#include "record/cupti_decode.h"

#include "record/device.h"

#include <string.h>

// ---------------------------------------------------------------------------
// Callbacks

const CUpti_CallbackId tpprof_cupti_runtime_cbids[] = {
    CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMallocPitch_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMalloc3D_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMallocHost_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaHostAlloc_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaFreeHost_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMallocManaged_v6000,
    CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_v11020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_ptsz_v11020,
    CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_v11020,
    CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_ptsz_v11020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_v11020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_ptsz_v11020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemPoolCreate_v11020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemPoolDestroy_v11020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemPoolTrimTo_v11020,
    CUPTI_RUNTIME_TRACE_CBID_cudaDeviceReset_v3020,
};
const size_t tpprof_cupti_runtime_ncbids = sizeof tpprof_cupti_runtime_cbids / sizeof *tpprof_cupti_runtime_cbids;

const CUpti_CallbackId tpprof_cupti_driver_cbids[] = {
    CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged,
    CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocHost_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemFreeHost,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync,
    CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuMemPoolCreate,
    CUPTI_DRIVER_TRACE_CBID_cuMemPoolDestroy,
    CUPTI_DRIVER_TRACE_CBID_cuMemPoolTrimTo,
    CUPTI_DRIVER_TRACE_CBID_cuMemAddressReserve,
    CUPTI_DRIVER_TRACE_CBID_cuMemAddressFree,
    CUPTI_DRIVER_TRACE_CBID_cuMemCreate,
    CUPTI_DRIVER_TRACE_CBID_cuMemRelease,
    CUPTI_DRIVER_TRACE_CBID_cuMemMap,
    CUPTI_DRIVER_TRACE_CBID_cuMemUnmap,
    CUPTI_DRIVER_TRACE_CBID_cuDevicePrimaryCtxReset,
    CUPTI_DRIVER_TRACE_CBID_cuDevicePrimaryCtxReset_v2,
    CUPTI_DRIVER_TRACE_CBID_cuCtxDestroy_v2,
};
const size_t tpprof_cupti_driver_ncbids = sizeof tpprof_cupti_driver_cbids / sizeof *tpprof_cupti_driver_cbids;

// An output pointer's value once the call succeeded (0 when it failed or
// the program passed NULL).
#define OUT(ptr) ((e->result == 0 && (ptr)) ? (uint64_t)(uintptr_t) * (ptr) : 0)
#define PTR(v) ((uint64_t)(uintptr_t)(v))

static void set(tpprof_cupti_event *e, uint32_t op, uint32_t kind, const char *api) {
    e->op = op;
    e->kind_code = kind;
    e->api = api;
}

static bool decode_runtime(CUpti_CallbackId cbid, const void *params, tpprof_cupti_event *e) {
    switch (cbid) {
    case CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020: {
        const cudaMalloc_v3020_params *p = params;
        set(e, TPPROF_DEV_OP_ALLOC, TPPROF_DEV_KIND_DEVICE, "cudaMalloc");
        e->address = OUT(p->devPtr);
        e->size = p->size;
        return true;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMallocPitch_v3020: {
        const cudaMallocPitch_v3020_params *p = params;
        set(e, TPPROF_DEV_OP_ALLOC, TPPROF_DEV_KIND_PITCH, "cudaMallocPitch");
        e->address = OUT(p->devPtr);
        // The pitch the runtime chose, once it succeeded; the asked width before.
        e->size = (e->result == 0 && p->pitch ? *p->pitch : p->width) * p->height;
        return true;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMalloc3D_v3020: {
        const cudaMalloc3D_v3020_params *p = params;
        set(e, TPPROF_DEV_OP_ALLOC, TPPROF_DEV_KIND_PITCH, "cudaMalloc3D");
        bool ok = e->result == 0 && p->pitchedDevPtr;
        e->address = ok ? PTR(p->pitchedDevPtr->ptr) : 0;
        uint64_t depth = p->extent.depth ? p->extent.depth : 1, height = p->extent.height ? p->extent.height : 1;
        e->size = (ok ? p->pitchedDevPtr->pitch : p->extent.width) * height * depth;
        return true;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020: {
        const cudaFree_v3020_params *p = params;
        set(e, TPPROF_DEV_OP_FREE, TPPROF_DEV_KIND_DEVICE, "cudaFree");
        e->address = PTR(p->devPtr);
        return true;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMallocHost_v3020: {
        const cudaMallocHost_v3020_params *p = params;
        set(e, TPPROF_DEV_OP_ALLOC, TPPROF_DEV_KIND_PINNED_HOST, "cudaMallocHost");
        e->address = OUT(p->ptr);
        e->size = p->size;
        return true;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaHostAlloc_v3020: {
        const cudaHostAlloc_v3020_params *p = params;
        set(e, TPPROF_DEV_OP_ALLOC, TPPROF_DEV_KIND_PINNED_HOST, "cudaHostAlloc");
        e->address = OUT(p->pHost);
        e->size = p->size;
        return true;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaFreeHost_v3020: {
        const cudaFreeHost_v3020_params *p = params;
        set(e, TPPROF_DEV_OP_FREE, TPPROF_DEV_KIND_PINNED_HOST, "cudaFreeHost");
        e->address = PTR(p->ptr);
        return true;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMallocManaged_v6000: {
        const cudaMallocManaged_v6000_params *p = params;
        set(e, TPPROF_DEV_OP_ALLOC, TPPROF_DEV_KIND_MANAGED, "cudaMallocManaged");
        e->address = OUT(p->devPtr);
        e->size = p->size;
        return true;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_v11020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_ptsz_v11020: {
        // The _ptsz form has the same layout (generated_cuda_runtime_api_meta.h).
        const cudaMallocAsync_v11020_params *p = params;
        set(e, TPPROF_DEV_OP_ALLOC, TPPROF_DEV_KIND_ASYNC,
            cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_v11020 ? "cudaMallocAsync" : "cudaMallocAsync_ptsz");
        e->address = OUT(p->devPtr);
        e->size = p->size;
        e->stream = PTR(p->hStream);
        return true;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_v11020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_ptsz_v11020: {
        const cudaFreeAsync_v11020_params *p = params;
        set(e, TPPROF_DEV_OP_FREE, TPPROF_DEV_KIND_ASYNC,
            cbid == CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_v11020 ? "cudaFreeAsync" : "cudaFreeAsync_ptsz");
        e->address = PTR(p->devPtr);
        e->stream = PTR(p->hStream);
        return true;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_v11020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_ptsz_v11020: {
        const cudaMallocFromPoolAsync_v11020_params *p = params;
        set(e, TPPROF_DEV_OP_ALLOC, TPPROF_DEV_KIND_ASYNC,
            cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_v11020 ? "cudaMallocFromPoolAsync"
                                                                           : "cudaMallocFromPoolAsync_ptsz");
        e->address = OUT(p->ptr);
        e->size = p->size;
        e->pool = PTR(p->memPool);
        e->stream = PTR(p->stream);
        return true;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemPoolCreate_v11020: {
        const cudaMemPoolCreate_v11020_params *p = params;
        set(e, TPPROF_DEV_OP_POOL_CREATE, TPPROF_DEV_KIND_ASYNC, "cudaMemPoolCreate");
        e->pool = OUT(p->memPool);
        return true;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemPoolDestroy_v11020: {
        const cudaMemPoolDestroy_v11020_params *p = params;
        set(e, TPPROF_DEV_OP_POOL_DESTROY, TPPROF_DEV_KIND_ASYNC, "cudaMemPoolDestroy");
        e->pool = PTR(p->memPool);
        return true;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemPoolTrimTo_v11020: {
        const cudaMemPoolTrimTo_v11020_params *p = params;
        set(e, TPPROF_DEV_OP_POOL_TRIM, TPPROF_DEV_KIND_ASYNC, "cudaMemPoolTrimTo");
        e->pool = PTR(p->memPool);
        e->size = p->minBytesToKeep;
        return true;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaDeviceReset_v3020:
        set(e, TPPROF_DEV_OP_DEVICE_RESET, TPPROF_DEV_KIND_DEVICE, "cudaDeviceReset");
        return true;
    default:
        return false;
    }
}

// The driver's allocation calls: device, pitched, managed and pinned host
// memory, stream-ordered allocation and its pools.
static bool decode_driver_alloc(CUpti_CallbackId cbid, const void *params, tpprof_cupti_event *e) {
    switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2: {
        const cuMemAlloc_v2_params *p = params;
        set(e, TPPROF_DEV_OP_ALLOC, TPPROF_DEV_KIND_DEVICE, "cuMemAlloc_v2");
        e->address = OUT(p->dptr);
        e->size = p->bytesize;
        return true;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2: {
        const cuMemAllocPitch_v2_params *p = params;
        set(e, TPPROF_DEV_OP_ALLOC, TPPROF_DEV_KIND_PITCH, "cuMemAllocPitch_v2");
        e->address = OUT(p->dptr);
        e->size = (e->result == 0 && p->pPitch ? *p->pPitch : p->WidthInBytes) * p->Height;
        return true;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2: {
        const cuMemFree_v2_params *p = params;
        set(e, TPPROF_DEV_OP_FREE, TPPROF_DEV_KIND_DEVICE, "cuMemFree_v2");
        e->address = p->dptr;
        return true;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged: {
        const cuMemAllocManaged_params *p = params;
        set(e, TPPROF_DEV_OP_ALLOC, TPPROF_DEV_KIND_MANAGED, "cuMemAllocManaged");
        e->address = OUT(p->dptr);
        e->size = p->bytesize;
        return true;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc: {
        const cuMemHostAlloc_params *p = params;
        set(e, TPPROF_DEV_OP_ALLOC, TPPROF_DEV_KIND_PINNED_HOST, "cuMemHostAlloc");
        e->address = OUT(p->pp);
        e->size = p->bytesize;
        return true;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocHost_v2: {
        const cuMemAllocHost_v2_params *p = params;
        set(e, TPPROF_DEV_OP_ALLOC, TPPROF_DEV_KIND_PINNED_HOST, "cuMemAllocHost_v2");
        e->address = OUT(p->pp);
        e->size = p->bytesize;
        return true;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeHost: {
        const cuMemFreeHost_params *p = params;
        set(e, TPPROF_DEV_OP_FREE, TPPROF_DEV_KIND_PINNED_HOST, "cuMemFreeHost");
        e->address = PTR(p->p);
        return true;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz: {
        const cuMemAllocAsync_params *p = params;
        set(e, TPPROF_DEV_OP_ALLOC, TPPROF_DEV_KIND_ASYNC,
            cbid == CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync ? "cuMemAllocAsync" : "cuMemAllocAsync_ptsz");
        e->address = OUT(p->dptr);
        e->size = p->bytesize;
        e->stream = PTR(p->hStream);
        return true;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz: {
        const cuMemFreeAsync_params *p = params;
        set(e, TPPROF_DEV_OP_FREE, TPPROF_DEV_KIND_ASYNC,
            cbid == CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync ? "cuMemFreeAsync" : "cuMemFreeAsync_ptsz");
        e->address = p->dptr;
        e->stream = PTR(p->hStream);
        return true;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz: {
        const cuMemAllocFromPoolAsync_params *p = params;
        set(e, TPPROF_DEV_OP_ALLOC, TPPROF_DEV_KIND_ASYNC,
            cbid == CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync ? "cuMemAllocFromPoolAsync"
                                                                    : "cuMemAllocFromPoolAsync_ptsz");
        e->address = OUT(p->dptr);
        e->size = p->bytesize;
        e->pool = PTR(p->pool);
        e->stream = PTR(p->hStream);
        return true;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemPoolCreate: {
        const cuMemPoolCreate_params *p = params;
        set(e, TPPROF_DEV_OP_POOL_CREATE, TPPROF_DEV_KIND_ASYNC, "cuMemPoolCreate");
        e->pool = OUT(p->pool);
        return true;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemPoolDestroy: {
        const cuMemPoolDestroy_params *p = params;
        set(e, TPPROF_DEV_OP_POOL_DESTROY, TPPROF_DEV_KIND_ASYNC, "cuMemPoolDestroy");
        e->pool = PTR(p->pool);
        return true;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemPoolTrimTo: {
        const cuMemPoolTrimTo_params *p = params;
        set(e, TPPROF_DEV_OP_POOL_TRIM, TPPROF_DEV_KIND_ASYNC, "cuMemPoolTrimTo");
        e->pool = PTR(p->pool);
        e->size = p->minBytesToKeep;
        return true;
    }
    default:
        return false;
    }
}

// The driver's virtual memory management calls (reserve, create, map) and
// what ends a device's or a context's blocks.
static bool decode_driver_vmm(CUpti_CallbackId cbid, const void *params, tpprof_cupti_event *e) {
    switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuMemAddressReserve: {
        const cuMemAddressReserve_params *p = params;
        set(e, TPPROF_DEV_OP_VA_RESERVE, TPPROF_DEV_KIND_VMM_RESERVE, "cuMemAddressReserve");
        e->address = OUT(p->ptr);
        e->size = p->size;
        return true;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAddressFree: {
        const cuMemAddressFree_params *p = params;
        set(e, TPPROF_DEV_OP_VA_FREE, TPPROF_DEV_KIND_VMM_RESERVE, "cuMemAddressFree");
        e->address = p->ptr;
        e->size = p->size;
        return true;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemCreate: {
        // A physical handle is named by its handle value (no address yet).
        const cuMemCreate_params *p = params;
        set(e, TPPROF_DEV_OP_PHYS_CREATE, TPPROF_DEV_KIND_VMM_PHYSICAL, "cuMemCreate");
        e->address = OUT(p->handle);
        e->size = p->size;
        return true;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemRelease: {
        const cuMemRelease_params *p = params;
        set(e, TPPROF_DEV_OP_PHYS_RELEASE, TPPROF_DEV_KIND_VMM_PHYSICAL, "cuMemRelease");
        e->address = p->handle;
        return true;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemMap: {
        const cuMemMap_params *p = params;
        set(e, TPPROF_DEV_OP_MAP, TPPROF_DEV_KIND_VMM_MAPPING, "cuMemMap");
        e->address = p->ptr;
        e->size = p->size;
        return true;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemUnmap: {
        const cuMemUnmap_params *p = params;
        set(e, TPPROF_DEV_OP_UNMAP, TPPROF_DEV_KIND_VMM_MAPPING, "cuMemUnmap");
        e->address = p->ptr;
        e->size = p->size;
        return true;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuDevicePrimaryCtxReset:
    case CUPTI_DRIVER_TRACE_CBID_cuDevicePrimaryCtxReset_v2: {
        // The same layout in both versions: the device is known here.
        const cuDevicePrimaryCtxReset_v2_params *p = params;
        set(e, TPPROF_DEV_OP_DEVICE_RESET, TPPROF_DEV_KIND_DEVICE,
            cbid == CUPTI_DRIVER_TRACE_CBID_cuDevicePrimaryCtxReset ? "cuDevicePrimaryCtxReset"
                                                                    : "cuDevicePrimaryCtxReset_v2");
        e->device = (int32_t)p->dev;
        return true;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuCtxDestroy_v2:
        // Ends the context's blocks (writer/device.c); its device is the
        // backend's to find, at the call's ENTER (tpprof_cupti_destroyed_context).
        set(e, TPPROF_DEV_OP_DEVICE_RESET, TPPROF_DEV_KIND_DEVICE, "cuCtxDestroy_v2");
        return true;
    default:
        return false;
    }
}

static bool decode_driver(CUpti_CallbackId cbid, const void *params, tpprof_cupti_event *e) {
    return decode_driver_alloc(cbid, params, e) || decode_driver_vmm(cbid, params, e);
}

CUcontext tpprof_cupti_destroyed_context(CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                                         const CUpti_CallbackData *cb) {
    if (domain != CUPTI_CB_DOMAIN_DRIVER_API || cbid != CUPTI_DRIVER_TRACE_CBID_cuCtxDestroy_v2 || !cb ||
        !cb->functionParams)
        return NULL;
    return ((const cuCtxDestroy_v2_params *)cb->functionParams)->ctx;
}

bool tpprof_cupti_decode_callback(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const CUpti_CallbackData *cb,
                                  tpprof_cupti_event *e) {
    memset(e, 0, sizeof *e);
    e->device = -1;
    if (!cb || cb->callbackSite != CUPTI_API_EXIT)
        return false;
    // Only cudaDeviceReset takes no parameters.
    if (!cb->functionParams &&
        !(domain == CUPTI_CB_DOMAIN_RUNTIME_API && cbid == CUPTI_RUNTIME_TRACE_CBID_cudaDeviceReset_v3020))
        return false;
    // cudaError_t and CUresult are both int-sized enums.
    e->result = cb->functionReturnValue ? *(const int *)cb->functionReturnValue : 0;
    e->correlation = cb->correlationId;
    if (domain == CUPTI_CB_DOMAIN_RUNTIME_API)
        return decode_runtime(cbid, cb->functionParams, e);
    if (domain == CUPTI_CB_DOMAIN_DRIVER_API)
        return decode_driver(cbid, cb->functionParams, e);
    return false;
}

// ---------------------------------------------------------------------------
// Activity records

static bool decode_memory(const CUpti_ActivityMemory4 *m, tpprof_cupti_event *e) {
    if (m->memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION)
        e->op = TPPROF_DEV_OP_ALLOC;
    else if (m->memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE)
        e->op = TPPROF_DEV_OP_FREE;
    else
        return false;
    bool pooled = m->memoryPoolConfig.memoryPoolType != CUPTI_ACTIVITY_MEMORY_POOL_TYPE_INVALID;
    e->device = (int32_t)m->deviceId;
    switch (m->memoryKind) {
    case CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE:
        return false; // ordinary host memory: the malloc hooks' business
    case CUPTI_ACTIVITY_MEMORY_KIND_PINNED:
        e->kind_code = TPPROF_DEV_KIND_PINNED_HOST;
        e->device = -1;
        e->api = "cupti:pinned";
        break;
    case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED:
    case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED_STATIC:
        e->kind_code = TPPROF_DEV_KIND_MANAGED;
        e->api = "cupti:managed";
        break;
    default: // device, static device, arrays, unknown: device memory
        e->kind_code = m->isAsync || pooled ? TPPROF_DEV_KIND_ASYNC : TPPROF_DEV_KIND_DEVICE;
        e->api = m->isAsync || pooled ? "cupti:async" : "cupti:device";
        break;
    }
    e->stream = m->streamId;
    e->pool = pooled ? m->memoryPoolConfig.address : 0;
    e->address = m->address;
    e->size = m->bytes;
    e->correlation = m->correlationId;
    e->time_ns = m->timestamp;
    return true;
}

static bool decode_pool(const CUpti_ActivityMemoryPool3 *m, tpprof_cupti_event *e) {
    switch (m->memoryPoolOperationType) {
    case CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_CREATED: e->op = TPPROF_DEV_OP_POOL_CREATE; break;
    case CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_DESTROYED: e->op = TPPROF_DEV_OP_POOL_DESTROY; break;
    case CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_TRIMMED: e->op = TPPROF_DEV_OP_POOL_TRIM; break;
    default: return false;
    }
    e->kind_code = m->isManagedPool ? TPPROF_DEV_KIND_MANAGED : TPPROF_DEV_KIND_ASYNC;
    e->device = (int32_t)m->deviceId;
    e->pool = m->address;
    e->size = m->size; // what the pool holds after the operation
    e->correlation = m->correlationId;
    e->time_ns = m->timestamp;
    e->api = "cupti:pool";
    return true;
}

bool tpprof_cupti_decode_activity(const CUpti_Activity *r, tpprof_cupti_event *e) {
    memset(e, 0, sizeof *e);
    e->device = -1;
    if (!r)
        return false;
    if (r->kind == CUPTI_ACTIVITY_KIND_MEMORY2)
        return decode_memory((const CUpti_ActivityMemory4 *)r, e);
    if (r->kind == CUPTI_ACTIVITY_KIND_MEMORY_POOL)
        return decode_pool((const CUpti_ActivityMemoryPool3 *)r, e);
    return false;
}

size_t tpprof_cupti_walk(uint8_t *buffer, size_t valid, tpprof_cupti_next_fn next,
                         void (*sink)(const tpprof_cupti_event *e, void *arg), void *arg, size_t *skipped) {
    size_t decoded = 0, other = 0;
    CUpti_Activity *r = NULL;
    // CUPTI_ERROR_MAX_LIMIT_REACHED ends a buffer; any other error does too
    // (a damaged buffer is not walked past).
    while (buffer && valid && next(buffer, valid, &r) == CUPTI_SUCCESS && r) {
        tpprof_cupti_event e;
        if (tpprof_cupti_decode_activity(r, &e)) {
            sink(&e, arg);
            decoded++;
        } else {
            other++;
        }
    }
    if (skipped)
        *skipped = other;
    return decoded;
}
