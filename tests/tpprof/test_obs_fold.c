// test_obs_fold.c: short-lived views folded on the program thread
// (src/tpprof/record/observe.c, "Folded views"; the writer's side in
// writer/ledger.c, tpprof_obs_fold_collect): observe.c fed the runtime's
// fused events in the runtime's order while the thread owns the observer
// stripe, its records applied as the writer would, the tables written into
// an in-memory database. A folded view must count in refcount_sites as a
// written one does and leave storages, storage_refs and tensors as they
// were; a view that is leaked, passed to another thread, named by another
// event, or alive when the peak may move must be written in full.
// One scenario a run (the ledger is process-wide): test_obs_fold NAME.
// No preload: runs under ASan+UBSan too.
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>

#include "tensorplay/observer.h"
#include "store/store.h"
#include "writer/state.h"
#include "writer/writer.h"
#include "base/base.h"
#include "record/format.h"
#include "record/order.h"
#include "record/rings.h"
#include "ledger_harness.h"
#include "../check.h"

static const int64_t sizes[1] = {8}, strides[1] = {1};
static uint64_t next_struct = 0x100000;

// The address of a struct the runtime just allocated, with its stack (the
// hooks' record of it, which observe.c takes instead of an unwind).
static uint64_t alloc_struct(uint32_t stack) {
    uint64_t a = next_struct;
    next_struct += 0x100;
    remember_alloc(a, stack);
    return a;
}

// A new storage and its tensor adopting it (tp_empty, an op's result).
static void make(uint64_t storage, uint64_t tensor, uint64_t nbytes, uint32_t storage_stack, uint32_t tensor_stack) {
    uint64_t so = alloc_struct(storage_stack), to = alloc_struct(tensor_stack);
    tp_obs_storage st = {.storage_id = storage, .nbytes = nbytes, .allocator = "cpu"};
    tp_obs_tensor x = {.tensor_id = tensor, .storage_id = storage, .ndim = 1, .sizes = sizes, .strides = strides,
                       .itemsize = 4, .flags = TP_OBS_TENSOR_ADOPTED_REF};
    observer->on_tensor_new(observer->user, &st, so, &x, to);
    obs_drain();
}

// A view of `base` on `storage`, leaving the storage's strong count at `strong`.
static void view(uint64_t tensor, uint64_t storage, uint64_t base, uint32_t strong, uint32_t stack) {
    uint64_t o = alloc_struct(stack);
    tp_obs_tensor v = {.tensor_id = tensor, .storage_id = storage, .base_id = base, .storage_offset = 4, .ndim = 1,
                       .sizes = sizes, .strides = strides, .itemsize = 4};
    observer->on_tensor_retained(observer->user, &v, strong, 1, o);
    obs_drain();
}

// A tensor freed, leaving its storage's strong count at `strong`.
static void release(uint64_t tensor, uint64_t storage, uint32_t strong) {
    observer->on_tensor_released(observer->user, tensor, storage, 0, strong, 1,
                                 strong ? 0 : TP_OBS_RELEASED_DATA | TP_OBS_RELEASED_FREED);
    obs_drain();
}

static long long rc(int op, int stack) {
    char sql[128];
    snprintf(sql, sizeof sql, "SELECT count FROM refcount_sites WHERE op = %d AND stack_id = %d", op, stack);
    return q(sql);
}

static void write_tables(void) {
    tpprof_obs_fold_collect_all();
    CHECK_MSG(tpprof_store_tensors_put(db, true), "written: %s", sqlite3_errmsg(db));
}

// Storage 1 (64 bytes) with its tensor 2, the thread owning the stripe,
// and one iteration of the loop below written in full (the first storage
// 100's creation moves the peak; its tensor's free settles it). After this,
// iterations fold.
static struct tpprof_thread *me;
static uint64_t next_id = 100;

// One small op: a view of tensor 2 (stack 50), a result on a new storage of
// 32 bytes (stacks 60, 61), the result freed, then the view.
static void iteration(void) {
    uint64_t v = next_id++, s = next_id++, c = next_id++;
    view(v, 1, 2, 2, 50);
    make(s, c, 32, 60, 61);
    release(c, s, 0);
    release(v, 1, 1);
}

