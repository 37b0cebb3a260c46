// procaddr.c: handing out tpprof's CUDA hooks in place of the real entry
// points, wherever a program looks them up. Runs in the program's threads
// at lookup time (dlsym, cuGetProcAddress), not per allocation.
//
// The static CUDA runtime (nvcc's default) and NVIDIA's libraries reach the
// driver by dlsym(libcuda, "cuGetProcAddress_v2") and then one
// cuGetProcAddress per entry point (by base name, version and
// per-thread-stream flag); PyTorch's VMM calls come from
// cudaGetDriverEntryPointByVersion; libtensorplay dlsym's libcudart opened
// RTLD_LOCAL. So libtpprof.so defines dlsym and dlvsym, and wraps what the
// driver's and the runtime's own lookups return: for an entry point it hooks
// (cuda_hooks.h) it hands out the hook, keeping the real function in the
// hook's slot.
//
// dlsym must stay the C library's for every other name, including
// RTLD_NEXT, which resolves relative to the CALLER's object: another
// preload's dlsym(RTLD_NEXT, "puts") must not find libtpprof.so's caller.
// So dlsym and dlvsym are assembly stubs that ask a C function first and,
// for anything not ours, jump (not call) to the C library's, with the
// caller's return address still on the stack. The C library's functions
// are found in its own dynamic symbol table (the default version), since
// dlsym itself is ours. RTLD_NEXT lookups are always passed through
// unwrapped: another preload asking for the next cuMemAlloc_v2 wants the
// real one. (x86-64 only: elsewhere dlsym is not interposed, and the static
// runtime's calls are not seen; the dynamic runtime's and the driver's
// exported functions still are.)
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <string.h>

#include "base/modules.h"
#include "record/cuda_hooks.h"
#include "record/device.h"

_Atomic(void *) tpprof_cudart_handle;

// ---------------------------------------------------------------------------
// The C library's dlsym and dlvsym.

typedef void *(*dlsym_fn)(void *, const char *);
typedef void *(*dlvsym_fn)(void *, const char *, const char *);
// Read by the stubs below (hidden: a PC-relative load).
TPPROF_HIDDEN _Atomic(dlsym_fn) tpprof_libc_dlsym;
TPPROF_HIDDEN _Atomic(dlvsym_fn) tpprof_libc_dlvsym;
// What the stubs' C side returns for "not ours: go to the C library's".
TPPROF_HIDDEN char tpprof_dl_forward;

static uint32_t gnu_hash(const char *s) {
    uint32_t h = 5381;
    for (; *s; s++) h = h * 33 + (unsigned char)*s;
    return h;
}

struct libc_syms {
    const char *names[2];
    void *found[2];
};

