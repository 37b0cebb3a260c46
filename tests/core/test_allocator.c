/*
 * tests/core/test_allocator.c - DataPtr clearing, the CPU allocator and the
 * per-device registry (src/core/allocator.c).
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tensorplay/tensorplay.h"
#include "../check.h"

// ----------------------------------------------------------------------------
// DataPtr

static int deleter_calls;
static void *deleter_last_ctx;
static void counting_deleter(void *ctx) {
    deleter_calls++;
    deleter_last_ctx = ctx;
}

static void test_clear_runs_deleter_exactly_once(void) {
    deleter_calls = 0;
    int payload;
    tp_data_ptr dp = {.ptr = &payload, .ctx = &payload, .deleter = counting_deleter};
    tp_data_ptr_clear(&dp);
    CHECK_EQ(deleter_calls, 1);
    CHECK(deleter_last_ctx == &payload);
    CHECK(dp.ptr == NULL && dp.ctx == NULL && dp.deleter == NULL);
    tp_data_ptr_clear(&dp);
    CHECK_EQ(deleter_calls, 1);
}

static void test_clear_runs_deleter_when_ptr_is_null_but_ctx_is_not(void) {
    deleter_calls = 0;
    int ctx;
    tp_data_ptr dp = {.ptr = NULL, .ctx = &ctx, .deleter = counting_deleter};
    tp_data_ptr_clear(&dp);
    CHECK_EQ(deleter_calls, 1);
    CHECK(deleter_last_ctx == &ctx);
}

static void test_clear_without_ctx_or_deleter_frees_nothing(void) {
    deleter_calls = 0;
    int data;
    tp_data_ptr no_ctx = {.ptr = &data, .ctx = NULL, .deleter = counting_deleter};
    tp_data_ptr_clear(&no_ctx);
    tp_data_ptr borrowed = {.ptr = &data, .ctx = &data, .deleter = NULL};
    tp_data_ptr_clear(&borrowed);
    CHECK_EQ(deleter_calls, 0);
    CHECK(borrowed.ptr == NULL && borrowed.ctx == NULL);
    tp_data_ptr_clear(NULL); /* ignored */
}

// ----------------------------------------------------------------------------
// CPU allocator

static void test_cpu_blocks_are_64_byte_aligned_and_counted_exactly(void) {
    tp_allocator *cpu = tp_allocator_cpu();
    CHECK(tp_allocator_get(TP_DEVICE_TYPE_CPU) == cpu);
    CHECK_STR(cpu->name, "cpu");
    tp_allocator_stats before, mid, after;
    tp_allocator_get_stats(cpu, &before);
    static const size_t sizes[] = {1, 3, 64, 100, 4096, 1 << 20};
    tp_data_ptr dps[6];
    uint64_t total = 0;
    for (int i = 0; i < 6; i++) {
        CHECK_EQ(tp_allocator_allocate(cpu, sizes[i], &dps[i]), TP_STATUS_OK);
        CHECK(dps[i].ptr != NULL);
        CHECK_EQ((uintptr_t)dps[i].ptr % 64, 0);
        CHECK(dps[i].ctx == dps[i].ptr); /* the system block itself, no header */
        CHECK_EQ(dps[i].device.type, TP_DEVICE_TYPE_CPU);
        memset(dps[i].ptr, 0xab, sizes[i]); /* writable over the whole size */
        total += sizes[i];
    }
    tp_allocator_get_stats(cpu, &mid);
    CHECK_EQ(mid.current_bytes - before.current_bytes, total);
    CHECK_EQ(mid.current_count - before.current_count, 6);
    CHECK_EQ(mid.alloc_count - before.alloc_count, 6);
    CHECK(mid.peak_bytes >= mid.current_bytes);
    for (int i = 0; i < 6; i++) tp_data_ptr_clear(&dps[i]);
    tp_allocator_get_stats(cpu, &after);
    CHECK_EQ(after.current_bytes, before.current_bytes);
    CHECK_EQ(after.current_count, before.current_count);
    CHECK_EQ(after.free_count - before.free_count, 6);
    CHECK_EQ(after.peak_bytes, mid.peak_bytes); /* a high-water mark never drops */
}

