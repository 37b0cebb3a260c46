// fake_cupti.c: a stand-in libcupti for the CUPTI backend's tests, with the
// real functions' signatures (cupti.h) and none of their work: it keeps what
// the backend gives it (fake_cupti.h) so a test can drive the callbacks and
// buffers by hand, and walks activity buffers by the sizes of the two record
// kinds the backend enables, as cuptiActivityGetNextRecord does.
//
// Under the driver double (tests/tpprof/cuda/fakes/fake_libcuda.c) it also
// plays CUPTI end to end: once subscribed it registers with that driver
// (tpfake_cu_set_cupti), turns each cuMemAlloc_v2 / cuMemFree_v2 it reports
// into the subscriber's callbacks (ENTER and EXIT, one correlation id per
// call) and keeps a MEMORY2 record of each, handed over in one buffer at a
// forced cuptiActivityFlushAll. Controls (environment):
// TPFAKE_CUPTI_MULTIPLE=1 makes cuptiSubscribe fail as when another tool
// owns CUPTI; TPFAKE_CUPTI_ACTIVITY_ONLY=1 gives no callbacks, only the
// activity records (what reaches the recording then comes from the flush).
#define _GNU_SOURCE
#include "fake_cupti.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

static fake_cupti_state state = {.subscribe_result = CUPTI_SUCCESS};

__attribute__((visibility("default"))) fake_cupti_state *fake_cupti(void) { return &state; }

// ---------------------------------------------------------------------------
// The driver double's calls (end to end)

#define PENDING_MAX 256
static CUpti_ActivityMemory4 pending[PENDING_MAX];
static size_t npending;
static uint32_t next_correlation = 1000;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static int env_on(const char *name) {
    const char *e = getenv(name);
    return e && *e == '1';
}

static void driver_report(int exit, const char *api, CUdeviceptr *out, CUdeviceptr ptr, size_t size, int result) {
    static __thread uint32_t corr; // the call's id, from its ENTER to its EXIT
    bool alloc = strcmp(api, "cuMemAlloc_v2") == 0;
    if (!exit) {
        pthread_mutex_lock(&mu);
        corr = next_correlation++;
        pthread_mutex_unlock(&mu);
    }
    cuMemAlloc_v2_params ap = {.dptr = out, .bytesize = size};
    cuMemFree_v2_params fp = {.dptr = ptr};
    CUptiResult status = (CUptiResult)result;
    CUpti_CallbackData cb = {.callbackSite = exit ? CUPTI_API_EXIT : CUPTI_API_ENTER,
                             .functionName = api,
                             .functionParams = alloc ? (const void *)&ap : (const void *)&fp,
                             .functionReturnValue = &status,
                             .correlationId = corr,
                             .context = (CUcontext)&state};
    if (state.callback && !env_on("TPFAKE_CUPTI_ACTIVITY_ONLY"))
        state.callback(state.userdata, CUPTI_CB_DOMAIN_DRIVER_API,
                       alloc ? CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2 : CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2, &cb);
    if (!exit || result != 0 || !state.memory2_enabled)
        return;
    pthread_mutex_lock(&mu);
    if (npending < PENDING_MAX) {
        CUpti_ActivityMemory4 *m = &pending[npending++];
        memset(m, 0, sizeof *m);
        m->kind = CUPTI_ACTIVITY_KIND_MEMORY2;
        m->memoryOperationType = alloc ? CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION
                                       : CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE;
        m->memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
        m->correlationId = corr;
        m->address = alloc ? *out : ptr;
        m->bytes = size;
        m->deviceId = FAKE_CUPTI_DEVICE;
    }
    pthread_mutex_unlock(&mu);
}

// ---------------------------------------------------------------------------
// libcupti's functions

