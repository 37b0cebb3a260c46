// fake_cupti.c: a stand-in libcupti for the CUPTI backend's tests, with the
// real functions' signatures (cupti.h) and none of their work: it keeps what
// the backend gives it (fake_cupti.h) so a test can drive the callbacks and
// buffers by hand, and walks activity buffers by the sizes of the two record
// kinds the backend enables, as cuptiActivityGetNextRecord does.
#include "fake_cupti.h"

#include <stddef.h>

static fake_cupti_state state = {.subscribe_result = CUPTI_SUCCESS};

__attribute__((visibility("default"))) fake_cupti_state *fake_cupti(void) { return &state; }

CUptiResult cuptiSubscribe(CUpti_SubscriberHandle *subscriber, CUpti_CallbackFunc callback, void *userdata) {
    if (state.subscribe_result != CUPTI_SUCCESS)
        return state.subscribe_result;
    state.subscribed++;
    state.callback = callback;
    state.userdata = userdata;
    *subscriber = (CUpti_SubscriberHandle)&state;
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
