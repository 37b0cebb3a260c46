/*
 * src/ops/elementwise.c - binary and unary math, comparisons and where,
 * with broadcasting and PyTorch's type promotion, plus the in-place forms.
 *
 * Kernels see runs from the iterator.  Every dtype goes through one generic
 * path: a chunk of each operand is converted to double (floating compute
 * dtypes) or int64 (integral ones, wrapping like fixed-width arithmetic),
 * computed, and stored in the output dtype.  float32 add/sub/mul/div with
 * unit or zero strides take a plain loop the compiler vectorizes, and
 * float32 -> float32 unary ops compute in float (expf, ...) for any layout.
 *
 * In-place ops check everything (dtype cast, shape, overlap) before the
 * first write and bump the version exactly once on success; an operand that
 * overlaps the target in any way other than element-for-element is copied
 * aside first.  This file does not allocate anything but result tensors and
 * those copies.
 */
#include <math.h>
#include <stdlib.h>
#include "ops_internal.h"

// ----------------------------------------------------------------------------
// scalar math

static const char *binary_name(tp_binary_op op) {
    static const char *names[] = {"add", "sub", "mul", "div", "pow", "eq", "ne", "lt", "le", "gt", "ge"};
    return (unsigned)op < TP_BINARY_OP_COUNT ? names[op] : "binary";
}

static const char *unary_name(tp_unary_op op) {
    static const char *names[] = {"neg", "abs", "exp", "log", "sqrt", "relu", "tanh", "sigmoid"};
    return (unsigned)op < TP_UNARY_OP_COUNT ? names[op] : "unary";
}

static bool is_comparison(tp_binary_op op) { return op >= TP_BINARY_OP_EQ; }

static int64_t ipow(int64_t base, int64_t exp) {
    if (exp < 0) return base == 1 ? 1 : base == -1 ? (exp % 2 ? -1 : 1) : 0;
    uint64_t result = 1, b = (uint64_t)base;
    while (exp) {
        if (exp & 1) result *= b;
        b *= b;
        exp >>= 1;
    }
    return (int64_t)result;
}

/* Rounds values held in double to what the compute dtype can hold, so that
 * e.g. an int32 operand of a float16 op is first converted to float16. */
static void round_to(double *x, int64_t n, tp_dtype compute) {
    switch (compute) {
    case TP_DTYPE_FLOAT32: for (int64_t i = 0; i < n; i++) x[i] = (float)x[i]; break;
    case TP_DTYPE_FLOAT16:
        for (int64_t i = 0; i < n; i++) x[i] = tp_half_to_float(tp_float_to_half((float)x[i]));
        break;
    case TP_DTYPE_BFLOAT16:
        for (int64_t i = 0; i < n; i++) x[i] = tp_bfloat16_to_float(tp_float_to_bfloat16((float)x[i]));
        break;
    default: break;
    }
}

static void binary_f64(tp_binary_op op, double *x, const double *y, int64_t n) {
    switch (op) {
    case TP_BINARY_OP_ADD: for (int64_t i = 0; i < n; i++) x[i] += y[i]; break;
    case TP_BINARY_OP_SUB: for (int64_t i = 0; i < n; i++) x[i] -= y[i]; break;
    case TP_BINARY_OP_MUL: for (int64_t i = 0; i < n; i++) x[i] *= y[i]; break;
    case TP_BINARY_OP_DIV: for (int64_t i = 0; i < n; i++) x[i] /= y[i]; break;
    case TP_BINARY_OP_POW: for (int64_t i = 0; i < n; i++) x[i] = pow(x[i], y[i]); break;
    case TP_BINARY_OP_EQ: for (int64_t i = 0; i < n; i++) x[i] = x[i] == y[i]; break;
    case TP_BINARY_OP_NE: for (int64_t i = 0; i < n; i++) x[i] = x[i] != y[i]; break;
    case TP_BINARY_OP_LT: for (int64_t i = 0; i < n; i++) x[i] = x[i] < y[i]; break;
    case TP_BINARY_OP_LE: for (int64_t i = 0; i < n; i++) x[i] = x[i] <= y[i]; break;
    case TP_BINARY_OP_GT: for (int64_t i = 0; i < n; i++) x[i] = x[i] > y[i]; break;
    case TP_BINARY_OP_GE: for (int64_t i = 0; i < n; i++) x[i] = x[i] >= y[i]; break;
    default: break;
    }
}

