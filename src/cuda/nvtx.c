/*
 * src/cuda/nvtx.c - tells memory tools (compute-sanitizer) about the
 * caching allocator's sub-allocations through NVTX's memory API: each
 * cudaMalloc segment is a sub-allocator heap, each block handed out a
 * region in it, so memcheck checks accesses against blocks, not whole
 * segments, and initcheck knows which bytes a tensor owns.
 *
 * NVTX is header-only: with no tool attached (no NVTX_INJECTION64_PATH)
 * every call here is a cheap no-op.  Called with the caching allocator's
 * mutex held (tp_caching_event_ops.annotate); the segment -> heap table has
 * its own mutex because the allocators of several devices share it.
 */
#include <pthread.h>
#include <stdlib.h>
#include <nvtx3/nvToolsExtMem.h>

#include "cuda_internal.h"

static pthread_once_t once = PTHREAD_ONCE_INIT;
static nvtxDomainHandle_t domain;

static void init(void) { domain = nvtxDomainCreateA("tensorplay"); }

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct heap { uint64_t base; nvtxMemHeapHandle_t handle; } *heaps;
static size_t nheaps, capheaps;

static void heap_register(uint64_t base, uint64_t size) {
    nvtxMemVirtualRangeDesc_t range = {.size = (size_t)size, .ptr = (const void *)(uintptr_t)base};
    nvtxMemHeapDesc_t desc = {
        .extCompatID = NVTX_EXT_COMPATID_MEM, .structSize = sizeof desc,
        .usage = NVTX_MEM_HEAP_USAGE_TYPE_SUB_ALLOCATOR, .type = NVTX_MEM_TYPE_VIRTUAL_ADDRESS,
        .typeSpecificDescSize = sizeof range, .typeSpecificDesc = &range,
    };
    nvtxMemHeapHandle_t h = nvtxMemHeapRegister(domain, &desc);
    if (!h) return; /* no tool listening */
    pthread_mutex_lock(&mu);
    if (nheaps == capheaps) {
        size_t cap = capheaps ? 2 * capheaps : 16;
        struct heap *v = realloc(heaps, cap * sizeof *v);
        if (v) heaps = v, capheaps = cap;
    }
    if (nheaps < capheaps) heaps[nheaps++] = (struct heap){base, h};
    pthread_mutex_unlock(&mu);
}

/* The heap of segment base (removed from the table if take), or NULL. */
static nvtxMemHeapHandle_t heap_of(uint64_t base, bool take) {
    nvtxMemHeapHandle_t h = NULL;
    pthread_mutex_lock(&mu);
    for (size_t i = 0; i < nheaps; i++)
        if (heaps[i].base == base) {
            h = heaps[i].handle;
            if (take) heaps[i] = heaps[--nheaps];
            break;
        }
    pthread_mutex_unlock(&mu);
    return h;
}

void tp__cuda_nvtx_annotate(void *user, uint32_t action, uint64_t segment, uint64_t segment_size,
                            uint64_t block, uint64_t block_size) {
    (void)user;
    pthread_once(&once, init);
    switch (action) {
    case TP_OBS_ALLOC_SEGMENT_RESERVE:
        heap_register(segment, segment_size);
        break;
    case TP_OBS_ALLOC_SEGMENT_RELEASE: {
        nvtxMemHeapHandle_t h = heap_of(segment, true);
        if (h) nvtxMemHeapUnregister(domain, h); /* its regions go with it */
        break;
    }
    case TP_OBS_ALLOC_BLOCK_ALLOC: {
        nvtxMemHeapHandle_t h = heap_of(segment, false);
        if (!h) break;
        nvtxMemVirtualRangeDesc_t r = {.size = (size_t)block_size, .ptr = (const void *)(uintptr_t)block};
        nvtxMemRegionsRegisterBatch_t b = {
            .extCompatID = NVTX_EXT_COMPATID_MEM, .structSize = sizeof b,
            .regionType = NVTX_MEM_TYPE_VIRTUAL_ADDRESS, .heap = h, .regionCount = 1,
            .regionDescElementSize = sizeof r, .regionDescElements = &r,
        };
        nvtxMemRegionsRegister(domain, &b);
        break;
    }
    case TP_OBS_ALLOC_BLOCK_FREE: {
        if (!heap_of(segment, false)) break;
        nvtxMemRegionRef_t ref = {.pointer = (const void *)(uintptr_t)block};
        nvtxMemRegionsUnregisterBatch_t u = {
            .extCompatID = NVTX_EXT_COMPATID_MEM, .structSize = sizeof u,
            .refType = NVTX_MEM_REGION_REF_TYPE_POINTER, .refCount = 1,
            .refElementSize = sizeof ref, .refElements = &ref,
        };
        nvtxMemRegionsUnregister(domain, &u);
        break;
    }
    default:
        break;
    }
}
