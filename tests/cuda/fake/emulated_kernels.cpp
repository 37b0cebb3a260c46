// tests/cuda/fake/emulated_kernels.cpp - libtensorplay's device code
// (src/cuda/kernels.cu) compiled for the host, so the runtime double can
// run the kernels it is asked to launch.
//
// Each launch runs as ONE thread of ONE block (blockDim = gridDim = 1):
// the grid-stride loops then cover every element, shared memory is plain
// static storage and __syncthreads has nothing to wait for.  That checks
// the kernels' indexing, dtype conversion and arithmetic, not their
// parallel behaviour (races, block-level reductions with many threads):
// those only a GPU run checks (tests/gpu/run.sh).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <mutex>

struct emu_dim3 { unsigned x = 0, y = 0, z = 0; };
static emu_dim3 threadIdx, blockIdx, blockDim, gridDim;

#define __global__
#define __device__
#define __shared__ static
static inline void __syncthreads() {}
static inline float __uint_as_float(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }
static inline uint32_t __float_as_uint(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
using std::fabs; using std::exp; using std::log; using std::sqrt; using std::tanh; using std::pow;

#include "../../../src/cuda/kernels.cu"

// ---------------------------------------------------------------------------
// trampolines: cudaLaunchKernel's argument array -> the kernel's parameters

template <typename T> static T &arg(void **a, int i) { return *static_cast<T *>(a[i]); }

static void run_fill(void **a) {
    tp_k_fill(arg<Geom>(a, 0), arg<long long>(a, 1), arg<char *>(a, 2), arg<int>(a, 3), arg<double>(a, 4));
}
static void run_copy(void **a) {
    tp_k_copy(arg<Geom>(a, 0), arg<long long>(a, 1), arg<char *>(a, 2), arg<int>(a, 3),
              arg<const char *>(a, 4), arg<int>(a, 5));
}
static void run_binary(void **a) {
    tp_k_binary(arg<Geom>(a, 0), arg<long long>(a, 1), arg<int>(a, 2), arg<int>(a, 3), arg<char *>(a, 4),
                arg<int>(a, 5), arg<const char *>(a, 6), arg<int>(a, 7), arg<const char *>(a, 8),
                arg<int>(a, 9), arg<double>(a, 10), arg<long long>(a, 11));
}
static void run_binary_f32(void **a) {
    tp_k_binary_f32(arg<long long>(a, 0), arg<int>(a, 1), arg<float *>(a, 2), arg<const float *>(a, 3),
                    arg<const float *>(a, 4), arg<long long>(a, 5), arg<float>(a, 6));
}
static void run_unary(void **a) {
    tp_k_unary(arg<Geom>(a, 0), arg<long long>(a, 1), arg<int>(a, 2), arg<int>(a, 3), arg<char *>(a, 4),
               arg<int>(a, 5), arg<const char *>(a, 6), arg<int>(a, 7));
}
static void run_reduce(void **a) {
    long long nout = arg<long long>(a, 1);
    // one block per output: the kernel loops over blocks with gridDim = 1
    tp_k_reduce(arg<RGeom>(a, 0), nout, arg<int>(a, 2), arg<char *>(a, 3), arg<int>(a, 4),
                arg<const char *>(a, 5), arg<int>(a, 6));
}

static const struct { const char *name; void (*run)(void **); } table[] = {
    {"tp_k_fill", run_fill},         {"tp_k_copy", run_copy},   {"tp_k_binary", run_binary},
    {"tp_k_binary_f32", run_binary_f32}, {"tp_k_unary", run_unary}, {"tp_k_reduce", run_reduce},
};

static std::mutex launch_mu; // the emulation's "device" state is global

extern "C" void *tpfake_emulated_kernel(const char *name) {
    for (auto &k : table)
        if (std::strcmp(k.name, name) == 0) return (void *)&k;
    return nullptr;
}

extern "C" void tpfake_emulated_run(void *kernel, void **args) {
    std::lock_guard<std::mutex> lock(launch_mu);
    threadIdx = blockIdx = emu_dim3{};
    blockDim = gridDim = emu_dim3{1, 1, 1};
    static_cast<decltype(&table[0])>(kernel)->run(args);
}
