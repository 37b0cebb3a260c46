// src/cuda/kernels.cu - the device code of libtensorplay's CUDA ops.
//
// Compiled by nvcc into a fatbin that is embedded in the library and loaded
// at run time with cudaLibraryLoadData (see launch.c), so every kernel is
// extern "C" (looked up by name) and takes plain arguments.  One generic
// path per op family: operands are read through element strides (views,
// broadcasts with stride 0, transposes), converted to double (floating
// compute) or int64 (integral compute) and stored in the output dtype,
// exactly as the CPU kernels of src/ops do.  float32 contiguous binary ops
// have a plain fast path.  What this file leaves out: vectorized loads,
// half-precision arithmetic, tensor cores (matmul is cuBLAS's).
#include <stdint.h>
#include <math.h>

#define MAXD 8

// dtype codes: tp_dtype's values
enum { F32 = 0, F64, F16, BF16, I8, I16, I32, I64, U8, BOOL };
// tp_binary_op / tp_unary_op values
enum { ADD = 0, SUB, MUL, DIV, POW, EQ, NE, LT, LE, GT, GE };
enum { NEG = 0, ABS, EXP, LOG, SQRT, RELU, TANH, SIGMOID };

struct Geom {            // the iteration shape and each operand's strides (elements)
    int ndim;
    long long sizes[MAXD];
    long long st[3][MAXD];
};

struct RGeom {           // reduction: kept dims (outputs) and folded dims
    int nk, nr;
    long long ksizes[MAXD], kst_out[MAXD], kst_in[MAXD];
    long long rsizes[MAXD], rst_in[MAXD];
    long long rn;        // elements folded into each output
};

// ---------------------------------------------------------------------------
// dtype conversion

__device__ inline float half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0) {
        if (man == 0) bits = sign;
        else {  // subnormal
            exp = 127 - 15 + 1;
            while (!(man & 0x400)) { man <<= 1; exp--; }
            man &= 0x3ff;
            bits = sign | (exp << 23) | (man << 13);
        }
    } else if (exp == 31) bits = sign | 0x7f800000 | (man << 13);
    else bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
    return __uint_as_float(bits);
}

__device__ inline uint16_t float_to_half(float f) {
    uint32_t x = __float_as_uint(f), sign = (x >> 16) & 0x8000;
    uint32_t ax = x & 0x7fffffff;
    if (ax >= 0x7f800000) return (uint16_t)(sign | 0x7c00 | (ax > 0x7f800000 ? 0x200 : 0));
    if (ax >= 0x477ff000) return (uint16_t)(sign | 0x7c00);          // overflow -> inf
    if (ax < 0x38800000) {                                            // subnormal or zero
        if (ax < 0x33000000) return (uint16_t)sign;
        uint32_t e = ax >> 23, m = (ax & 0x7fffff) | 0x800000;
        uint32_t shift = 126 - e;                                     // 14..24
        uint32_t v = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (v & 1))) v++;
        return (uint16_t)(sign | v);
    }
    uint32_t v = ((ax - 0x38000000) >> 13), rem = ax & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (v & 1))) v++;
    return (uint16_t)(sign | v);
}

__device__ inline float bf16_to_float(uint16_t b) { return __uint_as_float((uint32_t)b << 16); }

