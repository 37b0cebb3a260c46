// test_cfi.c: unit tests of record/cfi.c (a code address's unwind rule from
// its module's .eh_frame) and record/cfiwalk.c (the walk by those rules):
// rules of this test's own functions built with and without frame
// pointers, a hand-made table read at odd alignment (every CFA operation
// the reader knows and the ones it refuses), and walks compared with
// libunwind's from the same frame, on the main thread and another, twice
// over (the second from the thread's cached rules). Runs under
// ASan+UBSan too.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "record/cfi.h"
#include "../check.h"
#include "cfi_frames.h"

#define NOINLINE __attribute__((noinline))
#define KEEP() __asm__ volatile("" ::: "memory")

// ---------------------------------------------------------------------------
// Rules of real functions.

static uintptr_t seen_ret; // the return address into the function that called record_ret

NOINLINE static void record_ret(int n) {
    (void)n;
    seen_ret = (uintptr_t)__builtin_return_address(0);
    KEEP();
}

// Built with frame pointers (as the whole test is): CFA = rbp + 16, the
// caller's rbp at CFA - 16.
NOINLINE static void fp_call(cfi_frames_fn fn, int n) {
    fn(n);
    KEEP();
}

static struct tpprof_cfi_rule rule_after(void (*call)(cfi_frames_fn, int)) {
    seen_ret = 0;
    call(record_ret, 3);
    struct tpprof_cfi_rule r;
    memset(&r, 0x55, sizeof r);
    CHECK(seen_ret != 0);
    tpprof_cfi_rule_at(seen_ret - 1, &r);
    return r;
}

static void test_a_function_with_a_frame_pointer_has_an_rbp_based_cfa(void) {
    struct tpprof_cfi_rule r = rule_after(fp_call);
    CHECK_MSG(r.kind == TPPROF_CFI_STEP && r.cfa_rbp == 1 && r.cfa_off == 16 && r.rbp_off == -16,
              "kind %d, cfa %s+%d, rbp at %d", r.kind, r.cfa_rbp ? "rbp" : "rsp", r.cfa_off, r.rbp_off);
}

static void test_functions_without_frame_pointers_have_their_own_rules(void) {
    // Plain: an rsp-based CFA past its pushes and locals, rbp untouched.
    struct tpprof_cfi_rule r = rule_after(nofp_call);
    CHECK_MSG(r.kind == TPPROF_CFI_STEP && r.cfa_rbp == 0 && r.cfa_off >= 8 && r.cfa_off % 8 == 0 && r.rbp_off == 0,
              "plain: kind %d, cfa %s+%d, rbp at %d", r.kind, r.cfa_rbp ? "rbp" : "rsp", r.cfa_off, r.rbp_off);
    // %rbp used for data: saved below the CFA, the CFA rsp-based.
    r = rule_after(nofp_rbp_call);
    CHECK_MSG(r.kind == TPPROF_CFI_STEP && r.cfa_rbp == 0 && r.cfa_off >= 16 && r.rbp_off < 0 && r.rbp_off >= -r.cfa_off,
              "rbp kept: kind %d, cfa %s+%d, rbp at %d", r.kind, r.cfa_rbp ? "rbp" : "rsp", r.cfa_off, r.rbp_off);
    // alloca: the frame's size is not known, so the CFA is rbp-based.
    r = rule_after(nofp_alloca_call);
    CHECK_MSG(r.kind == TPPROF_CFI_STEP && r.cfa_rbp == 1 && r.cfa_off == 16 && r.rbp_off == -16,
              "alloca: kind %d, cfa %s+%d, rbp at %d", r.kind, r.cfa_rbp ? "rbp" : "rsp", r.cfa_off, r.rbp_off);
}

static void test_addresses_outside_any_code_have_no_rule(void) {
    struct tpprof_cfi_rule r;
    static int data;
    CHECK(tpprof_cfi_rule_at((uintptr_t)&data, &r) == TPPROF_CFI_NONE);
    int *heap = malloc(sizeof *heap);
    CHECK(tpprof_cfi_rule_at((uintptr_t)heap, &r) == TPPROF_CFI_NONE);
    free(heap);
    CHECK(tpprof_cfi_rule_at(16, &r) == TPPROF_CFI_NONE);
    CHECK(tpprof_cfi_rule_in(NULL, 16, &r) == TPPROF_CFI_NONE);
}

// A signal handler's return address is the C library's signal trampoline,
// whose CIE says 'S' and whose CFA is an expression: not a simple rule.
static volatile uintptr_t handler_ret;
static void on_signal(int sig) {
    (void)sig;
    handler_ret = (uintptr_t)__builtin_return_address(0);
}

