/*
 * samples/alloc/lifetimes.c - DataPtr lifetimes that differ from the
 * storage's: deferred frees and file-backed (mmap) safetensors storages.
 *
 * Part 1 installs a deferred-free allocator over the CPU allocator, makes
 * DEFERRED storages, releases them (the deleter only queues the blocks),
 * waits DELAY_MS and flushes: under tpprof each DataPtr's release delay -
 * from its deleter running to its block being freed - is at least DELAY_MS.
 * Part 2 saves two tensors as a safetensors file, loads it back zero-copy
 * (the storages point into one read-only file mapping), keeps them a while
 * and releases them: the last one unmaps the file.
 *
 * Usage: lifetimes [dir for the .safetensors file] (default /tmp)
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include "tensorplay/deferred_allocator.h"
#include "tensorplay/safetensors.h"
#include "tensorplay/tensorplay.h"

#define DEFERRED 4
#define DELAY_MS 30

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {}
}

static int fail(const char *what) {
    fprintf(stderr, "lifetimes: %s: %s\n", what, tp_last_error());
    return 1;
}

static int deferred_part(void) {
    tp_deferred_allocator *d = tp_deferred_allocator_new(tp_allocator_cpu(), 0, 0);
    if (!d) return fail("deferred allocator");
    tp_allocator_set(TP_DEVICE_TYPE_CPU, tp_deferred_allocator_as_allocator(d));
    for (int i = 0; i < DEFERRED; i++) {
        tp_tensor *t = tp_ones(1, (int64_t[]){16384}, TP_DTYPE_FLOAT32); /* 64 KiB */
        if (!t) return fail("tp_ones");
        tp_tensor_release(t); /* deleter runs: the block is only queued */
    }
    sleep_ms(DELAY_MS);
    size_t freed = tp_deferred_allocator_flush(d);
    tp_allocator_set(TP_DEVICE_TYPE_CPU, NULL);
    tp_deferred_allocator_destroy(d);
    printf("lifetimes: %d deferred storages, %zu blocks freed by the flush after %d ms\n", DEFERRED,
           freed, DELAY_MS);
    return freed == DEFERRED ? 0 : 1;
}

static int mmap_part(const char *dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/tp-lifetimes-%d.safetensors", dir, (int)getpid());
    tp_tensor *w = tp_arange(0, 4096, 1, TP_DTYPE_FLOAT32);
    tp_tensor *b = tp_zeros(1, (int64_t[]){1024}, TP_DTYPE_FLOAT64);
    if (!w || !b) return fail("tensors");
    const char *names[] = {"w", "b"};
    tp_tensor *ts[] = {w, b};
    if (tp_safetensors_save(path, 2, names, ts, NULL) != TP_STATUS_OK) return fail("save");
    tp_tensor_release(w);
    tp_tensor_release(b);

    tp_safetensors *st = NULL;
    if (tp_safetensors_load(path, &st) != TP_STATUS_OK) return fail("load");
    unlink(path); /* the mapping keeps the data */
    tp_tensor *lw = tp_tensor_retain(tp_safetensors_get(st, "w"));
    tp_safetensors_free(st); /* lw alone keeps the mapping now */
    sleep_ms(DELAY_MS);
    double v = 0;
    if (tp_tensor_get(lw, (int64_t[]){4095}, &v) != TP_STATUS_OK) return fail("get");
    tp_tensor_release(lw); /* the last storage: unmaps the file */
    printf("lifetimes: safetensors w[4095] = %.0f read from the mapping\n", v);
    return v == 4095.0 ? 0 : 1;
}

int main(int argc, char **argv) {
    int rc = deferred_part();
    return rc ? rc : mmap_part(argc > 1 ? argv[1] : "/tmp");
}
