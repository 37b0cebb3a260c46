// device_record_log.c: see device_record_log.h.
#include "device_record_log.h"

#include "record/device.h"

logged_event device_log[LOG_MAX];
size_t device_nlog;

void tpprof_device_record(uint32_t op, uint32_t kind_code, int32_t device, uint64_t stream, uint64_t pool,
                          uint64_t address, uint64_t size, int32_t result, const char *api, int with_stack) {
    if (device_nlog == LOG_MAX)
        return;
    device_log[device_nlog++] = (logged_event){op, kind_code, device, result, stream, pool, address, size, api,
                                               with_stack};
}

// The recorder's device state that the backend reads and sets (record/device.c).
__thread int tpprof_device_depth TPPROF_TLS;
atomic_bool tpprof_device_by_cupti;
_Atomic(const char *) tpprof_device_capture;
