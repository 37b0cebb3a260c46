// tensor_handles.c: tensor handles taken and dropped (tp_tensor_retain, a
// tp_tensor_release that is not the last), and which of them the handle
// ledger says are still held at exit.
//  - kept: made by handles_make and kept by the program, which also lends
//    it to handles_borrow, a helper that retains and releases it inside one
//    call: the helper's handle is matched, the creation handle is what is
//    left (no retain is blamed).
//  - cached: made, retained twice by handles_cache (a cache that forgets to
//    let go), and the creator's handle released: 2 retains at handles_cache
//    are left, the creation handle is not.
//  - gone: made, retained by handles_cache, released by the creator, then by
//    handles_uncache, and so freed: nothing is left of it.
//  - crowd: made and kept; inside one call of handles_cycle, handles_hoard
//    takes 50,000 handles on it and handles_unhoard gives 49,990 back: 10
//    retains are left, and the creation handle (the ledger stays fast with
//    many handles of one tensor).
// Prints "tensor_handles ok" and exits 0.
#include <stdio.h>

#include "tensorplay/tensorplay.h"

tp_tensor *kept, *cache[4];

__attribute__((noinline)) tp_tensor *handles_make(int64_t n) {
    tp_tensor *t = tp_zeros(1, (int64_t[]){n}, TP_DTYPE_FLOAT32);
    __asm__ volatile("" : : "r"(t) : "memory"); // not a tail call: this frame makes it
    return t;
}

__attribute__((noinline)) double handles_borrow(tp_tensor *t) {
    tp_tensor *mine = tp_tensor_retain(t);
    double n = (double)tp_tensor_numel(mine);
    tp_tensor_release(mine);
    return n;
}

__attribute__((noinline)) void handles_cache(int slot, tp_tensor *t) {
    cache[slot] = tp_tensor_retain(t);
    __asm__ volatile("" : : : "memory");
}

tp_tensor *hoard[50000];

__attribute__((noinline)) void handles_hoard(tp_tensor *t, int n) {
    for (int i = 0; i < n; i++) hoard[i] = tp_tensor_retain(t);
}

__attribute__((noinline)) void handles_unhoard(int n) {
    for (int i = 0; i < n; i++) tp_tensor_release(hoard[i]);
}

__attribute__((noinline)) void handles_cycle(tp_tensor *t) {
    handles_hoard(t, 50000);
    handles_unhoard(49990);
    __asm__ volatile("" : : : "memory"); // not a tail call: this frame is the pair's
}

__attribute__((noinline)) void handles_uncache(int slot) {
    tp_tensor_release(cache[slot]);
    cache[slot] = NULL;
}

int main(void) {
    kept = handles_make(16);
    double n = handles_borrow(kept);
    tp_tensor *cached = handles_make(32);
    handles_cache(0, cached);
    handles_cache(1, cached);
    tp_tensor_release(cached);
    tp_tensor *gone = handles_make(64);
    handles_cache(2, gone);
    tp_tensor_release(gone);
    handles_uncache(2);
    tp_tensor *crowd = handles_make(128);
    handles_cycle(crowd);
    if (!kept || !cached || !crowd || n != 16) return 1;
    printf("tensor_handles ok\n");
    return 0;
}