__device__ inline uint16_t float_to_bf16(float f) {
    uint32_t x = __float_as_uint(f);
    if ((x & 0x7fffffff) > 0x7f800000) return (uint16_t)((x >> 16) | 0x40);
    x += 0x7fff + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

__device__ inline bool is_fp(int dt) { return dt <= BF16; }

__device__ double ld_f(const char *p, int dt, long long i) {
    switch (dt) {
    case F32: return ((const float *)p)[i];
    case F64: return ((const double *)p)[i];
    case F16: return half_to_float(((const uint16_t *)p)[i]);
    case BF16: return bf16_to_float(((const uint16_t *)p)[i]);
    case I8: return ((const int8_t *)p)[i];
    case I16: return ((const int16_t *)p)[i];
    case I32: return ((const int32_t *)p)[i];
    case I64: return (double)((const long long *)p)[i];
    case U8: return ((const uint8_t *)p)[i];
    default: return ((const uint8_t *)p)[i] != 0;
    }
}

// float -> int64 as the CPU does (tp__f64_to_i64): truncate, NaN -> 0, saturate
__device__ inline long long f_to_i(double x) {
    if (x != x) return 0;
    if (x >= 9.2233720368547758e18) return 0x7fffffffffffffffLL;
    if (x <= -9.2233720368547758e18) return (long long)0x8000000000000000ULL;
    return (long long)x;
}

__device__ long long ld_i(const char *p, int dt, long long i) {
    switch (dt) {
    case I8: return ((const int8_t *)p)[i];
    case I16: return ((const int16_t *)p)[i];
    case I32: return ((const int32_t *)p)[i];
    case I64: return ((const long long *)p)[i];
    case U8: return ((const uint8_t *)p)[i];
    case BOOL: return ((const uint8_t *)p)[i] != 0;
    default: return f_to_i(ld_f(p, dt, i));
    }
}

__device__ void st_i(char *p, int dt, long long i, long long v) {
    switch (dt) {
    case I8: ((int8_t *)p)[i] = (int8_t)v; break;
    case I16: ((int16_t *)p)[i] = (int16_t)v; break;
    case I32: ((int32_t *)p)[i] = (int32_t)v; break;
    case I64: ((long long *)p)[i] = v; break;
    case U8: ((uint8_t *)p)[i] = (uint8_t)v; break;
    case BOOL: ((uint8_t *)p)[i] = v != 0; break;
    case F32: ((float *)p)[i] = (float)v; break;
    case F64: ((double *)p)[i] = (double)v; break;
    case F16: ((uint16_t *)p)[i] = float_to_half((float)v); break;
    default: ((uint16_t *)p)[i] = float_to_bf16((float)v); break;
    }
}

__device__ void st_f(char *p, int dt, long long i, double v) {
    switch (dt) {
    case F32: ((float *)p)[i] = (float)v; break;
    case F64: ((double *)p)[i] = v; break;
    case F16: ((uint16_t *)p)[i] = float_to_half((float)v); break;
    case BF16: ((uint16_t *)p)[i] = float_to_bf16((float)v); break;
    case BOOL: ((uint8_t *)p)[i] = v != 0; break;
    default: st_i(p, dt, i, f_to_i(v)); break;
    }
}

// rounds a double to what compute dtype `dt` holds (the CPU's round_to)
__device__ inline double round_to(double x, int dt) {
    switch (dt) {
    case F32: return (float)x;
    case F16: return half_to_float(float_to_half((float)x));
    case BF16: return bf16_to_float(float_to_bf16((float)x));
    default: return x;
    }
}

// linear index -> element offsets of up to three operands
__device__ inline void offsets(const Geom &g, long long lin, long long *o, int nops) {
    for (int k = 0; k < nops; k++) o[k] = 0;
    for (int d = g.ndim - 1; d >= 0; d--) {
        long long sz = g.sizes[d], idx = lin % sz;
        lin /= sz;
        for (int k = 0; k < nops; k++) o[k] += idx * g.st[k][d];
    }
}

#define GRID_LOOP(i, n) \
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < (n); \
         i += (long long)blockDim.x * gridDim.x)

// ---------------------------------------------------------------------------
// fill, copy and cast

extern "C" __global__ void tp_k_fill(Geom g, long long n, char *o, int od, double v) {
    GRID_LOOP(i, n) {
        long long off[1];
        offsets(g, i, off, 1);
        if (is_fp(od) || od == BOOL) st_f(o, od, off[0], v);
        else st_i(o, od, off[0], f_to_i(v));
    }
}

extern "C" __global__ void tp_k_copy(Geom g, long long n, char *o, int od, const char *a, int ad) {
    GRID_LOOP(i, n) {
        long long off[2];
        offsets(g, i, off, 2);
        if (is_fp(ad)) st_f(o, od, off[0], ld_f(a, ad, off[1]));
        else st_i(o, od, off[0], ld_i(a, ad, off[1]));
    }
}

// ---------------------------------------------------------------------------
// elementwise

