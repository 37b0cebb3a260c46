// writer.c: the writer thread: drains the per-thread rings through the
// merge (merge.c: exact per address, by stripe tickets; by epoch across
// threads: record/order.h), samples the timeline and drives the commits.
//
// Runs off the program's threads (all signals blocked, re-entry guard always
// set, so its own allocations, SQLite's included, are never recorded). Every
// millisecond it drains what the rings hold; every TPPROF_INTERVAL_MS it
// samples the timeline; every 200 ms (longer if commits are slow: at most a
// twentieth of its time goes to them) it commits one transaction (store/store.c). The
// same code runs synchronously, under the same mutex, at exit, _exit, exec
// and fork. It must never be called from inside a malloc hook.
#define _GNU_SOURCE
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <errno.h>
#include <stdio.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/base.h"
#include "base/fdguard.h"
#include "base/mem.h"
#include "base/modules.h"
#include "record/early.h"
#include "record/format.h"
#include "record/order.h"
#include "record/rings.h"
#include "store/store.h"
#include "writer/control.h"
#include "writer/device.h"
#include "writer/device_state.h"
#include "writer/merge.h"
#include "writer/sites.h"
#include "writer/writer.h"

#define FLUSH_EVERY_NS 200000000ull
// A commit rewrites every site that changed since the last one: with tens of
// thousands of busy sites that is a good part of a second of SQLite work, so
// the period grows to keep commits under 1/FLUSH_SHARE of the writer's time.
#define FLUSH_SHARE 20
// New sites that make a flush due whatever the period, and changed ones
// (new, or with a row that no longer holds their totals: tpprof_w.nchanged)
// that make it due sooner than the period (see the loop).
#define FLUSH_NEW_SITES 65536
#define FLUSH_CHANGED_SITES 65536
// A flush made due by changed sites starts at least FLUSH_CHANGED_SHARE
// times the last flush's own time after that one started (at most half the
// writer's time): a program whose hot sites number more than
// FLUSH_CHANGED_SITES would otherwise flush without a pause, rewriting the
// same rows. (With 4, the PyTorch loop's interpreter shutdown, 0.4 s after
// a 0.44 s flush, came before one was allowed: its 184,000 changed sites
// were all left to the exit's final flush.)
#define FLUSH_CHANGED_SHARE 2

struct tpprof_wstate tpprof_w;

static pthread_mutex_t wmu = PTHREAD_MUTEX_INITIALIZER;
// The signal mask of the program thread holding wmu, from before it took it
// (wmu_lock_other).
static __thread sigset_t wmu_saved_mask TPPROF_TLS;
static pthread_t writer_thread;
static bool writer_running;
static bool db_open;
static uint64_t next_sample_ns, next_flush_ns, next_changed_ns;
static uint32_t flushed_sites; // tpprof_w.nsites at the last periodic flush's end
// The period between flushes (tests: TPPROF_TEST_FLUSH_MS, so that only
// the site counts make one due).
static uint64_t flush_every_ns = FLUSH_EVERY_NS;

// Threads waiting for wmu (fork, exit, exec, the leak scan) are counted in
// tpprof_merge_waiters: the merge cuts its pass for them (merge.h).
// A program thread takes wmu with every signal blocked, until it lets it go:
// a handler of the program's (or the recorder's own, for a signal that ends
// the process) could otherwise run while the thread is inside the writer,
// and call _exit, whose write waits for the lock the thread itself holds.
// A forked child got the signal inside the fork's handler (its recording
// starting, wmu held): hung for ever (a test program whose SIGUSR1 handler
// calls _exit: 12 of 30 children). Python's multiprocessing pool, ending,
// sends SIGTERM to workers that may be in _exit's leak scan already: each
// such worker waited 2 s for the lock, then died with its recording cut.
// Now the signal comes when the lock is let go: the write is done first.
static void wmu_lock_other(void) {
    // (Not the faults: blocked, a fault inside the writer would kill the
    // process at once, without the recorder's own end of it.)
    sigset_t all;
    sigfillset(&all);
    static const int faults[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP};
    for (size_t i = 0; i < sizeof faults / sizeof *faults; i++) sigdelset(&all, faults[i]);
    pthread_sigmask(SIG_BLOCK, &all, &wmu_saved_mask);
    atomic_fetch_add(&tpprof_merge_waiters, 1);
    pthread_mutex_lock(&wmu);
    atomic_fetch_sub(&tpprof_merge_waiters, 1);
}

