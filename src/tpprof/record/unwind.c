// unwind.c: capturing the allocating stack, inside the hooks.
//
// Default: a frame-pointer walk where it is verified exact (below), else a
// walk by the code's DWARF CFI rules (cfiwalk.c), else libunwind's
// unw_backtrace; correct for code built without frame pointers. libunwind is dlopen'ed RTLD_LOCAL at start,
// never linked: libunwind.so.8 exports _Unwind_* and `backtrace`, and linking
// it into a preloaded object would put those ahead of libgcc_s and glibc in
// symbol lookup, rebinding the program's C++ exception handling.
// TPPROF_UNWIND=fp+libunwind: the same without the CFI walk (libunwind
// where the frame-pointer walk does not stand). TPPROF_UNWIND=fp: a validated frame-pointer walk (bounded by the thread's
// stack, strictly increasing frame addresses, stops at anything odd); ~7x
// cheaper, exact only for code compiled with -fno-omit-frame-pointer.
// tpprof's own frames (anything inside libtpprof.so) are dropped from the top.
// Runs inside malloc hooks: no locks, no malloc.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include "base/base.h"
#include "base/elfsym.h"
#include "base/mem.h"
#include "base/modules.h"
#include "record/cfi.h"
#include "record/pyframes.h"
#include "record/rings.h"
#include "record/stacks.h"

typedef int (*backtrace_fn)(void **, int);
typedef int (*set_caching_fn)(void *, int);
typedef void (*flush_fn)(void *, uintptr_t, uintptr_t);

static backtrace_fn unw_bt;
typedef int (*getattr_fn)(pthread_t, pthread_attr_t *);
static getattr_fn real_getattr;
static __thread int in_getattr TPPROF_TLS;
static void verdicts_init(void);
static void big_init(void *h);
static flush_fn unw_flush;
static void **unw_local_as;

enum { UNW_CACHE_PER_THREAD_ = 2 }; // libunwind's UNW_CACHE_PER_THREAD
#define BIG_STACK_BYTES ((size_t)64 << 10) // libunwind's own stack (see unw_walk_big)

// ---------------------------------------------------------------------------
// Setup (called once from the constructor, guard held).

// The C library's pthread_getattr_np (looked up in the constructor; before
// it, by whoever asks first: a dlsym inside a hook later would drop the
// calling thread's pending dlerror() state, see scan.c).
static getattr_fn getattr_real(void) {
    if (!real_getattr) real_getattr = (getattr_fn)dlsym(RTLD_NEXT, "pthread_getattr_np");
    return real_getattr;
}

// [exit_lo, exit_hi): the C library's exit (tpprof_unwind_exit_caller_sp).
static uintptr_t exit_lo, exit_hi;

void tpprof_unwind_init(void) {
    getattr_real();
    Dl_info info;
    const ElfW(Sym) *sym = NULL;
    void *f = dlsym(RTLD_NEXT, "exit");
    size_t size = f ? tpprof_elfsym_size(f, "exit") : 0;
    if (f && !size && dladdr1(f, &info, (void **)&sym, RTLD_DL_SYMENT) && sym) size = sym->st_size;
    if (size) {
        exit_lo = (uintptr_t)f;
        exit_hi = exit_lo + size;
    }
    void *h = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
    if (!h) return; // stacks fall back to the frame-pointer walk
    verdicts_init();
    unw_bt = (backtrace_fn)dlsym(h, "unw_backtrace");
    unw_flush = (flush_fn)dlsym(h, "_Ux86_64_flush_cache");
    unw_local_as = (void **)dlsym(h, "_ULx86_64_local_addr_space");
    set_caching_fn set_caching = (set_caching_fn)dlsym(h, "_ULx86_64_set_caching_policy");
    if (set_caching && unw_local_as) set_caching(*unw_local_as, UNW_CACHE_PER_THREAD_);
    big_init(h);
}

static _Atomic uint32_t uw_gen = 1;

// After dlclose: cached unwind info for the unmapped code must go, and so
// must the frame-pointer verdicts (capture_verified) for its addresses.
void tpprof_unwind_flush(void) {
    if (unw_flush && unw_local_as) unw_flush(*unw_local_as, 0, 0);
    atomic_fetch_add(&uw_gen, 1);
}

void tpprof_unwind_release(struct tpprof_thread *t) {
#if defined(__x86_64__)
    tpprof_mem_unmap(t->big_stack, BIG_STACK_BYTES);
#endif
    t->big_stack = NULL;
    // (The CFI walk's state stays with the struct, for the next thread that
    // takes it: its rules are facts about code, still true.)
}

// The thread's stack, from the C library's pthread_getattr_np. That holds
// the thread's own lock while it allocates (its CPU set): a thread whose
// first allocation is made there would wait for itself forever if its
// registration asked again (a Rust program's threads, which ask for their
// stack as they start). So pthread_getattr_np is interposed: inside it the
// bounds come from /proc/self/maps (mapping_of), or, if that cannot be
// read, are filled in as it returns.

static void stack_of(getattr_fn getattr, uintptr_t *lo, uintptr_t *hi) {
    pthread_attr_t attr;
    *lo = *hi = 0;
    if (!getattr || getattr(pthread_self(), &attr) != 0) return;
    void *addr = NULL;
    size_t size = 0;
    if (pthread_attr_getstack(&attr, &addr, &size) == 0) {
        *lo = (uintptr_t)addr;
        *hi = (uintptr_t)addr + size;
    }
    pthread_attr_destroy(&attr);
}

