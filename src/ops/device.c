/*
 * src/ops/device.c - device-generic entry points (device.h) and the checks
 * every op makes before it computes: which device, the same for all its
 * tensors, output allocated there.
 *
 * Moving data between devices and the device kernels live with the device
 * (src/cuda).  In a build without CUDA the tp__dev_* functions below are
 * stubs that can never be reached with a real CUDA tensor, because nothing
 * can make one; they refuse with UNSUPPORTED all the same.
 */
#include "ops_internal.h"
#include "tensorplay/device.h"

tp_status tp__same_device(int n, const tp_tensor *const *ts, tp_device *out) {
    tp_device d = ts[0]->device;
    for (int i = 1; i < n; i++) {
        tp_device e = ts[i]->device;
        if (e.type != d.type || e.index != d.index) {
            char a[16], b[16];
            /* PyTorch names the CPU first when one of the two is the CPU. */
            tp_device x = d, y = e;
            if (tp__is_cpu(y)) x = e, y = d;
            return tp__error(TP_STATUS_INVALID_ARGUMENT,
                             "expected all tensors to be on the same device, but found %s and %s",
                             tp_device_str(x, a, sizeof a), tp_device_str(y, b, sizeof b));
        }
    }
    *out = d;
    return TP_STATUS_OK;
}

tp_status tp__cpu_only(const char *op, const tp_tensor *t) {
    if (!t || tp__is_cpu(t->device)) return TP_STATUS_OK;
    char buf[16];
    return tp__error(TP_STATUS_UNSUPPORTED, "%s(): not implemented for %s tensors", op,
                     tp_device_str(t->device, buf, sizeof buf));
}

#ifndef TP_HAVE_CUDA
static tp_status refuse(void) {
    return tp__error(TP_STATUS_UNSUPPORTED, "TensorPlay was built without CUDA (meson -Dcuda=enabled)");
}

tp_tensor *tp__empty_device(tp_device d, int ndim, const int64_t *sizes, tp_dtype dtype) {
    if (tp__is_cpu(d)) return tp_empty(ndim, sizes, dtype);
    refuse();
    return NULL;
}
tp_status tp__dev_copy(tp_device d, const tp__view *dst, const tp__view *src) {
    (void)d, (void)dst, (void)src;
    return refuse();
}
tp_status tp__dev_fill(tp_device d, const tp__view *v, double value) {
    (void)d, (void)v, (void)value;
    return refuse();
}
tp_status tp__dev_binary(tp_device d, tp_binary_op op, const tp__view *out, const tp__view *a,
                         const tp__view *b, tp_dtype compute) {
    (void)d, (void)op, (void)out, (void)a, (void)b, (void)compute;
    return refuse();
}
tp_status tp__dev_binary_scalar(tp_device d, tp_binary_op op, const tp__view *out,
                                const tp__view *a, double b, bool integral, tp_dtype compute) {
    (void)d, (void)op, (void)out, (void)a, (void)b, (void)integral, (void)compute;
    return refuse();
}
tp_status tp__dev_unary(tp_device d, tp_unary_op op, const tp__view *out, const tp__view *in,
                        tp_dtype compute) {
    (void)d, (void)op, (void)out, (void)in, (void)compute;
    return refuse();
}
tp_status tp__dev_reduce(tp_device d, int kind, char *out, tp_dtype out_dtype, const tp__view *in,
                         const bool *reduced) {
    (void)d, (void)kind, (void)out, (void)out_dtype, (void)in, (void)reduced;
    return refuse();
}
tp_status tp__dev_matmul(tp_device d, tp_tensor *out, const tp_tensor *a, const tp_tensor *b, int nb,
                         const int64_t *bshape, int64_t n, int64_t k, int64_t m) {
    (void)d, (void)out, (void)a, (void)b, (void)nb, (void)bshape, (void)n, (void)k, (void)m;
    return refuse();
}
tp_status tp__dev_read(tp_device d, void *dst, const void *src, size_t nbytes) {
    (void)d, (void)dst, (void)src, (void)nbytes;
    return refuse();
}

tp_tensor *tp_tensor_to_ex(tp_tensor *t, tp_device device, bool non_blocking) {
    (void)non_blocking;
    if (!t) {
        tp__error(TP_STATUS_INVALID_ARGUMENT, "to(): tensor is NULL");
        return NULL;
    }
    if (tp__is_cpu(device) && tp__is_cpu(t->device)) return tp_tensor_retain(t);
    if (device.type != TP_DEVICE_TYPE_CPU && device.type != TP_DEVICE_TYPE_CUDA) {
        tp__error(TP_STATUS_INVALID_ARGUMENT, "to(): invalid device type %d", (int)device.type);
        return NULL;
    }
    refuse();
    return NULL;
}

static tp_tensor *on_device(tp_device d, tp_tensor *cpu) {
    if (!cpu || tp__is_cpu(d)) return cpu;
    tp_tensor_release(cpu);
    refuse();
    return NULL;
}
#else
/* tp_tensor_to_ex and tp__empty_device are src/cuda's. */
static tp_tensor *on_device(tp_device d, tp_tensor *cpu) {
    if (!cpu || tp__is_cpu(d)) return cpu;
    tp_tensor *t = tp_tensor_to(cpu, d);
    tp_tensor_release(cpu);
    return t;
}
#endif

tp_tensor *tp_tensor_to(tp_tensor *t, tp_device device) { return tp_tensor_to_ex(t, device, false); }

// ----------------------------------------------------------------------------
// creation on a device

tp_tensor *tp_empty_on(tp_device device, int ndim, const int64_t *sizes, tp_dtype dtype) {
    return tp__empty_device(device, ndim, sizes, dtype);
}

tp_tensor *tp_zeros_on(tp_device device, int ndim, const int64_t *sizes, tp_dtype dtype) {
    return tp_full_on(device, ndim, sizes, 0.0, dtype);
}

tp_tensor *tp_full_on(tp_device device, int ndim, const int64_t *sizes, double value,
                      tp_dtype dtype) {
    if (tp__is_cpu(device)) return tp_full(ndim, sizes, value, dtype);
    tp_tensor *t = tp__empty_device(device, ndim, sizes, dtype);
    if (!t) return NULL;
    tp__view v = tp__view_of(t);
    if (tp__dev_fill(t->device, &v, value) != TP_STATUS_OK) {
        tp_tensor_release(t);
        return NULL;
    }
    return t;
}

/* A range is computed where the CPU computes it and copied: the same
 * numbers on every device, and it is never large enough to matter. */
tp_tensor *tp_arange_on(tp_device device, double start, double end, double step, tp_dtype dtype) {
    return on_device(device, tp_arange(start, end, step, dtype));
}

tp_tensor *tp_randn_on(tp_device device, int ndim, const int64_t *sizes, tp_dtype dtype,
                       uint64_t seed) {
    return on_device(device, tp_randn(ndim, sizes, dtype, seed));
}
