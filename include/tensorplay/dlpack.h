/*
 * tensorplay/dlpack.h - zero-copy exchange with other array libraries
 * through DLPack (https://dmlc.github.io/dlpack/latest/).
 *
 *     DLManagedTensorVersioned *m = tp_to_dlpack(t);   // holds a reference to t
 *     ... hand m to a consumer, which calls m->deleter(m) exactly once ...
 *
 *     tp_tensor *u = tp_from_dlpack(&m);   // consumes m (sets it to NULL); zero-copy;
 *                                         // m's deleter runs when u's storage releases its data
 *
 * The DLPack structs below are written here from the DLPack 1.1 spec
 * (dlpack.h of dmlc/dlpack); nothing is vendored.  They keep the spec's
 * names and layout, since layout is the whole ABI; if the official header
 * was included first, its definitions are used instead.
 *
 * Both the versioned struct (DLManagedTensorVersioned, DLPack >= 1.0) and
 * the unversioned one (DLManagedTensor, what NumPy < 2.1 and PyTorch 1.13
 * exchange in their "dltensor" capsules) are supported.  CPU and CUDA
 * (kDLCUDA, the tensor's device index; CUDA host memory imports as CPU);
 * other devices are refused with TP_STATUS_UNSUPPORTED.  A CUDA tensor is
 * handed over as its data stands on its device's current stream: there is
 * no stream argument here, so a consumer on another stream synchronizes.
 */
#ifndef TENSORPLAY_DLPACK_H
#define TENSORPLAY_DLPACK_H

#include <stdint.h>
#include "tensorplay/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifndef DLPACK_DLPACK_H_
#define DLPACK_DLPACK_H_
#define DLPACK_MAJOR_VERSION 1
#define DLPACK_MINOR_VERSION 1

typedef struct DLPackVersion {
    uint32_t major;
    uint32_t minor;
} DLPackVersion;

typedef enum {
    kDLCPU = 1,
    kDLCUDA = 2,
    kDLCUDAHost = 3,
    kDLOpenCL = 4,
    kDLVulkan = 7,
    kDLMetal = 8,
    kDLVPI = 9,
    kDLROCM = 10,
    kDLROCMHost = 11,
    kDLExtDev = 12,
    kDLCUDAManaged = 13,
    kDLOneAPI = 14,
    kDLWebGPU = 15,
    kDLHexagon = 16,
    kDLMAIA = 17,
} DLDeviceType;

typedef struct {
    DLDeviceType device_type;
    int32_t device_id;
} DLDevice;

typedef enum {
    kDLInt = 0U,
    kDLUInt = 1U,
    kDLFloat = 2U,
    kDLOpaqueHandle = 3U,
    kDLBfloat = 4U,
    kDLComplex = 5U,
    kDLBool = 6U,
} DLDataTypeCode;

typedef struct {
    uint8_t code;   /* a DLDataTypeCode */
    uint8_t bits;
    uint16_t lanes; /* 1 for scalars */
} DLDataType;

typedef struct {
    void *data;           /* the start of the allocation; the first element is at data + byte_offset */
    DLDevice device;
    int32_t ndim;
    DLDataType dtype;
    int64_t *shape;       /* ndim entries */
    int64_t *strides;     /* in elements; NULL = compact row-major */
    uint64_t byte_offset;
} DLTensor;

/* Unversioned (DLPack < 1.0; still the "dltensor" capsule's content). */
typedef struct DLManagedTensor {
    DLTensor dl_tensor;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensor *self);
} DLManagedTensor;

#define DLPACK_FLAG_BITMASK_READ_ONLY (1UL << 0UL)
#define DLPACK_FLAG_BITMASK_IS_COPIED (1UL << 1UL)
#define DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED (1UL << 2UL)

/* Everything before `flags` is ABI-frozen across versions; a consumer that
 * sees another major version may only call the deleter. */
typedef struct DLManagedTensorVersioned {
    DLPackVersion version;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensorVersioned *self);
    uint64_t flags;
    DLTensor dl_tensor;
} DLManagedTensorVersioned;
#endif /* DLPACK_DLPACK_H_ */

/* Exports t without copying: a NEW DLManagedTensorVersioned (version 1.1,
 * flags 0) that holds a strong reference to t, so t's memory lives until
 * the consumer calls its deleter, exactly once (which releases the
 * reference and frees the struct).  shape/strides point into the struct.
 * NULL with the error set on failure (NULL tensor, a device other than
 * CPU or CUDA, out of memory). */
DLManagedTensorVersioned *tp_to_dlpack(tp_tensor *t);

/* Imports *managed without copying and CONSUMES it: *managed is set to
 * NULL whatever happens, so a consumed struct cannot be used twice, and its
 * deleter runs exactly once: when the new tensor's storage releases its
 * data, or before this call returns if the import fails or copies.
 *   - version.major other than 1: refused (only the deleter is called);
 *   - a READ_ONLY tensor is copied into new memory (the runtime has no
 *     read-only tensors);
 *   - CPU (and CUDA host) memory, or kDLCUDA on a device that exists (a
 *     cuda:N tensor); lanes must be 1; dtypes: float16/32/64, bfloat16,
 *     int8/16/32/64, uint8, bool; negative strides are refused.
 * Returns a NEW reference, or NULL with the error set ("a DLPack tensor can
 * be consumed only once" when *managed is already NULL). */
tp_tensor *tp_from_dlpack(DLManagedTensorVersioned **managed);

/* The same for the unversioned struct (no version, no flags). */
DLManagedTensor *tp_to_dlpack_unversioned(tp_tensor *t);
tp_tensor *tp_from_dlpack_unversioned(DLManagedTensor **managed);

#ifdef __cplusplus
}
#endif
#endif