static void test_the_signal_trampoline_is_left_to_libunwind(void) {
    signal(SIGUSR1, on_signal);
    raise(SIGUSR1);
    signal(SIGUSR1, SIG_DFL);
    struct tpprof_cfi_rule r;
    CHECK(handler_ret != 0);
    CHECK_MSG(tpprof_cfi_rule_at(handler_ret - 1, &r) == TPPROF_CFI_NONE, "kind %d", r.kind);
}

// ---------------------------------------------------------------------------
// Each walk reads the stack as it stands, whatever the thread walked
// before (its rules are cached; its frames are taken where a walk meets
// them, only if the words they were read from are unchanged): a hand-made
// stack of frame-pointer frames (return addresses inside fp_call, fp_call2
// and fp_call3, whose rule is CFA = rbp + 16, the caller's rbp at CFA - 16).

NOINLINE static void fp_call2(cfi_frames_fn fn, int n) {
    fn(n + 1);
    KEEP();
}

NOINLINE static void fp_call3(cfi_frames_fn fn, int n) {
    fn(n + 2);
    KEEP();
}

static uintptr_t ret_in(void (*call)(cfi_frames_fn, int)) {
    seen_ret = 0;
    call(record_ret, 1);
    return seen_ret;
}

// Six hand-made frames on stack: frame k at stack[8k + 8], its saved rbp
// (frame k+1) then the return address into frame k+1 (ra[1], ra[2], ra[0],
// ...), the last one's caller 0; want gets ra[0] and those 6 addresses.
static void six_frames(uintptr_t *stack, const uintptr_t ra[3], uintptr_t want[7]) {
    want[0] = ra[0];
    for (int k = 0; k < 6; k++) {
        uintptr_t *f = &stack[8 * k + 8];
        f[0] = k < 5 ? (uintptr_t)&stack[8 * k + 16] : 0;
        f[1] = want[k + 1] = k < 5 ? ra[(k + 1) % 3] : 0;
    }
}

// six_frames on stack (64 words) walked once from its innermost frame by a
// state of its own (returned; NULL, checked, if none could be mapped), the
// walk checked: where the tests of a walk meeting the last one start. r:
// the innermost frame's registers.
static struct tpprof_cfi_state *six_frames_walked(uintptr_t *stack, uintptr_t ra[3], uintptr_t want[7],
                                                  struct tpprof_cfi_regs *r) {
    ra[0] = ret_in(fp_call), ra[1] = ret_in(fp_call2), ra[2] = ret_in(fp_call3);
    six_frames(stack, ra, want);
    struct tpprof_cfi_state *st = tpprof_cfi_state_new();
    CHECK(st != NULL);
    if (!st) return NULL;
    *r = (struct tpprof_cfi_regs){ra[0], (uintptr_t)&stack[2], (uintptr_t)&stack[8]};
    uintptr_t ips[8];
    int n = tpprof_cfi_walk(st, r, (uintptr_t)stack, (uintptr_t)(stack + 64), 1, ips, 6);
    CHECK_MSG(n == 6 && memcmp(ips, want, 6 * sizeof ips[0]) == 0, "%d frames", n);
    return st;
}