static void test_cpu_peak_tracks_the_high_water_mark(void) {
    tp_allocator *cpu = tp_allocator_cpu();
    tp_allocator_stats s0, s1;
    tp_allocator_get_stats(cpu, &s0);
    size_t big = (size_t)(s0.peak_bytes - s0.current_bytes) + (1 << 16);
    tp_data_ptr a;
    CHECK_EQ(tp_allocator_allocate(cpu, big, &a), TP_STATUS_OK);
    tp_data_ptr_clear(&a);
    tp_allocator_get_stats(cpu, &s1);
    CHECK_EQ(s1.peak_bytes, s0.current_bytes + big);
    CHECK_EQ(s1.current_bytes, s0.current_bytes);
}

static void test_cpu_zero_bytes_gives_null_and_no_ctx(void) {
    tp_allocator *cpu = tp_allocator_cpu();
    tp_allocator_stats before, after;
    tp_allocator_get_stats(cpu, &before);
    tp_data_ptr dp;
    CHECK_EQ(tp_allocator_allocate(cpu, 0, &dp), TP_STATUS_OK);
    CHECK(dp.ptr == NULL && dp.ctx == NULL);
    tp_data_ptr_clear(&dp);
    tp_allocator_get_stats(cpu, &after);
    CHECK_EQ(after.alloc_count, before.alloc_count);
}

static void test_cpu_failure_is_out_of_memory_with_message(void) {
    tp_allocator *cpu = tp_allocator_cpu();
    tp_allocator_stats before, after;
    tp_allocator_get_stats(cpu, &before);
    tp_data_ptr dp = {.ptr = (void *)1};
    CHECK_EQ(tp_allocator_allocate(cpu, (size_t)1 << 62, &dp), TP_STATUS_OUT_OF_MEMORY);
    CHECK_EQ(tp_last_status(), TP_STATUS_OUT_OF_MEMORY);
    CHECK_STR(tp_last_error(), "CPU allocator: failed to allocate 4611686018427387904 bytes");
    CHECK(dp.ptr == NULL && dp.ctx == NULL && dp.deleter == NULL);
    tp_allocator_get_stats(cpu, &after);
    CHECK_EQ(after.alloc_count, before.alloc_count);
    CHECK_EQ(after.current_bytes, before.current_bytes);
}

static void test_cpu_raw_deleter_frees_a_block(void) {
    tp_allocator *cpu = tp_allocator_cpu();
    tp_allocator_stats before, after;
    tp_allocator_get_stats(cpu, &before);
    tp_data_ptr dp;
    CHECK_EQ(tp_allocator_allocate(cpu, 256, &dp), TP_STATUS_OK);
    CHECK(cpu->raw_deleter != NULL);
    cpu->raw_deleter(dp.ptr);
    tp_allocator_get_stats(cpu, &after);
    CHECK_EQ(after.current_bytes, before.current_bytes);
    CHECK_EQ(after.free_count - before.free_count, 1);
}

enum { STRESS_THREADS = 4, STRESS_ROUNDS = 2000 };

static void *stress_worker(void *arg) {
    unsigned seed = (unsigned)(uintptr_t)arg;
    tp_data_ptr live[16] = {{0}};
    for (int r = 0; r < STRESS_ROUNDS; r++) {
        int slot = (int)(rand_r(&seed) % 16);
        if (live[slot].ptr) tp_data_ptr_clear(&live[slot]);
        else tp_allocator_allocate(tp_allocator_cpu(), 1 + rand_r(&seed) % 5000, &live[slot]);
    }
    for (int i = 0; i < 16; i++) tp_data_ptr_clear(&live[i]);
    return NULL;
}

static void test_cpu_stats_stay_exact_under_threads(void) {
    tp_allocator *cpu = tp_allocator_cpu();
    tp_allocator_stats before, after;
    tp_allocator_get_stats(cpu, &before);
    pthread_t th[STRESS_THREADS];
    for (int i = 0; i < STRESS_THREADS; i++)
        pthread_create(&th[i], NULL, stress_worker, (void *)(uintptr_t)(i + 1));
    for (int i = 0; i < STRESS_THREADS; i++) pthread_join(th[i], NULL);
    tp_allocator_get_stats(cpu, &after);
    CHECK_EQ(after.current_bytes, before.current_bytes);
    CHECK_EQ(after.current_count, before.current_count);
    CHECK(after.alloc_count - before.alloc_count > STRESS_THREADS * 100);
    CHECK_EQ(after.alloc_count - before.alloc_count, after.free_count - before.free_count);
}

static _Atomic int fork_stop;

