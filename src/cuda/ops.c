/*
 * src/cuda/ops.c - the CUDA side of the ops: tensors made on a device,
 * copies between host and devices (tp_tensor_to), and the tp__dev_* kernels
 * src/ops calls with already-checked views.
 *
 * Every function runs under a device guard (the tensor's device becomes
 * current and is restored after) and on that device's current stream.
 * Copies that hand data to the host synchronize that stream; kernels do
 * not (stream order keeps them right, as in PyTorch).  Matmul is cuBLAS's,
 * with its workspace taken from the runtime's own CUDA allocator.
 */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_internal.h"
#include "../ops/ops_internal.h"
#include "tensorplay/device.h"

// ----------------------------------------------------------------------------
// helpers

typedef struct geom { /* must match struct Geom in kernels.cu */
    int32_t ndim;
    long long sizes[TP_MAX_DIMS];
    long long st[3][TP_MAX_DIMS];
} geom;

typedef struct rgeom { /* must match struct RGeom in kernels.cu */
    int32_t nk, nr;
    long long ksizes[TP_MAX_DIMS], kst_out[TP_MAX_DIMS], kst_in[TP_MAX_DIMS];
    long long rsizes[TP_MAX_DIMS], rst_in[TP_MAX_DIMS];
    long long rn;
} rgeom;

/* The iteration over shape (out's) with each operand's strides aligned to
 * the right, broadcast dims at stride 0; returns the element count. */
static long long make_geom(geom *g, const tp__view *out, const tp__view *const *ops, int nops) {
    memset(g, 0, sizeof *g);
    g->ndim = out->ndim;
    long long n = 1;
    for (int d = 0; d < out->ndim; d++) {
        g->sizes[d] = out->sizes[d];
        n *= out->sizes[d];
        for (int k = 0; k < nops; k++) {
            const tp__view *v = ops[k];
            int dd = d - (out->ndim - v->ndim);
            g->st[k][d] = dd < 0 || v->sizes[dd] == 1 ? 0 : v->strides[dd];
        }
    }
    return n;
}

/* Guard: device d (a resolved cuda:N) current; returns the previous, -1 on error. */
static int enter(tp_device d) {
    int index = tp__cuda_check_device(d, "cuda");
    if (index < 0) return -1;
    return tp__cuda_device_enter(index);
}

static tp_status sync_current(const char *what) {
    cudaStream_t s = tp__cuda_current_stream(tp__cuda_current_index());
    cudaError_t err = tp__cuda()->cudaStreamSynchronize(s);
    if (err != cudaSuccess) return tp__cuda_error(err, "cudaStreamSynchronize after %s", what);
    return TP_STATUS_OK;
}

static tp_status copy_bytes(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind,
                            bool sync, const char *what) {
    if (n == 0) return TP_STATUS_OK;
    cudaStream_t s = tp__cuda_current_stream(tp__cuda_current_index());
    cudaError_t err = tp__cuda()->cudaMemcpyAsync(dst, src, n, kind, s);
    if (err != cudaSuccess) return tp__cuda_error(err, "cudaMemcpyAsync (%s, %zu bytes)", what, n);
    return sync ? sync_current(what) : TP_STATUS_OK;
}

/* Bytes from element [0,...] to one past the last element a view reaches
 * (strides are never negative here). */
static size_t view_span(const tp__view *v) {
    int64_t last = 0;
    for (int d = 0; d < v->ndim; d++) {
        if (v->sizes[d] == 0) return 0;
        last += (v->sizes[d] - 1) * v->strides[d];
    }
    return (size_t)(last + 1) * (size_t)tp__itemsize(v->dtype);
}

// ----------------------------------------------------------------------------
// tensors on a device

tp_tensor *tp__empty_device(tp_device d, int ndim, const int64_t *sizes, tp_dtype dtype) {
    if (tp__is_cpu(d)) return tp_empty(ndim, sizes, dtype);
    if (d.type != TP_DEVICE_TYPE_CUDA) {
        tp__error(TP_STATUS_INVALID_ARGUMENT, "empty(): invalid device type %d", (int)d.type);
        return NULL;
    }
    int prev = enter(d);
    if (prev < 0) return NULL;
    tp_tensor *t = NULL;
    tp_allocator *alloc = tp__cuda_storage_allocator();
    if (alloc) t = tp__empty_with(alloc, ndim, sizes, dtype);
    tp__cuda_device_restore(prev);
    return t;
}

