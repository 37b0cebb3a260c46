/*
 * tensorplay/dtype.h - element types and devices.
 *
 *     size_t nbytes = numel * tp_dtype_itemsize(TP_DTYPE_BFLOAT16);   // 2 per element
 *     tp_device cpu = tp_device_cpu();
 *
 * float16 and bfloat16 are stored as uint16_t bit patterns; kernels compute
 * in float and round to nearest even on store.
 */
#ifndef TENSORPLAY_DTYPE_H
#define TENSORPLAY_DTYPE_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include "tensorplay/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tp_dtype {
    TP_DTYPE_FLOAT32 = 0,
    TP_DTYPE_FLOAT64,
    TP_DTYPE_FLOAT16,
    TP_DTYPE_BFLOAT16,
    TP_DTYPE_INT8,
    TP_DTYPE_INT16,
    TP_DTYPE_INT32,
    TP_DTYPE_INT64,
    TP_DTYPE_UINT8,
    TP_DTYPE_BOOL,
    TP_DTYPE_COUNT
} tp_dtype;

/* Bytes per element (0 for an invalid dtype). */
size_t tp_dtype_itemsize(tp_dtype dtype);
/* "float32", "bfloat16", ...; "invalid" for an out-of-range value. Static. */
const char *tp_dtype_name(tp_dtype dtype);
bool tp_dtype_is_valid(tp_dtype dtype);
bool tp_dtype_is_floating(tp_dtype dtype);
/* The dtype binary ops compute in (PyTorch's promotion for tensor-tensor
 * operands: bool < integers < floating; within a category the wider wins,
 * uint8 with a signed integer gives int16; float16 with bfloat16 gives float32). */
tp_dtype tp_dtype_promote(tp_dtype a, tp_dtype b);

/* float16 / bfloat16 conversions (round to nearest even). */
float tp_half_to_float(uint16_t h);
uint16_t tp_float_to_half(float f);
float tp_bfloat16_to_float(uint16_t b);
uint16_t tp_float_to_bfloat16(float f);

typedef enum tp_device_type {
    TP_DEVICE_TYPE_CPU = 0,
    TP_DEVICE_TYPE_CUDA = 1, /* needs a build with CUDA (meson -Dcuda) */
    TP_DEVICE_TYPE_COUNT
} tp_device_type;

typedef struct tp_device {
    int16_t type;  /* a tp_device_type */
    int16_t index; /* -1 = current/any; CPU is always 0 or -1 */
} tp_device;

static inline tp_device tp_device_cpu(void) { tp_device d = {TP_DEVICE_TYPE_CPU, 0}; return d; }
static inline tp_device tp_device_cuda(int index) {
    tp_device d = {TP_DEVICE_TYPE_CUDA, (int16_t)index};
    return d;
}
static inline bool tp_device_equal(tp_device a, tp_device b) {
    return a.type == b.type && a.index == b.index;
}
/* "cpu", "cuda:0"; written into buf (at least 16 bytes), returns buf. */
const char *tp_device_str(tp_device device, char *buf, size_t buflen);
/* Parses "cpu", "cpu:0", "cuda" (index -1: the current device) or "cuda:N"
 * (0 <= N < 32768) into *out, as torch.device does.  Whether the device
 * exists is not checked here.  Anything else gives TP_STATUS_INVALID_ARGUMENT
 * ("Expected one of cpu, cuda device type at start of device string: gpu")
 * and leaves *out unchanged. */
tp_status tp_device_parse(const char *text, tp_device *out);

#ifdef __cplusplus
}
#endif
#endif
