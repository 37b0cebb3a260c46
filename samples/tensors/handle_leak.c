/*
 * samples/tensors/handle_leak.c - a tensor handle kept past its use.
 *
 * Each batch slices a row out of a [128, 256] activation. history_push()
 * keeps the row for a debugging history with tp_tensor_retain, and
 * history_clear() gives it back - except that it stops at the first empty
 * slot, and one push is skipped (a "filtered" batch), so the rows pushed
 * after the gap are never released. Every storage reference is taken and
 * dropped by the tensors themselves, so no storage retain is unmatched: the
 * activations stay alive because their rows (views, which hold their base)
 * do. tpprof's run summary and `report --storages` name the live views,
 * where they were made (history_row), the base each view holds, and the
 * handle retain no release matched that keeps each view (history_push).
 *
 * Usage: handle_leak [batches] (default 6; batch 2 is filtered)
 */
#include "common.h"

#define MAX_HISTORY 32

static tp_tensor *history[MAX_HISTORY];

__attribute__((noinline)) static tp_tensor *history_row(tp_tensor *act, int64_t row) {
    return CHECK(tp_tensor_narrow(act, 0, row, 1)); /* a view: it holds act */
}

__attribute__((noinline)) static void history_push(int slot, tp_tensor *row) {
    history[slot] = tp_tensor_retain(row); /* the history's own handle */
}

/* Releases the history's handles up to the first empty slot (BUG: it should
 * go on past it). Returns how many were released. */
__attribute__((noinline)) static int history_clear(int n) {
    int released = 0;
    for (int i = 0; i < n && history[i]; i++) {
        tp_tensor_release(history[i]);
        history[i] = NULL;
        released++;
    }
    return released;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 6;
    if (n < 3 || n > MAX_HISTORY) {
        fprintf(stderr, "usage: handle_leak [batches 3..%d]\n", MAX_HISTORY);
        return 2;
    }
    for (int b = 0; b < n; b++) {
        tp_tensor *act = CHECK(tp_full(2, (int64_t[]){128, 256}, (double)b, TP_DTYPE_FLOAT32));
        tp_tensor *row = history_row(act, b % 128);
        if (b != 2) history_push(b, row); /* batch 2 is filtered: its slot stays empty */
        tp_tensor_release(row);
        tp_tensor_release(act);
    }
    int released = history_clear(n);
    printf("handle_leak: %d batches, %d history rows released, %d kept (each holding a 128 KiB activation)\n",
           n, released, n - 1 - released);
    return 0;
}
