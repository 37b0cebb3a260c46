// stalebuf.c: a leaked block whose address is left, stale, in the memory
// stdout's buffer is then carved from. A 4 KiB block holds the address of a
// 100,000-byte block at offset 2048; the 4 KiB block is freed, the big one's
// last pointer dropped (a leak), and stdout, redirected to a file (fully
// buffered), gets its 4 KiB buffer from malloc: the same chunk, uncleared.
// A scan that reads that buffer finds the address and calls the leak
// reachable. Run with MALLOC_PERTURB_=0 (no scrubbing of freed memory).
// Prints "stalebuf ADDRESS" (where the 4 KiB block was) and exits 0.
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

__attribute__((noinline)) void *stale_target(void) {
    void *p = malloc(100000);
    __asm__ volatile("" : : "r"(p) : "memory"); // not a tail call: this frame allocates
    return p;
}

void **volatile holder;

// Returns where the 4 KiB block was.
__attribute__((noinline)) static uintptr_t leave_address(void) {
    holder = malloc(4096); // (through a volatile: the compiler may not elide the block)
    memset(holder, 0, 4096);
    holder[256] = stale_target(); // offset 2048
    uintptr_t at = (uintptr_t)holder;
    free(holder);  // the freed chunk keeps its copy of the address
    holder = NULL; // the big block's last live pointer is gone
    return at;
}

int main(void) {
    uintptr_t at = leave_address();
    // The first write makes stdout's buffer; the test checks it took the
    // freed chunk (else the case tests nothing).
    printf("stalebuf %" PRIuPTR "\n", at);
    return 0;
}
