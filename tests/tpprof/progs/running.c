// running.c: main returns while two worker threads still live, so the
// leak scan at exit meets them. The spinning one holds the only pointer to
// one block in a register (running_in_register: reachable only through the
// registers the scan stops the thread for), and left the only copy of
// another's deep in a frame that has returned (running_below_sp: lost, as
// dead frames below a thread's stack pointer are not roots). The sleeping
// one, blocked in pause(), left the only copy of a third block in a dead
// frame too (running_blocked_below_sp: lost); it must not be woken: pause()
// returning would print "running: sleeper interrupted" on stderr.
// Prints "running: ready" and exits 0.
#define _DEFAULT_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static atomic_int ready;

// (The empty asm after malloc keeps it a call, not a tail jump: these stay
// the innermost frames of the blocks' stacks.)
__attribute__((noinline)) void *running_in_register(void) {
    void *p = malloc(5555);
    __asm__ __volatile__("" ::: "memory");
    return p;
}
__attribute__((noinline)) void *running_below_sp(void) {
    void *p = malloc(6666);
    __asm__ __volatile__("" ::: "memory");
    return p;
}
__attribute__((noinline)) void *running_blocked_below_sp(void) {
    void *p = malloc(7777);
    __asm__ __volatile__("" ::: "memory");
    return p;
}

// Keeps the block's address at the bottom of a big frame, then returns: the
// word stays there, below where the thread's later calls reach.
__attribute__((noinline)) void dead_frame(void *(*make)(void)) {
    volatile void *slots[2048];
    memset((void *)slots, 0, sizeof slots);
    slots[0] = make();
    __asm__ __volatile__("" ::"r"(slots) : "memory");
}

static atomic_int sleeping;

static void *sleeper(void *arg) {
    (void)arg;
    dead_frame(running_blocked_below_sp);
    atomic_store(&sleeping, 1);
    for (;;) {
        pause();
        fputs("running: sleeper interrupted\n", stderr);
    }
    return NULL;
}

static void *worker(void *arg) {
    (void)arg;
    dead_frame(running_below_sp);
    void *p = running_in_register();
    atomic_store(&ready, 1);
    // Spins for good with p only in a register: no store, no call.
    __asm__ __volatile__("1: pause\n\tjmp 1b" ::"r"(p));
    return NULL;
}

int main(void) {
    pthread_t t, u;
    if (pthread_create(&t, NULL, worker, NULL) != 0 || pthread_create(&u, NULL, sleeper, NULL) != 0) return 2;
    while (!atomic_load(&ready) || !atomic_load(&sleeping)) {
    }
    struct timespec pause_in = {0, 50000000}; // the sleeper is in pause() by then
    nanosleep(&pause_in, NULL);
    printf("running: ready\n");
    return 0; // the worker still spins, the sleeper still sleeps
}
