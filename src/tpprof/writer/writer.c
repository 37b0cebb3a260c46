// writer.c: the writer thread: merges the per-thread rings (exact per
// address, by stripe tickets; by epoch across threads: record/order.h)
// and aggregates them (sites, live set, peak, temporaries, timeline).
//
// Runs off the program's threads (all signals blocked, re-entry guard always
// set, so its own allocations, SQLite's included, are never recorded). Every
// millisecond it drains what the rings hold; every TPPROF_INTERVAL_MS it
// samples the timeline; every 200 ms (longer if commits are slow: at most a
// twentieth of its time goes to them) it commits one transaction (store/store.c). The
// same code runs synchronously, under the same mutex, at exit, _exit, exec
// and fork. It must never be called from inside a malloc hook.
#define _GNU_SOURCE
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <errno.h>
#include <stdio.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/base.h"
#include "base/fdguard.h"
#include "base/mem.h"
#include "base/modules.h"
#include "record/early.h"
#include "record/format.h"
#include "record/order.h"
#include "record/rings.h"
#include "store/store.h"
#include "writer/control.h"
#include "writer/sites.h"
#include "writer/writer.h"

#define FLUSH_EVERY_NS 200000000ull
// A commit rewrites every site that changed since the last one: with tens of
// thousands of busy sites that is a good part of a second of SQLite work, so
// the period grows to keep commits under 1/FLUSH_SHARE of the writer's time.
#define FLUSH_SHARE 20
#define STUCK_NS 500000000ull  // a stripe ticket missing this long is skipped

struct tpprof_wstate tpprof_w;

static pthread_mutex_t wmu = PTHREAD_MUTEX_INITIALIZER;
static pthread_t writer_thread;
static bool writer_running;
static bool db_open;
static uint64_t next_sample_ns, next_flush_ns, stuck_since_ns;

// Threads waiting for wmu (fork, exit, exec, the leak scan). A merge the
// producers keep busy would otherwise hold it for as long as they allocate:
// a program that forked while three threads allocated flat out waited 0.3 s
// at each fork (40 forks: 0.05 s native, 13.7 s). It also cuts its pass
// after DRAIN_SLICE_NS, so the timeline and the flushes keep their pace.
static _Atomic int wmu_waiters;
static bool drain_cut; // the last drain stopped with records still waiting
#define DRAIN_SLICE_NS 5000000ull

static void wmu_lock_other(void) {
    atomic_fetch_add(&wmu_waiters, 1);
    pthread_mutex_lock(&wmu);
    atomic_fetch_sub(&wmu_waiters, 1);
}
static unsigned long long dl_adds, dl_subs;

static void ticks_calibrate(uint64_t now_ns);

// A batch of records is merged at time `now` (aggregate mode's record time),
// which is also the latest point ticks are converted against.
static void batch_begin(uint64_t now) {
    tpprof_w.batch_time_ns = now;
    ticks_calibrate(now);
}

// ---------------------------------------------------------------------------
// Threads.

