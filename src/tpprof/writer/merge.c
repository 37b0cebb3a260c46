// merge.c: merging the per-thread rings into one event order, and applying
// each record as its turn comes (apply.h, inlined into the loop here).
//
// The order (record/order.h): the records that name one address are applied
// exactly in the order of their stripe's tickets; across stripes, by epoch,
// each ring run a few epochs (EPOCH_SLACK) ahead of the oldest at most, ties
// to the ring of the older thread. Observer records have a stripe of their
// own, so they follow their tickets whichever threads sent them.
//
// Writer-owned (writer.h): runs on the writer thread, or on a thread holding
// the writer's lock (exit, exec, fork, the leak scan); never inside a hook.
// It knows nothing of the database, the timeline or the writer's thread;
// tests/tpprof/test_merge.c feeds it hand-built rings.
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/base.h"
#include "base/mem.h"
#include "record/format.h"
#include "record/order.h"
#include "record/rings.h"
#include "record/stacks.h"
#include "writer/merge.h"
#include "writer/sites.h"
#include "writer/writer.h"

#define STUCK_NS 500000000ull  // a stripe ticket missing this long is skipped

// Threads waiting for the writer's lock (fork, exit, exec, the leak scan;
// writer.c counts them). A merge the producers keep busy would otherwise
// hold it for as long as they allocate: a program that forked while three
// threads allocated flat out waited 0.3 s at each fork (40 forks: 0.05 s
// native, 13.7 s). It also cuts its pass after DRAIN_SLICE_NS, so the
// timeline and the flushes keep their pace.
_Atomic int tpprof_merge_waiters;
bool tpprof_merge_cut; // the last drain stopped with records still waiting
#define DRAIN_SLICE_NS 5000000ull

static uint64_t stuck_since_ns;

// ---------------------------------------------------------------------------
// Threads.

void tpprof_merge_note_thread(struct tpprof_thread *t) {
    uint32_t i = (uint32_t)t->index;
    struct tpprof_wstate *w = &tpprof_w;
    if (i >= w->captid_of) {
        uint32_t ncap = w->captid_of ? w->captid_of : 64;
        while (ncap <= i) ncap *= 2;
        uint32_t *n = tpprof_mem_grow(w->tid_of, w->captid_of * sizeof *w->tid_of, ncap * sizeof *w->tid_of);
        if (!n) return;
        w->tid_of = n;
        w->captid_of = ncap;
    }
    w->tid_of[i] = (uint32_t)t->tid;
}

// Keeps a gone thread's threads table row for the store, before its struct
// serves another thread. False when out of memory (the struct then stays).
static bool keep_row(const struct tpprof_thread *t) {
    struct tpprof_wstate *w = &tpprof_w;
    if (!t->w_seen) return true; // it recorded nothing: no row
    if (w->ngone == w->capgone) {
        uint32_t ncap = w->capgone ? 2 * w->capgone : 64;
        struct tpprof_thread_row *n = tpprof_mem_grow(w->gone, w->capgone * sizeof *w->gone, ncap * sizeof *w->gone);
        if (!n) return false;
        w->gone = n;
        w->capgone = ncap;
    }
    struct tpprof_thread_row *r = &w->gone[w->ngone++];
    r->tid = t->tid;
    snprintf(r->name, sizeof r->name, "%s", t->name[0] ? t->name : t->w_name);
    r->first_ns = t->w_first_ns;
    r->last_ns = t->w_last_ns;
    return true;
}


// ---------------------------------------------------------------------------
// Applying one event: apply.h, included here only, so that apply() inlines
// into the merge loop below.

#include "writer/apply.h"

// ---------------------------------------------------------------------------
// Merging the rings.

