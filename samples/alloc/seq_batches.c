/*
 * samples/alloc/seq_batches.c - variable-length sequence batches on the
 * caching allocator: a workload that fragments it, or (with --fixed) the
 * same work with a fixed padded length, which does not.
 *
 * Each step builds a batch of B sequences of random length L (tokens) and
 * allocates activations of shape (B, L, H) float32 - 1..10 MiB requests
 * carved from 20 MiB segments.  A growing "KV cache" keeps one activation of
 * every 4th step alive, so freed neighbours leave holes that later, longer
 * batches cannot use: reserved memory grows while allocated stays flat, and
 * inactive_split_bytes (free blocks stuck inside partly used segments)
 * rises.  With --fixed every batch is padded to FIXED_LEN tokens (16 MiB
 * activations): requests of 10 MiB or more get segments of their own size,
 * so every block fills its segment, a freed one is reused exactly, and
 * nothing is stranded (inactive_split_bytes stays 0).
 *
 * At the end it prints the caching allocator's own statistics on one line
 * ("stats: key=value ..."), the numbers tpprof's fragmentation report is
 * tested against.
 *
 * Usage: seq_batches [--fixed] [steps] (default 40)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tensorplay/caching_allocator.h"
#include "tensorplay/tensorplay.h"

#define BATCH 4
#define HIDDEN 256
#define MAX_LEN 2048
#define FIXED_LEN 4096
#define MAX_KEPT 64

static tp_tensor *check(tp_tensor *t, const char *what) {
    if (!t) {
        fprintf(stderr, "seq_batches: %s failed: %s\n", what, tp_last_error());
        exit(1);
    }
    return t;
}

/* A deterministic length in [256, MAX_LEN] for step s (xorshift). */
static int64_t seq_len(int s) {
    uint32_t x = 2463534242u ^ (uint32_t)(s * 2654435761u);
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return 256 + (int64_t)(x % (MAX_LEN - 256 + 1));
}

__attribute__((noinline)) static tp_tensor *forward_step(int64_t len) {
    int64_t shape[3] = {BATCH, len, HIDDEN};
    tp_tensor *h = check(tp_ones(3, shape, TP_DTYPE_FLOAT32), "tp_ones");
    tp_tensor *a = check(tp_relu(h), "tp_relu"); /* a second activation of the same size */
    tp_tensor_release(h);
    return a;
}

int main(int argc, char **argv) {
    int fixed = 0, steps = 40;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--fixed") == 0) fixed = 1;
        else steps = atoi(argv[i]);
    }
    if (steps < 1 || steps / 4 > MAX_KEPT) {
        fprintf(stderr, "usage: seq_batches [--fixed] [steps 1..%d]\n", MAX_KEPT * 4);
        return 2;
    }
    tp_caching_allocator *ca = tp_caching_allocator_new(tp_allocator_cpu(), NULL);
    if (!ca) {
        fprintf(stderr, "seq_batches: %s\n", tp_last_error());
        return 1;
    }
    tp_allocator_set(TP_DEVICE_TYPE_CPU, tp_caching_allocator_as_allocator(ca));

    tp_tensor *kept[MAX_KEPT];
    int nkept = 0;
    for (int s = 0; s < steps; s++) {
        int64_t len = fixed ? FIXED_LEN : seq_len(s);
        tp_tensor *act = forward_step(len);
        if (s % 4 == 0) kept[nkept++] = act; /* the growing cache */
        else tp_tensor_release(act);
    }

    tp_caching_allocator_stats st;
    tp_caching_allocator_get_stats(ca, &st);
    printf("seq_batches (%s, %d steps): kept %d activations\n", fixed ? "fixed" : "variable", steps,
           nkept);
    printf("stats: allocated_bytes=%llu reserved_bytes=%llu inactive_split_bytes=%llu "
           "inactive_split=%llu segments=%llu peak_reserved_bytes=%llu peak_allocated_bytes=%llu\n",
           (unsigned long long)st.allocated_bytes.current,
           (unsigned long long)st.reserved_bytes.current,
           (unsigned long long)st.inactive_split_bytes.current,
           (unsigned long long)st.inactive_split.current, (unsigned long long)st.segment.current,
           (unsigned long long)st.reserved_bytes.peak, (unsigned long long)st.allocated_bytes.peak);
    fflush(stdout);

    for (int i = 0; i < nkept; i++) tp_tensor_release(kept[i]);
    tp_allocator_set(TP_DEVICE_TYPE_CPU, NULL);
    tp_caching_allocator_destroy(ca);
    return 0;
}
