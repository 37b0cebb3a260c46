// hooks.c: the interposed allocation functions. THE HOT PATH.
//
// Every hook calls glibc's allocator directly (__libc_malloc & co., which
// also avoids the dlsym-calls-calloc bootstrap problem), then, unless the
// thread is already inside tpprof (initial-exec TLS guard) or recording is
// off, captures the stack, interns it and appends one record to the calling
// thread's own ring. No lock is taken here, no syscall is made, SQLite is
// never touched. The one shared write is the ticket of the address's stripe
// (tpprof_order_tag), which orders events on one address across threads: a
// free takes its ticket BEFORE the block is released and an allocation AFTER
// it is obtained, so an address reused by another thread is always seen
// freed first.
// mmap/munmap/mremap go to the kernel through syscall(2).
#define _GNU_SOURCE
// Both mmap and mmap64 are defined below; with 64-bit off_t the header would
// rename mmap to mmap64.
#undef _FILE_OFFSET_BITS
#include <errno.h>
#include <stdarg.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/base.h"
#include "base/modules.h"
#include "record/format.h"
#include "record/order.h"
#include "record/rings.h"
#include "record/stacks.h"
#include "record/early.h"

// The event order's counters (order.h); the hooks take most tags.
// Written by events: each alone on its lines, so the hooks' reads of
// tpprof_active and tpprof_cfg do not miss each time one moves.
struct tpprof_order_line tpprof_stripes[TPPROF_STRIPES];
struct tpprof_order_line tpprof_epoch;

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);
extern void *__libc_memalign(size_t, size_t);
extern void *__libc_valloc(size_t);
extern void *__libc_pvalloc(size_t);

__thread struct tpprof_recent_allocs tpprof_recent TPPROF_TLS;

static inline bool want(void) {
    return !tpprof_guard && atomic_load_explicit(&tpprof_active, memory_order_relaxed);
}

// Before the recorder started (other libraries' constructors): the block is
// only noted, for the leak scan (early.c).
static inline bool early_now(void) {
    return !tpprof_guard && atomic_load_explicit(&tpprof_early, memory_order_relaxed);
}

// An allocation p of n bytes made by a hook of the heap family: recorded, or
// noted before the start.
// The hook's caller (the address its call returns to).
#define CALLER ((uintptr_t)__builtin_return_address(0))

#define NOTE_ALLOC(p, n, kind)                                                       \
    do {                                                                             \
        if (TPPROF_LIKELY(want())) record_alloc(TPPROF_OP_ALLOC, p, n, kind, CALLER); \
        else if (TPPROF_UNLIKELY(early_now())) tpprof_early_alloc(p, n);             \
        else if (TPPROF_UNLIKELY(in_capture())) record_nested_alloc(p, n, kind);     \
        else missed();                                                               \
    } while (0)

// A heap call made while this thread's hook captures its stack (the guard
// is TPPROF_GUARD_CAPTURE): nothing of the hook's record is in the ring yet,
// so the call is recorded, without a stack (capturing one would re-enter the
// unwinder).
static inline bool in_capture(void) {
    return tpprof_guard == TPPROF_GUARD_CAPTURE && atomic_load_explicit(&tpprof_active, memory_order_relaxed);
}
static void record_nested_alloc(void *p, size_t n, int kind);
static void record_nested_free(void *p);

// A heap call that is not recorded because a signal handler made it while
// its thread was inside a hook (the guard says so): counted. (Not mmap and
// munmap: the unwinder maps its own memory inside the hooks.)
static inline void missed_n(int events) {
    if (TPPROF_UNLIKELY(tpprof_guard == TPPROF_GUARD_HOOK) && atomic_load_explicit(&tpprof_active, memory_order_relaxed))
        atomic_fetch_add_explicit(&tpprof_unrecorded_events, (uint64_t)events, memory_order_relaxed);
}

static inline void missed(void) { missed_n(1); }

// ---------------------------------------------------------------------------
// Recording (called with the guard clear; sets it for its duration).

