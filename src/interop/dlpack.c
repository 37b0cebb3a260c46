/*
 * src/interop/dlpack.c - DLPack export and import (include/tensorplay/dlpack.h).
 *
 * Export: one malloc'ed block holds the managed struct, the shape and
 * strides it points at, and a strong reference to the tensor (PyTorch's
 * ATenDLMTensor does the same); the deleter releases the reference and
 * frees the block.  Import: tp_from_blob over data + byte_offset, with a
 * deleter that calls the producer's deleter, so it runs when the storage
 * releases its data (c10's DataPtr: exactly once).  This file allocates no
 * tensor memory of its own except for a read-only import, which is copied.
 * CUDA tensors go both ways as kDLCUDA with their device index; the data
 * is handed over as it stands on the tensor's current stream (the C API
 * has no stream argument: a consumer on another stream synchronizes).
 */
#include <stdlib.h>
#include <string.h>

#include "../core/internal.h"
#include "tensorplay/cuda.h"
#include "tensorplay/dlpack.h"

// ----------------------------------------------------------------------------
// dtype mapping

static bool to_dl_dtype(tp_dtype d, DLDataType *out) {
    static const DLDataType map[TP_DTYPE_COUNT] = {
        [TP_DTYPE_FLOAT32] = {kDLFloat, 32, 1}, [TP_DTYPE_FLOAT64] = {kDLFloat, 64, 1},
        [TP_DTYPE_FLOAT16] = {kDLFloat, 16, 1}, [TP_DTYPE_BFLOAT16] = {kDLBfloat, 16, 1},
        [TP_DTYPE_INT8] = {kDLInt, 8, 1},       [TP_DTYPE_INT16] = {kDLInt, 16, 1},
        [TP_DTYPE_INT32] = {kDLInt, 32, 1},     [TP_DTYPE_INT64] = {kDLInt, 64, 1},
        [TP_DTYPE_UINT8] = {kDLUInt, 8, 1},     [TP_DTYPE_BOOL] = {kDLBool, 8, 1},
    };
    if ((unsigned)d >= TP_DTYPE_COUNT) return false;
    *out = map[d];
    return true;
}

static tp_status from_dl_dtype(DLDataType t, tp_dtype *out) {
    if (t.lanes != 1)
        return tp__error(TP_STATUS_UNSUPPORTED, "from_dlpack: vector types (lanes %u) are not supported",
                         (unsigned)t.lanes);
    for (int d = 0; d < TP_DTYPE_COUNT; d++) {
        DLDataType m;
        to_dl_dtype((tp_dtype)d, &m);
        if (m.code == t.code && m.bits == t.bits) {
            *out = (tp_dtype)d;
            return TP_STATUS_OK;
        }
    }
    /* NumPy < 2 exports bool as kDLUInt 8 in some versions; PyTorch reads
     * kDLBool; both are 1 byte, so take the spec's kDLBool only. */
    return tp__error(TP_STATUS_UNSUPPORTED, "from_dlpack: unsupported dtype (code %u, %u bits)",
                     (unsigned)t.code, (unsigned)t.bits);
}

// ----------------------------------------------------------------------------
// export

typedef struct export_block {
    union {
        DLManagedTensorVersioned versioned;
        DLManagedTensor unversioned;
    } m;
    tp_tensor *tensor; /* strong */
    int64_t shape[TP_MAX_DIMS];
    int64_t strides[TP_MAX_DIMS];
} export_block;

static void export_free(export_block *b) {
    tp_tensor_release(b->tensor);
    free(b);
}

static void deleter_versioned(DLManagedTensorVersioned *self) {
    if (self) export_free(self->manager_ctx);
}

static void deleter_unversioned(DLManagedTensor *self) {
    if (self) export_free(self->manager_ctx);
}

/* The block, holding t; NULL with the error set. */
static export_block *export_block_new(tp_tensor *t) {
    if (!t) {
        tp__error(TP_STATUS_INVALID_ARGUMENT, "to_dlpack: tensor is NULL");
        return NULL;
    }
    if (t->device.type != TP_DEVICE_TYPE_CPU && t->device.type != TP_DEVICE_TYPE_CUDA) {
        tp__error(TP_STATUS_UNSUPPORTED, "to_dlpack: only CPU and CUDA tensors can be exported");
        return NULL;
    }
    export_block *b = calloc(1, sizeof *b);
    if (!b) {
        tp__error(TP_STATUS_OUT_OF_MEMORY, "to_dlpack: out of memory");
        return NULL;
    }
    b->tensor = tp_tensor_retain(t);
    for (int i = 0; i < t->ndim; i++) {
        b->shape[i] = t->sizes[i];
        b->strides[i] = t->strides[i];
    }
    return b;
}

static void fill_dl_tensor(DLTensor *dl, export_block *b) {
    tp_tensor *t = b->tensor;
    /* data: the storage's start, the tensor's offset in byte_offset, as
     * the spec recommends (and PyTorch does) */
    dl->data = t->storage->data.ptr;
    dl->byte_offset = (uint64_t)t->storage_offset * tp_dtype_itemsize(t->dtype);
    dl->device = t->device.type == TP_DEVICE_TYPE_CUDA ? (DLDevice){kDLCUDA, t->device.index}
                                                       : (DLDevice){kDLCPU, 0};
    dl->ndim = t->ndim;
    to_dl_dtype(t->dtype, &dl->dtype);
    dl->shape = b->shape;
    dl->strides = b->strides;
}

