/*
 * tests/core/test_storage.c - Storage refcounts with c10's intrusive_ptr
 * rules, resize and DataPtr swapping (src/core/storage.c).
 */
#include <pthread.h>
#include <stdlib.h>

#include "tensorplay/tensorplay.h"
#include "../check.h"

// ----------------------------------------------------------------------------
// a DataPtr whose deleter we can count

static int deleter_calls;
static void counting_free(void *ctx) {
    deleter_calls++;
    free(ctx);
}

static tp_storage *counted_storage(size_t nbytes) {
    void *p = malloc(nbytes);
    tp_data_ptr dp = {.ptr = p, .ctx = p, .deleter = counting_free, .device = tp_device_cpu()};
    return tp_storage_new_with_data_ptr(dp, nbytes, NULL, false);
}

// ----------------------------------------------------------------------------
// refcounts

static void test_new_storage_has_strong_one_and_weak_one(void) {
    tp_storage *s = tp_storage_new(100, NULL, true);
    CHECK(s != NULL);
    CHECK_EQ(tp_storage_use_count(s), 1);
    CHECK_EQ(tp_storage_weak_count(s), 1);
    CHECK_EQ(tp_storage_nbytes(s), 100);
    CHECK(tp_storage_data(s) != NULL);
    CHECK(tp_storage_allocator(s) == tp_allocator_cpu());
    CHECK(tp_storage_resizable(s));
    CHECK_EQ(tp_storage_device(s).type, TP_DEVICE_TYPE_CPU);
    tp_storage *t = tp_storage_new(0, NULL, false);
    CHECK(tp_storage_data(t) == NULL);
    CHECK(tp_storage_id(s) != 0);
    CHECK(tp_storage_id(t) > tp_storage_id(s)); /* from one increasing counter */
    tp_storage_release(t);
    tp_storage_release(s);
}

static void test_retain_and_release_change_only_the_strong_count(void) {
    deleter_calls = 0;
    tp_storage *s = counted_storage(16);
    tp_storage_retain(s);
    CHECK_EQ(tp_storage_use_count(s), 2);
    CHECK_EQ(tp_storage_weak_count(s), 1);
    tp_storage_release(s);
    CHECK_EQ(tp_storage_use_count(s), 1);
    CHECK_EQ(deleter_calls, 0);
    tp_storage_release(s); /* last strong, no weak: deleted directly */
    CHECK_EQ(deleter_calls, 1);
    tp_storage_release(NULL);
}

static void test_weak_reference_keeps_struct_but_not_data(void) {
    deleter_calls = 0;
    tp_storage *s = counted_storage(16);
    tp_storage_weak_retain(s);
    CHECK_EQ(tp_storage_use_count(s), 1);
    CHECK_EQ(tp_storage_weak_count(s), 2);
    tp_storage_release(s);
    /* strong hit 0: the data is gone, the weak count dropped its +1 */
    CHECK_EQ(deleter_calls, 1);
    CHECK_EQ(tp_storage_use_count(s), 0);
    CHECK_EQ(tp_storage_weak_count(s), 1);
    CHECK(tp_storage_data(s) == NULL);
    tp_storage_weak_release(s); /* struct freed (ASan would see a leak otherwise) */
    CHECK_EQ(deleter_calls, 1);
}

static void test_weak_lock_upgrades_only_while_strong_is_positive(void) {
    deleter_calls = 0;
    tp_storage *s = counted_storage(16);
    tp_storage_weak_retain(s);
    tp_storage *locked = tp_storage_weak_lock(s);
    CHECK(locked == s);
    CHECK_EQ(tp_storage_use_count(s), 2);
    CHECK_EQ(tp_storage_weak_count(s), 2);
    tp_storage_release(locked);
    tp_storage_release(s);
    CHECK_EQ(deleter_calls, 1);
    /* A strong count of 0 is final: lock fails and does not resurrect. */
    tp_clear_error();
    CHECK(tp_storage_weak_lock(s) == NULL);
    CHECK_EQ(tp_storage_use_count(s), 0);
    CHECK_EQ(tp_last_status(), TP_STATUS_OK); /* not an error */
    tp_storage_weak_release(s);
}