static void binary_i64(tp_binary_op op, int64_t *x, const int64_t *y, int64_t n) {
    /* Unsigned arithmetic: wraps like int8..int64 do in PyTorch, never UB. */
    switch (op) {
    case TP_BINARY_OP_ADD: for (int64_t i = 0; i < n; i++) x[i] = (int64_t)((uint64_t)x[i] + (uint64_t)y[i]); break;
    case TP_BINARY_OP_SUB: for (int64_t i = 0; i < n; i++) x[i] = (int64_t)((uint64_t)x[i] - (uint64_t)y[i]); break;
    case TP_BINARY_OP_MUL: for (int64_t i = 0; i < n; i++) x[i] = (int64_t)((uint64_t)x[i] * (uint64_t)y[i]); break;
    case TP_BINARY_OP_POW: for (int64_t i = 0; i < n; i++) x[i] = ipow(x[i], y[i]); break;
    case TP_BINARY_OP_EQ: for (int64_t i = 0; i < n; i++) x[i] = x[i] == y[i]; break;
    case TP_BINARY_OP_NE: for (int64_t i = 0; i < n; i++) x[i] = x[i] != y[i]; break;
    case TP_BINARY_OP_LT: for (int64_t i = 0; i < n; i++) x[i] = x[i] < y[i]; break;
    case TP_BINARY_OP_LE: for (int64_t i = 0; i < n; i++) x[i] = x[i] <= y[i]; break;
    case TP_BINARY_OP_GT: for (int64_t i = 0; i < n; i++) x[i] = x[i] > y[i]; break;
    case TP_BINARY_OP_GE: for (int64_t i = 0; i < n; i++) x[i] = x[i] >= y[i]; break;
    default: break; /* DIV never computes in an integral dtype */
    }
}

static void unary_f64(tp_unary_op op, double *x, int64_t n) {
    switch (op) {
    case TP_UNARY_OP_NEG: for (int64_t i = 0; i < n; i++) x[i] = -x[i]; break;
    case TP_UNARY_OP_ABS: for (int64_t i = 0; i < n; i++) x[i] = fabs(x[i]); break;
    case TP_UNARY_OP_EXP: for (int64_t i = 0; i < n; i++) x[i] = exp(x[i]); break;
    case TP_UNARY_OP_LOG: for (int64_t i = 0; i < n; i++) x[i] = log(x[i]); break;
    case TP_UNARY_OP_SQRT: for (int64_t i = 0; i < n; i++) x[i] = sqrt(x[i]); break;
    /* x < 0 rather than x > 0 keeps NaN, as torch.relu does */
    case TP_UNARY_OP_RELU: for (int64_t i = 0; i < n; i++) x[i] = x[i] < 0 ? 0.0 : x[i]; break;
    case TP_UNARY_OP_TANH: for (int64_t i = 0; i < n; i++) x[i] = tanh(x[i]); break;
    case TP_UNARY_OP_SIGMOID: for (int64_t i = 0; i < n; i++) x[i] = 1.0 / (1.0 + exp(-x[i])); break;
    default: break;
    }
}

static void unary_i64(tp_unary_op op, int64_t *x, int64_t n) {
    switch (op) {
    case TP_UNARY_OP_NEG: for (int64_t i = 0; i < n; i++) x[i] = (int64_t)(0 - (uint64_t)x[i]); break;
    case TP_UNARY_OP_ABS:
        for (int64_t i = 0; i < n; i++) x[i] = x[i] < 0 ? (int64_t)(0 - (uint64_t)x[i]) : x[i];
        break;
    case TP_UNARY_OP_RELU: for (int64_t i = 0; i < n; i++) x[i] = x[i] < 0 ? 0 : x[i]; break;
    default: break; /* the others compute in floating point */
    }
}

// ----------------------------------------------------------------------------
// binary kernels

typedef struct binary_ctx {
    tp_binary_op op;
    tp_dtype out, a, b, compute;
    bool fast_f32; /* out, a, b all float32 and op in add..div */
} binary_ctx;

/* Blocks of 8: all loads of a block happen before its stores, so the exact
 * aliasing of in-place ops (o == x) is harmless, and the fixed-size block
 * lets GCC vectorize at -O2 without runtime alias checks. */
