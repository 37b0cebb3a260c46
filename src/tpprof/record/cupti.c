// cupti.c: the CUPTI backend (cupti.h): loading libcupti, the subscription,
// the callback on program threads, activity buffers, the exit flush.
//
// Hot path: on_callback runs on the program's threads inside every
// subscribed memory API call. It takes no lock and allocates nothing: a
// thread-local depth for the outermost-call rule, one decode into a stack
// struct, the recorder's entry, one atomic store into the correlation
// table. Activity buffers are mapped with raw system calls (never the
// interposed mmap or malloc: they are tpprof's, not the program's) and
// handled on CUPTI's own thread.
//
// What it must not do: call any CUPTI function but the ones resolved here;
// print more than one line per process; return anything but 1 from
// InitializeInjection; call up into the recorder (writer/, process/: the
// exit flush is theirs to call).
#define _GNU_SOURCE
#include "record/cupti.h"

#include "record/cupti_decode.h"
#include "record/device.h"

#include <dlfcn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

// ---------------------------------------------------------------------------
// libcupti, resolved at run time

static struct {
    __typeof__(cuptiSubscribe) *subscribe;
    __typeof__(cuptiUnsubscribe) *unsubscribe;
    __typeof__(cuptiEnableCallback) *enable_callback;
    __typeof__(cuptiActivityRegisterCallbacks) *register_callbacks;
    __typeof__(cuptiActivityEnable) *activity_enable;
    __typeof__(cuptiActivityFlushAll) *flush_all;
    __typeof__(cuptiActivityGetNextRecord) *next_record;
    __typeof__(cuptiGetDeviceId) *get_device_id;
    __typeof__(cuptiGetResultString) *result_string;
} api;

static CUpti_SubscriberHandle subscriber;
static atomic_bool initialized;
static bool activity_on;

// Runtime memory calls in progress on this thread: a driver call made inside
// one (cudaMalloc's cuMemAlloc_v2) is not the program's own.
static __thread int runtime_depth __attribute__((tls_model("initial-exec")));
// The address of the last allocation a driver callback recorded on this
// thread outside any runtime call seen: when CUPTI starts inside a runtime
// call (the program's first cudaMalloc runs cuInit, which loads us), that
// call's ENTER was never seen, its driver call was recorded as the
// program's, and its EXIT must not record the same block again.
static __thread uint64_t last_driver_alloc __attribute__((tls_model("initial-exec")));
// The device of the context this thread's cuCtxDestroy_v2 destroys, noted
// at its ENTER (at its EXIT the context is gone): -1 unknown.
static __thread int32_t destroyed_device __attribute__((tls_model("initial-exec"))) = -1;

bool tpprof_cupti_active(void) { return atomic_load_explicit(&tpprof_device_by_cupti, memory_order_acquire); }

// One line on stderr, with write(2): no stdio buffer, no allocation.
static void say(const char *a, const char *b, const char *c) {
    char line[512];
    int n = snprintf(line, sizeof line, "tpprof: --cupti: %s%s%s; device memory is recorded by interposition\n", a,
                     b ? b : "", c ? c : "");
    if (n > 0) {
        ssize_t w = write(2, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
        (void)w;
    }
}

// TPPROF_CUPTI_LIB (a test's fake, or a user's own path), then the
// loader's search, then the toolkit's usual places.
static void *open_cupti(char *why, size_t size) {
    const char *names[] = {getenv("TPPROF_CUPTI_LIB"), "libcupti.so.13", "libcupti.so.12", "libcupti.so",
                           "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so", "/usr/local/cuda/lib64/libcupti.so"};
    why[0] = 0;
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        if (!names[i] || !names[i][0])
            continue;
        void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (h)
            return h;
        if (!why[0] || i == 0) {
            const char *e = dlerror();
            snprintf(why, size, "%s", e ? e : names[i]);
        }
        if (i == 0)
            return NULL; // asked for that one by name: no other
    }
    return NULL;
}

static bool resolve(void *h) {
#define RESOLVE(field, name) (*(void **)&api.field = dlsym(h, name)) != NULL
    return RESOLVE(subscribe, "cuptiSubscribe") && RESOLVE(unsubscribe, "cuptiUnsubscribe") &&
           RESOLVE(enable_callback, "cuptiEnableCallback") &&
           RESOLVE(register_callbacks, "cuptiActivityRegisterCallbacks") &&
           RESOLVE(activity_enable, "cuptiActivityEnable") && RESOLVE(flush_all, "cuptiActivityFlushAll") &&
           RESOLVE(next_record, "cuptiActivityGetNextRecord") && RESOLVE(get_device_id, "cuptiGetDeviceId") &&
           RESOLVE(result_string, "cuptiGetResultString");
#undef RESOLVE
}

