/*
 * tests/alloc/test_caching_events.c - the caching allocator's stream events
 * (tp_caching_event_ops) on the CPU, with events this test completes by
 * hand: record_stream defers reuse until every event of the block has
 * completed, a failed query counts as completed, empty_cache and the
 * out-of-memory path wait for pending events, and annotate sees memory
 * become usable and stop being so in the right order.
 */
#include <stdlib.h>

#include "../check.h"
#include "tensorplay/tensorplay.h"

typedef struct ev {
    uint64_t stream;
    int state; /* 0 pending, 1 done, -1 broken */
    bool destroyed;
} ev;

static ev events[64];
static int nevents, nsyncs;

static void *rec(void *user, uint64_t stream) {
    (void)user;
    if (nevents == 64) return NULL;
    events[nevents] = (ev){.stream = stream};
    return &events[nevents++];
}
static int query(void *user, void *e) { (void)user; return ((ev *)e)->state; }
static void sync_ev(void *user, void *e) { (void)user; nsyncs++; ((ev *)e)->state = 1; }
static void destroy(void *user, void *e) { (void)user; ((ev *)e)->destroyed = true; }

static char log_buf[4096];
static void annotate(void *user, uint32_t action, uint64_t seg, uint64_t seg_size, uint64_t block,
                     uint64_t size) {
    (void)user, (void)seg, (void)seg_size, (void)block;
    static const char *names[] = {"?", "reserve", "release", "alloc", "free"};
    size_t n = strlen(log_buf);
    snprintf(log_buf + n, sizeof log_buf - n, "%s:%llu ", action <= 4 ? names[action] : "?",
             (unsigned long long)size);
}

static const tp_caching_event_ops ops = {
    .record = rec, .query = query, .synchronize = sync_ev, .destroy = destroy, .annotate = annotate,
};

static tp_caching_allocator *make(void) {
    nevents = nsyncs = 0;
    log_buf[0] = 0;
    tp_caching_allocator_config cfg;
    tp_caching_allocator_config_default(&cfg);
    return tp_caching_allocator_new_with_events(tp_allocator_cpu(), &cfg, &ops);
}

static void test_a_recorded_block_waits_for_every_event(void) {
    tp_caching_allocator *ca = make();
    tp_data_ptr a;
    CHECK_EQ(tp_caching_allocator_allocate(ca, 1000, 1, &a), TP_STATUS_OK);
    void *pa = a.ptr;
    CHECK_EQ(tp_caching_allocator_record_stream(ca, &a, 2), TP_STATUS_OK);
    CHECK_EQ(tp_caching_allocator_record_stream(ca, &a, 3), TP_STATUS_OK);
    CHECK_EQ(tp_caching_allocator_record_stream(ca, &a, 1), TP_STATUS_OK); /* its own: nothing */
    tp_data_ptr_clear(&a);
    CHECK_EQ(nevents, 2);
    CHECK(events[0].stream == 2 && events[1].stream == 3);
    CHECK_EQ(tp_caching_allocator_pending_frees(ca), 1);
    tp_data_ptr b;
    tp_caching_allocator_allocate(ca, 1000, 1, &b);
    CHECK(b.ptr != pa); /* both pending */
    events[0].state = 1;
    tp_data_ptr c;
    tp_caching_allocator_allocate(ca, 1000, 1, &c);
    CHECK(c.ptr != pa); /* one still pending */
    CHECK(events[0].destroyed && !events[1].destroyed);
    events[1].state = -1; /* a broken event must not pin memory */
    tp_data_ptr d;
    tp_caching_allocator_allocate(ca, 1000, 1, &d);
    CHECK(d.ptr == pa);
    CHECK_EQ(tp_caching_allocator_pending_frees(ca), 0);
    tp_data_ptr_clear(&b), tp_data_ptr_clear(&c), tp_data_ptr_clear(&d);
    tp_caching_allocator_destroy(ca);
}