// Looks the names up in libc.so.6's GNU hash table: the default (not
// hidden) version of each.
static int find_in_libc(struct dl_phdr_info *info, size_t size, void *arg) {
    (void)size;
    struct libc_syms *ls = arg;
    const char *base = info->dlpi_name ? strrchr(info->dlpi_name, '/') : NULL;
    base = base ? base + 1 : info->dlpi_name;
    if (!base || strncmp(base, "libc.so", 7) != 0) return 0;
    const ElfW(Dyn) *dyn = NULL;
    for (int i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_DYNAMIC) dyn = (const void *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
    if (!dyn) return 0;
    uintptr_t symtab = 0, strtab = 0, gnuhash = 0, versym = 0;
    for (; dyn->d_tag != DT_NULL; dyn++) {
        uintptr_t v = dyn->d_un.d_ptr;
        switch (dyn->d_tag) {
        case DT_SYMTAB: symtab = v; break;
        case DT_STRTAB: strtab = v; break;
        case DT_GNU_HASH: gnuhash = v; break;
        case DT_VERSYM: versym = v; break;
        default: break;
        }
    }
    // The loader relocates these in place where the section is writable;
    // elsewhere they are still offsets from the base.
    uintptr_t b = info->dlpi_addr;
    if (symtab && symtab < b) symtab += b;
    if (strtab && strtab < b) strtab += b;
    if (gnuhash && gnuhash < b) gnuhash += b;
    if (versym && versym < b) versym += b;
    if (!symtab || !strtab || !gnuhash) return 1;
    const uint32_t *gh = (const uint32_t *)gnuhash;
    uint32_t nbuckets = gh[0], symoffset = gh[1], bloom_size = gh[2];
    const uint32_t *buckets = (const uint32_t *)((const ElfW(Addr) *)(gh + 4) + bloom_size);
    const uint32_t *chain = buckets + nbuckets;
    const ElfW(Sym) *syms = (const ElfW(Sym) *)symtab;
    const uint16_t *vs = (const uint16_t *)versym;
    for (int k = 0; k < 2; k++) {
        uint32_t h = gnu_hash(ls->names[k]);
        uint32_t idx = nbuckets ? buckets[h % nbuckets] : 0;
        if (idx < symoffset) continue;
        for (;; idx++) {
            uint32_t ch = chain[idx - symoffset];
            const ElfW(Sym) *s = &syms[idx];
            if ((ch | 1) == (h | 1) && s->st_shndx != SHN_UNDEF && s->st_value &&
                strcmp((const char *)strtab + s->st_name, ls->names[k]) == 0 && !(vs && (vs[idx] & 0x8000)))
                ls->found[k] = (void *)(b + s->st_value);
            if (ls->found[k] || (ch & 1)) break;
        }
    }
    return 1;
}

static void libc_init(void) {
    if (atomic_load_explicit(&tpprof_libc_dlsym, memory_order_acquire)) return;
    struct libc_syms ls = {{"dlvsym", "dlsym"}, {NULL, NULL}};
    dl_iterate_phdr(find_in_libc, &ls);
    atomic_store(&tpprof_libc_dlvsym, (dlvsym_fn)ls.found[0]);
    atomic_store(&tpprof_libc_dlsym, (dlsym_fn)ls.found[1]);
}

void *tpprof_real_dlsym(void *handle, const char *name) {
    libc_init();
    dlsym_fn f = atomic_load_explicit(&tpprof_libc_dlsym, memory_order_acquire);
    return f ? f(handle, name) : NULL;
}

int tpprof_in_self(const void *p) {
    if (!tpprof_self_lo) tpprof_self_range_init();
    return (uintptr_t)p >= tpprof_self_lo && (uintptr_t)p < tpprof_self_hi;
}

// ---------------------------------------------------------------------------
// Hooks and their slots.

const struct tpprof_cuhook *tpprof_cuhook_find(const char *name) {
    if (!name || name[0] != 'c' || name[1] != 'u') return NULL;
    const struct tpprof_cuhook *t = name[2] == 'd' ? tpprof_cuda_runtime_hooks : tpprof_cuda_driver_hooks;
    for (; t->name; t++)
        if (strcmp(t->name, name) == 0) return t;
    return NULL;
}

void *tpprof_cuhook_wrap(const struct tpprof_cuhook *h, void *real) {
    if (!h || !real || tpprof_in_self(real)) return real;
    void *expected = NULL;
    if (!atomic_compare_exchange_strong(h->real, &expected, real) && expected != real) return real;
    atomic_fetch_add_explicit(&tpprof_device_wrapped, 1, memory_order_relaxed);
    return h->wrapper;
}

void *tpprof_cuhook_real(const struct tpprof_cuhook *h) {
    void *r = atomic_load_explicit(h->real, memory_order_acquire);
    if (TPPROF_LIKELY(r != NULL)) return r;
    // A direct call: the next definition after libtpprof.so.
    r = tpprof_real_dlsym(RTLD_NEXT, h->name);
    if (!r || tpprof_in_self(r)) return NULL;
    void *expected = NULL;
    if (!atomic_compare_exchange_strong(h->real, &expected, r)) return expected;
    return r;
}

// ---------------------------------------------------------------------------
// Driver entry points by base name and version (cuGetProcAddress's naming).

struct entry_rule {
    const char *base;
    int min_version;
    const char *legacy, *ptsz; // ptsz NULL: one form
};

static const struct entry_rule rules[] = {
    {"cuMemAlloc", 3020, "cuMemAlloc_v2", NULL},
    {"cuMemFree", 3020, "cuMemFree_v2", NULL},
    {"cuMemAllocPitch", 3020, "cuMemAllocPitch_v2", NULL},
    {"cuMemAllocHost", 3020, "cuMemAllocHost_v2", NULL},
    {"cuMemHostAlloc", 0, "cuMemHostAlloc", NULL},
    {"cuMemFreeHost", 0, "cuMemFreeHost", NULL},
    {"cuMemAllocManaged", 0, "cuMemAllocManaged", NULL},
    {"cuMemAllocAsync", 0, "cuMemAllocAsync", "cuMemAllocAsync_ptsz"},
    {"cuMemFreeAsync", 0, "cuMemFreeAsync", "cuMemFreeAsync_ptsz"},
    {"cuMemAllocFromPoolAsync", 0, "cuMemAllocFromPoolAsync", "cuMemAllocFromPoolAsync_ptsz"},
    {"cuMemPoolCreate", 0, "cuMemPoolCreate", NULL},
    {"cuMemPoolDestroy", 0, "cuMemPoolDestroy", NULL},
    {"cuMemPoolTrimTo", 0, "cuMemPoolTrimTo", NULL},
    {"cuMemAddressReserve", 0, "cuMemAddressReserve", NULL},
    {"cuMemAddressFree", 0, "cuMemAddressFree", NULL},
    {"cuMemCreate", 0, "cuMemCreate", NULL},
    {"cuMemRelease", 0, "cuMemRelease", NULL},
    {"cuMemMap", 0, "cuMemMap", NULL},
    {"cuMemUnmap", 0, "cuMemUnmap", NULL},
    {"cuCtxDestroy", 4000, "cuCtxDestroy_v2", NULL},
    {"cuDevicePrimaryCtxReset", 11000, "cuDevicePrimaryCtxReset_v2", NULL},
    {"cuGetProcAddress", 12000, "cuGetProcAddress_v2", NULL},
    {"cuGetProcAddress", 11030, "cuGetProcAddress", NULL},
};

#define PER_THREAD_STREAM 2 // CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, cudaEnablePerThreadDefaultStream

void tpprof_cu_wrap_entry(const char *symbol, void **pfn, int version, uint64_t flags) {
    if (!symbol || !pfn || !*pfn || symbol[0] != 'c') return;
    for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++) {
        const struct entry_rule *r = &rules[i];
        if (strcmp(r->base, symbol) != 0 || version < r->min_version) continue;
        const char *want = r->ptsz && (flags & PER_THREAD_STREAM) ? r->ptsz : r->legacy;
        const struct tpprof_cuhook *h = tpprof_cuhook_find(want);
        void *w = tpprof_cuhook_wrap(h, *pfn);
        if (w == *pfn && r->ptsz) // the other form's function (the driver's default stream mode)
            w = tpprof_cuhook_wrap(tpprof_cuhook_find(want == r->ptsz ? r->legacy : r->ptsz), *pfn);
        *pfn = w;
        return;
    }
    // A hook's own name asked for (some callers pass the versioned name).
    const struct tpprof_cuhook *h = tpprof_cuhook_find(symbol);
    if (h) *pfn = tpprof_cuhook_wrap(h, *pfn);
}

