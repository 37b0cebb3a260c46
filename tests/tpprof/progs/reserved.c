// reserved.c: address space reserved PROT_NONE and committed in parts, as a
// JVM's heap, V8's and Go's arenas and the CUDA runtime's address range are:
// 1 GiB reserved in reserve() and never unmapped; 4 MiB committed at its
// start by mapping over them (commit_fixed), 2 MiB at 512 MiB in by
// mprotect (commit_protect), of which 1 MiB is unmapped again; and a plain
// mapping of 64 KiB (plain_map) flipped read-only and back, as a JIT flips
// its code, which changes nothing; last, a reservation lost with the part
// committed in it (lose_reservation). Prints "reserved ok".
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#define MIB ((size_t)1 << 20)

char *volatile keep_reserve, *volatile keep_plain;

__attribute__((noinline)) static char *reserve(void) {
    return mmap(NULL, 1024 * MIB, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
}

__attribute__((noinline)) static int commit_fixed(char *at) {
    char *p = mmap(at, 4 * MIB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    if (p != at) return -1;
    memset(p, 1, 4 * MIB);
    return 0;
}

__attribute__((noinline)) static int commit_protect(char *at) {
    if (mprotect(at, 2 * MIB, PROT_READ | PROT_WRITE) != 0) return -1;
    memset(at, 2, 2 * MIB);
    return 0;
}

__attribute__((noinline)) static char *plain_map(void) {
    char *p = mmap(NULL, 64 << 10, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    __asm__ volatile(""); // not a tail call: the mapping's stack starts here
    return p;
}

__attribute__((noinline)) static int commit_lost(char *at) {
    char *p = mmap(at, 64 << 10, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    if (p != at) return -1;
    memset(p, 3, 64 << 10);
    return 0;
}

// A reservation of 16 MiB, 64 KiB committed 8 MiB in, every pointer to it
// dropped: its committed part is lost. A MiB left unmapped on each side
// keeps it apart from the other mappings (the leak scan takes pieces side
// by side for one reservation).
__attribute__((noinline)) static int lose_reservation(void) {
    char *p = mmap(NULL, 18 * MIB, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED || munmap(p, MIB) != 0 || munmap(p + 17 * MIB, MIB) != 0) return -1;
    return commit_lost(p + 9 * MIB);
}

int main(void) {
    char *r = reserve();
    if (r == MAP_FAILED) return 2;
    keep_reserve = r;
    if (commit_fixed(r) != 0 || commit_protect(r + 512 * MIB) != 0) return 3;
    if (munmap(r + 513 * MIB, MIB) != 0) return 4;
    char *q = plain_map();
    if (q == MAP_FAILED) return 5;
    keep_plain = q;
    if (mprotect(q, 64 << 10, PROT_READ) != 0 || mprotect(q, 64 << 10, PROT_READ | PROT_WRITE) != 0) return 6;
    if (lose_reservation() != 0) return 7;
    printf("reserved ok\n");
    return 0;
}
