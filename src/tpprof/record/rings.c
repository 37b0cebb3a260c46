// rings.c: one single-producer ring per program thread, drained by the writer.
//
// Hot path: tpprof_ring_reserve/put run inside malloc hooks. They take no lock;
// the only shared writes are the release-store of `tail` (producer) and of
// `head` (writer). A thread's ring is created on its first event (one mutex,
// once per thread) and lives until the thread is gone from the kernel and
// its ring is drained (the writer then hands it, ring and all, to the next
// new thread: tpprof_thread_recycle),
// not just until its key destructor ran: the thread may record again from
// late TLS destructors.
// This file must not call malloc.
#define _GNU_SOURCE
#include <pthread.h>
#include <fcntl.h>
#include <stdio.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include <linux/futex.h>

#include "base/base.h"
#include "base/mem.h"
#include "record/rings.h"
#include "record/stacks.h"

// 256 KiB per thread: address space counts where a limit is set
// (RLIMIT_AS), and 200 threads took 400 MiB at 2 MiB each (a program's own
// pthread_create then failed under `prlimit --as=1200M`). The writer is
// woken at each quarter, so a ring rarely fills: alloc_heavy (1 and 2
// threads, 3 interleaved rounds), bigset (a million allocations in a row)
// and many_threads (1,000 threads) ran as fast as with 2 MiB, none dropped.
#define RING_WORDS ((uint64_t)1 << 15)

_Atomic(struct tpprof_thread *) tpprof_threads;
bool tpprof_prefetchw;

void tpprof_cpu_init(void) {
#if defined(__x86_64__)
    unsigned a, b, c, d;
    tpprof_prefetchw = __get_cpuid(0x80000001, &a, &b, &c, &d) && (c & (1u << 8)); // PRFCHW
#endif
}
__thread struct tpprof_thread *tpprof_self TPPROF_TLS;

static _Atomic int next_index; // threads' dense numbers (records name threads by it)
static _Atomic int next_slot;  // structs made (thread_struct's places): fewer, as structs are reused
static pthread_key_t exit_key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;

// ---------------------------------------------------------------------------
// The drainer's nap (the writer's, but nothing here knows it): the futex
// word is tpprof_drainer_stop, so a stop that comes before the nap starts
// makes FUTEX_WAIT return at once. An exiting program does not wait out the
// drainer's idle back-off (a short-lived process would spend up to 4 ms of
// its life on it; a shell script runs hundreds).

_Atomic int tpprof_drainer_stop;
_Atomic int tpprof_drainer_napping;
clockid_t tpprof_drainer_clock;
_Atomic pid_t tpprof_drainer_tid;

void tpprof_drainer_nap(long ns) {
    struct timespec ts = {0, ns};
    atomic_store(&tpprof_drainer_napping, 1);
    syscall(SYS_futex, &tpprof_drainer_stop, FUTEX_WAIT_PRIVATE, 0, &ts, NULL, 0);
    atomic_store(&tpprof_drainer_napping, 0);
}

