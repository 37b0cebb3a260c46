/*
 * src/ops/linalg.c - matmul (torch.matmul semantics, batched with
 * broadcast) and bmm.
 *
 * float32/float64 go to OpenBLAS (cblas_sgemm/dgemm, opened on first use:
 * blas.c) from the caller's
 * thread, never from the pool.  A 2-D operand whose rows or columns are
 * unit-stride is passed as it lies (a transpose becomes CblasTrans with the
 * original leading dimension); only other layouts are copied.  When the
 * right operand has no batch dims and the left one's batch and row dims
 * collapse into one stride, the whole product is a single gemm.
 * float16/bfloat16 compute through float32; integral dtypes use an int64
 * reference loop (wrapping).  bool is refused, as in PyTorch.
 */
#include <cblas.h>
#include <limits.h>
#include <stdlib.h>
#include "ops_internal.h"

/* OpenBLAS's gemms, set by tp__blas_load (blas.c). */
extern __typeof__(&cblas_sgemm) tp__cblas_sgemm;
extern __typeof__(&cblas_dgemm) tp__cblas_dgemm;

// ----------------------------------------------------------------------------
// one matrix operand

typedef struct mat {
    char *data;
    int64_t rows, cols, rs, cs; /* strides in elements */
} mat;

/* How BLAS can read m as it lies: NoTrans (row-major), Trans (column-major)
 * with leading dimension *ld, or neither (returns false). */
static bool blas_layout(const mat *m, enum CBLAS_TRANSPOSE *tr, int64_t *ld) {
    if ((m->cs == 1 || m->cols == 1) && (m->rows == 1 || m->rs >= (m->cols > 1 ? m->cols : 1))) {
        *tr = CblasNoTrans;
        *ld = m->rows == 1 ? (m->cols > 1 ? m->cols : 1) : m->rs;
        if (*ld < m->cols) *ld = m->cols;
        return *ld <= INT_MAX;
    }
    if ((m->rs == 1 || m->rows == 1) && (m->cols == 1 || m->cs >= (m->rows > 1 ? m->rows : 1))) {
        *tr = CblasTrans;
        *ld = m->cols == 1 ? (m->rows > 1 ? m->rows : 1) : m->cs;
        if (*ld < m->rows) *ld = m->rows;
        return *ld <= INT_MAX;
    }
    return false;
}

/* Copies m into a row-major buffer. */
static void pack(const mat *m, size_t isz, char *buf) {
    for (int64_t r = 0; r < m->rows; r++)
        for (int64_t c = 0; c < m->cols; c++)
            memcpy(buf + (size_t)(r * m->cols + c) * isz,
                   m->data + (r * m->rs + c * m->cs) * (int64_t)isz, isz);
}

/* C (n x m, row-major, ldc = m) = A (n x k) B (k x m). */
static tp_status gemm(tp_dtype dtype, const mat *a, const mat *b, char *c, char **scratch,
                      size_t *scratch_cap) {
    int64_t n = a->rows, k = a->cols, m = b->cols;
    tp_status loaded = tp__blas_load();
    if (loaded != TP_STATUS_OK) return loaded;
    size_t isz = tp_dtype_itemsize(dtype);
    mat A = *a, B = *b;
    enum CBLAS_TRANSPOSE ta, tb;
    int64_t lda, ldb;
    bool oka = blas_layout(&A, &ta, &lda), okb = blas_layout(&B, &tb, &ldb);
    size_t need = (oka ? 0 : (size_t)(n * k)) + (okb ? 0 : (size_t)(k * m));
    if (need * isz > *scratch_cap) {
        char *p = realloc(*scratch, need * isz);
        if (!p)
            return tp__error(TP_STATUS_OUT_OF_MEMORY, "matmul: cannot allocate %zu bytes to pack an operand",
                             need * isz);
        *scratch = p;
        *scratch_cap = need * isz;
    }
    char *next = *scratch;
    if (!oka) {
        pack(&A, isz, next);
        A = (mat){next, n, k, k, 1};
        next += (size_t)(n * k) * isz;
        blas_layout(&A, &ta, &lda);
    }
    if (!okb) {
        pack(&B, isz, next);
        B = (mat){next, k, m, m, 1};
        blas_layout(&B, &tb, &ldb);
    }
    int ldc = m > 1 ? (int)m : 1;
    if (dtype == TP_DTYPE_FLOAT32)
        tp__cblas_sgemm(CblasRowMajor, ta, tb, (int)n, (int)m, (int)k, 1.0f, (const float *)A.data, (int)lda,
                    (const float *)B.data, (int)ldb, 0.0f, (float *)c, ldc);
    else
        tp__cblas_dgemm(CblasRowMajor, ta, tb, (int)n, (int)m, (int)k, 1.0, (const double *)A.data, (int)lda,
                    (const double *)B.data, (int)ldb, 0.0, (double *)c, ldc);
    return TP_STATUS_OK;
}