// ---------------------------------------------------------------------------
// cuGetProcAddress, both forms (the driver's; wrapped when looked up).

typedef int (*gpa_v2_fn)(const char *, void **, int, uint64_t, int *);
typedef int (*gpa_v1_fn)(const char *, void **, int, uint64_t);

#define CUDA_ERROR_NOT_INITIALIZED 3

static void note_interposed(void) {
    if (!atomic_load_explicit(&tpprof_device_capture, memory_order_relaxed))
        atomic_store_explicit(&tpprof_device_capture, "interpose", memory_order_relaxed);
}

TPPROF_EXPORT int cuGetProcAddress_v2(const char *symbol, void **pfn, int version, uint64_t flags, int *status) {
    static const struct tpprof_cuhook *self;
    if (!self) self = tpprof_cuhook_find("cuGetProcAddress_v2");
    gpa_v2_fn real = (gpa_v2_fn)tpprof_cuhook_real(self);
    if (!real) return CUDA_ERROR_NOT_INITIALIZED;
    note_interposed();
    int r = real(symbol, pfn, version, flags, status);
    if (r == 0 && pfn) tpprof_cu_wrap_entry(symbol, pfn, version, flags);
    return r;
}

TPPROF_EXPORT int cuGetProcAddress(const char *symbol, void **pfn, int version, uint64_t flags) {
    static const struct tpprof_cuhook *self;
    if (!self) self = tpprof_cuhook_find("cuGetProcAddress");
    gpa_v1_fn real = (gpa_v1_fn)tpprof_cuhook_real(self);
    if (!real) return CUDA_ERROR_NOT_INITIALIZED;
    note_interposed();
    int r = real(symbol, pfn, version, flags);
    if (r == 0 && pfn) tpprof_cu_wrap_entry(symbol, pfn, version, flags);
    return r;
}