static const char *result_text(CUptiResult r) {
    const char *s = NULL;
    if (api.result_string && api.result_string(r, &s) == CUPTI_SUCCESS && s)
        return s;
    return "unknown CUPTI error";
}

// ---------------------------------------------------------------------------
// Correlation: which calls a callback recorded

// Slot (id & mask) holds the last correlation id a callback recorded there.
// 1 Mi slots (4 MiB of address space, touched as used): a record is known
// as recorded while fewer than that many calls came after its own.
#define SEEN_SLOTS (1u << 20)
static _Atomic uint32_t *seen;

static void seen_add(uint32_t id) {
    if (seen && id)
        atomic_store_explicit(&seen[id & (SEEN_SLOTS - 1)], id, memory_order_release);
}

// Was the call of correlation id recorded by its callback? A slot a later
// call took over counts as yes: every memory call is subscribed, so an
// activity record without its callback is the rare case (a call CUPTI has no
// callback for), and a miss costs one event where a wrong yes costs a
// double count.
static bool seen_has(uint32_t id) {
    if (!seen || !id)
        return false;
    uint32_t v = atomic_load_explicit(&seen[id & (SEEN_SLOTS - 1)], memory_order_acquire);
    return v == id || v > id;
}

// ---------------------------------------------------------------------------
// Callbacks (program threads)

static void record_event(const tpprof_cupti_event *e, int with_stack) {
    tpprof_device_record(e->op, e->kind_code, e->device, e->stream, e->pool, e->address, e->size, e->result, e->api,
                         with_stack);
}

static void CUPTIAPI on_callback(void *userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                                 const void *data) {
    (void)userdata;
    const CUpti_CallbackData *cb = data;
    bool unseen_enter = false; // a runtime EXIT whose ENTER came before the subscription
    if (!cb || (domain != CUPTI_CB_DOMAIN_RUNTIME_API && domain != CUPTI_CB_DOMAIN_DRIVER_API))
        return;
    if (tpprof_device_depth > 0) {
        // Inside an interposition hook that began before the subscription
        // (the call whose cuInit loaded us): the hook records that call at
        // its exit. Its memory's activity record is marked recorded too.
        seen_add(cb->correlationId);
        return;
    }
    if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) {
        if (cb->callbackSite == CUPTI_API_ENTER) {
            runtime_depth++;
            return;
        }
        bool entered = runtime_depth > 0;
        if (--runtime_depth > 0)
            return;
        runtime_depth = 0;
        if (!entered)
            unseen_enter = true;
    } else if (cb->callbackSite != CUPTI_API_EXIT) {
        CUcontext gone = runtime_depth > 0 ? NULL : tpprof_cupti_destroyed_context(domain, cbid, cb);
        uint32_t dev = 0;
        if (gone)
            destroyed_device = api.get_device_id(gone, &dev) == CUPTI_SUCCESS ? (int32_t)dev : -1;
        return;
    } else if (runtime_depth > 0) {
        // Inside a runtime call, which is the program's own and is recorded
        // at its exit. Its memory's activity record may carry this driver
        // call's correlation id: mark it recorded too.
        seen_add(cb->correlationId);
        return;
    }
    tpprof_cupti_event e;
    if (!tpprof_cupti_decode_callback(domain, cbid, cb, &e))
        return;
    if (domain == CUPTI_CB_DOMAIN_DRIVER_API) {
        last_driver_alloc = e.op == TPPROF_DEV_OP_ALLOC && e.result == 0 ? e.address : 0;
    } else if (unseen_enter && e.address && e.address == last_driver_alloc) {
        last_driver_alloc = 0;
        seen_add(e.correlation);
        return; // recorded by its driver call's callback
    }
    if (cbid == CUPTI_DRIVER_TRACE_CBID_cuCtxDestroy_v2 && domain == CUPTI_CB_DOMAIN_DRIVER_API) {
        e.device = destroyed_device; // not the callback's context: maybe another one, or gone
        destroyed_device = -1;
    } else if (e.device < 0 && e.kind_code != TPPROF_DEV_KIND_PINNED_HOST && cb->context) {
        uint32_t dev = 0;
        if (api.get_device_id(cb->context, &dev) == CUPTI_SUCCESS)
            e.device = (int32_t)dev;
    }
    record_event(&e, 1);
    seen_add(e.correlation);
}