static void test_a_changed_stack_is_walked_as_it_stands(void) {
    static uintptr_t stack[64];
    uintptr_t lo = (uintptr_t)stack, hi = (uintptr_t)(stack + 64), ra[3], want[7], ips[8];
    struct tpprof_cfi_regs r;
    struct tpprof_cfi_state *st = six_frames_walked(stack, ra, want, &r);
    if (!st) return;
    // The same again, from cached rules: the same.
    int n = tpprof_cfi_walk(st, &r, lo, hi, 1, ips, 6);
    CHECK(n == 6 && memcmp(ips, want, 6 * sizeof ips[0]) == 0);
    // An outer return address changed: that frame is the new one.
    stack[8 * 3 + 9] = want[4] = ra[0] == want[4] ? ra[1] : ra[0];
    n = tpprof_cfi_walk(st, &r, lo, hi, 1, ips, 6);
    CHECK_MSG(n == 6 && memcmp(ips, want, 6 * sizeof ips[0]) == 0, "a changed return address: %d frames", n);
    // An outer saved rbp changed (frame 2 now goes to frame 4 directly):
    // the walk follows it.
    stack[8 * 2 + 8] = (uintptr_t)&stack[8 * 4 + 8];
    uintptr_t skip[6] = {want[0], want[1], want[2], want[3], want[5], want[6]};
    n = tpprof_cfi_walk(st, &r, lo, hi, 1, ips, 6);
    CHECK_MSG(n == 5 && memcmp(ips, skip, 5 * sizeof ips[0]) == 0, "a changed saved rbp: %d frames", n);
    // A walk that starts deeper and meets the previous one at its frame 1.
    struct tpprof_cfi_regs deeper = {ra[2], (uintptr_t)&stack[0], (uintptr_t)&stack[2]};
    stack[2] = (uintptr_t)&stack[8];
    stack[3] = ra[0];
    n = tpprof_cfi_walk(st, &r, lo, hi, 1, ips, 6); // (the previous walk: from r)
    uintptr_t from_deeper[6] = {ra[2], skip[0], skip[1], skip[2], skip[3], skip[4]};
    n = tpprof_cfi_walk(st, &deeper, lo, hi, 1, ips, 6);
    CHECK_MSG(n == 6 && memcmp(ips, from_deeper, 6 * sizeof ips[0]) == 0, "from deeper: %d frames", n);
    // A walk cut short by its cap, then one from the same frame with room
    // for more: it goes on past where the first stopped.
    n = tpprof_cfi_walk(st, &r, lo, hi, 1, ips, 3);
    CHECK_MSG(n == 3 && memcmp(ips, skip, 3 * sizeof ips[0]) == 0, "capped at 3: %d frames", n);
    n = tpprof_cfi_walk(st, &deeper, lo, hi, 1, ips, 6);
    CHECK_MSG(n == 6 && memcmp(ips, from_deeper, 6 * sizeof ips[0]) == 0, "deeper, after a capped walk: %d frames", n);
    // A deeper walk capped inside the last walk's frames: its first ones;
    // then the whole stack again, past the frame the capped walk ended at.
    n = tpprof_cfi_walk(st, &deeper, lo, hi, 1, ips, 3);
    CHECK_MSG(n == 3 && memcmp(ips, from_deeper, 3 * sizeof ips[0]) == 0, "deeper, capped: %d frames", n);
    n = tpprof_cfi_walk(st, &r, lo, hi, 1, ips, 8);
    CHECK_MSG(n == 5 && memcmp(ips, skip, 5 * sizeof ips[0]) == 0, "after a capped deeper walk: %d frames", n);
    // The outermost frame's caller, 0 when last walked, is now an address
    // (its saved rbp 0: no CFA above it): the walk is no longer exact.
    stack[8 * 5 + 9] = ra[1];
    n = tpprof_cfi_walk(st, &r, lo, hi, 1, ips, 8);
    CHECK_MSG(n == -1, "the outermost frame's caller changed: %d frames", n);
    stack[8 * 5 + 9] = 0;
    n = tpprof_cfi_walk(st, &r, lo, hi, 1, ips, 8);
    CHECK_MSG(n == 5 && memcmp(ips, skip, 5 * sizeof ips[0]) == 0, "the end restored: %d frames", n);
    // The same first frame with another rbp (its CFA is rbp-based): the walk
    // follows that rbp, as a thread that never walked before would.
    struct tpprof_cfi_regs other_bp = {ra[0], (uintptr_t)&stack[2], (uintptr_t)&stack[16]};
    struct tpprof_cfi_state *st2 = tpprof_cfi_state_new();
    CHECK(st2 != NULL);
    uintptr_t first[8];
    int nfirst = st2 ? tpprof_cfi_walk(st2, &other_bp, lo, hi, 1, first, 8) : -1;
    tpprof_cfi_state_free(st2);
    n = tpprof_cfi_walk(st, &other_bp, lo, hi, 1, ips, 8);
    CHECK_MSG(nfirst == 4 && n == nfirst && memcmp(ips, first, (size_t)n * sizeof ips[0]) == 0,
              "another rbp: %d frames, %d on a new thread", n, nfirst);
    n = tpprof_cfi_walk(st, &r, lo, hi, 1, ips, 8);
    CHECK(n == 5 && memcmp(ips, skip, 5 * sizeof ips[0]) == 0);
    // Walked with other bounds (another stack): the same frames, walked.
    n = tpprof_cfi_walk(st, &r, lo, hi + 8, 1, ips, 8);
    CHECK_MSG(n == 5 && memcmp(ips, skip, 5 * sizeof ips[0]) == 0, "other bounds: %d frames", n);
    tpprof_cfi_state_free(st);
}