static void start(void) {
    ledger_harness_open();
    me = tpprof_thread_get();
    tpprof_self = me; // (the fused callbacks' fast path reads it)
    atomic_store(&tpprof_obs_owner, (uintptr_t)me);
    make(1, 2, 64, 10, 11);
    view(3, 1, 2, 2, 40); // finds it owns the stripe: written
    release(3, 1, 1);     // settles
    iteration();          // its result's storage moves the peak: written
}

// ---------------------------------------------------------------------------

// 1000 iterations: two records each (the result's storage, its release),
// and the tables as if every event had been written.
static void short_lived_views_fold_and_count_as_written(void) {
    start();
    int r0 = records;
    uint64_t first = next_id;
    for (int i = 0; i < 1000; i++) iteration();
    // No record for most iterations: a result's storage not timed (7 in 8,
    // observe.c "Timed lifetimes") is folded with its tensor, and a timed
    // one leaves two (its storage, its release); the first record of each
    // quarter of the ring takes the general way, which writes what is held
    // (this ring is 1024 words).
    CHECK_MSG(records - r0 < 600, "most iterations write nothing: %d records", records - r0);
    write_tables();
    CHECK_MSG(rc(1, 50) == 1001 && rc(2, 50) == 1001, "views' retains %lld and releases %lld at their stack",
              rc(1, 50), rc(2, 50));
    CHECK_MSG(rc(2, 61) == 1001, "results' releases under their tensor's stack: %lld", rc(2, 61));
    CHECK_MSG(rc(1, 40) == 1 && rc(2, 40) == 1, "the first view's");
    CHECK_MSG(q("SELECT count(*) FROM refcount_sites WHERE op = 2 AND stack_id = 60") == 0,
              "no release under the result storage's own stack");
    CHECK_MSG(q("SELECT strong FROM storages WHERE id = 1") == 1 &&
                  q("SELECT count(*) FROM storage_refs WHERE storage_id = 1") == 1 &&
                  q("SELECT tensor_id FROM storage_refs WHERE storage_id = 1 AND op = 0") == 2,
              "storage 1: strong 1, its one reference tensor 2's");
    char sql[160];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM tensors WHERE id >= %llu", (unsigned long long)first);
    CHECK_MSG(q(sql) == 0, "no folded tensor in tensors: %lld", q(sql));
    CHECK_MSG(q("SELECT count(*) FROM tensors WHERE id IN (2, 100, 102)") == 3,
              "tensor 2 (alive) and the first iteration's view and result (at the peak) kept");
    CHECK_MSG(q("SELECT count FROM storage_lifetimes WHERE allocator = 'cpu'") == 1001, "every result's data released");
    CHECK_MSG(tpprof_ledger.peak_bytes == 96, "the peak: storage 1 and one result: %lld",
              (long long)tpprof_ledger.peak_bytes);
}

// A view made and never freed: the end of the recording writes it
// (tpprof_obs_flush_held, as writer.c's finish does for its thread).
static void a_leaked_view_is_recorded_in_full(void) {
    start();
    iteration();
    view(500, 1, 2, 2, 70);
    int r0 = records;
    CHECK_MSG(atomic_load(&me->obs_nheld) == 1, "the view is held");
    tpprof_obs_flush_held(me);
    obs_drain();
    CHECK_MSG(records - r0 == 1, "written at the end: %d", records - r0);
    write_tables();
    CHECK_MSG(q("SELECT count(*) FROM tensors WHERE id = 500 AND freed_ns IS NULL AND created_stack = 70") == 1,
              "the leaked view is a tensors row");
    CHECK_MSG(q("SELECT tensor_id FROM storage_refs WHERE storage_id = 1 AND op = 1 AND stack_id = 70") == 500 &&
                  q("SELECT strong FROM storages WHERE id = 1") == 2,
              "it holds a retain of storage 1, strong 2");
    CHECK_MSG(rc(1, 70) == 1 && rc(2, 70) == -1, "one retain, no release at its stack");
}

