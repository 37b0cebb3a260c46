/*
 * src/core/observer.c - the attached observer and its automatic attachment.
 *
 * At load time (a constructor of libtensorplay, or of the program when the
 * runtime is linked statically) we look up TP_OBSERVER_PROVIDER_SYMBOL with
 * dlsym(RTLD_DEFAULT, ...).  A library injected with LD_PRELOAD comes first
 * in the global lookup order, so a profiler attaches without the program
 * changing.  The runtime never links against or names a profiler; this file
 * only holds a pointer and checks a version number.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>

#include "internal.h"

// ----------------------------------------------------------------------------
// the attached observer

const tp_observer *_Atomic tp__observer = NULL;

/* An observer we can call: an ABI we speak (ours, or an older one whose
 * events are a subset of ours: the graph events go only to version 3,
 * tp__observer_graph) and a struct that reaches at least to on_event. */
static bool tp__observer_usable(const tp_observer *o) {
    return o->abi_version >= TP_OBSERVER_ABI_VERSION_MIN && o->abi_version <= TP_OBSERVER_ABI_VERSION &&
           o->struct_size >= offsetof(tp_observer, on_event) + sizeof o->on_event &&
           o->on_event != NULL;
}

int tp_observer_set(const tp_observer *observer) {
    if (observer && !tp__observer_usable(observer)) {
        tp__error(TP_STATUS_INVALID_ARGUMENT,
                  "observer: unsupported observer (abi_version %u, struct_size %u, on_event %s); "
                  "this runtime speaks abi_version %u to %u",
                  observer->abi_version, observer->struct_size,
                  observer->on_event ? "set" : "NULL", TP_OBSERVER_ABI_VERSION_MIN, TP_OBSERVER_ABI_VERSION);
        return -1;
    }
    atomic_store_explicit(&tp__observer, observer, memory_order_release);
    return 0;
}

const tp_observer *tp_observer_get(void) { return tp__observer_get(); }

// ----------------------------------------------------------------------------
// automatic attachment

__attribute__((constructor)) static void tp__observer_autoattach(void) {
    void *sym = dlsym(RTLD_DEFAULT, TP_OBSERVER_PROVIDER_SYMBOL);
    if (!sym) return;
    /* POSIX guarantees dlsym's object pointer converts to a function pointer. */
    tp_observer_provider_fn provide;
    *(void **)&provide = sym;
    const tp_observer *observer = provide(TP_OBSERVER_ABI_VERSION);
    /* A provider that declines (NULL) or speaks another ABI leaves us
     * unobserved; there is nobody to report the error to at load time. */
    if (observer) (void)tp_observer_set(observer);
}