static inline void prefetch_for(const uint64_t *r) {
    int op = (int)(r[0] >> 4 & 15);
    if (op == TPPROF_OP_NOP || op == TPPROF_OP_OBS) return;
    struct tpprof_livetable *lt = &tpprof_w.live;
    if (lt->cap) __builtin_prefetch(&lt->slots[tpprof_live_home(r[1]) & (lt->cap - 1)], 1);
    if (op == TPPROF_OP_ALLOC_PACKED || op == TPPROF_OP_ALLOC || op == TPPROF_OP_REALLOC) {
        uint32_t sid = tpprof_alloc_sid(r, op);
        if (sid < tpprof_site_hints.cap && tpprof_site_hints.at[sid])
            __builtin_prefetch(&tpprof_w.sites[tpprof_site_hints.at[sid] - 1], 1);
        else if (sid >= tpprof_w.capleaf || !tpprof_w.leaf_of[sid]) // a new stack: the trie walk reads its frames
            tpprof_stack_prefetch(sid);
    }
}

// Records the merge prefetches ahead of the one it applies. One ahead is too
// close: a live-table miss takes longer than applying a record, so the
// prefetch issued for the next record had not landed when it was needed.
#define PREFETCH_AHEAD 8

// Advances the thread's prefetch cursor by one record below `tail`, starting
// the loads for that record.
static inline void prefetch_step(struct tpprof_thread *t, uint64_t tail, int extra) {
    uint64_t pf = t->w_pf;
    if (pf >= tail) return;
    const uint64_t *r = &t->ring[pf & t->mask];
    if ((int)(r[0] >> 4 & 15) == TPPROF_OP_WRAP) {
        pf += t->mask + 1 - (pf & t->mask);
        if (pf >= tail) {
            t->w_pf = pf;
            return;
        }
        r = &t->ring[0];
    }
    prefetch_for(r);
    t->w_pf = pf + (uint64_t)(tpprof_rec_words(r) + extra);
}

// The threads the merge still visits, oldest first. A thread leaves once it
// is gone for good (the kernel no longer knows its tid: no late TLS
// destructor can write its ring again) and its ring is drained, so a program that runs thousands of
// short threads does not make every pass visit them all.
static struct tpprof_thread **active;
static uint32_t nactive, capactive;
static struct tpprof_thread *newest_seen;
// The merge's heap of rings (indexes into active), as many slots, after
// active's in its mapping.
static uint32_t *mheap;
static uint32_t nheap;

// Recycled structs taken from rings.c but not yet in active (out of memory
// to grow it): kept for the next call, never dropped.
static struct tpprof_thread *again_pending;

static void collect_threads(void) {
    struct tpprof_thread *head = atomic_load(&tpprof_threads);
    struct tpprof_thread *again = tpprof_threads_reborn(); // recycled structs (rings.c)
    if (again_pending) {
        struct tpprof_thread *last = again_pending;
        while (last->reborn_next) last = last->reborn_next;
        last->reborn_next = again;
        again = again_pending;
        again_pending = NULL;
    }
    uint32_t fresh = 0;
    for (struct tpprof_thread *t = head; t && t != newest_seen; t = t->next) fresh++;
    for (struct tpprof_thread *t = again; t; t = t->reborn_next) fresh++;
    if (!fresh) return;
    if (nactive + fresh > capactive) {
        uint32_t ncap = capactive ? capactive : 64;
        while (ncap < nactive + fresh) ncap *= 2;
        // One mapping: the pointers, then the heap's slots (empty between
        // merges, so copying them with the pointers' old bytes is harmless).
        const size_t per = sizeof *active + sizeof *mheap;
        struct tpprof_thread **n = tpprof_mem_grow(active, capactive * per, ncap * per);
        if (!n) {
            again_pending = again;
            return;
        }
        active = n;
        mheap = (uint32_t *)(n + ncap);
        capactive = ncap;
    }
    uint32_t i = nactive + fresh;
    for (struct tpprof_thread *t = head; t && t != newest_seen; t = t->next) active[--i] = t;
    for (struct tpprof_thread *t = again; t; t = t->reborn_next) active[--i] = t;
    nactive += fresh;
    newest_seen = head;
}

static bool thread_gone(const struct tpprof_thread *t) {
    if (!atomic_load_explicit(&t->exited, memory_order_acquire)) return false;
    return syscall(SYS_tgkill, getpid(), t->tid, 0) != 0 && errno == ESRCH;
}

