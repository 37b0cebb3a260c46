// roots.h: which memory the exit leak scan reads as roots (roots.c); the
// scan itself (scan.c) reads them and floods through the blocks they reach.
//
//     struct tpprof_root_rules rules = {.loader_base = getauxval(AT_BASE),
//                                       .self_lo = tpprof_self_lo, .self_hi = tpprof_self_hi};
//     struct tpprof_root r;
//     for (int i = 0; tpprof_roots_next_segment(info, &rules, false, &i, &r);)
//         scan(r.lo, r.hi);            // one object's data, first pass
//
// Pure functions of what they are given (program headers, thread structs):
// tests/tpprof/test_roots.c calls them on hand-built ones.
#ifndef TPPROF_WRITER_ROOTS_H
#define TPPROF_WRITER_ROOTS_H

#include <link.h> // struct dl_phdr_info: includers define _GNU_SOURCE

#include "base/base.h"
#include "record/rings.h"

struct tpprof_root {
    uintptr_t lo, hi;
    // Inside glibc's own data only a pointer to a block's first byte counts
    // (its arena keeps chunk-header pointers that go stale inside live
    // blocks).
    bool exact_only;
    // Inside the dynamic loader's data only pointers to heap blocks count
    // (its start-up allocator keeps the end of its last page, the start of
    // whatever mapping lies above).
    bool heap_only;
};

// What the segment roots leave out or treat apart.
struct tpprof_root_rules {
    uintptr_t loader_base;      // the dynamic loader's load address (AT_BASE), 0 if none
    uintptr_t self_lo, self_hi; // libtpprof.so's own image: its globals are never roots
};

// Whether the object is the C library (its file name starts "libc.so").
TPPROF_HIDDEN bool tpprof_roots_is_libc(const struct dl_phdr_info *info);

// The roots among the program headers of one loaded object, one per call:
// its writable PT_LOAD segments (data, bss), [base + p_vaddr, + p_memsz),
// but none inside libtpprof.so's image. The scan has two passes: the
// program's (libc_pass false: every object but libc and the loader) and
// the C library's (libc_pass true: those two only). *i is the header to
// look at next (0 to start); returns false when there is none left.
TPPROF_HIDDEN bool tpprof_roots_next_segment(const struct dl_phdr_info *info, const struct tpprof_root_rules *rules,
                                             bool libc_pass, int *i, struct tpprof_root *out);

// Thread t's roots for a scan run on thread `me` whose stack pointer is sp
// (its registers spilled above it), static TLS `tls` bytes below each
// thread pointer: its stack (me: from sp up; another live thread: from
// where it was stopped, t->stop_sp, if that lies inside its stack, else
// the whole stack) and then its TLS and thread control block, if its
// thread pointer is known. An exited thread has none. Returns how many
// (0 to 2) it wrote to out.
TPPROF_HIDDEN int tpprof_roots_of_thread(const struct tpprof_thread *t, const struct tpprof_thread *me, uintptr_t sp,
                                         uintptr_t tls, struct tpprof_root out[2]);

#endif