// A walk takes the last walk's frames from where it meets them, checked:
// past a caller that changed under the meeting frame (another call site in
// the same caller's frame) it meets them again further out, and a walk
// capped short gives a shallower walk its frames past the cap. Counted in
// rule lookups, each a step the walk took itself.
static void test_walks_meet_the_last_walk_again_past_a_changed_caller(void) {
    static uintptr_t stack[64];
    uintptr_t lo = (uintptr_t)stack, hi = (uintptr_t)(stack + 64), ra[3], want[7], ips[8];
    struct tpprof_cfi_regs r;
    struct tpprof_cfi_state *st = six_frames_walked(stack, ra, want, &r);
    if (!st) return;
    int n;
    // Frame 0's caller is now another function (frame 1's return address,
    // the same frame layout): frames 0 and 1 are stepped, frame 2 on taken.
    stack[9] = want[1] = want[1] == ra[1] ? ra[2] : ra[1];
    uint64_t before = tpprof_cfi_state_steps(st);
    n = tpprof_cfi_walk(st, &r, lo, hi, 1, ips, 6);
    uint64_t steps = tpprof_cfi_state_steps(st) - before;
    CHECK_MSG(n == 6 && memcmp(ips, want, 6 * sizeof ips[0]) == 0, "a changed caller: %d frames", n);
    CHECK_MSG(steps == 2, "a changed caller: %llu steps", (unsigned long long)steps);
    // Capped at 3 frames, then a walk from frame 1 capped at 3: its three
    // are the last walk's, none stepped (kept past the first one's cap).
    n = tpprof_cfi_walk(st, &r, lo, hi, 1, ips, 3);
    CHECK_MSG(n == 3 && memcmp(ips, want, 3 * sizeof ips[0]) == 0, "capped: %d frames", n);
    struct tpprof_cfi_regs r1 = {want[1], (uintptr_t)&stack[10], (uintptr_t)&stack[16]};
    before = tpprof_cfi_state_steps(st);
    n = tpprof_cfi_walk(st, &r1, lo, hi, 1, ips, 3);
    steps = tpprof_cfi_state_steps(st) - before;
    CHECK_MSG(n == 3 && memcmp(ips, &want[1], 3 * sizeof ips[0]) == 0, "from frame 1, capped: %d frames", n);
    CHECK_MSG(steps == 0, "from frame 1, capped: %llu steps", (unsigned long long)steps);
    // Frame 4's return address changes; a walk capped at 3 takes frames 0-2
    // (checked) and keeps the rest as they were (not checked: past what it
    // gives); a walk from frame 1 that takes them checks them, and has the
    // new frame 4.
    n = tpprof_cfi_walk(st, &r, lo, hi, 1, ips, 6);
    CHECK(n == 6 && memcmp(ips, want, 6 * sizeof ips[0]) == 0);
    stack[8 * 3 + 9] = want[4] = want[4] == ra[0] ? ra[1] : ra[0];
    n = tpprof_cfi_walk(st, &r, lo, hi, 1, ips, 3);
    CHECK_MSG(n == 3 && memcmp(ips, want, 3 * sizeof ips[0]) == 0, "capped, frame 4 changed: %d frames", n);
    n = tpprof_cfi_walk(st, &r1, lo, hi, 1, ips, 6);
    CHECK_MSG(n == 5 && memcmp(ips, &want[1], 5 * sizeof ips[0]) == 0, "from frame 1, frame 4 changed: %d frames", n);
    tpprof_cfi_state_free(st);
}

// Frames without frame pointers whose CFA is rsp-based, one in two saving
// the caller's rbp (its data, not a frame address): a changed saved rbp
// that no step reads leaves the walk's frames as they were, so a walk that
// meets the last one takes them, stepping none.
static void test_a_changed_saved_rbp_that_no_step_reads_keeps_the_frames(void) {
    uintptr_t ra[2] = {ret_in(nofp_call), ret_in(nofp_rbp_call)};
    struct tpprof_cfi_rule rule[2];
    for (int i = 0; i < 2; i++) {
        tpprof_cfi_rule_at(ra[i] - 1, &rule[i]);
        CHECK(rule[i].kind == TPPROF_CFI_STEP && !rule[i].cfa_rbp && rule[i].cfa_off % 8 == 0);
        if (rule[i].kind != TPPROF_CFI_STEP || rule[i].cfa_rbp) return;
    }
    CHECK(rule[0].rbp_off == 0 && rule[1].rbp_off < 0);
    static uintptr_t stack[512];
    uintptr_t lo = (uintptr_t)stack, hi = (uintptr_t)(stack + 512);
    // Frame k's ip ra[k % 2], from sp_k; its caller's return address at
    // CFA - 8, the saved rbp (data) at CFA + rbp_off; 6 frames, then 0.
    uintptr_t want[6], sp = lo + 16, rbp_at[6] = {0};
    for (int k = 0; k < 6; k++) {
        const struct tpprof_cfi_rule *u = &rule[k % 2];
        uintptr_t cfa = sp + (uintptr_t)u->cfa_off;
        CHECK(cfa + 64 < hi);
        if (cfa + 64 >= hi) return;
        want[k] = ra[k % 2];
        if (u->rbp_off) {
            rbp_at[k] = cfa + (uintptr_t)(intptr_t)u->rbp_off;
            *(uintptr_t *)rbp_at[k] = 1000 + (uintptr_t)k;
        }
        *(uintptr_t *)(cfa - 8) = k < 5 ? ra[(k + 1) % 2] : 0;
        sp = cfa;
    }
    struct tpprof_cfi_state *st = tpprof_cfi_state_new();
    CHECK(st != NULL);
    if (!st) return;
    struct tpprof_cfi_regs r = {ra[0], lo + 16, 77};
    uintptr_t ips[8];
    int n = tpprof_cfi_walk(st, &r, lo, hi, 1, ips, 8);
    CHECK_MSG(n == 6 && memcmp(ips, want, 6 * sizeof ips[0]) == 0, "%d frames", n);
    *(uintptr_t *)rbp_at[1] = 4242; // frame 1's saved rbp: frame 2's rbp, which nothing reads
    uint64_t before = tpprof_cfi_state_steps(st);
    n = tpprof_cfi_walk(st, &r, lo, hi, 1, ips, 8);
    uint64_t steps = tpprof_cfi_state_steps(st) - before;
    CHECK_MSG(n == 6 && memcmp(ips, want, 6 * sizeof ips[0]) == 0, "a changed saved rbp: %d frames", n);
    CHECK_MSG(steps == 0, "a changed saved rbp: %llu steps", (unsigned long long)steps);
    tpprof_cfi_state_free(st);
}

