// elfsym.c: a loaded object's dynamic symbol by name (elfsym.h), for the
// constructor's questions about the C library's functions (where exit's
// code ends, where the getters' code is). Reads the object's own tables in
// memory; knows nothing of the recorder.
#define _GNU_SOURCE
#include <elf.h>
#include <link.h>
#include <stdint.h>
#include <string.h>

#include "base/elfsym.h"

struct query {
    uintptr_t addr;
    const char *name;
    size_t size;
};

// The GNU hash of a symbol name (the ELF gABI extension's: h * 33 + c).
static uint32_t gnu_hash(const char *s) {
    uint32_t h = 5381;
    for (; *s; s++) h = h * 33 + (unsigned char)*s;
    return h;
}

// A dynamic entry's address: glibc relocates them in place when it loads an
// object, except where the dynamic section is read-only (the vDSO).
static uintptr_t dyn_addr(const struct dl_phdr_info *info, ElfW(Addr) v) {
    return v < info->dlpi_addr ? info->dlpi_addr + v : v;
}

static bool holds(const struct dl_phdr_info *info, uintptr_t addr) {
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *p = &info->dlpi_phdr[i];
        uintptr_t lo = info->dlpi_addr + p->p_vaddr;
        if (p->p_type == PT_LOAD && addr >= lo && addr - lo < p->p_memsz) return true;
    }
    return false;
}

static int find_in(struct dl_phdr_info *info, size_t size, void *arg) {
    (void)size;
    struct query *q = arg;
    if (!holds(info, q->addr)) return 0;
    const ElfW(Dyn) *dyn = NULL;
    for (int i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_DYNAMIC) dyn = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
    const uint32_t *gh = NULL;
    const ElfW(Sym) *symtab = NULL;
    const char *strtab = NULL;
    for (; dyn && dyn->d_tag != DT_NULL; dyn++) {
        if (dyn->d_tag == DT_GNU_HASH) gh = (const uint32_t *)dyn_addr(info, dyn->d_un.d_ptr);
        else if (dyn->d_tag == DT_SYMTAB) symtab = (const ElfW(Sym) *)dyn_addr(info, dyn->d_un.d_ptr);
        else if (dyn->d_tag == DT_STRTAB) strtab = (const char *)dyn_addr(info, dyn->d_un.d_ptr);
    }
    if (!gh || !symtab || !strtab) return 1;
    // nbuckets, symoffset, bloom words, bloom shift; the bloom filter; the
    // buckets; then one chain word per symbol from symoffset on, whose low
    // bit ends the chain.
    uint32_t nbuckets = gh[0], symoffset = gh[1], nbloom = gh[2];
    if (nbuckets == 0) return 1;
    const uint32_t *buckets = (const uint32_t *)((const ElfW(Addr) *)(gh + 4) + nbloom);
    const uint32_t *chain = buckets + nbuckets;
    uint32_t h = gnu_hash(q->name);
    for (uint32_t i = buckets[h % nbuckets]; i >= symoffset && i != 0; i++) {
        uint32_t c = chain[i - symoffset];
        const ElfW(Sym) *s = &symtab[i];
        // (Versions of one name are separate entries: the one at addr.)
        if ((c | 1) == (h | 1) && strcmp(strtab + s->st_name, q->name) == 0 && s->st_shndx != SHN_UNDEF &&
            info->dlpi_addr + s->st_value == q->addr) {
            q->size = s->st_size;
            break;
        }
        if (c & 1) break;
    }
    return 1;
}

size_t tpprof_elfsym_size(const void *addr, const char *name) {
    struct query q = {(uintptr_t)addr, name, 0};
    if (addr && name) dl_iterate_phdr(find_in, &q);
    return q.size;
}