// Another thread frees a view this thread holds: it takes the stripe and
// the held view, and writes the view before its release.
static struct tpprof_thread other = {.index = 3, .mask = 1023};
static uint64_t other_ring[1024];
static int other_records;

static void *other_thread(void *arg) {
    (void)arg;
    other.ring = other_ring;
    tpprof_self = &other;
    release(600, 1, 1);
    uint64_t tail = atomic_load(&other.tail);
    while (other.w_head < tail) { // its ring, applied as the writer would
        const uint64_t *r = &other.ring[other.w_head & other.mask];
        tpprof_obs_apply(&other, r, 2000000 + tpprof_hdr_ticket(r[0]), tpprof_hdr_ticket(r[0]));
        other.w_head += (uint64_t)tpprof_rec_words(r);
        other_records++;
    }
    return NULL;
}

static void a_view_freed_on_another_thread_is_recorded_in_full(void) {
    start();
    iteration();
    view(600, 1, 2, 2, 80);
    CHECK_MSG(atomic_load(&me->obs_nheld) == 1, "the view is held");
    pthread_t th;
    pthread_create(&th, NULL, other_thread, NULL);
    pthread_join(th, NULL);
    CHECK_MSG(other_records == 2, "the other thread wrote the view, then its release: %d", other_records);
    CHECK_MSG(atomic_load(&me->obs_nheld) == 0 && atomic_load(&tpprof_obs_owner) == TPPROF_OBS_CONTESTED,
              "taken from this thread, the stripe contested");
    write_tables();
    CHECK_MSG(rc(1, 80) == 1 && rc(2, 80) == 1, "its retain and release at its stack: %lld, %lld", rc(1, 80),
              rc(2, 80));
    CHECK_MSG(q("SELECT strong FROM storages WHERE id = 1") == 1 &&
                  q("SELECT count(*) FROM storage_refs WHERE storage_id = 1") == 1,
              "storage 1 back to its one reference");
    // This thread folds nothing now: its next view is written.
    int r0 = records;
    iteration();
    CHECK_MSG(records - r0 == 4, "nothing held once the stripe is contested: %d records", records - r0);
}

// A storage that may move the peak writes the held views first: a view
// alive at the new peak is in the tensors table.
static void a_view_alive_when_the_peak_moves_is_written(void) {
    start();
    iteration();
    view(700, 1, 2, 2, 90);
    CHECK_MSG(atomic_load(&me->obs_nheld) == 1, "the view is held");
    make(701, 702, 4096, 91, 92); // a new peak
    CHECK_MSG(atomic_load(&me->obs_nheld) == 0, "written before the storage");
    release(700, 1, 1);
    write_tables();
    CHECK_MSG(q("SELECT at_peak FROM tensors WHERE id = 700") == 1, "the view is in the peak");
    CHECK_MSG(tpprof_ledger.peak_bytes == 64 + 4096, "the peak: %lld", (long long)tpprof_ledger.peak_bytes);
    CHECK_MSG(rc(1, 90) == 1 && rc(2, 90) == 1, "counted once each");
}

// Any other event naming a held view (a handle taken on it,
// tp_tensor_retain) writes it first: its handle is the ledger's.
static void an_event_naming_a_held_view_writes_it_first(void) {
    start();
    iteration();
    view(800, 1, 2, 2, 95);
    tp_obs_event ev = {.kind = TP_OBS_TENSOR_REFCOUNT,
                       .u.tensor_ref = {.tensor_id = 800, .op = TP_OBS_REFOP_RETAIN, .count = 2}};
    obs_send(&ev, 96);
    CHECK_MSG(atomic_load(&me->obs_nheld) == 0, "written");
    write_tables();
    CHECK_MSG(q("SELECT count FROM tensor_refs WHERE tensor_id = 800 AND op = 1 AND stack_id = 96") == 1,
              "the handle taken on it is outstanding");
    CHECK_MSG(q("SELECT count(*) FROM tensors WHERE id = 800") == 1, "the view is a tensors row");
}