static void note_thread(struct tpprof_thread *t) {
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

static uint64_t drain(bool force) {
    uint64_t n = drain_rings(force);
    publish_heads();
    return n;
}


// ---------------------------------------------------------------------------
// Ticks to ns: the line through the first (ticks, ns) point, taken when the
// writer starts, and the latest, taken with each batch's merge time.

static uint64_t tk0, tkns0;
static double ns_per_tick;

static void ticks_calibrate(uint64_t now_ns) {
    uint64_t tk = tpprof_ticks();
    if (!tk0) {
        tk0 = tk;
        tkns0 = now_ns;
    } else if (tk > tk0 && now_ns > tkns0 + 100000) { // 100 us apart at least
        ns_per_tick = (double)(now_ns - tkns0) / (double)(tk - tk0);
    }
}

uint64_t tpprof_writer_ticks_to_ns(uint64_t ticks, uint64_t batch_ns) {
    if (ns_per_tick <= 0 || ticks < tk0) return batch_ns;
    uint64_t ns = tkns0 + (uint64_t)((double)(ticks - tk0) * ns_per_tick);
    return ns < batch_ns ? ns : batch_ns;
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
            note_thread(t);
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
            (atomic_load_explicit(&wmu_waiters, memory_order_relaxed) || tpprof_now_ns() - started > DRAIN_SLICE_NS)) {
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
    drain_cut = false;
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
            (atomic_load_explicit(&wmu_waiters, memory_order_relaxed) || tpprof_now_ns() - started > DRAIN_SLICE_NS)) {
            drain_cut = true;
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
                drain_cut = true;
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
static void expect_current(void) {
    for (unsigned s = 0; s < TPPROF_STRIPES; s++)
        tpprof_w.expected[s] = (uint32_t)atomic_load(&tpprof_stripes[s].v) & TPPROF_TICKET_MASK;
}

// ---------------------------------------------------------------------------
// Timeline, modules.

// A /proc/self file the writer reads again and again (statm every sample;
// status after main's pthread_exit). It stays open (guarded, fdguard.c) and
// is read again at offset 0: opening it each time would hand a program's
// close loop a fresh low number of tpprof's a hundred times a second.
// /proc/self is the opener's: a forked child opens its own.
struct proc_file {
    const char *path;
    int fd;
    pid_t pid;
};

static struct proc_file statm = {"/proc/self/statm", -1, 0}, status = {"/proc/self/status", -1, 0};

// Its contents (NUL-terminated) into buf; bytes read, or <= 0.
static ssize_t proc_read(struct proc_file *f, char *buf, size_t cap) {
    if (f->fd < 0 || f->pid != getpid()) {
        if (f->fd >= 0) tpprof_fd_close(f->fd);
        f->fd = tpprof_fd_open(f->path);
        f->pid = getpid();
        if (f->fd < 0) return -1;
    }
    ssize_t n = pread(f->fd, buf, cap - 1, 0);
    if (n > 0) buf[n] = 0;
    return n;
}

static int64_t read_rss(void) {
    char buf[128];
    if (proc_read(&statm, buf, sizeof buf) <= 0) return 0;
    const char *p = buf;
    while (*p && *p != ' ') p++;
    int64_t pages = 0;
    while (*p == ' ') p++;
    while (*p >= '0' && *p <= '9') pages = pages * 10 + (*p++ - '0');
    return pages * sysconf(_SC_PAGESIZE);
}

static void sample(uint64_t now) {
    struct tpprof_wstate *w = &tpprof_w;
    if (w->nsamples == w->capsamples) {
        uint32_t ncap = w->capsamples ? w->capsamples * 2 : 1024;
        struct tpprof_sample *n = tpprof_mem_grow(w->samples, w->capsamples * sizeof *n, ncap * sizeof *n);
        if (!n) return;
        w->samples = n;
        w->capsamples = ncap;
    }
    if (w->nsamples && w->samples[w->nsamples - 1].time_ns >= now) now = w->samples[w->nsamples - 1].time_ns + 1;
    struct tpprof_sample *s = &w->samples[w->nsamples++];
    s->time_ns = now;
    s->heap_bytes = w->heap_bytes;
    s->heap_blocks = w->heap_blocks;
    s->mmap_bytes = w->mmap_bytes;
    s->alloc_calls = w->alloc_calls;
    s->free_calls = w->free_calls;
    s->rss_bytes = read_rss();
}

static int dl_counts(struct dl_phdr_info *info, size_t size, void *arg) {
    (void)arg;
    if (size < offsetof(struct dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs) return 1;
    if (info->dlpi_adds != dl_adds || info->dlpi_subs != dl_subs) {
        dl_adds = info->dlpi_adds;
        dl_subs = info->dlpi_subs;
        return 2;
    }
    return 1;
}

// dlopen is not interposed (a wrapper would change the caller glibc uses for
// $ORIGIN and RUNPATH): new objects are noticed here, every cycle, from the
// loader's add/sub counters; dlclose is interposed (lifecycle.c).
static void poll_modules(void) {
    if (dl_iterate_phdr(dl_counts, NULL) == 2) tpprof_modules_refresh();
}

// ---------------------------------------------------------------------------
// The thread.

_Atomic int tpprof_main_exited;

// After the main thread's pthread_exit: whether the writer is the only
// thread left (/proc/self/status counts it and the main thread, a zombie
// until the process ends).
static bool only_writer_left(void) {
    char buf[4096];
    if (proc_read(&status, buf, sizeof buf) <= 0) return false;
    const char *p = strstr(buf, "\nThreads:");
    return p && strtol(p + 10, NULL, 10) <= 2;
}

// ---------------------------------------------------------------------------
// Sharing the writer's time evenly.
//
// Where the program keeps every core busy, the writer takes its time from
// the program thread it shares a core with, and CFS leaves it there: moving
// it would not even the load. On alloc_heavy's 2 threads on 2 cores one
// worker then ran 0.1-0.4 s longer than the other, and that tail ran on one
// core. So while the program's threads have kept the cores busy (their CPU
// time over the last 16 ms or more within half a core of all of them, twice
// in a row), the writer moves itself to the next of the cores the process
// may use every ROTATE_NS; once that stops, it may run anywhere again.
// (Tried instead: the program's threads draining the rings themselves. It
// evened the load too, but the live table then moved between cores with
// each drain, which cost as much as it saved, and a thread could drain for
// milliseconds inside a malloc made under a lock of its own.)
#define BUSY_WINDOW_NS 16000000ull
#define ROTATE_NS 32000000ull

struct rotation {
    cpu_set_t allowed; // the cores the writer may use (read while it is free)
    int ncpus, cpu;    // how many; the one the writer is on (-1: free)
    int streak;
    bool busy;
    uint64_t w0_ns, cpu0_ns, moved_ns;
};

static void rotation_free(struct rotation *r) {
    if (r->cpu >= 0) sched_setaffinity(0, sizeof r->allowed, &r->allowed);
    r->cpu = -1;
}

static void rotation_step(struct rotation *r, uint64_t now, unsigned iteration) {
    // The writer's own mask while it is free (the process's, inherited from
    // the constructor's thread): a sandbox's seccomp policy that lets a
    // thread set its own affinity may not let it read another's.
    if ((iteration & 255) == 0 && r->cpu < 0) {
        if (sched_getaffinity(0, sizeof r->allowed, &r->allowed) == 0) r->ncpus = CPU_COUNT(&r->allowed);
        else r->ncpus = 0;
    }
    if (r->ncpus < 2) {
        rotation_free(r);
        return;
    }
    // The program's threads' CPU time: the process's less the writer's (a
    // writer that has work for a core of its own does not make the cores
    // busy: it would then be moved onto the program's).
    struct timespec ts, mine;
    if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) != 0 || clock_gettime(CLOCK_THREAD_CPUTIME_ID, &mine) != 0) {
        rotation_free(r);
        return;
    }
    uint64_t cpu = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec,
             own = (uint64_t)mine.tv_sec * 1000000000u + (uint64_t)mine.tv_nsec;
    cpu = cpu > own ? cpu - own : 0;
    if (!r->w0_ns || now < r->w0_ns || cpu < r->cpu0_ns) {
        r->w0_ns = now;
        r->cpu0_ns = cpu;
    } else if (now - r->w0_ns >= BUSY_WINDOW_NS) {
        bool busy = 2 * (cpu - r->cpu0_ns) > (uint64_t)(2 * r->ncpus - 1) * (now - r->w0_ns);
        r->w0_ns = now;
        r->cpu0_ns = cpu;
        r->streak = busy == r->busy ? 0 : r->streak + 1;
        if (r->streak >= 2) {
            r->busy = busy;
            r->streak = 0;
        }
    }
    if (!r->busy) {
        rotation_free(r);
        return;
    }
    if (r->cpu >= 0 && now - r->moved_ns < ROTATE_NS) return;
    int next = r->cpu;
    for (int k = 0; k < CPU_SETSIZE; k++) {
        next = (next + 1) % CPU_SETSIZE;
        if (CPU_ISSET(next, &r->allowed)) break;
    }
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(next, &one);
    if (sched_setaffinity(0, sizeof one, &one) == 0) {
        r->cpu = next;
        r->moved_ns = now;
    }
}

static void *writer_main(void *arg) {
    (void)arg;
    tpprof_guard = 1;
    long sleep_ns = 4000000;
    struct rotation rot = {.cpu = -1};
    for (unsigned iteration = 0; !atomic_load(&tpprof_drainer_stop); iteration++) {
        rotation_step(&rot, tpprof_now_ns(), iteration);
        pthread_mutex_lock(&wmu);
        if (!db_open) {
            pthread_mutex_unlock(&wmu);
            break;
        }
        uint64_t now = tpprof_now_ns();
        batch_begin(now);
        poll_modules();
        // Busy: every 4 ms. Idle: back off to 8 ms. A ring holds ~15 ms of the
        // busiest thread we measured. Where the program's threads keep every
        // core busy the writer takes its time from them, and each of its
        // turns costs them more than its work (their caches): draining every
        // millisecond, alloc_heavy on 2 threads on 2 cores ran 1.616x native
        // (median of 21 paired rounds), every 4 ms 1.560x; 1 thread 1.341x,
        // now 1.293x (11 rounds).
        sleep_ns = drain(false) ? 4000000 : (sleep_ns < 8000000 ? sleep_ns * 2 : 8000000);
        if (now >= next_sample_ns) {
            sample(now);
            next_sample_ns = now + (uint64_t)tpprof_cfg.interval_ms * 1000000u;
        }
        if (now >= next_flush_ns) {
            uint64_t t0 = tpprof_now_ns();
            // In steps, draining the rings between them (store.h).
            int r = tpprof_store_flush_begin(false) ? 1 : -1;
            while (r > 0 && (r = tpprof_store_flush_step()) > 0) drain(false);
            if (r < 0) db_open = false;
            uint64_t took = tpprof_now_ns() - t0;
            next_flush_ns = now + (took * FLUSH_SHARE > FLUSH_EVERY_NS ? took * FLUSH_SHARE : FLUSH_EVERY_NS);
        }
        pthread_mutex_unlock(&wmu);
        if (atomic_load(&wmu_waiters)) { // let them in before locking again
            while (atomic_load(&wmu_waiters) && !atomic_load(&tpprof_drainer_stop)) sched_yield();
            continue;
        }
        if (drain_cut) continue; // still busy: no nap
        if (TPPROF_UNLIKELY(atomic_load(&tpprof_main_exited)) && only_writer_left()) {
            // What glibc would do as the last program thread ended: exit(0),
            // the program's atexit handlers (recorded) and then ours.
            tpprof_guard = 0;
            exit(0);
        }
        tpprof_drainer_nap(sleep_ns);
    }
    return NULL;
}

static bool spawn_writer(void) {
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    atomic_store(&tpprof_drainer_stop, 0);
    // 1 MiB of stack, not the default 8 (RLIMIT_STACK): the writer's deepest
    // path is SQLite's, tens of KiB, and every byte of address space it
    // reserves is one a program under `ulimit -v` does not get.
    pthread_attr_t attr;
    bool sized = pthread_attr_init(&attr) == 0;
    if (sized && pthread_attr_setstacksize(&attr, (size_t)1 << 20) != 0) {
        pthread_attr_destroy(&attr);
        sized = false;
    }
    int rc = pthread_create(&writer_thread, sized ? &attr : NULL, writer_main, NULL);
    if (sized) pthread_attr_destroy(&attr);
    clockid_t c;
    tpprof_drainer_clock = rc == 0 && pthread_getcpuclockid(writer_thread, &c) == 0 ? c : 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    writer_running = rc == 0;
    return writer_running;
}

bool tpprof_writer_start(const char *path) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    tpprof_w.start_unix_ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    tpprof_w.peak_epoch = 1;
    tpprof_w.order = 1;
    expect_current();
    ticks_calibrate(tpprof_now_ns()); // the first point; the writer's batches add the latest
    if (!tpprof_store_open(path)) return false;
    db_open = true;
    dl_iterate_phdr(dl_counts, NULL);
    read_rss(); // statm opens now, before main: not under a program's dup2
    if (!spawn_writer()) {
        tpprof_disable(path, "cannot start the writer thread");
        tpprof_store_close(false);
        db_open = false;
        return false;
    }
    return true;
}

