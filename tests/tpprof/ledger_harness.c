// ledger_harness.c: what test_storages.c and test_graph_ledger.c share to
// feed the writer's tensor ledger (src/tpprof/writer/ledger.c, graph.c):
// the writer's and the hooks' symbols those files need, stubbed; one ring
// whose records go straight to the writer's apply; the in-memory database
// and a one-value query; and observe.c fed runtime events in the runtime's
// order. No assertions here: the tests make them.
#include "ledger_harness.h"

#include <stdio.h>
#include <string.h>

#include "writer/state.h"
#include "writer/writer.h"
#include "base/base.h"
#include "record/format.h"
#include "record/order.h"
#include "record/rings.h"
#include "record/stacks.h"

// ---------------------------------------------------------------------------
// What ledger.c needs from the rest of the writer.

struct tpprof_wstate tpprof_w;
struct tpprof_config tpprof_cfg = {.depth = 32};
int kept_events;

uint32_t tpprof_writer_leaf_of(uint32_t sid) { return sid; } // stack ids pass through
void tpprof_writer_keep_event(struct tpprof_thread *t, uint64_t seq, int op, int kind, uint64_t time, uint64_t addr,
                              uint64_t size, uint32_t sid, uint64_t old) {
    (void)t, (void)seq, (void)op, (void)kind, (void)time, (void)addr, (void)size, (void)sid, (void)old;
    kept_events++;
}
// Threads 0-3 have tids 1000-1003 (tpprof_wstate_tid_of reads them).
static uint32_t tid_of[4] = {1000, 1001, 1002, 1003};
int64_t tpprof_writer_map_at(uint64_t addr) { // (no mappings here: writer.c keeps them)
    (void)addr;
    return -1;
}
// Ticks are ns + 5 here (the real calibration is writer.c's), capped like it.
uint64_t tpprof_writer_ticks_to_ns(uint64_t ticks, uint64_t batch_ns) {
    return ticks - 5 < batch_ns ? ticks - 5 : batch_ns;
}

// ---------------------------------------------------------------------------
// What observe.c needs from the hooks' side: one ring that hands each record
// straight to the writer's apply, and stacks named by the test.

_Atomic int tpprof_active = 1;
__thread int tpprof_guard;
__thread struct tpprof_thread *tpprof_self; // NULL: observe.c asks tpprof_thread_get
__thread struct tpprof_recent_allocs tpprof_recent; // the hooks' last allocations (set by the test)
struct tpprof_order_line tpprof_stripes[TPPROF_STRIPES];
struct tpprof_order_line tpprof_epoch;
uint64_t tpprof_t0_ns;
uint64_t tpprof_now_ns(void) { return 0; } // full mode's record times (unused here)
static uint64_t obs_ring[1024];
static struct tpprof_thread obs_thread = {.index = 2, .ring = obs_ring, .mask = 1023};
uint32_t site;        // the stack id the next capture returns
int captures, records;
uint64_t record_words; // of the records obs_drain applied

struct tpprof_thread *tpprof_thread_get(void) { return &obs_thread; }
_Atomic(struct tpprof_thread *) tpprof_threads = &obs_thread; // (the writer's list: this one ring)
uint32_t tpprof_capture(int max) {
    (void)max;
    captures++;
    return site;
}
bool tpprof_ring_wait(struct tpprof_thread *t, uint64_t words) {
    (void)t, (void)words;
    return false; // obs_drain empties the ring after every event
}
_Atomic int tpprof_drainer_napping; // (no drainer here: never napping)
// (store.c is not linked: the tables are written into the test's own
// database, which may hold an earlier write's rows, as a reopened file's.)
bool tpprof_store_reopened(void) { return true; }
bool tpprof_prefetchw;              // (the read prefetch: rings.c is not linked)
void tpprof_drainer_kick(void) {}

// Hands what observe.c put in the ring straight to the writer's apply.
void obs_drain(void) {
    struct tpprof_thread *t = &obs_thread;
    uint64_t tail = atomic_load(&t->tail);
    while (t->w_head < tail) {
        const uint64_t *r = &t->ring[t->w_head & t->mask];
        if ((r[0] >> 4 & 15) == TPPROF_OP_WRAP) {
            t->w_head += t->mask + 1 - (t->w_head & t->mask);
            continue;
        }
        records++;
        record_words += (uint64_t)tpprof_rec_words(r);
        tpprof_obs_apply(t, r, 1000000 + tpprof_hdr_ticket(r[0]), tpprof_hdr_ticket(r[0]));
        t->w_head += (uint64_t)tpprof_rec_words(r);
    }
    t->p_head = t->w_head;
}


// ---------------------------------------------------------------------------
// The database.

