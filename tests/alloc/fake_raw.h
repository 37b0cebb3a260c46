/*
 * tests/alloc/fake_raw.h - a raw tp_allocator for tests: real, page-aligned
 * memory, counted, with a byte capacity past which it fails like a device
 * that ran out of memory.  Single-threaded bookkeeping guarded by a mutex.
 */
#ifndef TP_TESTS_FAKE_RAW_H
#define TP_TESTS_FAKE_RAW_H

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include "../../src/core/internal.h"

typedef struct fake_raw {
    tp_allocator vt;
    pthread_mutex_t mu;
    uint64_t capacity; /* 0 = unlimited */
    uint64_t live_bytes;
    uint64_t allocs, frees, failures;
} fake_raw;

typedef struct fake_block {
    fake_raw *owner;
    size_t size;
    void *mem;
} fake_block;

static void fake_raw_free(void *ctx) {
    fake_block *b = ctx;
    fake_raw *r = b->owner;
    pthread_mutex_lock(&r->mu);
    r->live_bytes -= b->size;
    r->frees++;
    pthread_mutex_unlock(&r->mu);
    free(b->mem);
    free(b);
}

static tp_status fake_raw_allocate(tp_allocator *self, size_t n, tp_data_ptr *out) {
    fake_raw *r = self->state;
    memset(out, 0, sizeof *out);
    if (n == 0) return TP_STATUS_OK;
    pthread_mutex_lock(&r->mu);
    if (r->capacity && r->live_bytes + n > r->capacity) {
        r->failures++;
        pthread_mutex_unlock(&r->mu);
        return tp__error(TP_STATUS_OUT_OF_MEMORY, "fake device full (%zu bytes asked)", n);
    }
    r->live_bytes += n;
    r->allocs++;
    pthread_mutex_unlock(&r->mu);
    fake_block *b = malloc(sizeof *b);
    void *mem = NULL;
    if (!b || posix_memalign(&mem, 4096, n) != 0) abort(); /* the test machine itself is broken */
    *b = (fake_block){.owner = r, .size = n, .mem = mem};
    *out = (tp_data_ptr){.ptr = mem, .ctx = b, .deleter = fake_raw_free, .device = tp_device_cpu()};
    return TP_STATUS_OK;
}

static void fake_raw_init(fake_raw *r, uint64_t capacity) {
    memset(r, 0, sizeof *r);
    r->vt = (tp_allocator){.name = "fake", .allocate = fake_raw_allocate, .state = r};
    r->capacity = capacity;
    pthread_mutex_init(&r->mu, NULL);
}

#endif
