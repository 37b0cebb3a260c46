// cfideep_lib.c: a library of 32 functions, each calling the next, built
// without frame pointers (gcc and clang: tests/tpprof/meson.build), with
// frames of four kinds: plain, a local array (a bigger rsp-based CFA),
// alloca (an rbp-based CFA, rbp saved) and %rbp holding the program's data
// (rbp saved, then clobbered). cfi_d0 allocates sz bytes and frees them,
// except LOST_A and LOST_B. For cfideep.c; scenario cfi_walk.c.
#include <stdlib.h>

#define NOINLINE __attribute__((noinline))
// After each call: no tail call, so every frame stays on the stack.
#define KEEP() __asm__ volatile("" ::: "memory")

void *volatile cfi_sink;
char *volatile cfi_sink_c;

NOINLINE void cfi_d0(int n, int sz) {
    (void)n;
    cfi_sink = malloc((size_t)sz);
    if (sz != 4242 && sz != 4343) free(cfi_sink);
    cfi_sink = NULL;
    KEEP();
}

#define PLAIN(k, next)                                                                                                 \
    NOINLINE void cfi_d##k(int n, int sz) {                                                                            \
        next(n + 1, sz);                                                                                               \
        KEEP();                                                                                                        \
    }
#define ARRAY(k, next)                                                                                                 \
    NOINLINE void cfi_d##k(int n, int sz) {                                                                            \
        volatile char buf[96 + k];                                                                                     \
        buf[n & 63] = (char)n;                                                                                         \
        next(n + buf[n & 63] * 0, sz);                                                                                 \
        KEEP();                                                                                                        \
    }
#define ALLOCA(k, next)                                                                                                \
    NOINLINE void cfi_d##k(int n, int sz) {                                                                            \
        char *a = __builtin_alloca(16 + (size_t)(n & 7) * 16);                                                         \
        a[0] = (char)k;                                                                                                \
        cfi_sink_c = a;                                                                                                \
        next(n, sz);                                                                                                   \
        KEEP();                                                                                                        \
    }
#define RBP(k, next)                                                                                                   \
    NOINLINE void cfi_d##k(int n, int sz) {                                                                            \
        __asm__ volatile("mov %0, %%rbp" ::"r"((long)n * 977 + k) : "rbp");                                           \
        next(n, sz);                                                                                                   \
        KEEP();                                                                                                        \
    }

void cfi_d0(int n, int sz);
PLAIN(1, cfi_d0)
ARRAY(2, cfi_d1)
ALLOCA(3, cfi_d2)
RBP(4, cfi_d3)
PLAIN(5, cfi_d4)
RBP(6, cfi_d5)
ALLOCA(7, cfi_d6)
ARRAY(8, cfi_d7)
PLAIN(9, cfi_d8)
ALLOCA(10, cfi_d9)
RBP(11, cfi_d10)
ARRAY(12, cfi_d11)
PLAIN(13, cfi_d12)
ARRAY(14, cfi_d13)
RBP(15, cfi_d14)
ALLOCA(16, cfi_d15)
PLAIN(17, cfi_d16)
RBP(18, cfi_d17)
ARRAY(19, cfi_d18)
ALLOCA(20, cfi_d19)
PLAIN(21, cfi_d20)
ALLOCA(22, cfi_d21)
ARRAY(23, cfi_d22)
RBP(24, cfi_d23)
PLAIN(25, cfi_d24)
ARRAY(26, cfi_d25)
ALLOCA(27, cfi_d26)
RBP(28, cfi_d27)
PLAIN(29, cfi_d28)
RBP(30, cfi_d29)
ARRAY(31, cfi_d30)