static void *hammer_worker(void *arg) {
    (void)arg;
    while (!fork_stop) {
        tp_data_ptr dp;
        tp_allocator_allocate(tp_allocator_cpu(), 128, &dp);
        tp_data_ptr_clear(&dp);
    }
    return NULL;
}

static void test_child_of_fork_can_allocate_while_threads_were_allocating(void) {
    fork_stop = 0;
    pthread_t th[2];
    for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, hammer_worker, NULL);
    int ok_children = 0;
    for (int round = 0; round < 20; round++) {
        pid_t pid = fork();
        if (pid == 0) {
            alarm(5); /* a deadlocked child dies instead of hanging the suite */
            tp_data_ptr dp;
            int rc = tp_allocator_allocate(tp_allocator_cpu(), 64, &dp) == TP_STATUS_OK ? 0 : 1;
            tp_data_ptr_clear(&dp);
            _exit(rc);
        }
        int status = 0;
        waitpid(pid, &status, 0);
        ok_children += WIFEXITED(status) && WEXITSTATUS(status) == 0;
    }
    fork_stop = 1;
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    CHECK_EQ(ok_children, 20);
}

// ----------------------------------------------------------------------------
// registry

typedef struct counting_state {
    int allocs, frees;
    bool fail;
} counting_state;

static counting_state counting;

static void counting_free(void *ctx) {
    counting.frees++;
    free(ctx);
}

static tp_status counting_allocate(tp_allocator *self, size_t nbytes, tp_data_ptr *out) {
    counting_state *st = self->state;
    memset(out, 0, sizeof *out);
    if (st->fail) return TP_STATUS_OUT_OF_MEMORY; /* leaves no message on purpose */
    st->allocs++;
    out->ptr = malloc(nbytes ? nbytes : 1);
    out->ctx = out->ptr;
    out->deleter = counting_free;
    out->device = tp_device_cpu();
    return TP_STATUS_OK;
}

static tp_allocator counting_allocator = {
    .name = "counting",
    .allocate = counting_allocate,
    .state = &counting,
};

static void test_registry_replaces_and_restores_the_cpu_allocator(void) {
    memset(&counting, 0, sizeof counting);
    CHECK_EQ(tp_allocator_set(TP_DEVICE_TYPE_CPU, &counting_allocator), TP_STATUS_OK);
    CHECK(tp_allocator_get(TP_DEVICE_TYPE_CPU) == &counting_allocator);
    tp_storage *s = tp_storage_new(128, NULL, true); /* NULL = whatever is registered now */
    CHECK(s != NULL);
    CHECK_EQ(counting.allocs, 1);
    CHECK(tp_storage_allocator(s) == &counting_allocator);

    CHECK_EQ(tp_allocator_set(TP_DEVICE_TYPE_CPU, NULL), TP_STATUS_OK);
    CHECK(tp_allocator_get(TP_DEVICE_TYPE_CPU) == tp_allocator_cpu());
    /* The storage keeps the allocator it was created with. */
    CHECK_EQ(tp_storage_resize(s, 256), TP_STATUS_OK);
    CHECK_EQ(counting.allocs, 2);
    CHECK_EQ(counting.frees, 1);
    tp_storage_release(s);
    CHECK_EQ(counting.frees, 2);

    tp_storage *plain = tp_storage_new(128, NULL, false);
    CHECK(tp_storage_allocator(plain) == tp_allocator_cpu());
    CHECK_EQ(counting.allocs, 2);
    tp_storage_release(plain);
}

static void test_registry_rejects_bad_device_types_and_incomplete_allocators(void) {
    /* NULL without CUDA; the built-in CUDA dispatcher in a CUDA build. */
    tp_allocator *cuda_builtin = tp_allocator_get(TP_DEVICE_TYPE_CUDA);
    CHECK(tp_allocator_get((tp_device_type)5) == NULL);
    CHECK_EQ(tp_allocator_set((tp_device_type)-1, NULL), TP_STATUS_INVALID_ARGUMENT);
    CHECK_STR(tp_last_error(), "allocator_set: invalid device type -1");
    tp_allocator broken = {.name = "broken"};
    CHECK_EQ(tp_allocator_set(TP_DEVICE_TYPE_CPU, &broken), TP_STATUS_INVALID_ARGUMENT);
    CHECK_STR(tp_last_error(), "allocator_set: allocator 'broken' has no allocate function");
    CHECK(tp_allocator_get(TP_DEVICE_TYPE_CPU) == tp_allocator_cpu());
    /* CUDA may be registered (e.g. by a test double) and cleared again. */
    CHECK_EQ(tp_allocator_set(TP_DEVICE_TYPE_CUDA, &counting_allocator), TP_STATUS_OK);
    CHECK(tp_allocator_get(TP_DEVICE_TYPE_CUDA) == &counting_allocator);
    CHECK_EQ(tp_allocator_set(TP_DEVICE_TYPE_CUDA, NULL), TP_STATUS_OK);
    CHECK(tp_allocator_get(TP_DEVICE_TYPE_CUDA) == cuda_builtin);
}