// Inside record_alloc & co. (noinline, so with a frame of their own): the
// walk starts at their frame, not at its own, so it does not step through
// the walk's and the capture's frames first only to skip them (24
// instructions an allocation of alloc_heavy's 685). Not at the caller's:
// a hook that tail-calls record_realloc has no frame left by then.
#define capture() tpprof_capture_at(tpprof_cfg.depth, (uintptr_t)__builtin_frame_address(0))

// The stack of a hook called from `caller`: the loader's calls are walked
// without libunwind (stacks.h, tpprof_capture_loader).
static inline bool from_loader(uintptr_t caller) {
    return TPPROF_UNLIKELY(caller - tpprof_loader_lo < tpprof_loader_hi - tpprof_loader_lo);
}
#define capture_from(caller) (from_loader(caller) ? tpprof_capture_loader(tpprof_cfg.depth) : capture())

// Appends header+payload, plus the timestamp in full mode.
static inline void emit(struct tpprof_thread *t, uint64_t *w, int n) {
    if (tpprof_cfg.full) w[n++] = tpprof_now_ns();
    tpprof_ring_put(t, w, n);
}

// The calling thread's ring: rings.c's fast path, without the call.
static inline struct tpprof_thread *self(void) {
    struct tpprof_thread *t = tpprof_self;
    return TPPROF_LIKELY(t != NULL) ? t : tpprof_thread_get();
}

// The thread has no ring (rings.c counts the thread): its event is counted.
static void unrecorded(int events) {
    atomic_fetch_add_explicit(&tpprof_unrecorded_events, (uint64_t)events, memory_order_relaxed);
}

// The two hottest records are written straight into the ring (no staging
// copy): a slot for the longest form, the words, then the commit.
__attribute__((noinline)) static void record_alloc(int op, void *p, size_t size, int kind, uintptr_t caller) {
    tpprof_guard = TPPROF_GUARD_HOOK;
    struct tpprof_thread *t = self();
    if (t) {
        tpprof_guard = TPPROF_GUARD_CAPTURE;
        uint32_t sid = capture_from(caller);
        tpprof_guard = TPPROF_GUARD_HOOK;
        uint32_t i = tpprof_recent.next++ & (TPPROF_RECENT - 1);
        tpprof_recent.addr[i] = ~(uint64_t)(uintptr_t)p;
        tpprof_recent.sid[i] = sid;
        if (tpprof_ring_reserve(t, 5)) {
            uint64_t *r = tpprof_ring_slot(t, 5);
            unsigned stripe =
                op == TPPROF_OP_MMAP || op == TPPROF_OP_COMMIT ? 0 : tpprof_stripe_of((uint64_t)(uintptr_t)p);
            // The common case in 3 words (less of the ring to write, and for
            // the writer to read, per allocation).
            bool packed = op == TPPROF_OP_ALLOC && size >> TPPROF_PACKED_SIZE_BITS == 0 && sid >> 24 == 0;
            r[0] = tpprof_hdr(tpprof_order_tag(stripe, (size & ~TPPROF_MMAP_FIXED) >= TPPROF_BIG_BYTES),
                              packed ? TPPROF_OP_ALLOC_PACKED : op,
                              kind);
            r[1] = (uint64_t)(uintptr_t)p;
            int n;
            if (TPPROF_LIKELY(packed)) {
                r[2] = size | (uint64_t)sid << TPPROF_PACKED_SIZE_BITS;
                n = 3;
            } else {
                r[2] = size;
                r[3] = sid;
                n = 4;
            }
            if (tpprof_cfg.full) r[n++] = tpprof_now_ns();
            tpprof_ring_commit(t, (uint64_t)n);
        }
    } else {
        unrecorded(1);
    }
    tpprof_guard = 0;
}

