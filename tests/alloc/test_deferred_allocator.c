/*
 * tests/alloc/test_deferred_allocator.c - frees are queued, not run, until
 * an explicit flush or a threshold; then the wrapped deleters run in order.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdlib.h>

#include "../check.h"
#include "fake_raw.h"
#include "tensorplay/caching_allocator.h"
#include "tensorplay/deferred_allocator.h"

// ----------------------------------------------------------------------------
// an inner allocator that logs the order of its frees

static void *freed_order[64];
static size_t nfreed;

static void logging_free(void *ctx) {
    if (nfreed < 64) freed_order[nfreed] = ctx;
    nfreed++;
    free(ctx);
}

static tp_status logging_allocate(tp_allocator *self, size_t n, tp_data_ptr *out) {
    (void)self;
    void *p = malloc(n);
    if (!p) abort();
    *out = (tp_data_ptr){.ptr = p, .ctx = p, .deleter = logging_free, .device = tp_device_cpu()};
    return TP_STATUS_OK;
}

static tp_allocator logging = {.name = "logging", .allocate = logging_allocate};

static tp_data_ptr alloc(tp_deferred_allocator *d, size_t n) {
    tp_data_ptr dp;
    if (tp_allocator_allocate(tp_deferred_allocator_as_allocator(d), n, &dp) != TP_STATUS_OK)
        abort();
    return dp;
}

// A deferred allocator over a fresh unlimited fake_raw, with these thresholds.
static tp_deferred_allocator *make(fake_raw *raw, uint64_t max_queued_bytes,
                                   uint64_t max_queued_count) {
    fake_raw_init(raw, 0);
    return tp_deferred_allocator_new(&raw->vt, max_queued_bytes, max_queued_count);
}

// ----------------------------------------------------------------------------
// tests

static void test_free_only_queues_until_flush(void) {
    fake_raw raw;
    tp_deferred_allocator *d = make(&raw, 0, 0);
    tp_data_ptr a = alloc(d, 100), b = alloc(d, 200), c = alloc(d, 300);
    tp_deferred_allocator_stats st;
    tp_deferred_allocator_get_stats(d, &st);
    CHECK_EQ_U64(st.live_bytes, 600);
    CHECK_EQ_U64(st.live_count, 3);
    tp_data_ptr_clear(&a);
    tp_data_ptr_clear(&b);
    tp_data_ptr_clear(&c);
    CHECK_EQ_U64(raw.frees, 0);
    tp_deferred_allocator_get_stats(d, &st);
    CHECK_EQ_U64(st.queued_bytes, 600);
    CHECK_EQ_U64(st.queued_count, 3);
    CHECK_EQ_U64(st.live_bytes, 0);
    CHECK_EQ_U64(tp_deferred_allocator_flush(d), 3);
    CHECK_EQ_U64(raw.frees, 3);
    tp_deferred_allocator_get_stats(d, &st);
    CHECK_EQ_U64(st.queued_bytes, 0);
    CHECK_EQ_U64(st.queued_count, 0);
    CHECK_EQ_U64(st.peak_queued_bytes, 600);
    CHECK_EQ_U64(st.freed_count, 3);
    CHECK_EQ_U64(st.flush_count, 1);
    CHECK_EQ_U64(st.auto_flush_count, 0);
    CHECK_EQ_U64(tp_deferred_allocator_flush(d), 0); /* nothing left */
    tp_deferred_allocator_get_stats(d, &st);
    CHECK_EQ_U64(st.flush_count, 1);
    tp_deferred_allocator_destroy(d);
}

static void test_flush_frees_oldest_first(void) {
    nfreed = 0;
    tp_deferred_allocator *d = tp_deferred_allocator_new(&logging, 0, 0);
    tp_data_ptr a = alloc(d, 8), b = alloc(d, 8), c = alloc(d, 8);
    void *pa = a.ptr, *pb = b.ptr, *pc = c.ptr;
    tp_data_ptr_clear(&b);
    tp_data_ptr_clear(&c);
    tp_data_ptr_clear(&a);
    CHECK_EQ_U64(nfreed, 0);
    tp_deferred_allocator_flush(d);
    CHECK_EQ_U64(nfreed, 3);
    CHECK(freed_order[0] == pb && freed_order[1] == pc && freed_order[2] == pa);
    tp_deferred_allocator_destroy(d);
}