static void wmu_unlock_other(void) {
    pthread_mutex_unlock(&wmu);
    pthread_sigmask(SIG_SETMASK, &wmu_saved_mask, NULL);
}
static unsigned long long dl_adds, dl_subs;

static void ticks_calibrate(uint64_t now_ns);

// A batch of records is merged at time `now` (aggregate mode's record time),
// which is also the latest point ticks are converted against.
static void batch_begin(uint64_t now) {
    tpprof_w.batch_time_ns = now;
    ticks_calibrate(now);
}


// ---------------------------------------------------------------------------
// Ticks to ns: the line through the first (ticks, ns) point, taken when the
// writer starts, and the latest, taken with each batch's merge time.

static uint64_t tk0, tkns0;
static double ns_per_tick;

static void ticks_calibrate(uint64_t now_ns) {
    uint64_t tk = tpprof_ticks();
    if (!tk0) {
        tk0 = tk;
        tkns0 = now_ns;
    } else if (tk > tk0 && now_ns > tkns0 + 100000) { // 100 us apart at least
        ns_per_tick = (double)(now_ns - tkns0) / (double)(tk - tk0);
    }
}

uint64_t tpprof_writer_ticks_to_ns(uint64_t ticks, uint64_t batch_ns) {
    if (ns_per_tick <= 0 || ticks < tk0) return batch_ns;
    uint64_t ns = tkns0 + (uint64_t)((double)(ticks - tk0) * ns_per_tick);
    return ns < batch_ns ? ns : batch_ns;
}

// ---------------------------------------------------------------------------
// Timeline, modules.

// A /proc/self file the writer reads again and again (statm every sample;
// status after main's pthread_exit). It stays open (guarded, fdguard.c) and
// is read again at offset 0: opening it each time would hand a program's
// close loop a fresh low number of tpprof's a hundred times a second.
// /proc/self is the opener's: a forked child opens its own.
struct proc_file {
    const char *path;
    int fd;
    pid_t pid;
};

static struct proc_file statm = {"/proc/self/statm", -1, 0}, status = {"/proc/self/status", -1, 0};

// Its contents (NUL-terminated) into buf; bytes read, or <= 0.
static ssize_t proc_read(struct proc_file *f, char *buf, size_t cap) {
    if (f->fd < 0 || f->pid != getpid()) {
        if (f->fd >= 0) tpprof_fd_close(f->fd);
        f->fd = tpprof_fd_open(f->path);
        f->pid = getpid();
        if (f->fd < 0) return -1;
    }
    ssize_t n = pread(f->fd, buf, cap - 1, 0);
    if (n > 0) buf[n] = 0;
    return n;
}

static int64_t read_rss(void) {
    char buf[128];
    if (proc_read(&statm, buf, sizeof buf) <= 0) return 0;
    const char *p = buf;
    while (*p && *p != ' ') p++;
    int64_t pages = 0;
    while (*p == ' ') p++;
    while (*p >= '0' && *p <= '9') pages = pages * 10 + (*p++ - '0');
    return pages * sysconf(_SC_PAGESIZE);
}

static void sample(uint64_t now) {
    tpprof_device_timeline_tick();
    struct tpprof_wstate *w = &tpprof_w;
    if (w->nsamples == w->capsamples) {
        uint32_t ncap = w->capsamples ? w->capsamples * 2 : 1024;
        struct tpprof_sample *n = tpprof_mem_grow(w->samples, w->capsamples * sizeof *n, ncap * sizeof *n);
        if (!n) return;
        w->samples = n;
        w->capsamples = ncap;
    }
    if (w->nsamples && w->samples[w->nsamples - 1].time_ns >= now) now = w->samples[w->nsamples - 1].time_ns + 1;
    struct tpprof_sample *s = &w->samples[w->nsamples++];
    s->time_ns = now;
    s->heap_bytes = w->heap_bytes;
    s->heap_blocks = w->heap_blocks;
    s->mmap_bytes = w->mmap_bytes;
    s->alloc_calls = w->alloc_calls;
    s->free_calls = w->free_calls;
    s->rss_bytes = read_rss();
}

