// mem.c: tpprof's own memory, taken straight from mmap.
//
// Everything tpprof keeps (rings, the stack depot, the live table) lives in
// anonymous mappings, never in the heap it records: so it is never recorded,
// never reported as a leak, and never scanned as a root (the live table holds
// the address of every block and would make every leak look reachable).
// This file must not call malloc.
#define _GNU_SOURCE
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/mem.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

// Raw syscalls: the exported mmap/munmap are tpprof's own hooks.
static void *map(size_t bytes, int extra) {
    if (bytes == 0) bytes = 1;
    long r = syscall(SYS_mmap, NULL, bytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | extra, -1, 0);
    if (r < 0 && r > -4096) return NULL;
    return (void *)r;
}

void *tpprof_mem_map(size_t bytes) { return map(bytes, 0); }

void *tpprof_mem_map_populated(size_t bytes) { return map(bytes, MAP_POPULATE); }

void *tpprof_mem_map_huge(size_t bytes) {
    const size_t huge = (size_t)2 << 20;
    if (bytes < huge) return map(bytes, 0);
    // Over-map by a huge page and trim both ends to the aligned part.
    char *p = map(bytes + huge, 0);
    if (!p) return NULL;
    char *at = (char *)(((uintptr_t)p + huge - 1) & ~(uintptr_t)(huge - 1));
    if (at > p) syscall(SYS_munmap, p, (size_t)(at - p));
    if (p + huge > at) syscall(SYS_munmap, at + bytes, (size_t)(p + huge - at));
    madvise(at, bytes, MADV_HUGEPAGE);
    // Present for writing now (Linux 5.14; before, it is left to faults): a
    // probe reads a slot before it writes it, and a read of an untouched
    // part maps the zero page, which the write then copies (a second fault
    // and a TLB flush on every CPU the program runs on).
    madvise(at, bytes, MADV_POPULATE_WRITE);
    return at;
}

void tpprof_mem_unmap(void *p, size_t bytes) {
    if (p) syscall(SYS_munmap, p, bytes ? bytes : 1);
}

void *tpprof_mem_grow(void *p, size_t old_bytes, size_t new_bytes) {
    // Moved by the kernel (page tables, not bytes): the writer's device
    // blocks double many times a second under a program that allocates
    // device memory in a loop, and copying them was a tenth of its time
    // (docs/device.md, "Cost"). The copy below only if mremap refuses.
    if (p && old_bytes) {
        long r = syscall(SYS_mremap, p, old_bytes, new_bytes ? new_bytes : 1, MREMAP_MAYMOVE);
        if (!(r < 0 && r > -4096)) return (void *)r;
    }
    void *q = tpprof_mem_map(new_bytes);
    if (!q) return NULL;
    if (p) {
        memcpy(q, p, old_bytes < new_bytes ? old_bytes : new_bytes);
        tpprof_mem_unmap(p, old_bytes);
    }
    return q;
}
