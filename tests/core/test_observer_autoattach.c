/*
 * tests/core/test_observer_autoattach.c - the runtime attaches an observer
 * that a preloaded library provides, without the program doing anything.
 *
 *   test_observer_autoattach expect-attached   (run with LD_PRELOAD=<module>)
 *   test_observer_autoattach expect-none       (run plainly)
 *
 * Built twice: against the shared libtensorplay and with the static one
 * linked into the program, since the constructor must work in both.
 */
#define _GNU_SOURCE
#include <dlfcn.h>

#include "tensorplay/tensorplay.h"
#include "../check.h"
#include "tensor_helpers.h"

typedef uint64_t (*count_fn)(uint32_t kind);
typedef uint32_t (*abi_fn)(void);

static void test_preloaded_provider_is_attached_before_main(void) {
    const tp_observer *obs = tp_observer_get();
    CHECK(obs != NULL);
    count_fn count = (count_fn)(uintptr_t)dlsym(RTLD_DEFAULT, "tp_test_preload_count");
    abi_fn seen_abi = (abi_fn)(uintptr_t)dlsym(RTLD_DEFAULT, "tp_test_preload_seen_abi");
    CHECK(count != NULL && seen_abi != NULL);
    if (!obs || !count || !seen_abi) return;
    CHECK_EQ(obs->abi_version, TP_OBSERVER_ABI_VERSION);
    CHECK_EQ(seen_abi(), TP_OBSERVER_ABI_VERSION);

    uint64_t created = count(TP_OBS_STORAGE_CREATED), freed = count(TP_OBS_STORAGE_FREED);
    uint64_t tensors = count(TP_OBS_TENSOR_CREATED), bumps = count(TP_OBS_VERSION_BUMPED);
    tp_tensor *x = make_tensor(2, SHAPE(2, 2), TP_DTYPE_FLOAT32);
    tp_tensor *v = tp_tensor_transpose(x, 0, 1);
    tp_tensor_bump_version(v);
    tp_tensor_release(v);
    tp_tensor_release(x);
    CHECK_EQ(count(TP_OBS_STORAGE_CREATED) - created, 1);
    CHECK_EQ(count(TP_OBS_STORAGE_FREED) - freed, 1);
    CHECK_EQ(count(TP_OBS_TENSOR_CREATED) - tensors, 2);
    CHECK_EQ(count(TP_OBS_VERSION_BUMPED) - bumps, 1);
}

static void test_nothing_is_attached_without_a_provider(void) {
    CHECK(dlsym(RTLD_DEFAULT, TP_OBSERVER_PROVIDER_SYMBOL) == NULL);
    CHECK(tp_observer_get() == NULL);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s expect-attached|expect-none\n", argv[0]);
        return 2;
    }
    if (strcmp(argv[1], "expect-attached") == 0)
        RUN_TEST(test_preloaded_provider_is_attached_before_main);
    else
        RUN_TEST(test_nothing_is_attached_without_a_provider);
    return CHECK_DONE();
}
