// test_cupti_backend.c: the CUPTI backend (record/cupti.c) against a fake
// libcupti (fake_cupti.c, named by TPPROF_CUPTI_LIB) and a test recorder
// entry (device_record_log.c): the failed-subscribe and no-libcupti paths
// (one line, interposition stays), the subscription, the outermost-call rule,
// device ordinals, activity records joined to calls by correlation id, and
// the hand-over with the interposition hooks (record/device.h).
//
// Usage: test_cupti_backend SCENARIO; each scenario runs in its own process
// (InitializeInjection runs once per process), one meson test each.
#define _GNU_SOURCE
#include "record/cupti.h"

#include "device_record_log.h"
#include "fake_cupti.h"
#include "record/cupti_decode.h"
#include "record/device.h"
#include "../../check.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

// Run InitializeInjection with stderr going to a file; returns what it wrote.
static char stderr_text[4096];
static int init_capturing_stderr(void) {
    char path[] = "/tmp/tpprof-cupti-XXXXXX";
    int fd = mkstemp(path);
    int saved = dup(2);
    dup2(fd, 2);
    int r = InitializeInjection();
    dup2(saved, 2);
    close(saved);
    lseek(fd, 0, SEEK_SET);
    ssize_t n = read(fd, stderr_text, sizeof stderr_text - 1);
    stderr_text[n > 0 ? n : 0] = 0;
    close(fd);
    unlink(path);
    return r;
}

