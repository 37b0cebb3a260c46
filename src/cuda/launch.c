/*
 * src/cuda/launch.c - loads the kernels embedded in the library (the fatbin
 * nvcc built from kernels.cu, see embed.py) and launches them by name.
 *
 * cudaLibraryLoadData gives a context-independent library, loaded once per
 * process; kernel handles are looked up on first use and kept in a small
 * table.  Launches go to the current device and the thread's current stream.
 */
#include <pthread.h>
#include <string.h>

#include "cuda_internal.h"

extern const unsigned char tp__cuda_fatbin[];

static pthread_once_t lib_once = PTHREAD_ONCE_INIT;
static cudaLibrary_t lib;
static cudaError_t lib_err = cudaSuccess;

static void load_library(void) {
    lib_err = tp__cuda()->cudaLibraryLoadData(&lib, tp__cuda_fatbin, NULL, NULL, 0, NULL, NULL, 0);
}

#define MAX_KERNELS 32
static pthread_mutex_t kernels_mu = PTHREAD_MUTEX_INITIALIZER;
static struct { const char *name; cudaKernel_t k; } kernels[MAX_KERNELS];
static int nkernels;

static tp_status kernel(const char *name, cudaKernel_t *out) {
    const tp__cuda_api *c = tp__cuda();
    if (!c) return TP_STATUS_UNSUPPORTED;
    pthread_once(&lib_once, load_library);
    if (lib_err != cudaSuccess)
        return tp__cuda_error(lib_err, "loading libtensorplay's kernels (cudaLibraryLoadData)");
    tp_status st = TP_STATUS_OK;
    pthread_mutex_lock(&kernels_mu);
    int i = 0;
    while (i < nkernels && strcmp(kernels[i].name, name) != 0) i++;
    if (i == nkernels) {
        cudaKernel_t k;
        cudaError_t err = c->cudaLibraryGetKernel(&k, lib, name);
        if (err != cudaSuccess) st = tp__cuda_error(err, "cudaLibraryGetKernel(%s)", name);
        else if (nkernels == MAX_KERNELS) st = tp__error(TP_STATUS_INTERNAL, "kernel table full");
        else kernels[nkernels++] = (__typeof__(kernels[0])){name, k};
    }
    if (st == TP_STATUS_OK) *out = kernels[i].k;
    pthread_mutex_unlock(&kernels_mu);
    return st;
}

tp_status tp__cuda_launch_grid(const char *name, unsigned grid, unsigned block, void **args) {
    cudaKernel_t k = NULL;
    tp_status st = kernel(name, &k);
    if (st != TP_STATUS_OK) return st;
    int index = tp__cuda_current_index();
    dim3 g = {grid, 1, 1}, b = {block, 1, 1};
    cudaError_t err = tp__cuda()->cudaLaunchKernel((const void *)k, g, b, args, 0,
                                                   tp__cuda_current_stream(index));
    if (err != cudaSuccess) return tp__cuda_error(err, "launching %s on cuda:%d", name, index);
    return TP_STATUS_OK;
}

tp_status tp__cuda_launch(const char *name, int64_t n, void **args) {
    if (n <= 0) return TP_STATUS_OK;
    int64_t blocks = (n + 255) / 256;
    if (blocks > 65536) blocks = 65536; /* kernels loop over the rest */
    return tp__cuda_launch_grid(name, (unsigned)blocks, 256, args);
}
