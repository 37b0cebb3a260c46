// stalebuf.c: a leaked block whose address is left, stale, in the memory
// stdout's buffer is then carved from. A 4 KiB block holds the address of a
// 100,000-byte block at offset 2048; the 4 KiB block is freed, the big one's
// last pointer dropped (a leak), and stdout, redirected to a file (fully
// buffered), gets its 4 KiB buffer from malloc: the same chunk, uncleared.
// A scan that reads that buffer finds the address and calls the leak
// reachable. Run with MALLOC_PERTURB_=0 (no scrubbing of freed memory).
// Prints "stalebuf" and exits 0.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

__attribute__((noinline)) void *stale_target(void) {
    void *p = malloc(100000);
    __asm__ volatile("" : : "r"(p) : "memory"); // not a tail call: this frame allocates
    return p;
}

void **volatile holder;

__attribute__((noinline)) static void leave_address(void) {
    holder = malloc(4096); // (through a volatile: the compiler may not elide the block)
    memset(holder, 0, 4096);
    holder[256] = stale_target(); // offset 2048
    free(holder);                 // the freed chunk keeps its copy of the address
    holder = NULL;                // the big block's last live pointer is gone
}

int main(void) {
    leave_address();
    fputs("stalebuf\n", stdout);
    return 0;
}
