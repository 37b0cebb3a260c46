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
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

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

static _Atomic uint32_t uw_gen = 1;

// After dlclose: cached unwind info for the unmapped code must go, and so
// must the frame-pointer verdicts (capture_verified) for its addresses.
void tpprof_unwind_flush(void) {
    if (unw_flush && unw_local_as) unw_flush(*unw_local_as, 0, 0);
    atomic_fetch_add(&uw_gen, 1);
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

// The signal stack of this thread (sigaltstack, interposed below: a crash
// handler's, often 8 KiB), or 0, 0. A new thread has none; a forked child
// keeps its parent's, as this TLS is copied with it.
static __thread uintptr_t alt_lo TPPROF_TLS, alt_hi TPPROF_TLS;

TPPROF_EXPORT int sigaltstack(const stack_t *ss, stack_t *old) {
    int r = (int)syscall(SYS_sigaltstack, ss, old);
    if (r == 0 && ss) {
        bool off = (ss->ss_flags & SS_DISABLE) != 0;
        alt_lo = off ? 0 : (uintptr_t)ss->ss_sp;
        alt_hi = off ? 0 : (uintptr_t)ss->ss_sp + ss->ss_size;
    }
    return r;
}

// The bounds of the stack that sp is on: the thread's, or its signal stack
// while a handler runs there. False when neither holds it (a coroutine's
// stack, or a thread whose bounds are unknown).
static inline bool stack_bounds(uintptr_t sp, uintptr_t *lo, uintptr_t *hi) {
    struct tpprof_thread *t = tpprof_self;
    if (TPPROF_LIKELY(t && t->stack_hi > sp && t->stack_lo <= sp)) {
        *lo = t->stack_lo;
        *hi = t->stack_hi;
        return true;
    }
    if (alt_hi > sp && alt_lo <= sp) {
        *lo = alt_lo;
        *hi = alt_hi;
        return true;
    }
    return false;
}

// The highest address a frame-pointer walk from fp may read below: the end
// of its stack. On a signal stack that is the signal stack's end: a handler
// interrupting code built without frame pointers saves whatever that code
// had in the frame-pointer register, and a walk that took it for a frame
// 8 MiB up read unmapped memory. On a stack of unknown bounds (a
// coroutine's) the walk still goes up to 8 MiB.
static inline uintptr_t walk_top(uintptr_t fp) {
    uintptr_t lo, hi;
    return stack_bounds(fp, &lo, &hi) ? hi : fp + ((uintptr_t)8 << 20);
}

__attribute__((noinline)) static int fp_walk(uintptr_t *ips, int max) {
    uintptr_t fp = (uintptr_t)__builtin_frame_address(0);
    uintptr_t lo = fp, hi = walk_top(fp);
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

// libunwind, tpprof's frames dropped.
static int unw_walk(uintptr_t *ips, int max) {
    void *buf[max + 8];
    int saved_errno = errno; // libunwind's checks of memory may set it: it is the program's
    int got = unw_bt(buf, max + 8);
    errno = saved_errno;
    int i = 0;
    while (i < got && is_self((uintptr_t)buf[i])) i++;
    int n = 0;
    for (; i < got && n < max; i++) ips[n++] = (uintptr_t)buf[i];
    return n;
}

// A hook runs on the program's stack, which may be small (a thread made
// with PTHREAD_STACK_MIN, 16 KiB, deep in its own calls). Below
// UNW_ROOM_BYTES of room libunwind is not called (its walk and its parsing
// of unwind tables take several KiB) and the frame-pointer walk stands
// alone; below FP_ROOM_BYTES no stack is taken at all.
#define UNW_ROOM_BYTES ((uintptr_t)12 << 10)
#define FP_ROOM_BYTES ((uintptr_t)4 << 10)

static uintptr_t stack_room(void) {
    uintptr_t sp = (uintptr_t)__builtin_frame_address(0), lo, hi;
    if (!stack_bounds(sp, &lo, &hi)) return UINTPTR_MAX;
    return sp - lo;
}

// ---------------------------------------------------------------------------
// The verified frame-pointer path (default).
//
// A frame-pointer walk steps from return address ips[k] to ips[k+1] through
// the saved frame pointer of the function that contains ips[k]; the step is
// exact iff that function keeps a frame pointer at that instruction, a
// static property of the address. So each thread learns, by comparing a
// frame-pointer walk with libunwind on the same stack, which return addresses
// step correctly (OK) and which do not (BAD: code built without frame
// pointers, signal trampolines). A walk whose every step goes through OK
// addresses is exactly what libunwind would return; any other falls back to
// libunwind (and teaches the verdicts). The bottom of a stack (glibc's
// __libc_start_call_main, start_thread: built without frame pointers) is
// learnt once per thread as an anchor: the frame address and return address
// where the walk stops being exact, and libunwind's few frames beyond it,
// which cannot change while that frame is live. A stack found in the
// thread's stack cache marked exact for the same walk skips the checks.
// dlclose bumps a generation: addresses may then hold other code.

enum { V_UNKNOWN = 0, V_OK = 1, V_BAD = 2 };
#define VSLOTS 4096
#define ANCHOR_TAIL 2

struct verdict_slot {
    uintptr_t ip;
    uint32_t gen, v;
};

struct uwstate {
    struct verdict_slot v[VSLOTS];
    uintptr_t anchor_fp, anchor_ip;
    uint32_t anchor_gen;
    int anchor_n;
    uintptr_t anchor_tail[ANCHOR_TAIL];
};

static __thread struct uwstate *uw TPPROF_TLS;

static inline struct verdict_slot *vslot(struct uwstate *s, uintptr_t ip) {
    return &s->v[(ip * 0x9E3779B97F4A7C15ULL) >> (64 - 12)];
}

static inline int verdict(struct uwstate *s, uintptr_t ip, uint32_t gen) {
    const struct verdict_slot *e = vslot(s, ip);
    return e->ip == ip && e->gen == gen ? (int)e->v : V_UNKNOWN;
}

static inline void set_verdict(struct uwstate *s, uintptr_t ip, uint32_t gen, int v) {
    struct verdict_slot *e = vslot(s, ip);
    e->ip = ip;
    e->gen = gen;
    e->v = (uint32_t)v;
}

// fp_walk2 writes frame k's frame address FPS_AT words after its return
// address (one array: one pointer in the loop).
#define FPS_AT (TPPROF_MAX_DEPTH + ANCHOR_TAIL)

// Like fp_walk, also keeping the frame address each return address was read
// at, fused with what the fast path needs: each frame is hashed as it is read
// (into acc: the depot's two chains, whose multiplies overlap the chain of
// loads) and the walk stops at the anchor (anchor_fp, anchor_ip; 0: none),
// setting *anchored, as nothing beyond it is used. It runs for every
// allocation, a dozen or more frames, so the loop carries as little as it
// can: tpprof's own frames are skipped before it, frame addresses only grow
// so one unsigned compare checks both bounds, and the anchor's return
// address is only compared when its frame address matches. A frame address
// inside the stack's bounds is safe to read whatever its alignment; a chain
// that goes astray inside them is what the verdicts catch.
__attribute__((noinline)) static int fp_walk2(uintptr_t *ips, int max, uintptr_t anchor_fp, uintptr_t anchor_ip,
                                              uint64_t acc[2], bool *anchored) {
    uintptr_t fp = (uintptr_t)__builtin_frame_address(0);
    uintptr_t top = walk_top(fp) - 16; // highest frame address with room for (next, ret)
    *anchored = false;
    if (max <= 0 || fp > top || (fp & 7) != 0) return 0;
    uintptr_t ret;
    for (;;) { // tpprof's frames
        ret = ((const uintptr_t *)fp)[1];
        if (ret < 4096) return 0;
        if (!is_self(ret)) break;
        uintptr_t next = ((const uintptr_t *)fp)[0];
        if (next <= fp || next > top) return 0;
        fp = next;
    }
    // One pointer walks both arrays (fps is FPS_AT words after ips) and the
    // hash state stays local: the loop's values then fit in registers.
    uint64_t a = acc[0], b = acc[1];
    uintptr_t *p = ips, *end = ips + max;
    for (;;) {
        p[FPS_AT] = fp;
        *p++ = ret;
        a = (a ^ ret) * TPPROF_STACK_HASH_KA;
        b = (b + ret) * TPPROF_STACK_HASH_KB;
        if (TPPROF_UNLIKELY(fp == anchor_fp) && ret == anchor_ip) {
            *anchored = true;
            break;
        }
        if (p >= end) break;
        uintptr_t next = ((const uintptr_t *)fp)[0];
        if (next <= fp || next > top) break;
        fp = next;
        ret = ((const uintptr_t *)fp)[1];
        if (ret < 4096) break;
    }
    acc[0] = a;
    acc[1] = b;
    return (int)(p - ips);
}

// f/fps: the frame-pointer walk (nf frames); l: libunwind's (nl frames).
static void learn(struct uwstate *s, uint32_t gen, const uintptr_t *f, const uintptr_t *fps, int nf,
                  const uintptr_t *l, int nl, int max) {
    int c = 0;
    while (c < nf && c < nl && f[c] == l[c]) c++;
    for (int i = 0; i + 1 < c; i++) set_verdict(s, f[i], gen, V_OK);
    if (c == 0 || (c == nl && nf == nl)) return; // nothing wrong (or nothing comparable)
    if (c == nf && nf == max) return;             // the walk was cut by depth, not wrong
    // The step from f[c-1] went astray (wrong frame, or stopped early, or
    // went on past the end).
    set_verdict(s, f[c - 1], gen, V_BAD);
    // A bottom anchor: libunwind reached the end, at most 2 frames further
    // (glibc's thread and process start), so the function at f[c-1] is the
    // thread's entry, called once. A longer tail could belong to an outer
    // function that calls this frame's caller from more than one place.
    if (nl < max && nl - c <= 2) {
        s->anchor_fp = fps[c - 1];
        s->anchor_ip = f[c - 1];
        s->anchor_n = nl - c;
        for (int i = c; i < nl; i++) s->anchor_tail[i - c] = l[i];
        s->anchor_gen = gen;
    }
}

// libunwind's walk (nl frames into a buffer on this frame, not the fast
// path's), teaching the verdicts when the frame-pointer walk f/fps (nf
// frames) is given.
static __attribute__((noinline)) uint32_t capture_unw(struct uwstate *s, uint32_t gen, const uintptr_t *f,
                                                      const uintptr_t *fps, int nf, int max) {
    uintptr_t l[max];
    int nl = unw_walk(l, max);
    if (s) learn(s, gen, f, fps, nf, l, nl, max);
    return tpprof_stack_intern(l, nl);
}

static uint32_t capture_verified(int max) {
    struct uwstate *s = uw;
    if (TPPROF_UNLIKELY(!s)) {
        s = uw = tpprof_mem_map(sizeof *s);
        if (s && tpprof_self) { // released with the thread's ring
            tpprof_self->uw_mem = s;
            tpprof_self->uw_bytes = sizeof *s;
        }
        if (!s) return capture_unw(NULL, 0, NULL, NULL, 0, max);
    }
    uint32_t gen = atomic_load_explicit(&uw_gen, memory_order_relaxed);
    uintptr_t f[FPS_AT + TPPROF_MAX_DEPTH]; // the return addresses (and the anchor's tail), then fps
    const uintptr_t *fps = f + FPS_AT;
    uint64_t acc[2] = {0, 0};
    bool anchored;
    bool use_anchor = s->anchor_gen == gen && s->anchor_fp;
    int nf = fp_walk2(f, max, use_anchor ? s->anchor_fp : 0, use_anchor ? s->anchor_ip : 0, acc, &anchored);
    int len = -1, fp_len = 0;
    if (anchored) {
        fp_len = nf;
        len = fp_len + s->anchor_n < max ? fp_len + s->anchor_n : max;
        for (int i = fp_len; i < len; i++) {
            f[i] = s->anchor_tail[i - fp_len];
            tpprof_stack_hash_step(acc, f[i]);
        }
    } else if (nf == max) {
        len = fp_len = max;
    }
    if (len > 0) {
        uint64_t h[2];
        tpprof_stack_hash_end(acc, len, h);
        uint32_t id = tpprof_stack_find_fp(h, (uint32_t)fp_len);
        if (id) return id;
        bool ok = true;
        for (int k = 0; k + 1 < fp_len && ok; k++) ok = verdict(s, f[k], gen) == V_OK;
        if (ok) return tpprof_stack_intern_h(f, len, h, (uint32_t)fp_len);
    }
    if (nf > max) nf = max;
    // Too little stack left for libunwind: the frame-pointer walk, as it is.
    if (TPPROF_UNLIKELY(stack_room() < UNW_ROOM_BYTES)) return tpprof_stack_intern(f, nf);
    // Slow path: libunwind decides, and teaches.
    return capture_unw(s, gen, f, fps, nf, max);
}

static __attribute__((noinline)) uint32_t capture_fp(int max) {
    uintptr_t ips[max];
    return tpprof_stack_intern(ips, fp_walk(ips, max));
}

uint32_t tpprof_capture(int max) {
    if (TPPROF_UNLIKELY(stack_room() < FP_ROOM_BYTES)) return 0; // no stack rather than no program
    if (tpprof_cfg.unwind_fp || !unw_bt || (tpprof_cfg.unwind_unw && stack_room() < UNW_ROOM_BYTES))
        return capture_fp(max);
    if (tpprof_cfg.unwind_unw) return capture_unw(NULL, 0, NULL, NULL, 0, max);
    return capture_verified(max);
}