// A word no return address can be (above user space: a sign-extended int
// where libffi's frame under pyenv's 3.13 ctypes has its return address)
// ends the rules' walk: libunwind takes the stack, and ends it there.
static void test_a_return_address_above_user_space_gives_up_the_walk(void) {
    uintptr_t ra[2] = {ret_in(fp_call), ret_in(fp_call2)};
    static uintptr_t stack[32];
    uintptr_t lo = (uintptr_t)stack, hi = (uintptr_t)(stack + 32);
    // Frame 0 at stack[8] (saved rbp, return address into fp_call2), frame
    // 1 at stack[16], whose caller is 0 (the end) or the bad word.
    stack[8] = (uintptr_t)&stack[16];
    stack[9] = ra[1];
    stack[16] = 0;
    stack[17] = 0;
    struct tpprof_cfi_state *st = tpprof_cfi_state_new();
    CHECK(st != NULL);
    if (!st) return;
    struct tpprof_cfi_regs r = {ra[0], (uintptr_t)&stack[2], (uintptr_t)&stack[8]};
    uintptr_t ips[8];
    int n = tpprof_cfi_walk(st, &r, lo, hi, 1, ips, 8);
    CHECK_MSG(n == 2 && ips[0] == ra[0] && ips[1] == ra[1], "to the end: %d frames", n);
    // (With room for 3 frames: the bad word would be the last one kept,
    // no rule looked up for it.)
    stack[17] = (uintptr_t)0xffffffff80000002u;
    n = tpprof_cfi_walk(st, &r, lo, hi, 1, ips, 3);
    CHECK_MSG(n == -1, "a caller above user space: %d frames", n);
    stack[17] = (uintptr_t)1 << 47; // (the first address past it)
    n = tpprof_cfi_walk(st, &r, lo, hi, 1, ips, 3);
    CHECK_MSG(n == -1, "a caller at 2^47: %d frames", n);
    stack[17] = 0;
    n = tpprof_cfi_walk(st, &r, lo, hi, 1, ips, 3);
    CHECK_MSG(n == 2, "the end again: %d frames", n);
    tpprof_cfi_state_free(st);
}

// Four return addresses that share a set of the rule cache, each walk's
// only one (no code there: a rule of none, kept like any other), taken in
// turn: each is looked up once, then found. A direct-mapped cache missed on
// every walk once two hot addresses shared a slot.
static void test_four_rules_in_one_cache_set_stay_there(void) {
    uintptr_t ips[4], got[2];
    unsigned set = tpprof_cfi_cache_set(4096);
    int k = 0;
    for (uintptr_t a = 4096; k < 4; a += 16)
        if (tpprof_cfi_cache_set(a) == set) ips[k++] = a;
    static uintptr_t stack[8];
    uintptr_t lo = (uintptr_t)stack, hi = (uintptr_t)(stack + 8);
    struct tpprof_cfi_state *st = tpprof_cfi_state_new();
    CHECK(st != NULL);
    if (!st) return;
    for (int round = 0; round < 3; round++)
        for (int i = 0; i < 4; i++) {
            struct tpprof_cfi_regs r = {ips[i], lo, 0};
            CHECK(tpprof_cfi_walk(st, &r, lo, hi, 1, got, 2) == -1);
        }
    CHECK_MSG(tpprof_cfi_state_misses(st) == 4, "%llu misses", (unsigned long long)tpprof_cfi_state_misses(st));
    tpprof_cfi_state_free(st);
}