static void test_struct_outlives_data_until_last_weak_release(void) {
    deleter_calls = 0;
    tp_storage *s = counted_storage(16);
    tp_storage_weak_retain(s);
    tp_storage_weak_retain(s);
    CHECK_EQ(tp_storage_weak_count(s), 3);
    tp_storage_release(s);
    CHECK_EQ(tp_storage_weak_count(s), 2);
    tp_storage_weak_release(s);
    CHECK_EQ(tp_storage_weak_count(s), 1);
    CHECK_EQ(tp_storage_id(s) != 0, 1); /* still readable */
    tp_storage_weak_release(s);
    CHECK_EQ(deleter_calls, 1);
}

enum { RACE_THREADS = 4, RACE_ROUNDS = 20000 };

static void *retain_release_worker(void *arg) {
    tp_storage *s = arg;
    for (int i = 0; i < RACE_ROUNDS; i++) {
        tp_storage_retain(s);
        tp_storage_weak_retain(s);
        tp_storage *l = tp_storage_weak_lock(s);
        tp_storage_release(l);
        tp_storage_weak_release(s);
        tp_storage_release(s);
    }
    return NULL;
}

static void test_counts_are_exact_under_concurrent_retain_and_release(void) {
    deleter_calls = 0;
    tp_storage *s = counted_storage(16);
    pthread_t th[RACE_THREADS];
    for (int i = 0; i < RACE_THREADS; i++) pthread_create(&th[i], NULL, retain_release_worker, s);
    for (int i = 0; i < RACE_THREADS; i++) pthread_join(th[i], NULL);
    CHECK_EQ(tp_storage_use_count(s), 1);
    CHECK_EQ(tp_storage_weak_count(s), 1);
    CHECK_EQ(deleter_calls, 0);
    tp_storage_release(s);
    CHECK_EQ(deleter_calls, 1);
}

// Each thread holds a strong ref and a weak ref; the last strong release
// races the other threads' weak_lock.  The data must be freed exactly once
// and lock must never hand out a storage whose data is gone.
static void *lock_race_worker(void *arg) {
    tp_storage *s = arg;
    for (int i = 0; i < 1000; i++) {
        tp_storage *l = tp_storage_weak_lock(s);
        if (l) {
            if (!tp_storage_data(l)) __atomic_fetch_add(&deleter_calls, 1000000, __ATOMIC_RELAXED);
            tp_storage_release(l);
        }
    }
    tp_storage_release(s);
    tp_storage_weak_release(s);
    return NULL;
}

static void test_weak_lock_racing_last_release_frees_data_once(void) {
    for (int round = 0; round < 20; round++) {
        __atomic_store_n(&deleter_calls, 0, __ATOMIC_RELAXED);
        tp_storage *s = counted_storage(16);
        for (int i = 0; i < RACE_THREADS; i++) {
            tp_storage_retain(s);
            tp_storage_weak_retain(s);
        }
        tp_storage_release(s); /* the threads hold all strong refs now */
        pthread_t th[RACE_THREADS];
        for (int i = 0; i < RACE_THREADS; i++) pthread_create(&th[i], NULL, lock_race_worker, s);
        for (int i = 0; i < RACE_THREADS; i++) pthread_join(th[i], NULL);
        CHECK_EQ(__atomic_load_n(&deleter_calls, __ATOMIC_RELAXED), 1);
    }
}

// ----------------------------------------------------------------------------
// ownership of wrapped data

static void test_wrapped_borrowed_memory_is_never_freed(void) {
    static char buf[32];
    tp_data_ptr dp = {.ptr = buf, .ctx = NULL, .deleter = NULL, .device = tp_device_cpu()};
    tp_storage *s = tp_storage_new_with_data_ptr(dp, sizeof buf, NULL, false);
    CHECK(tp_storage_data(s) == buf);
    tp_storage_release(s);
    buf[0] = 1; /* still ours */
    CHECK_EQ(buf[0], 1);
}

