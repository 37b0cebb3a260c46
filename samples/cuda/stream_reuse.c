/*
 * samples/cuda/stream_reuse.c - why record_stream exists.
 *
 * x is allocated on the default stream, then read by a long computation
 * queued on a side stream.  When the program drops x, the caching allocator
 * puts its block back in the default stream's pool at once: the host has no
 * idea the side stream has not read it yet.  The next allocation of the
 * same size on the default stream gets that very block and overwrites it
 * while the side stream may still be reading: a silent wrong answer.
 * tp_tensor_record_stream(x, side) makes the free record an event on the
 * side stream; the block stays "awaiting free" (its snapshot state) until
 * that event completes, and the next allocation gets a different block.
 *
 * Usage: stream_reuse [device] [floats] (default cuda:0, 16 Mi).  Needs a CUDA device (SKIP, exit 77,
 * without one).  Prints the block addresses and the allocator's pending
 * frees for both cases; exits 1 if record_stream did not keep the block.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tensorplay/tensorplay.h"
#include "tensorplay/cuda.h"

static int64_t N = 16 << 20; /* floats: 64 MiB, long enough work to still be running */

static void die(const char *what) {
    fprintf(stderr, "stream_reuse: %s: %s\n", what, tp_last_error());
    exit(1);
}

/* Queues work that reads x on stream s: y = x * 1.0001 a few times. */
static tp_tensor *work_on(tp_stream s, tp_tensor *x) {
    tp_stream_set_current(s);
    tp_tensor *y = tp_binary_scalar(TP_BINARY_OP_MUL, x, 1.0001);
    for (int i = 0; y && i < 20; i++) tp_binary_scalar_(TP_BINARY_OP_MUL, y, 1.0001);
    tp_stream_set_current(tp_stream_default(s.device));
    if (!y) die("side-stream work");
    return y;
}

/* One round: returns true if the new tensor got x's block. */
static bool round_trip(tp_device dev, tp_stream side, bool record) {
    tp_caching_allocator *ca = tp_cuda_caching_allocator_of(dev);
    tp_tensor *x = tp_full_on(dev, 1, &N, 1.0, TP_DTYPE_FLOAT32);
    if (!x) die("full");
    /* the side stream must see x complete: wait for the default stream */
    tp_event *ready = tp_event_create(dev, false);
    tp_event_record(ready, tp_stream_default(dev));
    tp_stream_wait_event(side, ready);
    tp_event_destroy(ready);
    void *px = tp_tensor_data(x);
    tp_tensor *y = work_on(side, x);
    if (record && tp_tensor_record_stream(x, side) != TP_STATUS_OK) die("record_stream");
    tp_tensor_release(x); /* the host is done with x; the side stream may not be */
    size_t pending = tp_caching_allocator_pending_frees(ca);
    tp_tensor *z = tp_full_on(dev, 1, &N, 7.0, TP_DTYPE_FLOAT32);
    if (!z) die("full");
    bool reused = tp_tensor_data(z) == px;
    printf("%-22s x's block %p, the next allocation %p: %s; blocks awaiting free: %zu\n",
           record ? "with record_stream:" : "without record_stream:", px, tp_tensor_data(z),
           reused ? "REUSED while the side stream may still read it" : "a different block", pending);
    tp_stream_synchronize(side);
    tp_tensor_release(y);
    tp_tensor_release(z);
    return reused;
}

int main(int argc, char **argv) {
    tp_device dev;
    if (tp_device_parse(argc > 1 ? argv[1] : "cuda:0", &dev) != TP_STATUS_OK) die("device");
    if (argc > 2 && atoll(argv[2]) > 0) N = atoll(argv[2]);
    int n = 0;
    if (tp_cuda_device_count(&n) != TP_STATUS_OK) {
        printf("SKIP: no CUDA device (%s)\n", tp_last_error());
        return 77;
    }
    if (strcmp(tp_cuda_allocator_backend(), "native") != 0) {
        printf("SKIP: this sample shows the caching allocator (TP_ALLOC_CONF backend is %s)\n",
               tp_cuda_allocator_backend());
        return 77;
    }
    tp_stream side;
    if (tp_stream_create(dev, &side) != TP_STATUS_OK) die("stream_create");
    bool reused_without = round_trip(dev, side, false);
    bool reused_with = round_trip(dev, side, true);
    tp_device_synchronize(dev);
    /* once the side stream has passed the free, the block is reusable */
    tp_tensor *w = tp_empty_on(dev, 1, &N, TP_DTYPE_FLOAT32);
    printf("after the side stream finished: blocks awaiting free: %zu\n",
           tp_caching_allocator_pending_frees(tp_cuda_caching_allocator_of(dev)));
    tp_tensor_release(w);
    tp_stream_destroy(side);
    printf("without record_stream the block was %s; with it, %s\n",
           reused_without ? "reused at once (the hazard)" : "not reused (timing)",
           reused_with ? "REUSED (wrong)" : "kept until the side stream passed the free");
    return reused_with ? 1 : 0;
}
