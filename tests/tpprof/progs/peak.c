// peak.c: a known peak and known temporaries.
//
// 1 MiB (alloc_a), 2 MiB (alloc_b), free A, 512 KiB (alloc_c), free B, free C:
// the peak is 3 MiB with A and B live. Then 100 malloc+free pairs in
// temp_loop (temporaries), and 100 pairs in nontemp_loop where another
// allocation comes between (not temporaries). Exits 0.
// With the argument "moves": then a pause (for periodic flushes, which
// write A's and B's rows with their shares of that peak), and a new peak of
// 4 MiB (alloc_d, kept to the end) that neither A nor B is in.
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NOINLINE __attribute__((noinline))

void *volatile sink;

NOINLINE void *alloc_a(void) { return malloc(1 << 20); }
NOINLINE void *alloc_b(void) { return malloc(2 << 20); }
NOINLINE void *alloc_c(void) { return malloc(512 << 10); }
NOINLINE void *alloc_d(void) { return malloc(4 << 20); }

NOINLINE void temp_loop(void) {
    for (int i = 0; i < 100; i++) {
        char *p = malloc(64);
        sink = p;
        free(p);
    }
}

NOINLINE void nontemp_loop(void) {
    for (int i = 0; i < 100; i++) {
        char *p = malloc(96);
        char *q = malloc(96);
        sink = p;
        sink = q;
        free(p);
        free(q);
    }
}

int main(int argc, char **argv) {
    char *a = alloc_a();
    memset(a, 1, 4096);
    char *b = alloc_b();
    memset(b, 2, 4096);
    free(a);
    char *c = alloc_c();
    memset(c, 3, 4096);
    free(b);
    free(c);
    temp_loop();
    nontemp_loop();
    if (argc > 1 && strcmp(argv[1], "moves") == 0) {
        nanosleep(&(struct timespec){.tv_nsec = 300000000}, NULL);
        char *d = alloc_d();
        memset(d, 4, 4096);
        sink = d;
    }
    printf("peak: done\n");
    return 0;
}