#define F32_LOOP(EXPR)                                                        \
    do {                                                                      \
        int64_t i = 0;                                                        \
        for (; i + 8 <= n; i += 8) {                                          \
            float xa[8], ya[8];                                               \
            for (int j = 0; j < 8; j++) xa[j] = x[(i + j) * sx];              \
            for (int j = 0; j < 8; j++) ya[j] = y[(i + j) * sy];              \
            for (int j = 0; j < 8; j++) o[i + j] = EXPR(xa[j], ya[j]);        \
        }                                                                     \
        for (; i < n; i++) o[i] = (EXPR(x[i * sx], y[i * sy]));              \
    } while (0)
#define F32_ADD(p, q) ((p) + (q))
#define F32_SUB(p, q) ((p) - (q))
#define F32_MUL(p, q) ((p) * (q))
#define F32_DIV(p, q) ((p) / (q))

/* The vectorizable path: o, x, y float32; x, y contiguous (sx/sy == 1) or
 * broadcast scalars (0).  Splitting by (sx, sy) lets each loop have
 * constant strides. */
/* No restrict: in-place ops pass the same memory as o and x (exactly
 * aliased, which is fine element by element); GCC still vectorizes, with a
 * runtime overlap check. */
static void f32_binary(tp_binary_op op, float *o, const float *x, int64_t sx, const float *y, int64_t sy,
                       int64_t n) {
#define DISPATCH(SX, SY)                                                      \
    do {                                                                      \
        const int64_t sx_ = (SX), sy_ = (SY);                                 \
        (void)sx_; (void)sy_;                                                 \
        switch (op) {                                                         \
        case TP_BINARY_OP_ADD: { const int64_t sx = sx_, sy = sy_; F32_LOOP(F32_ADD); } break; \
        case TP_BINARY_OP_SUB: { const int64_t sx = sx_, sy = sy_; F32_LOOP(F32_SUB); } break; \
        case TP_BINARY_OP_MUL: { const int64_t sx = sx_, sy = sy_; F32_LOOP(F32_MUL); } break; \
        default:               { const int64_t sx = sx_, sy = sy_; F32_LOOP(F32_DIV); } break; \
        }                                                                     \
    } while (0)
    if (sx == 1 && sy == 1) DISPATCH(1, 1);
    else if (sx == 1) DISPATCH(1, 0);
    else DISPATCH(0, 1);
#undef DISPATCH
}

static bool f32_ok(const char *p, int64_t stride) {
    return ((uintptr_t)p % sizeof(float)) == 0 && (stride == 4 || stride == 0);
}

static void binary_loop(char **ptrs, const int64_t *strides, int64_t n, void *vctx) {
    const binary_ctx *c = vctx;
    if (c->fast_f32 && strides[0] == 4 && ((uintptr_t)ptrs[0] % 4) == 0 && f32_ok(ptrs[1], strides[1]) &&
        f32_ok(ptrs[2], strides[2]) && (strides[1] | strides[2]) != 0) {
        f32_binary(c->op, (float *)ptrs[0], (const float *)ptrs[1], strides[1] / 4,
                   (const float *)ptrs[2], strides[2] / 4, n);
        return;
    }
    bool fp = tp_dtype_is_floating(c->compute);
    for (int64_t off = 0; off < n; off += TP__CHUNK) {
        int64_t m = n - off < TP__CHUNK ? n - off : TP__CHUNK;
        char *o = ptrs[0] + off * strides[0];
        const char *pa = ptrs[1] + off * strides[1], *pb = ptrs[2] + off * strides[2];
        if (fp) {
            double x[TP__CHUNK], y[TP__CHUNK];
            tp__load_f64(x, pa, strides[1], m, c->a);
            tp__load_f64(y, pb, strides[2], m, c->b);
            if (c->a != c->compute) round_to(x, m, c->compute);
            if (c->b != c->compute) round_to(y, m, c->compute);
            binary_f64(c->op, x, y, m);
            tp__store_f64(o, strides[0], x, m, c->out);
        } else {
            int64_t x[TP__CHUNK], y[TP__CHUNK];
            tp__load_i64(x, pa, strides[1], m, c->a);
            tp__load_i64(y, pb, strides[2], m, c->b);
            binary_i64(c->op, x, y, m);
            tp__store_i64(o, strides[0], x, m, c->out);
        }
    }
}

