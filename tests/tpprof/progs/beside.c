// beside.c: one of several unrelated processes recorded at once under one
// TPPROF_OUTPUT (shared_output.sh). Leaks one block of SIZE bytes from
// beside_leak, waits until the file GO exists (so that every process is
// recording before any ends), then exits 0.
// usage: beside SIZE GO
#define _DEFAULT_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static void *volatile kept;

__attribute__((noinline)) void beside_leak(size_t size) {
    char *p = malloc(size);
    if (p) p[0] = 1;
    kept = p;
    kept = NULL; // the only pointer gone: lost
}

int main(int argc, char **argv) {
    if (argc != 3) return 2;
    beside_leak((size_t)atol(argv[1]));
    for (int i = 0; i < 1000 && access(argv[2], F_OK) != 0; i++) usleep(10000);
    printf("beside %s: done\n", argv[1]);
    return 0;
}