// The mapping that holds `sp`, from /proc/self/maps read with raw system
// calls into a small buffer (no malloc, no stdio): a thread's stack is one
// mapping (its guard page below is another), the main thread's is [stack].
// Each line is "lo-hi perms ...": only the two numbers are read, a byte at a
// time, so a line of any length (a long path) is fine. False if it cannot be
// read.
static bool mapping_of(uintptr_t sp, uintptr_t *lo, uintptr_t *hi) {
    // thread-self: after main's pthread_exit, self's maps read empty.
    int fd = (int)syscall(SYS_openat, AT_FDCWD, "/proc/thread-self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0) fd = (int)syscall(SYS_openat, AT_FDCWD, "/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    char buf[512];
    uintptr_t a = 0, b = 0;
    int field = 0; // 0: lo, 1: hi, 2: the rest of the line
    bool found = false;
    long got;
    while (!found && (got = syscall(SYS_read, fd, buf, sizeof buf)) > 0) {
        for (long i = 0; i < got && !found; i++) {
            char c = buf[i];
            if (c == '\n') {
                a = b = 0;
                field = 0;
            } else if (field == 0 && c == '-') {
                field = 1;
            } else if (field == 1 && c == ' ') {
                field = 2;
                if (a <= sp && sp < b) {
                    *lo = a;
                    *hi = b;
                    found = true;
                }
            } else if (field < 2) {
                uintptr_t d = (uintptr_t)(c <= '9' ? c - '0' : (c | 32) - 'a' + 10);
                if (field == 0) a = a << 4 | (d & 15);
                else b = b << 4 | (d & 15);
            }
        }
    }
    syscall(SYS_close, fd);
    return found;
}

void tpprof_unwind_thread_bounds(uintptr_t *lo, uintptr_t *hi) {
    if (in_getattr) {
        *lo = *hi = 0;
        int saved_errno = errno;
        mapping_of((uintptr_t)__builtin_frame_address(0), lo, hi);
        errno = saved_errno;
        return;
    }
    stack_of(getattr_real(), lo, hi);
}

TPPROF_EXPORT int pthread_getattr_np(pthread_t thread, pthread_attr_t *attr) {
    if (!getattr_real()) return ENOSYS;
    in_getattr++;
    int r = real_getattr(thread, attr);
    in_getattr--;
    struct tpprof_thread *t = tpprof_self;
    if (t && !t->stack_hi && !in_getattr) { // registered in there: its bounds now
        int saved_errno = errno, saved_guard = tpprof_guard;
        tpprof_guard = 1;
        uintptr_t lo, hi;
        stack_of(real_getattr, &lo, &hi);
        t->stack_lo = lo;
        t->stack_hi = hi;
        tpprof_guard = saved_guard;
        errno = saved_errno;
    }
    return r;
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

// libunwind, tpprof's frames dropped. Its walk is asked for tpprof's frames
// (counted on their frame-pointer chain, which is exact: tpprof is built with
// frame pointers) and `max` more, not a fixed 8 more: each frame it walks
// costs a lookup in its cache, and a program's stacks are often deeper than
// `max`. Should it find more of tpprof's frames than counted, it walks again.
__attribute__((noinline)) static int unw_walk_here(uintptr_t *ips, int max) {
    int self = 1; // the return address into this function
    uintptr_t fp = (uintptr_t)__builtin_frame_address(0);
    while (self < 16 && is_self(((const uintptr_t *)fp)[1])) {
        uintptr_t next = ((const uintptr_t *)fp)[0];
        self++;
        if (next <= fp) break;
        fp = next;
    }
    int want = max + self + 1;
    void *buf[max + 24];
    int got = unw_bt(buf, want), i = 0;
    while (i < got && is_self((uintptr_t)buf[i])) i++;
    if (got == want && got - i < max) {
        got = unw_bt(buf, max + 24);
        i = 0;
        while (i < got && is_self((uintptr_t)buf[i])) i++;
    }
    int n = 0;
    for (; i < got && n < max; i++) ips[n++] = (uintptr_t)buf[i];
    return n;
}

// One more in a counter of the calling thread's own struct (rings.h): a
// plain load and store, read by tpprof_walk_counts.
static inline void count(_Atomic uint64_t *c) {
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1, memory_order_relaxed);
}

// The CFI walk (cfiwalk.c) from the first frame outside tpprof: its
// registers are those the frame-pointer chain of tpprof's frames (exact:
// tpprof is built with frame pointers) restores on return into it. -1
// where it cannot be exact (libunwind decides), or the thread has no
// struct (its counter is there).

__attribute__((noinline)) static int cfi_walk_here(uintptr_t *ips, int max, uint32_t gen) {
#if defined(__x86_64__)
    struct tpprof_thread *t = tpprof_self;
    if (!t) return -1;
    if (TPPROF_UNLIKELY(!t->cfi) && !(t->cfi = tpprof_cfi_state_new())) return -1;
    uintptr_t fp = (uintptr_t)__builtin_frame_address(0), lo, hi;
    if (!stack_bounds(fp, &lo, &hi)) return -1;
    for (int self = 0;; self++) {
        if (fp < lo || fp > hi - 16 || (fp & 7) != 0 || self > 32) return -1;
        uintptr_t ret = ((const uintptr_t *)fp)[1];
        if (!is_self(ret)) break;
        uintptr_t next = ((const uintptr_t *)fp)[0];
        if (next <= fp) return -1;
        fp = next;
    }
    struct tpprof_cfi_regs r = {((const uintptr_t *)fp)[1], fp + 16, ((const uintptr_t *)fp)[0]};
    int n = tpprof_cfi_walk(t->cfi, &r, lo, hi, gen, ips, max);
    if (n > 0) count(&t->cfi_walks);
    return n;
#else
    (void)ips, (void)max, (void)gen;
    return -1;
#endif
}

// A hook runs on the program's stack, which may be small (a thread made
// with PTHREAD_STACK_MIN, 16 KiB, deep in its own calls). Below
// UNW_ROOM_BYTES of room libunwind is not called (its walk and its parsing
// of unwind tables take several KiB) and the frame-pointer walk stands
// alone; below FP_ROOM_BYTES no stack is taken at all.
#define UNW_ROOM_BYTES ((uintptr_t)12 << 10)
#define FP_ROOM_BYTES ((uintptr_t)4 << 10)
// The CFI walk and, on a miss, its parsing of unwind tables take about
// 1.5 KiB below capture_unw (gcc -fstack-usage, _dl_find_object's own
// frame aside); under CFI_ROOM_BYTES libunwind walks instead, on its own
// stack.
#define CFI_ROOM_BYTES ((uintptr_t)3 << 10)

static uintptr_t stack_room(void) {
    uintptr_t sp = (uintptr_t)__builtin_frame_address(0), lo, hi;
    if (!stack_bounds(sp, &lo, &hi)) return UINTPTR_MAX;
    return sp - lo;
}

uintptr_t tpprof_stack_room(void) { return stack_room(); }

// ---------------------------------------------------------------------------
// libunwind on a stack of its own.
//
// Where the program's stack has too little room left for libunwind (a
// thread made with PTHREAD_STACK_MIN, a handler on a small signal stack),
// the walk runs on a stack of the thread's own, mapped the first time it is
// needed (64 KiB, unmapped with its ring): libunwind starts from the
// registers taken here, on the program's stack (unw_getcontext), and reads
// that stack as usual; only its own frames and parsing go to the other one.
// Before, such a thread got the frame-pointer walk as it was: code built
// without frame pointers then showed one frame. x86-64 only (the switch is
// four instructions of assembly); elsewhere the frame-pointer walk stays.
#if defined(__x86_64__)
typedef int (*init_local_fn)(void *cursor, void *ctx);
typedef int (*step_fn)(void *cursor);
typedef int (*get_reg_fn)(void *cursor, int reg, uintptr_t *value);
typedef int (*getcontext_fn)(void *ctx);
static init_local_fn unw_init_local_p;
static step_fn unw_step_p;
static get_reg_fn unw_get_reg_p;
static getcontext_fn unw_getcontext_p;
enum { UNW_CURSOR_WORDS_ = 127, UNW_REG_IP_ = 16 }; // libunwind-x86_64.h's UNW_TDEP_CURSOR_LEN, UNW_X86_64_RIP

static void big_init(void *h) {
    unw_init_local_p = (init_local_fn)dlsym(h, "_ULx86_64_init_local");
    unw_step_p = (step_fn)dlsym(h, "_ULx86_64_step");
    unw_get_reg_p = (get_reg_fn)dlsym(h, "_ULx86_64_get_reg");
    unw_getcontext_p = (getcontext_fn)dlsym(h, "_Ux86_64_getcontext");
}

struct big_walk {
    void *ctx;
    uintptr_t *ips;
    int max, n;
};

// Runs on the thread's own stack: libunwind from the registers in b->ctx.
static void big_walk_run(struct big_walk *b) {
    uint64_t cursor[UNW_CURSOR_WORDS_];
    b->n = 0;
    if (unw_init_local_p(cursor, b->ctx) < 0) return;
    bool top = true;
    do {
        uintptr_t ip = 0;
        if (unw_get_reg_p(cursor, UNW_REG_IP_, &ip) < 0 || ip == 0) break;
        if (top && is_self(ip)) continue; // tpprof's frames
        top = false;
        b->ips[b->n++] = ip;
    } while (b->n < b->max && unw_step_p(cursor) > 0);
}

// Calls big_walk_run(b) with the stack pointer at `sp` (16-byte aligned),
// then comes back to this stack. Everything the call may change is declared
// clobbered; rbx keeps this stack's pointer across it.
__attribute__((noinline)) static void call_on_stack(struct big_walk *b, uintptr_t sp) {
    void (*fn)(struct big_walk *) = big_walk_run;
    __asm__ volatile("mov %%rsp, %%rbx\n\t"
                     "mov %[sp], %%rsp\n\t"
                     "call *%[fn]\n\t"
                     "mov %%rbx, %%rsp"
                     : "+D"(b), [fn] "+r"(fn), [sp] "+r"(sp)
                     :
                     : "rbx", "rax", "rcx", "rdx", "rsi", "r8", "r9", "r10", "r11", "memory", "cc", "xmm0", "xmm1",
                       "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12",
                       "xmm13", "xmm14", "xmm15");
}

// libunwind's walk on the thread's own stack; -1 if it cannot be had.
static int unw_walk_big(uintptr_t *ips, int max) {
    struct tpprof_thread *t = tpprof_self;
    if (!unw_init_local_p || !unw_step_p || !unw_get_reg_p || !unw_getcontext_p || !t) return -1;
    if (!t->big_stack) {
        t->big_stack = tpprof_mem_map(BIG_STACK_BYTES);
        if (!t->big_stack) return -1;
    }
    // The registers at the bottom of that mapping, the stack above them.
    _Static_assert(sizeof(ucontext_t) + 1024 < BIG_STACK_BYTES, "room for the walk");
    void *ctx = t->big_stack;
    uintptr_t sp = ((uintptr_t)t->big_stack + BIG_STACK_BYTES) & ~(uintptr_t)15;
    struct big_walk b = {ctx, ips, max, 0};
    if (unw_getcontext_p(ctx) != 0) return -1;
    call_on_stack(&b, sp);
    return b.n;
}

// The stack pointer of exit's caller, found by libunwind from here (exit's
// handlers run below exit: __run_exit_handlers, and where the handler was
// registered before the loader's, _dl_fini and __cxa_finalize). 0: no frame
// of exit's on this stack, or no libunwind.
uintptr_t tpprof_unwind_exit_caller_sp(void) {
    if (!unw_init_local_p || !unw_step_p || !unw_get_reg_p || !unw_getcontext_p || !exit_lo) return 0;
    enum { UNW_REG_SP_ = 7 }; // UNW_X86_64_RSP
    ucontext_t ctx;
    uint64_t cursor[UNW_CURSOR_WORDS_];
    if (unw_getcontext_p(&ctx) != 0 || unw_init_local_p(cursor, &ctx) < 0) return 0;
    for (int depth = 0; depth < 256; depth++) {
        uintptr_t ip = 0;
        if (unw_get_reg_p(cursor, UNW_REG_IP_, &ip) < 0 || ip == 0) return 0;
        // A return address (exit calls its handlers last: its return
        // address is one past its end, exit_hi itself).
        bool in_exit = ip - 1 >= exit_lo && ip - 1 < exit_hi;
        if (unw_step_p(cursor) <= 0) return 0;
        uintptr_t sp = 0;
        if (in_exit) return unw_get_reg_p(cursor, UNW_REG_SP_, &sp) < 0 ? 0 : sp;
    }
    return 0;
}
#else
static void big_init(void *h) { (void)h; }
static int unw_walk_big(uintptr_t *ips, int max) {
    (void)ips, (void)max;
    return -1;
}
uintptr_t tpprof_unwind_exit_caller_sp(void) { return 0; }
#endif

// libunwind's walk: on the program's stack where it has room, else on the
// thread's own (-1 where that cannot be had either).
static int unw_walk(uintptr_t *ips, int max) {
    int saved_errno = errno; // libunwind's checks of memory may set it: it is the program's
    int n = stack_room() >= UNW_ROOM_BYTES ? unw_walk_here(ips, max) : unw_walk_big(ips, max);
    errno = saved_errno;
    // It ends before a frame whose return address is no user-space address
    // (cfiwalk.c): it read a word that is not one, and a pseudo address of
    // a Python frame (pyframes.h) must not be taken for a native one.
    for (int i = 0; i < n; i++)
        if (ips[i] >= TPPROF_USER_END) return i;
    return n;
}

// libunwind's first walk on a thread allocates the thread's slot of its
// dynamic TLS (the loader mallocs it): done here, as the thread gets its
// ring (the plain guard set), not in its first hook, where it would read as
// a signal handler's call the hook missed (hooks.c).
void tpprof_unwind_thread_warm(void) {
    uintptr_t ip[1];
    if (unw_bt && !tpprof_cfg.unwind_fp) (void)unw_walk(ip, 1);
}

// ---------------------------------------------------------------------------
// The verified frame-pointer path (default).
//
// A frame-pointer walk steps from return address ips[k] to ips[k+1] through
// the saved frame pointer of the function that contains ips[k]; the step is
// exact iff that function keeps a frame pointer at that instruction, a
// static property of the address. So the process learns, by comparing a
// frame-pointer walk with libunwind on the same stack, which return addresses
// step correctly (OK) and which do not (BAD: code built without frame
// pointers, signal trampolines). A walk whose every step goes through OK
// addresses is exactly what libunwind would return; any other falls back to
// libunwind (and teaches the verdicts). The bottom of a stack (glibc's
// __libc_start_call_main, start_thread: built without frame pointers) is an
// anchor: the return address where the walk stops being exact, and
// libunwind's few frames beyond it, which are the same wherever that return
// address is seen (it is the one call into the thread's or the program's
// start routine). A stack found in the thread's stack cache marked exact for
// the same walk skips the checks. dlclose bumps a generation: addresses may
// then hold other code.
//
// Verdicts and anchors are the process's, not a thread's: they are facts
// about code. A new thread whose code the process has seen before then
// never calls libunwind, whose first call on a thread maps and fills a
// 256 KiB frame cache for it (2,000 threads: 500 MiB resident), and which
// made a short-lived thread cost 120 us more. Each verdict is one 64-bit
// word (the address, the generation's low bits and the verdict), read and
// written whole, so threads need no lock; an anchor is written once, then
// published. Each thread keeps its own anchor's frame address, the walk's
// cheap stop.

// SKIP: the function holding the address keeps no frame pointer, but it is
// right above the hook (operator new, a malloc wrapper built without frame
// pointers): its caller's return address lies a fixed number of words above
// the slot its own was read from, and the frame pointer is its caller's.
enum { V_UNKNOWN = 0, V_OK = 1, V_BAD = 2, V_SKIP = 3 };
#define VBITS 14
#define VSLOTS (1u << VBITS) // 128 KiB, touched as learnt
#define V_IP_BITS 48         // user-space addresses fit (x86-64, aarch64)
#define V_GEN_BITS 8         // the generation's low bits (dlcloses)
#define V_KEY_MASK (((uint64_t)1 << (V_IP_BITS + V_GEN_BITS)) - 1)
#define V_OFF_MAX 63         // a SKIP's offset in words (6 bits)
#define MAX_SKIPS 3          // frameless functions in a row above the hook
#define ANCHOR_TAIL 2
#define MAX_ANCHORS 32

static _Atomic uint64_t *verdicts;
static _Atomic int any_skip; // a SKIP was learnt: walks look for them

struct anchor {
    uintptr_t ip;
    uint32_t gen;
    int n;
    uintptr_t tail[ANCHOR_TAIL];
};
static struct anchor anchors[MAX_ANCHORS];
static _Atomic uint32_t anchors_claimed, anchors_ready[MAX_ANCHORS];

struct uwstate { // this thread's anchor, found among the process's
    uintptr_t anchor_fp;
    const struct anchor *anchor;
    uint32_t slow_run, probe; // walks in a row that libunwind took (see capture_verified)
};

// A thread whose last SLOW_RUN walks all ended in libunwind (a program built
// without frame pointers, such as Debian's cc1 or as: every caller of malloc
// is frameless, so no frame-pointer walk ever stands) goes to libunwind
// directly, without the frame-pointer walk and the comparison that teaches
// the verdicts, except one walk in PROBE_EVERY; the first of those that
// stands ends it. The stacks are libunwind's either way.
#define SLOW_RUN 64
#define PROBE_EVERY 64

static __thread struct uwstate uw TPPROF_TLS;

// (NULL if it cannot be mapped: then libunwind takes every stack.)
static void verdicts_init(void) { verdicts = tpprof_mem_map(VSLOTS * sizeof *verdicts); }

// One verdict word: address (48 bits), generation (8), verdict (2), SKIP
// offset (6).
static inline uint64_t vpack(uintptr_t ip, uint32_t gen, int v, int off) {
    return (uint64_t)ip | (uint64_t)(gen & ((1u << V_GEN_BITS) - 1)) << V_IP_BITS |
           (uint64_t)v << (V_IP_BITS + V_GEN_BITS) | (uint64_t)off << (V_IP_BITS + V_GEN_BITS + 2);
}

// The two slots an address may take.
static inline _Atomic uint64_t *vslot(uintptr_t ip, int way) {
    return &verdicts[((ip * 0x9E3779B97F4A7C15ULL) >> (64 - VBITS)) ^ (uint32_t)way];
}

// The verdict word of ip, or 0.
static inline uint64_t verdict_word(uintptr_t ip, uint32_t gen) {
    if (!verdicts || ip >> V_IP_BITS) return 0;
    uint64_t want = vpack(ip, gen, 0, 0);
    for (int way = 0; way < 2; way++) {
        uint64_t e = atomic_load_explicit(vslot(ip, way), memory_order_relaxed);
        if ((e & V_KEY_MASK) == want) return e;
    }
    return 0;
}

static inline int verdict(uintptr_t ip, uint32_t gen) {
    return (int)(verdict_word(ip, gen) >> (V_IP_BITS + V_GEN_BITS) & 3);
}

static inline int skip_words(uint64_t e) { return (int)(e >> (V_IP_BITS + V_GEN_BITS + 2)); }

static void set_verdict_off(uintptr_t ip, uint32_t gen, int v, int off) {
    if (!verdicts || ip >> V_IP_BITS) return;
    uint64_t key = vpack(ip, gen, 0, 0);
    // Its own slot, else a free or stale one of the two, else the first.
    _Atomic uint64_t *at = vslot(ip, 0);
    for (int way = 0; way < 2; way++) {
        uint64_t e = atomic_load_explicit(vslot(ip, way), memory_order_relaxed);
        if ((e & V_KEY_MASK) == key) {
            at = vslot(ip, way);
            break;
        }
        if (way == 1 && (e == 0 || ((e >> V_IP_BITS) & ((1u << V_GEN_BITS) - 1)) != (gen & ((1u << V_GEN_BITS) - 1))))
            at = vslot(ip, 1);
    }
    atomic_store_explicit(at, vpack(ip, gen, v, off), memory_order_relaxed);
}

static void set_verdict(uintptr_t ip, uint32_t gen, int v) { set_verdict_off(ip, gen, v, 0); }

// A SKIP whose function also uses the frame-pointer register for its own
// data (libstdc++'s string constructors): its caller's frame pointer is
// where it saved it, a fixed number of words above the slot too. Its
// verdict is a SKIP with offset SKIPF_MARK; the two offsets are here, one
// word an address (48 bits), the generation's low 4, the two offsets.
#define SKIPF_MARK V_OFF_MAX
#define SKIPF_BITS 10
static _Atomic uint64_t skipf[1u << SKIPF_BITS];

static inline _Atomic uint64_t *skipf_slot(uintptr_t ip) {
    return &skipf[(ip * 0x9E3779B97F4A7C15ULL) >> (64 - SKIPF_BITS)];
}

static inline uint64_t skipf_key(uintptr_t ip, uint32_t gen) {
    return (uint64_t)ip | (uint64_t)(gen & 15) << V_IP_BITS;
}

// The offsets of ip's SKIPF (return address, saved frame pointer), or false.
static inline bool skipf_get(uintptr_t ip, uint32_t gen, int *off_ret, int *off_fp) {
    uint64_t e = atomic_load_explicit(skipf_slot(ip), memory_order_relaxed);
    if ((e & (((uint64_t)1 << (V_IP_BITS + 4)) - 1)) != skipf_key(ip, gen)) return false;
    *off_ret = (int)(e >> (V_IP_BITS + 4) & 63);
    *off_fp = (int)(e >> (V_IP_BITS + 10) & 63);
    return true;
}

static void skipf_set(uintptr_t ip, uint32_t gen, int off_ret, int off_fp) {
    if (ip >> V_IP_BITS) return;
    atomic_store_explicit(skipf_slot(ip),
                          skipf_key(ip, gen) | (uint64_t)off_ret << (V_IP_BITS + 4) | (uint64_t)off_fp << (V_IP_BITS + 10),
                          memory_order_relaxed);
}

// The anchor at return address ip, or NULL.
static const struct anchor *anchor_find(uintptr_t ip, uint32_t gen) {
    uint32_t n = atomic_load_explicit(&anchors_claimed, memory_order_acquire);
    if (n > MAX_ANCHORS) n = MAX_ANCHORS;
    for (uint32_t i = 0; i < n; i++)
        if (atomic_load_explicit(&anchors_ready[i], memory_order_acquire) && anchors[i].ip == ip && anchors[i].gen == gen)
            return &anchors[i];
    return NULL;
}

static const struct anchor *anchor_add(uintptr_t ip, uint32_t gen, const uintptr_t *tail, int n) {
    const struct anchor *a = anchor_find(ip, gen);
    if (a) return a;
    uint32_t i = atomic_fetch_add(&anchors_claimed, 1);
    if (i >= MAX_ANCHORS) return NULL; // (another thread may add the same one: both are right)
    struct anchor *e = &anchors[i];
    e->ip = ip;
    e->gen = gen;
    e->n = n;
    for (int k = 0; k < n; k++) e->tail[k] = tail[k];
    atomic_store_explicit(&anchors_ready[i], 1, memory_order_release);
    return e;
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
// (with_skips is a constant: fp_walk2 is the loop alone, as fast as before
// SKIPs existed; fp_walk2_skips, used once a SKIP was learnt, applies them.)
static inline __attribute__((always_inline)) int walk_body(uintptr_t start, uintptr_t *ips, int max,
                                                           uintptr_t anchor_fp, uintptr_t anchor_ip, uint64_t acc[2],
                                                           bool *anchored, uint32_t gen, uintptr_t *slots, int *nskip,
                                                           bool with_skips) {
    uintptr_t fp = start ? start : (uintptr_t)__builtin_frame_address(0);
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
    // Frameless functions right above the hook (SKIP): each one's caller's
    // return address is read where its verdict says, the frame pointer
    // stays. slots[k] is where frame k's return address was read.
    int ns = 0;
    uintptr_t slot = fp + sizeof(uintptr_t);
    if (with_skips) {
        while (ns < MAX_SKIPS && p + 1 < end) {
            uint64_t e = verdict_word(ret, gen);
            if ((e >> (V_IP_BITS + V_GEN_BITS) & 3) != V_SKIP) break;
            int off = skip_words(e), off_fp = -1;
            if (off == SKIPF_MARK && !skipf_get(ret, gen, &off, &off_fp)) break;
            uintptr_t at = slot + sizeof(uintptr_t) * (1 + (uintptr_t)off);
            if (at > top + sizeof(uintptr_t)) break; // past the stack: the walk is not exact, libunwind decides
            slots[ns++] = slot;
            p[FPS_AT] = fp;
            *p++ = ret;
            a = (a ^ ret) * TPPROF_STACK_HASH_KA;
            b = (b + ret) * TPPROF_STACK_HASH_KB;
            slot = at;
            ret = *(const uintptr_t *)at;
            // A SKIPF: the walk goes on from where the caller's frame pointer was saved.
            if (off_fp >= 0) fp = slot - sizeof(uintptr_t) * (uintptr_t)(off - off_fp);
            if (ret < 4096) {
                slots[ns] = slot;
                *nskip = ns;
                acc[0] = a;
                acc[1] = b;
                return (int)(p - ips);
            }
            if (off_fp >= 0) break;
        }
        slots[ns] = slot;
        *nskip = ns;
    }
    // Frame addresses only grow, and nothing past the anchor's frame is
    // used: a walk that starts below it stops there (one bound for both).
    uintptr_t lim = anchor_fp >= fp && anchor_fp < top ? anchor_fp : top;
    for (;;) {
        p[FPS_AT] = fp;
        *p++ = ret;
        a = (a ^ ret) * TPPROF_STACK_HASH_KA;
        b = (b + ret) * TPPROF_STACK_HASH_KB;
        if (p >= end) break;
        uintptr_t next = ((const uintptr_t *)fp)[0];
        if (next <= fp || next > lim) break;
        fp = next;
        ret = ((const uintptr_t *)fp)[1];
        if (ret < 4096) break;
    }
    *anchored = anchor_fp && fp == anchor_fp && ret == anchor_ip;
    acc[0] = a;
    acc[1] = b;
    return (int)(p - ips);
}

__attribute__((noinline)) static int fp_walk2(uintptr_t start, uintptr_t *ips, int max, uintptr_t anchor_fp,
                                              uintptr_t anchor_ip, uint64_t acc[2], bool *anchored) {
    return walk_body(start, ips, max, anchor_fp, anchor_ip, acc, anchored, 0, NULL, NULL, false);
}

__attribute__((noinline)) static int fp_walk2_skips(uintptr_t start, uintptr_t *ips, int max, uintptr_t anchor_fp,
                                                    uintptr_t anchor_ip, uint64_t acc[2], bool *anchored, uint32_t gen,
                                                    uintptr_t *slots, int *nskip) {
    return walk_body(start, ips, max, anchor_fp, anchor_ip, acc, anchored, gen, slots, nskip, true);
}

// The frame-pointer walk as fp_walk2 made it: frames, their frame addresses,
// where the first ones' return addresses were read, and how many of those
// went through SKIPs.
struct walk {
    const uintptr_t *f, *fps, *slots;
    int nf, nskip;
};

// Words above the slot at `slot` up to the one holding want (a SKIP's
// offset), or -1 when it is not within V_OFF_MAX words of it.
static int find_slot(uintptr_t slot, uintptr_t want) {
    uintptr_t top = walk_top(slot);
    for (int j = 0; j <= V_OFF_MAX; j++) {
        uintptr_t at = slot + sizeof(uintptr_t) * (1 + (uintptr_t)j);
        if (at + sizeof(uintptr_t) > top) return -1;
        if (*(const uintptr_t *)at == want) return j;
    }
    return -1;
}

// Words above `slot`, below the return address `off` words up, to the one
// holding the caller's saved frame pointer: the word pointing at a frame
// (above that return address, in the stack) whose return address is
// `next_ret`. -1 if none, or if the stack's bounds are unknown: each word
// tried is read as an address.
static int saved_fp_slot(uintptr_t slot, int off, uintptr_t next_ret) {
    uintptr_t lo, top, ret_at = slot + sizeof(uintptr_t) * (1 + (uintptr_t)off);
    if (!stack_bounds(slot, &lo, &top)) return -1;
    for (int k = 0; k < off; k++) {
        uintptr_t x = *(const uintptr_t *)(slot + sizeof(uintptr_t) * (1 + (uintptr_t)k));
        // (x <= top - 16, not x + 16 <= top: a word near 2^64, which code
        // built without frame pointers leaves there, wrapped round to pass.)
        if (x > ret_at && x <= top - 2 * sizeof(uintptr_t) && (x & 7) == 0 && ((const uintptr_t *)x)[1] == next_ret)
            return k;
    }
    return -1;
}

// w: the frame-pointer walk; l: libunwind's (nl frames).
static void learn(struct uwstate *s, uint32_t gen, const struct walk *w, const uintptr_t *l, int nl, int max) {
    const uintptr_t *f = w->f, *fps = w->fps;
    int nf = w->nf, c = 0;
    while (c < nf && c < nl && f[c] == l[c]) c++;
    for (int i = w->nskip; i + 1 < c; i++) set_verdict(f[i], gen, V_OK); // (SKIPs stay)
    // A frameless function at the end of the hook's chain: the walk lost its
    // caller's return address, which lies a fixed number of words above the
    // slot its own was read from. If the walk went on right there (its next
    // frame is libunwind's one after), the function left the frame-pointer
    // register alone: a SKIP. If it stopped or went astray, the function may
    // have used the register for its own data and saved its caller's value
    // below that return address (a SKIPF); or one of its callers did
    // (operator new, called by a string constructor): a plain SKIP, and that
    // caller is learnt the next time.
    if (c == w->nskip + 1 && c <= MAX_SKIPS && c + 1 < nl) {
        uintptr_t slot = w->slots[c - 1];
        int off = find_slot(slot, l[c]);
        if (off >= 0 && off < SKIPF_MARK) {
            bool went_on = c < nf && f[c] == l[c + 1];
            int k = went_on ? -1 : saved_fp_slot(slot, off, l[c + 1]);
            if (k >= 0) skipf_set(f[c - 1], gen, off, k);
            set_verdict_off(f[c - 1], gen, V_SKIP, k >= 0 ? SKIPF_MARK : off);
            atomic_store(&any_skip, 1);
            return;
        }
    }
    if (c == 0 || (c == nl && nf == nl)) return; // nothing wrong (or nothing comparable)
    if (c == nf && nf == max) return;             // the walk was cut by depth, not wrong
    // The step from f[c-1] went astray (wrong frame, or stopped early, or
    // went on past the end).
    set_verdict(f[c - 1], gen, V_BAD);
    // A bottom anchor: libunwind reached the end, at most 2 frames further
    // (glibc's thread and process start), so the function at f[c-1] is the
    // thread's entry, called once. A longer tail could belong to an outer
    // function that calls this frame's caller from more than one place.
    if (nl < max && nl - c <= ANCHOR_TAIL && c > w->nskip) {
        const struct anchor *a = anchor_add(f[c - 1], gen, &l[c], nl - c);
        if (a) {
            s->anchor = a;
            s->anchor_fp = fps[c - 1];
        }
    }
}

// The depot id of frames a walk found, with a Python program's Python
// frames put in (pyframes.c); with_python: the same for an id, of frames f[0..n).
static inline uint32_t intern_frames(const uintptr_t *f, int n) {
    return TPPROF_UNLIKELY(tpprof_py_on) ? tpprof_py_intern(f, n) : tpprof_stack_intern(f, n);
}
static inline uint32_t with_python(uint32_t id, const uintptr_t *f, int n) {
    return TPPROF_UNLIKELY(tpprof_py_on) ? tpprof_py_merge(id, f, n) : id;
}

static __attribute__((noinline)) uint32_t capture_fp(int max) {
    uintptr_t ips[max];
    return intern_frames(ips, fp_walk(ips, max));
}

// The CFI walk's or else libunwind's (nl frames into a buffer on this
// frame, not the fast path's), teaching the verdicts when the
// frame-pointer walk f/fps (nf frames) is given. (The CFI walk's stacks are
// libunwind's: it gives up wherever it is not sure.)
_Atomic uint64_t tpprof_unwind_slow;

static __attribute__((noinline)) uint32_t capture_unw(struct uwstate *s, uint32_t gen, const struct walk *w,
                                                      int max) {
    uintptr_t l[max];
    int nl = -1;
    if (!tpprof_cfg.unwind_nocfi && TPPROF_LIKELY(stack_room() >= CFI_ROOM_BYTES)) {
        if (!s) gen = atomic_load_explicit(&uw_gen, memory_order_relaxed);
        nl = cfi_walk_here(l, max, gen);
    }
    if (nl <= 0) {
        nl = unw_walk(l, max);
        if (nl < 0) // no room for libunwind: the frame-pointer walk, as it is
            return w ? intern_frames(w->f, w->nf) : capture_fp(max);
        struct tpprof_thread *t = tpprof_self;
        if (t) count(&t->unw_walks);
        else atomic_fetch_add_explicit(&tpprof_unwind_slow, 1, memory_order_relaxed);
    }
    if (s) learn(s, gen, w, l, nl, max);
    return intern_frames(l, nl);
}

static uint32_t capture_verified(int max, uintptr_t start) {
    if (TPPROF_UNLIKELY(!verdicts)) return capture_unw(NULL, 0, NULL, max);
    struct uwstate *s = &uw;
    if (s->slow_run >= SLOW_RUN && ++s->probe % PROBE_EVERY != 0) return capture_unw(NULL, 0, NULL, max);
    uint32_t gen = atomic_load_explicit(&uw_gen, memory_order_relaxed);
    uintptr_t f[FPS_AT + TPPROF_MAX_DEPTH]; // the return addresses (and the anchor's tail), then fps
    const uintptr_t *fps = f + FPS_AT;
    uint64_t acc[2] = {0, 0};
    bool anchored;
    const struct anchor *a = s->anchor;
    bool use_anchor = a && a->gen == gen && s->anchor_fp;
    uintptr_t slots[MAX_SKIPS + 1];
    int nskip = 0, nf;
    if (TPPROF_UNLIKELY(atomic_load_explicit(&any_skip, memory_order_relaxed)))
        nf = fp_walk2_skips(start, f, max, use_anchor ? s->anchor_fp : 0, use_anchor ? a->ip : 0, acc, &anchored, gen,
                            slots, &nskip);
    else
        nf = fp_walk2(start, f, max, use_anchor ? s->anchor_fp : 0, use_anchor ? a->ip : 0, acc, &anchored);
    if (!anchored && nf > 0 && nf < max) {
        // Stopped short: at the bottom of a stack whose anchor the process
        // knows (a new thread's first walks), it is this thread's too.
        const struct anchor *b = anchor_find(f[nf - 1], gen);
        if (b) {
            anchored = true;
            a = s->anchor = b;
            s->anchor_fp = fps[nf - 1];
        }
    }
    int len = -1, fp_len = 0;
    if (anchored) {
        fp_len = nf;
        len = fp_len + a->n < max ? fp_len + a->n : max;
        for (int i = fp_len; i < len; i++) {
            f[i] = a->tail[i - fp_len];
            tpprof_stack_hash_step(acc, f[i]);
        }
    } else if (nf == max) {
        len = fp_len = max;
    }
    if (len > 0) {
        uint64_t h[2];
        tpprof_stack_hash_end(acc, len, h);
        uint32_t id = tpprof_stack_find_fp(h, (uint32_t)fp_len);
        if (id) {
            s->slow_run = 0;
            return with_python(id, f, len);
        }
        bool ok = true;
        for (int k = 0; k + 1 < fp_len && ok; k++) ok = verdict(f[k], gen) == (k < nskip ? V_SKIP : V_OK);
        // (Interned alone, to mark it exact for the walk's next time.)
        if (ok) {
            s->slow_run = 0;
            return with_python(tpprof_stack_intern_h(f, len, h, (uint32_t)fp_len), f, len);
        }
    }
    if (nf > max) nf = max;
    if (s->slow_run < SLOW_RUN) s->slow_run++;
    // Slow path: libunwind decides, and teaches.
    if (!nskip && nf > 0) slots[0] = fps[0] + sizeof(uintptr_t); // where f[0] was read
    const struct walk w = {f, fps, slots, nf, nskip};
    return capture_unw(s, gen, &w, max);
}

uint32_t tpprof_capture_at(int max, uintptr_t start) {
    if (TPPROF_UNLIKELY(stack_room() < FP_ROOM_BYTES)) return 0; // no stack rather than no program
    if (tpprof_cfg.unwind_fp || !unw_bt) return capture_fp(max);
    if (tpprof_cfg.unwind_unw) return capture_unw(NULL, 0, NULL, max);
    return capture_verified(max, start);
}

uint32_t tpprof_capture(int max) { return tpprof_capture_at(max, 0); }

uint32_t tpprof_capture_loader(int max) {
    if (TPPROF_UNLIKELY(stack_room() < FP_ROOM_BYTES)) return 0;
    return capture_fp(max);
}
