// cfi.h: a code address's unwind rule, read from its module's DWARF call
// frame information (.eh_frame, found through .eh_frame_hdr), reduced to
// the one shape a fast stack walk can apply (x86-64):
//
//     struct tpprof_cfi_rule r;
//     if (tpprof_cfi_rule_at(ret - 1, &r) == TPPROF_CFI_STEP) {
//         uintptr_t cfa = (r.cfa_rbp ? rbp : rsp) + r.cfa_off;
//         uintptr_t caller_ret = *(uintptr_t *)(cfa - 8);
//         if (r.rbp_off) rbp = *(uintptr_t *)(cfa + r.rbp_off);
//         rsp = cfa;
//     }
//
// Anything else (a CFA computed by an expression, as in PLT entries and
// frames that realign the stack; a signal frame; a return address kept
// anywhere but CFA-8; no unwind information) is TPPROF_CFI_NONE: the caller
// asks libunwind instead. Runs inside malloc hooks: no locks, no malloc,
// nothing but reads of loaded modules' unwind tables (and _dl_find_object,
// glibc 2.35+, lock-free).
#ifndef TPPROF_RECORD_CFI_H
#define TPPROF_RECORD_CFI_H

#include <stdint.h>

enum {
    TPPROF_CFI_NONE = 0, // not a simple rule, or no unwind information: libunwind decides
    TPPROF_CFI_STEP = 1, // the rule below steps to the caller
    TPPROF_CFI_END = 2,  // the return address is undefined here: the outermost frame (_start, clone)
};

struct tpprof_cfi_rule {
    int32_t cfa_off; // CFA = (cfa_rbp ? rbp : rsp) + cfa_off; the return address is at CFA-8
    int16_t rbp_off; // the caller's rbp is saved at CFA+rbp_off (< 0); 0: rbp unchanged
    uint8_t cfa_rbp;
    uint8_t kind; // TPPROF_CFI_*
};

// The rule at pc (for a return address: the address one before it, inside
// the call), from the module that holds pc. Returns r->kind.
int tpprof_cfi_rule_at(uintptr_t pc, struct tpprof_cfi_rule *r);

// The same from a given .eh_frame_hdr (the PT_GNU_EH_FRAME segment as
// loaded), for tests and for a caller that found the module itself.
int tpprof_cfi_rule_in(const uint8_t *eh_frame_hdr, uintptr_t pc, struct tpprof_cfi_rule *r);

// ---------------------------------------------------------------------------
// The walk (cfiwalk.c), with the calling thread's cache of rules.

// A frame's registers: ip a return address into it (its rule is looked up
// at ip - 1), sp and bp the values rsp and rbp have there.
struct tpprof_cfi_regs {
    uintptr_t ip, sp, bp;
};

// A thread's walk state (its cache of rules, its last walk): mapped (50
// KiB, NULL if it cannot be), for one thread at a time.
struct tpprof_cfi_state;
struct tpprof_cfi_state *tpprof_cfi_state_new(void);
void tpprof_cfi_state_free(struct tpprof_cfi_state *st);

// For tests: the rule lookups st made so far (a step each), those of them
// that missed its cache (a parse each in cfi.c), and the set of a thread's
// rule cache (4 rules) that a return address goes to.
uint64_t tpprof_cfi_state_steps(const struct tpprof_cfi_state *st);
uint64_t tpprof_cfi_state_misses(const struct tpprof_cfi_state *st);
unsigned tpprof_cfi_cache_set(uintptr_t ip);

// Walks the stack [lo, hi) from r: the return addresses, innermost (r->ip)
// first, into ips, at most max. Returns how many, or -1 where the walk is
// not known to be exact (a rule that is not simple, a frame outside the
// bounds, a CFA that does not grow): the caller asks libunwind then. gen:
// the unwinder's generation (it changes as modules are unloaded): the
// thread's cached rules of another generation are dropped. Where it meets a
// frame of st's last walk whose stack words are unchanged, it takes that
// walk's frames from there (the same frames; cfiwalk.c).
int tpprof_cfi_walk(struct tpprof_cfi_state *st, const struct tpprof_cfi_regs *r, uintptr_t lo, uintptr_t hi,
                    uint32_t gen, uintptr_t *ips, int max);

#endif