/* out = a op b over `shape` (out already has it).  No checks. */
static void binary_run(tp_binary_op op, const tp__view *out, const tp__view *a, const tp__view *b,
                       tp_dtype compute) {
    binary_ctx c = {.op = op, .out = out->dtype, .a = a->dtype, .b = b->dtype, .compute = compute};
    c.fast_f32 = op <= TP_BINARY_OP_DIV && c.out == TP_DTYPE_FLOAT32 && c.a == TP_DTYPE_FLOAT32 &&
                 c.b == TP_DTYPE_FLOAT32 && compute == TP_DTYPE_FLOAT32;
    tp__view ops[3] = {*out, *a, *b};
    tp__iter it;
    tp__iter_init(&it, out->ndim, out->sizes, 3, ops);
    if (it.numel > 0) tp__iter_run(&it, binary_loop, &c);
}

// ----------------------------------------------------------------------------
// binary: dtype rules and checks

/* The dtype an op computes in and the dtype it produces; fails for bool
 * subtraction.  `compute` is the promoted operand dtype. */
static tp_status binary_dtypes(tp_binary_op op, tp_dtype compute, bool both_bool, tp_dtype *out_dtype,
                               tp_dtype *compute_out) {
    if ((unsigned)op >= TP_BINARY_OP_COUNT)
        return tp__error(TP_STATUS_INVALID_ARGUMENT, "binary op: invalid op %d", (int)op);
    if (op == TP_BINARY_OP_SUB && both_bool)
        return tp__error(TP_STATUS_INVALID_ARGUMENT,
                         "Subtraction, the `-` operator, with two bool tensors is not supported. "
                         "Use the `^` or `logical_xor()` operator instead.");
    /* true division: integral operands divide in the default float dtype */
    if (op == TP_BINARY_OP_DIV && !tp_dtype_is_floating(compute)) compute = TP_DTYPE_FLOAT32;
    *compute_out = compute;
    *out_dtype = is_comparison(op) ? TP_DTYPE_BOOL : compute;
    return TP_STATUS_OK;
}

static tp_status check_operand(const char *name, const tp_tensor *t) {
    if (!t) return tp__error(TP_STATUS_INVALID_ARGUMENT, "%s(): tensor is NULL", name);
    return TP_STATUS_OK;
}

tp_tensor *tp_binary(tp_binary_op op, const tp_tensor *a, const tp_tensor *b) {
    const char *name = binary_name(op);
    if (check_operand(name, a) || check_operand(name, b)) return NULL;
    tp_device dev;
    if (tp__same_device(2, (const tp_tensor *[]){a, b}, &dev)) return NULL;
    tp_dtype out_dtype, compute;
    if (binary_dtypes(op, tp__result_dtype(a, b), a->dtype == TP_DTYPE_BOOL && b->dtype == TP_DTYPE_BOOL,
                      &out_dtype, &compute) != TP_STATUS_OK)
        return NULL;
    int n;
    int64_t shape[TP_MAX_DIMS];
    if (tp__broadcast_shape(a->ndim, a->sizes, b->ndim, b->sizes, &n, shape) != TP_STATUS_OK) return NULL;
    tp_tensor *out = tp__empty_device(dev, n, shape, out_dtype);
    if (!out) return NULL;
    tp__view ov = tp__view_of(out), av = tp__view_of(a), bv = tp__view_of(b);
    if (tp__is_cpu(dev)) binary_run(op, &ov, &av, &bv, compute);
    else if (tp__dev_binary(dev, op, &ov, &av, &bv, compute)) tp_tensor_release(out), out = NULL;
    return out;
}

/* Checks that an in-place result of `result` dtype and `shape` fits a. */
static tp_status check_inplace(tp_tensor *a, tp_dtype result, int n, const int64_t *shape) {
    if (!tp__can_cast(result, a->dtype))
        return tp__error(TP_STATUS_INVALID_ARGUMENT,
                         "result type %s can't be cast to the desired output type %s",
                         tp__dtype_scalar_name(result), tp__dtype_scalar_name(a->dtype));
    if (!tp__shape_equal(n, shape, a->ndim, a->sizes)) {
        char s1[128], s2[128];
        tp__format_shape(a->ndim, a->sizes, s1, sizeof s1);
        tp__format_shape(n, shape, s2, sizeof s2);
        return tp__error(TP_STATUS_INVALID_ARGUMENT,
                         "output with shape %s doesn't match the broadcast shape %s", s1, s2);
    }
    tp__view av = tp__view_of(a);
    if (tp__view_has_internal_overlap(&av))
        return tp__error(TP_STATUS_INVALID_ARGUMENT,
                         "unsupported operation: more than one element of the written-to tensor "
                         "refers to a single memory location. Please clone() the tensor before "
                         "performing the operation.");
    return TP_STATUS_OK;
}

