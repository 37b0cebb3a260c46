// obsorder.c: who may take the observer stripe's tickets without a locked
// instruction, and how the stripe is taken away (record/order.h,
// tpprof_obs_tag, has the fast path and the why). Runs inside observer
// callbacks, so like observe.c: no lock, no malloc. The slow path here runs
// at most once per thread that starts sending observer events while another
// owns the stripe: one membarrier(2) and, rarely, a wait of a few
// instructions for the owner's open window.
//
// The protocol. Only the owner, inside its window (obs_window = 1, then a
// look at tpprof_obs_owner), changes the counter with a plain store; only
// threads that saw the stripe CONTESTED change it with a locked add. A
// thread that finds it owned by another swaps the owner for REVOKING (so
// one thread revokes at a time; others wait for the outcome), then
// membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED): every thread of the process
// has passed a full barrier when it returns. Either the owner's look at
// tpprof_obs_owner came after that barrier, and saw REVOKING (it takes the
// slow path too), or its window store came before it and is seen here: the
// revoker waits until the window closes. Either way no plain store is still
// to come, and the counter's last value is visible (the window's closing is
// a release, read here with acquire).
#define _GNU_SOURCE
#include <linux/membarrier.h>
#include <string.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/mem.h"
#include "record/order.h"
#include "record/rings.h"

// CONTESTED until tpprof_obs_order_init finds membarrier: a recorder whose
// start never ran (the unit tests) takes locked increments, which are
// always right.
_Alignas(128) _Atomic uintptr_t tpprof_obs_owner = TPPROF_OBS_CONTESTED;

static long membarrier(int cmd) { return syscall(SYS_membarrier, cmd, 0, 0); }

// Every thread of the process passes a full barrier before this returns.
// Should membarrier fail after its registration (a seccomp filter the
// program installed later, say), a page's protection is changed instead:
// the kernel then shoots its TLB entry down on every CPU the process runs
// on, an interrupt each, which is a barrier there (what runtimes without
// membarrier do to flush other threads' store buffers). Raw syscalls: the
// exported mprotect is tpprof's own hook.
static void process_barrier(void) {
    if (membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0) return;
    static void *page;
    if (!page) page = tpprof_mem_map(4096);
    if (!page) { // (no memory: the best left is to let the owner run)
        for (int i = 0; i < 100; i++) sched_yield();
        return;
    }
    syscall(SYS_mprotect, page, 4096, PROT_READ | PROT_WRITE);
    *(volatile char *)page = 1; // the entry is in this CPU's TLB, and so has to be shot down
    syscall(SYS_mprotect, page, 4096, PROT_NONE);
}

void tpprof_obs_order_init(void) {
    long cmds = membarrier(MEMBARRIER_CMD_QUERY);
    bool ok = cmds > 0 && (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) &&
              membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0;
    atomic_store(&tpprof_obs_owner, ok ? (uintptr_t)0 : TPPROF_OBS_CONTESTED);
}

// Only the forking thread lives on in the child: an owner that was another
// thread is gone (perhaps with its window open), so the stripe is free
// again. The registration is per process: made anew.
void tpprof_obs_order_fork_child(void) {
    uintptr_t o = atomic_load(&tpprof_obs_owner);
    if (o == TPPROF_OBS_CONTESTED) return; // (no thread changes the counter by plain stores)
    bool ok = membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0;
    if (!ok) o = TPPROF_OBS_CONTESTED;
    else if (o != (uintptr_t)tpprof_self) o = 0;
    atomic_store(&tpprof_obs_owner, o);
}

// The views the stripe's owner `prev` holds back (observe.c, "Folded
// views") go to t, the thread taking the stripe away, which sends them
// before its own events: one of them may be what it is about to release.
// prev's window is closed and it sees the stripe is not its own before it
// looks at them again (it waits while REVOKING).
static void take_held(struct tpprof_thread *prev, struct tpprof_thread *t) {
    uint32_t n = atomic_load_explicit(&prev->obs_nheld, memory_order_relaxed);
    uint32_t have = atomic_load_explicit(&t->obs_nheld, memory_order_relaxed);
    for (uint32_t i = 0; i < n && have < TPPROF_OBS_HELD; i++)
        memcpy(t->obs_held[have++], prev->obs_held[i], sizeof prev->obs_held[i]);
    atomic_store_explicit(&t->obs_nheld, have, memory_order_relaxed);
    atomic_store_explicit(&prev->obs_nheld, 0, memory_order_relaxed);
}

