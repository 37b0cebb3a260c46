// mixed.c: allocations under functions built without frame pointers, between
// functions built with them, from the main thread, a thread and a signal
// handler. The recorder's default unwinding must give the same stacks as
// pure libunwind (TPPROF_UNWIND=libunwind). Exits 0.
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#define NOINLINE __attribute__((noinline))
#define NOFP __attribute__((noinline, optimize("omit-frame-pointer")))

void *volatile sink;
volatile int depth_sink;

NOINLINE void fp_leaf(int i) {
    sink = malloc(32 + (size_t)(i & 7));
    free(sink);
}

// Without a frame pointer and with %rbp holding garbage: a frame-pointer
// walk through here stops.
NOFP void nofp_clobber(int i) {
    __asm__ __volatile__("mov $0x1234, %%rbp" ::: "rbp");
    fp_leaf(i);
    depth_sink = i;
}

// Without a frame pointer, %rbp untouched: a frame-pointer walk silently
// skips a frame here.
NOFP void nofp_quiet(int i) {
    fp_leaf(i + 1);
    depth_sink = i;
}

NOINLINE void fp_mid(int i) {
    if (i % 3 == 0) nofp_clobber(i);
    else if (i % 3 == 1) nofp_quiet(i);
    else fp_leaf(i);
    depth_sink = i;
}

NOINLINE void fp_top(int i) {
    fp_mid(i);
    depth_sink = i;
}

static void on_signal(int sig) {
    (void)sig;
    fp_top(5);
}

static void *thread_main(void *arg) {
    (void)arg;
    for (int i = 0; i < 300; i++) fp_top(i);
    return NULL;
}

int main(void) {
    for (int i = 0; i < 300; i++) fp_top(i);
    pthread_t t;
    pthread_create(&t, NULL, thread_main, NULL);
    pthread_join(t, NULL);
    signal(SIGUSR1, on_signal);
    for (int i = 0; i < 3; i++) raise(SIGUSR1);
    return 0;
}
