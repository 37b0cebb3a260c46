// dies.c: a program that dies of a signal right after allocating, before
// any periodic flush could write it: argv[1] "segv" (a write through NULL),
// "abort", or "raise" (raise(SIGSEGV): sent, not a fault). Each loses
// 6161 B in dies_leak first. "caught": the program's own SIGSEGV handler
// recovers from three faults (siglongjmp), then it loses the block and
// returns 0: the recorder must stay out of the way of a handler of the
// program's.
#define _GNU_SOURCE
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void *volatile sink;
static sigjmp_buf back;
static int *volatile nowhere; // NULL: a write through it faults

__attribute__((noinline)) static void dies_leak(void) {
    char *p = malloc(6161);
    memset(p, 6, 6161);
    sink = p;
    sink = NULL;
}

static void on_segv(int sig) {
    (void)sig;
    siglongjmp(back, 1);
}

int main(int argc, char **argv) {
    const char *how = argc > 1 ? argv[1] : "segv";
    if (strcmp(how, "caught") == 0) {
        signal(SIGSEGV, on_segv);
        int faults = 0;
        for (int i = 0; i < 3; i++)
            if (sigsetjmp(back, 1) == 0) *nowhere = i;
            else faults++;
        dies_leak();
        printf("caught %d\n", faults);
        return 0;
    }
    dies_leak();
    if (strcmp(how, "abort") == 0) abort();
    if (strcmp(how, "raise") == 0) raise(SIGSEGV);
    *nowhere = 1;
    return 3;
}
