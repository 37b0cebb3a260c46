// base.h: what every part of libtpprof.so shares: visibility and branch
// macros, the configuration, whether hooks record, the clock, the output's
// name and the one failure line (base/state.c).
//
// libtpprof.so is an LD_PRELOAD recorder, in layers that call only down:
//   process/  start, signals, exit, exec, fork, dup2 (lifecycle.c, fdhooks.c)
//   writer/   the writer thread: merging the rings, the live table, sites,
//             the stack trie, the tensor ledger, the leak scan
//   store/    every SQL statement (the writer's state -> SQLite)
//   record/   the hot path: malloc/mmap hooks, observer callbacks, rings,
//             event order, the record format, stack capture; calls nothing
//             above it (it wakes the writer through its own flag)
//   base/     own memory, the module map, tpprof's file descriptors, the
//             global state here
// Nothing here depends on libtensorplay beyond its observer ABI header
// (record/observe.c, record/obsfold.c and .h, writer/ledger.c only). Nothing declared in these
// headers is exported from the shared object: only the interposed libc
// functions and tp_observer_provide are (tpprof.map).
#ifndef TPPROF_BASE_H
#define TPPROF_BASE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include <sys/types.h>

#define TPPROF_HIDDEN __attribute__((visibility("hidden")))
#define TPPROF_EXPORT __attribute__((visibility("default")))
#define TPPROF_LIKELY(x) __builtin_expect(!!(x), 1)
#define TPPROF_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define TPPROF_TLS __attribute__((tls_model("initial-exec")))
// Where user-space addresses end on x86-64 (Linux maps none above it unless
// asked to): no return address is at or above it, and a Python frame's
// pseudo address (record/pyframes.h) is, so the two cannot be mixed up.
#define TPPROF_USER_END ((uintptr_t)1 << 47)

// TPPROF_VERSION comes from meson (-D, src/tpprof/meson.build): the project's
// version, as the viewer's.
#ifndef TPPROF_VERSION
#error "TPPROF_VERSION is defined by the build (src/tpprof/meson.build)"
#endif
#ifndef TPPROF_SCHEMA_VERSION
#error "TPPROF_SCHEMA_VERSION is defined by the build (meson.build)"
#endif
#define TPPROF_MAX_DEPTH 128

// ---------------------------------------------------------------------------
// Configuration and global state (base/state.c; set up by process/lifecycle.c).

struct tpprof_config {
    int depth;          // TPPROF_DEPTH, frames per stack
    bool full;          // TPPROF_MODE=full
    bool unwind_fp;     // TPPROF_UNWIND=fp: frame pointers only
    bool unwind_unw;    // TPPROF_UNWIND=libunwind: libunwind only, no verified FP path, no CFI walk
    bool unwind_nocfi;  // TPPROF_UNWIND=fp+libunwind (or libunwind): no CFI walk (record/cfiwalk.c)
    int interval_ms;    // TPPROF_INTERVAL_MS, timeline period
    bool scan_stop;     // TPPROF_SCAN_STOP (default 1): signal running threads to stop for the exit scan (scan.c)
    bool lifetimes_all; // TPPROF_LIFETIMES=all: every storage's DataPtr lifetime timed (observe.c)
};

TPPROF_HIDDEN extern struct tpprof_config tpprof_cfg;
// Whether TPPROF_MODE asks for full mode, decided once (observe.c): tpprof_cfg.full.
TPPROF_HIDDEN bool tpprof_mode_full(void);
// 1 while hooks record; 0 before init, after the end, or when recording failed.
TPPROF_HIDDEN extern _Atomic int tpprof_active;
// CLOCK_MONOTONIC at the start of the recording.
TPPROF_HIDDEN extern uint64_t tpprof_t0_ns;
// Re-entry guard: set while a hook (or tpprof's own thread) is inside tpprof.
TPPROF_HIDDEN extern __thread int tpprof_guard TPPROF_TLS;
// The guard's value inside a hook's record (hooks.c): a heap call made
// there is a signal handler's, and is counted as unrecorded.
#define TPPROF_GUARD_HOOK 2
// The guard's value while a hook captures its stack, before it has written
// anything to its ring (hooks.c): a heap call made then (the loader growing
// the thread's TLS vector when the unwinder first touches its own TLS after
// a dlopen, or a signal handler) is recorded, without a stack.
#define TPPROF_GUARD_CAPTURE 3

TPPROF_HIDDEN uint64_t tpprof_now_ns(void);       // since tpprof_t0_ns

// A cheap clock for hooks: the CPU's time-stamp counter where there is one
// (constant-rate on the machines Linux uses it as its clock; a few ns to
// read), else CLOCK_MONOTONIC. The writer converts (tpprof_writer_ticks_to_ns).
static inline uint64_t tpprof_ticks(void) {
#if defined(__x86_64__) || defined(__i386__)
    return __builtin_ia32_rdtsc();
#elif defined(__aarch64__)
    uint64_t v;
    __asm__ __volatile__("mrs %0, cntvct_el0" : "=r"(v));
    return v;
#else
    return tpprof_now_ns();
#endif
}
TPPROF_HIDDEN void tpprof_disable(const char *what, const char *why);
// The file whose creation lets one process of a `tpprof run` say that it
// cannot write (TPPROF_WARN_ONCE; "" outside run): state.c.
TPPROF_HIDDEN extern char tpprof_warn_once[256];

// The recording's file (lifecycle.c names it).
TPPROF_HIDDEN extern char tpprof_output_path[4096];
// The object whose malloc the program calls when it is not this library's
// (lifecycle.c; "" when it is): meta.malloc_replaced_by.
TPPROF_HIDDEN extern char tpprof_malloc_owner[1024];
// The allocator preloaded after this library that the hooks pass over for
// glibc's (lifecycle.c), or "".
TPPROF_HIDDEN extern char tpprof_malloc_skipped[1024];
// Starts the clock (tpprof_t0_ns: now); once, in the constructor.
TPPROF_HIDDEN void tpprof_clock_start(void);

#endif
