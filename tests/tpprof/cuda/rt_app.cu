// rt_app.cu: a CUDA runtime program for tpprof's device-capture tests,
// built by nvcc three ways (tests/tpprof/cuda/meson.build): with the static
// runtime (nvcc's default), with -cudart shared, and with -cudart shared
// --default-stream per-thread (the _ptsz entry points). Each step is a
// function of its own (the stack a test expects); every status is printed,
// so a run under tpprof must print the same as one without.
#include <cstdio>
#include <cstdlib>
#include <cuda.h>
#include <cuda_runtime_api.h>

#define STEP __attribute__((noinline)) static
static void *weights;

STEP void weights_alloc() { std::printf("weights_alloc: %d\n", (int)cudaMalloc(&weights, 1 << 20)); }
STEP void weights_free() { std::printf("weights_free: %d\n", (int)cudaFree(weights)); }
STEP void leak_buffer() {
    void *p = nullptr;
    std::printf("leak_buffer: %d\n", (int)cudaMalloc(&p, 3 << 20));
}
STEP void two_streams() {
    cudaStream_t s1 = nullptr, s2 = nullptr;
    std::printf("streams: %d %d\n", (int)cudaStreamCreate(&s1), (int)cudaStreamCreate(&s2));
    void *a = nullptr, *b = nullptr;
    std::printf("async a: %d\n", (int)cudaMallocAsync(&a, 64 << 10, s1));
    std::printf("async b: %d\n", (int)cudaMallocAsync(&b, 128 << 10, s2));
    std::printf("free a: %d\n", (int)cudaFreeAsync(a, s1));
    std::printf("free b: %d\n", (int)cudaFreeAsync(b, s2));
}
STEP void shapes() {
    void *m = nullptr, *p = nullptr;
    size_t pitch = 0;
    cudaPitchedPtr pp = {};
    std::printf("managed: %d\n", (int)cudaMallocManaged(&m, 256 << 10, cudaMemAttachGlobal));
    std::printf("pitch: %d\n", (int)cudaMallocPitch(&p, &pitch, 1000, 10));
    std::printf("3d: %d\n", (int)cudaMalloc3D(&pp, make_cudaExtent(100, 10, 4)));
    std::printf("frees: %d %d %d\n", (int)cudaFree(m), (int)cudaFree(p), (int)cudaFree(pp.ptr));
}
STEP void pinned() {
    void *a = nullptr, *b = nullptr;
    std::printf("pinned: %d %d\n", (int)cudaMallocHost(&a, 8 << 10), (int)cudaHostAlloc(&b, 16 << 10, 0));
    std::printf("free pinned: %d %d\n", (int)cudaFreeHost(a), (int)cudaFreeHost(b));
}
STEP void pool() {
    cudaMemPoolProps props = {};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = 0;
    cudaMemPool_t pl = nullptr;
    void *p = nullptr;
    std::printf("pool create: %d\n", (int)cudaMemPoolCreate(&pl, &props));
    std::printf("pool alloc: %d\n", (int)cudaMallocFromPoolAsync(&p, 32 << 10, pl, nullptr));
    std::printf("pool free: %d\n", (int)cudaFreeAsync(p, nullptr));
    std::printf("pool trim: %d\n", (int)cudaMemPoolTrimTo(pl, 0));
    std::printf("pool destroy: %d\n", (int)cudaMemPoolDestroy(pl));
}
STEP void oom() {
    void *p = nullptr;
    std::printf("oom: %d\n", (int)cudaMalloc(&p, (size_t)4 << 30));
}
STEP void bad_frees() {
    void *p = nullptr;
    std::printf("small: %d\n", (int)cudaMalloc(&p, 4096));
    std::printf("free once: %d\n", (int)cudaFree(p));
    std::printf("free twice: %d\n", (int)cudaFree(p));
    std::printf("free unknown: %d\n", (int)cudaFree((void *)0xdead0000ull));
}
// PyTorch's way to the VMM calls: the driver's entry points from the
// runtime (cudaGetDriverEntryPointByVersion), a 2 MiB handle mapped into a
// reservation and taken down again.
STEP void vmm_via_runtime() {
    void *fn[6] = {};
    const char *names[6] = {"cuMemAddressReserve", "cuMemCreate", "cuMemMap", "cuMemUnmap", "cuMemRelease",
                            "cuMemAddressFree"};
    cudaDriverEntryPointQueryResult q;
    for (int i = 0; i < 6; i++)
        if (cudaGetDriverEntryPointByVersion(names[i], &fn[i], 12000, cudaEnableDefault, &q) != cudaSuccess ||
            q != cudaDriverEntryPointSuccess)
            fn[i] = nullptr;
    for (int i = 0; i < 6; i++)
        if (!fn[i]) {
            std::printf("vmm: no %s\n", names[i]);
            return;
        }
    CUmemAllocationProp prop = {};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    size_t size = 2 << 20;
    CUdeviceptr va = 0;
    CUmemGenericAllocationHandle h = 0;
    std::printf("reserve: %d\n", (int)((decltype(&cuMemAddressReserve))fn[0])(&va, size, 0, 0, 0));
    std::printf("create: %d\n", (int)((decltype(&cuMemCreate))fn[1])(&h, size, &prop, 0));
    std::printf("map: %d\n", (int)((decltype(&cuMemMap))fn[2])(va, size, 0, h, 0));
    std::printf("unmap: %d\n", (int)((decltype(&cuMemUnmap))fn[3])(va, size));
    std::printf("release: %d\n", (int)((decltype(&cuMemRelease))fn[4])(h));
    std::printf("address free: %d\n", (int)((decltype(&cuMemAddressFree))fn[5])(va, size));
}

// On device 1: its blocks end with the reset; device 0's leak stays a leak.
// (With one device there is no reset: it would end the leak too.)
STEP void reset_ends_blocks() {
    int n = 0;
    std::printf("devices: %d\n", cudaGetDeviceCount(&n) == cudaSuccess ? n : 0);
    if (n < 2) return;
    void *p = nullptr;
    std::printf("device 1: %d\n", (int)cudaSetDevice(1));
    std::printf("before reset: %d\n", (int)cudaMalloc(&p, 2 << 20));
    std::printf("reset: %d\n", (int)cudaDeviceReset());
    std::printf("device 0: %d\n", (int)cudaSetDevice(0));
}

int main() {
    weights_alloc();
    leak_buffer();
    weights_free();
    two_streams();
    shapes();
    pinned();
    pool();
    oom();
    bad_frees();
    vmm_via_runtime();
    reset_ends_blocks();
    return 0;
}