static void retire_threads(void) {
    uint32_t k = 0;
    for (uint32_t i = 0; i < nactive; i++) {
        struct tpprof_thread *t = active[i];
        bool drained = t->w_head == atomic_load_explicit(&t->tail, memory_order_acquire);
        if (drained && thread_gone(t) && keep_row(t)) { // it can write nothing more: its struct serves another
            tpprof_obs_fold_collect(t); // (its counts go with the struct)
            tpprof_thread_recycle(t);
            continue;
        }
        active[k++] = t;
    }
    nactive = k;
}

// Processes every record whose turn has come. With `force`, missing stripe
// tickets (threads that vanished mid-hook) are skipped. A record older than
// its stripe's expected ticket (it was skipped as missing and came late) is
// applied when it shows up.
static uint64_t drain_rings(bool force);

// Hands the space the merge has consumed back to the producers.
static void publish_heads(void) {
    for (uint32_t i = 0; i < nactive; i++)
        if (atomic_load_explicit(&active[i]->head, memory_order_relaxed) != active[i]->w_head)
            atomic_store_explicit(&active[i]->head, active[i]->w_head, memory_order_release);
}

uint64_t tpprof_merge_drain(bool force) {
    uint64_t n = drain_rings(force);
    publish_heads();
    return n;
}

// What the merge finds at the head of a ring.
enum { HEAD_EMPTY, HEAD_BLOCKED, HEAD_READY };

// t's next record below `limit`, past any wrap padding (NULL: none).
static inline const uint64_t *ring_next(struct tpprof_thread *t, uint64_t limit) {
    uint64_t head = t->w_head;
    const uint64_t *r = NULL;
    while (head < limit) {
        r = &t->ring[head & t->mask];
        if ((int)(r[0] >> 4 & 15) != TPPROF_OP_WRAP) break;
        head += t->mask + 1 - (head & t->mask);
        r = NULL;
    }
    t->w_head = head;
    return r;
}

// Whether a record's turn has come on its stripe: its ticket is the next
// expected (or an older one, given up on as missing and come late).
static inline bool stripe_ready(uint64_t h) {
    return tpprof_ticket_diff(tpprof_hdr_ticket(h), tpprof_w.expected[tpprof_hdr_stripe(h)]) <= 0;
}

static inline int head_state(struct tpprof_thread *t, uint32_t *epoch) {
    const uint64_t *r = ring_next(t, t->w_tail);
    if (!r) return HEAD_EMPTY;
    *epoch = tpprof_hdr_epoch(r[0]);
    return stripe_ready(r[0]) ? HEAD_READY : HEAD_BLOCKED;
}

// Applies t's records from its head on, in ring order, while their turn
// has come on their stripes and (with `bounded`) their epoch is at most
// `bound`; the first is applied whatever its epoch (the caller found it
// ready and the oldest).
// Rings of the merge waiting per stripe (see merge_rings): a record that
// moves a stripe's expected ticket on wakes the one waiting for it.
static uint32_t waiting_on[TPPROF_STRIPES];
static void wake_waiter(unsigned stripe);

