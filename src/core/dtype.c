/*
 * src/core/dtype.c - element types, type promotion, float16/bfloat16 bit
 * conversions and device names.
 *
 * Pure functions of their arguments: no state, no allocation.  Kernels live
 * in src/ops; this file only knows what a dtype is, not how to compute in it.
 */
#include <stdio.h>
#include <string.h>

#include "internal.h"

// ----------------------------------------------------------------------------
// dtype table

typedef struct tp__dtype_info {
    const char *name;
    size_t itemsize;
    int category; /* 0 bool, 1 integer, 2 floating: PyTorch's promotion order */
} tp__dtype_info;

static const tp__dtype_info tp__dtypes[TP_DTYPE_COUNT] = {
    [TP_DTYPE_FLOAT32] = {.name = "float32", .itemsize = 4, .category = 2},
    [TP_DTYPE_FLOAT64] = {.name = "float64", .itemsize = 8, .category = 2},
    [TP_DTYPE_FLOAT16] = {.name = "float16", .itemsize = 2, .category = 2},
    [TP_DTYPE_BFLOAT16] = {.name = "bfloat16", .itemsize = 2, .category = 2},
    [TP_DTYPE_INT8] = {.name = "int8", .itemsize = 1, .category = 1},
    [TP_DTYPE_INT16] = {.name = "int16", .itemsize = 2, .category = 1},
    [TP_DTYPE_INT32] = {.name = "int32", .itemsize = 4, .category = 1},
    [TP_DTYPE_INT64] = {.name = "int64", .itemsize = 8, .category = 1},
    [TP_DTYPE_UINT8] = {.name = "uint8", .itemsize = 1, .category = 1},
    [TP_DTYPE_BOOL] = {.name = "bool", .itemsize = 1, .category = 0},
};

bool tp_dtype_is_valid(tp_dtype dtype) { return (unsigned)dtype < TP_DTYPE_COUNT; }

size_t tp_dtype_itemsize(tp_dtype dtype) {
    return tp_dtype_is_valid(dtype) ? tp__dtypes[dtype].itemsize : 0;
}

const char *tp_dtype_name(tp_dtype dtype) {
    return tp_dtype_is_valid(dtype) ? tp__dtypes[dtype].name : "invalid";
}

bool tp_dtype_is_floating(tp_dtype dtype) {
    return tp_dtype_is_valid(dtype) && tp__dtypes[dtype].category == 2;
}

// ----------------------------------------------------------------------------
// promotion (tensor-tensor operands, as torch.promote_types)

tp_dtype tp_dtype_promote(tp_dtype a, tp_dtype b) {
    if (!tp_dtype_is_valid(a) || !tp_dtype_is_valid(b)) {
        tp__error(TP_STATUS_INVALID_ARGUMENT, "promote: invalid dtype (%d, %d)", (int)a, (int)b);
        return TP_DTYPE_COUNT;
    }
    if (a == b) return a;
    int ca = tp__dtypes[a].category, cb = tp__dtypes[b].category;
    if (ca != cb) return ca > cb ? a : b; /* the higher category decides alone */
    if (ca == 2) {
        /* float16 and bfloat16 trade range for precision differently; neither
         * holds the other, so PyTorch meets them in float32. */
        if ((a == TP_DTYPE_FLOAT16 && b == TP_DTYPE_BFLOAT16) ||
            (a == TP_DTYPE_BFLOAT16 && b == TP_DTYPE_FLOAT16))
            return TP_DTYPE_FLOAT32;
        return tp__dtypes[a].itemsize >= tp__dtypes[b].itemsize ? a : b;
    }
    /* integers: uint8 holds no negative values, so with a signed type it
     * needs one size up (int8 -> int16); wider signed types already fit it. */
    if (a == TP_DTYPE_UINT8 || b == TP_DTYPE_UINT8) {
        tp_dtype other = a == TP_DTYPE_UINT8 ? b : a;
        return other == TP_DTYPE_INT8 ? TP_DTYPE_INT16 : other;
    }
    return tp__dtypes[a].itemsize >= tp__dtypes[b].itemsize ? a : b;
}

// ----------------------------------------------------------------------------
// float16 / bfloat16 <-> float (round to nearest even, NaN and inf kept)

