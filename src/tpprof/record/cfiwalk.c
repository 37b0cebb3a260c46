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
// A walk that meets a frame of the thread's previous walk (the same return
// address, stack pointer and, where the rest of the walk reads it, rbp)
// takes that walk's outer frames instead of stepping through them, once the
// stack words it read there (each return-address slot, each saved rbp that
// a later step reads) are checked to hold what they held: the walk is a
// function of those registers and words alone (and of the rules, the same
// for one generation), so the frames are the ones a full walk would find.
// Where the checks fail, the walk steps on and may meet it again further
// out. The checks are independent
// loads, where the walk is a chain of them, a rule lookup each: alloc_heavy
// built with clang without frame pointers (46,000 stacks of 12-20 frames,
// most allocations 1-2 frames off the last one) spent 12% of its samples in
// the walk; with this, 27% fewer instructions there and 6% less CPU in all
// (docs/recorder.md, "The CFI walk").
// Runs inside malloc hooks: no locks, no malloc. Its state is the
// thread's, 50 KiB mapped on the thread's first walk (the rule cache and
// two walks' frames, touched as used; not static TLS, which
// glibc carves out of each thread's stack: a thread made with a 16 KiB
// stack would lose most of it).
#include "record/cfi.h"

#include <stdbool.h>
#include <string.h>

#include "base/base.h"
#include "base/mem.h"

// ---------------------------------------------------------------------------
// The rule cache: 2,048 rules of 16 bytes (32 KiB a thread, touched as
// used), 4-way set associative: a set is one cache line. Misses (each a
// lookup and parse in cfi.c, about a microsecond) on the PyTorch loop's
// 1.12 M walks, direct-mapped: 512 rules 456 k, 1,024 207 k, 2,048 192 k,
// 4,096 135 k, 8,192 124 k; in perf (2 kHz, the program thread) the walk
// and the lookups took 450-650 samples at 512 rules, 350 at 2,048 and
// 360-380 at 8,192 (more of the table out of the CPU's caches).
// Direct-mapped, a program's few hundred hot return addresses nearly always
// had two in one slot (where depends on the modules' load addresses): two
// taken in turn by every walk missed each time. alloc_heavy built with clang
// without frame pointers (about 200 return addresses) missed 43 times in
// four runs of six, and 120 k and 680 k times in the other two (4.3 M
// walks: up to 0.7 s of CPU more).

#define CACHE_BITS 11
#define CACHE_WAYS 4

struct rule_slot {
    uintptr_t ip; // the return address; 0: empty
    struct tpprof_cfi_rule r;
};

unsigned tpprof_cfi_cache_set(uintptr_t ip) {
    return (unsigned)((ip * 0x9E3779B97F4A7C15ULL) >> (64 - CACHE_BITS + 2));
}

static inline struct rule_slot *set_of(struct rule_slot *cache, uintptr_t ip) {
    return &cache[tpprof_cfi_cache_set(ip) * CACHE_WAYS];
}

// A miss: the rule goes first in its set, the set's oldest out.
static __attribute__((noinline)) struct tpprof_cfi_rule rule_miss(uint64_t *misses, struct rule_slot *set,
                                                                  uintptr_t ip) {
    ++*misses;
    memmove(&set[1], &set[0], (CACHE_WAYS - 1) * sizeof *set);
    set[0].ip = ip;
    tpprof_cfi_rule_at(ip - 1, &set[0].r); // (TPPROF_CFI_NONE kept too: the next walk through it gives up at once)
    return set[0].r;
}

// A thread's last walk, by frame (innermost first, at [base, base + n) of
// arrays with room below for a walk that takes its outer frames to put its
// own in front of them): each frame's registers, and what the step from it
// read besides the next frame's return address (at the next frame's sp - 8).
#define RULE_CFA_RBP 1u   // the step's CFA is rbp-based
#define RULE_RBP_SAVED 2u // it read the caller's rbp at rbp_at
#define ROOM (2 * TPPROF_MAX_DEPTH)

struct frames {
    uintptr_t ip[ROOM], sp[ROOM], bp[ROOM];
    uintptr_t rbp_at[ROOM]; // 0: the step did not read rbp
    uint8_t rule[ROOM];     // 0: no step taken from it
    uint8_t needs_bp[ROOM]; // the walk from it on reads bp (its CFA is rbp-based before a saved rbp is read)
};

struct tpprof_cfi_state {
    uint32_t gen;
    uint64_t misses;  // rule lookups that missed the cache (tests)
    uint64_t steps;   // rule lookups (tests)
    int base, n;      // the last walk (n 0: none)
    bool complete;    // it ended at the outermost frame, not at a cap
    uintptr_t end_at; // where its last step read a return address of 0 (0: it ended by a rule)
    uintptr_t hi;     // the end of the stack it was walked on
    struct frames last;
    struct frames fresh; // the walk's own frames, from 0, as it goes
    _Alignas(64) struct rule_slot cache[1u << CACHE_BITS]; // (a set to a cache line)
};