CUptiResult cuptiSubscribe(CUpti_SubscriberHandle *subscriber, CUpti_CallbackFunc callback, void *userdata) {
    if (env_on("TPFAKE_CUPTI_MULTIPLE"))
        return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
    if (state.subscribe_result != CUPTI_SUCCESS)
        return state.subscribe_result;
    state.subscribed++;
    state.callback = callback;
    state.userdata = userdata;
    *subscriber = (CUpti_SubscriberHandle)&state;
    // The driver double, when this process has loaded it (a runtime opens
    // it RTLD_LOCAL: asked by name, not in the global scope).
    void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    void (*set)(void *) = cuda ? (void (*)(void *))dlsym(cuda, "tpfake_cu_set_cupti") : NULL;
    if (set)
        set((void *)driver_report);
    return CUPTI_SUCCESS;
}

CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle subscriber) {
    (void)subscriber;
    state.unsubscribed++;
    return CUPTI_SUCCESS;
}

CUptiResult cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle subscriber, CUpti_CallbackDomain domain,
                                CUpti_CallbackId cbid) {
    (void)cbid;
    if (subscriber != (CUpti_SubscriberHandle)&state)
        return CUPTI_ERROR_INVALID_PARAMETER;
    if (enable && domain == CUPTI_CB_DOMAIN_RUNTIME_API)
        state.enabled_runtime++;
    if (enable && domain == CUPTI_CB_DOMAIN_DRIVER_API)
        state.enabled_driver++;
    return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc requested,
                                           CUpti_BuffersCallbackCompleteFunc completed) {
    state.buffer_requested = requested;
    state.buffer_completed = completed;
    return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityEnable(CUpti_ActivityKind kind) {
    if (kind == CUPTI_ACTIVITY_KIND_MEMORY2)
        state.memory2_enabled++;
    else if (kind == CUPTI_ACTIVITY_KIND_MEMORY_POOL)
        state.pool_enabled++;
    else
        return CUPTI_ERROR_NOT_COMPATIBLE;
    return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityFlushAll(uint32_t flag) {
    if (flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED)
        state.flushes_forced++;
    pthread_mutex_lock(&mu);
    size_t n = npending;
    npending = 0;
    uint8_t *buf = NULL;
    size_t size = 0, max = 0;
    if (n && state.buffer_requested && state.buffer_completed)
        state.buffer_requested(&buf, &size, &max);
    if (buf && size >= n * sizeof *pending) {
        memcpy(buf, pending, n * sizeof *pending);
        pthread_mutex_unlock(&mu);
        state.buffer_completed(NULL, 0, buf, size, n * sizeof *pending);
        return CUPTI_SUCCESS;
    }
    pthread_mutex_unlock(&mu);
    return CUPTI_SUCCESS;
}

static size_t record_size(const CUpti_Activity *r) {
    if (r->kind == CUPTI_ACTIVITY_KIND_MEMORY2)
        return sizeof(CUpti_ActivityMemory4);
    if (r->kind == CUPTI_ACTIVITY_KIND_MEMORY_POOL)
        return sizeof(CUpti_ActivityMemoryPool3);
    return 0;
}

CUptiResult cuptiActivityGetNextRecord(uint8_t *buffer, size_t valid, CUpti_Activity **record) {
    uint8_t *next = buffer;
    if (*record) {
        size_t n = record_size(*record);
        if (!n)
            return CUPTI_ERROR_INVALID_KIND;
        next = (uint8_t *)*record + n;
    }
    if (next + sizeof(CUpti_Activity) > buffer + valid)
        return CUPTI_ERROR_MAX_LIMIT_REACHED;
    *record = (CUpti_Activity *)next;
    return CUPTI_SUCCESS;
}

CUptiResult cuptiGetDeviceId(CUcontext context, uint32_t *device) {
    if (!context)
        return CUPTI_ERROR_INVALID_CONTEXT;
    *device = FAKE_CUPTI_DEVICE;
    return CUPTI_SUCCESS;
}

CUptiResult cuptiGetResultString(CUptiResult result, const char **str) {
    *str = result == CUPTI_ERROR_UNKNOWN ? "CUPTI_ERROR_UNKNOWN" : "a fake CUPTI error";
    return CUPTI_SUCCESS;
}
