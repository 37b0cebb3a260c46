// tensor_views.c: many live views of one tensor (a batch split into rows
// and kept). 40,000 views of a 1024-float tensor are made; the oldest
// 20,000 are released first to last, the newest 20,000 are kept at exit.
// The ledger finds each view's reference without walking the storage's
// list, and writes 20,000 references at exit without comparing them all
// (both were quadratic: 100,000 views took 12 s to release oldest first
// and 25 s to write at exit). Prints "tensor_views ok" and exits 0.
#include <stdio.h>
#include <stdlib.h>

#include "tensorplay/tensorplay.h"

#define VIEWS 40000

tp_tensor *base, *views[VIEWS];

__attribute__((noinline)) tp_tensor *views_row(int64_t at) {
    tp_tensor *v = tp_tensor_narrow(base, 0, at, 8);
    __asm__ volatile("" : : "r"(v) : "memory"); // not a tail call: this frame makes it
    return v;
}

int main(void) {
    base = tp_zeros(1, (int64_t[]){1024}, TP_DTYPE_FLOAT32);
    if (!base) return 1;
    for (int i = 0; i < VIEWS; i++)
        if (!(views[i] = views_row(i % 1000))) return 1;
    for (int i = 0; i < VIEWS / 2; i++) tp_tensor_release(views[i]);
    printf("tensor_views ok\n");
    return 0;
}
