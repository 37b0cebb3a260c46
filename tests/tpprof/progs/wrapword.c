// wrapword.c: a frameless function (built without frame pointers) with words
// near 2^64 in its frame, right above malloc, as gcc's driver has: learning
// where its caller's saved frame pointer lies (SKIPF) reads each word there
// as an address, and a bounds check that added to the word wrapped round
// (the program crashed under tpprof). 100 allocations in frameless < mid;
// prints "wrapword ok".
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
void *volatile sink;
__attribute__((noinline)) static void *frameless(size_t n) {
    volatile uintptr_t junk[6];
    for (int i = 0; i < 6; i++) junk[i] = (uintptr_t)-16 - 8 * (uintptr_t)i;
    void *p = malloc(n);
    __asm__ volatile("" ::"r"(junk) : "memory");
    return p;
}
__attribute__((noinline)) static void mid(int k) {
    volatile uintptr_t junk2[3] = {(uintptr_t)-8, (uintptr_t)-24, (uintptr_t)-16};
    sink = frameless(32 + (size_t)k);
    free(sink);
    __asm__ volatile("" ::"r"(junk2) : "memory");
}
int main(void) {
    for (int k = 0; k < 100; k++) mid(k);
    puts("wrapword ok");
    return 0;
}