static inline struct tpprof_cfi_rule rule_of(struct tpprof_cfi_state *st, uintptr_t ip) {
    st->steps++;
    struct rule_slot *set = set_of(st->cache, ip);
    for (int i = 0; i < CACHE_WAYS; i++)
        if (TPPROF_LIKELY(set[i].ip == ip)) return set[i].r;
    return rule_miss(&st->misses, set, ip);
}

uint64_t tpprof_cfi_state_misses(const struct tpprof_cfi_state *st) { return st->misses; }
uint64_t tpprof_cfi_state_steps(const struct tpprof_cfi_state *st) { return st->steps; }

struct tpprof_cfi_state *tpprof_cfi_state_new(void) { return tpprof_mem_map(sizeof(struct tpprof_cfi_state)); }

void tpprof_cfi_state_free(struct tpprof_cfi_state *st) {
    if (st) tpprof_mem_unmap(st, sizeof *st);
}

// ---------------------------------------------------------------------------
// The walk.

// The walk's own m frames (st->fresh) put in at `at` of the last walk's
// arrays; `needs`: whether the walk from the frame above them reads bp.
static void put_fresh(struct tpprof_cfi_state *st, int at, int m, bool needs) {
    // (A loop, not six calls of memcpy: m is a frame or two when the walk
    // took the last one's rest.)
    const struct frames *f = &st->fresh;
    struct frames *l = &st->last;
    for (int k = m - 1; k >= 0; k--) {
        needs = (f->rule[k] & RULE_CFA_RBP) || (!(f->rule[k] & RULE_RBP_SAVED) && needs);
        l->ip[at + k] = f->ip[k];
        l->sp[at + k] = f->sp[k];
        l->bp[at + k] = f->bp[k];
        l->rbp_at[at + k] = f->rbp_at[k];
        l->rule[at + k] = f->rule[k];
        l->needs_bp[at + k] = needs;
    }
}

// The rest of a walk that has m frames of its own (st->fresh) and whose
// next frame has the registers of the last walk's frame at q: the last
// walk's frames from q outwards (up to max in all into ips, up to keep in
// all kept as the new last walk), if the stack words its steps read from
// there on still hold what they held; -1 if not, or if that walk stopped at
// its cap short of what this one needs. The thread's last walk becomes this
// one. A saved rbp is checked only where the walk from there on reads rbp
// (needs_bp): elsewhere its value does not change the frames (a frame's
// rbp saved by a function built without frame pointers, which holds the
// caller's data: 102 k of the PyTorch loop's 1.12 M walks failed on one,
// none of them where the walk read it). The frames taken keep the rbp they
// had where it is not needed: only compared where it is.
static int take_rest(struct tpprof_cfi_state *st, int q, int m, int max, int keep, uintptr_t *ips) {
    struct frames *l = &st->last;
    int len = st->base + st->n - q;
    bool whole = true;
    if (m + len > keep) {
        len = keep - m;
        whole = false;
    } else if (!st->complete && m + len < max) {
        return -1;
    }
    int end = q + len - 1; // the outermost frame taken
    // Only the frames returned are checked now: those kept past them are
    // checked by the walk that returns them (each walk checks every frame
    // it takes, against the words read when the frame was walked).
    int give = m < max ? (len < max - m ? len : max - m) : 0;
    for (int i = q; i < q + give - 1; i++) {
        if (*(const uintptr_t *)(l->sp[i + 1] - sizeof(uintptr_t)) != l->ip[i + 1]) return -1;
        if (l->rbp_at[i] && l->needs_bp[i + 1] && *(const uintptr_t *)l->rbp_at[i] != l->bp[i + 1]) return -1;
    }
    if (whole && give == len && st->end_at && *(const uintptr_t *)st->end_at != 0) return -1;
    if (give > 0) memcpy(&ips[m], &l->ip[q], (size_t)give * sizeof ips[0]);
    // The new last walk: this walk's frames in front of those taken.
    if (q < m) { // no room in front: the frames taken go to the arrays' end
        int to = ROOM - len;
        size_t w = (size_t)len * sizeof(uintptr_t);
        memmove(&l->ip[to], &l->ip[q], w);
        memmove(&l->sp[to], &l->sp[q], w);
        memmove(&l->bp[to], &l->bp[q], w);
        memmove(&l->rbp_at[to], &l->rbp_at[q], w);
        memmove(&l->rule[to], &l->rule[q], (size_t)len);
        memmove(&l->needs_bp[to], &l->needs_bp[q], (size_t)len);
        end += to - q;
        q = to;
    }
    if (!whole) { // the outermost frame kept takes no step now
        l->rule[end] = 0;
        l->rbp_at[end] = 0;
        l->needs_bp[end] = 0;
        st->complete = false;
        st->end_at = 0;
    }
    put_fresh(st, q - m, m, l->needs_bp[q]);
    st->base = q - m;
    st->n = m + len;
    return m + len < max ? m + len : max;
}