/* True when in (broadcast to out's shape) reads exactly the element each
 * output position writes, so an in-place op needs no copy. */
static bool same_elements(const tp__view *out, const tp__view *in) {
    if (out->data != in->data || out->dtype != in->dtype || out->ndim != in->ndim) return false;
    for (int d = 0; d < out->ndim; d++)
        if (out->sizes[d] > 1 && (in->sizes[d] != out->sizes[d] || in->strides[d] != out->strides[d]))
            return false;
    return true;
}

tp_status tp_binary_(tp_binary_op op, tp_tensor *a, const tp_tensor *b) {
    const char *name = binary_name(op);
    tp_status st;
    if ((st = check_operand(name, a)) || (st = check_operand(name, b))) return st;
    tp_device dev;
    if ((st = tp__same_device(2, (const tp_tensor *[]){a, b}, &dev))) return st;
    tp_dtype out_dtype, compute;
    st = binary_dtypes(op, tp__result_dtype(a, b),
                       a->dtype == TP_DTYPE_BOOL && b->dtype == TP_DTYPE_BOOL, &out_dtype, &compute);
    if (st) return st;
    int n;
    int64_t shape[TP_MAX_DIMS];
    if ((st = tp__broadcast_shape(a->ndim, a->sizes, b->ndim, b->sizes, &n, shape))) return st;
    if ((st = check_inplace(a, out_dtype, n, shape))) return st;
    tp__view av = tp__view_of(a), bv = tp__view_of(b);
    tp_tensor *tmp = NULL;
    if (tp__views_may_overlap(&av, &bv) && !same_elements(&av, &bv)) {
        tmp = tp_clone(b);
        if (!tmp) return tp_last_status();
        bv = tp__view_of(tmp);
    }
    if (tp__is_cpu(dev)) binary_run(op, &av, &av, &bv, compute);
    else if ((st = tp__dev_binary(dev, op, &av, &av, &bv, compute))) return tp_tensor_release(tmp), st;
    tp_tensor_release(tmp);
    tp_tensor_bump_version(a);
    return TP_STATUS_OK;
}

// ----------------------------------------------------------------------------
// binary with a scalar

/* A 0-d view of a scalar held in *slot, in the compute class. */
static tp__view scalar_view(double value, bool integral, void *slot) {
    tp__view v = {.data = slot, .ndim = 0};
    if (integral) {
        int64_t i = tp__f64_to_i64(value);
        memcpy(slot, &i, sizeof i);
        v.dtype = TP_DTYPE_INT64;
    } else {
        memcpy(slot, &value, sizeof value);
        v.dtype = TP_DTYPE_FLOAT64;
    }
    return v;
}

/* PyTorch's rule for a tensor and a Python number (a wrapped scalar). */
static tp_status scalar_dtypes(tp_binary_op op, tp_dtype a, double b, tp_dtype *out_dtype,
                               tp_dtype *compute, bool *integral_scalar) {
    bool integral = b == floor(b) && fabs(b) < 9.2e18;
    tp_dtype promoted;
    if (tp_dtype_is_floating(a)) promoted = a;
    else if (!integral) promoted = TP_DTYPE_FLOAT32;
    else if (a == TP_DTYPE_BOOL) promoted = TP_DTYPE_INT64;
    else promoted = a;
    if (op == TP_BINARY_OP_POW && !tp_dtype_is_floating(promoted) && b < 0)
        return tp__error(TP_STATUS_INVALID_ARGUMENT, "Integers to negative integer powers are not allowed.");
    tp_status st = binary_dtypes(op, promoted, false, out_dtype, compute);
    *integral_scalar = !tp_dtype_is_floating(*compute);
    return st;
}

tp_tensor *tp_binary_scalar(tp_binary_op op, const tp_tensor *a, double b) {
    if (check_operand(binary_name(op), a)) return NULL;
    tp_dtype out_dtype, compute;
    bool integral;
    if (scalar_dtypes(op, a->dtype, b, &out_dtype, &compute, &integral)) return NULL;
    tp_tensor *out = tp__empty_device(a->device, a->ndim, a->sizes, out_dtype);
    if (!out) return NULL;
    double slot;
    tp__view ov = tp__view_of(out), av = tp__view_of(a), bv = scalar_view(b, integral, &slot);
    if (tp__is_cpu(a->device)) binary_run(op, &ov, &av, &bv, compute);
    else if (tp__dev_binary_scalar(a->device, op, &ov, &av, b, integral, compute))
        tp_tensor_release(out), out = NULL;
    return out;
}

