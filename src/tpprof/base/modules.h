// modules.h: the module map (base/modules.c).
#ifndef TPPROF_BASE_MODULES_H
#define TPPROF_BASE_MODULES_H

#include "base/base.h"

// Modules (modules.c): snapshots of the loaded ELF objects.

struct tpprof_module {
    char path[256];
    char build_id[64];          // hex, "" if none
    uintptr_t base, lo, hi;
    uint64_t loaded_ns, unloaded_ns; // unloaded_ns 0 while loaded
    bool loaded;
    bool written, dirty;
    bool bypass;                // calls the C library's allocator directly (modules.c)
};

// Re-reads the module list (after start, dlopen, dlclose); thread-safe.
TPPROF_HIDDEN void tpprof_modules_refresh(void);
// Also looks again, in the module loaded at `base` (about to be dlclose'd:
// its lazy bindings have resolved by now), for direct allocator bindings.
TPPROF_HIDDEN void tpprof_modules_refresh_closing(uintptr_t base);
// Copies the modules into a fresh array (caller frees with tpprof_mem_unmap);
// returns the count.
TPPROF_HIDDEN int tpprof_modules_take(struct tpprof_module **out, size_t *bytes);
TPPROF_HIDDEN void tpprof_modules_mark_all_unwritten(void);
// Looks again, in every loaded module, for allocation calls bound straight
// to the C library (lazy bindings resolve with use), then writes the paths
// of every module ever seen doing so as a JSON array into out; returns how
// many (0: none, out is "[]").
TPPROF_HIDDEN int tpprof_modules_bypassing(char *out, size_t cap);
TPPROF_HIDDEN void tpprof_modules_lock(void);
TPPROF_HIDDEN void tpprof_modules_unlock(void);
// Address range of libtpprof.so itself, and of the dynamic loader (ld.so),
// both set by tpprof_self_range_init (the loader's stays 0 for a program
// started without one).
TPPROF_HIDDEN extern uintptr_t tpprof_self_lo, tpprof_self_hi;
TPPROF_HIDDEN extern uintptr_t tpprof_loader_lo, tpprof_loader_hi;
TPPROF_HIDDEN void tpprof_self_range_init(void);

#endif