// Any thread, any time: a system call and nothing else.
void tpprof_drainer_kick(void) {
    int saved_errno = errno;
    atomic_store_explicit(&tpprof_drainer_napping, 0, memory_order_relaxed); // one wake a nap
    syscall(SYS_futex, &tpprof_drainer_stop, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
    errno = saved_errno;
}

// ---------------------------------------------------------------------------
// Thread registration.

// Runs in the exiting thread (a pthread key destructor): keeps its name,
// which /proc no longer has once it is gone.
static void on_thread_exit(void *arg) {
    struct tpprof_thread *t = arg;
    tpprof_obs_flush_held(t);
    prctl(PR_GET_NAME, t->name, 0, 0, 0);
    atomic_store_explicit(&t->exited, 1, memory_order_release);
}

static void make_key(void) { pthread_key_create(&exit_key, on_thread_exit); }

// Thread structs come from chunks of 1024, mapped as needed (one mapping
// each was a page of memory and a mapping per thread ever created: a
// program that runs a thread per request reached the kernel's limit of
// mappings). A struct is never unmapped (tpprof_threads lists it for
// good); once its thread is gone the writer hands it back for the next new
// thread (tpprof_thread_recycle).
#define CHUNK_THREADS 1024
#define MAX_CHUNKS 4096
static _Atomic(struct tpprof_thread *) chunks[MAX_CHUNKS];

static struct tpprof_thread *thread_struct(int slot) {
    uint32_t c = (uint32_t)slot / CHUNK_THREADS;
    if (c >= MAX_CHUNKS) return tpprof_mem_map(sizeof(struct tpprof_thread)); // past 4 M threads
    struct tpprof_thread *chunk = atomic_load(&chunks[c]);
    if (!chunk) {
        struct tpprof_thread *fresh = tpprof_mem_map(CHUNK_THREADS * sizeof *fresh);
        if (!fresh) return NULL;
        if (atomic_compare_exchange_strong(&chunks[c], &chunk, fresh)) chunk = fresh;
        else tpprof_mem_unmap(fresh, CHUNK_THREADS * sizeof *fresh); // another thread mapped it
    }
    return &chunk[(uint32_t)slot % CHUNK_THREADS];
}

// Structs of threads that are gone, drained and written (the writer hands
// them back: tpprof_thread_recycle), each with its ring still mapped: the
// next new thread takes one, ring and all. A program that runs a thread
// per task then holds as many structs and rings as it ever had threads at
// once, not one per thread it ever ran (200,000 threads churned kept
// 111 MB). The list is short-lived work for two sides, so a mutex.
static pthread_mutex_t free_mu = PTHREAD_MUTEX_INITIALIZER;
static struct tpprof_thread *free_structs; // linked through free_next

void tpprof_thread_recycle(struct tpprof_thread *t) {
    tpprof_mem_unmap(t->cache_mem, t->cache_bytes);
    tpprof_unwind_release(t);
    t->cache_mem = NULL;
    pthread_mutex_lock(&free_mu);
    t->free_next = free_structs;
    free_structs = t;
    pthread_mutex_unlock(&free_mu);
}

// A recycled struct, reset as a new one would be (its ring mapped, its
// place in tpprof_threads kept, still marked exited until it is set up),
// or NULL.
static struct tpprof_thread *recycled(void) {
    pthread_mutex_lock(&free_mu);
    struct tpprof_thread *t = free_structs;
    if (t) free_structs = t->free_next;
    pthread_mutex_unlock(&free_mu);
    if (!t) return NULL;
    uint64_t *ring = t->ring;
    struct tpprof_thread *next = t->next;
    uint64_t cfi = atomic_load(&t->cfi_walks), unw = atomic_load(&t->unw_walks);
    memset((char *)t, 0, sizeof *t);
    t->ring = ring;
    t->next = next;
    atomic_store(&t->cfi_walks, cfi);
    atomic_store(&t->unw_walks, unw);
    atomic_store(&t->exited, 1);
    return t;
}

// Recycled structs given to new threads, for the writer to take up again
// (tpprof_threads_reborn): they are already in tpprof_threads, where only
// new structs are looked for.
static _Atomic(struct tpprof_thread *) reborn;

struct tpprof_thread *tpprof_threads_reborn(void) { return atomic_exchange(&reborn, NULL); }

_Atomic uint64_t tpprof_unrecorded_events, tpprof_unrecorded_threads, tpprof_rings_mapped;

// A thread that could get no ring (no address space left: RLIMIT_AS, or
// more threads than TPPROF_TEST_MAX_RINGS) is counted once, and asks again
// every RING_RETRY events (a mapping that fails costs a system call).
#define RING_RETRY 256
static __thread uint32_t ring_refused TPPROF_TLS; // refusals so far, this thread
static _Atomic int rings_given;
static int max_rings = -1; // TPPROF_TEST_MAX_RINGS, read at the first ring

static struct tpprof_thread *thread_new(void);

struct tpprof_thread *tpprof_thread_get(void) {
    struct tpprof_thread *t = tpprof_self;
    if (TPPROF_LIKELY(t != NULL)) return t;
    if (ring_refused && ring_refused++ % RING_RETRY) return NULL;
    // What the C library allocates for it (pthread_getattr_np reads the
    // maps file through stdio) is tpprof's, not a signal handler's call
    // that a hook missed (hooks.c): the plain guard.
    int saved = tpprof_guard;
    tpprof_guard = 1;
    t = thread_new();
    tpprof_guard = saved;
    return t;
}

static struct tpprof_thread *thread_new(void) {
    struct tpprof_thread *t;
    // The program's errno is not ours to change (pthread_getattr_np reads
    // /proc/self/maps for the main thread; a failed call may set it).
    int saved_errno = errno;
    if (max_rings < 0) {
        const char *cap = getenv("TPPROF_TEST_MAX_RINGS");
        max_rings = cap && atoi(cap) > 0 ? atoi(cap) : 0;
    }
    int index = -1;
    t = recycled();
    bool again = t != NULL;
    if (again) {
        index = atomic_fetch_add(&next_index, 1);
    } else if (!max_rings || atomic_fetch_add(&rings_given, 1) < max_rings) {
        index = atomic_fetch_add(&next_index, 1);
        t = thread_struct(atomic_fetch_add(&next_slot, 1));
        if (t) t->ring = tpprof_mem_map(RING_WORDS * sizeof(uint64_t));
        if (t && t->ring) atomic_fetch_add(&tpprof_rings_mapped, 1);
    }
    if (!t || !t->ring) { // (the slot stays unused)
        if (!ring_refused++) atomic_fetch_add(&tpprof_unrecorded_threads, 1);
        errno = saved_errno;
        return NULL;
    }
    t->mask = RING_WORDS - 1;
    t->tid = (pid_t)syscall(SYS_gettid);
    t->index = index;
    tpprof_unwind_thread_bounds(&t->stack_lo, &t->stack_hi);
    t->tp = (uintptr_t)pthread_self();
    pthread_once(&key_once, make_key);
    pthread_setspecific(exit_key, t);
    if (again) { // already listed: live again (the scan reads it from now), and the writer told
        atomic_store_explicit(&t->exited, 0, memory_order_release);
        struct tpprof_thread *old = atomic_load(&reborn);
        do {
            t->reborn_next = old;
        } while (!atomic_compare_exchange_weak(&reborn, &old, t));
    } else {
        struct tpprof_thread *old = atomic_load(&tpprof_threads);
        do {
            t->next = old;
        } while (!atomic_compare_exchange_weak(&tpprof_threads, &old, t));
    }
    tpprof_self = t;
    tpprof_unwind_thread_warm();
    errno = saved_errno;
    return t;
}

void tpprof_walk_counts(uint64_t *cfi, uint64_t *unw) {
    *cfi = 0;
    *unw = atomic_load_explicit(&tpprof_unwind_slow, memory_order_relaxed);
    for (struct tpprof_thread *t = atomic_load(&tpprof_threads); t; t = t->next) {
        *cfi += atomic_load_explicit(&t->cfi_walks, memory_order_relaxed);
        *unw += atomic_load_explicit(&t->unw_walks, memory_order_relaxed);
    }
}

// In a forked child only the forking thread exists: the others' rings are
// drained by the writer and never written again.
void tpprof_threads_fork_child(void) {
    for (struct tpprof_thread *t = atomic_load(&tpprof_threads); t; t = t->next)
        if (t != tpprof_self) atomic_store(&t->exited, 1);
    if (tpprof_self) tpprof_self->tid = (pid_t)syscall(SYS_gettid);
}

// ---------------------------------------------------------------------------
// Producer side.

_Atomic uint64_t tpprof_dropped;

// A full ring (tpprof_ring_reserve's slow path) waits for the writer. It gives up after ~100 ms and drops the
// event (counted in meta.dropped_events): the writer may itself be waiting
// for a lock this thread holds (the loader's, if malloc was called inside
// dlopen), and a lost event is better than a hung program.
static bool ring_wait(struct tpprof_thread *t, uint64_t words);

bool tpprof_ring_wait(struct tpprof_thread *t, uint64_t words) {
    int saved_errno = errno; // sched_yield and the clock leave it alone, but it is the program's
    bool ok = ring_wait(t, words);
    errno = saved_errno;
    return ok;
}

// Whether the writer, which has not run, is waiting to run or on the disk
// (state R or D in /proc: starved on a loaded machine, or its write held up
// by the kernel's dirty-page throttling) rather than asleep (S: on a lock,
// perhaps one this thread holds). Raw system calls: this runs in the
// program's malloc.
static bool writer_held_up(void) {
    pid_t tid = tpprof_drainer_tid;
    if (tid <= 0) return false;
    char path[48];
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", (int)tid); // (no allocation)
    int fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    char text[512];
    ssize_t got = syscall(SYS_read, fd, text, sizeof text - 1);
    syscall(SYS_close, fd);
    if (got <= 0) return false;
    text[got] = 0;
    const char *paren = strrchr(text, ')'); // the state follows the name, which may hold ')'
    return paren && paren[1] == ' ' && (paren[2] == 'R' || paren[2] == 'D');
}

// The writer's CPU time, or 0 if it cannot be read.
static uint64_t writer_cpu_ns(void) {
    clockid_t c = tpprof_drainer_clock;
    struct timespec ts;
    if (!c || clock_gettime(c, &ts) != 0) return 0;
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

// Gives up after 100 ms in which the writer did not run for 1 ms and was
// asleep: it is then blocked (on a lock this thread may hold). A writer that
// is running (growing a big live table, committing a big flush), or waits
// for a core or the disk, is waited for, up to 10 s: a program making a
// million allocations in a row dropped events while the writer rehashed its
// table, and one event in a test's 200,000 was dropped on a machine loaded
// with two test suites, its writer runnable but not run.
static bool ring_wait(struct tpprof_thread *t, uint64_t words) {
    if (atomic_load_explicit(&tpprof_drainer_napping, memory_order_relaxed)) tpprof_drainer_kick();
    uint64_t cap = t->mask + 1;
    uint64_t tail = atomic_load_explicit(&t->tail, memory_order_relaxed);
    uint64_t start = 0, first = 0, cpu = 0;
    for (unsigned spins = 0;; spins++) {
        t->p_head = atomic_load_explicit(&t->head, memory_order_acquire);
        if (tail + 2 * words - t->p_head <= cap) return true;
        if (!atomic_load_explicit(&tpprof_active, memory_order_relaxed)) return false;
        if ((spins & 255) == 255) {
            uint64_t now = tpprof_now_ns();
            if (!start) {
                start = first = now;
                cpu = writer_cpu_ns();
            } else if (now - start > 100000000u) {
                uint64_t c = writer_cpu_ns();
                if (((c && c - cpu > 1000000u) || writer_held_up()) && now - first < 10000000000ull) { // wait on
                    start = now;
                    cpu = c;
                } else {
                    atomic_fetch_add(&tpprof_dropped, 1);
                    return false;
                }
            }
        }
        // A few yields, then naps of 20 us: a writer busy with new stacks
        // (a PyTorch run's 600,000) kept the program's thread spinning in
        // sched_yield for a tenth of the process's CPU time, and on a loaded
        // machine the spinning took the core the writer needed. (The system
        // call itself: the C library's nanosleep is a cancellation point,
        // and this runs inside the program's malloc.)
        if (spins < 16) sched_yield();
        else syscall(SYS_nanosleep, &(struct timespec){0, 20000}, NULL);
    }
}