static int dl_counts(struct dl_phdr_info *info, size_t size, void *arg) {
    (void)arg;
    if (size < offsetof(struct dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs) return 1;
    if (info->dlpi_adds != dl_adds || info->dlpi_subs != dl_subs) {
        dl_adds = info->dlpi_adds;
        dl_subs = info->dlpi_subs;
        return 2;
    }
    return 1;
}

// dlopen is not interposed (a wrapper would change the caller glibc uses for
// $ORIGIN and RUNPATH): new objects are noticed here, every cycle, from the
// loader's add/sub counters; dlclose is interposed (lifecycle.c).
static void poll_modules(void) {
    if (dl_iterate_phdr(dl_counts, NULL) == 2) tpprof_modules_refresh();
}

// ---------------------------------------------------------------------------
// The thread.

_Atomic int tpprof_main_exited;

// After the main thread's pthread_exit, or in a child forked from another
// thread (whose main thread may end by returning from its thread function:
// no call to see): whether the writer is the only thread left
// (/proc/self/status counts it and the main thread, a zombie, its State,
// until the process ends).
static bool only_writer_left(void) {
    char buf[4096];
    if (proc_read(&status, buf, sizeof buf) <= 0) return false;
    const char *p = strstr(buf, "\nThreads:"), *st = strstr(buf, "\nState:");
    return p && strtol(p + 10, NULL, 10) <= 2 && st && strncmp(st + 7, "\tZ", 2) == 0;
}

// ---------------------------------------------------------------------------
// Sharing the writer's time evenly.
//
// Where the program keeps every core busy, the writer takes its time from
// the program thread it shares a core with, and CFS leaves it there: moving
// it would not even the load. On alloc_heavy's 2 threads on 2 cores one
// worker then ran 0.1-0.4 s longer than the other, and that tail ran on one
// core. So while the program's threads have kept the cores busy (their CPU
// time over the last 16 ms or more within half a core of all of them, twice
// in a row), the writer moves itself to the next of the cores the process
// may use every ROTATE_NS; once that stops, it may run anywhere again.
// (Tried instead: the program's threads draining the rings themselves. It
// evened the load too, but the live table then moved between cores with
// each drain, which cost as much as it saved, and a thread could drain for
// milliseconds inside a malloc made under a lock of its own.)
#define BUSY_WINDOW_NS 16000000ull
#define ROTATE_NS 32000000ull

struct rotation {
    cpu_set_t allowed; // the cores the writer may use (read while it is free)
    int ncpus, cpu;    // how many; the one the writer is on (-1: free)
    int streak;
    bool busy;
    uint64_t w0_ns, cpu0_ns, moved_ns;
};

static void rotation_free(struct rotation *r) {
    if (r->cpu >= 0) sched_setaffinity(0, sizeof r->allowed, &r->allowed);
    r->cpu = -1;
}

static void rotation_step(struct rotation *r, uint64_t now, unsigned iteration) {
    // The writer's own mask while it is free (the process's, inherited from
    // the constructor's thread): a sandbox's seccomp policy that lets a
    // thread set its own affinity may not let it read another's.
    if ((iteration & 255) == 0 && r->cpu < 0) {
        if (sched_getaffinity(0, sizeof r->allowed, &r->allowed) == 0) r->ncpus = CPU_COUNT(&r->allowed);
        else r->ncpus = 0;
    }
    if (r->ncpus < 2) {
        rotation_free(r);
        return;
    }
    // The program's threads' CPU time: the process's less the writer's (a
    // writer that has work for a core of its own does not make the cores
    // busy: it would then be moved onto the program's).
    struct timespec ts, mine;
    if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) != 0 || clock_gettime(CLOCK_THREAD_CPUTIME_ID, &mine) != 0) {
        rotation_free(r);
        return;
    }
    uint64_t cpu = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec,
             own = (uint64_t)mine.tv_sec * 1000000000u + (uint64_t)mine.tv_nsec;
    cpu = cpu > own ? cpu - own : 0;
    if (!r->w0_ns || now < r->w0_ns || cpu < r->cpu0_ns) {
        r->w0_ns = now;
        r->cpu0_ns = cpu;
    } else if (now - r->w0_ns >= BUSY_WINDOW_NS) {
        bool busy = 2 * (cpu - r->cpu0_ns) > (uint64_t)(2 * r->ncpus - 1) * (now - r->w0_ns);
        r->w0_ns = now;
        r->cpu0_ns = cpu;
        r->streak = busy == r->busy ? 0 : r->streak + 1;
        if (r->streak >= 2) {
            r->busy = busy;
            r->streak = 0;
        }
    }
    if (!r->busy) {
        rotation_free(r);
        return;
    }
    if (r->cpu >= 0 && now - r->moved_ns < ROTATE_NS) return;
    int next = r->cpu;
    for (int k = 0; k < CPU_SETSIZE; k++) {
        next = (next + 1) % CPU_SETSIZE;
        if (CPU_ISSET(next, &r->allowed)) break;
    }
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(next, &one);
    if (sched_setaffinity(0, sizeof one, &one) == 0) {
        r->cpu = next;
        r->moved_ns = now;
    }
}

