/*
 * src/ops/parallel.c - the kernel thread pool.
 *
 * One job at a time: the caller publishes a range job, wakes the workers
 * with a condition variable broadcast, takes chunks itself, and sleeps on a
 * second condition variable until the last chunk is done.  Idle workers
 * sleep on pthread_cond_wait; nothing here spins.
 *
 * What this file must not do: run BLAS work on pool threads.  matmul calls
 * OpenBLAS from the caller's thread while the pool sleeps, so the two sets
 * of threads never run kernels at the same time.  (OpenBLAS's threads still
 * busy-wait for a short while after each call, its THREAD_TIMEOUT, which we
 * cannot change from here: a big elementwise op right after a big matmul
 * measured ~20% slower on 2 cores.)  tp_set_num_threads sizes both.
 * A job submitted while another thread holds the pool, or from inside a
 * worker, runs inline on its caller.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>
#include "ops_internal.h"

// ----------------------------------------------------------------------------
// state

#define MAX_WORKERS 255

static struct {
    pthread_mutex_t submit;   /* held by the one thread running a job */
    pthread_mutex_t lock;     /* guards everything below */
    pthread_cond_t wake;      /* workers wait here for a new generation */
    pthread_cond_t done;      /* the submitter waits here */
    uint64_t generation;
    int nworkers;             /* started so far */
    /* the current job */
    tp__range_fn fn;
    void *ctx;
    int64_t n, chunk;
    _Atomic int64_t next_chunk;
    int64_t nchunks;
    int64_t finished;         /* chunks completed (under lock) */
    int active;               /* workers that read this job and are not back */
} pool = {
    .submit = PTHREAD_MUTEX_INITIALIZER,
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .wake = PTHREAD_COND_INITIALIZER,
    .done = PTHREAD_COND_INITIALIZER,
};

static _Atomic int num_threads; /* 0 = not set yet: online CPUs */
static _Thread_local bool in_worker;

// ----------------------------------------------------------------------------
// public knobs

int tp_get_num_threads(void) {
    int n = atomic_load_explicit(&num_threads, memory_order_relaxed);
    if (n > 0) return n;
    /* sysconf reads /sys (microseconds): ask once, then remember the answer
     * unless tp_set_num_threads got there first. */
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    n = cpus < 1 ? 1 : cpus > MAX_WORKERS + 1 ? MAX_WORKERS + 1 : (int)cpus;
    int expected = 0;
    if (!atomic_compare_exchange_strong(&num_threads, &expected, n)) return expected;
    return n;
}

tp_status tp_set_num_threads(int n) {
    if (n < 1 || n > MAX_WORKERS + 1)
        return tp__error(TP_STATUS_INVALID_ARGUMENT,
                         "set_num_threads expects a number of threads in [1, %d], but got %d",
                         MAX_WORKERS + 1, n);
    atomic_store(&num_threads, n);
    /* Keep OpenBLAS (which runs on the caller's thread) to the same count. */
    tp__blas_set_num_threads(n);
    return TP_STATUS_OK;
}

// ----------------------------------------------------------------------------
// workers

/* Takes chunks of the current job until none are left; returns how many it
 * ran.  Called with pool.lock NOT held. */
static int64_t run_chunks(tp__range_fn fn, void *ctx, int64_t n, int64_t chunk, int64_t nchunks) {
    int64_t ran = 0;
    for (;;) {
        int64_t c = atomic_fetch_add(&pool.next_chunk, 1);
        if (c >= nchunks) break;
        int64_t begin = c * chunk;
        int64_t end = begin + chunk < n ? begin + chunk : n;
        fn(begin, end, ctx);
        ran++;
    }
    return ran;
}

static void *worker_main(void *arg) {
    (void)arg;
    in_worker = true;
    pthread_mutex_lock(&pool.lock);
    uint64_t seen = pool.generation;
    for (;;) {
        while (pool.generation == seen) pthread_cond_wait(&pool.wake, &pool.lock);
        seen = pool.generation;
        tp__range_fn fn = pool.fn;
        void *ctx = pool.ctx;
        int64_t n = pool.n, chunk = pool.chunk, nchunks = pool.nchunks;
        /* The submitter waits for active == 0, so the job (and its chunk
         * counter) cannot be replaced while this worker still uses it. */
        pool.active++;
        pthread_mutex_unlock(&pool.lock);
        int64_t ran = run_chunks(fn, ctx, n, chunk, nchunks);
        pthread_mutex_lock(&pool.lock);
        pool.finished += ran;
        pool.active--;
        if (pool.finished == pool.nchunks && pool.active == 0) pthread_cond_signal(&pool.done);
    }
    return NULL;
}

/* Starts workers up to `want` (under pool.lock).  A failure to start one is
 * not an error: the job still completes with fewer threads. */
static void ensure_workers(int want) {
    if (want > MAX_WORKERS) want = MAX_WORKERS;
    while (pool.nworkers < want) {
        pthread_t th;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        int rc = pthread_create(&th, &attr, worker_main, NULL);
        pthread_attr_destroy(&attr);
        if (rc != 0) break;
        pool.nworkers++;
    }
}

// ----------------------------------------------------------------------------
// submitting

void tp__parallel_for(int64_t n, int64_t grain, tp__range_fn fn, void *ctx) {
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    int threads = tp_get_num_threads();
    int64_t nchunks = (n + grain - 1) / grain;
    if (nchunks > threads) nchunks = threads;
    if (nchunks <= 1 || in_worker || pthread_mutex_trylock(&pool.submit) != 0) {
        fn(0, n, ctx);
        return;
    }
    int64_t chunk = (n + nchunks - 1) / nchunks;
    nchunks = (n + chunk - 1) / chunk;

    pthread_mutex_lock(&pool.lock);
    /* A worker that woke late for the previous job may still be looking at
     * its chunk counter: let it leave before the counter is reset. */
    while (pool.active > 0) pthread_cond_wait(&pool.done, &pool.lock);
    ensure_workers((int)nchunks - 1);
    pool.fn = fn;
    pool.ctx = ctx;
    pool.n = n;
    pool.chunk = chunk;
    pool.nchunks = nchunks;
    pool.finished = 0;
    atomic_store(&pool.next_chunk, 0);
    pool.generation++;
    pthread_cond_broadcast(&pool.wake);
    pthread_mutex_unlock(&pool.lock);

    int64_t ran = run_chunks(fn, ctx, n, chunk, nchunks);

    pthread_mutex_lock(&pool.lock);
    pool.finished += ran;
    while (pool.finished < pool.nchunks || pool.active > 0) pthread_cond_wait(&pool.done, &pool.lock);
    pthread_mutex_unlock(&pool.lock);
    pthread_mutex_unlock(&pool.submit);
}
