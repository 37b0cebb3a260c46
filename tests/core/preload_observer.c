/*
 * tests/core/preload_observer.c - a tiny observer library for the
 * LD_PRELOAD attach test.  It exports tp_observer_provide, counts events by
 * kind, and exports two query functions the test program finds with dlsym.
 *
 * Like a real profiler it includes only the observer ABI header and never
 * links against or calls into libtensorplay.
 */
#include <stddef.h>
#include <stdint.h>

#include "tensorplay/observer.h"

enum { KINDS = 16 };
static uint64_t counts[KINDS];
static uint32_t seen_abi;

static void on_event(void *user, const tp_obs_event *ev) {
    (void)user;
    if (ev->kind < KINDS) __atomic_fetch_add(&counts[ev->kind], 1, __ATOMIC_RELAXED);
}

static const tp_observer preload_observer = {
    .abi_version = TP_OBSERVER_ABI_VERSION,
    .struct_size = sizeof(tp_observer),
    .user = NULL,
    .on_event = on_event,
};

const tp_observer *tp_observer_provide(uint32_t runtime_abi_version);
const tp_observer *tp_observer_provide(uint32_t runtime_abi_version) {
    seen_abi = runtime_abi_version;
    return &preload_observer;
}

uint64_t tp_test_preload_count(uint32_t kind);
uint64_t tp_test_preload_count(uint32_t kind) {
    return kind < KINDS ? __atomic_load_n(&counts[kind], __ATOMIC_RELAXED) : 0;
}

uint32_t tp_test_preload_seen_abi(void);
uint32_t tp_test_preload_seen_abi(void) { return seen_abi; }
