// tensor_cuda.c: libtensorplay tensors on a CUDA device (the runtime's
// libcudart test double, tests/cuda/fake): one kept to the end, one
// released. Prints both data pointers: "kept=%llu freed=%llu".
#include <stdio.h>

#include <tensorplay/cuda.h>
#include <tensorplay/tensorplay.h>

__attribute__((noinline)) static tp_tensor *make(int64_t n) {
    return tp_zeros_on(tp_device_cuda(0), 1, (int64_t[]){n}, TP_DTYPE_FLOAT32);
}

int main(void) {
    tp_tensor *kept = make(1 << 16), *gone = make(1 << 15);
    if (!kept || !gone) {
        printf("no CUDA tensors: %s\n", tp_last_error());
        return 1;
    }
    printf("kept=%llu freed=%llu\n", (unsigned long long)(uintptr_t)tp_tensor_data(kept),
           (unsigned long long)(uintptr_t)tp_tensor_data(gone));
    tp_tensor_release(gone);
    tp_device_synchronize(tp_device_cuda(0));
    return 0; // kept: a device leak held by a live tensor
}