static size_t lines(const char *s) {
    size_t n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

// ---------------------------------------------------------------------------
// Not starting

static void test_another_subscriber_is_one_line_and_interposition_stays(void) {
    fake_cupti()->subscribe_result = CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
    CHECK_EQ_U64(init_capturing_stderr(), 1); // the program's cuInit goes on
    CHECK_STR_EQ(stderr_text, "tpprof: --cupti: another CUPTI subscriber owns this process (nsys, ncu, or a "
                              "framework's profiler); device memory is recorded by interposition\n");
    CHECK(!tpprof_cupti_active());
    CHECK_EQ_U64(fake_cupti()->enabled_runtime + fake_cupti()->enabled_driver, 0);
    CHECK_EQ_U64(fake_cupti()->memory2_enabled, 0);
    // Called again (a second cuInit): nothing more is said.
    CHECK_EQ_U64(init_capturing_stderr(), 1);
    CHECK_STR_EQ(stderr_text, "");
    tpprof_cupti_flush(); // off: no flush
    CHECK_EQ_U64(fake_cupti()->flushes_forced, 0);
}

static void test_other_subscribe_errors_are_named(void) {
    fake_cupti()->subscribe_result = CUPTI_ERROR_UNKNOWN;
    CHECK_EQ_U64(init_capturing_stderr(), 1);
    CHECK_STR_EQ(stderr_text, "tpprof: --cupti: cuptiSubscribe failed: CUPTI_ERROR_UNKNOWN (999); device memory is "
                              "recorded by interposition\n");
    CHECK(!tpprof_cupti_active());
}

static void test_missing_libcupti_is_one_line(void) {
    setenv("TPPROF_CUPTI_LIB", "/nonexistent/libcupti.so", 1);
    CHECK_EQ_U64(init_capturing_stderr(), 1);
    CHECK(strncmp(stderr_text, "tpprof: --cupti: cannot load libcupti (/nonexistent/libcupti.so", 63) == 0);
    CHECK(strstr(stderr_text, "); device memory is recorded by interposition\n") != NULL);
    CHECK_EQ_U64(lines(stderr_text), 1);
    CHECK(!tpprof_cupti_active());
}

// ---------------------------------------------------------------------------
// Started

static void start(void) {
    CHECK_EQ_U64(init_capturing_stderr(), 1);
    CHECK_STR_EQ(stderr_text, "");
    CHECK(tpprof_cupti_active());
}

static void call(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, CUpti_ApiCallbackSite site, const void *params,
                 int *result, uint32_t corr, CUcontext ctx) {
    CUpti_CallbackData cb = {.callbackSite = site, .functionParams = params, .functionReturnValue = result,
                             .correlationId = corr, .context = ctx};
    fake_cupti()->callback(fake_cupti()->userdata, domain, cbid, &cb);
}

static void test_subscribes_to_every_memory_call_and_both_activity_kinds(void) {
    start();
    CHECK_EQ_U64(fake_cupti()->subscribed, 1);
    CHECK_EQ_U64(fake_cupti()->enabled_runtime, tpprof_cupti_runtime_ncbids);
    CHECK_EQ_U64(fake_cupti()->enabled_driver, tpprof_cupti_driver_ncbids);
    CHECK_EQ_U64(fake_cupti()->memory2_enabled, 1);
    CHECK_EQ_U64(fake_cupti()->pool_enabled, 1);
    CHECK(fake_cupti()->buffer_requested && fake_cupti()->buffer_completed);
    // The hooks now leave device calls to the backend, and the recording
    // says who captured them.
    CHECK(atomic_load(&tpprof_device_by_cupti));
    CHECK_STR_EQ(atomic_load(&tpprof_device_capture), "cupti");
    tpprof_cupti_flush();
    CHECK_EQ_U64(fake_cupti()->flushes_forced, 1);
}

// The program's cudaMalloc of 4096 bytes at 0x7f0000 and the cuMemAlloc_v2
// it makes inside, as their callbacks' parameters (a test sets dev and dptr
// for its next block).
typedef struct malloc_params {
    void *dev;
    CUdeviceptr dptr;
    cudaMalloc_v3020_params rt;
    cuMemAlloc_v2_params drv;
} malloc_params;

static void malloc_params_init(malloc_params *m) {
    m->dev = (void *)0x7f0000;
    m->dptr = 0x7f0000;
    m->rt = (cudaMalloc_v3020_params){.devPtr = &m->dev, .size = 4096};
    m->drv = (cuMemAlloc_v2_params){.dptr = &m->dptr, .bytesize = 4096};
}

// The callbacks of one whole cudaMalloc (m) the backend saw start: its
// ENTER and EXIT (correlation id corr) around its driver call's EXIT
// (corr + 1), both successful, in context ctx.
static void whole_malloc(malloc_params *m, uint32_t corr, CUcontext ctx) {
    int ok = 0;
    const CUpti_CallbackId rt = CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, drv = CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2;
    call(CUPTI_CB_DOMAIN_RUNTIME_API, rt, CUPTI_API_ENTER, &m->rt, &ok, corr, ctx);
    call(CUPTI_CB_DOMAIN_DRIVER_API, drv, CUPTI_API_EXIT, &m->drv, &ok, corr + 1, ctx);
    call(CUPTI_CB_DOMAIN_RUNTIME_API, rt, CUPTI_API_EXIT, &m->rt, &ok, corr, ctx);
}

static void test_outermost_call_is_recorded_once_with_its_stack(void) {
    start();
    CUcontext ctx = (CUcontext)0x1234;
    int ok = 0, oom = 2;
    malloc_params m;
    malloc_params_init(&m);
    // cudaMalloc, and the cuMemAlloc_v2 it makes inside: one allocation.
    call(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, CUPTI_API_ENTER, &m.rt, &ok, 10, ctx);
    call(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, CUPTI_API_ENTER, &m.drv, &ok, 11, ctx);
    call(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, CUPTI_API_EXIT, &m.drv, &ok, 11, ctx);
    CHECK_EQ_U64(device_nlog, 0);
    call(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, CUPTI_API_EXIT, &m.rt, &ok, 10, ctx);
    CHECK_EQ_U64(device_nlog, 1);
    logged_event *e = &device_log[0];
    CHECK_EQ_U64(e->op, TPPROF_DEV_OP_ALLOC);
    CHECK_EQ_U64(e->kind_code, TPPROF_DEV_KIND_DEVICE);
    CHECK_EQ_U64(e->device, FAKE_CUPTI_DEVICE); // from the call's context
    CHECK_EQ_U64(e->address, 0x7f0000);
    CHECK_EQ_U64(e->size, 4096);
    CHECK_EQ_U64(e->with_stack, 1);
    CHECK_STR_EQ(e->api, "cudaMalloc");
    // A driver call of the program's own, after: recorded (the runtime call is over).
    cuMemAllocAsync_ptsz_params as = {.dptr = &m.dptr, .bytesize = 256, .hStream = (CUstream)0x99};
    call(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz, CUPTI_API_ENTER, &as, &ok, 12, ctx);
    call(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz, CUPTI_API_EXIT, &as, &ok, 12, ctx);
    CHECK_EQ_U64(device_nlog, 2);
    CHECK_STR_EQ(device_log[1].api, "cuMemAllocAsync_ptsz");
    CHECK_EQ_U64(device_log[1].kind_code, TPPROF_DEV_KIND_ASYNC);
    CHECK_EQ_U64(device_log[1].stream, 0x99);
    // A failed call is recorded as failed (its status; no address).
    call(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, CUPTI_API_ENTER, &m.rt, &oom, 13, ctx);
    call(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, CUPTI_API_EXIT, &m.rt, &oom, 13, ctx);
    CHECK_EQ_U64(device_nlog, 3);
    CHECK_EQ_U64(device_log[2].result, 2);
    CHECK_EQ_U64(device_log[2].address, 0);
    CHECK_EQ_U64(oom, 2); // the program's status untouched
    // Pinned host memory has no device; no context: device unknown.
    void *host = (void *)0x5000;
    cudaMallocHost_v3020_params mh = {.ptr = &host, .size = 64};
    call(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMallocHost_v3020, CUPTI_API_ENTER, &mh, &ok, 14, ctx);
    call(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMallocHost_v3020, CUPTI_API_EXIT, &mh, &ok, 14, ctx);
    CHECK_EQ_U64((uint64_t)(int64_t)device_log[3].device, (uint64_t)-1);
    call(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, CUPTI_API_ENTER, &m.rt, &ok, 15, NULL);
    call(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, CUPTI_API_EXIT, &m.rt, &ok, 15, NULL);
    CHECK_EQ_U64((uint64_t)(int64_t)device_log[4].device, (uint64_t)-1);
    CHECK_EQ_U64(device_nlog, 5);
}

// CUPTI starts inside the program's first runtime call (its cuInit loads
// the injection library): that call's ENTER is never seen, so its driver
// call is recorded as the program's, and its EXIT does not count the block
// again. A later call is back to the rule.
static void test_first_call_started_before_the_subscription_counts_once(void) {
    start();
    CUcontext ctx = (CUcontext)0x1234;
    int ok = 0;
    malloc_params m;
    malloc_params_init(&m);
    call(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, CUPTI_API_EXIT, &m.drv, &ok, 31, ctx);
    call(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, CUPTI_API_EXIT, &m.rt, &ok, 30, ctx);
    CHECK_EQ_U64(device_nlog, 1);
    CHECK_STR_EQ(device_log[0].api, "cuMemAlloc_v2");
    // The next cudaMalloc, whole: one event, named by the runtime call.
    m.dev = (void *)0x7f8000;
    m.dptr = 0x7f8000;
    whole_malloc(&m, 32, ctx);
    CHECK_EQ_U64(device_nlog, 2);
    CHECK_STR_EQ(device_log[1].api, "cudaMalloc");
    CHECK_EQ_U64(device_log[1].address, 0x7f8000);
    // A runtime EXIT without ENTER whose block no driver call recorded is recorded.
    m.dev = (void *)0x7f9000;
    call(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, CUPTI_API_EXIT, &m.rt, &ok, 34, ctx);
    CHECK_EQ_U64(device_nlog, 3);
    CHECK_EQ_U64(device_log[2].address, 0x7f9000);
}

// A completed buffer as CUPTI hands it: taken from the backend's own
// buffer_requested, filled by hand, given back to buffer_completed.
static void complete_buffer(const CUpti_ActivityMemory4 *mem, size_t nmem, const CUpti_ActivityMemoryPool3 *pool) {
    uint8_t *buf = NULL;
    size_t size = 0, max = 0;
    fake_cupti()->buffer_requested(&buf, &size, &max);
    CHECK(buf != NULL && size >= 4096);
    if (!buf)
        return;
    size_t used = 0;
    for (size_t i = 0; i < nmem; i++) {
        memcpy(buf + used, &mem[i], sizeof mem[i]);
        used += sizeof mem[i];
    }
    if (pool) {
        memcpy(buf + used, pool, sizeof *pool);
        used += sizeof *pool;
    }
    fake_cupti()->buffer_completed(NULL, 0, buf, size, used);
}

static CUpti_ActivityMemory4 memory_record(uint32_t corr, uint64_t address, uint64_t bytes) {
    CUpti_ActivityMemory4 m;
    memset(&m, 0, sizeof m);
    m.kind = CUPTI_ACTIVITY_KIND_MEMORY2;
    m.memoryOperationType = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION;
    m.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    m.correlationId = corr;
    m.address = address;
    m.bytes = bytes;
    m.deviceId = 1;
    return m;
}

static void test_activity_records_join_calls_by_correlation_id(void) {
    start();
    CUcontext ctx = (CUcontext)0x1234;
    malloc_params m;
    malloc_params_init(&m);
    whole_malloc(&m, 20, ctx);
    CHECK_EQ_U64(device_nlog, 1);
    // Records of the recorded call (by its own id or its driver call's) are
    // not counted again; one no callback saw (id 90) is, without a stack.
    CUpti_ActivityMemory4 mem[3] = {memory_record(20, 0x7f0000, 4096), memory_record(21, 0x7f0000, 4096),
                                    memory_record(90, 0x9f0000, 1 << 20)};
    CUpti_ActivityMemoryPool3 pool;
    memset(&pool, 0, sizeof pool);
    pool.kind = CUPTI_ACTIVITY_KIND_MEMORY_POOL;
    pool.memoryPoolOperationType = CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_TRIMMED;
    pool.address = 0xabc000;
    pool.size = 2 << 20;
    pool.deviceId = 1;
    complete_buffer(mem, 3, &pool);
    CHECK_EQ_U64(device_nlog, 3);
    logged_event *e = &device_log[1];
    CHECK_EQ_U64(e->op, TPPROF_DEV_OP_ALLOC);
    CHECK_EQ_U64(e->address, 0x9f0000);
    CHECK_EQ_U64(e->size, 1 << 20);
    CHECK_EQ_U64(e->device, 1);
    CHECK_EQ_U64(e->with_stack, 0); // CUPTI's thread: no program stack to take
    CHECK_STR_EQ(e->api, "cupti:device");
    CHECK_EQ_U64(device_log[2].op, TPPROF_DEV_OP_POOL_TRIM);
    CHECK_EQ_U64(device_log[2].pool, 0xabc000);
    CHECK_EQ_U64(device_log[2].size, 2 << 20);
}

// CUPTI starts inside a call an interposition hook entered before the
// subscription (the hook keeps tpprof_device_depth raised over its real
// call, and records the call at its exit): none of that call's callbacks
// records, and its activity record is known as recorded. After the hook
// returned, callbacks record again.
static void test_call_inside_an_interposition_hook_is_left_to_the_hook(void) {
    start();
    CUcontext ctx = (CUcontext)0x1234;
    int ok = 0;
    malloc_params m;
    malloc_params_init(&m);
    tpprof_device_depth = 1; // inside the hook's real cudaMalloc
    call(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, CUPTI_API_ENTER, &m.drv, &ok, 41, ctx);
    call(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, CUPTI_API_EXIT, &m.drv, &ok, 41, ctx);
    call(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, CUPTI_API_EXIT, &m.rt, &ok, 40, ctx);
    tpprof_device_depth = 0;
    CHECK_EQ_U64(device_nlog, 0);
    // The next call, the backend's: recorded once, at the runtime exit.
    whole_malloc(&m, 42, ctx);
    CHECK_EQ_U64(device_nlog, 1);
    CHECK_STR_EQ(device_nlog ? device_log[0].api : "", "cudaMalloc");
    // The activity records of both calls: already counted, by the hook or the callback.
    CUpti_ActivityMemory4 mem[2] = {memory_record(40, 0x7f0000, 4096), memory_record(42, 0x7f0000, 4096)};
    complete_buffer(mem, 2, NULL);
    CHECK_EQ_U64(device_nlog, 1);
}

// cuCtxDestroy_v2 ends the context's blocks: recorded as a reset named
// cuCtxDestroy_v2 (writer/device.c: context_destroyed), on the device of the
// destroyed context, asked at ENTER (its parameter, not the callback's
// current context, which may be another one). Inside a runtime call it is
// the runtime's, not recorded.
static void test_context_destroy_is_a_reset_on_the_destroyed_contexts_device(void) {
    start();
    int ok = 0;
    cuCtxDestroy_v2_params d = {.ctx = (CUcontext)0x5678};
    call(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuCtxDestroy_v2, CUPTI_API_ENTER, &d, &ok, 50, NULL);
    call(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuCtxDestroy_v2, CUPTI_API_EXIT, &d, &ok, 50, NULL);
    CHECK_EQ_U64(device_nlog, 1);
    CHECK_EQ_U64(device_log[0].op, TPPROF_DEV_OP_DEVICE_RESET);
    CHECK_STR_EQ(device_nlog ? device_log[0].api : "", "cuCtxDestroy_v2");
    CHECK_EQ_U64(device_log[0].device, FAKE_CUPTI_DEVICE);
    // An EXIT whose ENTER was not seen: device unknown, not the last one's.
    call(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuCtxDestroy_v2, CUPTI_API_EXIT, &d, &ok, 51, NULL);
    CHECK_EQ_U64(device_nlog, 2);
    CHECK_EQ_U64((uint64_t)(int64_t)device_log[1].device, (uint64_t)-1);
    // Inside cudaDeviceReset: the runtime call's (recorded at its exit).
    call(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaDeviceReset_v3020, CUPTI_API_ENTER, NULL, &ok, 52,
         (CUcontext)0x1234);
    call(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuCtxDestroy_v2, CUPTI_API_ENTER, &d, &ok, 53, NULL);
    call(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuCtxDestroy_v2, CUPTI_API_EXIT, &d, &ok, 53, NULL);
    CHECK_EQ_U64(device_nlog, 2);
    call(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaDeviceReset_v3020, CUPTI_API_EXIT, NULL, &ok, 52,
         (CUcontext)0x1234);
    CHECK_EQ_U64(device_nlog, 3);
    CHECK_STR_EQ(device_nlog == 3 ? device_log[2].api : "", "cudaDeviceReset");
}

int main(int argc, char **argv) {
    static const check_scenario scenarios[] = {
        {"multiple_subscribers", test_another_subscriber_is_one_line_and_interposition_stays},
        {"subscribe_error", test_other_subscribe_errors_are_named},
        {"no_libcupti", test_missing_libcupti_is_one_line},
        {"subscribes", test_subscribes_to_every_memory_call_and_both_activity_kinds},
        {"outermost", test_outermost_call_is_recorded_once_with_its_stack},
        {"correlation", test_activity_records_join_calls_by_correlation_id},
        {"first_call", test_first_call_started_before_the_subscription_counts_once},
        {"inside_hook", test_call_inside_an_interposition_hook_is_left_to_the_hook},
        {"ctx_destroy", test_context_destroy_is_a_reset_on_the_destroyed_contexts_device},
    };
    // One scenario a process (the backend starts once): none named is a failure.
    return check_run_scenarios(argc > 1 ? argv[1] : "", scenarios, sizeof scenarios / sizeof *scenarios);
}