// Frames a walk keeps past its cap (max) for the next walks: a capped walk
// (the PyTorch loop's stacks are deeper than TPPROF_DEPTH's 32) could give
// its frames to a walk that met it only if that walk had as many frames of
// its own before the meeting frame, so one that allocated a frame or two
// nearer the stack's end than the last walk walked all its frames again
// (329 k of the loop's 1.12 M walks).
#define KEEP_EXTRA 16
#define MEET_TRIES 4

int tpprof_cfi_walk(struct tpprof_cfi_state *st, const struct tpprof_cfi_regs *r, uintptr_t lo, uintptr_t hi,
                    uint32_t gen, uintptr_t *ips, int max) {
    if (TPPROF_UNLIKELY(st->gen != gen)) {
        memset(st->cache, 0, sizeof st->cache);
        st->gen = gen;
        st->n = 0;
    }
    uintptr_t ip = r->ip, sp = r->sp, bp = r->bp;
    if (sp < lo || sp >= hi || max <= 0) return -1;
    if (max > TPPROF_MAX_DEPTH) max = TPPROF_MAX_DEPTH;
    int keep = max + KEEP_EXTRA < TPPROF_MAX_DEPTH ? max + KEEP_EXTRA : TPPROF_MAX_DEPTH;
    // The last walk's frames from q outwards lie at or above this walk's sp
    // (frames' sps only grow); none if it was on another stack.
    const struct frames *l = &st->last;
    int q = st->base, qend = st->hi == hi ? st->base + st->n : q, n = 0;
    struct frames *f = &st->fresh;
    bool complete = false;
    uintptr_t end_at = 0;
    int tries = 0;
    for (;;) {
        while (q < qend && l->sp[q] < sp) q++;
        if (q < qend && l->sp[q] == sp && l->ip[q] == ip && (!l->needs_bp[q] || l->bp[q] == bp)) {
            int got = take_rest(st, q, n, max, keep, ips);
            if (got > 0) return got;
            // The stack changed above q: nearly always at q's own caller
            // (one function called from another call site in the same
            // caller's frame: libtorch's static constructors, one call site
            // a registration), so the walk steps on and may meet the last
            // walk again from there. Giving up at the first failure walked
            // the PyTorch loop's 289 k such stacks to their ends, about 45
            // frames each. (A few tries at most: each costs a check.)
            if (++tries < MEET_TRIES) q++;
            else qend = q;
        }
        f->ip[n] = ip;
        f->sp[n] = sp;
        f->bp[n] = bp;
        f->rbp_at[n] = 0;
        f->rule[n] = 0;
        if (n < max) ips[n] = ip;
        if (++n >= keep) break;
        // Past the cap a step that cannot be taken ends what is kept (the
        // frames asked for are walked).
        struct tpprof_cfi_rule u = rule_of(st, ip);
        if (u.kind == TPPROF_CFI_END) {
            complete = true;
            break;
        }
        if (u.kind != TPPROF_CFI_STEP) goto cannot;
        uintptr_t cfa = (u.cfa_rbp ? bp : sp) + (uintptr_t)(intptr_t)u.cfa_off;
        // The CFA grows (so its return address, at CFA-8, is at or above sp)
        // and stays on the stack.
        if (cfa <= sp || cfa > hi || (cfa & 7) != 0) goto cannot;
        uintptr_t at = 0;
        if (u.rbp_off) {
            at = cfa + (uintptr_t)(intptr_t)u.rbp_off;
            if (at < sp) goto cannot;
            bp = *(const uintptr_t *)at;
        }
        ip = *(const uintptr_t *)(cfa - sizeof(uintptr_t));
        // A return address is a user-space one, below 2^47: not such a word
        // (pyenv's 3.13 ctypes: 0xffffffff80000002, a sign-extended int,
        // where libffi's frame has its return address) says the rules do not
        // describe this stack; libunwind ends the walk there (unwind.c).
        if (ip >= TPPROF_USER_END) goto cannot;
        f->rule[n - 1] = (uint8_t)((u.cfa_rbp ? RULE_CFA_RBP : 0) | (u.rbp_off ? RULE_RBP_SAVED : 0));
        f->rbp_at[n - 1] = at;
        sp = cfa;
        if (ip == 0) { // no caller
            complete = true;
            end_at = cfa - sizeof(uintptr_t);
            break;
        }
        continue;
    cannot:
        if (n < max) return -1;
        break; // (the frame stays, its rule 0: no step taken from it)
    }
    // Walked to its end: the thread's last walk, at the arrays' end.
    put_fresh(st, ROOM - n, n, false);
    st->base = ROOM - n;
    st->n = n;
    st->complete = complete;
    st->end_at = end_at;
    st->hi = hi;
    return n < max ? n : max;
}