// ---------------------------------------------------------------------------
// A hand-made .eh_frame_hdr and .eh_frame, one byte off alignment.

struct tab {
    uint8_t b[1024];
    size_t n;
};
static void put(struct tab *t, const void *p, size_t n) {
    if (n) memcpy(t->b + t->n, p, n);
    t->n += n;
}
static void put8(struct tab *t, uint8_t v) { put(t, &v, 1); }
static void put32(struct tab *t, uint32_t v) { put(t, &v, 4); }
static void put32_at(struct tab *t, size_t at, uint32_t v) { memcpy(t->b + at, &v, 4); }

// A CIE ("zR", pcrel sdata4 FDE pointers, code 1, data -8, return address
// column 16, CFA = rsp + 8, return address at CFA - 8) with augmentation
// aug; returns its offset.
static size_t put_cie(struct tab *t, const char *aug) {
    size_t at = t->n;
    put32(t, 0);
    put32(t, 0); // CIE id
    put8(t, 1);
    put(t, aug, strlen(aug) + 1);
    put8(t, 1);    // code alignment
    put8(t, 0x78); // data alignment -8
    put8(t, 16);   // return address column
    put8(t, 1);    // augmentation length
    put8(t, 0x1b); // R: pcrel sdata4
    put8(t, 0x0c), put8(t, 7), put8(t, 8); // def_cfa rsp 8
    put8(t, 0x90), put8(t, 1);             // offset r16 at cfa-8
    while ((t->n - at) % 4) put8(t, 0);    // nops
    put32_at(t, at, (uint32_t)(t->n - at - 4));
    return at;
}

// An FDE of cie for [start, start + len) with program ops; its offset.
static size_t put_fde(struct tab *t, size_t cie, uintptr_t start, uint32_t len, const uint8_t *ops, size_t nops) {
    size_t at = t->n;
    put32(t, 0);
    put32(t, (uint32_t)(t->n - cie));
    int32_t rel = (int32_t)(start - (uintptr_t)(t->b + t->n));
    put32(t, (uint32_t)rel);
    put32(t, len);
    put8(t, 0); // augmentation length
    put(t, ops, nops);
    while ((t->n - at) % 4) put8(t, 0);
    put32_at(t, at, (uint32_t)(t->n - at - 4));
    return at;
}