tp_status tp__dev_read(tp_device d, void *dst, const void *src, size_t nbytes) {
    int prev = enter(d);
    if (prev < 0) return tp_last_status();
    tp_status st = copy_bytes(dst, src, nbytes, cudaMemcpyDeviceToHost, true, "device to host");
    tp__cuda_device_restore(prev);
    return st;
}

static tp_tensor *to_host(tp_tensor *t) {
    tp_tensor *out = tp_empty(t->ndim, t->sizes, t->dtype);
    if (!out || t->numel == 0) return out;
    tp__view v = tp__view_of(t);
    tp_status st;
    if (tp_tensor_is_contiguous(t)) {
        st = tp__dev_read(t->device, tp_tensor_data(out), v.data, tp_tensor_nbytes(out));
    } else {
        /* Bring the span the view reaches, then gather on the host. */
        size_t span = view_span(&v);
        char *tmp = malloc(span);
        if (!tmp) st = tp__error(TP_STATUS_OUT_OF_MEMORY, "to(): no host memory for %zu bytes", span);
        else st = tp__dev_read(t->device, tmp, v.data, span);
        if (st == TP_STATUS_OK) {
            tp__view hv = v, ov = tp__view_of(out);
            hv.data = tmp;
            tp__copy_views(&ov, &hv);
        }
        free(tmp);
    }
    if (st != TP_STATUS_OK) {
        tp_tensor_release(out);
        return NULL;
    }
    return out;
}

tp_tensor *tp_tensor_to_ex(tp_tensor *t, tp_device device, bool non_blocking) {
    if (!t) {
        tp__error(TP_STATUS_INVALID_ARGUMENT, "to(): tensor is NULL");
        return NULL;
    }
    if (tp__is_cpu(device)) return tp__is_cpu(t->device) ? tp_tensor_retain(t) : to_host(t);
    if (device.type != TP_DEVICE_TYPE_CUDA) {
        tp__error(TP_STATUS_INVALID_ARGUMENT, "to(): invalid device type %d", (int)device.type);
        return NULL;
    }
    int index = tp__cuda_check_device(device, "to()");
    if (index < 0) return NULL;
    tp_device target = tp_device_cuda(index);
    if (tp_device_equal(t->device, target)) return tp_tensor_retain(t);

    /* A contiguous source: the CPU's own copy, or one made on its device. */
    tp_tensor *src = tp_contiguous(t);
    if (!src) return NULL;
    tp_tensor *out = tp__empty_device(target, t->ndim, t->sizes, t->dtype);
    tp_status st = out ? TP_STATUS_OK : tp_last_status();
    if (out && t->numel > 0) {
        size_t n = tp_tensor_nbytes(out);
        if (tp__is_cpu(src->device)) {
            bool sync = !(non_blocking && tp__cuda_is_pinned(src->storage));
            int prev = tp__cuda_device_enter(index);
            st = prev < 0 ? tp_last_status()
                          : copy_bytes(tp_tensor_data(out), tp_tensor_data(src), n,
                                       cudaMemcpyHostToDevice, sync, "host to device");
            tp__cuda_device_restore(prev);
        } else {
            /* Device to device: the source's queued work first, then a copy
             * ordered on the target's stream (UVA finds the peer). */
            int prev = tp__cuda_device_enter(src->device.index);
            st = prev < 0 ? tp_last_status() : sync_current("device to device");
            tp__cuda_device_restore(prev);
            if (st == TP_STATUS_OK) {
                prev = tp__cuda_device_enter(index);
                st = prev < 0 ? tp_last_status()
                              : copy_bytes(tp_tensor_data(out), tp_tensor_data(src), n,
                                           cudaMemcpyDefault, true, "device to device");
                tp__cuda_device_restore(prev);
            }
        }
    }
    tp_tensor_release(src);
    if (st != TP_STATUS_OK) {
        tp_tensor_release(out);
        return NULL;
    }
    return out;
}

// ----------------------------------------------------------------------------
// kernels

