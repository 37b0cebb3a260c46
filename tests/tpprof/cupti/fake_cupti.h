// fake_cupti.h: the controls of the fake libcupti the CUPTI backend's tests
// load (fake_cupti.c): what cuptiSubscribe returns, and what the backend
// handed it (its callback, its buffer functions, what it enabled).
#ifndef TPPROF_TEST_FAKE_CUPTI_H
#define TPPROF_TEST_FAKE_CUPTI_H

#include <cupti.h>

typedef struct fake_cupti_state {
    CUptiResult subscribe_result; // what cuptiSubscribe returns (CUPTI_SUCCESS by default)
    CUpti_CallbackFunc callback;  // the subscriber's callback
    void *userdata;
    int subscribed, unsubscribed;
    int enabled_runtime, enabled_driver; // cuptiEnableCallback(1, ...) calls per domain
    CUpti_BuffersCallbackRequestFunc buffer_requested;
    CUpti_BuffersCallbackCompleteFunc buffer_completed;
    int memory2_enabled, pool_enabled, flushes_forced;
} fake_cupti_state;

// The fake's state (the test sets subscribe_result before the backend starts).
fake_cupti_state *fake_cupti(void);

// The device cuptiGetDeviceId gives for any non-NULL context.
#define FAKE_CUPTI_DEVICE 3

#endif