tp_status tp_binary_scalar_(tp_binary_op op, tp_tensor *a, double b) {
    tp_status st;
    if ((st = check_operand(binary_name(op), a))) return st;
    tp_dtype out_dtype, compute;
    bool integral;
    if ((st = scalar_dtypes(op, a->dtype, b, &out_dtype, &compute, &integral))) return st;
    if ((st = check_inplace(a, out_dtype, a->ndim, a->sizes))) return st;
    double slot;
    tp__view av = tp__view_of(a), bv = scalar_view(b, integral, &slot);
    if (tp__is_cpu(a->device)) binary_run(op, &av, &av, &bv, compute);
    else if ((st = tp__dev_binary_scalar(a->device, op, &av, &av, b, integral, compute))) return st;
    tp_tensor_bump_version(a);
    return TP_STATUS_OK;
}

// ----------------------------------------------------------------------------
// unary

typedef struct unary_ctx {
    tp_unary_op op;
    tp_dtype out, in, compute;
} unary_ctx;

static inline float unary_f32_one(tp_unary_op op, float x) {
    switch (op) {
    case TP_UNARY_OP_NEG: return -x;
    case TP_UNARY_OP_ABS: return fabsf(x);
    case TP_UNARY_OP_EXP: return expf(x);
    case TP_UNARY_OP_LOG: return logf(x);
    case TP_UNARY_OP_SQRT: return sqrtf(x);
    case TP_UNARY_OP_RELU: return x < 0 ? 0.0f : x;
    case TP_UNARY_OP_TANH: return tanhf(x);
    default: return 1.0f / (1.0f + expf(-x));
    }
}

/* float32 -> float32 computes in float (as PyTorch does) for every layout,
 * so a result never depends on the operand's strides. */
static void unary_f32(tp_unary_op op, char *o, int64_t so, const char *p, int64_t sp, int64_t n) {
    if (so == 4 && sp == 4 && (uintptr_t)o % 4 == 0 && (uintptr_t)p % 4 == 0) {
        float *out = (float *)(void *)o; /* may be in: in-place ops */
        const float *in = (const float *)(const void *)p;
        /* blocks of 8 as in F32_LOOP: vectorized, and safe when out == in */
#define F32_UNARY_LOOP(EXPR)                                                  \
    do {                                                                      \
        int64_t i = 0;                                                        \
        for (; i + 8 <= n; i += 8) {                                          \
            float v[8];                                                       \
            for (int j = 0; j < 8; j++) v[j] = in[i + j];                     \
            for (int j = 0; j < 8; j++) out[i + j] = EXPR(v[j]);              \
        }                                                                     \
        for (; i < n; i++) out[i] = EXPR(in[i]);                              \
    } while (0)
#define NEG_(v) (-(v))
#define RELU_(v) ((v) < 0 ? 0.0f : (v))
        switch (op) {
        case TP_UNARY_OP_NEG: F32_UNARY_LOOP(NEG_); return;
        case TP_UNARY_OP_ABS: F32_UNARY_LOOP(fabsf); return;
        case TP_UNARY_OP_RELU: F32_UNARY_LOOP(RELU_); return;
        default: for (int64_t i = 0; i < n; i++) out[i] = unary_f32_one(op, in[i]); return;
        }
#undef NEG_
#undef RELU_
#undef F32_UNARY_LOOP
    }
    for (int64_t i = 0; i < n; i++) {
        float x;
        memcpy(&x, p + i * sp, 4);
        x = unary_f32_one(op, x);
        memcpy(o + i * so, &x, 4);
    }
}

static void unary_loop(char **ptrs, const int64_t *strides, int64_t n, void *vctx) {
    const unary_ctx *c = vctx;
    if (c->in == TP_DTYPE_FLOAT32 && c->out == TP_DTYPE_FLOAT32) {
        unary_f32(c->op, ptrs[0], strides[0], ptrs[1], strides[1], n);
        return;
    }
    bool fp = tp_dtype_is_floating(c->compute);
    for (int64_t off = 0; off < n; off += TP__CHUNK) {
        int64_t m = n - off < TP__CHUNK ? n - off : TP__CHUNK;
        char *o = ptrs[0] + off * strides[0];
        const char *p = ptrs[1] + off * strides[1];
        if (fp) {
            double x[TP__CHUNK];
            tp__load_f64(x, p, strides[1], m, c->in);
            unary_f64(c->op, x, m);
            tp__store_f64(o, strides[0], x, m, c->out);
        } else {
            int64_t x[TP__CHUNK];
            tp__load_i64(x, p, strides[1], m, c->in);
            unary_i64(c->op, x, m);
            tp__store_i64(o, strides[0], x, m, c->out);
        }
    }
}

