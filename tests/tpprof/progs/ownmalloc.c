// ownmalloc.c: a program with its own malloc, free, calloc and realloc (a
// bump allocator over one mapping), as one linked with jemalloc or mimalloc
// is: the symbols come before the recorder's, so its allocations never reach
// the hooks, and the recording must say so. Prints "ownmalloc done".
#define _GNU_SOURCE
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

static char *arena;
static size_t used;

void *malloc(size_t n) {
    if (!arena) arena = mmap(NULL, 64 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (arena == MAP_FAILED) return NULL;
    n = (n + 15) & ~(size_t)15;
    if (used + n > (64u << 20)) return NULL;
    void *p = arena + used;
    used += n;
    return p;
}

void free(void *p) { (void)p; }

// The arena is a fresh mapping never reused (free does nothing): already
// zero. (malloc + memset here would be turned into a call to calloc.)
void *calloc(size_t k, size_t n) {
    size_t bytes;
    if (__builtin_mul_overflow(k, n, &bytes)) return NULL;
    return malloc(bytes);
}

void *realloc(void *p, size_t n) {
    void *q = malloc(n);
    if (p && q) memcpy(q, p, n); // the bump arena holds at least n bytes after p
    return q;
}

void *volatile sink;

int main(void) {
    for (int i = 0; i < 1000; i++) sink = malloc(100);
    printf("ownmalloc done\n");
    return 0;
}
