// device_record_log.h: a test implementation of the recorder's entry
// tpprof_device_record (record/device.h) that keeps every call, so the
// CUPTI backend's tests can assert what it recorded.
#ifndef TPPROF_TEST_DEVICE_RECORD_LOG_H
#define TPPROF_TEST_DEVICE_RECORD_LOG_H

#include <stddef.h>
#include <stdint.h>

typedef struct logged_event {
    uint32_t op, kind_code;
    int32_t device, result;
    uint64_t stream, pool, address, size;
    const char *api;
    int with_stack;
} logged_event;

#define LOG_MAX 64
extern logged_event device_log[LOG_MAX];
extern size_t device_nlog;

#endif
