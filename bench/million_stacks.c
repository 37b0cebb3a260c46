// million_stacks: allocations from 2^20 (1,048,576) distinct stacks, each
// once: a recursion 20 calls deep that goes through one of two call sites at
// each level (the bits of the leaf's number), then one malloc and free at
// the bottom. What tpprof's stack store pays when every allocation is a new
// stack (bench/real_workloads.sh measures real programs; this is the limit).
// Usage: million_stacks [levels (20)] [rounds (1)]: rounds > 1 walks the same
// stacks again (known stacks: the per-thread cache and the depot).
#include <stdio.h>
#include <stdlib.h>

static volatile unsigned long sink;

// One frame a level, called from one of two call sites: 20 levels are 2^20
// stacks of 20 frames (and main's), within tpprof's default depth of 32.
__attribute__((noinline)) static void down(int level, unsigned long path) {
    if (level == 0) {
        char *p = malloc(32 + (path & 63));
        if (p) p[0] = (char)path;
        sink += (unsigned long)(p ? p[0] : 0);
        free(p);
        return;
    }
    down(level - 1, path << 1);
    sink++; // not a tail call: this frame stays on the stack
    down(level - 1, path << 1 | 1);
    sink++;
}

int main(int argc, char **argv) {
    int levels = argc > 1 ? atoi(argv[1]) : 20;
    int rounds = argc > 2 ? atoi(argv[2]) : 1;
    if (levels < 1 || levels > 30 || rounds < 1) {
        fprintf(stderr, "usage: million_stacks [levels 1..30] [rounds]\n");
        return 2;
    }
    for (int r = 0; r < rounds; r++) down(levels, 0);
    printf("million_stacks: %lu allocations from %lu stacks\n", (unsigned long)rounds << levels, 1ul << levels);
    return 0;
}
