// quick.c: leaves without exit(): argv[1] is "_exit" (status 7), "abort", or
// "hang" (waits to be killed).
// Before that it leaks 3333 B (quick_leak) and waits 300 ms so the periodic
// flush has written it.
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void *volatile sink;

__attribute__((noinline)) void quick_leak(void) { sink = malloc(3333); sink = NULL; }

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    quick_leak();
    struct timespec ts = {0, 300000000};
    nanosleep(&ts, NULL);
    if (strcmp(argv[1], "abort") == 0) abort();
    if (strcmp(argv[1], "hang") == 0)
        for (;;) pause();
    _exit(7);
}
