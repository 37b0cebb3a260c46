// state.c: the recorder's global state, which every part reads: the
// configuration, whether hooks record, the re-entry guard, the
// clock, the output's name and the one failure line. process/lifecycle.c
// sets it up at the start; nothing here calls above base/.
#define _GNU_SOURCE
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "base/base.h"
#include "base/fdguard.h"

struct tpprof_config tpprof_cfg = {.depth = 32, .interval_ms = 10};
_Alignas(64) _Atomic int tpprof_active; // read by every hook: keep it off written lines
uint64_t tpprof_t0_ns;
char tpprof_output_path[4096];

__thread int tpprof_guard TPPROF_TLS;
char tpprof_malloc_owner[1024];
char tpprof_malloc_skipped[1024];
static _Atomic int disabled_once;

// ---------------------------------------------------------------------------
// The clock and the failure line.

static uint64_t mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t tpprof_now_ns(void) { return mono_ns() - tpprof_t0_ns; }

void tpprof_clock_start(void) { tpprof_t0_ns = mono_ns(); }

// Says so once on stderr and turns the hooks off; the program runs on.
void tpprof_disable(const char *what, const char *why) {
    atomic_store(&tpprof_active, 0);
    if (atomic_exchange(&disabled_once, 1)) return;
    char line[1024];
    int n = snprintf(line, sizeof line, "tpprof: cannot write %s: %s; recording disabled\n", what, why);
    if (n > (int)sizeof line - 1) n = (int)sizeof line - 1;
    int fd = tpprof_fd_stderr();
    if (n > 0 && fd >= 0 && write(fd, line, (size_t)n) < 0) { /* nothing more to do */ }
}
