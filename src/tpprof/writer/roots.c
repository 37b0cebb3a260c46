// roots.c: the leak scan's choice of roots (roots.h): which segments of the
// loaded objects and which parts of the threads' stacks are read. What is
// read how, and why, is scan.c's; this file only picks the ranges, from
// what it is given, so that the choice can be tested without a process to
// scan. Writer-owned; no allocation, no system call.
#define _GNU_SOURCE // dl_phdr_info
#include <string.h>

#include "writer/roots.h"

bool tpprof_roots_is_libc(const struct dl_phdr_info *info) {
    const char *name = info->dlpi_name ? info->dlpi_name : "";
    const char *slash = strrchr(name, '/');
    return strncmp(slash ? slash + 1 : name, "libc.so", 7) == 0;
}

bool tpprof_roots_next_segment(const struct dl_phdr_info *info, const struct tpprof_root_rules *rules,
                               bool libc_pass, int *i, struct tpprof_root *out) {
    bool libc = tpprof_roots_is_libc(info), loader = rules->loader_base && info->dlpi_addr == rules->loader_base;
    if ((libc || loader) != libc_pass) return false;
    for (; *i < info->dlpi_phnum; (*i)++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[*i];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_W)) continue;
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
        if (lo >= rules->self_lo && lo < rules->self_hi) continue; // tpprof's own globals
        *out = (struct tpprof_root){.lo = lo, .hi = hi, .exact_only = libc, .heap_only = loader};
        (*i)++;
        return true;
    }
    return false;
}

int tpprof_roots_of_thread(const struct tpprof_thread *t, const struct tpprof_thread *me, uintptr_t sp,
                           uintptr_t tls, struct tpprof_root out[2]) {
    int n = 0;
    if (t == me) {
        uintptr_t hi = t->stack_hi > sp ? t->stack_hi : sp + 4096;
        out[n++] = (struct tpprof_root){.lo = sp, .hi = hi};
    } else if (!atomic_load(&t->exited)) {
        uintptr_t from = atomic_load(&t->stop_sp); // stopped: from its handler's frame up
        out[n++] = (struct tpprof_root){.lo = from > t->stack_lo && from < t->stack_hi ? from : t->stack_lo,
                                        .hi = t->stack_hi};
    } else {
        return 0;
    }
    if (t->tp) out[n++] = (struct tpprof_root){.lo = t->tp - tls, .hi = t->tp + 2048};
    return n;
}
