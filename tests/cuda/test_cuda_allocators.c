/*
 * tests/cuda/test_cuda_allocators.c - the caching allocator on CUDA
 * segments with PyTorch's stream semantics, against the runtime double
 * whose events complete only when the test says so:
 *   - a block freed on stream S is reused only by S;
 *   - record_stream(t, s2): the freed block is not reused while the event
 *     on s2 is pending, and is once it completes;
 *   - empty_cache waits for pending events and returns free segments;
 *   - out of memory -> empty the cache -> retry once -> a clean error;
 *   - observer events carry the CUDA device.
 */
#include <stdlib.h>

#include "../check.h"
#include "fake/fake_cudart.h"
#include "tensorplay/tensorplay.h"
#include "tensorplay/cuda.h"

#define SHAPE(...) (int64_t[]){__VA_ARGS__}
#define MIB ((int64_t)1 << 20)

static tpfake_api fake;

static tp_tensor *dev_bytes(int64_t nbytes) {
    return tp_empty_on(tp_device_cuda(0), 1, SHAPE(nbytes), TP_DTYPE_UINT8);
}

static tp_caching_allocator *ca0(void) { return tp_cuda_caching_allocator_of(tp_device_cuda(0)); }

static void test_a_block_freed_on_one_stream_is_reused_only_by_it(void) {
    tp_stream side;
    CHECK_EQ(tp_stream_create(tp_device_cuda(0), &side), TP_STATUS_OK);
    tp_stream_set_current(side);
    tp_tensor *a = dev_bytes(4096);
    void *pa = tp_tensor_data(a);
    tp_tensor_release(a);
    tp_stream_set_current(tp_stream_default(tp_device_cuda(0)));
    tp_tensor *b = dev_bytes(4096);
    CHECK(tp_tensor_data(b) != pa); /* the default stream gets its own block */
    tp_tensor_release(b);
    tp_stream_set_current(side);
    tp_tensor *c = dev_bytes(4096);
    CHECK(tp_tensor_data(c) == pa); /* the side stream gets its block back */
    tp_tensor_release(c);
    tp_stream_set_current(tp_stream_default(tp_device_cuda(0)));
    tp_stream_destroy(side);
}

static void test_record_stream_defers_reuse_until_the_event_completes(void) {
    tp_stream side;
    tp_stream_create(tp_device_cuda(0), &side);
    tp_tensor *x = dev_bytes(MIB / 2);
    void *px = tp_tensor_data(x);
    CHECK_EQ(tp_tensor_record_stream(x, side), TP_STATUS_OK);
    CHECK_EQ(tp_tensor_record_stream(x, side), TP_STATUS_OK); /* twice = once */
    tp_caching_allocator_stats before;
    tp_caching_allocator_get_stats(ca0(), &before);
    tp_tensor_release(x);
    CHECK_EQ(tp_caching_allocator_pending_frees(ca0()), 1);
    CHECK_EQ(fake.pending_events(), 1);
    tp_caching_allocator_stats st;
    tp_caching_allocator_get_stats(ca0(), &st);
    CHECK_EQ(st.allocation.current, before.allocation.current - 1); /* no longer allocated */
    CHECK_EQ(st.active.current, before.active.current);             /* but still active */
    tp_caching_snapshot *snap = tp_caching_allocator_snapshot(ca0());
    int awaiting = 0;
    for (size_t i = 0; snap && i < snap->nsegments; i++)
        for (size_t j = 0; j < snap->segments[i].nblocks; j++)
            awaiting += snap->segments[i].blocks[j].awaiting_free &&
                        snap->segments[i].blocks[j].address == (uint64_t)(uintptr_t)px;
    CHECK_EQ(awaiting, 1);
    tp_caching_snapshot_free(snap);

    /* the side stream has not reached the free: the block must not come back */
    tp_tensor *y = dev_bytes(MIB / 2);
    CHECK(tp_tensor_data(y) != px);
    CHECK_EQ(tp_caching_allocator_pending_frees(ca0()), 1);
    tp_tensor_release(y);

    /* now it has */
    fake.stream_complete((void *)(uintptr_t)side.handle);
    tp_tensor *z = dev_bytes(MIB / 2);
    CHECK_EQ(tp_caching_allocator_pending_frees(ca0()), 0);
    CHECK(tp_tensor_data(z) == px || tp_tensor_data(z) != NULL);
    tp_tensor *w = dev_bytes(MIB / 2);
    CHECK(tp_tensor_data(z) == px || tp_tensor_data(w) == px); /* reused by one of them */
    tp_tensor_release(z), tp_tensor_release(w);
    CHECK_EQ(fake.live_events(), 0); /* the allocator destroyed its event */
    tp_stream_destroy(side);
}

static void test_empty_cache_waits_for_pending_events(void) {
    tp_stream side;
    tp_stream_create(tp_device_cuda(0), &side);
    tp_cuda_empty_cache();
    CHECK_EQ(fake.live_allocations(0), 0);
    tp_tensor *x = dev_bytes(3 * MIB);
    tp_tensor_record_stream(x, side);
    tp_tensor_release(x);
    CHECK_EQ(tp_caching_allocator_pending_frees(ca0()), 1);
    CHECK_EQ(fake.live_allocations(0), 1);
    CHECK_EQ(tp_cuda_empty_cache(), TP_STATUS_OK);
    CHECK_EQ(tp_caching_allocator_pending_frees(ca0()), 0);
    CHECK_EQ(fake.live_allocations(0), 0);
    tp_stream_destroy(side);
}

