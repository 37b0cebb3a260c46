// obsfold.c: the folding of short-lived tensors on the program thread
// (Folded views), the runtime observer's: what it keeps exact, and the held
// records written out. THE HOT PATH, like observe.c: no lock, no syscall,
// no SQLite, no malloc. What the fused callbacks (observe.c) take on their
// fast paths, holding a record and folding it, is record/obsfold.h's,
// inline; here is what runs out of line. The counts a fold leaves are the
// writer's to add (writer/ledger.c, tpprof_obs_fold_collect).
//
// A view made and freed while nothing needs to see it on its own (the
// narrow() a small op takes and drops) reaches the recording only through
// two counts: a retain and a release at its creation stack in
// refcount_sites. Such a view's two records (its TENSOR_CREATED with the
// RETAIN, its TENSOR_FREED with the RELEASE) were a third of the records of
// a small tensor op, and each costs the program its ring words and the
// writer its merge and ledger work (bench/tensor_overhead.sh). So in
// aggregate mode the fused on_tensor_retained does not write a view's
// record at once: it keeps it in the thread struct (t->obs_held, at most
// TPPROF_OBS_HELD); if the view's free comes first, leaving its storage
// alive, the two are folded into t->fold_count[its stack], which the writer
// adds to refcount_sites at the end (ledger.c). Anything else about a held
// view, or its storage, writes it first (tpprof_obs_held_write), in order,
// so the writer sees what it saw before.
//
// What a fold must not change:
//  - The peak. A view is in the tensors table when it is alive at the
//    storage peak's last moment (writer/state.h alive_at_peak): created
//    before peak_end, the first tensor free or data release after the peak
//    moved, and freed after it. So a view is held only when the writer's
//    peak_end is set already (`settled`: a tensor's free was written since
//    the last storage event that may have moved the peak), and every held
//    view is written before such an event (a storage made that takes live
//    above high, a data swap). A view held and folded then was made after
//    peak_end and is not in the peak, and its free would not have set
//    peak_end.
//  - Other threads. Only while this thread owns the observer stripe
//    (record/order.h) does it know every storage event: nothing is held
//    otherwise. A thread that takes the stripe away (obsorder.c) takes the
//    held views too and writes them before its own records: a view passed
//    to another thread is recorded in full.
//  - The storage's counts. Records carry a storage's counts after the
//    event; a view's record held while another record of its storage is
//    written would bring back counts from before it: any record naming a
//    held view's storage writes the held views first, and a view is folded
//    only if no newer held view is on its storage.
//  - Views whose free releases the storage's data (strong 0): written.
//
// Whether a storage event may move the peak: from the moment the thread
// found it owns the stripe (a rebase: then the writer's peak is at least
// its storage total), only this thread's records change that total; live
// follows them (+nbytes when a storage is made, -nbytes when the data of
// one made here, and still in `made`, is released: one not found is never
// taken off, which only overstates live) and the peak can move only when
// live exceeds high, its maximum since the rebase.
#define _GNU_SOURCE
#include <sched.h>
#include <stdint.h>
#include <string.h>

#include "record/obsfold.h"

// Access to t's held views: true inside its open window, as the stripe's
// owner; false once it is not the owner and no thread is taking the stripe
// away (its held views are then its own: any revoker took them already).
static bool held_access(struct tpprof_thread *t) {
    if (stripe_open(t)) return true;
    stripe_close(t);
    while (atomic_load_explicit(&tpprof_obs_owner, memory_order_acquire) == TPPROF_OBS_REVOKING) sched_yield();
    return false;
}

// Writes the held views (Folded views), oldest first, each with a ticket
// taken now: before whatever the caller writes next. A thread taking the
// stripe away may have taken them (obsorder.c): then nothing is left here.
__attribute__((noinline)) void tpprof_obs_held_write(struct tpprof_thread *t) {
    while (atomic_load_explicit(&t->obs_nheld, memory_order_relaxed)) {
        bool room = tpprof_ring_reserve(t, OBS_MAX_WORDS + 1);
        bool mine = held_access(t);
        uint32_t n = atomic_load_explicit(&t->obs_nheld, memory_order_relaxed);
        if (!n || !room) {
            if (!room) { // lost, like any record that finds the ring full
                atomic_store_explicit(&t->obs_nheld, 0, memory_order_relaxed);
                tpprof_obs_recent.lost = true;
            }
            if (mine) stripe_close(t);
            return;
        }
        uint64_t ticket = 0;
        if (mine) { // tpprof_obs_ticket's owner way, inside this window
            _Atomic uint64_t *v = &tpprof_stripes[TPPROF_OBS_STRIPE].v;
            ticket = atomic_load_explicit(v, memory_order_relaxed);
            atomic_store_explicit(v, ticket + 1, memory_order_relaxed);
        }
        uint64_t words = t->obs_held[0][1] & 0xff, kind = t->obs_held[0][0] & 0xff;
        uint64_t *w = tpprof_ring_slot(t, OBS_MAX_WORDS + 1);
        memcpy(&w[1], &t->obs_held[0][1], (words - 1) * sizeof *w);
        memmove(t->obs_held[0], t->obs_held[1], (n - 1) * sizeof t->obs_held[0]);
        atomic_store_explicit(&t->obs_nheld, n - 1, memory_order_relaxed);
        uint64_t tag;
        if (mine) {
            stripe_close(t);
            tag = tpprof_order_tag_of(ticket, TPPROF_OBS_STRIPE, false);
        } else {
            tag = tpprof_obs_tag(t);
        }
        w[0] = tpprof_hdr(tag, TPPROF_OP_OBS, (int)kind);
        obs_limit(t);
        tpprof_ring_commit(t, words);
        // A held storage carries its name in full, and the writer keeps it as
        // the ring's last: the next record that has one sends it again.
        if (kind == TP_OBS_STORAGE_CREATED) tpprof_obs_recent.last_name = NULL;
    }
}
