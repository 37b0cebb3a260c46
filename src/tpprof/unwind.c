// unwind.c: capturing the allocating stack, inside the hooks.
//
// Default: libunwind's unw_backtrace with a per-thread cache; correct for code
// built without frame pointers. libunwind is dlopen'ed RTLD_LOCAL at start,
// never linked: libunwind.so.8 exports _Unwind_* and `backtrace`, and linking
// it into a preloaded object would put those ahead of libgcc_s and glibc in
// symbol lookup, rebinding the program's C++ exception handling.
// TPPROF_UNWIND=fp: a validated frame-pointer walk (bounded by the thread's
// stack, strictly increasing frame addresses, stops at anything odd); ~7x
// cheaper, exact only for code compiled with -fno-omit-frame-pointer.
// tpprof's own frames (anything inside libtpprof.so) are dropped from the top.
// Runs inside malloc hooks: no locks, no malloc.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>

#include "tpprof_internal.h"

typedef int (*backtrace_fn)(void **, int);
typedef int (*set_caching_fn)(void *, int);
typedef void (*flush_fn)(void *, uintptr_t, uintptr_t);

static backtrace_fn unw_bt;
static flush_fn unw_flush;
static void **unw_local_as;

enum { UNW_CACHE_PER_THREAD_ = 2 }; // libunwind's UNW_CACHE_PER_THREAD

// ---------------------------------------------------------------------------
// Setup (called once from the constructor, guard held).

void tpprof_unwind_init(void) {
    void *h = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
    if (!h) return; // stacks fall back to the frame-pointer walk
    unw_bt = (backtrace_fn)dlsym(h, "unw_backtrace");
    unw_flush = (flush_fn)dlsym(h, "_Ux86_64_flush_cache");
    unw_local_as = (void **)dlsym(h, "_ULx86_64_local_addr_space");
    set_caching_fn set_caching = (set_caching_fn)dlsym(h, "_ULx86_64_set_caching_policy");
    if (set_caching && unw_local_as) set_caching(*unw_local_as, UNW_CACHE_PER_THREAD_);
}

// After dlclose: cached unwind info for the unmapped code must go.
void tpprof_unwind_flush(void) {
    if (unw_flush && unw_local_as) unw_flush(*unw_local_as, 0, 0);
}

void tpprof_unwind_thread_bounds(uintptr_t *lo, uintptr_t *hi) {
    pthread_attr_t attr;
    *lo = *hi = 0;
    if (pthread_getattr_np(pthread_self(), &attr) != 0) return;
    void *addr = NULL;
    size_t size = 0;
    if (pthread_attr_getstack(&attr, &addr, &size) == 0) {
        *lo = (uintptr_t)addr;
        *hi = (uintptr_t)addr + size;
    }
    pthread_attr_destroy(&attr);
}

// ---------------------------------------------------------------------------
// Capture.

static inline bool is_self(uintptr_t ip) { return ip >= tpprof_self_lo && ip < tpprof_self_hi; }

__attribute__((noinline)) static int fp_walk(uintptr_t *ips, int max) {
    uintptr_t fp = (uintptr_t)__builtin_frame_address(0);
    uintptr_t lo = fp, hi = 0;
    struct tpprof_thread *t = tpprof_self;
    if (t && t->stack_hi > fp && t->stack_lo <= fp) hi = t->stack_hi;
    else hi = fp + ((uintptr_t)8 << 20);
    int n = 0;
    while (n < max) {
        if (fp < lo || fp > hi - 16 || (fp & 7) != 0) break;
        uintptr_t next = ((const uintptr_t *)fp)[0];
        uintptr_t ret = ((const uintptr_t *)fp)[1];
        if (ret < 4096) break;
        if (!(n == 0 && is_self(ret))) ips[n++] = ret;
        if (next <= fp) break;
        fp = next;
    }
    return n;
}

int tpprof_unwind(uintptr_t *ips, int max) {
    if (tpprof_cfg.unwind_fp || !unw_bt) return fp_walk(ips, max);
    void *buf[TPPROF_MAX_DEPTH + 16];
    int want = max + 8 > (int)(sizeof buf / sizeof buf[0]) ? (int)(sizeof buf / sizeof buf[0]) : max + 8;
    int got = unw_bt(buf, want);
    int i = 0;
    while (i < got && is_self((uintptr_t)buf[i])) i++;
    int n = 0;
    for (; i < got && n < max; i++) ips[n++] = (uintptr_t)buf[i];
    return n;
}