static void test_stats_count_an_awaiting_block_active_not_allocated(void) {
    tp_caching_allocator *ca = make();
    tp_data_ptr a;
    tp_caching_allocator_allocate(ca, 4096, 0, &a);
    tp_caching_allocator_record_stream(ca, &a, 5);
    tp_data_ptr_clear(&a);
    tp_caching_allocator_stats st;
    tp_caching_allocator_get_stats(ca, &st);
    CHECK_EQ(st.allocation.current, 0);
    CHECK_EQ(st.allocated_bytes.current, 0);
    CHECK_EQ(st.active.current, 1);
    CHECK_EQ(st.active_bytes.current, 4096);
    tp_caching_snapshot *snap = tp_caching_allocator_snapshot(ca);
    CHECK(snap && snap->nsegments == 1 && snap->segments[0].blocks[0].awaiting_free &&
          !snap->segments[0].blocks[0].allocated);
    tp_caching_snapshot_free(snap);
    /* empty_cache waits for the event, then gives the segment back */
    tp_caching_allocator_empty_cache(ca);
    CHECK_EQ(nsyncs, 1);
    tp_caching_allocator_get_stats(ca, &st);
    CHECK_EQ(st.active.current, 0);
    CHECK_EQ(st.segment.current, 0);
    CHECK_STR(log_buf, "reserve:2097152 alloc:4096 free:4096 release:2097152 ");
    tp_caching_allocator_destroy(ca);
}

static void test_record_stream_refuses_what_it_cannot_track(void) {
    tp_caching_allocator *ca = make();
    tp_caching_allocator *plain = tp_caching_allocator_new(tp_allocator_cpu(), NULL);
    tp_data_ptr a, p;
    tp_caching_allocator_allocate(ca, 100, 0, &a);
    tp_caching_allocator_allocate(plain, 100, 0, &p);
    CHECK_EQ(tp_caching_allocator_record_stream(plain, &p, 1), TP_STATUS_INVALID_ARGUMENT);
    CHECK_STR(tp_last_error(), "record_stream: this caching allocator has no stream events");
    CHECK_EQ(tp_caching_allocator_record_stream(ca, &p, 1), TP_STATUS_INVALID_ARGUMENT);
    CHECK_STR(tp_last_error(), "record_stream: the memory is not a block of this caching allocator");
    tp_data_ptr cpu;
    tp_allocator_allocate(tp_allocator_cpu(), 64, &cpu);
    CHECK_EQ(tp_caching_allocator_record_stream(ca, &cpu, 1), TP_STATUS_INVALID_ARGUMENT);
    tp_caching_event_ops half = {.record = rec};
    CHECK(tp_caching_allocator_new_with_events(tp_allocator_cpu(), NULL, &half) == NULL);
    CHECK_STR(tp_last_error(), "caching allocator: event ops need all four functions");
    tp_data_ptr_clear(&cpu), tp_data_ptr_clear(&a), tp_data_ptr_clear(&p);
    tp_caching_allocator_destroy(plain);
    tp_caching_allocator_destroy(ca);
}

static void test_destroy_with_a_pending_block_waits_and_frees_it(void) {
    tp_caching_allocator *ca = make();
    tp_data_ptr a, b;
    tp_caching_allocator_allocate(ca, 100, 0, &a);
    tp_caching_allocator_allocate(ca, 100, 0, &b);
    tp_caching_allocator_record_stream(ca, &a, 9);
    tp_data_ptr_clear(&a);
    tp_caching_allocator_record_stream(ca, &b, 9);
    tp_caching_allocator_destroy(ca); /* waits for a's event; b still out */
    CHECK_EQ(nsyncs, 1);
    tp_data_ptr_clear(&b); /* after destroy: freed at once, and the allocator with it (ASan) */
    CHECK_EQ(nevents, 1);
}

int main(void) {
    RUN_TEST(test_a_recorded_block_waits_for_every_event);
    RUN_TEST(test_stats_count_an_awaiting_block_active_not_allocated);
    RUN_TEST(test_record_stream_refuses_what_it_cannot_track);
    RUN_TEST(test_destroy_with_a_pending_block_waits_and_frees_it);
    return CHECK_DONE();
}