tp_status tp__dev_copy(tp_device d, const tp__view *dst, const tp__view *src) {
    geom g;
    const tp__view *ops[2] = {dst, src};
    long long n = make_geom(&g, dst, ops, 2);
    int od = dst->dtype, ad = src->dtype;
    char *o = dst->data;
    const char *a = src->data;
    void *args[] = {&g, &n, &o, &od, &a, &ad};
    int prev = enter(d);
    if (prev < 0) return tp_last_status();
    tp_status st = tp__cuda_launch("tp_k_copy", n, args);
    tp__cuda_device_restore(prev);
    return st;
}

static bool contiguous_like(const tp__view *v, const tp__view *shape) {
    if (v->ndim != shape->ndim) return false;
    int64_t expect = 1;
    for (int d = v->ndim - 1; d >= 0; d--) {
        if (v->sizes[d] != shape->sizes[d]) return false;
        if (v->sizes[d] != 1 && v->strides[d] != expect) return false;
        expect *= v->sizes[d];
    }
    return true;
}

tp_status tp__dev_fill(tp_device d, const tp__view *v, double value) {
    /* Zero bytes are 0 in every dtype: a memset, no kernel. */
    if (value == 0.0 && !signbit(value) && contiguous_like(v, v)) {
        int prev = enter(d);
        if (prev < 0) return tp_last_status();
        size_t n = (size_t)tp__view_numel(v) * (size_t)tp__itemsize(v->dtype);
        cudaError_t err = n ? tp__cuda()->cudaMemsetAsync(v->data, 0, n,
                                                          tp__cuda_current_stream(tp__cuda_current_index()))
                            : cudaSuccess;
        tp__cuda_device_restore(prev);
        return err == cudaSuccess ? TP_STATUS_OK : tp__cuda_error(err, "cudaMemsetAsync of %zu bytes", n);
    }
    geom g;
    const tp__view *ops[1] = {v};
    long long n = make_geom(&g, v, ops, 1);
    int od = v->dtype;
    char *o = v->data;
    void *args[] = {&g, &n, &o, &od, &value};
    int prev = enter(d);
    if (prev < 0) return tp_last_status();
    tp_status st = tp__cuda_launch("tp_k_fill", n, args);
    tp__cuda_device_restore(prev);
    return st;
}


static tp_status binary(tp_device d, tp_binary_op op, const tp__view *out, const tp__view *a,
                        const tp__view *b, double bf, long long bi, tp_dtype compute) {
    int prev = enter(d);
    if (prev < 0) return tp_last_status();
    tp_status st;
    bool f32 = op <= TP_BINARY_OP_DIV && out->dtype == TP_DTYPE_FLOAT32 &&
               a->dtype == TP_DTYPE_FLOAT32 && compute == TP_DTYPE_FLOAT32 &&
               contiguous_like(out, out) && contiguous_like(a, out) &&
               (!b || (b->dtype == TP_DTYPE_FLOAT32 && contiguous_like(b, out)));
    if (f32) {
        long long n = tp__view_numel(out), sb = 1;
        float bs = (float)bf;
        int iop = op;
        char *o = out->data;
        const char *pa = a->data, *pb = b ? b->data : NULL;
        void *args[] = {&n, &iop, &o, &pa, &pb, &sb, &bs};
        st = tp__cuda_launch("tp_k_binary_f32", n, args);
    } else {
        geom g;
        tp__view none = {.ndim = 0, .dtype = TP_DTYPE_FLOAT64};
        const tp__view *ops[3] = {out, a, b ? b : &none};
        long long n = make_geom(&g, out, ops, 3);
        int iop = op, ic = compute, od = out->dtype, ad = a->dtype, bd = b ? b->dtype : 0;
        char *o = out->data;
        const char *pa = a->data, *pb = b ? b->data : NULL;
        void *args[] = {&g, &n, &iop, &ic, &o, &od, &pa, &ad, &pb, &bd, &bf, &bi};
        st = tp__cuda_launch("tp_k_binary", n, args);
    }
    tp__cuda_device_restore(prev);
    return st;
}

tp_status tp__dev_binary(tp_device d, tp_binary_op op, const tp__view *out, const tp__view *a,
                         const tp__view *b, tp_dtype compute) {
    return binary(d, op, out, a, b, 0.0, 0, compute);
}