static void test_out_of_memory_empties_the_cache_and_retries_once(void) {
    tp_cuda_empty_cache();
    fake.set_memory_limit(0, 64 * MIB);
    tp_tensor *a = dev_bytes(30 * MIB); /* a 30 MiB segment, cached after the release */
    tp_tensor_release(a);
    tp_caching_allocator_stats before;
    tp_caching_allocator_get_stats(ca0(), &before);
    tp_tensor *b = dev_bytes(50 * MIB); /* does not fit beside it: flush, retry */
    CHECK(b != NULL);
    tp_caching_allocator_stats st;
    tp_caching_allocator_get_stats(ca0(), &st);
    CHECK_EQ(st.num_alloc_retries, before.num_alloc_retries + 1);
    CHECK_EQ(st.num_ooms, before.num_ooms);
    tp_tensor *c = dev_bytes(40 * MIB); /* cannot fit at all */
    CHECK(c == NULL);
    CHECK_EQ(tp_last_status(), TP_STATUS_OUT_OF_MEMORY);
    CHECK_CONTAINS(tp_last_error(), "caching allocator: out of memory allocating 41943040 bytes");
    CHECK_CONTAINS(tp_last_error(), "CUDA error: cudaErrorMemoryAllocation: out of memory (cudaMalloc");
    tp_caching_allocator_get_stats(ca0(), &st);
    CHECK_EQ(st.num_ooms, before.num_ooms + 1);
    tp_tensor_release(b);
    fake.set_memory_limit(0, (size_t)1 << 30);
    tp_cuda_empty_cache();
}

typedef struct seen {
    int storage_cuda, alloc_cuda;
    const char *allocator;
} seen;

static void on_event(void *user, const tp_obs_event *ev) {
    seen *s = user;
    if (ev->kind == TP_OBS_STORAGE_CREATED && ev->u.storage.device_type == TP_DEVICE_TYPE_CUDA) {
        s->storage_cuda++;
        s->allocator = ev->u.storage.allocator;
    }
    if (ev->kind == TP_OBS_ALLOCATOR && ev->u.allocator.device_type == TP_DEVICE_TYPE_CUDA &&
        ev->u.allocator.action == TP_OBS_ALLOC_BLOCK_ALLOC)
        s->alloc_cuda++;
}

static void test_observer_sees_device_storages_and_blocks(void) {
    static seen s;
    static tp_observer obs = {.abi_version = TP_OBSERVER_ABI_VERSION, .struct_size = sizeof obs,
                              .user = &s, .on_event = on_event};
    tp_observer_set(&obs);
    tp_tensor *x = dev_bytes(1000);
    tp_observer_set(NULL);
    CHECK_EQ(s.storage_cuda, 1);
    CHECK_STR(s.allocator, "cuda_caching");
    CHECK_EQ(s.alloc_cuda, 1);
    tp_tensor_release(x);
}

static void test_record_stream_rules(void) {
    tp_tensor *h = tp_ones(1, SHAPE(4), TP_DTYPE_FLOAT32);
    CHECK_EQ(tp_tensor_record_stream(h, tp_stream_default(tp_device_cuda(0))), TP_STATUS_INVALID_ARGUMENT);
    CHECK_STR(tp_last_error(), "record_stream: the tensor is not on a CUDA device");
    tp_tensor *g = tp_tensor_to(h, tp_device_cuda(0));
    CHECK_EQ(tp_tensor_record_stream(g, tp_stream_default(tp_device_cuda(1))), TP_STATUS_INVALID_ARGUMENT);
    CHECK_STR(tp_last_error(), "record_stream: the stream is on cuda:1, the tensor on cuda:0");
    /* its own stream: nothing to wait for */
    CHECK_EQ(tp_tensor_record_stream(g, tp_stream_default(tp_device_cuda(0))), TP_STATUS_OK);
    tp_tensor_release(g);
    CHECK_EQ(tp_caching_allocator_pending_frees(ca0()), 0);
    /* a raw cudaMalloc storage: accepted, nothing deferred */
    tp_storage *s = tp_storage_new(64, tp_cuda_raw_allocator(), false);
    tp_tensor *r = tp_tensor_new_from_storage(s, 0, 1, SHAPE(16), NULL, TP_DTYPE_FLOAT32);
    tp_storage_release(s);
    tp_stream side;
    tp_stream_create(tp_device_cuda(0), &side);
    CHECK_EQ(tp_tensor_record_stream(r, side), TP_STATUS_OK);
    tp_tensor_release(r);
    tp_stream_destroy(side);
    tp_tensor_release(h);
}

static void test_the_default_backend_is_the_caching_allocator(void) {
    CHECK_STR(tp_cuda_allocator_backend(), "native");
}

int main(void) {
    fake = tpfake_open();
    if (!fake.reset) {
        fprintf(stderr, "this test needs the libcudart.so.13 test double on LD_LIBRARY_PATH\n");
        return 1;
    }
    RUN_TEST(test_the_default_backend_is_the_caching_allocator);
    RUN_TEST(test_a_block_freed_on_one_stream_is_reused_only_by_it);
    RUN_TEST(test_record_stream_defers_reuse_until_the_event_completes);
    RUN_TEST(test_empty_cache_waits_for_pending_events);
    RUN_TEST(test_out_of_memory_empties_the_cache_and_retries_once);
    RUN_TEST(test_observer_sees_device_storages_and_blocks);
    RUN_TEST(test_record_stream_rules);
    return CHECK_DONE();
}