__device__ inline long long ipow(long long base, long long e) {
    if (e < 0) return base == 1 ? 1 : base == -1 ? (e % 2 ? -1 : 1) : 0;
    unsigned long long r = 1, b = (unsigned long long)base;
    while (e) {
        if (e & 1) r *= b;
        b *= b;
        e >>= 1;
    }
    return (long long)r;
}

__device__ inline double bin_f(int op, double x, double y) {
    switch (op) {
    case ADD: return x + y;
    case SUB: return x - y;
    case MUL: return x * y;
    case DIV: return x / y;
    case POW: return pow(x, y);
    case EQ: return x == y;
    case NE: return x != y;
    case LT: return x < y;
    case LE: return x <= y;
    case GT: return x > y;
    default: return x >= y;
    }
}

__device__ inline long long bin_i(int op, long long x, long long y) {
    typedef unsigned long long u;
    switch (op) {
    case ADD: return (long long)((u)x + (u)y);
    case SUB: return (long long)((u)x - (u)y);
    case MUL: return (long long)((u)x * (u)y);
    case POW: return ipow(x, y);
    case EQ: return x == y;
    case NE: return x != y;
    case LT: return x < y;
    case LE: return x <= y;
    case GT: return x > y;
    case GE: return x >= y;
    default: return 0;  // DIV never computes in an integral dtype
    }
}

// b == NULL: b is the scalar (bf as double, bi as int64)
extern "C" __global__ void tp_k_binary(Geom g, long long n, int op, int compute, char *o, int od,
                                       const char *a, int ad, const char *b, int bd, double bf,
                                       long long bi) {
    bool fp = is_fp(compute);
    GRID_LOOP(i, n) {
        long long off[3];
        offsets(g, i, off, 3);
        if (fp) {
            double x = round_to(ld_f(a, ad, off[1]), compute);
            double y = b ? round_to(ld_f(b, bd, off[2]), compute) : bf;
            double r = bin_f(op, x, y);
            if (op < EQ) r = round_to(r, compute);
            st_f(o, od, off[0], r);
        } else {
            long long x = ld_i(a, ad, off[1]);
            long long y = b ? ld_i(b, bd, off[2]) : bi;
            st_i(o, od, off[0], bin_i(op, x, y));
        }
    }
}

// float32 contiguous (or scalar-broadcast b) add/sub/mul/div
extern "C" __global__ void tp_k_binary_f32(long long n, int op, float *o, const float *a,
                                           const float *b, long long sb, float bs) {
    GRID_LOOP(i, n) {
        float x = a[i], y = b ? b[i * sb] : bs;
        float r = op == ADD ? x + y : op == SUB ? x - y : op == MUL ? x * y : x / y;
        o[i] = r;
    }
}

__device__ inline double un_f(int op, double x) {
    switch (op) {
    case NEG: return -x;
    case ABS: return fabs(x);
    case EXP: return exp(x);
    case LOG: return log(x);
    case SQRT: return sqrt(x);
    case RELU: return x < 0 ? 0.0 : x;
    case TANH: return tanh(x);
    default: return 1.0 / (1.0 + exp(-x));
    }
}

__device__ inline float un_f32(int op, float x) {
    switch (op) {
    case NEG: return -x;
    case ABS: return fabsf(x);
    case EXP: return expf(x);
    case LOG: return logf(x);
    case SQRT: return sqrtf(x);
    case RELU: return x < 0 ? 0.0f : x;
    case TANH: return tanhf(x);
    default: return 1.0f / (1.0f + expf(-x));
    }
}

extern "C" __global__ void tp_k_unary(Geom g, long long n, int op, int compute, char *o, int od,
                                      const char *a, int ad) {
    GRID_LOOP(i, n) {
        long long off[2];
        offsets(g, i, off, 2);
        if (ad == F32 && od == F32) {
            ((float *)o)[off[0]] = un_f32(op, ((const float *)a)[off[1]]);
        } else if (is_fp(compute)) {
            st_f(o, od, off[0], un_f(op, ld_f(a, ad, off[1])));
        } else {
            long long x = ld_i(a, ad, off[1]);
            long long r = op == NEG ? (long long)(0ULL - (unsigned long long)x)
                        : op == ABS ? (x < 0 ? (long long)(0ULL - (unsigned long long)x) : x)
                        : (x < 0 ? 0 : x);
            st_i(o, od, off[0], r);
        }
    }
}

