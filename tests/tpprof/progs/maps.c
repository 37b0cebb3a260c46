// maps.c: many live mappings, and mappings cut and replaced.
//  - maps_many: 30,000 anonymous one-page mappings, unmapped oldest first
//    but the newest 10: 10 pages left.
//  - maps_big: a 16-page mapping whose pages 4-7 maps_fixed maps over
//    (MAP_FIXED): 12 pages of maps_big left in two pieces, 4 of maps_fixed.
//  - maps_hole: an 8-page mapping with pages 2-3 unmapped: 6 pages left in
//    two pieces.
// Prints "maps ok" and exits 0 (1 if a mapping fails).
#define _GNU_SOURCE
#include <stdio.h>
#include <sys/mman.h>

#define MANY 30000
#define PAGE 4096

static void *many[MANY];

__attribute__((noinline)) void *maps_map(size_t pages) {
    void *p = mmap(NULL, pages * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    __asm__ volatile("" : : "r"(p) : "memory"); // not a tail call: this frame maps
    return p;
}

__attribute__((noinline)) int maps_many(void) {
    for (int i = 0; i < MANY; i++)
        if ((many[i] = maps_map(1)) == MAP_FAILED) return -1;
    for (int i = 0; i < MANY - 10; i++) munmap(many[i], PAGE);
    return 0;
}

__attribute__((noinline)) void *maps_big(void) {
    void *p = maps_map(16);
    __asm__ volatile("" : : "r"(p) : "memory"); // not a tail call: this frame is on the stack
    return p;
}

__attribute__((noinline)) void *maps_fixed(char *at) {
    void *p = mmap(at, 4 * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    __asm__ volatile("" : : "r"(p) : "memory");
    return p;
}

__attribute__((noinline)) void *maps_hole(void) {
    void *p = maps_map(8);
    __asm__ volatile("" : : "r"(p) : "memory");
    return p;
}

int main(void) {
    if (maps_many() != 0) return 1;
    char *big = maps_big(), *hole = maps_hole();
    if (big == MAP_FAILED || hole == MAP_FAILED || maps_fixed(big + 4 * PAGE) != big + 4 * PAGE) return 1;
    munmap(hole + 2 * PAGE, 2 * PAGE);
    printf("maps ok\n");
    return 0;
}