// ---------------------------------------------------------------------------
// Ends, fork, exec.

static void stop_writer(void) {
    if (!writer_running) return;
    atomic_store(&tpprof_drainer_stop, 1);
    tpprof_drainer_kick();
    if (!pthread_equal(pthread_self(), writer_thread)) pthread_join(writer_thread, NULL);
    writer_running = false;
}

// The leak scan reads the exiting thread's stack from a little below its
// caller's frame (lifecycle.c), which reaches into the dead frames of the
// drain just before it: the merge keeps block addresses there (the frame
// of a loop with its applying inlined), and a stale one would make a lost
// block look reachable. So the drain's frames are wiped first.
static __attribute__((noinline)) void wipe_stack(void) {
    volatile char frame[4096];
    memset((char *)frame, 0, sizeof frame);
    __asm__ volatile("" : : "r"(frame) : "memory");
}

void tpprof_writer_pause(void) { wmu_lock_other(); }

void tpprof_writer_resume(int taken) {
    struct proc_file *files[] = {&statm, &status};
    for (int i = 0; i < 2; i++)
        if (taken >= 0 && taken == files[i]->fd) { // now the program's: another number, opened on this thread
            files[i]->fd = -1;
            char buf[4096];
            proc_read(files[i], buf, sizeof buf);
        }
    pthread_mutex_unlock(&wmu);
}

