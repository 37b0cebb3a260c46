// cfi_frames.c: functions built without frame pointers (-O2
// -fomit-frame-pointer: tests/tpprof/meson.build) for test_cfi.c: frames
// with an rsp-based CFA, one that keeps the program's data in %rbp (rbp
// saved), and one with alloca (an rbp-based CFA).
#include "cfi_frames.h"

#define NOINLINE __attribute__((noinline))
#define KEEP() __asm__ volatile("" ::: "memory")

volatile int cfi_frames_sink;

NOINLINE void nofp_call(cfi_frames_fn fn, int n) {
    fn(n);
    KEEP();
}

NOINLINE void nofp_rbp_call(cfi_frames_fn fn, int n) {
    __asm__ volatile("mov %0, %%rbp" ::"r"((long)n * 31 + 7) : "rbp");
    fn(n);
    KEEP();
}

NOINLINE void nofp_alloca_call(cfi_frames_fn fn, int n) {
    volatile char *a = __builtin_alloca(32 + (unsigned)(n & 3) * 16);
    a[0] = (char)n;
    fn(n + a[0] * 0);
    KEEP();
}

// A chain of `depth` frames of the three kinds, fn at its end.
NOINLINE void nofp_chain(cfi_frames_fn fn, int depth) {
    if (depth <= 0) fn(depth);
    else if (depth % 3 == 0) nofp_rbp_call(nofp_chain_next, depth - 1);
    else if (depth % 3 == 1) nofp_alloca_call(nofp_chain_next, depth - 1);
    else nofp_call(nofp_chain_next, depth - 1);
    KEEP();
}

cfi_frames_fn cfi_frames_leaf;

NOINLINE void nofp_chain_next(int depth) {
    nofp_chain(cfi_frames_leaf, depth);
    KEEP();
}
