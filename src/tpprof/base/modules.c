// modules.c: the module map (path, GNU build-id, load bias, PT_LOAD range).
//
// Taken at start and after every dlopen/dlclose, so the CLI can symbolize raw
// instruction pointers afterwards, including those of libraries that were
// dlclose'd before exit (their rows keep `unloaded_ns`). No symbolization
// happens in the process. Called with the re-entry guard held; no malloc.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <sys/auxv.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/base.h"
#include "base/mem.h"
#include "base/modules.h"

uintptr_t tpprof_self_lo, tpprof_self_hi;
uintptr_t tpprof_loader_lo, tpprof_loader_hi;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct tpprof_module *mods;
static int nmods, capmods;
static char exe_path[256];

void tpprof_modules_lock(void) { pthread_mutex_lock(&lock); }
void tpprof_modules_unlock(void) { pthread_mutex_unlock(&lock); }

// ---------------------------------------------------------------------------
// Reading one object.

struct range { uintptr_t lo, hi; };

static struct range load_range(const struct dl_phdr_info *info) {
    struct range r = {UINTPTR_MAX, 0};
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD) continue;
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
        uintptr_t hi = lo + ph->p_memsz;
        if (lo < r.lo) r.lo = lo;
        if (hi > r.hi) r.hi = hi;
    }
    if (r.lo == UINTPTR_MAX) r.lo = 0;
    return r;
}

static void read_build_id(const struct dl_phdr_info *info, char *out, size_t cap) {
    out[0] = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_NOTE) continue;
        const char *p = (const char *)(info->dlpi_addr + ph->p_vaddr);
        const char *end = p + ph->p_memsz;
        while (p + sizeof(ElfW(Nhdr)) <= end) {
            const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)p;
            const char *name = p + sizeof *nh;
            const unsigned char *desc = (const unsigned char *)name + ((nh->n_namesz + 3) & ~3u);
            if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 && memcmp(name, "GNU", 4) == 0) {
                static const char hex[] = "0123456789abcdef";
                size_t k = 0;
                for (uint32_t j = 0; j < nh->n_descsz && k + 2 < cap; j++) {
                    out[k++] = hex[desc[j] >> 4];
                    out[k++] = hex[desc[j] & 15];
                }
                out[k] = 0;
                return;
            }
            p = (const char *)desc + ((nh->n_descsz + 3) & ~3u);
        }
    }
}

// ---------------------------------------------------------------------------
// Modules that bypass the hooks.
//
// A library loaded with RTLD_DEEPBIND looks symbols up in itself and its
// own dependencies before the global scope, so its malloc and free bind to
// the C library's, not to the ones preloaded here: its allocations are not
// recorded, and a block it frees that was allocated elsewhere stays live
// in the recording (a false leak). Rebinding its GOT slots is not safe in
// general (a library with an allocator of its own would get its frees sent
// to another allocator), so it is only detected: a module whose relocated
// GOT slot for one of the hooked functions holds the C library's address is
// flagged, and the CLI warns. Lazily bound slots resolve on first use, so
// modules are looked at again at the end (tpprof_modules_bypassing).

static const char *const hooked[] = {"malloc", "free", "calloc", "realloc", "reallocarray", "posix_memalign",
                                     "aligned_alloc", "memalign", "valloc", "pvalloc", "mmap", "munmap"};
#define NHOOKED (sizeof hooked / sizeof hooked[0])
static uintptr_t libc_fn[NHOOKED];
static uintptr_t loader_base;

// Outside any dl_iterate_phdr callback (dlsym takes the loader's lock).
static void libc_fns_init(void) {
    if (libc_fn[0]) return;
    for (size_t i = 0; i < NHOOKED; i++) libc_fn[i] = (uintptr_t)dlsym(RTLD_NEXT, hooked[i]);
    loader_base = (uintptr_t)getauxval(AT_BASE);
}

#if defined(__x86_64__)
#define JUMP_SLOT R_X86_64_JUMP_SLOT
#define GLOB_DAT R_X86_64_GLOB_DAT
#elif defined(__aarch64__)
#define JUMP_SLOT R_AARCH64_JUMP_SLOT
#define GLOB_DAT R_AARCH64_GLOB_DAT
#endif

// Whether [at, at + len) lies inside one PT_LOAD segment (mapped: the
// range between segments may be a hole).
static bool in_load(const struct dl_phdr_info *info, uintptr_t at, size_t len) {
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD) continue;
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
        if (at >= lo && len <= ph->p_memsz && at - lo <= ph->p_memsz - len) return true;
    }
    return false;
}

