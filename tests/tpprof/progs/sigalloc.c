// sigalloc.c: a handler that allocates, run by a 50 us interval timer
// (SIGALRM, as a sampling profiler's SIGPROF handler or an allocating alarm
// handler does) while main allocates and frees as fast as it can. Each
// handler call mallocs 777 B and frees it. (Only that size, whose tcache bin
// main never touches and which is filled once before the timer starts: the
// handler's calls never take glibc's arena lock, which main may hold.)
// Prints "sigalloc CALLS" (handler calls); exits 0.
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

void *volatile sink;
static volatile sig_atomic_t calls;

__attribute__((noinline)) static void on_alarm(int sig) {
    (void)sig;
    void *p = malloc(777);
    sink = p;
    free(p);
    calls++;
}

int main(void) {
    free(malloc(777)); // the bin the handler uses, filled
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGALRM, &sa, NULL);
    struct itimerval it = {{0, 50}, {0, 50}};
    setitimer(ITIMER_REAL, &it, NULL);
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        for (int i = 0; i < 1000; i++) {
            void *p = malloc(32 + (size_t)(i & 7) * 8);
            sink = p;
            free(p);
        }
        clock_gettime(CLOCK_MONOTONIC, &now);
    } while ((now.tv_sec - t0.tv_sec) * 1000000000L + (now.tv_nsec - t0.tv_nsec) < 500000000L);
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    printf("sigalloc %d\n", (int)calls);
    return 0;
}