// ---------------------------------------------------------------------------
// Activity buffers (CUPTI's thread)

#define BUFFER_BYTES (1u << 20)

static void *raw_map(size_t n) {
    long p = syscall(SYS_mmap, NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p < 0 && p > -4096 ? NULL : (void *)p;
}

static void raw_unmap(void *p, size_t n) { syscall(SYS_munmap, p, n); }

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records) {
    *buffer = raw_map(BUFFER_BYTES);
    *size = *buffer ? BUFFER_BYTES : 0;
    *max_records = 0; // as many as fit
}

static void activity_sink(const tpprof_cupti_event *e, void *arg) {
    (void)arg;
    if (seen_has(e->correlation))
        return; // its callback recorded it, with the stack
    record_event(e, 0);
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size, size_t valid) {
    (void)ctx;
    (void)stream;
    (void)size;
    if (!buffer)
        return;
    tpprof_cupti_walk(buffer, valid, api.next_record, activity_sink, NULL, NULL);
    raw_unmap(buffer, BUFFER_BYTES);
}

void tpprof_cupti_flush(void) {
    if (tpprof_cupti_active() && activity_on)
        api.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
}

// exit: registered after libcupti was loaded, so it runs before libcupti's
// own exit teardown (its static destructors, registered at its load) and
// before the recorder's exit scan and final write (registered at the
// recorder's start). _exit, quick_exit and exec run no atexit handler: the
// recorder's lifecycle flushes there (process/lifecycle.c).
static void flush_at_exit(void) { tpprof_cupti_flush(); }

// ---------------------------------------------------------------------------
// Start

static bool enable_all(void) {
    for (size_t i = 0; i < tpprof_cupti_runtime_ncbids; i++)
        if (api.enable_callback(1, subscriber, CUPTI_CB_DOMAIN_RUNTIME_API, tpprof_cupti_runtime_cbids[i]) !=
            CUPTI_SUCCESS)
            return false;
    for (size_t i = 0; i < tpprof_cupti_driver_ncbids; i++)
        if (api.enable_callback(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API, tpprof_cupti_driver_cbids[i]) !=
            CUPTI_SUCCESS)
            return false;
    return true;
}

int InitializeInjection(void) {
    if (atomic_exchange(&initialized, true))
        return 1;
    char why[400];
    void *h = open_cupti(why, sizeof why);
    if (!h) {
        say("cannot load libcupti (", why, ")");
        return 1;
    }
    if (!resolve(h)) {
        say("libcupti lacks a function tpprof needs (", dlerror(), ")");
        return 1;
    }
    CUptiResult r = api.subscribe(&subscriber, on_callback, NULL);
    if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
        say("another CUPTI subscriber owns this process (nsys, ncu, or a framework's profiler)", NULL, NULL);
        return 1;
    }
    if (r != CUPTI_SUCCESS) {
        char code[64];
        snprintf(code, sizeof code, " (%d)", (int)r);
        say("cuptiSubscribe failed: ", result_text(r), code);
        return 1;
    }
    if (!enable_all()) {
        api.unsubscribe(subscriber);
        say("cuptiEnableCallback failed", NULL, NULL);
        return 1;
    }
    seen = raw_map(SEEN_SLOTS * sizeof *seen);
    // Activity records add device truth; without them the callbacks still
    // record every call with its stack.
    activity_on = api.register_callbacks(buffer_requested, buffer_completed) == CUPTI_SUCCESS &&
                  api.activity_enable(CUPTI_ACTIVITY_KIND_MEMORY2) == CUPTI_SUCCESS;
    if (activity_on)
        api.activity_enable(CUPTI_ACTIVITY_KIND_MEMORY_POOL);
    // From here the interposition hooks record nothing (device.h), and the
    // recording says who captured (meta.device_capture).
    atomic_store_explicit(&tpprof_device_capture, "cupti", memory_order_relaxed);
    atomic_store_explicit(&tpprof_device_by_cupti, true, memory_order_release);
    atexit(flush_at_exit);
    return 1;
}