void tpprof_writer_leak_scan(uintptr_t sp) {
    wmu_lock_other();
    if (db_open) {
        batch_begin(tpprof_now_ns());
        poll_modules();
        drain(true);
        wipe_stack();
        tpprof_scan_run(&tpprof_w, sp);
        tpprof_w.scanned = true;
    }
    pthread_mutex_unlock(&wmu);
}

void tpprof_writer_finish(enum tpprof_end how) {
    if (how != TPPROF_END_QUICK) stop_writer();
    wmu_lock_other();
    if (db_open) {
        struct tpprof_wstate *w = &tpprof_w;
        uint64_t now = tpprof_now_ns();
        batch_begin(now);
        poll_modules();
        drain(true);
        sample(now);
        w->end_reason = how == TPPROF_END_EXIT ? "exit" : how == TPPROF_END_EXEC ? "exec" : NULL;
        w->complete = how != TPPROF_END_QUICK;
        w->exec_pending = how == TPPROF_END_EXEC;
        bool ok = tpprof_store_flush(true);
        tpprof_store_close(ok);
        db_open = false;
    }
    atomic_store(&tpprof_active, 0); // exec: back on if it fails
    pthread_mutex_unlock(&wmu);
}

// A signal is about to end the process (lifecycle.c on_fatal): everything is
// written, with the live set, scanned when `sp` is given (not after a fault:
// the less a crashing process does the better). Runs in the signal's
// handler. The writer mutex is waited for up to 2 s: a thread that took it
// may be the one that crashed. It is kept: the process is ending, and the
// writer must not touch the closed database.
void tpprof_writer_end_signal(int sig, uintptr_t sp) {
    if (writer_running && pthread_equal(pthread_self(), writer_thread)) return; // the writer itself crashed
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 2;
    atomic_fetch_add(&wmu_waiters, 1);
    int rc = pthread_mutex_timedlock(&wmu, &until);
    atomic_fetch_sub(&wmu_waiters, 1);
    if (rc != 0) return;
    if (db_open) {
        struct tpprof_wstate *w = &tpprof_w;
        uint64_t now = tpprof_now_ns();
        batch_begin(now);
        drain(true);
        if (sp) {
            wipe_stack();
            tpprof_scan_run(w, sp);
            w->scanned = true;
        }
        sample(now);
        w->end_reason = "signal";
        w->end_signal = sig;
        w->complete = true;
        bool ok = tpprof_store_flush(true);
        tpprof_store_close(ok);
        db_open = false;
    }
    atomic_store(&tpprof_active, 0);
}

