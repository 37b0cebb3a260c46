/*
 * tests/cuda/fake/fake_cublas.c - a test double of cuBLAS, built as
 * libcublas.so.13 (real SONAME and version node) beside the libcudart
 * double: the handful of calls libtensorplay's matmul makes, with a naive
 * column-major GEMM on the host in double precision.  Only OP_N operands,
 * float32/float64/float16/bfloat16; anything else is
 * CUBLAS_STATUS_NOT_SUPPORTED.  Records the last workspace it was given
 * (tpfake_cublas_workspace) so tests can see where it came from.
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cublas_v2.h>

#define EXPORT __attribute__((visibility("default")))

struct cublasContext { cudaStream_t stream; void *ws; size_t ws_size; };

static void *last_ws;
static size_t last_ws_size;

EXPORT cublasStatus_t cublasCreate_v2(cublasHandle_t *h) {
    *h = calloc(1, sizeof **h);
    return *h ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_ALLOC_FAILED;
}
EXPORT cublasStatus_t cublasDestroy_v2(cublasHandle_t h) { free(h); return CUBLAS_STATUS_SUCCESS; }
EXPORT cublasStatus_t cublasSetStream_v2(cublasHandle_t h, cudaStream_t s) {
    h->stream = s;
    return CUBLAS_STATUS_SUCCESS;
}
EXPORT cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t h, void *ws, size_t n) {
    h->ws = ws, h->ws_size = n;
    if (ws) last_ws = ws, last_ws_size = n;
    return CUBLAS_STATUS_SUCCESS;
}
EXPORT cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t m) {
    (void)h, (void)m;
    return CUBLAS_STATUS_SUCCESS;
}
EXPORT const char *cublasGetStatusName(cublasStatus_t s) {
    return s == CUBLAS_STATUS_SUCCESS ? "CUBLAS_STATUS_SUCCESS" : "CUBLAS_STATUS_NOT_SUPPORTED";
}
EXPORT const char *cublasGetStatusString(cublasStatus_t s) {
    return s == CUBLAS_STATUS_SUCCESS ? "success" : "the functionality requested is not supported";
}
EXPORT void *tpfake_cublas_workspace(size_t *size) {
    if (size) *size = last_ws_size;
    return last_ws;
}

static float from_bits(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static uint32_t to_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

static double load(const void *p, cudaDataType_t t, int64_t i) {
    switch (t) {
    case CUDA_R_32F: return ((const float *)p)[i];
    case CUDA_R_64F: return ((const double *)p)[i];
    case CUDA_R_16BF: return from_bits((uint32_t)((const uint16_t *)p)[i] << 16);
    default: { /* CUDA_R_16F */
        uint16_t h = ((const uint16_t *)p)[i];
        int e = (h >> 10) & 31, m = h & 1023;
        double v = e == 0 ? m / 1024.0 / 16384.0 : e == 31 ? (m ? NAN : INFINITY)
                                                           : (1 + m / 1024.0) * ((double)(1 << e) / 32768.0);
        return h & 0x8000 ? -v : v;
    }
    }
}

static void store(void *p, cudaDataType_t t, int64_t i, double v) {
    switch (t) {
    case CUDA_R_32F: ((float *)p)[i] = (float)v; break;
    case CUDA_R_64F: ((double *)p)[i] = v; break;
    case CUDA_R_16BF: {
        uint32_t x = to_bits((float)v);
        x += 0x7fff + ((x >> 16) & 1);
        ((uint16_t *)p)[i] = (uint16_t)(x >> 16);
        break;
    }
    default: { /* CUDA_R_16F, normal range, round to nearest even (enough for tests) */
        float f = (float)v;
        uint32_t x = to_bits(f), sign = (x >> 16) & 0x8000, ax = x & 0x7fffffff;
        uint16_t h;
        if (ax >= 0x477ff000) h = (uint16_t)(sign | 0x7c00);
        else if (ax < 0x38800000) h = (uint16_t)sign; /* flush tiny values */
        else {
            uint32_t m = (ax - 0x38000000) >> 13, rem = ax & 0x1fff;
            if (rem > 0x1000 || (rem == 0x1000 && (m & 1))) m++;
            h = (uint16_t)(sign | m);
        }
        ((uint16_t *)p)[i] = h;
    }
    }
}

static cublasStatus_t gemm(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                           const void *alpha, const void *A, cudaDataType_t at, int lda, long long sa,
                           const void *B, cudaDataType_t bt, int ldb, long long sb, const void *beta,
                           void *C, cudaDataType_t ct, int ldc, long long sc, int batch,
                           cublasComputeType_t comp) {
    if (ta != CUBLAS_OP_N || tb != CUBLAS_OP_N) return CUBLAS_STATUS_NOT_SUPPORTED;
    bool f64 = comp == CUBLAS_COMPUTE_64F;
    double al = f64 ? *(const double *)alpha : *(const float *)alpha;
    double be = f64 ? *(const double *)beta : *(const float *)beta;
    for (int b = 0; b < batch; b++)
        for (int j = 0; j < n; j++)
            for (int i = 0; i < m; i++) {
                double acc = 0;
                for (int l = 0; l < k; l++)
                    acc += load(A, at, b * sa + i + (int64_t)l * lda) * load(B, bt, b * sb + l + (int64_t)j * ldb);
                int64_t o = b * sc + i + (int64_t)j * ldc;
                store(C, ct, o, al * acc + (be != 0 ? be * load(C, ct, o) : 0));
            }
    return CUBLAS_STATUS_SUCCESS;
}

EXPORT cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                                   int n, int k, const void *alpha, const void *A, cudaDataType_t at,
                                   int lda, const void *B, cudaDataType_t bt, int ldb, const void *beta,
                                   void *C, cudaDataType_t ct, int ldc, cublasComputeType_t comp,
                                   cublasGemmAlgo_t algo) {
    (void)h, (void)algo;
    return gemm(ta, tb, m, n, k, alpha, A, at, lda, 0, B, bt, ldb, 0, beta, C, ct, ldc, 0, 1, comp);
}

EXPORT cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t h, cublasOperation_t ta,
                                                 cublasOperation_t tb, int m, int n, int k,
                                                 const void *alpha, const void *A, cudaDataType_t at,
                                                 int lda, long long sa, const void *B, cudaDataType_t bt,
                                                 int ldb, long long sb, const void *beta, void *C,
                                                 cudaDataType_t ct, int ldc, long long sc, int batch,
                                                 cublasComputeType_t comp, cublasGemmAlgo_t algo) {
    (void)h, (void)algo;
    return gemm(ta, tb, m, n, k, alpha, A, at, lda, sa, B, bt, ldb, sb, beta, C, ct, ldc, sc, batch, comp);
}
