/*
 * src/ops/ops_internal.h - what the op files share: a borrowed strided view,
 * the broadcasting N-d iterator, dtype conversion in chunks, the thread pool
 * and small helpers (promotion with 0-d rules, overlap checks, PyTorch-style
 * dtype names).
 *
 * Everything here is private to src/ops.  Nothing here owns a reference:
 * a tp__view borrows the memory of the tensor it was taken from, so the
 * tensor must stay alive while the view is used.
 */
#ifndef TENSORPLAY_OPS_INTERNAL_H
#define TENSORPLAY_OPS_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include "../core/internal.h"

// ----------------------------------------------------------------------------
// borrowed strided views (no refcounts, no observer events)

typedef struct tp__view {
    char *data;                   /* address of element [0, ..., 0] */
    int ndim;
    tp_dtype dtype;
    int64_t sizes[TP_MAX_DIMS];
    int64_t strides[TP_MAX_DIMS]; /* in elements */
} tp__view;

/* Bytes per element without a call (hot in every kernel setup). */
static inline int64_t tp__itemsize(tp_dtype dtype) {
    static const int8_t sizes[TP_DTYPE_COUNT] = {
        [TP_DTYPE_FLOAT32] = 4, [TP_DTYPE_FLOAT64] = 8, [TP_DTYPE_FLOAT16] = 2, [TP_DTYPE_BFLOAT16] = 2,
        [TP_DTYPE_INT8] = 1,    [TP_DTYPE_INT16] = 2,   [TP_DTYPE_INT32] = 4,   [TP_DTYPE_INT64] = 8,
        [TP_DTYPE_UINT8] = 1,   [TP_DTYPE_BOOL] = 1,
    };
    return (unsigned)dtype < TP_DTYPE_COUNT ? sizes[dtype] : 0;
}

/* The geometry of t (borrowed: valid while t lives).  Inline: every op
 * takes a few of these, and the tiny-op overhead is mostly such setup. */
static inline tp__view tp__view_of(const tp_tensor *t) {
    tp__view v;
    char *base = (char *)t->storage->data.ptr;
    v.data = base ? base + t->storage_offset * tp__itemsize(t->dtype) : NULL;
    v.ndim = t->ndim;
    v.dtype = t->dtype;
    memcpy(v.sizes, t->sizes, (size_t)t->ndim * sizeof(int64_t));
    memcpy(v.strides, t->strides, (size_t)t->ndim * sizeof(int64_t));
    return v;
}
int64_t tp__view_numel(const tp__view *v);
/* True if two different indices may reach the same element (stride 0 on a
 * dim of size > 1, or strides that interleave).  Conservative: may say true
 * for exotic non-overlapping layouts, never false for overlapping ones. */
bool tp__view_has_internal_overlap(const tp__view *v);
/* True if the byte ranges the two views touch intersect. */
bool tp__views_may_overlap(const tp__view *a, const tp__view *b);

// ----------------------------------------------------------------------------
// shapes

/* Broadcasts two shapes (PyTorch's infer_size).  On mismatch sets "The size
 * of tensor a (3) must match the size of tensor b (4) at non-singleton
 * dimension 1" and returns TP_STATUS_INVALID_ARGUMENT. */
tp_status tp__broadcast_shape(int na, const int64_t *a, int nb, const int64_t *b,
                              int *nout, int64_t *out);
bool tp__shape_equal(int na, const int64_t *a, int nb, const int64_t *b);

// ----------------------------------------------------------------------------
// dtypes

/* PyTorch's ScalarType names used in its messages: "Float", "Long", ... */
const char *tp__dtype_scalar_name(tp_dtype dtype);
/* Result dtype of a tensor-tensor op with PyTorch's rule that a 0-d
 * operand does not raise the dtype of a dimensioned one in the same or a
 * lower category. */
tp_dtype tp__result_dtype(const tp_tensor *a, const tp_tensor *b);
/* PyTorch's canCast: no floating -> integral, no non-bool -> bool. */
bool tp__can_cast(tp_dtype from, tp_dtype to);
static inline bool tp__is_integral(tp_dtype d) { return !tp_dtype_is_floating(d); }

/* double -> int64 without undefined behaviour: NaN gives 0, values outside
 * the int64 range give INT64_MIN (what x86 does for the plain cast). */
static inline int64_t tp__f64_to_i64(double x) {
    if (x != x) return 0;
    if (x >= 9223372036854775808.0 || x < -9223372036854775808.0) return INT64_MIN;
    return (int64_t)x;
}

/* Converts n elements between memory of any dtype (byte stride) and a
 * buffer of double or int64.  Stores round/wrap like PyTorch's casts. */
void tp__load_f64(double *dst, const char *src, int64_t stride, int64_t n, tp_dtype dtype);
void tp__load_i64(int64_t *dst, const char *src, int64_t stride, int64_t n, tp_dtype dtype);
void tp__store_f64(char *dst, int64_t stride, const double *src, int64_t n, tp_dtype dtype);
void tp__store_i64(char *dst, int64_t stride, const int64_t *src, int64_t n, tp_dtype dtype);
/* One element as double / written from double. */
double tp__get_f64(const char *p, tp_dtype dtype);
void tp__set_f64(char *p, tp_dtype dtype, double value);

// ----------------------------------------------------------------------------
// the N-d iterator: operand 0 is usually the output

#define TP__ITER_MAX_OPS 4
/* Elements per chunk when kernels convert through a buffer. */
#define TP__CHUNK 256
/* Elements per pool chunk at least; ops under twice this run inline. */
#define TP__PARALLEL_GRAIN 32768