tp_status tp__dev_binary_scalar(tp_device d, tp_binary_op op, const tp__view *out,
                                const tp__view *a, double b, bool integral, tp_dtype compute) {
    double bf = b;
    /* The CPU rounds a floating scalar to the compute dtype with the operands. */
    if (compute == TP_DTYPE_FLOAT32) bf = (float)b;
    else if (compute == TP_DTYPE_FLOAT16) bf = tp_half_to_float(tp_float_to_half((float)b));
    else if (compute == TP_DTYPE_BFLOAT16) bf = tp_bfloat16_to_float(tp_float_to_bfloat16((float)b));
    return binary(d, op, out, a, NULL, bf, integral ? tp__f64_to_i64(b) : 0, compute);
}

tp_status tp__dev_unary(tp_device d, tp_unary_op op, const tp__view *out, const tp__view *in,
                        tp_dtype compute) {
    geom g;
    const tp__view *ops[2] = {out, in};
    long long n = make_geom(&g, out, ops, 2);
    int iop = op, ic = compute, od = out->dtype, ad = in->dtype;
    char *o = out->data;
    const char *a = in->data;
    void *args[] = {&g, &n, &iop, &ic, &o, &od, &a, &ad};
    int prev = enter(d);
    if (prev < 0) return tp_last_status();
    tp_status st = tp__cuda_launch("tp_k_unary", n, args);
    tp__cuda_device_restore(prev);
    return st;
}

tp_status tp__dev_reduce(tp_device d, int kind, char *out, tp_dtype out_dtype, const tp__view *in,
                         const bool *reduced) {
    rgeom g;
    memset(&g, 0, sizeof g);
    g.rn = 1;
    long long nout = 1;
    for (int dd = 0; dd < in->ndim; dd++) {
        if (reduced[dd]) {
            g.rsizes[g.nr] = in->sizes[dd];
            g.rst_in[g.nr++] = in->strides[dd];
            g.rn *= in->sizes[dd];
        } else {
            g.ksizes[g.nk] = in->sizes[dd];
            g.kst_in[g.nk++] = in->strides[dd];
            nout *= in->sizes[dd];
        }
    }
    long long stride = 1; /* the output is contiguous over the kept dims */
    for (int k = g.nk - 1; k >= 0; k--) {
        g.kst_out[k] = stride;
        stride *= g.ksizes[k];
    }
    if (nout == 0) return TP_STATUS_OK;
    int ik = kind, od = out_dtype, ad = in->dtype;
    const char *a = in->data;
    void *args[] = {&g, &nout, &ik, &out, &od, &a, &ad};
    int prev = enter(d);
    if (prev < 0) return tp_last_status();
    tp_status st = tp__cuda_launch_grid("tp_k_reduce", (unsigned)(nout < 65535 ? nout : 65535), 256, args);
    tp__cuda_device_restore(prev);
    return st;
}

// ----------------------------------------------------------------------------
// matmul (cuBLAS)

#define WORKSPACE_BYTES ((size_t)32 << 20) /* cuBLAS's advice for Hopper */

static pthread_mutex_t blas_mu = PTHREAD_MUTEX_INITIALIZER;
static cublasHandle_t handles[TP__CUDA_MAX_DEVICES];

static tp_status blas_error(const tp__cublas_api *b, cublasStatus_t s, const char *what) {
    return tp__error(s == CUBLAS_STATUS_ALLOC_FAILED ? TP_STATUS_OUT_OF_MEMORY : TP_STATUS_INTERNAL,
                     "cuBLAS error: %s: %s (%s)", b->cublasGetStatusName(s),
                     b->cublasGetStatusString(s), what);
}

/* a broadcast to (bshape..., rows, cols), contiguous on its device. */
static tp_tensor *batch_operand(const tp_tensor *t, int nb, const int64_t *bshape, int64_t rows,
                                int64_t cols) {
    int64_t sz[TP_MAX_DIMS + 2];
    for (int i = 0; i < nb; i++) sz[i] = bshape[i];
    sz[nb] = rows, sz[nb + 1] = cols;
    tp_tensor *v = tp_tensor_reshape((tp_tensor *)t, t->ndim == 1 ? 2 : t->ndim,
                                     t->ndim == 1 ? (int64_t[]){rows, cols} : t->sizes);
    if (!v) return NULL;
    tp_tensor *e = tp_tensor_expand(v, nb + 2, sz);
    tp_tensor_release(v);
    if (!e) return NULL;
    tp_tensor *c = tp_contiguous(e);
    tp_tensor_release(e);
    return c;
}