/* Integral reference: rows of A times B accumulated in int64. */
static tp_status gemm_int(tp_dtype dtype, const mat *a, const mat *b, char *c) {
    int64_t n = a->rows, k = a->cols, m = b->cols;
    int64_t isz = tp__itemsize(dtype);
    int64_t *acc = malloc((size_t)(m > 0 ? m : 1) * 2 * sizeof *acc);
    if (!acc) return tp__error(TP_STATUS_OUT_OF_MEMORY, "matmul: cannot allocate a row buffer");
    int64_t *brow = acc + (m > 0 ? m : 1);
    for (int64_t i = 0; i < n; i++) {
        for (int64_t j = 0; j < m; j++) acc[j] = 0;
        for (int64_t kk = 0; kk < k; kk++) {
            int64_t av;
            tp__load_i64(&av, a->data + (i * a->rs + kk * a->cs) * isz, 0, 1, dtype);
            tp__load_i64(brow, b->data + kk * b->rs * isz, b->cs * isz, m, dtype);
            for (int64_t j = 0; j < m; j++)
                acc[j] = (int64_t)((uint64_t)acc[j] + (uint64_t)av * (uint64_t)brow[j]);
        }
        tp__store_i64(c + i * m * isz, isz, acc, m, dtype);
    }
    free(acc);
    return TP_STATUS_OK;
}

// ----------------------------------------------------------------------------
// the batched driver

typedef struct operand {
    int nbatch;
    int64_t bsizes[TP_MAX_DIMS], bstrides[TP_MAX_DIMS];
    mat m;
} operand;

/* Splits t into batch dims and a matrix; 1-D becomes a row (left, as_row)
 * or a column (right). */
static operand split_operand(const tp_tensor *t, bool as_row) {
    operand o = {0};
    o.m.data = tp_tensor_data(t);
    if (t->ndim == 1) {
        if (as_row) o.m = (mat){o.m.data, 1, t->sizes[0], t->sizes[0] * t->strides[0], t->strides[0]};
        else o.m = (mat){o.m.data, t->sizes[0], 1, t->strides[0], 1};
        return o;
    }
    int nb = t->ndim - 2;
    o.nbatch = nb;
    for (int d = 0; d < nb; d++) {
        o.bsizes[d] = t->sizes[d];
        o.bstrides[d] = t->strides[d];
    }
    o.m.rows = t->sizes[nb];
    o.m.cols = t->sizes[nb + 1];
    o.m.rs = t->strides[nb];
    o.m.cs = t->strides[nb + 1];
    return o;
}

/* Offset (elements) of batch index `lin` of the broadcast batch shape. */
static int64_t batch_offset(const operand *o, int nb, const int64_t *bshape, int64_t lin) {
    int64_t off = 0;
    for (int d = nb - 1; d >= 0; d--) {
        int64_t i = lin % bshape[d];
        lin /= bshape[d];
        int od = d - (nb - o->nbatch);
        if (od >= 0 && o->bsizes[od] != 1) off += i * o->bstrides[od];
    }
    return off;
}

