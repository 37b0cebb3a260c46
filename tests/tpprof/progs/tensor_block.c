// tensor_block.c: a tensor program for the tensor tests: prints the data
// pointer of one storage it keeps alive (so the test can find the malloc
// block behind it) and frees another. The kept tensor is made in
// leak_tensor, so its stack names the leaking function. Built twice:
// against the shared libtensorplay and linked statically (the static
// runtime must attach too).
#include <stdio.h>

#include "tensorplay/tensorplay.h"

__attribute__((noinline)) static tp_tensor *leak_tensor(void) {
    tp_tensor *t = tp_zeros(2, (int64_t[]){64, 64}, TP_DTYPE_FLOAT32); // 16 KiB, never released
    __asm__ volatile("" ::: "memory"); // not a tail call: this frame stays on the stack
    return t;
}

int main(void) {
    tp_tensor *kept = leak_tensor();
    tp_tensor *gone = tp_ones(1, (int64_t[]){1000}, TP_DTYPE_FLOAT64);
    if (!kept || !gone) {
        fprintf(stderr, "tensor_block: %s\n", tp_last_error());
        return 1;
    }
    tp_tensor_release(gone);
    printf("data=%llu nbytes=%llu\n", (unsigned long long)(uintptr_t)tp_storage_data(tp_tensor_storage(kept)),
           (unsigned long long)tp_storage_nbytes(tp_tensor_storage(kept)));
    return 0;
}
