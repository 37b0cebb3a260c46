// other_preload.c: another LD_PRELOAD library of the kind tools stack
// (a CUDA call counter): it wraps cuMemAlloc_v2 and puts and finds the
// next definitions with dlsym(RTLD_NEXT, ...), which must still mean
// "next after this library" with libtpprof.so preloaded beside it.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int calls;

int cuMemAlloc_v2(unsigned long long *p, size_t n) {
    static int (*next)(unsigned long long *, size_t);
    if (!next) *(void **)&next = dlsym(RTLD_NEXT, "cuMemAlloc_v2");
    if (!next || (void *)next == (void *)cuMemAlloc_v2) return 999; // RTLD_NEXT found this very function
    calls++;
    return next(p, n);
}

int puts(const char *s) {
    static int (*next)(const char *);
    if (!next) *(void **)&next = dlsym(RTLD_NEXT, "puts");
    if (!next || (void *)next == (void *)puts) return -1;
    fputs("[other] ", stdout);
    return next(s);
}

__attribute__((destructor)) static void report(void) {
    char line[64];
    int n = snprintf(line, sizeof line, "other: %d cuMemAlloc_v2 calls\n", calls);
    fflush(stdout);
    if (write(1, line, (size_t)n) < 0) return;
}