static void test_byte_threshold_flushes_automatically(void) {
    fake_raw raw;
    tp_deferred_allocator *d = make(&raw, 1000, 0);
    tp_data_ptr x[4] = {alloc(d, 400), alloc(d, 400), alloc(d, 400), alloc(d, 400)};
    tp_data_ptr_clear(&x[0]);
    tp_data_ptr_clear(&x[1]); /* 800 queued: not over 1000 */
    CHECK_EQ_U64(raw.frees, 0);
    tp_data_ptr_clear(&x[2]); /* 1200 > 1000: the whole batch goes */
    CHECK_EQ_U64(raw.frees, 3);
    tp_deferred_allocator_stats st;
    tp_deferred_allocator_get_stats(d, &st);
    CHECK_EQ_U64(st.queued_bytes, 0);
    CHECK_EQ_U64(st.auto_flush_count, 1);
    CHECK_EQ_U64(st.peak_queued_bytes, 1200);
    tp_data_ptr_clear(&x[3]);
    CHECK_EQ_U64(raw.frees, 3);
    tp_deferred_allocator_destroy(d); /* flushes the last one */
    CHECK_EQ_U64(raw.frees, 4);
    CHECK_EQ_U64(raw.live_bytes, 0);
}

static void test_count_threshold_flushes_automatically(void) {
    fake_raw raw;
    tp_deferred_allocator *d = make(&raw, 0, 2);
    tp_data_ptr x[3] = {alloc(d, 1), alloc(d, 1), alloc(d, 1)};
    tp_data_ptr_clear(&x[0]);
    tp_data_ptr_clear(&x[1]);
    CHECK_EQ_U64(raw.frees, 0);
    tp_data_ptr_clear(&x[2]);
    CHECK_EQ_U64(raw.frees, 3);
    tp_deferred_allocator_destroy(d);
}

static void test_destroy_with_live_blocks_frees_them_when_they_go(void) {
    fake_raw raw;
    tp_deferred_allocator *d = make(&raw, 0, 0);
    tp_data_ptr a = alloc(d, 64), b = alloc(d, 64);
    tp_data_ptr_clear(&a);
    tp_deferred_allocator_destroy(d); /* a is flushed; b still in use */
    CHECK_EQ_U64(raw.frees, 1);
    tp_data_ptr_clear(&b); /* runs at once: nobody is left to flush */
    CHECK_EQ_U64(raw.frees, 2);
    CHECK_EQ_U64(raw.live_bytes, 0);
}

static void test_storage_release_is_deferred(void) {
    fake_raw raw;
    tp_deferred_allocator *d = make(&raw, 0, 0);
    tp_storage *s = tp_storage_new(4096, tp_deferred_allocator_as_allocator(d), false);
    CHECK(s != NULL);
    tp_storage_release(s);
    CHECK_EQ_U64(raw.frees, 0);
    tp_deferred_allocator_stats st;
    tp_deferred_allocator_get_stats(d, &st);
    CHECK_EQ_U64(st.queued_bytes, 4096);
    tp_deferred_allocator_flush(d);
    CHECK_EQ_U64(raw.frees, 1);
    tp_deferred_allocator_destroy(d);
}