tp_status tp__dev_matmul(tp_device d, tp_tensor *out, const tp_tensor *a, const tp_tensor *b, int nb,
                         const int64_t *bshape, int64_t n, int64_t k, int64_t m) {
    tp_dtype dt = a->dtype;
    cudaDataType_t ct;
    cublasComputeType_t comp = CUBLAS_COMPUTE_32F;
    switch (dt) {
    case TP_DTYPE_FLOAT32: ct = CUDA_R_32F; break;
    case TP_DTYPE_FLOAT64: ct = CUDA_R_64F, comp = CUBLAS_COMPUTE_64F; break;
    case TP_DTYPE_FLOAT16: ct = CUDA_R_16F; break;
    case TP_DTYPE_BFLOAT16: ct = CUDA_R_16BF; break;
    default:
        return tp__error(TP_STATUS_UNSUPPORTED, "matmul(): %s is not implemented on cuda",
                         tp_dtype_name(dt));
    }
    int64_t batch = 1;
    for (int i = 0; i < nb; i++) batch *= bshape[i];
    if (batch == 0 || n == 0 || m == 0) return TP_STATUS_OK;
    tp__view ov = tp__view_of(out);
    if (k == 0) return tp__dev_fill(d, &ov, 0.0);
    const tp__cublas_api *bl = tp__cublas();
    if (!bl) return TP_STATUS_UNSUPPORTED;
    tp_tensor *A = batch_operand(a, nb, bshape, a->ndim == 1 ? 1 : n, k);
    tp_tensor *B = A ? batch_operand(b, nb, bshape, k, b->ndim == 1 ? 1 : m) : NULL;
    if (!B) {
        tp_tensor_release(A);
        return tp_last_status();
    }
    int index = d.index;
    int prev = tp__cuda_device_enter(index);
    tp_status st = prev < 0 ? tp_last_status() : TP_STATUS_OK;
    tp_data_ptr ws = {0};
    pthread_mutex_lock(&blas_mu);
    if (st == TP_STATUS_OK && !handles[index]) {
        cublasStatus_t s = bl->cublasCreate_v2(&handles[index]);
        if (s != CUBLAS_STATUS_SUCCESS) st = blas_error(bl, s, "cublasCreate"), handles[index] = NULL;
    }
    /* The workspace comes from the runtime's allocator on the current
     * stream, so a cached block is reused only in this stream's order. */
    if (st == TP_STATUS_OK) {
        tp_allocator *alloc = tp__cuda_storage_allocator();
        st = alloc ? tp_allocator_allocate(alloc, WORKSPACE_BYTES, &ws) : tp_last_status();
    }
    if (st == TP_STATUS_OK) {
        cublasHandle_t h = handles[index];
        cublasStatus_t s = bl->cublasSetStream_v2(h, tp__cuda_current_stream(index));
        if (s == CUBLAS_STATUS_SUCCESS) s = bl->cublasSetWorkspace_v2(h, ws.ptr, WORKSPACE_BYTES);
        double one64 = 1.0, zero64 = 0.0;
        float one32 = 1.0f, zero32 = 0.0f;
        const void *alpha = dt == TP_DTYPE_FLOAT64 ? (const void *)&one64 : (const void *)&one32;
        const void *beta = dt == TP_DTYPE_FLOAT64 ? (const void *)&zero64 : (const void *)&zero32;
        /* Row-major C = A B is column-major C^T = B^T A^T: swap operands. */
        if (s == CUBLAS_STATUS_SUCCESS)
            s = bl->cublasGemmStridedBatchedEx(h, CUBLAS_OP_N, CUBLAS_OP_N, (int)m, (int)n, (int)k,
                                              alpha, tp_tensor_data(B), ct, (int)m, k * m,
                                              tp_tensor_data(A), ct, (int)k, n * k, beta,
                                              tp_tensor_data(out), ct, (int)m, n * m, (int)batch,
                                              comp, CUBLAS_GEMM_DEFAULT);
        if (s != CUBLAS_STATUS_SUCCESS) st = blas_error(bl, s, "cublasGemmStridedBatchedEx");
        /* Detach the workspace before it returns to the cache. */
        bl->cublasSetWorkspace_v2(h, NULL, 0);
    }
    pthread_mutex_unlock(&blas_mu);
    tp_data_ptr_clear(&ws);
    tp__cuda_device_restore(prev);
    tp_tensor_release(A);
    tp_tensor_release(B);
    return st;
}