static void test_release_runs_deleter_for_ctx_without_data_pointer(void) {
    deleter_calls = 0;
    void *ctx = malloc(4); /* e.g. a mapping object behind a 0-byte view */
    tp_data_ptr dp = {.ptr = NULL, .ctx = ctx, .deleter = counting_free};
    tp_storage *s = tp_storage_new_with_data_ptr(dp, 0, NULL, false);
    CHECK(tp_storage_data(s) == NULL);
    tp_storage_release(s);
    CHECK_EQ(deleter_calls, 1);
}

static void test_set_data_ptr_on_null_storage_hands_the_data_back(void) {
    deleter_calls = 0;
    void *p = malloc(4);
    tp_data_ptr dp = {.ptr = p, .ctx = p, .deleter = counting_free};
    tp_data_ptr back = tp_storage_set_data_ptr(NULL, dp, 4);
    CHECK_EQ(tp_last_status(), TP_STATUS_INVALID_ARGUMENT);
    CHECK_STR(tp_last_error(), "set_data_ptr: storage is NULL");
    CHECK(back.ptr == p); /* still the caller's to free */
    tp_data_ptr_clear(&back);
    CHECK_EQ(deleter_calls, 1);
    CHECK_EQ(tp_storage_use_count(NULL), 0);
    CHECK(tp_storage_weak_lock(NULL) == NULL);
    tp_storage_weak_release(NULL);
}

// ----------------------------------------------------------------------------
// resize and set_data_ptr

typedef struct tally { int allocs, frees; bool fail; } tally;
static tally tl;
static void tally_free(void *ctx) { tl.frees++; free(ctx); }
static tp_status tally_allocate(tp_allocator *self, size_t nbytes, tp_data_ptr *out) {
    (void)self;
    memset(out, 0, sizeof *out);
    if (tl.fail) return TP_STATUS_OUT_OF_MEMORY;
    tl.allocs++;
    out->ptr = calloc(1, nbytes ? nbytes : 1);
    out->ctx = out->ptr;
    out->deleter = tally_free;
    return TP_STATUS_OK;
}
static tp_allocator tally_allocator = {.name = "tally", .allocate = tally_allocate};

static void test_resize_grows_copies_and_frees_the_old_block(void) {
    memset(&tl, 0, sizeof tl);
    tp_storage *s = tp_storage_new(8, &tally_allocator, true);
    memcpy(tp_storage_data(s), "abcdefgh", 8);
    void *old = tp_storage_data(s);
    uint64_t id = tp_storage_id(s);
    CHECK_EQ(tp_storage_resize(s, 64), TP_STATUS_OK);
    CHECK_EQ(tp_storage_nbytes(s), 64);
    CHECK(memcmp(tp_storage_data(s), "abcdefgh", 8) == 0);
    CHECK(tp_storage_data(s) != old);
    CHECK_EQ(tl.allocs, 2);
    CHECK_EQ(tl.frees, 1);
    CHECK_EQ(tp_storage_id(s), id); /* the same storage, new bytes */
    CHECK_EQ(tp_storage_resize(s, 4), TP_STATUS_OK);
    CHECK_EQ(tp_storage_nbytes(s), 4);
    CHECK(memcmp(tp_storage_data(s), "abcd", 4) == 0);
    tp_storage_release(s);
    CHECK_EQ(tl.frees, 3);
}

static void test_resize_is_seen_through_a_tensor_on_the_storage(void) {
    tp_storage *s = tp_storage_new(4 * sizeof(float), NULL, true);
    float *f = tp_storage_data(s);
    for (int i = 0; i < 4; i++) f[i] = (float)i;
    int64_t sz[1] = {2};
    tp_tensor *x = tp_tensor_new_from_storage(s, 2, 1, sz, NULL, TP_DTYPE_FLOAT32);
    tp_tensor *v = tp_tensor_slice(x, 0, 1, 2, 1);
    CHECK(tp_tensor_data(v) == (char *)tp_storage_data(s) + 12);
    CHECK_EQ(tp_storage_resize(s, 64 * sizeof(float)), TP_STATUS_OK);
    CHECK(tp_tensor_data(v) == (char *)tp_storage_data(s) + 12);
    CHECK(*(float *)tp_tensor_data(v) == 3.0f);
    tp_tensor_release(v);
    tp_tensor_release(x);
    tp_storage_release(s);
}