static void drain_thread(struct tpprof_thread *t, bool bounded, uint32_t bound, bool prefetch, uint64_t *applied) {
    struct tpprof_wstate *w = &tpprof_w;
    const int extra = tpprof_cfg.full ? 1 : 0; // full mode: a timestamp ends each record
    uint64_t time = w->batch_time_ns, n = 0;
    const uint64_t *r;
    while ((r = ring_next(t, t->w_lim)) != NULL) {
        uint64_t h = r[0];
        unsigned stripe = tpprof_hdr_stripe(h);
        int32_t d = tpprof_ticket_diff(tpprof_hdr_ticket(h), w->expected[stripe]);
        if (d > 0) break; // an earlier ticket of its stripe is still to come
        if (bounded && n && tpprof_epoch_diff(tpprof_hdr_epoch(h), bound) > 0) break;
        uint64_t head = t->w_head, tail = t->w_tail;
        // Later records' live-table slots and sites are cache misses: start
        // loading them while this one is applied (unless the live table is
        // small enough to stay in cache).
        if (!prefetch) {
        } else if (t->w_pf <= head) {
            t->w_pf = head + (uint64_t)(tpprof_rec_words(r) + extra);
            for (int k = 0; k < PREFETCH_AHEAD; k++) prefetch_step(t, tail, extra);
        } else {
            prefetch_step(t, tail, extra);
        }
        if (extra) time = r[tpprof_rec_words(r)];
        if (TPPROF_UNLIKELY(!t->w_seen)) {
            t->w_seen = true;
            t->w_first_ns = time;
            tpprof_merge_note_thread(t);
        }
        int words = apply(t, r, time);
        if (d == 0) {
            w->expected[stripe] = (w->expected[stripe] + 1) & TPPROF_TICKET_MASK;
            if (TPPROF_UNLIKELY(waiting_on[stripe])) wake_waiter(stripe);
        }
        t->w_head = head + (uint64_t)(words + extra);
        n++;
    }
    if (n) {
        t->w_last_ns = time;
        t->w_dirty = true;
        *applied += n;
    }
}

// Epochs a ring may run ahead of the oldest ready one in a pass: the passes
// stay few with many threads, the interleaving within a few hundred events.
#define EPOCH_SLACK 4
_Static_assert(TPPROF_EPOCH_BIG_GAP == EPOCH_SLACK + 1, "a big event's gap must exceed the slack");

// Gives up on the tickets missing before each blocked head (threads that
// vanished mid-hook, or still inside one after STUCK_NS).
static void skip_missing(void) {
    struct tpprof_wstate *w = &tpprof_w;
    uint32_t lowest[TPPROF_STRIPES];
    bool seen[TPPROF_STRIPES] = {false};
    for (uint32_t i = 0; i < nactive; i++) {
        const uint64_t *r = ring_next(active[i], active[i]->w_tail);
        if (!r || stripe_ready(r[0])) continue;
        unsigned s = tpprof_hdr_stripe(r[0]);
        uint32_t k = tpprof_hdr_ticket(r[0]);
        if (!seen[s] || tpprof_ticket_diff(k, lowest[s]) < 0) lowest[s] = k;
        seen[s] = true;
    }
    for (unsigned s = 0; s < TPPROF_STRIPES; s++)
        if (seen[s]) w->expected[s] = lowest[s];
}

// ---------------------------------------------------------------------------
// The merge of several rings.
//
// The rings whose head is ready (its stripe ticket's turn has come) wait in
// a binary heap by head epoch; the oldest is drained while its records'
// epochs stay within EPOCH_SLACK of the next oldest, then goes back with
// its new head. A ring whose head waits for another ring's record on its
// stripe is kept in `waits` by (stripe, ticket), and that record, applied,
// puts it in the heap. So each switch between rings costs a few heap steps,
// whatever the number of threads: the merge used to pass over every ring to
// move EPOCH_SLACK epochs on (a thousand threads allocating at once: 2.3 s
// where native took 0.07, nearly all of it the writer's passes).

static struct tpprof_map waits;

static inline bool heap_before(uint32_t a, uint32_t b) {
    int32_t d = tpprof_epoch_diff(active[a]->w_epoch, active[b]->w_epoch);
    return d < 0 || (d == 0 && a < b);
}

static void heap_push(uint32_t i) {
    uint32_t k = nheap++;
    while (k > 0) {
        uint32_t up = (k - 1) / 2;
        if (!heap_before(i, mheap[up])) break;
        mheap[k] = mheap[up];
        k = up;
    }
    mheap[k] = i;
}

static uint32_t heap_pop(void) {
    uint32_t top = mheap[0], last = mheap[--nheap], k = 0;
    for (;;) {
        uint32_t c = 2 * k + 1;
        if (c >= nheap) break;
        if (c + 1 < nheap && heap_before(mheap[c + 1], mheap[c])) c++;
        if (!heap_before(mheap[c], last)) break;
        mheap[k] = mheap[c];
        k = c;
    }
    if (nheap) mheap[k] = last;
    return top;
}

