// modules.c: the module map (path, GNU build-id, load bias, PT_LOAD range).
//
// Taken at start and after every dlopen/dlclose, so the CLI can symbolize raw
// instruction pointers afterwards, including those of libraries that were
// dlclose'd before exit (their rows keep `unloaded_ns`). No symbolization
// happens in the process. Called with the re-entry guard held; no malloc.
#define _GNU_SOURCE
#include <elf.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tpprof_internal.h"

uintptr_t tpprof_self_lo, tpprof_self_hi;

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
// Refresh.

static int visit(struct dl_phdr_info *info, size_t size, void *arg) {
    (void)size;
    uint64_t now = *(const uint64_t *)arg;
    const char *path = info->dlpi_name && info->dlpi_name[0] ? info->dlpi_name : exe_path;
    struct range r = load_range(info);
    if (r.hi == 0) return 0;
    for (int i = 0; i < nmods; i++) {
        struct tpprof_module *m = &mods[i];
        if (m->loaded && m->base == info->dlpi_addr && m->lo == r.lo && strcmp(m->path, path) == 0) {
            m->unloaded_ns = UINT64_MAX; // mark: seen in this pass
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
    return 0;
}

void tpprof_modules_refresh(void) {
    uint64_t now = tpprof_now_ns();
    pthread_mutex_lock(&lock);
    if (!exe_path[0]) {
        ssize_t k = readlink("/proc/self/exe", exe_path, sizeof exe_path - 1);
        exe_path[k > 0 ? k : 0] = 0;
    }
    for (int i = 0; i < nmods; i++)
        if (mods[i].loaded) mods[i].unloaded_ns = 0;
    dl_iterate_phdr(visit, &now);
    for (int i = 0; i < nmods; i++) {
        struct tpprof_module *m = &mods[i];
        if (!m->loaded) continue;
        if (m->unloaded_ns == UINT64_MAX) {
            m->unloaded_ns = 0; // present
        } else {
            m->loaded = false;  // gone since the last pass
            m->unloaded_ns = now;
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

void tpprof_modules_mark_all_unwritten(void) {
    for (int i = 0; i < nmods; i++) mods[i].dirty = true, mods[i].written = false;
}

// ---------------------------------------------------------------------------
// libtpprof.so's own range, for dropping its frames from stacks.

static int find_self(struct dl_phdr_info *info, size_t size, void *arg) {
    (void)size;
    uintptr_t me = (uintptr_t)arg;
    struct range r = load_range(info);
    if (me >= r.lo && me < r.hi) {
        tpprof_self_lo = r.lo;
        tpprof_self_hi = r.hi;
        return 1;
    }
    return 0;
}

void tpprof_self_range_init(void) {
    dl_iterate_phdr(find_self, (void *)(uintptr_t)&tpprof_self_range_init);
}
