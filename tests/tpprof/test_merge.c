// test_merge.c: unit tests of the writer's merge (src/tpprof/writer/merge.c,
// merge.h): hand-built per-thread rings go in, and the order in which their
// records are applied comes out. In full mode every applied allocation and
// free is kept as an event numbered in applying order (apply.h); observer
// records go to this file's tpprof_obs_apply, which notes the number each
// was applied under. What the merge must do (record/order.h):
// - the records of one stripe are applied in ticket order, whatever their
//   threads' epochs (a block freed by one thread and reused by another is
//   seen freed first);
// - across stripes by epoch, a ring running ahead of the oldest ready one by
//   at most the slack (4 epochs); equal epochs: the older thread's ring;
// - observer records follow their own stripe's tickets across threads;
// - an empty ring holds nothing up; a ticket that never comes holds its
//   stripe until a forced drain gives up on it, and comes late it still is
//   applied; wrap padding is stepped over.
// No preload, no database: runs under ASan+UBSan too.
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "record/format.h"
#include "record/order.h"
#include "record/rings.h"
#include "writer/merge.h"
#include "writer/writer.h"
#include "../check.h"

// ---------------------------------------------------------------------------
// What merge.c (and apply.h, sites.c) need from the rest of the recorder.

struct tpprof_wstate tpprof_w;
struct tpprof_config tpprof_cfg = {.depth = 32, .interval_ms = 10, .full = true};
struct tpprof_order_line tpprof_stripes[TPPROF_STRIPES];
_Atomic(struct tpprof_thread *) tpprof_threads;

uint64_t tpprof_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

struct tpprof_thread *tpprof_threads_reborn(void) { return NULL; }
void tpprof_thread_recycle(struct tpprof_thread *t) { (void)t; }

// The depot: every stack is one frame.
static uintptr_t frame = 0x401000;
const uintptr_t *tpprof_stack_frames(uint32_t id, int *n) {
    (void)id;
    *n = 1;
    return &frame;
}
void tpprof_stack_release(uint32_t id) { (void)id; }
void tpprof_stack_prefetch(uint32_t id) { (void)id; }

// Observer records as the merge applies them: (thread index, order, tag).
static struct { uint32_t thread; uint64_t order, tag; } obs[256];
static int nobs;
void tpprof_obs_apply(struct tpprof_thread *t, const uint64_t *r, uint64_t time, uint64_t order) {
    (void)time;
    if (nobs < 256) obs[nobs].thread = (uint32_t)t->index, obs[nobs].order = order, obs[nobs++].tag = r[2];
}
void tpprof_obs_block_freed(uint64_t addr, uint64_t time) { (void)addr, (void)time; }
void tpprof_obs_fork_child(void) {}
void tpprof_obs_fold_collect(struct tpprof_thread *t) { (void)t; }
// Device records are not part of these rings; the merge links to the writer's entry.
void tpprof_device_apply(struct tpprof_thread *t, const uint64_t *r, uint64_t seq) { (void)t, (void)r, (void)seq; }

// ---------------------------------------------------------------------------
// Hand-built rings.

#define RING_WORDS 64
static int nthreads;

// A new thread (newer than every one before), with an empty ring, on the
// list the merge reads.
static struct tpprof_thread *thread_new(void) {
    struct tpprof_thread *t = aligned_alloc(64, sizeof *t);
    memset(t, 0, sizeof *t);
    t->ring = calloc(RING_WORDS, sizeof *t->ring);
    t->mask = RING_WORDS - 1;
    t->tid = (pid_t)syscall(SYS_gettid); // alive: it never leaves the merge
    t->index = nthreads++;
    t->next = atomic_load(&tpprof_threads);
    atomic_store(&tpprof_threads, t);
    return t;
}