static void *writer_main(void *arg) {
    (void)arg;
    tpprof_guard = 1;
    atomic_store(&tpprof_drainer_tid, (pid_t)syscall(SYS_gettid));
    long sleep_ns = 4000000;
    struct rotation rot = {.cpu = -1};
    for (unsigned iteration = 0; !atomic_load(&tpprof_drainer_stop); iteration++) {
        rotation_step(&rot, tpprof_now_ns(), iteration);
        pthread_mutex_lock(&wmu);
        if (!db_open) {
            pthread_mutex_unlock(&wmu);
            break;
        }
        uint64_t now = tpprof_now_ns();
        batch_begin(now);
        poll_modules();
        // Busy: every 4 ms. Idle: back off to 8 ms. A ring holds ~15 ms of the
        // busiest thread we measured. Where the program's threads keep every
        // core busy the writer takes its time from them, and each of its
        // turns costs them more than its work (their caches): draining every
        // millisecond, alloc_heavy on 2 threads on 2 cores ran 1.616x native
        // (median of 21 paired rounds), every 4 ms 1.560x; 1 thread 1.341x,
        // now 1.293x (11 rounds).
        sleep_ns = tpprof_merge_drain(false) ? 4000000 : (sleep_ns < 8000000 ? sleep_ns * 2 : 8000000);
        if (now >= next_sample_ns) {
            sample(now);
            next_sample_ns = now + (uint64_t)tpprof_cfg.interval_ms * 1000000u;
        }
        // Or early when device rows pile up (writer/device.c: their cost is
        // per row, so waiting saves nothing and holds them all in memory).
        // Or early when new sites pile up: each is one row however often
        // flushes come, so waiting saves nothing, and what is left at exit
        // the exiting program waits for (a PyTorch run makes 700,000 sites
        // in a few seconds; paced by time alone its final flush wrote
        // 520,000-640,000 sites in 1.0-1.3 s in some runs). What pacing
        // saves is rewrites of sites already written. Changed sites (new or
        // not) the same, paced less than by time: whatever changed since
        // its row was written the exiting program waits for too (a PyTorch
        // interpreter's shutdown frees at the sites of 150,000 rows).
        if (now >= next_flush_ns || tpprof_device_flush_due() || tpprof_w.nsites - flushed_sites >= FLUSH_NEW_SITES ||
            (tpprof_w.nchanged >= FLUSH_CHANGED_SITES && now >= next_changed_ns)) {
            // In steps, draining the rings between them (store.h). Paced by
            // the steps' own time, not the drains' between them (a busy
            // program's new stacks: counting them put seconds between
            // flushes).
            uint64_t t0 = tpprof_now_ns();
            int r = tpprof_store_flush_begin(false) ? 1 : -1;
            uint64_t took = tpprof_now_ns() - t0;
            while (r > 0) {
                t0 = tpprof_now_ns();
                r = tpprof_store_flush_step();
                took += tpprof_now_ns() - t0;
                if (r > 0) tpprof_merge_drain(false);
            }
            if (r < 0) db_open = false;
            flushed_sites = tpprof_w.nsites;
            next_flush_ns = now + (took * FLUSH_SHARE > flush_every_ns ? took * FLUSH_SHARE : flush_every_ns);
            next_changed_ns = now + took * FLUSH_CHANGED_SHARE;
        }
        pthread_mutex_unlock(&wmu);
        if (atomic_load(&tpprof_merge_waiters)) { // let them in before locking again
            while (atomic_load(&tpprof_merge_waiters) && !atomic_load(&tpprof_drainer_stop)) sched_yield();
            continue;
        }
        if (tpprof_merge_cut) continue; // still busy: no nap
        if (TPPROF_UNLIKELY(atomic_load(&tpprof_main_exited)) && only_writer_left()) {
            // What glibc would do as the last program thread ended: exit(0),
            // the program's atexit handlers (recorded) and then ours.
            tpprof_guard = 0;
            exit(0);
        }
        tpprof_drainer_nap(sleep_ns);
    }
    atomic_store(&tpprof_drainer_tid, 0); // (a later thread may get its tid)
    return NULL;
}

