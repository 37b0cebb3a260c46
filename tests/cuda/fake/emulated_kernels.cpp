// tests/cuda/fake/emulated_kernels.cpp - libtensorplay's device code
// (src/cuda/kernels.cu) compiled for the host, so the runtime double can
// run the kernels it is asked to launch.
//
// Elementwise launches run as ONE thread of ONE block (blockDim = gridDim
// = 1): the grid-stride loops then cover every element.  Reductions with
// few outputs (the long ones) run as one block of 32 real threads
// (std::thread, thread_local threadIdx, __syncthreads a std::barrier,
// __shared__ plain static storage), so their shared-memory tree combine is
// exercised too; with many outputs one thread (a barrier per output step
// would take minutes on a small machine).  That checks indexing,
// dtype conversion, arithmetic and the reduction's combine order, not the
// GPU's memory model or speed: only a GPU run checks those
// (tests/gpu/run.sh).
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

struct emu_dim3 { unsigned x = 0, y = 0, z = 0; };
static thread_local emu_dim3 threadIdx;
static emu_dim3 blockIdx, blockDim, gridDim;
static std::barrier<> *block_barrier; // set while a multi-threaded block runs

#define __global__
#define __device__
#define __shared__ static
static inline void __syncthreads() {
    if (block_barrier) block_barrier->arrive_and_wait();
}
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
    // One block of T threads; the kernel's block loop walks every output.
    const unsigned T = arg<long long>(a, 1) <= 16 ? 32 : 1;
    if (T == 1) {
        threadIdx = emu_dim3{};
        tp_k_reduce(arg<RGeom>(a, 0), arg<long long>(a, 1), arg<int>(a, 2), arg<char *>(a, 3),
                    arg<int>(a, 4), arg<const char *>(a, 5), arg<int>(a, 6));
        return;
    }
    blockDim = emu_dim3{T, 1, 1};
    std::barrier<> bar(T);
    block_barrier = &bar;
    std::vector<std::thread> threads;
    for (unsigned t = 0; t < T; t++)
        threads.emplace_back([a, t] {
            threadIdx = emu_dim3{t, 0, 0};
            tp_k_reduce(arg<RGeom>(a, 0), arg<long long>(a, 1), arg<int>(a, 2), arg<char *>(a, 3),
                        arg<int>(a, 4), arg<const char *>(a, 5), arg<int>(a, 6));
        });
    for (auto &th : threads) th.join();
    block_barrier = nullptr;
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