static inline uint64_t wait_key(uint64_t h) {
    return ((uint64_t)tpprof_hdr_stripe(h) << 32 | tpprof_hdr_ticket(h)) + 1;
}

// Ring i's head, which is not empty: into the heap, or to wait.
static void merge_enter(uint32_t i, int state, uint32_t epoch) {
    struct tpprof_thread *t = active[i];
    if (state == HEAD_READY) {
        t->w_epoch = epoch;
        heap_push(i);
        return;
    }
    const uint64_t h = t->ring[t->w_head & t->mask];
    uint64_t key = wait_key(h);
    // (No memory for the entry: it waits for the next pass instead.)
    if (tpprof_map_get(&waits, key) || !tpprof_map_put(&waits, key, i + 1)) return;
    t->w_wait_key = key;
    waiting_on[tpprof_hdr_stripe(h)]++;
}

static void wake_waiter(unsigned stripe) {
    uint64_t key = ((uint64_t)stripe << 32 | tpprof_w.expected[stripe]) + 1;
    uint32_t v = tpprof_map_take(&waits, key);
    if (!v) return;
    waiting_on[stripe]--;
    struct tpprof_thread *t = active[v - 1];
    t->w_wait_key = 0;
    uint32_t e;
    int st = head_state(t, &e);
    if (st != HEAD_EMPTY) merge_enter(v - 1, st, e);
}

// Ends a merge: the heap emptied, whatever still waits forgotten.
static void merge_leave(void) {
    nheap = 0;
    if (!waits.count) return;
    for (uint32_t i = 0; i < nactive; i++) {
        struct tpprof_thread *t = active[i];
        if (!t->w_wait_key) continue;
        if (tpprof_map_take(&waits, t->w_wait_key)) waiting_on[(t->w_wait_key - 1) >> 32]--;
        t->w_wait_key = 0;
    }
}

// Drains the rings from the heads drain_rings' pass found (w_state,
// w_epoch) until none is ready, or the oldest ready head is past the
// records the pass may apply (w_lim: the next pass reads the tails again),
// or the slice is up. Returns false when it was cut for the slice.
static bool merge_rings(bool force, uint64_t started, bool prefetch, uint64_t *applied) {
    nheap = 0;
    for (uint32_t i = 0; i < nactive; i++)
        if (active[i]->w_state != HEAD_EMPTY) merge_enter(i, active[i]->w_state, active[i]->w_epoch);
    bool whole = true;
    for (uint32_t pops = 0; nheap; pops++) {
        if (!force && (pops & 255) == 255 &&
            (atomic_load_explicit(&tpprof_merge_waiters, memory_order_relaxed) || tpprof_now_ns() - started > DRAIN_SLICE_NS)) {
            whole = false;
            break;
        }
        uint32_t i = heap_pop();
        struct tpprof_thread *t = active[i];
        if (!ring_next(t, t->w_lim)) break; // its head came after the pass read the tails
        // Within the slack of the next oldest head; alone, of its own (a
        // ring it wakes then gets its turn soon, not after the whole ring).
        uint32_t bound = (active[nheap ? mheap[0] : i]->w_epoch + EPOCH_SLACK) & TPPROF_EPOCH_MASK;
        drain_thread(t, true, bound, prefetch, applied);
        uint32_t e;
        int s = head_state(t, &e);
        if (s != HEAD_EMPTY) merge_enter(i, s, e);
        // A full ring must not wait for the whole merge to end.
        if (t->w_head - atomic_load_explicit(&t->head, memory_order_relaxed) > (t->mask + 1) / 4)
            atomic_store_explicit(&t->head, t->w_head, memory_order_release);
    }
    merge_leave();
    return whole;
}

