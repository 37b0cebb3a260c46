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
// The thread's previous walk is kept: once a walk reaches a frame that one
// passed through (the same return address at the same CFA, and rbp the same
// where the rest of the walk reads it), the rest is that walk's if the
// stack words it read (return addresses, saved rbps) still hold what they
// held. The walk is a function of its registers and the words it reads, so
// that is exact; it turns a chain of dependent loads per frame into
// independent compares (a PyTorch or Python stack's outer frames are the
// same from one allocation to the next).
// Runs inside malloc hooks: no locks, no malloc. Its state is the
// thread's, 42 KiB mapped on the thread's first walk (not static TLS, which
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

// ---------------------------------------------------------------------------
// The thread's previous walk.

#define PREV_MAX TPPROF_MAX_DEPTH

struct walk {
    int n;      // frames; 0: none kept
    bool ended; // the walk reached the stack's end by its rules (not cut by its max)
    uintptr_t ip[PREV_MAX], sp[PREV_MAX], bp[PREV_MAX];
    // Where frame k's rbp was read from (0: inherited, or not used later).
    uintptr_t bp_at[PREV_MAX];
    // Whether frame k's rbp is read by the rest of the walk (the CFA of
    // some frame above is rbp-based before rbp is restored again); the
    // step from frame k: its CFA rbp-based, rbp restored.
    uint8_t bp_live[PREV_MAX], cfa_rbp[PREV_MAX], bp_set[PREV_MAX];
};

// The walks are written into the state, not onto the program's stack
// (the hook may have 4 KiB left): the previous one, and the one under way.
struct tpprof_cfi_state {
    uint32_t gen;
    int prev; // which of walks[] is the previous walk
    struct rule_slot cache[1u << CACHE_BITS];
    struct walk walks[2];
};

struct tpprof_cfi_state *tpprof_cfi_state_new(void) { return tpprof_mem_map(sizeof(struct tpprof_cfi_state)); }

void tpprof_cfi_state_free(struct tpprof_cfi_state *st) {
    if (st) tpprof_mem_unmap(st, sizeof *st);
}

// Whether frames j+1.. of the previous walk are still the stack above
// frame j (whose registers match): each return address and each saved rbp
// the walk read (and used) still holds what it read.
static bool prev_holds(const struct walk *prev, int j) {
    for (int k = j + 1; k < prev->n; k++) {
        if (*(const uintptr_t *)(prev->sp[k] - sizeof(uintptr_t)) != prev->ip[k]) return false;
        if (prev->bp_at[k] && *(const uintptr_t *)prev->bp_at[k] != prev->bp[k]) return false;
    }
    return true;
}

// ---------------------------------------------------------------------------
// The walk.

int tpprof_cfi_walk(struct tpprof_cfi_state *st, const struct tpprof_cfi_regs *r, uintptr_t lo, uintptr_t hi,
                    uint32_t gen, uintptr_t *ips, int max) {
    if (TPPROF_UNLIKELY(st->gen != gen)) {
        memset(st->cache, 0, sizeof st->cache);
        st->gen = gen;
        st->walks[0].n = st->walks[1].n = 0;
    }
    const struct walk *prev = &st->walks[st->prev];
    struct walk *w = &st->walks[st->prev ^ 1];
    if (max > PREV_MAX) max = PREV_MAX;
    uintptr_t ip = r->ip, sp = r->sp, bp = r->bp;
    if (sp < lo || sp >= hi || max <= 0) return -1;
    int n = 0, j = 0; // j: the previous walk's first frame not below sp
    bool ended = false, reuse = prev->n > 0 && prev->sp[prev->n - 1] < hi;
    uintptr_t at = 0;
    for (;;) {
        ips[n] = w->ip[n] = ip;
        w->sp[n] = sp;
        w->bp[n] = bp;
        w->bp_at[n] = at;
        n++;
        // A frame the previous walk passed through, the stack above it as it was.
        if (reuse) {
            while (j < prev->n && prev->sp[j] < sp) j++;
            if (j < prev->n && prev->sp[j] == sp && prev->ip[j] == ip && (!prev->bp_live[j] || prev->bp[j] == bp) &&
                (prev->ended || n + prev->n - j - 1 >= max) && prev_holds(prev, j)) {
                for (int k = j + 1; k < prev->n && n < max; k++) ips[n++] = prev->ip[k];
                // (The previous walk stays as it is: it still describes this stack.)
                return n;
            }
        }
        if (n >= max) break;
        struct tpprof_cfi_rule u = rule_of(st->cache, ip);
        if (u.kind == TPPROF_CFI_END) {
            ended = true;
            break;
        }
        if (u.kind != TPPROF_CFI_STEP) return -1;
        uintptr_t cfa = (u.cfa_rbp ? bp : sp) + (uintptr_t)(intptr_t)u.cfa_off;
        // The CFA grows (so its return address, at CFA-8, is at or above sp)
        // and stays on the stack.
        if (cfa <= sp || cfa > hi || (cfa & 7) != 0) return -1;
        w->cfa_rbp[n - 1] = u.cfa_rbp;
        w->bp_set[n - 1] = u.rbp_off != 0;
        ip = *(const uintptr_t *)(cfa - sizeof(uintptr_t));
        at = 0;
        if (u.rbp_off) {
            at = cfa + (uintptr_t)(intptr_t)u.rbp_off;
            if (at < sp) return -1;
            bp = *(const uintptr_t *)at;
        }
        sp = cfa;
        if (ip == 0) break; // no caller (not kept as an end: that 0 is a read not checked again)
    }
    // Kept for the next walk. Frame k's rbp is live if the step from it
    // uses rbp for the CFA, or leaves rbp alone and frame k+1's is live;
    // the last frame's is not (no step is taken from it that a later walk
    // reuses: an end is its rule's, a function of its return address).
    w->n = n;
    w->ended = ended;
    bool live = false;
    for (int k = n - 1; k >= 0; k--) {
        live = k < n - 1 && (w->cfa_rbp[k] || (!w->bp_set[k] && live));
        w->bp_live[k] = live;
        if (!live) w->bp_at[k] = 0;
    }
    st->prev ^= 1;
    return n;
}