static bool spawn_writer(void) {
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    atomic_store(&tpprof_drainer_stop, 0);
    // 1 MiB of stack, not the default 8 (RLIMIT_STACK): the writer's deepest
    // path is SQLite's, tens of KiB, and every byte of address space it
    // reserves is one a program under `ulimit -v` does not get.
    pthread_attr_t attr;
    bool sized = pthread_attr_init(&attr) == 0;
    if (sized && pthread_attr_setstacksize(&attr, (size_t)1 << 20) != 0) {
        pthread_attr_destroy(&attr);
        sized = false;
    }
    int rc = pthread_create(&writer_thread, sized ? &attr : NULL, writer_main, NULL);
    if (sized) pthread_attr_destroy(&attr);
    clockid_t c;
    tpprof_drainer_clock = rc == 0 && pthread_getcpuclockid(writer_thread, &c) == 0 ? c : 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    writer_running = rc == 0;
    return writer_running;
}

int tpprof_writer_claim(const char *path) { return tpprof_store_claim(path); }

bool tpprof_writer_start(const char *path) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    tpprof_w.start_unix_ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    tpprof_w.peak_epoch = 1;
    tpprof_w.order = 1;
    const char *ms = getenv("TPPROF_TEST_FLUSH_MS");
    if (ms && atol(ms) > 0) { // the first periodic flush too
        flush_every_ns = (uint64_t)atol(ms) * 1000000u;
        next_flush_ns = tpprof_now_ns() + flush_every_ns;
    }
    tpprof_merge_expect_current();
    ticks_calibrate(tpprof_now_ns()); // the first point; the writer's batches add the latest
    if (!tpprof_store_open(path)) return false;
    db_open = true;
    dl_iterate_phdr(dl_counts, NULL);
    read_rss(); // statm opens now, before main: not under a program's dup2
    if (!spawn_writer()) {
        tpprof_disable(path, "cannot start the writer thread");
        tpprof_store_close(false);
        db_open = false;
        return false;
    }
    return true;
}

// ---------------------------------------------------------------------------
// Ends, fork, exec.

int tpprof_writer_threads(void) { return __atomic_load_n(&writer_running, __ATOMIC_RELAXED) ? 1 : 0; }

static void stop_writer(void) {
    if (!writer_running) return;
    atomic_store(&tpprof_drainer_stop, 1);
    tpprof_drainer_kick();
    if (!pthread_equal(pthread_self(), writer_thread)) pthread_join(writer_thread, NULL);
    writer_running = false;
}

// The leak scan reads the exiting thread's stack from a little below its
// caller's frame (lifecycle.c), which reaches into the dead frames of the
// drain just before it: the merge keeps block addresses there (the frame
// of a loop with its applying inlined), and a stale one would make a lost
// block look reachable. So the drain's frames are wiped first.
static __attribute__((noinline)) void wipe_stack(void) {
    volatile char frame[4096];
    memset((char *)frame, 0, sizeof frame);
    __asm__ volatile("" : : "r"(frame) : "memory");
}

void tpprof_writer_pause(void) { wmu_lock_other(); }

void tpprof_writer_resume(int taken) {
    struct proc_file *files[] = {&statm, &status};
    for (int i = 0; i < 2; i++)
        if (taken >= 0 && taken == files[i]->fd) { // now the program's: another number, opened on this thread
            files[i]->fd = -1;
            char buf[4096];
            proc_read(files[i], buf, sizeof buf);
        }
    wmu_unlock_other();
}

void tpprof_writer_leak_scan(uintptr_t sp) {
    wmu_lock_other();
    if (db_open) {
        batch_begin(tpprof_now_ns());
        poll_modules();
        tpprof_merge_drain(true);
        wipe_stack();
        tpprof_scan_run(&tpprof_w, sp);
        tpprof_w.scanned = true;
    }
    wmu_unlock_other();
}