__attribute__((noinline)) static void record_free(int op, void *p, size_t len) {
    tpprof_guard = TPPROF_GUARD_HOOK;
    struct tpprof_thread *t = self();
    if (t && tpprof_ring_reserve(t, 4)) {
        uint64_t *r = tpprof_ring_slot(t, 4);
        bool munmap = op == TPPROF_OP_MUNMAP;
        unsigned stripe = munmap ? 0 : tpprof_stripe_of((uint64_t)(uintptr_t)p);
        bool big = (munmap ? len : tpprof_chunk_bytes(p)) >= TPPROF_BIG_BYTES;
        r[0] = tpprof_hdr(tpprof_order_tag(stripe, big), op, 0);
        r[1] = (uint64_t)(uintptr_t)p;
        int n = 2;
        if (munmap) r[n++] = len;
        if (tpprof_cfg.full) r[n++] = tpprof_now_ns();
        tpprof_ring_commit(t, (uint64_t)n);
    } else if (!t) {
        unrecorded(1);
    }
    tpprof_guard = 0;
}

// The heap calls made inside a capture (in_capture): recorded with stack 0,
// under the hook guard, and the capture's guard given back.
static void record_nested_alloc(void *p, size_t n, int kind) {
    tpprof_guard = TPPROF_GUARD_HOOK;
    struct tpprof_thread *t = self();
    uint64_t w[5];
    if (t && tpprof_ring_reserve(t, 5)) {
        w[0] = tpprof_hdr(tpprof_order_tag(tpprof_stripe_of((uint64_t)(uintptr_t)p), n >= TPPROF_BIG_BYTES),
                          TPPROF_OP_ALLOC, kind);
        w[1] = (uint64_t)(uintptr_t)p;
        w[2] = n;
        w[3] = 0;
        emit(t, w, 4);
    } else if (!t) {
        unrecorded(1);
    }
    tpprof_guard = TPPROF_GUARD_CAPTURE;
}

static void record_nested_free(void *p) {
    record_free(TPPROF_OP_FREE, p, 0);
    tpprof_guard = TPPROF_GUARD_CAPTURE;
}

// realloc: the old block is released inside the call and the new one
// obtained there, so the record pair takes one number before and one after.
__attribute__((noinline)) static void *record_realloc(void *old, size_t n, int kind, uintptr_t caller) {
    tpprof_guard = TPPROF_GUARD_HOOK;
    struct tpprof_thread *t = self();
    void *p;
    uint32_t sid = 0;
    if (t) { // the stack first, before anything of this record is in the ring
        tpprof_guard = TPPROF_GUARD_CAPTURE;
        sid = capture_from(caller);
        tpprof_guard = TPPROF_GUARD_HOOK;
    }
    if (!t || !tpprof_ring_reserve(t, 10)) {
        p = __libc_realloc(old, n);
        if (!t) unrecorded(p ? 2 : 0);
    } else {
        uint64_t s1 = tpprof_order_tag(tpprof_stripe_of((uint64_t)(uintptr_t)old),
                                       tpprof_chunk_bytes(old) >= TPPROF_BIG_BYTES);
        p = __libc_realloc(old, n);
        uint64_t w[6];
        if (!p) {
            w[0] = tpprof_hdr(s1, TPPROF_OP_NOP, 0);
            emit(t, w, 1);
        } else {
            uint64_t s2 = tpprof_order_tag(tpprof_stripe_of((uint64_t)(uintptr_t)p), n >= TPPROF_BIG_BYTES);
            w[0] = tpprof_hdr(s1, TPPROF_OP_REALLOC_FREE, 0);
            w[1] = (uint64_t)(uintptr_t)old;
            emit(t, w, 2);
            w[0] = tpprof_hdr(s2, TPPROF_OP_REALLOC, kind);
            w[1] = (uint64_t)(uintptr_t)p;
            w[2] = n;
            w[3] = sid;
            w[4] = (uint64_t)(uintptr_t)old;
            emit(t, w, 5);
        }
    }
    tpprof_guard = 0;
    return p;
}

