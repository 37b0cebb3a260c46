/*
 * src/ops/blas.c - OpenBLAS, loaded the first time a matmul needs it.
 *
 * Linking OpenBLAS (its pthread build, Debian's default) starts its thread
 * pool when the library loads, and the pool's threads spin waiting for work
 * for a while: a program that only linked libtensorplay burnt 0.12 s of CPU
 * on another core at start-up (measured with a program that does nothing),
 * taking it from the program's own threads on a small machine, and from a
 * profiler's writer thread. So libtensorplay does not link it: it is opened
 * with dlopen (RTLD_LOCAL: its symbols do not join the program's) on the
 * first float matmul, by its soname or from the path the build found it at.
 * Only cblas.h's types are used from the build-time dependency.
 */
#include <cblas.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include "ops_internal.h"

#ifndef TP_OPENBLAS_PATH
#define TP_OPENBLAS_PATH ""
#endif

__typeof__(&cblas_sgemm) tp__cblas_sgemm;
__typeof__(&cblas_dgemm) tp__cblas_dgemm;

typedef void (*set_threads_fn)(int);
static set_threads_fn set_threads;
static pthread_mutex_t set_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static _Atomic bool loaded;
static char load_error[512];

static void load(void) {
    /* The soname first: it follows the system's choice of OpenBLAS build
     * (Debian's alternatives); then where the build found it. */
    const char *names[] = {"libopenblas.so.0", TP_OPENBLAS_PATH, "libopenblas.so"};
    void *h = NULL;
    const char *why = "not found";
    for (size_t i = 0; i < sizeof names / sizeof names[0] && !h; i++) {
        if (!names[i][0]) continue;
        h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (!h) why = dlerror();
    }
    if (!h) {
        snprintf(load_error, sizeof load_error, "%s", why ? why : "dlopen failed");
        return;
    }
    __typeof__(&cblas_sgemm) s = (__typeof__(&cblas_sgemm))dlsym(h, "cblas_sgemm");
    __typeof__(&cblas_dgemm) d = (__typeof__(&cblas_dgemm))dlsym(h, "cblas_dgemm");
    if (!s || !d) {
        snprintf(load_error, sizeof load_error, "the library has no cblas_sgemm/cblas_dgemm");
        return;
    }
    tp__cblas_sgemm = s;
    tp__cblas_dgemm = d;
    /* Same thread count as the pool (tp_set_num_threads keeps them equal). */
    pthread_mutex_lock(&set_lock);
    set_threads = (set_threads_fn)dlsym(h, "openblas_set_num_threads");
    if (set_threads) set_threads(tp_get_num_threads());
    atomic_store(&loaded, true);
    pthread_mutex_unlock(&set_lock);
}

tp_status tp__blas_load(void) {
    pthread_once(&once, load);
    if (atomic_load(&loaded)) return TP_STATUS_OK;
    return tp__error(TP_STATUS_UNSUPPORTED, "matmul: OpenBLAS (libopenblas.so.0) could not be loaded: %s",
                     load_error);
}

void tp__blas_set_num_threads(int n) {
    pthread_mutex_lock(&set_lock);
    if (set_threads) set_threads(n);
    pthread_mutex_unlock(&set_lock);
}
