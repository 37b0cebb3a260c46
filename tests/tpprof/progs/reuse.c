// reuse.c: stacks that share frames in ways that caching in the unwinder
// (unwind.c's per-thread verdicts and anchor, stacks.c's per-thread cache)
// could get wrong: one helper called from two call sites at the same stack
// depth (its callee's frame record is the same, the helper's is not),
// recursion of varying depth past the depth limit, a loop at one call site
// (the frames are the same) and calls from a thread and a signal handler in
// between. The recorder's default unwinding must give exactly the stacks and
// counts of pure libunwind (TPPROF_UNWIND=libunwind). Exits 0.
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>

#define NOINLINE __attribute__((noinline))

void *volatile sink;
volatile int depth_sink;

NOINLINE void leaf(int i) {
    sink = malloc(16 + (size_t)(i & 3));
    free(sink);
    depth_sink = i;
}

NOINLINE void helper(int i) {
    leaf(i);
    depth_sink = i;
}

// Same frame size, so helper's frame lands at one address from both.
NOINLINE void site_a(int i) {
    helper(i);
    depth_sink = i;
}

NOINLINE void site_b(int i) {
    helper(i);
    depth_sink = i;
}

NOINLINE void rec(int d, int i) {
    if (d > 0) rec(d - 1, i);
    else if (i & 1) site_a(i);
    else site_b(i);
    depth_sink = d;
}

static void on_signal(int sig) {
    (void)sig;
    site_b(1);
}

static void *thread_main(void *arg) {
    (void)arg;
    for (int i = 0; i < 200; i++) rec(i % 45, i);
    return NULL;
}

int main(void) {
    signal(SIGUSR1, on_signal);
    for (int i = 0; i < 200; i++) {
        site_a(i);
        site_b(i);
        if (i % 3 == 0) site_a(i + 1);
        rec(i % 45, i);
        rec((i * 7) % 45, i + 1);
        if (i % 50 == 0) raise(SIGUSR1);
    }
    pthread_t t;
    pthread_create(&t, NULL, thread_main, NULL);
    pthread_join(t, NULL);
    for (int i = 0; i < 100; i++) leaf(i);
    return 0;
}