__attribute__((noinline)) static void record_mremap(void *p, size_t len, void *old, size_t old_len) {
    tpprof_guard = TPPROF_GUARD_HOOK;
    struct tpprof_thread *t = self();
    if (t) {
        uint32_t sid = capture();
        if (tpprof_ring_reserve(t, 8)) {
            bool big = len >= TPPROF_BIG_BYTES || old_len >= TPPROF_BIG_BYTES;
            uint64_t w[8] = {tpprof_hdr(tpprof_order_tag(0, big), TPPROF_OP_MREMAP, 0), (uint64_t)(uintptr_t)p, len,
                             sid, (uint64_t)(uintptr_t)old, old_len};
            emit(t, w, 6);
        }
    } else {
        unrecorded(1);
    }
    tpprof_guard = 0;
}

// ---------------------------------------------------------------------------
// The heap family.

TPPROF_EXPORT void *malloc(size_t n) {
    void *p = __libc_malloc(n);
    if (TPPROF_LIKELY(p != NULL)) NOTE_ALLOC(p, n, TPPROF_KIND_MALLOC);
    return p;
}

TPPROF_EXPORT void free(void *p) {
    if (p) {
        if (TPPROF_LIKELY(want())) record_free(TPPROF_OP_FREE, p, 0);
        else if (TPPROF_UNLIKELY(early_now())) tpprof_early_free(p);
        else if (TPPROF_UNLIKELY(in_capture())) record_nested_free(p);
        else missed();
    }
    __libc_free(p);
}

TPPROF_EXPORT void *calloc(size_t k, size_t n) {
    void *p = __libc_calloc(k, n);
    if (p) NOTE_ALLOC(p, k * n, TPPROF_KIND_CALLOC);
    return p;
}

static void *realloc_kind(void *old, size_t n, int kind, uintptr_t caller) {
    if (!want()) {
        void *p = __libc_realloc(old, n);
        if (TPPROF_UNLIKELY(early_now()) && (p || n == 0)) { // moved, resized or freed
            if (old) tpprof_early_free(old);
            if (p) tpprof_early_alloc(p, n);
        } else if (p || n == 0) { // a free and an allocation, or one of them
            missed_n((old != NULL) + (p != NULL));
        }
        return p;
    }
    if (!old) {
        void *p = __libc_realloc(NULL, n);
        if (p) record_alloc(TPPROF_OP_ALLOC, p, n, kind, caller);
        return p;
    }
    if (n == 0) { // glibc frees and returns NULL
        record_free(TPPROF_OP_FREE, old, 0);
        return __libc_realloc(old, 0);
    }
    return record_realloc(old, n, kind, caller);
}

TPPROF_EXPORT void *realloc(void *old, size_t n) { return realloc_kind(old, n, TPPROF_KIND_REALLOC, CALLER); }

TPPROF_EXPORT void *reallocarray(void *old, size_t k, size_t n) {
    size_t bytes;
    if (__builtin_mul_overflow(k, n, &bytes)) {
        errno = ENOMEM;
        return NULL;
    }
    return realloc_kind(old, bytes, TPPROF_KIND_REALLOCARRAY, CALLER);
}

TPPROF_EXPORT int posix_memalign(void **out, size_t align, size_t n) {
    if (align < sizeof(void *) || (align & (align - 1)) != 0) return EINVAL;
    int saved = errno;
    void *p = __libc_memalign(align, n);
    if (!p) return ENOMEM;
    errno = saved;
    *out = p;
    NOTE_ALLOC(p, n, TPPROF_KIND_POSIX_MEMALIGN);
    return 0;
}

TPPROF_EXPORT void *aligned_alloc(size_t align, size_t n) {
    void *p = __libc_memalign(align, n);
    if (p) NOTE_ALLOC(p, n, TPPROF_KIND_ALIGNED_ALLOC);
    return p;
}

TPPROF_EXPORT void *memalign(size_t align, size_t n) {
    void *p = __libc_memalign(align, n);
    if (p) NOTE_ALLOC(p, n, TPPROF_KIND_MEMALIGN);
    return p;
}