static uint64_t drain_rings(bool force) {
    uint64_t applied = 0;
    // While the live table is sparse (up to 1 MiB) its slots stay in the L2
    // cache and prefetching them costs more than it saves (alloc_heavy 1000
    // steps, callgrind: the writer's merge and apply 202 M instructions with
    // prefetching, 186 M without; 10000 steps, 2 threads, with the table
    // 1/8 full: 23 ns per event with prefetching, 22 without).
    bool prefetch = tpprof_w.live.cap * sizeof(struct tpprof_block) > TPPROF_LIVE_SPARSE_BYTES;
    collect_threads();
    uint64_t started = force ? 0 : tpprof_now_ns();
    tpprof_merge_cut = false;
    // A forced drain (exit, exec, fork, the leak scan) takes what the rings
    // held when it began: threads still allocating at exit would otherwise
    // refill them as fast as it empties them (an exit with three busy
    // threads sharing one arena took 1 to 17 s).
    if (force)
        for (uint32_t i = 0; i < nactive; i++)
            active[i]->w_cap = atomic_load_explicit(&active[i]->tail, memory_order_acquire);
    for (;;) {
        // Each ring's tail is read twice a pass (not per record: the
        // producer writes that line with every record, and a writer chasing
        // it made each commit a cache miss). Records are applied up to the
        // first read (w_lim); the heads and epochs that order them are those
        // up to the second (w_tail). Whatever another thread did before a
        // record seen at the first read was published before it, so by the
        // second it is seen too: a thread's free that a record of another
        // thread follows is never missed just because its ring was looked
        // at a moment too early.
        for (uint32_t i = 0; i < nactive; i++)
            active[i]->w_lim = atomic_load_explicit(&active[i]->tail, memory_order_acquire);
        for (uint32_t i = 0; i < nactive; i++)
            active[i]->w_tail = atomic_load_explicit(&active[i]->tail, memory_order_acquire);
        if (force)
            for (uint32_t i = 0; i < nactive; i++) {
                struct tpprof_thread *t = active[i];
                if (t->w_lim > t->w_cap) t->w_lim = t->w_cap;
                if (t->w_tail > t->w_cap) t->w_tail = t->w_cap;
            }
        // The oldest epoch among the ready heads; how many rings have records.
        uint32_t ready = 0, pending = 0, only = 0;
        for (uint32_t i = 0; i < nactive; i++) {
            struct tpprof_thread *t = active[i];
            int st = head_state(t, &t->w_epoch);
            t->w_state = (uint8_t)st;
            if (st == HEAD_EMPTY) continue;
            pending++;
            if (st != HEAD_READY) continue;
            ready++;
            only = i;
        }
        if (ready && !force &&
            (atomic_load_explicit(&tpprof_merge_waiters, memory_order_relaxed) || tpprof_now_ns() - started > DRAIN_SLICE_NS)) {
            tpprof_merge_cut = true;
            return applied;
        }
        if (ready) {
            stuck_since_ns = 0;
            // While the producers keep the merge busy, a full ring must not
            // wait for the whole drain to end (threads handing blocks to
            // each other kept it looping until one gave up after 100 ms).
            publish_heads();
            if (pending == 1) { // one ring: no other to keep pace with
                drain_thread(active[only], false, 0, prefetch, &applied);
                continue;
            }
            if (!merge_rings(force, started, prefetch, &applied)) {
                tpprof_merge_cut = true;
                return applied;
            }
            continue;
        }
        if (!pending) { // every ring is drained
            retire_threads();
            return applied;
        }
        uint64_t now = tpprof_now_ns();
        if (!stuck_since_ns) stuck_since_ns = now;
        if (force || now - stuck_since_ns > STUCK_NS) {
            skip_missing();
            stuck_since_ns = 0;
            continue;
        }
        return applied;
    }
}

// Each stripe's next ticket (the writer starts, or a forked child goes on
// from what the parent's rings held).
void tpprof_merge_expect_current(void) {
    for (unsigned s = 0; s < TPPROF_STRIPES; s++)
        tpprof_w.expected[s] = (uint32_t)atomic_load(&tpprof_stripes[s].v) & TPPROF_TICKET_MASK;
}