// exec returned: the image goes on; reopen the database and keep recording.
void tpprof_writer_exec_failed(void) {
    wmu_lock_other();
    struct tpprof_wstate *w = &tpprof_w;
    if (w->exec_pending) {
        bool ok = tpprof_store_open(tpprof_output_path); // exec_pending: reopen, keep the file
        w->exec_pending = false;
        w->end_reason = NULL;
        w->complete = false;
        if (ok) {
            db_open = true;
            atomic_store(&tpprof_active, 1);
            if (!writer_running) spawn_writer();
        }
    }
    pthread_mutex_unlock(&wmu);
}

// Blocks and mappings from before the start (early.c) are held under a site
// of kind 0, which no allocation has: the leak scan sees them and looks inside
// them, but they are not allocations of the recording (not counted in the
// totals, the timeline or the peak), and neither the site nor the blocks are
// written (store/store.c). A free of one only takes it out (heap_free).
static void adopt_early(uint64_t addr, uint64_t size, bool mapping) {
    struct tpprof_wstate *w = &tpprof_w;
    struct tpprof_site *s = tpprof_site_lookup(0, TPPROF_KIND_EARLY);
    if (!s) return;
    if (mapping) { // unlike map_add: no site_add, no mmap_bytes
        if (!maps_room()) return;
        w->maps[w->nmaps++] = (struct tpprof_block){.addr = addr, .size = page_up(size), .site = (uint32_t)(s - w->sites)};
        maps_index(w->nmaps - 1);
        return;
    }
    bool existed;
    struct tpprof_block *b = tpprof_live_insert(&w->live, addr, &existed);
    if (!b || existed) return;
    *b = (struct tpprof_block){.addr = addr, .size = size, .site = (uint32_t)(s - w->sites)};
}