static tp_tensor *matmul_impl(const char *name, const tp_tensor *a, const tp_tensor *b) {
    if (!a || !b) {
        tp__error(TP_STATUS_INVALID_ARGUMENT, "%s(): tensor is NULL", name);
        return NULL;
    }
    if (a->ndim == 0 || b->ndim == 0) {
        tp__error(TP_STATUS_INVALID_ARGUMENT,
                  "both arguments to matmul need to be at least 1D, but they are %dD and %dD", a->ndim,
                  b->ndim);
        return NULL;
    }
    if (a->dtype != b->dtype) {
        tp__error(TP_STATUS_INVALID_ARGUMENT, "expected m1 and m2 to have the same dtype, but got: %s != %s",
                  tp_dtype_name(a->dtype), tp_dtype_name(b->dtype));
        return NULL;
    }
    tp_dtype dtype = a->dtype;
    if (dtype == TP_DTYPE_BOOL) {
        tp__error(TP_STATUS_UNSUPPORTED, "\"%s\" not implemented for 'Bool'", name);
        return NULL;
    }
    if (a->ndim == 1 && b->ndim == 1 && a->sizes[0] != b->sizes[0]) {
        tp__error(TP_STATUS_INVALID_ARGUMENT,
                  "inconsistent tensor size, expected tensor [%lld] and src [%lld] to have the same "
                  "number of elements, but got %lld and %lld elements respectively",
                  (long long)a->sizes[0], (long long)b->sizes[0], (long long)a->sizes[0],
                  (long long)b->sizes[0]);
        return NULL;
    }
    operand A = split_operand(a, true), B = split_operand(b, false);
    if (A.m.cols != B.m.rows) {
        tp__error(TP_STATUS_INVALID_ARGUMENT, "mat1 and mat2 shapes cannot be multiplied (%lldx%lld and %lldx%lld)",
                  (long long)A.m.rows, (long long)A.m.cols, (long long)B.m.rows, (long long)B.m.cols);
        return NULL;
    }
    int nb;
    int64_t bshape[TP_MAX_DIMS];
    if (tp__broadcast_shape(A.nbatch, A.bsizes, B.nbatch, B.bsizes, &nb, bshape)) return NULL;
    int64_t n = A.m.rows, k = A.m.cols, m = B.m.cols;
    if (n > INT_MAX || k > INT_MAX || m > INT_MAX) {
        tp__error(TP_STATUS_UNSUPPORTED, "matmul: dimensions above %d are not supported", INT_MAX);
        return NULL;
    }

    /* result shape: batch, then n unless a was 1-D, then m unless b was 1-D */
    int64_t osz[TP_MAX_DIMS];
    int on = 0;
    for (int d = 0; d < nb; d++) osz[on++] = bshape[d];
    if (a->ndim > 1) osz[on++] = n;
    if (b->ndim > 1) osz[on++] = m;
    if (on > TP_MAX_DIMS) {
        tp__error(TP_STATUS_INVALID_ARGUMENT, "matmul: result has more than %d dims", TP_MAX_DIMS);
        return NULL;
    }

    tp_device dev;
    if (tp__same_device(2, (const tp_tensor *[]){a, b}, &dev)) return NULL;
    if (!tp__is_cpu(dev)) {
        tp_tensor *out = tp__empty_device(dev, on, osz, dtype);
        if (out && tp__dev_matmul(dev, out, a, b, nb, bshape, n, k, m))
            tp_tensor_release(out), out = NULL;
        return out;
    }

    if (dtype == TP_DTYPE_FLOAT16 || dtype == TP_DTYPE_BFLOAT16) {
        /* compute in float32, round once at the end */
        tp__view av = tp__view_of(a), bv = tp__view_of(b);
        tp_tensor *af = tp__copy_to_new(&av, TP_DTYPE_FLOAT32);
        tp_tensor *bf = af ? tp__copy_to_new(&bv, TP_DTYPE_FLOAT32) : NULL;
        tp_tensor *cf = bf ? matmul_impl(name, af, bf) : NULL;
        tp_tensor *c = NULL;
        if (cf) {
            tp__view cv = tp__view_of(cf);
            c = tp__copy_to_new(&cv, dtype);
        }
        tp_tensor_release(af);
        tp_tensor_release(bf);
        tp_tensor_release(cf);
        return c;
    }

    tp_tensor *out = tp_empty(on, osz, dtype);
    if (!out) return NULL;
    int64_t nbatch = 1;
    for (int d = 0; d < nb; d++) nbatch *= bshape[d];
    size_t isz = tp_dtype_itemsize(dtype);
    char *c = tp_tensor_data(out);
    if (nbatch == 0 || n == 0 || m == 0) return out;
    if (k == 0) {
        memset(c, 0, (size_t)(nbatch * n * m) * isz);
        return out;
    }

    bool blas = dtype == TP_DTYPE_FLOAT32 || dtype == TP_DTYPE_FLOAT64;
    /* Fold a's batch into its rows when b is a plain matrix and a's batch
     * and row dims step as one: one big gemm instead of many small ones. */
    if (blas && B.nbatch == 0 && A.nbatch > 0) {
        bool fold = A.m.rows > 1;
        int64_t rs = A.m.rs, expect = rs * A.m.rows;
        for (int d = A.nbatch - 1; d >= 0 && fold; d--) {
            if (A.bsizes[d] == 1) continue;
            fold = A.bstrides[d] == expect;
            expect = A.bstrides[d] * A.bsizes[d];
        }
        if (fold && (A.m.cs == 1 || A.m.cols == 1) && rs >= A.m.cols) {
            mat big = {A.m.data, nbatch * n, k, rs, A.m.cs};
            if (big.rows <= INT_MAX) {
                char *scratch = NULL;
                size_t cap = 0;
                tp_status st = gemm(dtype, &big, &B.m, c, &scratch, &cap);
                free(scratch);
                if (st) {
                    tp_tensor_release(out);
                    return NULL;
                }
                return out;
            }
        }
    }

    char *scratch = NULL;
    size_t cap = 0;
    tp_status st = TP_STATUS_OK;
    for (int64_t bi = 0; bi < nbatch && st == TP_STATUS_OK; bi++) {
        mat ma = A.m, mb = B.m;
        ma.data += batch_offset(&A, nb, bshape, bi) * (int64_t)isz;
        mb.data += batch_offset(&B, nb, bshape, bi) * (int64_t)isz;
        char *cb = c + (size_t)(bi * n * m) * isz;
        st = blas ? gemm(dtype, &ma, &mb, cb, &scratch, &cap) : gemm_int(dtype, &ma, &mb, cb);
    }
    free(scratch);
    if (st) {
        tp_tensor_release(out);
        return NULL;
    }
    return out;
}

