// quick.c: leaves without exit(): argv[1] is "_exit" (status 7),
// "quick_exit" (status 7; its at_quick_exit handler leaks 2222 B in
// quick_handler_leak), "abort", or "hang" (waits to be killed).
// Before that it leaks 3333 B (quick_leak) and waits 300 ms so the periodic
// flush has written it.
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void *volatile sink;

__attribute__((noinline)) void quick_leak(void) { sink = malloc(3333); sink = NULL; }

__attribute__((noinline)) static void quick_handler_leak(void) { sink = malloc(2222); sink = NULL; }

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    quick_leak();
    struct timespec ts = {0, 300000000};
    nanosleep(&ts, NULL);
    if (strcmp(argv[1], "abort") == 0) abort();
    if (strcmp(argv[1], "hang") == 0)
        for (;;) pause();
    if (strcmp(argv[1], "quick_exit") == 0) {
        at_quick_exit(quick_handler_leak);
        quick_exit(7);
    }
    _exit(7);
}