typedef struct tp__iter {
    int ndim; /* after dropping size-1 dims and merging contiguous ones */
    int nops;
    int64_t numel;
    int64_t sizes[TP_MAX_DIMS];                      /* outermost first */
    int64_t strides[TP__ITER_MAX_OPS][TP_MAX_DIMS];  /* in bytes */
    char *data[TP__ITER_MAX_OPS];
} tp__iter;

/* Called for runs along the innermost dim: ptrs[k] is operand k's first
 * element, strides[k] its byte stride, n >= 1 elements. */
typedef void (*tp__loop_fn)(char **ptrs, const int64_t *strides, int64_t n, void *ctx);

/* Iterates `shape`; operand k is broadcast to it (right-aligned, its size-1
 * dims get stride 0).  Callers have checked the shapes broadcast. */
void tp__iter_init(tp__iter *it, int ndim, const int64_t *shape, int nops, const tp__view *ops);
/* Runs fn over the linear (row-major) element range [begin, end). */
void tp__iter_for_range(const tp__iter *it, int64_t begin, int64_t end, tp__loop_fn fn, void *ctx);
/* Runs fn over every element, in no promised order: a 2-D iteration with
 * a transposed operand is walked in 32x32 tiles, and large iterations are
 * split across the pool (fn must be safe to run concurrently on disjoint
 * elements).  Below 2 * TP__PARALLEL_GRAIN elements it runs inline. */
void tp__iter_run(const tp__iter *it, tp__loop_fn fn, void *ctx);

// ----------------------------------------------------------------------------
// copying between views

/* dst[...] = src broadcast to dst, with dtype conversion.  No checks: the
 * caller has verified shapes and that the views do not overlap. */
void tp__copy_views(const tp__view *dst, const tp__view *src);
/* Writes value (converted to v's dtype) to every element; no version bump. */
void tp__fill_view(const tp__view *v, double value);
/* A new contiguous tensor holding src's values in `dtype`. */
tp_tensor *tp__copy_to_new(const tp__view *src, tp_dtype dtype);

// ----------------------------------------------------------------------------
// threads (parallel.c)

typedef void (*tp__range_fn)(int64_t begin, int64_t end, void *ctx);
/* Splits [0, n) into at most tp_get_num_threads() chunks of >= grain items
 * and runs them on the pool plus the calling thread; returns when all are
 * done.  Runs inline when n is small, when called from a pool worker, or
 * when another thread is using the pool. */
void tp__parallel_for(int64_t n, int64_t grain, tp__range_fn fn, void *ctx);

// ----------------------------------------------------------------------------
// OpenBLAS, opened on first use (blas.c; include <cblas.h> for the types)

/* Loads it once; TP_STATUS_OK, or an error status with the reason. */
tp_status tp__blas_load(void);
/* openblas_set_num_threads, if it is loaded (else applied when it is). */
void tp__blas_set_num_threads(int n);

// ----------------------------------------------------------------------------
// devices (device.c; the CUDA side is src/cuda/ops.c, stubs without CUDA)
//
// An op first finds the one device its tensors share, allocates its output
// there, and hands its already-checked views to the device's kernels when
// that device is not the CPU.  Views of device tensors hold device
// addresses: nothing on the CPU may read through them.

static inline bool tp__is_cpu(tp_device d) { return d.type == TP_DEVICE_TYPE_CPU; }
/* The device all n tensors (non-NULL) live on; else "expected all tensors
 * to be on the same device, but found cpu and cuda:0". */
tp_status tp__same_device(int n, const tp_tensor *const *ts, tp_device *out);
/* Refuses a non-CPU tensor for an op without device kernels. */
tp_status tp__cpu_only(const char *op, const tp_tensor *t);
/* tp_empty on device d (the CPU: tp_empty itself). */
tp_tensor *tp__empty_device(tp_device d, int ndim, const int64_t *sizes, tp_dtype dtype);
/* tp_empty from a given allocator (NULL = the CPU's registered one). */
tp_tensor *tp__empty_with(tp_allocator *allocator, int ndim, const int64_t *sizes, tp_dtype dtype);

/* Device kernels on views of device d (shapes and dtypes already checked,
 * as for their CPU counterparts).  Each returns a status with the error set. */
tp_status tp__dev_copy(tp_device d, const tp__view *dst, const tp__view *src);
tp_status tp__dev_fill(tp_device d, const tp__view *v, double value);
tp_status tp__dev_binary(tp_device d, tp_binary_op op, const tp__view *out, const tp__view *a,
                         const tp__view *b, tp_dtype compute);
/* b is a host scalar (integral: held as int64, else as double). */
tp_status tp__dev_binary_scalar(tp_device d, tp_binary_op op, const tp__view *out,
                                const tp__view *a, double b, bool integral, tp_dtype compute);
tp_status tp__dev_unary(tp_device d, tp_unary_op op, const tp__view *out, const tp__view *in,
                        tp_dtype compute);
/* kind: 0 sum, 1 mean, 2 max, 3 min, 4 argmax; reduced[dim] marks the dims
 * folded; out has in's rank (reduced dims of size 1, keepdim layout). */
tp_status tp__dev_reduce(tp_device d, int kind, char *out, tp_dtype out_dtype, const tp__view *in,
                         const bool *reduced);
/* out (contiguous; batch dims bshape[nb], then n unless a is 1-D, then m
 * unless b is 1-D) = a @ b with torch.matmul's broadcasting; a, b floating. */
tp_status tp__dev_matmul(tp_device d, tp_tensor *out, const tp_tensor *a, const tp_tensor *b, int nb,
                         const int64_t *bshape, int64_t n, int64_t k, int64_t m);
/* Reads nbytes at device address src into host memory dst. */
tp_status tp__dev_read(tp_device d, void *dst, const void *src, size_t nbytes);

#endif
