// leaks.c: a program with a known set of leaks, for tpprof's preload tests.
//
// Lost: 3 x 100 B malloc (leak_direct), 240 B calloc (leak_calloc), 320 B
// posix_memalign + 256 B aligned_alloc (leak_aligned), 19 B strdup
// (leak_strdup), one 7000 B block at the end of a realloc chain
// (leak_realloc_chain), one 3-page anonymous mapping (leak_mmap).
// Reachable: 4321 B from a global (keep_global), a 2-block chain from a
// global (keep_chain), two pieces of a partly unmapped mapping (keep_pieces).
// Freed: everything else. Prints one line; exits 0.
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

void *volatile sink;
void *global_keep;
struct node { struct node *next; char pad[24]; };
struct node *global_head;
void *piece_a, *piece_b;

NOINLINE void leak_direct(void) {
    for (int i = 0; i < 3; i++) sink = malloc(100);
    sink = NULL;
}

NOINLINE void leak_calloc(void) {
    sink = calloc(10, 24);
    sink = NULL;
}

NOINLINE void leak_aligned(void) {
    void *p = NULL;
    if (posix_memalign(&p, 64, 320) != 0) exit(3);
    sink = p;
    sink = aligned_alloc(128, 256);
    sink = NULL;
}

NOINLINE void leak_strdup(void) {
    sink = strdup("tpprof-strdup-leak"); // 19 bytes
    sink = NULL;
}

NOINLINE void leak_realloc_chain(void) {
    char *p = malloc(10);
    p = realloc(p, 1000);
    p = realloc(p, 5000);
    p = realloc(p, 7000);
    sink = p;
    sink = NULL;
}

NOINLINE void leak_mmap(void) {
    sink = mmap(NULL, 3 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    sink = NULL;
}

// Reachable blocks are zeroed, as a program would fill them: left
// uninitialized they may hold stale heap words that point at a leak (a false
// negative every conservative scanner shares).
NOINLINE void keep_global(void) { global_keep = calloc(1, 4321); }

NOINLINE void keep_chain(void) {
    struct node *a = malloc(sizeof *a);
    a->next = calloc(1, 555);
    global_head = a;
}

NOINLINE void keep_pieces(void) {
    char *m = mmap(NULL, 4 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    munmap(m + 4096, 4096); // [m, m+4K) and [m+8K, m+16K) stay
    piece_a = m;
    piece_b = m + 2 * 4096;
}

NOINLINE void no_leak(void) {
    for (int i = 0; i < 50; i++) {
        char *p = malloc(50 + (size_t)i);
        sink = p;
        free(p);
    }
    void *m = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    sink = m;
    m = mremap(m, 8192, 5 * 4096, MREMAP_MAYMOVE);
    munmap(m, 5 * 4096);
    sink = NULL;
}

// Overwrites dead stack slots so no stale copy of a leaked pointer survives.
NOINLINE void clobber_stack(void) {
    volatile char buf[32768];
    memset((char *)buf, 0, sizeof buf);
}

int main(void) {
    leak_direct();
    leak_calloc();
    leak_aligned();
    leak_strdup();
    leak_realloc_chain();
    leak_mmap();
    keep_global();
    keep_chain();
    keep_pieces();
    no_leak();
    clobber_stack();
    printf("leaks: done\n");
    return 0;
}
