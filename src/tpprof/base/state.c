// state.c: the recorder's global state, which every part reads: the
// configuration, whether hooks record, the re-entry guard, the
// clock, the output's name and the one failure line. process/lifecycle.c
// sets it up at the start; nothing here calls above base/.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/syscall.h>
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

// Under `tpprof run`, TPPROF_WARN_ONCE names a file for the whole run
// (lifecycle.c reads it at the start): the first process of the run that
// cannot write creates it and says so; the others stay quiet, since the
// run's summary names every recording that lacks something (a script of 21
// processes on a full disk printed 22 lines). Where the file cannot be
// made, each says so.
char tpprof_warn_once[256];

static bool first_of_run(void) {
    if (!tpprof_warn_once[0]) return true;
    int fd = (int)syscall(SYS_openat, AT_FDCWD, tpprof_warn_once, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
    if (fd >= 0) {
        syscall(SYS_close, fd);
        return true;
    }
    return errno != EEXIST;
}

// Says so once on stderr and turns the hooks off; the program runs on.
void tpprof_disable(const char *what, const char *why) {
    atomic_store(&tpprof_active, 0);
    if (atomic_exchange(&disabled_once, 1)) return;
    int saved_errno = errno;
    bool first = first_of_run();
    errno = saved_errno;
    if (!first) return;
    char line[1024];
    int n = snprintf(line, sizeof line, "tpprof: cannot write %s: %s; recording disabled\n", what, why);
    if (n > (int)sizeof line - 1) n = (int)sizeof line - 1;
    int fd = tpprof_fd_stderr();
    if (n > 0 && fd >= 0 && write(fd, line, (size_t)n) < 0) { /* nothing more to do */ }
}