// ---------------------------------------------------------------------------
// reductions: one block per output element, threads stride over the folded
// elements and combine in shared memory.  kind: 0 sum, 1 mean, 2 max,
// 3 min, 4 argmax.  Sums accumulate in double (floating) or int64.

#define RBLOCK 256

extern "C" __global__ void tp_k_reduce(RGeom g, long long nout, int kind, char *o, int od,
                                       const char *a, int ad) {
    __shared__ double sv[RBLOCK];
    __shared__ long long si[RBLOCK];
    __shared__ long long sidx[RBLOCK];
    bool fp = is_fp(ad) || kind == 1;
    for (long long out = blockIdx.x; out < nout; out += gridDim.x) {
        long long rest = out, base_in = 0, base_out = 0;
        for (int d = g.nk - 1; d >= 0; d--) {
            long long idx = rest % g.ksizes[d];
            rest /= g.ksizes[d];
            base_in += idx * g.kst_in[d];
            base_out += idx * g.kst_out[d];
        }
        double acc = kind == 2 || kind == 4 ? -INFINITY : kind == 3 ? INFINITY : 0.0;
        long long iacc = kind == 2 || kind == 4 ? (long long)0x8000000000000000ULL
                       : kind == 3 ? 0x7fffffffffffffffLL : 0;
        long long best = -1;
        bool nan = false;
        for (long long r = threadIdx.x; r < g.rn; r += blockDim.x) {
            long long rest2 = r, off = base_in;
            for (int d = g.nr - 1; d >= 0; d--) {
                off += (rest2 % g.rsizes[d]) * g.rst_in[d];
                rest2 /= g.rsizes[d];
            }
            if (fp) {
                double x = ld_f(a, ad, off);
                if (kind <= 1) acc += x;
                else if (x != x) { if (!nan) { nan = true; acc = x; best = r; } }
                else if (!nan && (kind == 3 ? x < acc : x > acc || best < 0)) { acc = x; best = r; }
            } else {
                long long x = ld_i(a, ad, off);
                if (kind <= 1) iacc += x;
                else if (kind == 3 ? x < iacc : x > iacc || best < 0) { iacc = x; best = r; }
            }
        }
        sv[threadIdx.x] = nan ? NAN : acc;
        si[threadIdx.x] = iacc;
        sidx[threadIdx.x] = best;
        __syncthreads();
        for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
            if (threadIdx.x < s) {
                unsigned j = threadIdx.x + s;
                if (kind <= 1) {
                    sv[threadIdx.x] += sv[j];
                    si[threadIdx.x] += si[j];
                } else if (sidx[j] >= 0) {
                    long long bi = sidx[threadIdx.x], bj = sidx[j];
                    bool take;
                    if (fp) {
                        double x = sv[threadIdx.x], y = sv[j];
                        bool xn = x != x, yn = y != y;
                        if (bi < 0) take = true;
                        else if (xn || yn) take = yn && (!xn || bj < bi);
                        else take = kind == 3 ? (y < x || (y == x && bj < bi))
                                              : (y > x || (y == x && bj < bi));
                    } else {
                        long long x = si[threadIdx.x], y = si[j];
                        take = bi < 0 || (kind == 3 ? (y < x || (y == x && bj < bi))
                                                    : (y > x || (y == x && bj < bi)));
                    }
                    if (take) {
                        sv[threadIdx.x] = sv[j];
                        si[threadIdx.x] = si[j];
                        sidx[threadIdx.x] = bj;
                    }
                }
            }
            __syncthreads();
        }
        if (threadIdx.x == 0) {
            if (kind == 4) st_i(o, od, base_out, sidx[0] < 0 ? 0 : sidx[0]);
            else if (kind == 1) st_f(o, od, base_out, sv[0] / (double)g.rn);
            else if (fp) st_f(o, od, base_out, sv[0]);
            else st_i(o, od, base_out, si[0]);
        }
        __syncthreads();
    }
}