TPPROF_EXPORT void *valloc(size_t n) {
    void *p = __libc_valloc(n);
    if (p) NOTE_ALLOC(p, n, TPPROF_KIND_VALLOC);
    return p;
}

TPPROF_EXPORT void *pvalloc(size_t n) {
    void *p = __libc_pvalloc(n);
    if (p) NOTE_ALLOC(p, n, TPPROF_KIND_PVALLOC);
    return p;
}

// ---------------------------------------------------------------------------
// Mappings.

// An anonymous mapping made PROT_NONE is a reservation of address space
// (a JVM's heap, V8's and Go's arenas, the CUDA runtime's unified address
// range: gigabytes that are no memory): kind mmap_reserved, which no total,
// peak or leak counts. The program commits parts of it by mapping over them
// (MAP_FIXED: an mmap like any other, which replaces those parts) or by
// mprotect (interposed below: TPPROF_OP_COMMIT turns the reserved parts of
// the range into mmap, with mprotect's stack).
// Set once a reservation is recorded: until then an mprotect has nothing to
// commit, and costs no stack (a JIT flipping its code's protection).
static _Atomic int reserved_seen;

static void *map_hook(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
    void *p = (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
    if (p == MAP_FAILED) return p;
    if (want()) {
        int kind = !(flags & MAP_ANONYMOUS) ? TPPROF_KIND_MMAP_FILE
                   : prot == PROT_NONE      ? TPPROF_KIND_MMAP_RESERVED
                                            : TPPROF_KIND_MMAP;
        if (kind == TPPROF_KIND_MMAP_RESERVED && !atomic_load_explicit(&reserved_seen, memory_order_relaxed))
            atomic_store_explicit(&reserved_seen, 1, memory_order_relaxed);
        record_alloc(TPPROF_OP_MMAP, p, (len & ~TPPROF_MMAP_FIXED) | (flags & MAP_FIXED ? TPPROF_MMAP_FIXED : 0), kind,
                     CALLER);
    } else if (TPPROF_UNLIKELY(early_now()) && (flags & MAP_ANONYMOUS) && (prot & PROT_WRITE))
        tpprof_early_map(p, len); // a pool a constructor maps: scanned, not recorded
    return p;
}

TPPROF_EXPORT void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
    return map_hook(addr, len, prot, flags, fd, off);
}

TPPROF_EXPORT void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
    return map_hook(addr, len, prot, flags, fd, off);
}

TPPROF_EXPORT int mprotect(void *addr, size_t len, int prot) {
    int r = (int)syscall(SYS_mprotect, addr, len, prot);
    if (r == 0 && prot != PROT_NONE && atomic_load_explicit(&reserved_seen, memory_order_relaxed) && want())
        record_alloc(TPPROF_OP_COMMIT, addr, len, TPPROF_KIND_MMAP, CALLER);
    return r;
}

TPPROF_EXPORT int munmap(void *addr, size_t len) {
    if (want()) record_free(TPPROF_OP_MUNMAP, addr, len);
    else if (TPPROF_UNLIKELY(early_now())) tpprof_early_unmap(addr, len);
    return (int)syscall(SYS_munmap, addr, len);
}

TPPROF_EXPORT void *mremap(void *old, size_t old_len, size_t new_len, int flags, ...) {
    void *new_addr = NULL;
    if (flags & MREMAP_FIXED) {
        va_list ap;
        va_start(ap, flags);
        new_addr = va_arg(ap, void *);
        va_end(ap);
    }
    void *p = (void *)syscall(SYS_mremap, old, old_len, new_len, flags, new_addr);
    // MREMAP_DONTUNMAP (Linux 5.7) leaves the old range mapped: nothing freed.
    if (p != MAP_FAILED && want()) record_mremap(p, new_len, old, (flags & 4) ? 0 : old_len);
    return p;
}