// The order part of a header (what tpprof_order_tag makes).
static uint64_t tag(unsigned stripe, uint32_t ticket, uint32_t epoch) {
    return (uint64_t)epoch << 36 | (uint64_t)(ticket & TPPROF_TICKET_MASK) << 8 | stripe;
}

// Appends one record and full mode's timestamp, padding to the ring's start
// as the hooks do when it does not fit before the end; publishes it.
static void put(struct tpprof_thread *t, const uint64_t *w, int n) {
    uint64_t tail = atomic_load(&t->tail), pos = tail & t->mask;
    if (pos + (uint64_t)n + 1 > t->mask + 1) {
        t->ring[pos] = (uint64_t)TPPROF_OP_WRAP << 4;
        tail += t->mask + 1 - pos;
        pos = 0;
    }
    for (int i = 0; i < n; i++) t->ring[pos + (uint64_t)i] = w[i];
    t->ring[pos + (uint64_t)n] = 1000; // the timestamp
    atomic_store(&t->tail, tail + (uint64_t)n + 1);
}

static void put_alloc(struct tpprof_thread *t, unsigned stripe, uint32_t ticket, uint32_t epoch, uint64_t addr) {
    uint64_t w[4] = {tpprof_hdr(tag(stripe, ticket, epoch), TPPROF_OP_ALLOC, TPPROF_KIND_MALLOC), addr, 16, 1};
    put(t, w, 4);
}

static void put_free(struct tpprof_thread *t, unsigned stripe, uint32_t ticket, uint32_t epoch, uint64_t addr) {
    uint64_t w[2] = {tpprof_hdr(tag(stripe, ticket, epoch), TPPROF_OP_FREE, 0), addr};
    put(t, w, 2);
}

// An observer record of three words whose payload is `what`.
static void put_obs(struct tpprof_thread *t, uint32_t ticket, uint32_t epoch, uint64_t what) {
    uint64_t w[3] = {tpprof_hdr(tag(TPPROF_OBS_STRIPE, ticket, epoch), TPPROF_OP_OBS, 0), 3, what};
    put(t, w, 3);
}

// ---------------------------------------------------------------------------
// What was applied, in order: "a5 f5 o7 ..." (alloc, free or observer
// record, with its address or payload), from the order number `from` on.

static char applied[4096];

static const char *applied_since(uint64_t from) {
    size_t n = 0;
    applied[0] = 0;
    for (uint64_t seq = from; seq < tpprof_w.order; seq++) {
        char one[64] = "";
        for (uint64_t i = 0; i < tpprof_w.nevents; i++)
            if (tpprof_w.events[i].seq == seq)
                snprintf(one, sizeof one, "%c%llx", tpprof_w.events[i].op == TPPROF_OP_ALLOC ? 'a' : 'f',
                         (unsigned long long)tpprof_w.events[i].addr);
        for (int i = 0; i < nobs; i++)
            if (obs[i].order == seq) snprintf(one, sizeof one, "o%llx", (unsigned long long)obs[i].tag);
        n += (size_t)snprintf(applied + n, sizeof applied - n, "%s%s", n ? " " : "", one[0] ? one : "?");
    }
    return applied;
}

// The thread index the live block at addr was allocated by, or -1.
static int owner_of(uint64_t addr) {
    struct tpprof_block *b = tpprof_live_find(&tpprof_w.live, addr);
    return b ? (int)b->thread : -1;
}

// ---------------------------------------------------------------------------
// Tests.