void tpprof_writer_finish(enum tpprof_end how) {
    tpprof_obs_flush_held(tpprof_self); // this thread's held views (observe.c), before the last drain
    if (how != TPPROF_END_QUICK) stop_writer();
    wmu_lock_other();
    if (db_open) {
        struct tpprof_wstate *w = &tpprof_w;
        uint64_t now = tpprof_now_ns();
        batch_begin(now);
        poll_modules();
        tpprof_merge_drain(true);
        sample(now);
        w->end_reason = how == TPPROF_END_EXIT ? "exit" : how == TPPROF_END_EXEC ? "exec" : NULL;
        w->complete = how != TPPROF_END_QUICK;
        w->exec_pending = how == TPPROF_END_EXEC;
        tpprof_device_timeline_tick();
        tpprof_obs_fold_collect_all();
        bool ok = tpprof_store_flush(true);
        tpprof_store_close(ok);
        db_open = false;
    }
    atomic_store(&tpprof_active, 0); // exec: back on if it fails
    wmu_unlock_other();
}

// A signal is about to end the process (lifecycle.c on_fatal): everything is
// written, with the live set, scanned when `sp` is given (not after a fault:
// the less a crashing process does the better). Runs in the signal's
// handler. The writer mutex is waited for up to 2 s: a thread that took it
// may be the one that crashed. It is kept: the process is ending, and the
// writer must not touch the closed database.
void tpprof_writer_end_signal(int sig, uintptr_t sp) {
    if (writer_running && pthread_equal(pthread_self(), writer_thread)) return; // the writer itself crashed
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 2;
    atomic_fetch_add(&tpprof_merge_waiters, 1);
    int rc = pthread_mutex_timedlock(&wmu, &until);
    atomic_fetch_sub(&tpprof_merge_waiters, 1);
    if (rc != 0) return;
    if (db_open) {
        struct tpprof_wstate *w = &tpprof_w;
        uint64_t now = tpprof_now_ns();
        batch_begin(now);
        tpprof_obs_flush_held(tpprof_self);
        tpprof_merge_drain(true);
        if (sp && !w->scanned) { // (a signal blocked while _exit scanned: done already)
            wipe_stack();
            tpprof_scan_run(w, sp);
            w->scanned = true;
        }
        sample(now);
        w->end_reason = "signal";
        w->end_signal = sig;
        w->complete = true;
        tpprof_device_timeline_tick();
        tpprof_obs_fold_collect_all();
        bool ok = tpprof_store_flush(true);
        tpprof_store_close(ok);
        db_open = false;
    }
    atomic_store(&tpprof_active, 0);
}

// exec returned: the image goes on; reopen the database and keep recording.
void tpprof_writer_exec_failed(void) {
    wmu_lock_other();
    struct tpprof_wstate *w = &tpprof_w;
    if (w->exec_pending) {
        bool ok = tpprof_store_open(tpprof_output_path); // exec_pending: reopen, keep the file
        w->exec_pending = false;
        w->end_reason = NULL;
        w->complete = false;
        if (ok) {
            db_open = true;
            atomic_store(&tpprof_active, 1);
            if (!writer_running) spawn_writer();
        }
    }
    wmu_unlock_other();
}

void tpprof_writer_go(void) {
    wmu_lock_other();
    atomic_store(&tpprof_active, 1);
    tpprof_early_end(db_open ? tpprof_writer_adopt_early : NULL);
    wmu_unlock_other();
}

void tpprof_writer_fork_prepare(void) {
    wmu_lock_other();
    tpprof_modules_lock();
}

void tpprof_writer_fork_parent(void) {
    tpprof_modules_unlock();
    wmu_unlock_other();
}