static void test_a_hand_made_table_gives_each_rows_rule(void) {
    static struct tab t; // (static: its addresses are the "code")
    memset(&t, 0, sizeof t);
    t.n = 1; // the header one byte off alignment
    size_t hdr = t.n;
    put8(&t, 1), put8(&t, 0x1b), put8(&t, 0x03), put8(&t, 0x3b); // version, eh_frame pcrel sdata4, count udata4, table datarel sdata4
    size_t frame_ptr = t.n;
    put32(&t, 0);
    put32(&t, 3);
    size_t table = t.n;
    for (int i = 0; i < 6; i++) put32(&t, 0);
    size_t frame = t.n;
    put32_at(&t, frame_ptr, (uint32_t)(frame - frame_ptr));
    uintptr_t code = (uintptr_t)t.b + 0x100000; // (within the 32-bit offsets of the table)
    size_t cie = put_cie(&t, "zR"), cie_s = put_cie(&t, "zRS");
    const uint8_t prog[] = {
        0x41,                   // advance 1
        0x0e, 16,               // def_cfa_offset 16
        0x86, 2,                // offset rbp at cfa-16
        0x43,                   // advance 3 (4)
        0x0d, 6,                // def_cfa_register rbp
        0x4a,                   // advance 10 (14)
        0x0a,                   // remember_state
        0x0c, 7, 8,             // def_cfa rsp 8
        0xc6,                   // restore rbp (the CIE's: unchanged)
        0x41,                   // advance 1 (15)
        0x0b,                   // restore_state
        0x02, 4,                // advance_loc1 4 (19)
        0x0f, 3, 0x76, 0x78, 6, // def_cfa_expression: rbp - 8, deref
        0x03, 0x10, 0x00,       // advance_loc2 16 (35)
        0x0c, 7, 24,            // def_cfa rsp 24
        0x10, 6, 1, 0x96,       // expression: rbp's rule an expression
    };
    const uint8_t last[] = {0x07, 16}; // undefined r16: the outermost frame
    size_t f1 = put_fde(&t, cie, code, 64, prog, sizeof prog);
    size_t f2 = put_fde(&t, cie, code + 64, 16, last, sizeof last);
    size_t f3 = put_fde(&t, cie_s, code + 128, 16, NULL, 0);
    put32(&t, 0); // the end of .eh_frame
    size_t fdes[3] = {f1, f2, f3};
    uintptr_t starts[3] = {code, code + 64, code + 128};
    for (int i = 0; i < 3; i++) {
        put32_at(&t, table + 8 * (size_t)i, (uint32_t)(int32_t)(starts[i] - (uintptr_t)(t.b + hdr)));
        put32_at(&t, table + 8 * (size_t)i + 4, (uint32_t)(fdes[i] - hdr));
    }
    const uint8_t *h = t.b + hdr;
    struct {
        uintptr_t pc;
        int kind, cfa_rbp, cfa_off, rbp_off;
    } want[] = {
        {code + 0, TPPROF_CFI_STEP, 0, 8, 0},     {code + 1, TPPROF_CFI_STEP, 0, 16, -16},
        {code + 3, TPPROF_CFI_STEP, 0, 16, -16},  {code + 4, TPPROF_CFI_STEP, 1, 16, -16},
        {code + 14, TPPROF_CFI_STEP, 0, 8, 0},    {code + 15, TPPROF_CFI_STEP, 1, 16, -16},
        {code + 18, TPPROF_CFI_STEP, 1, 16, -16}, {code + 19, TPPROF_CFI_NONE, 0, 0, 0},
        {code + 35, TPPROF_CFI_NONE, 0, 0, 0},    {code + 63, TPPROF_CFI_NONE, 0, 0, 0},
        {code + 64, TPPROF_CFI_END, 0, 0, 0},     {code + 79, TPPROF_CFI_END, 0, 0, 0},
        {code + 80, TPPROF_CFI_NONE, 0, 0, 0},    {code + 130, TPPROF_CFI_NONE, 0, 0, 0},
        {code - 1, TPPROF_CFI_NONE, 0, 0, 0},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        struct tpprof_cfi_rule r;
        int k = tpprof_cfi_rule_in(h, want[i].pc, &r);
        bool ok = k == want[i].kind && r.kind == want[i].kind;
        if (ok && k == TPPROF_CFI_STEP)
            ok = r.cfa_rbp == want[i].cfa_rbp && r.cfa_off == want[i].cfa_off && r.rbp_off == want[i].rbp_off;
        CHECK_MSG(ok, "pc +%d: kind %d, cfa %s+%d, rbp at %d", (int)(want[i].pc - code), k, r.cfa_rbp ? "rbp" : "rsp",
                  r.cfa_off, r.rbp_off);
    }
    // A header of another version, or a table of another encoding: none.
    struct tpprof_cfi_rule r;
    t.b[hdr] = 2;
    CHECK(tpprof_cfi_rule_in(h, code + 1, &r) == TPPROF_CFI_NONE);
    t.b[hdr] = 1;
    t.b[hdr + 3] = 0x1b;
    CHECK(tpprof_cfi_rule_in(h, code + 1, &r) == TPPROF_CFI_NONE);
    t.b[hdr + 3] = 0x3b;
    CHECK(tpprof_cfi_rule_in(h, code + 1, &r) == TPPROF_CFI_STEP);
}

// ---------------------------------------------------------------------------
// Walks against libunwind's.

typedef int (*backtrace_fn)(void **, int);
static backtrace_fn unw_bt;

enum { MAXF = 128 };
struct cmp {
    struct tpprof_cfi_state *st;
    uintptr_t lo, hi;
    int walks, same;
};
static __thread struct cmp *cur;

static void stack_of_thread(uintptr_t *lo, uintptr_t *hi) {
    pthread_attr_t a;
    void *addr;
    size_t size;
    pthread_getattr_np(pthread_self(), &a);
    pthread_attr_getstack(&a, &addr, &size);
    pthread_attr_destroy(&a);
    *lo = (uintptr_t)addr;
    *hi = (uintptr_t)addr + size;
}

// Built with a frame pointer: the walk starts at its caller with the
// registers its frame restores; libunwind's from here, less its first frame
// (this function's own).
NOINLINE static void walk_here(int n) {
    (void)n;
    struct cmp *c = cur;
    uintptr_t *fp = __builtin_frame_address(0);
    struct tpprof_cfi_regs r = {fp[1], (uintptr_t)(fp + 2), fp[0]};
    uintptr_t ips[MAXF];
    void *l[MAXF + 1];
    int nl = unw_bt(l, MAXF + 1) - 1;
    for (int pass = 0; pass < 2; pass++) { // (the second: from cached rules)
        int nw = tpprof_cfi_walk(c->st, &r, c->lo, c->hi, 1, ips, MAXF);
        c->walks++;
        bool same = nw == nl && nw > 3;
        for (int i = 0; same && i < nw; i++) same = ips[i] == (uintptr_t)l[i + 1];
        if (same) c->same++;
        else if (c->walks - c->same <= 3) {
            fprintf(stderr, "walk %d: %d frames, libunwind %d\n", c->walks, nw, nl);
            for (int i = 0; i < (nw > nl ? nw : nl) && i < 48; i++)
                fprintf(stderr, "  %2d %#lx %#lx\n", i, i < nw ? (unsigned long)ips[i] : 0UL,
                        i < nl ? (unsigned long)l[i + 1] : 0UL);
        }
    }
    KEEP();
}