static void test_one_stripe_follows_its_tickets_whatever_the_epochs(void) {
    uint64_t from = tpprof_w.order;
    uint32_t k = tpprof_w.expected[5];
    struct tpprof_thread *a = thread_new(), *b = thread_new();
    // a allocates 0x100, b frees it and allocates 0x200, a gets 0x100 back;
    // b's epochs are far older than a's, so an order by epoch would have b
    // free a block it has not seen allocated.
    put_alloc(a, 5, k + 0, 40, 0x100);
    put_free(b, 5, k + 1, 1, 0x100);
    put_alloc(b, 5, k + 2, 1, 0x200);
    put_alloc(a, 5, k + 3, 40, 0x100);
    uint64_t n = tpprof_merge_drain(false);
    CHECK_EQ_U64(n, 4);
    CHECK_STR_EQ(applied_since(from), "a100 f100 a200 a100");
    CHECK_MSG(owner_of(0x100) == a->index, "0x100 is a's second block (thread %d)", owner_of(0x100));
    CHECK_MSG(owner_of(0x200) == b->index, "0x200 is b's");
    CHECK_EQ_U64(tpprof_w.expected[5], (k + 4) & TPPROF_TICKET_MASK);
    CHECK(!tpprof_merge_cut);
}

static void test_stripes_interleave_by_epoch_within_the_slack(void) {
    uint64_t from = tpprof_w.order;
    struct tpprof_thread *a = thread_new(), *b = thread_new();
    uint32_t ka = tpprof_w.expected[10], kb = tpprof_w.expected[11];
    put_alloc(a, 10, ka + 0, 100, 0x1000);
    put_alloc(a, 10, ka + 1, 100, 0x1010);
    put_alloc(a, 10, ka + 2, 110, 0x1020); // past b's 105 by more than the slack
    put_alloc(a, 10, ka + 3, 110, 0x1030);
    put_alloc(b, 11, kb + 0, 105, 0x2000);
    put_alloc(b, 11, kb + 1, 105, 0x2010);
    CHECK_EQ_U64(tpprof_merge_drain(false), 6);
    CHECK_STR_EQ(applied_since(from), "a1000 a1010 a2000 a2010 a1020 a1030");
}

static void test_equal_epochs_go_to_the_older_threads_ring_first(void) {
    uint64_t from = tpprof_w.order;
    struct tpprof_thread *older = thread_new(), *newer = thread_new();
    uint32_t ko = tpprof_w.expected[12], kn = tpprof_w.expected[13];
    // The newer thread's records are put first: the order is not the
    // order they were written in.
    put_alloc(newer, 13, kn + 0, 200, 0x3000);
    put_alloc(newer, 13, kn + 1, 200, 0x3010);
    put_alloc(older, 12, ko + 0, 200, 0x4000);
    put_alloc(older, 12, ko + 1, 202, 0x4010); // within the slack: the same run
    CHECK_EQ_U64(tpprof_merge_drain(false), 4);
    CHECK_STR_EQ(applied_since(from), "a4000 a4010 a3000 a3010");
}

static void test_empty_rings_hold_nothing_up(void) {
    uint64_t from = tpprof_w.order;
    struct tpprof_thread *e1 = thread_new(), *busy = thread_new(), *e2 = thread_new();
    uint32_t k = tpprof_w.expected[14];
    for (uint32_t i = 0; i < 5; i++) put_alloc(busy, 14, k + i, 300 + 10 * i, 0x5000 + 16 * i);
    CHECK_EQ_U64(tpprof_merge_drain(false), 5);
    CHECK_STR_EQ(applied_since(from), "a5000 a5010 a5020 a5030 a5040");
    // A ring that empties as the merge goes: the rest goes on without it.
    from = tpprof_w.order;
    uint32_t k1 = tpprof_w.expected[15], k2 = tpprof_w.expected[16];
    put_alloc(e1, 15, k1, 400, 0x6000);
    put_alloc(e2, 16, k2, 401, 0x6100);
    put_alloc(e2, 16, k2 + 1, 420, 0x6110);
    CHECK_EQ_U64(tpprof_merge_drain(false), 3);
    CHECK_STR_EQ(applied_since(from), "a6000 a6100 a6110");
    CHECK_EQ_U64(tpprof_merge_drain(false), 0); // nothing left: nothing applied
    CHECK_EQ_U64(busy->w_head, atomic_load(&busy->tail));
    CHECK_EQ_U64(atomic_load(&busy->head), busy->w_head); // consumed space handed back
}