static void test_resize_refuses_non_resizable_storage(void) {
    tp_storage *s = tp_storage_new(8, NULL, false);
    void *before = tp_storage_data(s);
    CHECK_EQ(tp_storage_resize(s, 16), TP_STATUS_INVALID_ARGUMENT);
    CHECK_STR(tp_last_error(), "Trying to resize storage that is not resizable");
    CHECK(tp_storage_data(s) == before);
    CHECK_EQ(tp_storage_nbytes(s), 8);
    tp_storage_release(s);
    /* Wrapped data with no allocator cannot grow either. */
    tp_storage *w = counted_storage(8);
    CHECK_EQ(tp_storage_resize(w, 16), TP_STATUS_INVALID_ARGUMENT);
    tp_storage_release(w);
    CHECK_EQ(tp_storage_resize(NULL, 16), TP_STATUS_INVALID_ARGUMENT);
}

static void test_resize_failure_keeps_the_old_data(void) {
    memset(&tl, 0, sizeof tl);
    tp_storage *s = tp_storage_new(8, &tally_allocator, true);
    memcpy(tp_storage_data(s), "12345678", 8);
    void *before = tp_storage_data(s);
    tl.fail = true;
    CHECK_EQ(tp_storage_resize(s, 1024), TP_STATUS_OUT_OF_MEMORY);
    CHECK_STR(tp_last_error(), "tally allocator: failed to allocate 1024 bytes");
    CHECK(tp_storage_data(s) == before);
    CHECK(memcmp(before, "12345678", 8) == 0);
    tl.fail = false;
    tp_storage_release(s);
    CHECK_EQ(tl.frees, 1);
}

static void test_set_data_ptr_returns_the_old_one_to_the_caller(void) {
    deleter_calls = 0;
    tp_storage *s = counted_storage(8);
    void *old_ptr = tp_storage_data(s);
    void *p = malloc(32);
    tp_data_ptr fresh = {.ptr = p, .ctx = p, .deleter = counting_free, .device = tp_device_cpu()};
    tp_data_ptr old = tp_storage_set_data_ptr(s, fresh, 32);
    CHECK(old.ptr == old_ptr);
    CHECK(old.deleter == counting_free);
    CHECK(tp_storage_data(s) == p);
    CHECK_EQ(tp_storage_nbytes(s), 32);
    CHECK_EQ(deleter_calls, 0); /* the old data is the caller's now */
    tp_data_ptr_clear(&old);
    CHECK_EQ(deleter_calls, 1);
    tp_storage_release(s);
    CHECK_EQ(deleter_calls, 2);
}

int main(void) {
    RUN_TEST(test_new_storage_has_strong_one_and_weak_one);
    RUN_TEST(test_retain_and_release_change_only_the_strong_count);
    RUN_TEST(test_weak_reference_keeps_struct_but_not_data);
    RUN_TEST(test_weak_lock_upgrades_only_while_strong_is_positive);
    RUN_TEST(test_struct_outlives_data_until_last_weak_release);
    RUN_TEST(test_counts_are_exact_under_concurrent_retain_and_release);
    RUN_TEST(test_weak_lock_racing_last_release_frees_data_once);
    RUN_TEST(test_wrapped_borrowed_memory_is_never_freed);
    RUN_TEST(test_release_runs_deleter_for_ctx_without_data_pointer);
    RUN_TEST(test_set_data_ptr_on_null_storage_hands_the_data_back);
    RUN_TEST(test_resize_grows_copies_and_frees_the_old_block);
    RUN_TEST(test_resize_is_seen_through_a_tensor_on_the_storage);
    RUN_TEST(test_resize_refuses_non_resizable_storage);
    RUN_TEST(test_resize_failure_keeps_the_old_data);
    RUN_TEST(test_set_data_ptr_returns_the_old_one_to_the_caller);
    return CHECK_DONE();
}
