// tensor_block.c: a tensor program for the tensor tests: prints the data
// pointer of one storage it keeps alive (so the test can find the malloc
// block behind it) and frees another. Built twice: against the shared
// libtensorplay and linked statically (the static runtime must attach too).
#include <stdio.h>

#include "tensorplay/tensorplay.h"

int main(void) {
    tp_tensor *kept = tp_zeros(2, (int64_t[]){64, 64}, TP_DTYPE_FLOAT32); // 16 KiB, never released
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