// Two views held on one storage, the older one freed first, the newer one
// leaked: the older is not folded while the newer one, whose record says
// strong 3, is held (folded, the writer would end at 3 where the storage
// is at 2).
static void views_freed_out_of_order_keep_their_storage_counts(void) {
    start();
    iteration();
    view(900, 1, 2, 2, 97);
    view(901, 1, 2, 3, 98);
    CHECK_MSG(atomic_load(&me->obs_nheld) == 2, "both held");
    release(900, 1, 2);
    tpprof_obs_flush_held(me); // the end of the recording
    obs_drain();
    write_tables();
    CHECK_MSG(q("SELECT strong FROM storages WHERE id = 1") == 2, "strong 2 at the end: %lld",
              q("SELECT strong FROM storages WHERE id = 1"));
    CHECK_MSG(rc(1, 97) == 1 && rc(2, 97) == 1 && rc(1, 98) == 1 && rc(2, 98) == -1, "each counted once");
    CHECK_MSG(q("SELECT count(*) FROM storage_refs WHERE storage_id = 1") == 2 &&
                  q("SELECT tensor_id FROM storage_refs WHERE storage_id = 1 AND op = 1") == 901,
              "tensor 2's reference and the leaked view's");
}

// The recording ends on another thread while this one, owning the stripe,
// holds a view and a new storage with its tensor, both alive (leaked):
// the final flush takes them from it (tpprof_obs_fold_collect_all).
static void *end_recording(void *arg) {
    (void)arg;
    write_tables(); // (tpprof_self: none here, as on a thread that only ends the recording)
    return NULL;
}

static void held_records_of_a_thread_running_at_the_end_are_recorded(void) {
    start();
    iteration();
    view(950, 1, 2, 2, 99);
    make(951, 952, 32, 60, 61);
    CHECK_MSG(atomic_load(&me->obs_nheld) == 2, "both held: %u", atomic_load(&me->obs_nheld));
    pthread_t th;
    pthread_create(&th, NULL, end_recording, NULL);
    pthread_join(th, NULL);
    CHECK_MSG(atomic_load(&me->obs_nheld) == 0 && atomic_load(&tpprof_obs_owner) == TPPROF_OBS_CONTESTED,
              "taken from this thread, the stripe contested");
    CHECK_MSG(q("SELECT count(*) FROM tensors WHERE id IN (950, 952) AND freed_ns IS NULL") == 2,
              "the view and the new tensor are tensors rows");
    CHECK_MSG(q("SELECT tensor_id FROM storage_refs WHERE storage_id = 1 AND op = 1 AND stack_id = 99") == 950 &&
                  q("SELECT tensor_id FROM storage_refs WHERE storage_id = 951 AND op = 0") == 952 &&
                  q("SELECT strong FROM storages WHERE id = 1") == 2 &&
                  q("SELECT nbytes FROM storages WHERE id = 951") == 32,
              "their references; storage 951 with its size");
}

int main(int argc, char **argv) {
    const char *name = argc > 1 ? argv[1] : "";
    observer = tp_observer_provide(TP_OBSERVER_ABI_VERSION);
    if (!observer) {
        fprintf(stderr, "no observer\n");
        return 1;
    }
    static const struct {
        const char *name;
        void (*fn)(void);
    } tests[] = {
        {"fold", short_lived_views_fold_and_count_as_written},
        {"leaked", a_leaked_view_is_recorded_in_full},
        {"other_thread", a_view_freed_on_another_thread_is_recorded_in_full},
        {"peak", a_view_alive_when_the_peak_moves_is_written},
        {"named", an_event_naming_a_held_view_writes_it_first},
        {"out_of_order", views_freed_out_of_order_keep_their_storage_counts},
        {"running_at_end", held_records_of_a_thread_running_at_the_end_are_recorded},
    };
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++)
        if (strcmp(tests[i].name, name) == 0) {
            tests[i].fn();
            return check_failures ? 1 : 0;
        }
    fprintf(stderr, "usage: test_obs_fold fold|leaked|other_thread|peak|named|out_of_order|running_at_end\n");
    return 2;
}