// Walks from chains of every depth to 40, each twice, from two call sites.
NOINLINE static void walks_from(void (*site)(cfi_frames_fn, int)) {
    for (int d = 0; d <= 40; d++) site(walk_here, d);
    KEEP();
}

NOINLINE static void chain_via_fp(cfi_frames_fn fn, int d) {
    (void)fn;
    nofp_chain(walk_here, d);
    KEEP();
}

NOINLINE static void chain_via_nofp(cfi_frames_fn fn, int d) {
    (void)fn;
    nofp_call(nofp_chain_next, d);
    KEEP();
}

static void *compare_walks(void *arg) {
    struct cmp *c = arg;
    cur = c;
    stack_of_thread(&c->lo, &c->hi);
    walks_from(chain_via_fp);
    walks_from(chain_via_nofp);
    return NULL;
}

static void test_walks_are_libunwinds_on_two_threads_and_again(void) {
    void *h = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
    unw_bt = h ? (backtrace_fn)dlsym(h, "unw_backtrace") : NULL;
    if (!unw_bt) {
        fprintf(stderr, "no libunwind.so.8: walks not compared\n");
        return;
    }
    cfi_frames_leaf = walk_here;
    struct cmp m = {.st = tpprof_cfi_state_new()}, o = {.st = tpprof_cfi_state_new()};
    CHECK(m.st && o.st);
    if (!m.st || !o.st) return;
    compare_walks(&m);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, compare_walks, &o) == 0);
    pthread_join(t, NULL);
    CHECK_MSG(m.walks == 164 && m.same == m.walks, "main thread: %d of %d walks libunwind's", m.same, m.walks);
    CHECK_MSG(o.walks == 164 && o.same == o.walks, "other thread: %d of %d walks libunwind's", o.same, o.walks);
    // A new generation (modules unloaded): the rules are read again, the same.
    struct tpprof_cfi_regs r;
    uintptr_t *fp = __builtin_frame_address(0), ips[MAXF], again[MAXF];
    r = (struct tpprof_cfi_regs){fp[1], (uintptr_t)(fp + 2), fp[0]};
    int n1 = tpprof_cfi_walk(m.st, &r, m.lo, m.hi, 1, ips, MAXF);
    int n2 = tpprof_cfi_walk(m.st, &r, m.lo, m.hi, 2, again, MAXF);
    CHECK(n1 > 2 && n1 == n2 && memcmp(ips, again, (size_t)n1 * sizeof ips[0]) == 0);
    // Bounds that do not hold the frame: no walk.
    CHECK(tpprof_cfi_walk(m.st, &r, m.lo, r.sp, 2, ips, MAXF) == -1);
    CHECK(tpprof_cfi_walk(m.st, &r, r.sp + 8, m.hi, 2, ips, MAXF) == -1);
    // A cap on frames: the first ones.
    CHECK(tpprof_cfi_walk(m.st, &r, m.lo, m.hi, 2, again, 2) == 2 && again[0] == ips[0] && again[1] == ips[1]);
    tpprof_cfi_state_free(m.st);
    tpprof_cfi_state_free(o.st);
}

int main(void) {
    RUN(test_a_function_with_a_frame_pointer_has_an_rbp_based_cfa);
    RUN(test_functions_without_frame_pointers_have_their_own_rules);
    RUN(test_addresses_outside_any_code_have_no_rule);
    RUN(test_the_signal_trampoline_is_left_to_libunwind);
    RUN(test_a_hand_made_table_gives_each_rows_rule);
    RUN(test_a_changed_stack_is_walked_as_it_stands);
    RUN(test_a_return_address_above_user_space_gives_up_the_walk);
    RUN(test_walks_meet_the_last_walk_again_past_a_changed_caller);
    RUN(test_a_changed_saved_rbp_that_no_step_reads_keeps_the_frames);
    RUN(test_four_rules_in_one_cache_set_stay_there);
    RUN(test_walks_are_libunwinds_on_two_threads_and_again);
    return CHECK_EXIT_STATUS();
}
