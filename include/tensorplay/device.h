/*
 * tensorplay/device.h - moving tensors between devices and creating them on
 * one.  Part of every build: in a build without CUDA a cuda:N device is
 * refused with TP_STATUS_UNSUPPORTED ("TensorPlay was built without CUDA").
 *
 *     tp_device dev;
 *     tp_device_parse("cuda:0", &dev);
 *     tp_tensor *g = tp_tensor_to(x, dev);            // new storage on cuda:0
 *     if (!g) fprintf(stderr, "%s\n", tp_last_error()); // e.g. no CUDA device
 *     tp_tensor *y = tp_relu(g);                      // runs on cuda:0
 *     tp_tensor *h = tp_tensor_to(y, tp_device_cpu()); // back, for printing
 *
 * Ownership: every function here returns a NEW reference or NULL with the
 * error set.  An op whose tensors sit on different devices fails with
 * PyTorch's text: "expected all tensors to be on the same device, but found
 * cpu and cuda:0" (TP_STATUS_INVALID_ARGUMENT).
 */
#ifndef TENSORPLAY_DEVICE_H
#define TENSORPLAY_DEVICE_H

#include <stdbool.h>
#include <stdint.h>
#include "tensorplay/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* PyTorch's .to(device): t itself (retained) when it already lives there
 * (cuda with index -1 means the current device); otherwise a new contiguous
 * tensor with the same values on a new storage from the target device's
 * registered allocator (c10's _to_copy).  Host <-> device and device <->
 * device copies are blocking: the result is ready when the call returns. */
tp_tensor *tp_tensor_to(tp_tensor *t, tp_device device);
/* As tp_tensor_to; with non_blocking a copy from pinned host memory
 * (tp_cuda_host_allocator) to a device only enqueues on the current
 * stream and returns at once; other copies stay blocking. */
tp_tensor *tp_tensor_to_ex(tp_tensor *t, tp_device device, bool non_blocking);

/* Creation on a device (contiguous, the device's registered allocator).
 * Values equal those of the CPU functions in ops.h with the same
 * arguments; randn draws on the host with the same generator and copies,
 * so a seed gives the same numbers on every device. */
tp_tensor *tp_empty_on(tp_device device, int ndim, const int64_t *sizes, tp_dtype dtype);
tp_tensor *tp_zeros_on(tp_device device, int ndim, const int64_t *sizes, tp_dtype dtype);
tp_tensor *tp_full_on(tp_device device, int ndim, const int64_t *sizes, double value,
                      tp_dtype dtype);
tp_tensor *tp_arange_on(tp_device device, double start, double end, double step, tp_dtype dtype);
tp_tensor *tp_randn_on(tp_device device, int ndim, const int64_t *sizes, tp_dtype dtype,
                       uint64_t seed);

#ifdef __cplusplus
}
#endif
#endif
