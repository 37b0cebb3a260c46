// nofp.c: a program built without frame pointers (-O2 -fomit-frame-pointer,
// as Debian builds cc1 and as): every caller of malloc is frameless and
// holds its own data in %rbp, so every stack is libunwind's. 4,000
// allocations from chains of varying depth (the recorder then stops trying
// the frame-pointer walk first, see unwind.c's SLOW_RUN: 129 walks of 4,302
// try it), one 4242 B block lost in inner < middle < outer < main, and after
// it 300 more allocations. Prints "nofp ok".
#include <stdio.h>
#include <stdlib.h>

#define NOINLINE __attribute__((noinline))
// After each call: no tail call, so every frame stays on the stack.
#define KEEP() __asm__ volatile("" ::: "memory")

void *volatile sink;
volatile int depth_sink;

// %rbp holds the program's data here, as it may in code built without frame
// pointers: a frame-pointer walk through this frame goes astray.
NOINLINE static void alloc_leaf(int i) {
    __asm__ volatile("mov $0x1234, %%rbp" ::: "rbp");
    sink = malloc(24 + (size_t)(i & 15));
    free(sink);
    KEEP();
}

NOINLINE static void chain(int d, int i) {
    if (d == 0) alloc_leaf(i);
    else chain(d - 1, i);
    depth_sink = d;
    KEEP();
}

NOINLINE static void inner(void) {
    __asm__ volatile("mov $0x4321, %%rbp" ::: "rbp");
    sink = malloc(4242);
    sink = NULL;
    KEEP();
}

NOINLINE static void middle(void) {
    inner();
    KEEP();
}

NOINLINE static void outer(void) {
    middle();
    KEEP();
}

int main(void) {
    // (Four frameless frames or more above malloc: more than the verdicts'
    // SKIPs reach, so no frame-pointer walk stands.)
    for (int i = 0; i < 4000; i++) chain(3 + i % 7, i);
    outer();
    for (int i = 0; i < 300; i++) chain(3 + i % 3, i);
    puts("nofp ok");
    return 0;
}