// ----------------------------------------------------------------------------
// public entry points

tp_tensor *tp_matmul(const tp_tensor *a, const tp_tensor *b) { return matmul_impl("matmul", a, b); }

tp_tensor *tp_bmm(const tp_tensor *a, const tp_tensor *b) {
    if (!a || !b) {
        tp__error(TP_STATUS_INVALID_ARGUMENT, "bmm(): tensor is NULL");
        return NULL;
    }
    if (a->ndim != 3) {
        tp__error(TP_STATUS_INVALID_ARGUMENT, "batch1 must be a 3D tensor");
        return NULL;
    }
    if (b->ndim != 3) {
        tp__error(TP_STATUS_INVALID_ARGUMENT, "batch2 must be a 3D tensor");
        return NULL;
    }
    if (b->sizes[0] != a->sizes[0] || b->sizes[1] != a->sizes[2]) {
        tp__error(TP_STATUS_INVALID_ARGUMENT,
                  "Expected size for first two dimensions of batch2 tensor to be: [%lld, %lld] but got: "
                  "[%lld, %lld].",
                  (long long)a->sizes[0], (long long)a->sizes[2], (long long)b->sizes[0],
                  (long long)b->sizes[1]);
        return NULL;
    }
    return matmul_impl("bmm", a, b);
}