void tpprof_writer_go(void) {
    wmu_lock_other();
    atomic_store(&tpprof_active, 1);
    tpprof_early_end(db_open ? adopt_early : NULL);
    pthread_mutex_unlock(&wmu);
}

void tpprof_writer_fork_prepare(void) {
    wmu_lock_other();
    tpprof_modules_lock();
}

void tpprof_writer_fork_parent(void) {
    tpprof_modules_unlock();
    pthread_mutex_unlock(&wmu);
}

void tpprof_writer_fork_child(const char *path) {
    struct tpprof_wstate *w = &tpprof_w;
    tpprof_modules_unlock();
    tpprof_threads_fork_child();
    if (tpprof_self) note_thread(tpprof_self); // its tid is the child's now
    writer_running = false;
    if (db_open) {
        batch_begin(tpprof_now_ns());
        drain(true); // the parent's events up to the fork belong to the child too
        expect_current();
        tpprof_store_abandon();
        tpprof_fdguard_fork_child();
        // The forking thread is the child's main thread, running.
        atomic_store(&tpprof_main_exited, 0);
        db_open = false;
        // The child's database starts from the parent's state at the fork.
        w->nodes_written = 0;
        for (uint32_t i = 0; i < w->nsites; i++) w->sites[i].dirty = true, w->sites[i].stored = false;
        for (struct tpprof_thread *t = atomic_load(&tpprof_threads); t; t = t->next) t->w_dirty = t->w_seen;
        tpprof_modules_mark_all_unwritten();
        w->nsamples = 0;
        w->nevents = 0;
        tpprof_obs_fork_child();
        if (tpprof_store_open(path)) {
            db_open = true;
            next_flush_ns = 0;
            read_rss(); // opens the child's own statm while it is alone
            spawn_writer();
        }
    }
    pthread_mutex_unlock(&wmu);
}