// A forked child's recording is its own: what it allocates and frees. The
// blocks and mappings it inherited are the parent's (its recording has
// them): they stay in the live set as the blocks from before the start do
// (kind EARLY, apply.h adopt_early), so the leak scan reads them (the
// child's blocks may hang from them) and a free of one only takes it out,
// but no site counts them and none is written. The parent's history is not
// written again either: a PyTorch DataLoader's workers each wrote the
// parent's 700,000 sites and 3.7 million stack nodes into their own files
// (bench/torch_loader.py: 9.7 s under `tpprof run`, 1 s natively), and each
// said it made the parent's 1.1 million allocations. Only the stack paths
// of the child's own sites go in (store.c). Not with tensors or device
// memory recorded, or in full mode, whose tables keep the parent's state:
// false, the child's file then starts from all of it, as before.
static bool fork_own_history(struct tpprof_wstate *w) {
    if (w->fork_written) // (the parent was a forked child too: its map, this child's copy)
        tpprof_mem_unmap(w->fork_written, ((uint64_t)w->fork_nodes / 64 + 1) * sizeof *w->fork_written);
    w->fork_nodes = 0;
    w->fork_written = NULL;
    if (tpprof_cfg.full || atomic_load(&tpprof_obs_attached) || tpprof_dev.nsites) return false;
    struct tpprof_site *early = tpprof_site_lookup(0, TPPROF_KIND_EARLY);
    uint64_t words = (uint64_t)w->nnodes / 64 + 1;
    uint64_t *written = early && w->nnodes ? tpprof_mem_map(words * sizeof *written) : NULL;
    if (!early || (w->nnodes && !written)) return false;
    uint32_t e = (uint32_t)(early - w->sites);
    for (uint64_t i = 0; i < w->live.cap; i++)
        if (w->live.slots[i].addr) w->live.slots[i].site = e;
    for (uint64_t i = 0; i < w->nmaps; i++) w->maps[i].site = e;
    for (uint32_t i = 0; i < w->nsites; i++) {
        struct tpprof_site *s = &w->sites[i];
        tpprof_site_clean(s);
        s->stored = false;
        s->row_peak_live = false;
        s->snap_epoch = 0;
        s->live_count = s->snap_count = 0;
        s->live_bytes = s->snap_bytes = s->alloc_count = s->alloc_bytes = 0;
        s->temp_count = s->temp_bytes = 0; // (temp_count: splits, at a mapping's site)
    }
    w->heap_bytes = w->heap_blocks = w->mmap_bytes = 0;
    w->alloc_calls = w->free_calls = 0;
    for (struct tpprof_thread *t = atomic_load(&tpprof_threads); t; t = t->next) // (meta.*_walks: the child's)
        atomic_store(&t->cfi_walks, 0), atomic_store(&t->unw_walks, 0);
    atomic_store(&tpprof_unwind_slow, 0);
    w->peak_bytes = 0;
    w->peak_time_ns = w->batch_time_ns;
    w->peak_epoch++;
    w->fork_nodes = w->nnodes;
    w->fork_written = written;
    return true;
}

void tpprof_writer_fork_child(const char *path) {
    struct tpprof_wstate *w = &tpprof_w;
    tpprof_modules_unlock();
    tpprof_threads_fork_child();
    if (tpprof_self) tpprof_merge_note_thread(tpprof_self); // its tid is the child's now
    writer_running = false;
    if (db_open) {
        batch_begin(tpprof_now_ns());
        tpprof_merge_drain(true); // the parent's events up to the fork belong to the child too
        tpprof_merge_expect_current();
        tpprof_store_abandon();
        tpprof_fdguard_fork_child();
        // The forking thread is the child's main thread, running.
        atomic_store(&tpprof_main_exited, 0);
        db_open = false;
        bool own = fork_own_history(w);
        if (!own) // the child's database starts from the parent's state at the fork
            for (uint32_t i = 0; i < w->nsites; i++) {
                tpprof_site_dirty(&w->sites[i]);
                w->sites[i].stored = false;
            }
        w->nodes_written = 0;
        for (struct tpprof_thread *t = atomic_load(&tpprof_threads); t; t = t->next) t->w_dirty = t->w_seen;
        tpprof_modules_mark_all_unwritten();
        w->nsamples = 0;
        w->nevents = 0;
        tpprof_obs_fork_child();
        tpprof_device_fork_child();
        if (tpprof_store_open(path)) {
            if (own) w->nodes_written = w->fork_nodes; // (those made from now on go as they come; store.c)
            db_open = true;
            next_flush_ns = next_changed_ns = 0;
            flushed_sites = 0;
            read_rss(); // opens the child's own statm while it is alone
            spawn_writer();
        }
    }
    wmu_unlock_other();
}
