// manystacks.c: 2^10 distinct stacks (a binary recursion 10 deep through
// left and right, one allocation at each leaf), run with a stack table made
// to keep 300 (TPPROF_TEST_MAX_STACKS): the rest are recorded without a
// stack, and the recording says how many. Prints "manystacks ok".
#include <stdio.h>
#include <stdlib.h>

void *volatile sink;

__attribute__((noinline)) static void rec(int d);

__attribute__((noinline)) static void left(int d) {
    rec(d - 1);
    __asm__ volatile("");
}

__attribute__((noinline)) static void right(int d) {
    rec(d - 1);
    __asm__ volatile("");
}

static void rec(int d) {
    if (d == 0) {
        sink = malloc(16);
        free(sink);
        return;
    }
    left(d);
    right(d);
    __asm__ volatile("");
}

int main(void) {
    rec(10);
    printf("manystacks ok\n");
    return 0;
}
