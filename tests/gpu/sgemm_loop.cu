// sgemm_loop.cu: a cuBLAS SGEMM loop for tests/gpu/device_capture.sh (real
// cuBLAS: its workspace allocations go through the static runtime inside
// libcublas, i.e. through tpprof's wrapped driver table). Prints the loop's
// wall time in ms; run natively and under tpprof, the times are compared.
//   sgemm_loop N ITERS
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

int main(int argc, char **argv) {
    int n = argc > 1 ? std::atoi(argv[1]) : 1024, iters = argc > 2 ? std::atoi(argv[2]) : 500;
    float *a, *b, *c;
    size_t bytes = (size_t)n * n * sizeof(float);
    if (cudaMalloc(&a, bytes) || cudaMalloc(&b, bytes) || cudaMalloc(&c, bytes)) return std::puts("cudaMalloc failed"), 1;
    cudaMemset(a, 0, bytes);
    cudaMemset(b, 0, bytes);
    cublasHandle_t h;
    if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) return std::puts("cublasCreate failed"), 1;
    const float one = 1.0f, zero = 0.0f;
    cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a, n, b, n, &zero, c, n); // warm up
    cudaDeviceSynchronize();
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; i++) {
        // A scratch buffer per step, as frameworks' workspaces come and go.
        void *ws = nullptr;
        cudaMallocAsync(&ws, 1 << 20, nullptr);
        cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a, n, b, n, &zero, c, n);
        cudaFreeAsync(ws, nullptr);
    }
    cudaDeviceSynchronize();
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    std::printf("sgemm_loop %d x %d, %d iterations: %.3f ms\n", n, n, iters, ms);
    cublasDestroy(h);
    cudaFree(a);
    cudaFree(b);
    cudaFree(c);
    return 0;
}