static bool bypasses(const struct dl_phdr_info *info, struct range r) {
#if defined(JUMP_SLOT) && defined(__LP64__)
    if (!libc_fn[0] || info->dlpi_addr == loader_base || (tpprof_self_lo >= r.lo && tpprof_self_lo < r.hi))
        return false;
    const ElfW(Dyn) *dyn = NULL;
    for (int i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
            dyn = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
    if (!dyn) return false;
    uintptr_t jmprel = 0, rela = 0, symtab = 0, strtab = 0;
    size_t pltsz = 0, relasz = 0, strsz = 0;
    bool pltrela = false;
    for (const ElfW(Dyn) *d = dyn; d->d_tag != DT_NULL; d++) {
        switch (d->d_tag) {
        case DT_JMPREL: jmprel = d->d_un.d_ptr; break;
        case DT_PLTRELSZ: pltsz = d->d_un.d_val; break;
        case DT_PLTREL: pltrela = d->d_un.d_val == DT_RELA; break;
        case DT_RELA: rela = d->d_un.d_ptr; break;
        case DT_RELASZ: relasz = d->d_un.d_val; break;
        case DT_SYMTAB: symtab = d->d_un.d_ptr; break;
        case DT_STRTAB: strtab = d->d_un.d_ptr; break;
        case DT_STRSZ: strsz = d->d_un.d_val; break;
        default: break;
        }
    }
    // The loader relocates these entries in place for most objects, not all.
    uintptr_t *ptrs[] = {&jmprel, &rela, &symtab, &strtab};
    for (size_t i = 0; i < 4; i++)
        if (*ptrs[i] && *ptrs[i] < r.lo) *ptrs[i] += info->dlpi_addr;
    if (!symtab || !strtab || !in_load(info, strtab, strsz)) return false;
    const ElfW(Sym) *syms = (const ElfW(Sym) *)symtab;
    const char *strs = (const char *)strtab;
    struct { uintptr_t at; size_t size; } tables[2] = {{pltrela ? jmprel : 0, pltsz}, {rela, relasz}};
    for (int t = 0; t < 2; t++) {
        uintptr_t at = tables[t].at;
        if (!at || !in_load(info, at, tables[t].size)) continue;
        const ElfW(Rela) *rel = (const ElfW(Rela) *)at;
        for (size_t k = 0; k < tables[t].size / sizeof *rel; k++) {
            unsigned long type = ELF64_R_TYPE(rel[k].r_info);
            if (type != JUMP_SLOT && type != GLOB_DAT) continue;
            // The slot's value first, its name only when the value is one
            // of the hooked functions' in the C library: the slots are in
            // the GOT, which the loader wrote, but the symbols and their
            // names are in .dynsym and .dynstr, spread over pages that a
            // lazily bound module never touched: reading every slot's name
            // was a cache miss or a page fault each (cc1: 490 slots into
            // 29,000 symbols; 0.23 ms at its start and again at its end).
            uintptr_t slot = info->dlpi_addr + rel[k].r_offset;
            if (!in_load(info, slot, sizeof(uintptr_t))) continue;
            uintptr_t value = *(const uintptr_t *)slot;
            size_t h = 0;
            while (h < NHOOKED && (!libc_fn[h] || value != libc_fn[h])) h++;
            if (h == NHOOKED) continue;
            const ElfW(Sym) *sym = &syms[ELF64_R_SYM(rel[k].r_info)];
            if (!in_load(info, (uintptr_t)sym, sizeof *sym) || sym->st_name >= strsz) continue;
            const char *name = strs + sym->st_name;
            for (; h < NHOOKED; h++)
                if (libc_fn[h] && value == libc_fn[h] && strcmp(name, hooked[h]) == 0) return true;
        }
    }
#else
    (void)info;
    (void)r;
#endif
    return false;
}

// ---------------------------------------------------------------------------
// Refresh.

struct pass {
    uint64_t now;
    bool recheck_all; // look again for direct allocator bindings in every known module...
    uintptr_t recheck_base; // ...or in the one loaded at this base (0: none)
};

static int visit(struct dl_phdr_info *info, size_t size, void *arg) {
    (void)size;
    const struct pass *pass = arg;
    uint64_t now = pass->now;
    const char *path = info->dlpi_name && info->dlpi_name[0] ? info->dlpi_name : exe_path;
    struct range r = load_range(info);
    if (r.hi == 0) return 0;
    for (int i = 0; i < nmods; i++) {
        struct tpprof_module *m = &mods[i];
        if (m->loaded && m->base == info->dlpi_addr && m->lo == r.lo && strcmp(m->path, path) == 0) {
            m->unloaded_ns = UINT64_MAX; // mark: seen in this pass
            if ((pass->recheck_all || (pass->recheck_base && m->base == pass->recheck_base)) && !m->bypass)
                m->bypass = bypasses(info, r);
            return 0;
        }
    }
    if (nmods == capmods) {
        int ncap = capmods ? capmods * 2 : 64;
        struct tpprof_module *n = tpprof_mem_grow(mods, (size_t)capmods * sizeof *mods, (size_t)ncap * sizeof *mods);
        if (!n) return 1;
        mods = n;
        capmods = ncap;
    }
    struct tpprof_module *m = &mods[nmods++];
    memset(m, 0, sizeof *m);
    snprintf(m->path, sizeof m->path, "%s", path);
    read_build_id(info, m->build_id, sizeof m->build_id);
    m->base = info->dlpi_addr;
    m->lo = r.lo;
    m->hi = r.hi;
    m->loaded_ns = now;
    m->unloaded_ns = UINT64_MAX;
    m->loaded = true;
    m->dirty = true;
    m->bypass = bypasses(info, r);
    return 0;
}

// New modules are looked at for direct allocator bindings as they come;
// known ones only at the end and the one about to be dlclose'd (lazy
// bindings resolve with use, and a program that loads hundreds of libraries
// should not have all of them read again at every load).
static void refresh(bool recheck_all, uintptr_t recheck_base) {
    struct pass pass = {tpprof_now_ns(), recheck_all, recheck_base};
    libc_fns_init();
    pthread_mutex_lock(&lock);
    if (!exe_path[0]) {
        ssize_t k = readlink("/proc/self/exe", exe_path, sizeof exe_path - 1);
        exe_path[k > 0 ? k : 0] = 0;
    }
    for (int i = 0; i < nmods; i++)
        if (mods[i].loaded) mods[i].unloaded_ns = 0;
    dl_iterate_phdr(visit, &pass);
    for (int i = 0; i < nmods; i++) {
        struct tpprof_module *m = &mods[i];
        if (!m->loaded) continue;
        if (m->unloaded_ns == UINT64_MAX) {
            m->unloaded_ns = 0; // present
        } else {
            m->loaded = false;  // gone since the last pass
            m->unloaded_ns = pass.now;
            m->dirty = true;
        }
    }
    pthread_mutex_unlock(&lock);
}

int tpprof_modules_take(struct tpprof_module **out, size_t *bytes) {
    pthread_mutex_lock(&lock);
    int n = nmods;
    *bytes = (size_t)(n ? n : 1) * sizeof **out;
    *out = tpprof_mem_map(*bytes);
    if (*out) {
        if (n) memcpy(*out, mods, (size_t)n * sizeof *mods);
        for (int i = 0; i < n; i++) mods[i].dirty = false, mods[i].written = true;
    } else {
        n = 0;
    }
    pthread_mutex_unlock(&lock);
    return n;
}

void tpprof_modules_refresh(void) { refresh(false, 0); }
void tpprof_modules_refresh_closing(uintptr_t base) { refresh(false, base); }

int tpprof_modules_bypassing(char *out, size_t cap) {
    refresh(true, 0); // looks at every loaded module again
    pthread_mutex_lock(&lock);
    size_t k = 0;
    int n = 0;
    if (cap < 3) {
        pthread_mutex_unlock(&lock);
        return 0;
    }
    out[k++] = '[';
    for (int i = 0; i < nmods; i++) {
        if (!mods[i].bypass) continue;
        bool dup = false; // a library loaded twice is named once
        for (int j = 0; j < i && !dup; j++) dup = mods[j].bypass && strcmp(mods[j].path, mods[i].path) == 0;
        if (dup) continue;
        size_t need = strlen(mods[i].path) * 2 + 4;
        if (k + need + 2 > cap) break;
        if (n++) out[k++] = ',';
        out[k++] = '"';
        for (const char *c = mods[i].path; *c; c++) {
            if (*c == '"' || *c == '\\') out[k++] = '\\';
            out[k++] = (unsigned char)*c < 0x20 ? '?' : *c;
        }
        out[k++] = '"';
    }
    out[k++] = ']';
    out[k] = 0;
    pthread_mutex_unlock(&lock);
    return n;
}

void tpprof_modules_mark_all_unwritten(void) {
    for (int i = 0; i < nmods; i++) mods[i].dirty = true, mods[i].written = false;
}

// ---------------------------------------------------------------------------
// libtpprof.so's own range, for dropping its frames from stacks.

static int find_self(struct dl_phdr_info *info, size_t size, void *arg) {
    (void)size;
    uintptr_t me = (uintptr_t)arg, loader = (uintptr_t)getauxval(AT_BASE);
    struct range r = load_range(info);
    if (me >= r.lo && me < r.hi) {
        tpprof_self_lo = r.lo;
        tpprof_self_hi = r.hi;
    }
    if (loader && info->dlpi_addr == loader) {
        tpprof_loader_lo = r.lo;
        tpprof_loader_hi = r.hi;
    }
    return 0;
}

void tpprof_self_range_init(void) {
    dl_iterate_phdr(find_self, (void *)(uintptr_t)&tpprof_self_range_init);
}