static void test_allocate_checks_its_arguments(void) {
    tp_data_ptr dp;
    CHECK_EQ(tp_allocator_allocate(NULL, 8, &dp), TP_STATUS_INVALID_ARGUMENT);
    CHECK_STR(tp_last_error(), "allocate: allocator is NULL");
    CHECK_EQ(tp_allocator_allocate(tp_allocator_cpu(), 8, NULL), TP_STATUS_INVALID_ARGUMENT);
    CHECK_STR(tp_last_error(), "allocate: output DataPtr is NULL");
    tp_allocator broken = {.name = "broken"};
    CHECK_EQ(tp_allocator_allocate(&broken, 8, &dp), TP_STATUS_INVALID_ARGUMENT);
    CHECK_STR(tp_last_error(), "allocate: allocator 'broken' has no allocate function");
}

static void test_allocate_writes_a_message_for_a_silent_custom_failure(void) {
    memset(&counting, 0, sizeof counting);
    counting.fail = true;
    tp_clear_error();
    tp_data_ptr dp;
    CHECK_EQ(tp_allocator_allocate(&counting_allocator, 100, &dp), TP_STATUS_OUT_OF_MEMORY);
    CHECK_STR(tp_last_error(), "counting allocator: failed to allocate 100 bytes");
    CHECK(dp.ptr == NULL && dp.ctx == NULL);
    /* ... also when an older failure of the same status is still recorded. */
    CHECK_EQ(tp_allocator_allocate(tp_allocator_cpu(), (size_t)1 << 62, &dp),
             TP_STATUS_OUT_OF_MEMORY);
    CHECK_EQ(tp_allocator_allocate(&counting_allocator, 7, &dp), TP_STATUS_OUT_OF_MEMORY);
    CHECK_STR(tp_last_error(), "counting allocator: failed to allocate 7 bytes");
    counting.fail = false;
}

static void test_get_stats_zeroes_without_a_stats_function(void) {
    tp_allocator_stats st;
    memset(&st, 0xff, sizeof st);
    tp_allocator_get_stats(&counting_allocator, &st);
    CHECK_EQ(st.current_bytes, 0);
    CHECK_EQ(st.alloc_count, 0);
    memset(&st, 0xff, sizeof st);
    tp_allocator_get_stats(NULL, &st);
    CHECK_EQ(st.peak_bytes, 0);
}

int main(void) {
    RUN_TEST(test_clear_runs_deleter_exactly_once);
    RUN_TEST(test_clear_runs_deleter_when_ptr_is_null_but_ctx_is_not);
    RUN_TEST(test_clear_without_ctx_or_deleter_frees_nothing);
    RUN_TEST(test_cpu_blocks_are_64_byte_aligned_and_counted_exactly);
    RUN_TEST(test_cpu_peak_tracks_the_high_water_mark);
    RUN_TEST(test_cpu_zero_bytes_gives_null_and_no_ctx);
    RUN_TEST(test_cpu_failure_is_out_of_memory_with_message);
    RUN_TEST(test_cpu_raw_deleter_frees_a_block);
    RUN_TEST(test_cpu_stats_stay_exact_under_threads);
    RUN_TEST(test_child_of_fork_can_allocate_while_threads_were_allocating);
    RUN_TEST(test_registry_replaces_and_restores_the_cpu_allocator);
    RUN_TEST(test_registry_rejects_bad_device_types_and_incomplete_allocators);
    RUN_TEST(test_allocate_checks_its_arguments);
    RUN_TEST(test_allocate_writes_a_message_for_a_silent_custom_failure);
    RUN_TEST(test_get_stats_zeroes_without_a_stats_function);
    return CHECK_DONE();
}