static uint32_t tp__f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float tp__f32_from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

float tp_half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    if (exp == 0x1f) /* inf / NaN: payload kept in the top mantissa bits */
        return tp__f32_from_bits(sign | 0x7f800000u | (mant << 13));
    if (exp == 0) { /* zero or subnormal: mant * 2^-24, exact in float */
        float v = (float)mant * 0x1p-24f;
        return sign ? -v : v;
    }
    return tp__f32_from_bits(sign | ((exp + (127 - 15)) << 23) | (mant << 13));
}

uint16_t tp_float_to_half(float f) {
    uint32_t x = tp__f32_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    x &= 0x7fffffffu;
    if (x > 0x7f800000u) /* NaN: keep it a quiet NaN with the top payload bits */
        return (uint16_t)(sign | 0x7e00u | ((x >> 13) & 0x3ffu));
    if (x >= 0x477ff000u) /* >= 65520 rounds to inf (also inf itself) */
        return (uint16_t)(sign | 0x7c00u);
    if (x < 0x38800000u) {
        /* Below 2^-14 the result is subnormal: adding 0.5f lines the half's
         * 2^-24 unit up with the float's last mantissa bit, so the FPU's own
         * round-to-nearest-even does the rounding. */
        float r = tp__f32_from_bits(x) + 0.5f;
        return (uint16_t)(sign | (tp__f32_bits(r) - 0x3f000000u));
    }
    /* Normal: rebias the exponent and round the 13 dropped bits to even. */
    uint32_t odd = (x >> 13) & 1u;
    x += ((uint32_t)(15 - 127) << 23) + 0xfffu + odd;
    return (uint16_t)(sign | (x >> 13));
}

float tp_bfloat16_to_float(uint16_t b) { return tp__f32_from_bits((uint32_t)b << 16); }

uint16_t tp_float_to_bfloat16(float f) {
    uint32_t x = tp__f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) /* NaN: truncating could give inf; force quiet */
        return (uint16_t)((x >> 16) | 0x40u);
    x += 0x7fffu + ((x >> 16) & 1u); /* round to nearest even; inf stays inf */
    return (uint16_t)(x >> 16);
}

// ----------------------------------------------------------------------------
// devices

const char *tp_device_str(tp_device device, char *buf, size_t buflen) {
    if (!buf || buflen == 0) return buf;
    switch (device.type) {
    case TP_DEVICE_TYPE_CPU:
        snprintf(buf, buflen, "cpu");
        break;
    case TP_DEVICE_TYPE_CUDA:
        if (device.index < 0) snprintf(buf, buflen, "cuda");
        else snprintf(buf, buflen, "cuda:%d", (int)device.index);
        break;
    default:
        snprintf(buf, buflen, "invalid");
        break;
    }
    return buf;
}

tp_status tp_device_parse(const char *text, tp_device *out) {
    if (!text || !out) return tp__error(TP_STATUS_INVALID_ARGUMENT, "device_parse: NULL argument");
    tp_device d;
    const char *rest;
    if (strncmp(text, "cpu", 3) == 0) {
        d = tp_device_cpu();
        rest = text + 3;
    } else if (strncmp(text, "cuda", 4) == 0) {
        d = tp_device_cuda(-1);
        rest = text + 4;
    } else {
        return tp__error(TP_STATUS_INVALID_ARGUMENT,
                         "Expected one of cpu, cuda device type at start of device string: %s", text);
    }
    if (*rest == ':') {
        const char *p = rest + 1;
        long v = 0;
        if (*p < '0' || *p > '9') goto bad;
        for (; *p >= '0' && *p <= '9'; p++) {
            v = v * 10 + (*p - '0');
            if (v > 32767) goto bad;
        }
        if (*p != '\0' || (p - rest > 2 && rest[1] == '0')) goto bad; /* no junk, no leading 0 */
        if (d.type == TP_DEVICE_TYPE_CPU && v != 0) goto bad;
        d.index = (int16_t)v;
    } else if (*rest != '\0') {
        goto bad;
    }
    *out = d;
    return TP_STATUS_OK;
bad:
    return tp__error(TP_STATUS_INVALID_ARGUMENT, "Invalid device string: '%s'", text);
}