static void test_observer_records_follow_their_tickets_across_threads(void) {
    uint64_t from = tpprof_w.order;
    struct tpprof_thread *g = thread_new(), *h = thread_new();
    uint32_t k = tpprof_w.expected[TPPROF_OBS_STRIPE], kh = tpprof_w.expected[20];
    // g is older by epoch, but its observer records took tickets after h's.
    put_alloc(g, 20, kh, 500, 0x7000);
    put_obs(g, k + 1, 500, 0xb1);
    put_obs(g, k + 2, 500, 0xb2);
    put_obs(h, k + 0, 503, 0xb0);
    put_alloc(h, 21, tpprof_w.expected[21], 520, 0x7100); // host event, later than the slack
    CHECK_EQ_U64(tpprof_merge_drain(false), 5);
    CHECK_STR_EQ(applied_since(from), "a7000 ob0 ob1 ob2 a7100");
    CHECK_EQ_U64(tpprof_w.expected[TPPROF_OBS_STRIPE], (k + 3) & TPPROF_TICKET_MASK);
}

static void test_a_ticket_that_never_comes_is_given_up_on_when_forced(void) {
    uint64_t from = tpprof_w.order;
    struct tpprof_thread *j = thread_new(), *late = thread_new();
    uint32_t k = tpprof_w.expected[30];
    put_alloc(j, 30, k + 1, 600, 0x8010); // k itself: a thread inside a hook
    put_alloc(j, 30, k + 2, 600, 0x8020);
    CHECK_EQ_U64(tpprof_merge_drain(false), 0); // not forced: it waits (0.5 s)
    CHECK_EQ_U64(tpprof_w.expected[30], k);
    CHECK_EQ_U64(tpprof_merge_drain(true), 2);
    CHECK_STR_EQ(applied_since(from), "a8010 a8020");
    // Ticket k shows up after all: applied, though its stripe moved on.
    from = tpprof_w.order;
    put_alloc(late, 30, k, 600, 0x8000);
    CHECK_EQ_U64(tpprof_merge_drain(false), 1);
    CHECK_STR_EQ(applied_since(from), "a8000");
    CHECK_EQ_U64(tpprof_w.expected[30], (k + 3) & TPPROF_TICKET_MASK);
}

static void test_wrap_padding_is_stepped_over(void) {
    uint64_t from = tpprof_w.order;
    struct tpprof_thread *t = thread_new();
    uint32_t k = tpprof_w.expected[40];
    // 12 records of 5 words: the 13th does not fit in the ring's last 4.
    char want[1024] = "";
    size_t n = 0;
    for (uint32_t i = 0; i < 24; i++) {
        put_alloc(t, 40, k + i, 700, 0x9000 + 16 * i);
        n += (size_t)snprintf(want + n, sizeof want - n, "%sa%x", i ? " " : "", 0x9000 + 16 * i);
        if (i == 11) CHECK_EQ_U64(tpprof_merge_drain(false), 12); // make room for the second lap
    }
    CHECK_EQ_U64(tpprof_merge_drain(false), 12);
    CHECK_STR_EQ(applied_since(from), want);
    CHECK_MSG(atomic_load(&t->tail) > RING_WORDS, "the records went round the ring");
}

int main(void) {
    tpprof_merge_expect_current();
    RUN(test_one_stripe_follows_its_tickets_whatever_the_epochs);
    RUN(test_stripes_interleave_by_epoch_within_the_slack);
    RUN(test_equal_epochs_go_to_the_older_threads_ring_first);
    RUN(test_empty_rings_hold_nothing_up);
    RUN(test_observer_records_follow_their_tickets_across_threads);
    RUN(test_a_ticket_that_never_comes_is_given_up_on_when_forced);
    RUN(test_wrap_padding_is_stepped_over);
    return CHECK_EXIT_STATUS();
}
