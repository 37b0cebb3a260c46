/*
 * src/io/safetensors_dtype.h - the safetensors dtype names TensorPlay reads
 * and writes, shared by the loader and the writer.  Private to src/io.
 */
#ifndef TENSORPLAY_IO_SAFETENSORS_DTYPE_H
#define TENSORPLAY_IO_SAFETENSORS_DTYPE_H

#include <string.h>
#include "tensorplay/dtype.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors data is little-endian; a big-endian host needs byte swapping here"
#endif

#define TP__SAFETENSORS_MAX_HEADER 100000000u
#define TP__SAFETENSORS_SUPPORTED "F32, F64, F16, BF16, I8, I16, I32, I64, U8, BOOL"

typedef struct tp__st_dtype {
    const char *name;
    tp_dtype dtype;
} tp__st_dtype;

static const tp__st_dtype tp__st_dtypes[] = {
    {"F32", TP_DTYPE_FLOAT32}, {"F64", TP_DTYPE_FLOAT64}, {"F16", TP_DTYPE_FLOAT16},
    {"BF16", TP_DTYPE_BFLOAT16}, {"I8", TP_DTYPE_INT8}, {"I16", TP_DTYPE_INT16},
    {"I32", TP_DTYPE_INT32}, {"I64", TP_DTYPE_INT64}, {"U8", TP_DTYPE_UINT8},
    {"BOOL", TP_DTYPE_BOOL},
};

/* True and *out set if name is a supported dtype. */
static inline bool tp__st_dtype_from_name(const char *name, tp_dtype *out) {
    for (size_t i = 0; i < sizeof tp__st_dtypes / sizeof tp__st_dtypes[0]; i++)
        if (strcmp(tp__st_dtypes[i].name, name) == 0) return *out = tp__st_dtypes[i].dtype, true;
    return false;
}

/* The safetensors name of a dtype, or NULL. */
static inline const char *tp__st_dtype_name(tp_dtype dtype) {
    for (size_t i = 0; i < sizeof tp__st_dtypes / sizeof tp__st_dtypes[0]; i++)
        if (tp__st_dtypes[i].dtype == dtype) return tp__st_dtypes[i].name;
    return NULL;
}

#endif