DLManagedTensorVersioned *tp_to_dlpack(tp_tensor *t) {
    export_block *b = export_block_new(t);
    if (!b) return NULL;
    DLManagedTensorVersioned *m = &b->m.versioned;
    m->version = (DLPackVersion){DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
    m->manager_ctx = b;
    m->deleter = deleter_versioned;
    m->flags = 0;
    fill_dl_tensor(&m->dl_tensor, b);
    return m;
}

DLManagedTensor *tp_to_dlpack_unversioned(tp_tensor *t) {
    export_block *b = export_block_new(t);
    if (!b) return NULL;
    DLManagedTensor *m = &b->m.unversioned;
    m->manager_ctx = b;
    m->deleter = deleter_unversioned;
    fill_dl_tensor(&m->dl_tensor, b);
    return m;
}

// ----------------------------------------------------------------------------
// import

static void call_versioned_deleter(void *ctx) {
    DLManagedTensorVersioned *m = ctx;
    if (m->deleter) m->deleter(m);
}

static void call_unversioned_deleter(void *ctx) {
    DLManagedTensor *m = ctx;
    if (m->deleter) m->deleter(m);
}

/* Zero-copy tensor over dl; on failure (or when copying) the deleter has
 * run before it returns. */
static tp_tensor *import(const DLTensor *dl, bool read_only, tp_deleter_fn deleter, void *ctx) {
    tp_status st = TP_STATUS_OK;
    tp_dtype dtype = TP_DTYPE_FLOAT32;
    tp_device device = tp_device_cpu();
    int ndev = 0;
    if (dl->device.device_type == kDLCUDA) {
        device = tp_device_cuda(dl->device.device_id);
        if (tp_cuda_device_count(&ndev) != TP_STATUS_OK) {
            st = tp_last_status(); /* "no CUDA device: ...", or a build without CUDA */
        } else if (dl->device.device_id < 0 || dl->device.device_id >= ndev) {
            st = tp__error(TP_STATUS_INVALID_ARGUMENT, "from_dlpack: CUDA device %d does not exist (%d device%s)",
                           (int)dl->device.device_id, ndev, ndev == 1 ? "" : "s");
        }
    } else if (dl->device.device_type != kDLCPU && dl->device.device_type != kDLCUDAHost) {
        st = tp__error(TP_STATUS_UNSUPPORTED, "from_dlpack: device type %d is not supported (CPU and CUDA only)",
                       (int)dl->device.device_type);
    }
    if (st == TP_STATUS_OK && (dl->ndim < 0 || dl->ndim > TP_MAX_DIMS))
        st = tp__error(TP_STATUS_INVALID_ARGUMENT, "from_dlpack: %d dims (at most %d)", (int)dl->ndim,
                       TP_MAX_DIMS);
    else if (st == TP_STATUS_OK && dl->ndim > 0 && !dl->shape)
        st = tp__error(TP_STATUS_INVALID_ARGUMENT, "from_dlpack: shape is NULL");
    else if (st == TP_STATUS_OK)
        st = from_dl_dtype(dl->dtype, &dtype);
    if (st != TP_STATUS_OK) {
        deleter(ctx);
        return NULL;
    }
    char *data = dl->data ? (char *)dl->data + dl->byte_offset : NULL;
    if (!read_only) return tp__from_blob_on(device, data, dl->ndim, dl->shape, dl->strides, dtype, deleter, ctx);
    /* read-only: a borrowed view, copied (on its device), then the producer's memory let go */
    tp_tensor *view = tp__from_blob_on(device, data, dl->ndim, dl->shape, dl->strides, dtype, NULL, NULL);
    tp_tensor *copy = view ? tp_clone(view) : NULL;
    tp_tensor_release(view);
    deleter(ctx);
    return copy;
}

tp_tensor *tp_from_dlpack(DLManagedTensorVersioned **managed) {
    if (!managed || !*managed) {
        tp__error(TP_STATUS_INVALID_ARGUMENT, "a DLPack tensor can be consumed only once (got NULL)");
        return NULL;
    }
    DLManagedTensorVersioned *m = *managed;
    *managed = NULL;
    if (m->version.major != DLPACK_MAJOR_VERSION) {
        uint32_t major = m->version.major, minor = m->version.minor;
        call_versioned_deleter(m);
        tp__error(TP_STATUS_UNSUPPORTED,
                  "from_dlpack: DLPack version %u.%u is not supported (major version %d expected)",
                  major, minor, DLPACK_MAJOR_VERSION);
        return NULL;
    }
    return import(&m->dl_tensor, (m->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0, call_versioned_deleter, m);
}

tp_tensor *tp_from_dlpack_unversioned(DLManagedTensor **managed) {
    if (!managed || !*managed) {
        tp__error(TP_STATUS_INVALID_ARGUMENT, "a DLPack tensor can be consumed only once (got NULL)");
        return NULL;
    }
    DLManagedTensor *m = *managed;
    *managed = NULL;
    return import(&m->dl_tensor, false, call_unversioned_deleter, m);
}