sqlite3 *db;

static void open_db(void) {
    sqlite3_open(":memory:", &db);
    sqlite3_exec(db,
                 "CREATE TABLE storages(id INTEGER PRIMARY KEY, data, nbytes, allocator, device, resizable, created_ns,"
                 " created_stack, last_release_ns, data_released_ns, freed_ns, strong, weak, block_address, block_size,"
                 " block_kind, block_freed_ns, at_peak, version_bumps);"
                 "CREATE TABLE storage_refs(storage_id, op, stack_id, tensor_id, count);"
                 "CREATE TABLE tensor_refs(tensor_id, op, stack_id, count);"
                 "CREATE TABLE tensors(id INTEGER PRIMARY KEY, storage_id, base_id, storage_offset, sizes, strides,"
                 " dtype, itemsize, created_ns, created_stack, freed_ns, version, at_peak);"
                 "CREATE TABLE refcount_sites(op, stack_id, count, PRIMARY KEY (op, stack_id));"
                 "CREATE TABLE storage_lifetimes(allocator PRIMARY KEY, count, live_ns_sum, live_ns_max,"
                 " release_delay_ns_sum, release_delay_ns_max, release_delay_count, live_count);"
                 "CREATE TABLE allocator_events(seq INTEGER PRIMARY KEY, time_ns, tid, allocator, action, device,"
                 " segment, segment_size, block, block_size, requested, stream, stack_id);"
                 "CREATE TABLE meta(key TEXT PRIMARY KEY, value);"
                 "CREATE TABLE graph_nodes(id INTEGER PRIMARY KEY, name, created_ns, created_stack, freed_ns,"
                 " backward_ran, retained, ran_ns);"
                 "CREATE TABLE graph_edges(node_id, next_id, leaf);"
                 "CREATE TABLE saved_tensors(node_id, slot, storage_id, tensor_id, saved_ns, released_ns,"
                 " PRIMARY KEY (node_id, slot));"
                 "CREATE TABLE tensor_grads(tensor_id INTEGER PRIMARY KEY, grad_id, grad_storage_id, set_ns);",
                 NULL, NULL, NULL);
}

long long q(const char *sql) {
    sqlite3_stmt *st;
    long long v = -1;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
        fprintf(stderr, "sql: %s: %s\n", sqlite3_errmsg(db), sql);
        return -2;
    }
    if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL) v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
}

// ---------------------------------------------------------------------------
// observe.c, fed runtime events.

// Runtime events, as libtensorplay sends them to the observer (found
// through observe.c's provider, as the runtime finds it).
const tp_observer *observer;

void obs_send(tp_obs_event *ev, uint32_t stack) {
    ev->struct_size = sizeof *ev;
    site = stack;
    observer->on_event(observer->user, ev);
    obs_drain();
}

void ev_created(uint64_t id, uint64_t nbytes, uint32_t stack) {
    tp_obs_event ev = {.kind = TP_OBS_STORAGE_CREATED,
                       .u.storage = {.storage_id = id, .data = 0, .nbytes = nbytes, .allocator = "cpu"}};
    obs_send(&ev, stack);
}

void ev_refcount(uint64_t id, uint32_t op, uint32_t strong, uint32_t weak, uint32_t stack) {
    tp_obs_event ev = {.kind = TP_OBS_STORAGE_REFCOUNT,
                       .u.refcount = {.storage_id = id, .op = op, .strong = strong, .weak = weak}};
    obs_send(&ev, stack);
}

void ev_storage(int kind, uint64_t id) {
    tp_obs_event ev = {.kind = (uint32_t)kind, .u.storage = {.storage_id = id}};
    obs_send(&ev, 77);
}

void ev_tensor(int kind, uint64_t id, uint64_t storage, uint32_t stack) {
    static const int64_t sizes[1] = {4}, strides[1] = {1};
    tp_obs_event ev = {.kind = (uint32_t)kind,
                       .u.tensor = {.tensor_id = id, .storage_id = storage, .ndim = 1, .sizes = sizes,
                                    .strides = strides, .itemsize = 4}};
    obs_send(&ev, stack);
}

// The hooks' record of an allocation this thread just made (the struct an
// event's `object` names), as hooks.c keeps it.
void remember_alloc(uint64_t addr, uint32_t sid) {
    uint32_t i = tpprof_recent.next++ & (TPPROF_RECENT - 1);
    tpprof_recent.addr[i] = ~addr;
    tpprof_recent.sid[i] = sid;
}

// ---------------------------------------------------------------------------

void ledger_harness_open(void) {
    tpprof_w.tid_of = tid_of;
    tpprof_w.captid_of = 4;
    open_db();
}