static tp_status unary_dtype(tp_unary_op op, tp_dtype in, tp_dtype *out) {
    if ((unsigned)op >= TP_UNARY_OP_COUNT)
        return tp__error(TP_STATUS_INVALID_ARGUMENT, "unary op: invalid op %d", (int)op);
    if (op == TP_UNARY_OP_NEG && in == TP_DTYPE_BOOL)
        return tp__error(TP_STATUS_INVALID_ARGUMENT,
                         "Negation, the `-` operator, on a bool tensor is not supported. If you are "
                         "trying to invert a mask, use the `~` or `logical_not()` operator instead.");
    bool float_op = op == TP_UNARY_OP_EXP || op == TP_UNARY_OP_LOG || op == TP_UNARY_OP_SQRT ||
                    op == TP_UNARY_OP_TANH || op == TP_UNARY_OP_SIGMOID;
    *out = float_op && !tp_dtype_is_floating(in) ? TP_DTYPE_FLOAT32 : in;
    return TP_STATUS_OK;
}

static void unary_run(tp_unary_op op, const tp__view *out, const tp__view *in, tp_dtype compute) {
    unary_ctx c = {.op = op, .out = out->dtype, .in = in->dtype, .compute = compute};
    tp__view ops[2] = {*out, *in};
    tp__iter it;
    tp__iter_init(&it, out->ndim, out->sizes, 2, ops);
    if (it.numel > 0) tp__iter_run(&it, unary_loop, &c);
}

tp_tensor *tp_unary(tp_unary_op op, const tp_tensor *a) {
    if (check_operand(unary_name(op), a)) return NULL;
    tp_dtype out_dtype;
    if (unary_dtype(op, a->dtype, &out_dtype)) return NULL;
    tp_tensor *out = tp__empty_device(a->device, a->ndim, a->sizes, out_dtype);
    if (!out) return NULL;
    tp__view ov = tp__view_of(out), av = tp__view_of(a);
    if (tp__is_cpu(a->device)) unary_run(op, &ov, &av, out_dtype);
    else if (tp__dev_unary(a->device, op, &ov, &av, out_dtype)) tp_tensor_release(out), out = NULL;
    return out;
}

tp_status tp_unary_(tp_unary_op op, tp_tensor *a) {
    tp_status st;
    if ((st = check_operand(unary_name(op), a))) return st;
    tp_dtype out_dtype;
    if ((st = unary_dtype(op, a->dtype, &out_dtype))) return st;
    if ((st = check_inplace(a, out_dtype, a->ndim, a->sizes))) return st;
    tp__view av = tp__view_of(a);
    if (tp__is_cpu(a->device)) unary_run(op, &av, &av, out_dtype);
    else if ((st = tp__dev_unary(a->device, op, &av, &av, out_dtype))) return st;
    tp_tensor_bump_version(a);
    return TP_STATUS_OK;
}

// ----------------------------------------------------------------------------
// where

typedef struct where_ctx {
    tp_dtype out, a, b;
} where_ctx;

static void where_loop(char **ptrs, const int64_t *strides, int64_t n, void *vctx) {
    const where_ctx *c = vctx;
    bool fp = tp_dtype_is_floating(c->out);
    for (int64_t off = 0; off < n; off += TP__CHUNK) {
        int64_t m = n - off < TP__CHUNK ? n - off : TP__CHUNK;
        int64_t cond[TP__CHUNK];
        tp__load_i64(cond, ptrs[1] + off * strides[1], strides[1], m, TP_DTYPE_BOOL);
        const char *pa = ptrs[2] + off * strides[2], *pb = ptrs[3] + off * strides[3];
        char *o = ptrs[0] + off * strides[0];
        if (fp) {
            double x[TP__CHUNK], y[TP__CHUNK];
            tp__load_f64(x, pa, strides[2], m, c->a);
            tp__load_f64(y, pb, strides[3], m, c->b);
            for (int64_t i = 0; i < m; i++) x[i] = cond[i] ? x[i] : y[i];
            tp__store_f64(o, strides[0], x, m, c->out);
        } else {
            int64_t x[TP__CHUNK], y[TP__CHUNK];
            tp__load_i64(x, pa, strides[2], m, c->a);
            tp__load_i64(y, pb, strides[3], m, c->b);
            for (int64_t i = 0; i < m; i++) x[i] = cond[i] ? x[i] : y[i];
            tp__store_i64(o, strides[0], x, m, c->out);
        }
    }
}