// Takes the stripe away from the thread that owns it (o), with what it
// holds; leaves it CONTESTED, or t's when the owner has exited.
static void take_stripe(struct tpprof_thread *t, uintptr_t o) {
    uintptr_t next = (uintptr_t)t;
    struct tpprof_thread *prev = (struct tpprof_thread *)o;
    if (prev) {
        process_barrier();
        while (atomic_load_explicit(&prev->obs_window, memory_order_acquire)) sched_yield();
        take_held(prev, t);
        // A live owner may send more: both then take locked increments.
        // One that has exited hands it on (should a destructor of its
        // send one more event, it takes the stripe back the same way).
        if (!atomic_load_explicit(&prev->exited, memory_order_acquire)) next = TPPROF_OBS_CONTESTED;
    }
    atomic_store_explicit(&tpprof_obs_owner, next, memory_order_release);
}

uint64_t tpprof_obs_tag_slow(struct tpprof_thread *t) {
    for (;;) {
        uintptr_t o = atomic_load_explicit(&tpprof_obs_owner, memory_order_acquire);
        if (o == TPPROF_OBS_CONTESTED || o == (uintptr_t)t) return tpprof_obs_tag(t); // (just given it: t)
        if (o == TPPROF_OBS_REVOKING) { // another thread is taking it away
            sched_yield();
            continue;
        }
        if (!atomic_compare_exchange_strong(&tpprof_obs_owner, &o, TPPROF_OBS_REVOKING)) continue;
        take_stripe(t, o);
    }
}

void tpprof_obs_take(struct tpprof_thread *t) {
    for (;;) {
        uintptr_t o = atomic_load_explicit(&tpprof_obs_owner, memory_order_acquire);
        if (o == TPPROF_OBS_CONTESTED || o == (uintptr_t)t || o == 0) return; // (0: free, nothing held)
        if (o == TPPROF_OBS_REVOKING) {
            sched_yield();
            continue;
        }
        if (!atomic_compare_exchange_strong(&tpprof_obs_owner, &o, TPPROF_OBS_REVOKING)) continue;
        take_stripe(t, o);
        return;
    }
}

uint32_t tpprof_obs_seize_held(uint64_t (*out)[TPPROF_OBS_HELD_WORDS], struct tpprof_thread **owner) {
    for (;;) {
        uintptr_t o = atomic_load_explicit(&tpprof_obs_owner, memory_order_acquire);
        if (o == TPPROF_OBS_CONTESTED || o == 0 || o == (uintptr_t)tpprof_self) return 0; // (its own: flushed)
        if (o == TPPROF_OBS_REVOKING) {
            sched_yield();
            continue;
        }
        if (!atomic_compare_exchange_strong(&tpprof_obs_owner, &o, TPPROF_OBS_REVOKING)) continue;
        struct tpprof_thread *prev = (struct tpprof_thread *)o;
        process_barrier();
        // Bounded: a fatal signal's flush may run while the owner died in
        // its window; then its held records are left (lost).
        int waits = 0;
        while (atomic_load_explicit(&prev->obs_window, memory_order_acquire) && waits++ < 1000) sched_yield();
        if (atomic_load_explicit(&prev->obs_window, memory_order_acquire)) {
            atomic_store_explicit(&tpprof_obs_owner, TPPROF_OBS_CONTESTED, memory_order_release);
            return 0;
        }
        uint32_t n = atomic_load_explicit(&prev->obs_nheld, memory_order_relaxed);
        memcpy(out, prev->obs_held, n * sizeof prev->obs_held[0]);
        atomic_store_explicit(&prev->obs_nheld, 0, memory_order_relaxed);
        *owner = prev;
        atomic_store_explicit(&tpprof_obs_owner, TPPROF_OBS_CONTESTED, memory_order_release);
        return n;
    }
}
