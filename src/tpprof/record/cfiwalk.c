// cfiwalk.c: the stack walk by DWARF CFI rules (cfi.h), inside the hooks.
//
// Where the verified frame-pointer walk (unwind.c) cannot stand (code built
// without frame pointers: libpython, libtorch, Debian's cc1), this walk
// takes the stack instead of libunwind: each frame's rule (CFA = rsp or rbp
// + offset, the return address at CFA-8, rbp saved at CFA+k or left alone)
// comes from the thread's cache, keyed by return address, filled on a miss
// by cfi.c. libunwind's unw_backtrace does the same reduction (its fast
// trace), but under a cache that takes a signal mask (two sigprocmask
// system calls a walk on a miss) and through a general cursor; this walk
// is a few loads a frame. Anything the rule cannot say (a PLT entry, a
// signal frame, a frame outside the stack's bounds) gives up the whole walk:
// libunwind walks it, so the stacks are libunwind's either way.
// (Reusing the thread's previous walk where a walk meets a frame it passed
// through, its stack words unchanged, was tried: exact, but the PyTorch
// loop and py_alloc.py took the same CPU with and without it, 3 interleaved
// rounds, so it is not here.)
// Runs inside malloc hooks: no locks, no malloc. Its state is the
// thread's, 32 KiB mapped on the thread's first walk (not static TLS, which
// glibc carves out of each thread's stack: a thread made with a 16 KiB
// stack would lose most of it).
#include "record/cfi.h"

#include <stdbool.h>
#include <string.h>

#include "base/base.h"
#include "base/mem.h"

// ---------------------------------------------------------------------------
// The rule cache: direct-mapped, 2,048 rules of 16 bytes (32 KiB a thread,
// touched as used). Misses (each a lookup and parse in cfi.c) on the PyTorch
// loop's 1.12 M walks: 512 rules 456 k, 1,024 207 k, 2,048 192 k, 4,096
// 135 k, 8,192 124 k; in perf (2 kHz, the program thread) the walk and the
// lookups took 450-650 samples at 512 rules, 350 at 2,048 and 360-380 at
// 8,192 (more of the table out of the CPU's caches).

#define CACHE_BITS 11

struct rule_slot {
    uintptr_t ip; // the return address; 0: empty
    struct tpprof_cfi_rule r;
};

static inline struct rule_slot *slot_of(struct rule_slot *cache, uintptr_t ip) {
    return &cache[(ip * 0x9E3779B97F4A7C15ULL) >> (64 - CACHE_BITS)];
}

static __attribute__((noinline)) struct tpprof_cfi_rule rule_miss(struct rule_slot *s, uintptr_t ip) {
    s->ip = ip;
    tpprof_cfi_rule_at(ip - 1, &s->r); // (TPPROF_CFI_NONE kept too: the next walk through it gives up at once)
    return s->r;
}

static inline struct tpprof_cfi_rule rule_of(struct rule_slot *cache, uintptr_t ip) {
    struct rule_slot *s = slot_of(cache, ip);
    if (TPPROF_LIKELY(s->ip == ip)) return s->r;
    return rule_miss(s, ip);
}

struct tpprof_cfi_state {
    uint32_t gen;
    struct rule_slot cache[1u << CACHE_BITS];
};

struct tpprof_cfi_state *tpprof_cfi_state_new(void) { return tpprof_mem_map(sizeof(struct tpprof_cfi_state)); }

void tpprof_cfi_state_free(struct tpprof_cfi_state *st) {
    if (st) tpprof_mem_unmap(st, sizeof *st);
}

// ---------------------------------------------------------------------------
// The walk.

int tpprof_cfi_walk(struct tpprof_cfi_state *st, const struct tpprof_cfi_regs *r, uintptr_t lo, uintptr_t hi,
                    uint32_t gen, uintptr_t *ips, int max) {
    if (TPPROF_UNLIKELY(st->gen != gen)) {
        memset(st->cache, 0, sizeof st->cache);
        st->gen = gen;
    }
    uintptr_t ip = r->ip, sp = r->sp, bp = r->bp;
    if (sp < lo || sp >= hi || max <= 0) return -1;
    int n = 0;
    for (;;) {
        ips[n++] = ip;
        if (n >= max) break;
        struct tpprof_cfi_rule u = rule_of(st->cache, ip);
        if (u.kind == TPPROF_CFI_END) break;
        if (u.kind != TPPROF_CFI_STEP) return -1;
        uintptr_t cfa = (u.cfa_rbp ? bp : sp) + (uintptr_t)(intptr_t)u.cfa_off;
        // The CFA grows (so its return address, at CFA-8, is at or above sp)
        // and stays on the stack.
        if (cfa <= sp || cfa > hi || (cfa & 7) != 0) return -1;
        ip = *(const uintptr_t *)(cfa - sizeof(uintptr_t));
        if (u.rbp_off) {
            uintptr_t at = cfa + (uintptr_t)(intptr_t)u.rbp_off;
            if (at < sp) return -1;
            bp = *(const uintptr_t *)at;
        }
        sp = cfa;
        if (ip == 0) break; // no caller
    }
    return n;
}