// ---------------------------------------------------------------------------
// dlsym and dlvsym.

// The C side of the stubs: the result, or &tpprof_dl_forward for "not ours".
TPPROF_HIDDEN void *tpprof_dlsym_pre(void *handle, const char *name, const char *version);

void *tpprof_dlsym_pre(void *handle, const char *name, const char *version) {
    libc_init();
    if (!atomic_load_explicit(&tpprof_libc_dlsym, memory_order_acquire) ||
        !atomic_load_explicit(&tpprof_libc_dlvsym, memory_order_acquire))
        return NULL; // never: glibc has both (and the stubs must not jump to NULL)
    if (handle == RTLD_NEXT || !name || name[0] != 'c' || name[1] != 'u') return &tpprof_dl_forward;
    const struct tpprof_cuhook *h = tpprof_cuhook_find(name);
    if (!h) return &tpprof_dl_forward;
    void *real = version ? atomic_load(&tpprof_libc_dlvsym)(handle, name, version)
                         : atomic_load(&tpprof_libc_dlsym)(handle, name);
    if (!real) return NULL;
    if (tpprof_in_self(real)) {
        // RTLD_DEFAULT found libtpprof.so's own definition: it stands for the
        // real one only if there is one (else the program's probe for CUDA
        // would find tpprof's hook and think CUDA is there).
        void *next = atomic_load(&tpprof_libc_dlsym)(RTLD_NEXT, name);
        if (!next) return NULL;
        tpprof_cuhook_wrap(h, next);
        return real;
    }
    if (handle != RTLD_DEFAULT && name[2] == 'd') {
        void *none = NULL;
        atomic_compare_exchange_strong(&tpprof_cudart_handle, &none, handle);
    }
    note_interposed();
    return tpprof_cuhook_wrap(h, real);
}

#if defined(__x86_64__)
// Both stubs: save the arguments, ask tpprof_dlsym_pre, and either return
// its answer or restore the arguments and jump to the C library's function,
// the caller's return address still on the stack (RTLD_NEXT's "caller").
__asm__(".text\n"
        ".globl dlsym\n"
        ".type dlsym, @function\n"
        "dlsym:\n"
        ".cfi_startproc\n"
        "    push %rdi\n"
        ".cfi_adjust_cfa_offset 8\n"
        "    push %rsi\n"
        ".cfi_adjust_cfa_offset 8\n"
        "    sub $8, %rsp\n"
        ".cfi_adjust_cfa_offset 8\n"
        "    xor %edx, %edx\n"
        "    call tpprof_dlsym_pre\n"
        "    add $8, %rsp\n"
        ".cfi_adjust_cfa_offset -8\n"
        "    pop %rsi\n"
        ".cfi_adjust_cfa_offset -8\n"
        "    pop %rdi\n"
        ".cfi_adjust_cfa_offset -8\n"
        "    lea tpprof_dl_forward(%rip), %rcx\n"
        "    cmp %rcx, %rax\n"
        "    jne 1f\n"
        "    jmp *tpprof_libc_dlsym(%rip)\n"
        "1:  ret\n"
        ".cfi_endproc\n"
        ".size dlsym, .-dlsym\n"
        ".globl dlvsym\n"
        ".type dlvsym, @function\n"
        "dlvsym:\n"
        ".cfi_startproc\n"
        "    push %rdi\n"
        ".cfi_adjust_cfa_offset 8\n"
        "    push %rsi\n"
        ".cfi_adjust_cfa_offset 8\n"
        "    push %rdx\n"
        ".cfi_adjust_cfa_offset 8\n"
        "    call tpprof_dlsym_pre\n"
        "    pop %rdx\n"
        ".cfi_adjust_cfa_offset -8\n"
        "    pop %rsi\n"
        ".cfi_adjust_cfa_offset -8\n"
        "    pop %rdi\n"
        ".cfi_adjust_cfa_offset -8\n"
        "    lea tpprof_dl_forward(%rip), %rcx\n"
        "    cmp %rcx, %rax\n"
        "    jne 2f\n"
        "    jmp *tpprof_libc_dlvsym(%rip)\n"
        "2:  ret\n"
        ".cfi_endproc\n"
        ".size dlvsym, .-dlvsym\n");
#endif