static void test_queued_blocks_are_not_reused_by_a_caching_inner_allocator(void) {
    fake_raw raw;
    fake_raw_init(&raw, 0);
    tp_caching_allocator_config cfg;
    tp_caching_allocator_config_default(&cfg);
    tp_caching_allocator *ca = tp_caching_allocator_new(&raw.vt, &cfg);
    tp_deferred_allocator *d = tp_deferred_allocator_new(tp_caching_allocator_as_allocator(ca), 0, 0);
    tp_data_ptr a = alloc(d, 1000);
    void *pa = a.ptr;
    tp_data_ptr_clear(&a);
    tp_data_ptr b = alloc(d, 1000); /* a is still queued: the cache cannot hand it out */
    CHECK(b.ptr != pa);
    tp_deferred_allocator_flush(d);
    tp_data_ptr c = alloc(d, 1000);
    CHECK(c.ptr == pa);
    tp_data_ptr_clear(&b);
    tp_data_ptr_clear(&c);
    tp_deferred_allocator_destroy(d);
    tp_caching_allocator_destroy(ca);
    CHECK_EQ_U64(raw.live_bytes, 0);
}

static void test_zero_bytes_and_bad_arguments(void) {
    CHECK(tp_deferred_allocator_new(NULL, 0, 0) == NULL);
    CHECK_CONTAINS(tp_last_error(), "inner allocator is NULL");
    fake_raw raw;
    tp_deferred_allocator *d = make(&raw, 0, 0);
    tp_data_ptr z = alloc(d, 0);
    CHECK(z.ptr == NULL && z.ctx == NULL);
    /* An inner failure passes through with the inner message. */
    raw.capacity = 10;
    tp_data_ptr dp;
    CHECK(tp_allocator_allocate(tp_deferred_allocator_as_allocator(d), 100, &dp) ==
          TP_STATUS_OUT_OF_MEMORY);
    CHECK_CONTAINS(tp_last_error(), "fake device full");
    tp_deferred_allocator_stats st;
    tp_deferred_allocator_get_stats(d, &st);
    CHECK_EQ_U64(st.alloc_count, 0);
    tp_deferred_allocator_destroy(d);
}

typedef struct worker_arg {
    tp_deferred_allocator *d;
    unsigned seed;
} worker_arg;

static void *worker(void *p) {
    worker_arg *w = p;
    unsigned x = w->seed;
    for (int i = 0; i < 2000; i++) {
        x = x * 1103515245u + 12345u;
        size_t n = 1 + (x >> 8) % 4096;
        tp_data_ptr dp = alloc(w->d, n);
        memset(dp.ptr, 1, n < 16 ? n : 16);
        tp_data_ptr_clear(&dp);
        if (i % 500 == 0) tp_deferred_allocator_flush(w->d);
    }
    return NULL;
}

static void test_concurrent_frees_and_flushes_lose_nothing(void) {
    fake_raw raw;
    tp_deferred_allocator *d = make(&raw, 64 * 1024, 100);
    pthread_t th[4];
    worker_arg args[4];
    for (int i = 0; i < 4; i++) {
        args[i] = (worker_arg){d, 31u * (unsigned)i + 7};
        pthread_create(&th[i], NULL, worker, &args[i]);
    }
    for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
    tp_deferred_allocator_stats st;
    tp_deferred_allocator_get_stats(d, &st);
    CHECK_EQ_U64(st.alloc_count, 8000);
    CHECK_EQ_U64(st.live_count, 0);
    CHECK_EQ_U64(st.freed_count + st.queued_count, 8000);
    CHECK(st.auto_flush_count > 0);
    CHECK_EQ_U64(raw.frees, st.freed_count);
    tp_deferred_allocator_destroy(d);
    CHECK_EQ_U64(raw.frees, 8000);
    CHECK_EQ_U64(raw.live_bytes, 0);
}

int main(void) {
    RUN(test_free_only_queues_until_flush);
    RUN(test_flush_frees_oldest_first);
    RUN(test_byte_threshold_flushes_automatically);
    RUN(test_count_threshold_flushes_automatically);
    RUN(test_destroy_with_live_blocks_frees_them_when_they_go);
    RUN(test_storage_release_is_deferred);
    RUN(test_queued_blocks_are_not_reused_by_a_caching_inner_allocator);
    RUN(test_zero_bytes_and_bad_arguments);
    RUN(test_concurrent_frees_and_flushes_lose_nothing);
    return CHECK_EXIT_STATUS();
}