tp_tensor *tp_where(const tp_tensor *cond, const tp_tensor *a, const tp_tensor *b) {
    if (check_operand("where", cond) || check_operand("where", a) || check_operand("where", b)) return NULL;
    tp_device dev;
    if (tp__same_device(3, (const tp_tensor *[]){cond, a, b}, &dev) || tp__cpu_only("where", a))
        return NULL;
    if (cond->dtype != TP_DTYPE_BOOL) {
        tp__error(TP_STATUS_INVALID_ARGUMENT,
                  "where expected condition to be a boolean tensor, but got a tensor with dtype %s",
                  tp__dtype_scalar_name(cond->dtype));
        return NULL;
    }
    int n1, n;
    int64_t s1[TP_MAX_DIMS], shape[TP_MAX_DIMS];
    if (tp__broadcast_shape(cond->ndim, cond->sizes, a->ndim, a->sizes, &n1, s1) ||
        tp__broadcast_shape(n1, s1, b->ndim, b->sizes, &n, shape))
        return NULL;
    tp_dtype out_dtype = tp__result_dtype(a, b);
    tp_tensor *out = tp_empty(n, shape, out_dtype);
    if (!out) return NULL;
    where_ctx c = {out_dtype, a->dtype, b->dtype};
    tp__view ops[4] = {tp__view_of(out), tp__view_of(cond), tp__view_of(a), tp__view_of(b)};
    tp__iter it;
    tp__iter_init(&it, n, shape, 4, ops);
    if (it.numel > 0) tp__iter_run(&it, where_loop, &c);
    return out;
}

// ----------------------------------------------------------------------------
// named wrappers

tp_tensor *tp_add(const tp_tensor *a, const tp_tensor *b) { return tp_binary(TP_BINARY_OP_ADD, a, b); }
tp_tensor *tp_sub(const tp_tensor *a, const tp_tensor *b) { return tp_binary(TP_BINARY_OP_SUB, a, b); }
tp_tensor *tp_mul(const tp_tensor *a, const tp_tensor *b) { return tp_binary(TP_BINARY_OP_MUL, a, b); }
tp_tensor *tp_div(const tp_tensor *a, const tp_tensor *b) { return tp_binary(TP_BINARY_OP_DIV, a, b); }
tp_tensor *tp_pow(const tp_tensor *a, const tp_tensor *b) { return tp_binary(TP_BINARY_OP_POW, a, b); }
tp_tensor *tp_neg(const tp_tensor *a) { return tp_unary(TP_UNARY_OP_NEG, a); }
tp_tensor *tp_abs(const tp_tensor *a) { return tp_unary(TP_UNARY_OP_ABS, a); }
tp_tensor *tp_exp(const tp_tensor *a) { return tp_unary(TP_UNARY_OP_EXP, a); }
tp_tensor *tp_log(const tp_tensor *a) { return tp_unary(TP_UNARY_OP_LOG, a); }
tp_tensor *tp_sqrt(const tp_tensor *a) { return tp_unary(TP_UNARY_OP_SQRT, a); }
tp_tensor *tp_relu(const tp_tensor *a) { return tp_unary(TP_UNARY_OP_RELU, a); }
tp_tensor *tp_tanh(const tp_tensor *a) { return tp_unary(TP_UNARY_OP_TANH, a); }
tp_tensor *tp_sigmoid(const tp_tensor *a) { return tp_unary(TP_UNARY_OP_SIGMOID, a); }
tp_status tp_add_(tp_tensor *a, const tp_tensor *b) { return tp_binary_(TP_BINARY_OP_ADD, a, b); }
tp_status tp_sub_(tp_tensor *a, const tp_tensor *b) { return tp_binary_(TP_BINARY_OP_SUB, a, b); }
tp_status tp_mul_(tp_tensor *a, const tp_tensor *b) { return tp_binary_(TP_BINARY_OP_MUL, a, b); }
tp_status tp_div_(tp_tensor *a, const tp_tensor *b) { return tp_binary_(TP_BINARY_OP_DIV, a, b); }
tp_status tp_relu_(tp_tensor *a) { return tp_unary_(TP_UNARY_OP_RELU, a); }
