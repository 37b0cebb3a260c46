// dies.c: a program that dies of a signal right after allocating, before
// any periodic flush could write it: argv[1] "segv" (a write through NULL),
// "abort", or "raise" (raise(SIGSEGV): sent, not a fault). Each loses
// 6161 B in dies_leak first. "caught": the program's own SIGSEGV handler
// recovers from three faults (siglongjmp), then it loses the block and
// returns 0: the recorder must stay out of the way of a handler of the
// program's. "chained": the program's SIGSEGV handler calls the one it
// found (or, finding SIG_DFL, sets it and raises), as crash reporters do;
// the process must still die of the fault, not loop (it exits 9 after 3
// calls). "alarm": an alarm() timeout, as C test suites use, ends it.
#define _GNU_SOURCE
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

static struct sigaction found;
static int chained_calls;

static void on_segv_chained(int sig, siginfo_t *si, void *uc) {
    if (++chained_calls > 3) _exit(9);
    if ((found.sa_flags & SA_SIGINFO) && found.sa_sigaction) {
        found.sa_sigaction(sig, si, uc);
    } else if (found.sa_handler != SIG_DFL && found.sa_handler != SIG_IGN) {
        found.sa_handler(sig);
    } else {
        signal(sig, SIG_DFL);
        raise(sig);
    }
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
    if (strcmp(how, "chained") == 0) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_segv_chained;
        sa.sa_flags = SA_SIGINFO;
        sigaction(SIGSEGV, &sa, &found);
    }
    dies_leak();
    if (strcmp(how, "abort") == 0) abort();
    if (strcmp(how, "alarm") == 0) {
        alarm(1);
        for (;;) pause();
    }
    if (strcmp(how, "raise") == 0) raise(SIGSEGV);
    *nowhere = 1;
    return 3;
}
