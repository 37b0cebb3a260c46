// test_storages.c: the writer's tensor ledger (src/tpprof/writer/ledger.c;
// its tables written by store/tensors.c) fed
// hand-made observer records, as observe.c writes them, then written into
// an in-memory SQLite database: the pairing rules of the outstanding
// references, the peak bookkeeping, and the block behind a storage's data.
// Then observe.c itself, fed runtime events in the runtime's order, its
// records applied as the writer would: which events it folds together and
// which unwinds it skips, and that the ledger comes out the same.
// The set-up shared with test_graph_ledger.c (the autograd graph) is
// ledger_harness.c's.
// No preload: runs under ASan+UBSan too.
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

// ---------------------------------------------------------------------------
// Records, laid out as observe.c writes them.

static uint64_t seq = 1, now_ns = 100;
static struct tpprof_thread th0 = {.index = 0}, th1 = {.index = 1};

static void put_flags(struct tpprof_thread *t, int kind, int refop, uint64_t flags, uint32_t stack, uint64_t *w,
                      int n) {
    uint64_t order = seq++;
    w[0] = tpprof_hdr(order, TPPROF_OP_OBS, kind);
    w[1] = (uint64_t)n | (uint64_t)refop << 8 | flags | (uint64_t)stack << 32;
    tpprof_obs_apply(t, w, now_ns, order);
    now_ns += 10;
}

static void put(struct tpprof_thread *t, int kind, int refop, uint32_t stack, uint64_t *w, int n) {
    put_flags(t, kind, refop, 0, stack, w, n);
}

static void created(struct tpprof_thread *t, uint64_t id, uint64_t data, uint64_t nbytes, uint32_t stack) {
    uint64_t w[9] = {0, 0, id, data, nbytes, (uint64_t)1 << 33};
    memcpy(&w[6], "cpu", 4);
    put(t, TP_OBS_STORAGE_CREATED, 0, stack, w, 9);
}

static void refcount(struct tpprof_thread *t, uint64_t id, int op, uint32_t strong, uint32_t weak, uint32_t stack) {
    uint64_t w[4] = {0, 0, id, (uint64_t)strong | (uint64_t)weak << 32};
    put(t, TP_OBS_STORAGE_REFCOUNT, op, stack, w, 4);
}

// A tensor's free and the RELEASE of its reference, as observe.c sends them
// in aggregate mode: one record, no stack, flagged, the tensor after the counts.
static void tensor_release(struct tpprof_thread *t, uint64_t storage, uint64_t tensor, uint32_t strong,
                           uint32_t weak) {
    uint64_t w[5] = {0, 0, storage, (uint64_t)strong | (uint64_t)weak << 32, tensor};
    put_flags(t, TP_OBS_STORAGE_REFCOUNT, TP_OBS_REFOP_RELEASE, TPPROF_OBS_TENSOR_REF, 0, w, 5);
}

static void simple(struct tpprof_thread *t, int kind, uint64_t id) {
    uint64_t w[3] = {0, 0, id};
    put(t, kind, 0, 0, w, 3);
}

static void tensor(struct tpprof_thread *t, uint64_t id, uint64_t storage, uint64_t base, int64_t n, uint32_t stack) {
    uint64_t w[9] = {0, 0, id, storage, base, 0, 1 | (uint64_t)4 << 32, (uint64_t)n, 1};
    put(t, TP_OBS_TENSOR_CREATED, 0, stack, w, 9);
}

// A TENSOR_CREATED carrying the RETAIN made just before it, as observe.c
// sends it in aggregate mode: the retain's counts after the dims.
static void tensor_with_retain(struct tpprof_thread *t, uint64_t id, uint64_t storage, uint32_t strong,
                               uint32_t weak, uint32_t stack) {
    uint64_t w[10] = {0, 0, id, storage, 0, 0, 1 | (uint64_t)4 << 32, 4, 1, (uint64_t)strong | (uint64_t)weak << 32};
    put_flags(t, TP_OBS_TENSOR_CREATED, 0, TPPROF_OBS_WITH_RETAIN, stack, w, 10);
}

// A TENSOR_CREATED whose tensor adopted its storage's creation reference
// (TPPROF_OBS_ADOPTED): no RETAIN before it.
static void tensor_adopted(struct tpprof_thread *t, uint64_t id, uint64_t storage, uint32_t stack) {
    uint64_t w[9] = {0, 0, id, storage, 0, 0, 1 | (uint64_t)4 << 32, 4, 1};
    put_flags(t, TP_OBS_TENSOR_CREATED, 0, TPPROF_OBS_ADOPTED, stack, w, 9);
}

static void tensor_freed(struct tpprof_thread *t, uint64_t id, uint64_t storage) {
    uint64_t w[4] = {0, 0, id, storage};
    put(t, TP_OBS_TENSOR_FREED, 0, 0, w, 4);
}

// A tensor made on storage 20 in tensor_make's order: its struct allocated
// at stack 71, the retain of its reference, then TENSOR_CREATED, both
// naming the struct.
static void make_tensor(uint64_t id, uint32_t strong) {
    uint64_t addr = 0x10000 + id * 0x100;
    remember_alloc(addr, 71);
    tp_obs_event ev = {.kind = TP_OBS_STORAGE_REFCOUNT, .object = addr,
                       .u.refcount = {.storage_id = 20, .op = TP_OBS_REFOP_RETAIN, .strong = strong, .weak = 1}};
    obs_send(&ev, 99);
    static const int64_t sizes[1] = {4}, strides[1] = {1};
    ev = (tp_obs_event){.kind = TP_OBS_TENSOR_CREATED, .object = addr,
                        .u.tensor = {.tensor_id = id, .storage_id = 20, .ndim = 1, .sizes = sizes,
                                     .strides = strides, .itemsize = 4}};
    obs_send(&ev, 99);
}

// tp_tensor_release's order: TENSOR_FREED, then the release of its reference.
static void free_tensor(uint64_t id, uint32_t strong) {
    ev_tensor(TP_OBS_TENSOR_FREED, id, 20, 73);
    ev_refcount(20, TP_OBS_REFOP_RELEASE, strong, 1, 74);
}

static void test_observe_folds_tensor_events_and_skips_known_stacks(void) {
    observer = tp_observer_provide(TP_OBSERVER_ABI_VERSION);
    CHECK_MSG(observer != NULL, "the observer attaches");
    if (!observer) return;
    atomic_store(&tpprof_stripes[TPPROF_OBS_STRIPE].v, seq); // continues the hand-made records' numbering
    ev_created(20, 64, 70);
    CHECK_MSG(captures == 1 && records == 1, "storage created (no struct named): one unwind, one record");
    make_tensor(30, 2);
    CHECK_MSG(captures == 1 && records == 2, "a tensor and its retain: no unwind, one record (%d, %d)", captures,
          records);
    make_tensor(31, 3);
    CHECK_MSG(captures == 1 && records == 3, "second tensor: likewise (%d, %d)", captures, records);
    free_tensor(31, 2); // one record, no unwind
    CHECK_MSG(captures == 1 && records == 4, "a free: no unwind, one record (%d, %d)", captures, records);
    // A tensor's retain not followed by its tensor (another event comes
    // first) is sent on its own, before that event; a retain that names no
    // struct (the program's own) is unwound.
    remember_alloc(0x9000, 71);
    tp_obs_event held = {.kind = TP_OBS_STORAGE_REFCOUNT, .object = 0x9000,
                         .u.refcount = {.storage_id = 20, .op = TP_OBS_REFOP_RETAIN, .strong = 3, .weak = 1}};
    obs_send(&held, 99);
    CHECK_MSG(captures == 1 && records == 4, "the retain is held");
    ev_refcount(20, TP_OBS_REFOP_RETAIN, 4, 1, 75);
    CHECK_MSG(captures == 2 && records == 6, "both retains sent (%d, %d)", captures, records);
    make_tensor(32, 5);
    CHECK_MSG(captures == 2 && records == 7, "the next tensor: one record (%d, %d)", captures, records);
    free_tensor(32, 4);
    free_tensor(30, 3);
    CHECK_MSG(captures == 2 && records == 9, "two frees, two records (%d, %d)", captures, records);
    seq = atomic_load(&tpprof_stripes[TPPROF_OBS_STRIPE].v);

    CHECK_MSG(tpprof_store_tensors_put(db, true), "written: %s", sqlite3_errmsg(db));
    CHECK_MSG(q("SELECT strong FROM storages WHERE id = 20") == 3, "storage 20: strong 3 (creation + 2 retains)");
    CHECK_MSG(q("SELECT count(*) FROM storage_refs WHERE storage_id = 20") == 3 &&
              q("SELECT count FROM storage_refs WHERE storage_id = 20 AND op = 1 AND stack_id = 71 AND "
                "tensor_id = 0") == 1 &&
              q("SELECT count FROM storage_refs WHERE storage_id = 20 AND op = 1 AND stack_id = 75 AND "
                "tensor_id = 0") == 1 &&
              q("SELECT count FROM storage_refs WHERE storage_id = 20 AND op = 0 AND stack_id = 70") == 1,
          "left: the creation reference and the two unowned retains (sites 71 and 75)");
    CHECK_MSG(q("SELECT count(*) FROM tensors WHERE storage_id = 20") == 0, "the three tensors are freed");
    CHECK_MSG(q("SELECT count FROM refcount_sites WHERE op = 1 AND stack_id = 71") == 4 &&
              q("SELECT count FROM refcount_sites WHERE op = 2 AND stack_id = 71") == 3 &&
              q("SELECT count(*) FROM refcount_sites WHERE stack_id IN (0, 72, 73, 74)") == 0,
          "4 retains at site 71, the 3 tensors' releases under it, nothing under the skipped stacks");

    // The last release, leaving weak 1 (no weak holder), carries the
    // DATA_RELEASED that follows it and the FREED that comes after the
    // data's deleter ran.
    ev_refcount(20, TP_OBS_REFOP_RELEASE, 2, 1, 76);
    ev_refcount(20, TP_OBS_REFOP_RELEASE, 1, 1, 76);
    int before = records;
    ev_refcount(20, TP_OBS_REFOP_RELEASE, 0, 1, 76);
    ev_storage(TP_OBS_STORAGE_DATA_RELEASED, 20);
    ev_storage(TP_OBS_STORAGE_FREED, 20);
    CHECK_MSG(records == before + 1, "release to 0, data released, freed: one record (%d)", records - before);
    CHECK_MSG(tpprof_store_tensors_put(db, true), "written: %s", sqlite3_errmsg(db));
    CHECK_MSG(q("SELECT count FROM storage_lifetimes WHERE allocator = 'cpu'") == 5, "its lifetime is counted");
    CHECK_MSG(q("SELECT count(*) FROM storages WHERE id = 20 AND freed_ns IS NULL") == 0, "storage 20 is freed");
    CHECK_MSG(q("SELECT count(*) FROM storage_refs WHERE storage_id = 20") == 0, "no reference left");

    // With a weak holder the struct outlives the data: its FREED comes
    // later, on its own.
    ev_created(140, 16, 80);
    ev_refcount(140, TP_OBS_REFOP_WEAK_RETAIN, 1, 2, 81);
    before = records;
    ev_refcount(140, TP_OBS_REFOP_RELEASE, 0, 2, 82);
    ev_storage(TP_OBS_STORAGE_DATA_RELEASED, 140);
    CHECK_MSG(records == before + 1, "release to 0 with a weak holder: one record (%d)", records - before);
    CHECK_MSG(tpprof_store_tensors_put(db, true), "written: %s", sqlite3_errmsg(db));
    CHECK_MSG(q("SELECT data_released_ns IS NOT NULL AND last_release_ns IS NOT NULL AND freed_ns IS NULL AND strong = 0 "
            "FROM storages WHERE id = 140") == 1, "storage 140's data is released, its struct not yet");
    ev_refcount(140, TP_OBS_REFOP_WEAK_RELEASE, 0, 1, 82); // the strong group's own weak reference
    ev_refcount(140, TP_OBS_REFOP_WEAK_RELEASE, 0, 0, 83); // the holder lets go
    ev_storage(TP_OBS_STORAGE_FREED, 140);
    CHECK_MSG(records == before + 4, "the weak releases and the struct's free are records of their own (%d)",
          records - before);
    CHECK_MSG(tpprof_store_tensors_put(db, true), "written: %s", sqlite3_errmsg(db));
    CHECK_MSG(q("SELECT count(*) FROM storages WHERE id = 140 AND freed_ns IS NULL") == 0, "storage 140 is freed");
    seq = atomic_load(&tpprof_stripes[TPPROF_OBS_STRIPE].v);
}

// Events that name the struct their runtime call allocated (tp_obs_event's
// `object`) take that allocation's stack, from the hooks' last allocations:
// no unwind. The new tensor's retain travels inside its TENSOR_CREATED.
static void test_observe_takes_the_creating_calls_allocation_stack(void) {
    int c0 = captures, r0 = records;
    remember_alloc(0x5000, 90); // the storage struct
    tp_obs_event ev = {.kind = TP_OBS_STORAGE_CREATED, .object = 0x5000,
                       .u.storage = {.storage_id = 120, .nbytes = 8, .allocator = "cpu"}};
    obs_send(&ev, 99);
    CHECK_MSG(captures == c0 && records == r0 + 1, "storage created: no unwind (%d), one record (%d)", captures - c0,
          records - r0);
    remember_alloc(0x6000, 91); // the tensor struct, then its version counter
    remember_alloc(0x6100, 92);
    ev = (tp_obs_event){.kind = TP_OBS_STORAGE_REFCOUNT, .object = 0x6000,
                        .u.refcount = {.storage_id = 120, .op = TP_OBS_REFOP_RETAIN, .strong = 2, .weak = 1}};
    obs_send(&ev, 99);
    CHECK_MSG(records == r0 + 1, "the tensor's retain is held");
    static const int64_t sizes[1] = {2}, strides[1] = {1};
    ev = (tp_obs_event){.kind = TP_OBS_TENSOR_CREATED, .object = 0x6000,
                        .u.tensor = {.tensor_id = 121, .storage_id = 120, .ndim = 1, .sizes = sizes,
                                     .strides = strides, .itemsize = 4}};
    obs_send(&ev, 99);
    CHECK_MSG(captures == c0 && records == r0 + 2, "tensor and retain: no unwind (%d), one record (%d)",
          captures - c0, records - r0);
    // A struct this thread did not just allocate: unwound as before.
    ev = (tp_obs_event){.kind = TP_OBS_STORAGE_CREATED, .object = 0x7000,
                        .u.storage = {.storage_id = 122, .nbytes = 8, .allocator = "cpu"}};
    obs_send(&ev, 98);
    CHECK_MSG(captures == c0 + 1, "unknown struct: one unwind");
    // An event shorter than this ABI's is not one we can read: ignored.
    int r1 = records;
    ev = (tp_obs_event){.kind = TP_OBS_STORAGE_CREATED, .object = 0x5000,
                        .u.storage = {.storage_id = 123, .nbytes = 8, .allocator = "cpu"}};
    ev.struct_size = (uint32_t)offsetof(tp_obs_event, object);
    site = 97;
    observer->on_event(observer->user, &ev);
    obs_drain();
    CHECK_MSG(captures == c0 + 1 && records == r1, "short event: no unwind, no record");
    CHECK_MSG(tpprof_store_tensors_put(db, true), "written: %s", sqlite3_errmsg(db));
    CHECK_MSG(q("SELECT created_stack FROM storages WHERE id = 120") == 90, "storage 120 made at the struct's stack");
    CHECK_MSG(q("SELECT count FROM storage_refs WHERE storage_id = 120 AND op = 1 AND stack_id = 91 AND tensor_id = 121") ==
              1,
          "tensor 121's reference taken at the tensor struct's stack");
    CHECK_MSG(q("SELECT created_stack FROM storages WHERE id = 122") == 98, "the other at its unwound stack");
    CHECK_MSG(q("SELECT count(*) FROM storages WHERE id = 123") == 0, "the short event left nothing");
}

// A tensor that adopted its storage's creation reference (observer ABI 2):
// that reference becomes the tensor's, at the tensor's stack; the tensor's
// free pairs with it and counts under that stack; a tensor never freed is
// the holder of its storage, with no unmatched reference.
static void test_adopted_creation_reference_belongs_to_its_tensor(void) {
    created(&th0, 200, 0, 64, 100);
    tensor_adopted(&th0, 201, 200, 101);
    CHECK_MSG(tpprof_store_tensors_put(db, true), "written: %s", sqlite3_errmsg(db));
    CHECK_MSG(q("SELECT count(*) FROM storage_refs WHERE storage_id = 200") == 1 &&
              q("SELECT count(*) FROM storage_refs WHERE storage_id = 200 AND op = 0 AND stack_id = 101 AND "
                "tensor_id = 201 AND count = 1") == 1,
          "storage 200's one reference: the creation reference, tensor 201's, at its stack");
    CHECK_MSG(q("SELECT strong FROM storages WHERE id = 200") == 1, "strong 1: nothing was retained");
    CHECK_MSG(q("SELECT created_stack FROM tensors WHERE id = 201") == 101 &&
              q("SELECT created_stack FROM storages WHERE id = 200") == 100,
          "the tensor and the storage keep their own stacks");
    CHECK_MSG(q("SELECT count(*) FROM refcount_sites WHERE stack_id IN (100, 101)") == 0, "no refcount change yet");
    tensor_release(&th0, 200, 201, 0, 1);
    simple(&th0, TP_OBS_STORAGE_DATA_RELEASED, 200);
    simple(&th0, TP_OBS_STORAGE_FREED, 200);
    CHECK_MSG(tpprof_store_tensors_put(db, true), "written: %s", sqlite3_errmsg(db));
    CHECK_MSG(q("SELECT count FROM refcount_sites WHERE op = 2 AND stack_id = 101") == 1 &&
              q("SELECT count(*) FROM refcount_sites WHERE stack_id IN (0, 100)") == 0,
          "its one release counts under the tensor's stack");
    CHECK_MSG(q("SELECT count(*) FROM storage_refs WHERE storage_id = 200") == 0 &&
              q("SELECT count(*) FROM storages WHERE id = 200 AND freed_ns IS NULL") == 0,
          "storage 200 is gone with no reference left");

    // Another storage's release does not take a reference of the tensor's:
    // an unowned release cancels the unowned retain, the tensor keeps its own.
    created(&th1, 210, 0, 64, 102);
    tensor_adopted(&th1, 211, 210, 103);
    refcount(&th0, 210, TP_OBS_REFOP_RETAIN, 2, 1, 104); // a cache elsewhere
    refcount(&th0, 210, TP_OBS_REFOP_RELEASE, 1, 1, 105); // and its release
    // A tensor whose stack is unknown keeps the storage's creation stack.
    created(&th1, 220, 0, 64, 106);
    tensor_adopted(&th1, 221, 220, 0);
    CHECK_MSG(tpprof_store_tensors_put(db, true), "written: %s", sqlite3_errmsg(db));
    CHECK_MSG(q("SELECT count(*) FROM storage_refs WHERE storage_id = 210") == 1 &&
              q("SELECT tensor_id FROM storage_refs WHERE storage_id = 210 AND op = 0 AND stack_id = 103") == 211,
          "tensor 211, never freed, holds storage 210 at its own stack");
    CHECK_MSG(q("SELECT count(*) FROM storage_refs WHERE storage_id IN (210, 220) AND tensor_id = 0") == 0,
          "no unmatched reference on either");
    CHECK_MSG(q("SELECT tensor_id FROM storage_refs WHERE storage_id = 220 AND op = 0 AND stack_id = 106") == 221,
          "tensor 221's reference at the storage's creation stack");
}

// observe.c passes the adoption on: the tensor's record is flagged, takes
// the stack of its struct's allocation (no unwind), and the ledger gives
// the creation reference to the tensor.
static void test_observe_passes_on_an_adopted_reference(void) {
    int c0 = captures, r0 = records;
    remember_alloc(0x8000, 110); // the storage struct
    tp_obs_event ev = {.kind = TP_OBS_STORAGE_CREATED, .object = 0x8000,
                       .u.storage = {.storage_id = 230, .nbytes = 8, .allocator = "cpu"}};
    obs_send(&ev, 99);
    remember_alloc(0x9000, 111); // the tensor struct
    static const int64_t sizes[1] = {2}, strides[1] = {1};
    ev = (tp_obs_event){.kind = TP_OBS_TENSOR_CREATED, .object = 0x9000,
                        .u.tensor = {.tensor_id = 231, .storage_id = 230, .ndim = 1, .sizes = sizes,
                                     .strides = strides, .itemsize = 4, .flags = TP_OBS_TENSOR_ADOPTED_REF}};
    obs_send(&ev, 99);
    CHECK_MSG(captures == c0 && records == r0 + 2, "storage and adopting tensor: no unwind (%d), two records (%d)",
          captures - c0, records - r0);
    CHECK_MSG(tpprof_store_tensors_put(db, true), "written: %s", sqlite3_errmsg(db));
    CHECK_MSG(q("SELECT count(*) FROM storage_refs WHERE storage_id = 230") == 1 &&
              q("SELECT tensor_id FROM storage_refs WHERE storage_id = 230 AND op = 0 AND stack_id = 111") == 231,
          "the creation reference is tensor 231's, at the tensor struct's stack");
    CHECK_MSG(q("SELECT created_stack FROM tensors WHERE id = 231") == 111, "tensor 231 made at its struct's stack");
    // tp_tensor_release's order: TENSOR_FREED, the release to 0, data, struct.
    ev_tensor(TP_OBS_TENSOR_FREED, 231, 230, 112);
    ev_refcount(230, TP_OBS_REFOP_RELEASE, 0, 1, 113);
    ev_storage(TP_OBS_STORAGE_DATA_RELEASED, 230);
    ev_storage(TP_OBS_STORAGE_FREED, 230);
    CHECK_MSG(captures == c0 && records == r0 + 3, "the free: one record, no unwind (%d, %d)", captures - c0,
          records - r0);
    CHECK_MSG(tpprof_store_tensors_put(db, true), "written: %s", sqlite3_errmsg(db));
    CHECK_MSG(q("SELECT count FROM refcount_sites WHERE op = 2 AND stack_id = 111") == 1 &&
              q("SELECT count(*) FROM refcount_sites WHERE stack_id IN (110, 112, 113)") == 0,
          "the release counts under the tensor's stack");
    CHECK_MSG(q("SELECT count(*) FROM storage_refs WHERE storage_id = 230") == 0 &&
              q("SELECT count(*) FROM storages WHERE id = 230 AND freed_ns IS NULL") == 0,
          "storage 230 is gone with no reference left");
}

// The observer ABI's fused forms (a runtime that makes one call where it
// made two to four): each comes in as one record, with no unwind when the
// structs are known, and leaves the ledger as the separate events did
// (test_observe_passes_on_an_adopted_reference, above, sends those).
static void test_observe_fused_forms_keep_the_same_ledger(void) {
    if (!observer || !observer->on_tensor_new || !observer->on_tensor_retained || !observer->on_tensor_released) {
        CHECK_MSG(false, "the observer takes the fused forms");
        return;
    }
    int c0 = captures, r0 = records;
    static const int64_t sizes[2] = {2, 3}, strides[2] = {3, 1};
    remember_alloc(0xa000, 120); // the storage struct
    remember_alloc(0xb000, 121); // the tensor struct
    tp_obs_storage st = {.storage_id = 240, .data = 0, .nbytes = 24, .allocator = "cpu", .resizable = 1};
    tp_obs_tensor x = {.tensor_id = 241, .storage_id = 240, .ndim = 2, .sizes = sizes, .strides = strides,
                       .itemsize = 4, .dtype = 0, .flags = TP_OBS_TENSOR_ADOPTED_REF};
    observer->on_tensor_new(observer->user, &st, 0xa000, &x, 0xb000);
    obs_drain();
    CHECK_MSG(captures == c0 && records == r0 + 1, "a new storage and its tensor: no unwind (%d), one record (%d)",
          captures - c0, records - r0);
    // A view of it: its retain and its creation, one call.
    remember_alloc(0xc000, 122);
    tp_obs_tensor v = {.tensor_id = 242, .storage_id = 240, .base_id = 241, .storage_offset = 3, .ndim = 1,
                       .sizes = sizes + 1, .strides = strides + 1, .itemsize = 4};
    observer->on_tensor_retained(observer->user, &v, 2, 1, 0xc000);
    obs_drain();
    CHECK_MSG(captures == c0 && records == r0 + 2, "a view: no unwind (%d), one record (%d)", captures - c0,
          records - r0);
    CHECK_MSG(tpprof_store_tensors_put(db, true), "written: %s", sqlite3_errmsg(db));
    CHECK_MSG(q("SELECT created_stack FROM storages WHERE id = 240") == 120 &&
              q("SELECT resizable FROM storages WHERE id = 240") == 1 &&
              q("SELECT nbytes FROM storages WHERE id = 240") == 24,
          "storage 240 made at its struct's stack, with its fields");
    CHECK_MSG(q("SELECT created_stack FROM tensors WHERE id = 241") == 120 + 1 &&
              q("SELECT count(*) FROM tensors WHERE id = 241 AND sizes = '[2, 3]' AND strides = '[3, 1]'") == 1,
          "tensor 241 at its struct's stack, with its geometry");
    CHECK_MSG(q("SELECT tensor_id FROM storage_refs WHERE storage_id = 240 AND op = 0 AND stack_id = 121") == 241 &&
              q("SELECT tensor_id FROM storage_refs WHERE storage_id = 240 AND op = 1 AND stack_id = 122") == 242 &&
              q("SELECT count(*) FROM storage_refs WHERE storage_id = 240") == 2,
          "the creation reference is tensor 241's, the view's retain the view's");
    CHECK_MSG(q("SELECT strong FROM storages WHERE id = 240") == 2 &&
              q("SELECT base_id FROM tensors WHERE id = 242") == 241 &&
              q("SELECT storage_offset FROM tensors WHERE id = 242") == 3,
          "strong 2; the view's base and offset");
    // Freeing both: each free is one call and one record; the last implies
    // the data's release and the struct's free.
    observer->on_tensor_released(observer->user, 242, 240, 241, 1, 1, 0);
    observer->on_tensor_released(observer->user, 241, 240, 0, 0, 1, TP_OBS_RELEASED_DATA | TP_OBS_RELEASED_FREED);
    obs_drain();
    CHECK_MSG(captures == c0 && records == r0 + 4, "two frees: no unwind (%d), two records (%d)", captures - c0,
          records - r0);
    CHECK_MSG(tpprof_store_tensors_put(db, true), "written: %s", sqlite3_errmsg(db));
    CHECK_MSG(q("SELECT count FROM refcount_sites WHERE op = 2 AND stack_id = 122") == 1 &&
              q("SELECT count FROM refcount_sites WHERE op = 2 AND stack_id = 121") == 1,
          "each release counts under its tensor's reference's stack");
    CHECK_MSG(q("SELECT count(*) FROM storage_refs WHERE storage_id = 240") == 0 &&
              q("SELECT count(*) FROM storages WHERE id = 240 AND freed_ns IS NULL") == 0 &&
              q("SELECT count(*) FROM tensors WHERE id IN (241, 242)") == 0,
          "storage 240 is gone with no reference left, and its tensors");
}

// A storage's allocator name travels once per run of storages from it on a
// thread (TPPROF_OBS_SAME_NAME after that): new storages of "cpu", "cpu",
// "arena", none (borrowed), "arena", "cpu", some with a tensor (the fused
// form), some alone, each named right; and two rings taking turns each
// keep their own last name.
static void test_allocator_names_travel_once_per_run(void) {
    static const char cpu[] = "cpu", arena[] = "arena"; // (allocators are told apart by the pointer)
    static const int64_t sizes[1] = {4}, strides[1] = {1};
    const char *names[] = {cpu, cpu, arena, NULL, arena, cpu, cpu};
    int n = (int)(sizeof names / sizeof names[0]);
    bool with_tensor[] = {true, true, false, true, true, false, true};
    bool travels[] = {true, false, true, false, false, true, false}; // (none leaves the last name as it was)
    for (int i = 0; i < n; i++) {
        uint64_t id = 900 + 2 * (uint64_t)i, w0 = record_words;
        tp_obs_storage st = {.storage_id = id, .nbytes = 8, .allocator = names[i]};
        if (with_tensor[i]) {
            remember_alloc(0xd000 + id * 0x100, 130); // the storage struct
            remember_alloc(0xd080 + id * 0x100, 131); // the tensor struct
            tp_obs_tensor x = {.tensor_id = id + 1, .storage_id = id, .ndim = 1, .sizes = sizes, .strides = strides,
                               .itemsize = 4, .flags = TP_OBS_TENSOR_ADOPTED_REF};
            observer->on_tensor_new(observer->user, &st, 0xd000 + id * 0x100, &x, 0xd080 + id * 0x100);
            obs_drain();
        } else {
            tp_obs_event ev = {.kind = TP_OBS_STORAGE_CREATED, .u.storage = st};
            obs_send(&ev, 132);
        }
        // Words: 2 + 4 of the storage, 3 of its name where it travels, 8
        // of its tensor (its stack, id, storage, base, offset and shape),
        // and a tick (the first 64 of an allocator are timed).
        uint64_t words = 6 + (travels[i] ? 3 : 0) + (with_tensor[i] ? 8 : 0) + 1;
        CHECK_MSG(record_words - w0 == words, "storage %d (%s): %llu words, %llu expected", i,
              names[i] ? names[i] : "none", (unsigned long long)(record_words - w0), (unsigned long long)words);
    }
    CHECK_MSG(tpprof_store_tensors_put(db, true), "written: %s", sqlite3_errmsg(db));
    for (int i = 0; i < n; i++) {
        char sql[160];
        snprintf(sql, sizeof sql, "SELECT count(*) FROM storages WHERE id = %d AND allocator IS %s%s%s", 900 + 2 * i,
                 names[i] ? "'" : "", names[i] ? names[i] : "NULL", names[i] ? "'" : "");
        CHECK_MSG(q(sql) == 1, "storage %d is %s's", 900 + 2 * i, names[i] ? names[i] : "no allocator");
    }
    CHECK_MSG(q("SELECT count(*) FROM tensors WHERE id = 901 AND sizes = '[4]'") == 1 &&
              q("SELECT count(*) FROM tensors WHERE id = 913 AND sizes = '[4]'") == 1,
          "the tensors after a name, and after none, read right");
    // A tensor that is not plain on its new storage (an offset) takes the
    // full layout: 8 words, not 4.
    static const int64_t sizes2[2] = {2, 3}, strides2[2] = {3, 1};
    remember_alloc(0xe000, 133);
    remember_alloc(0xe100, 134);
    tp_obs_storage st = {.storage_id = 920, .nbytes = 64, .allocator = cpu};
    tp_obs_tensor x = {.tensor_id = 921, .storage_id = 920, .storage_offset = 5, .ndim = 2, .sizes = sizes2,
                       .strides = strides2, .itemsize = 4, .flags = TP_OBS_TENSOR_ADOPTED_REF};
    uint64_t w0 = record_words;
    observer->on_tensor_new(observer->user, &st, 0xe000, &x, 0xe100);
    obs_drain();
    CHECK_MSG(record_words - w0 == 6 + 1 + 9 + 1, "an offset tensor on a new storage: %llu words",
          (unsigned long long)(record_words - w0));
    CHECK_MSG(tpprof_store_tensors_put(db, true), "written: %s", sqlite3_errmsg(db));
    CHECK_MSG(q("SELECT count(*) FROM tensors WHERE id = 921 AND storage_id = 920 AND storage_offset = 5 AND sizes = "
            "'[2, 3]' AND strides = '[3, 1]' AND created_stack = 134") == 1,
          "its tensor reads right");
    // Two rings taking turns, as the writer gets them.
    uint64_t w[9] = {0, 0, 950, 0, 8, (uint64_t)1 << 33};
    memcpy(&w[6], "left", 5);
    put(&th0, TP_OBS_STORAGE_CREATED, 0, 140, w, 9);
    uint64_t v[9] = {0, 0, 951, 0, 8, (uint64_t)1 << 33};
    memcpy(&v[6], "right", 6);
    put(&th1, TP_OBS_STORAGE_CREATED, 0, 141, v, 9);
    uint64_t same0[6] = {0, 0, 952, 0, 8, (uint64_t)1 << 33}, same1[6] = {0, 0, 953, 0, 8, (uint64_t)1 << 33};
    put_flags(&th1, TP_OBS_STORAGE_CREATED, 0, TPPROF_OBS_SAME_NAME, 142, same1, 6);
    put_flags(&th0, TP_OBS_STORAGE_CREATED, 0, TPPROF_OBS_SAME_NAME, 143, same0, 6);
    CHECK_MSG(tpprof_store_tensors_put(db, true), "written: %s", sqlite3_errmsg(db));
    CHECK_MSG(q("SELECT count(*) FROM storages WHERE id IN (950, 952) AND allocator = 'left'") == 2 &&
              q("SELECT count(*) FROM storages WHERE id IN (951, 953) AND allocator = 'right'") == 2,
          "each ring's storages without a name are its last name's");
}

// A tensor whose id is not above its storage's (the runtime's one counter
// makes that unusual, never wrong): its creation and release take the full
// layouts (no delta to pack), and read the same.
static void test_a_tensor_older_than_its_storage_reads_the_same(void) {
    static const int64_t sizes[1] = {8}, strides[1] = {1};
    remember_alloc(0xf000, 150);
    remember_alloc(0xf100, 151);
    tp_obs_storage st = {.storage_id = 970, .nbytes = 32, .allocator = "cpu"};
    tp_obs_tensor x = {.tensor_id = 960, .storage_id = 970, .ndim = 1, .sizes = sizes, .strides = strides,
                       .itemsize = 4, .flags = TP_OBS_TENSOR_ADOPTED_REF};
    uint64_t w0 = record_words;
    observer->on_tensor_new(observer->user, &st, 0xf000, &x, 0xf100);
    obs_drain();
    uint64_t made = record_words - w0;
    w0 = record_words;
    observer->on_tensor_released(observer->user, 960, 970, 0, 0, 1, TP_OBS_RELEASED_DATA | TP_OBS_RELEASED_FREED);
    obs_drain();
    uint64_t released = record_words - w0;
    CHECK_MSG(made >= 6 + 1 + 7 && released == 5 + 1, "full layouts: %llu words made, %llu released",
          (unsigned long long)made, (unsigned long long)released);
    CHECK_MSG(tpprof_store_tensors_put(db, true), "written: %s", sqlite3_errmsg(db));
    CHECK_MSG(q("SELECT count FROM refcount_sites WHERE op = 2 AND stack_id = 151") == 1 &&
              q("SELECT count(*) FROM storages WHERE id = 970") == 0 &&
              q("SELECT count(*) FROM tensors WHERE id = 960") == 0,
          "its release counts under its reference's stack, and both are gone");
}

// Aggregate mode: a storage's creation and data release carry ticks taken
// in the event (TPPROF_OBS_TICKS, the last payload word), so its lifetime is
// not rounded to the merge times the records came in.
static void test_ticks_time_storage_lifetimes(void) {
    now_ns = 1000000; // merge times, later than every tick below
    uint64_t c[10] = {0, 0, 150, 0, 64, (uint64_t)1 << 33, 0, 0, 0, 505};
    memcpy(&c[6], "ticked", 7);
    put_flags(&th0, TP_OBS_STORAGE_CREATED, 0, TPPROF_OBS_TICKS, 90, c, 10);
    uint64_t r[5] = {0, 0, 150, (uint64_t)1 << 32, 1205}; // strong 0, weak 1
    put_flags(&th0, TP_OBS_STORAGE_REFCOUNT, TP_OBS_REFOP_RELEASE,
              TPPROF_OBS_DATA_RELEASED | TPPROF_OBS_FREED | TPPROF_OBS_TICKS, 91, r, 5);
    CHECK_MSG(tpprof_store_tensors_put(db, true), "written: %s", sqlite3_errmsg(db));
    CHECK_MSG(q("SELECT count FROM storage_lifetimes WHERE allocator = 'ticked'") == 1 &&
              q("SELECT live_ns_sum FROM storage_lifetimes WHERE allocator = 'ticked'") == 700 &&
              q("SELECT live_ns_max FROM storage_lifetimes WHERE allocator = 'ticked'") == 700,
          "lifetime from the ticks: 1200 - 500 ns (%lld)",
          q("SELECT live_ns_sum FROM storage_lifetimes WHERE allocator = 'ticked'"));
    // A tick past its record's merge time (a calibration error) is capped.
    uint64_t c2[10] = {0, 0, 151, 0, 64, (uint64_t)1 << 33, 0, 0, 0, 5000005};
    memcpy(&c2[6], "ticked", 7);
    uint64_t batch = now_ns;
    put_flags(&th0, TP_OBS_STORAGE_CREATED, 0, TPPROF_OBS_TICKS, 90, c2, 10);
    CHECK_MSG(tpprof_store_tensors_put(db, true), "written: %s", sqlite3_errmsg(db));
    CHECK_MSG(q("SELECT created_ns FROM storages WHERE id = 151") == (long long)batch, "capped at the merge time");
}

// Thousands of storages and tensors alive at once, on as many blocks: more
// than the ledger's direct-mapped index holds, so some ids and block
// addresses share an entry. Each is still found, paired and written, and
// each storage sees its own block's free.
// Whether observe.c times storage id's lifetime when it is small (a hash
// of the id picks 1 in 8: observe.c, "Timed lifetimes").
static bool small_id_timed(uint64_t id) { return (id * 0x9E3779B97F4A7C15ULL) >> 61 == 0; }

// One storage of allocator `name` made and dropped through observe.c, in the
// runtime's order; returns whether storage_lifetimes counted it (count up
// by one) and as timed (*timed: live_count up by one).
static bool made_and_dropped(uint64_t id, uint64_t nbytes, const char *name, bool *timed) {
    char sql[2][160];
    snprintf(sql[0], sizeof sql[0], "SELECT coalesce(sum(count), 0) FROM storage_lifetimes WHERE allocator = '%s'", name);
    snprintf(sql[1], sizeof sql[1], "SELECT coalesce(sum(live_count), 0) FROM storage_lifetimes WHERE allocator = '%s'",
             name);
    int64_t count0 = q(sql[0]), live0 = q(sql[1]);
    tp_obs_event ev = {.kind = TP_OBS_STORAGE_CREATED,
                       .u.storage = {.storage_id = id, .nbytes = nbytes, .allocator = name}};
    obs_send(&ev, 60);
    ev_refcount(id, TP_OBS_REFOP_RELEASE, 0, 1, 61);
    ev_storage(TP_OBS_STORAGE_DATA_RELEASED, id);
    ev_storage(TP_OBS_STORAGE_FREED, id);
    CHECK_MSG(tpprof_store_tensors_put(db, true), "written: %s", sqlite3_errmsg(db));
    *timed = q(sql[1]) == live0 + 1;
    return q(sql[0]) == count0 + 1;
}

// Every storage of 64 KiB or more has its lifetime timed, and the first 64
// a thread makes of each allocator; of the rest those whose id hashes into
// 1 in 8, and with TPPROF_LIFETIMES=all every one. An untimed one is still
// counted.
static void test_observe_times_big_storages_and_one_in_eight_small(void) {
    static const char name[] = "sampled"; // (one pointer: how allocators are told apart)
    uint64_t id = 300;
    bool timed, all = true;
    for (int i = 0; i < 64; i++) {
        CHECK_MSG(made_and_dropped(id++, 4096, name, &timed), "counted");
        all &= timed;
    }
    CHECK_MSG(all, "the first 64 storages of an allocator are all timed");
    while (small_id_timed(id)) id++;
    CHECK_MSG(made_and_dropped(id++, 4096, name, &timed) && !timed, "the 65th, its id not picked: counted, not timed");
    while (!small_id_timed(id)) id++;
    CHECK_MSG(made_and_dropped(id++, 4096, name, &timed) && timed, "one whose id is picked: timed");
    while (small_id_timed(id)) id++;
    CHECK_MSG(made_and_dropped(id++, 64 << 10, name, &timed) && timed, "64 KiB, its id not picked: timed all the same");
    tpprof_cfg.lifetimes_all = true;
    while (small_id_timed(id)) id++;
    CHECK_MSG(made_and_dropped(id++, 16, name, &timed) && timed, "TPPROF_LIFETIMES=all: one not picked is timed too");
    tpprof_cfg.lifetimes_all = false;
    int picked = 0;
    for (int i = 0; i < 800; i++) {
        made_and_dropped(id++, 64, name, &timed);
        picked += timed;
    }
    CHECK_MSG(picked >= 800 / 16 && picked <= 800 / 4, "of 800 more, about 1 in 8 timed (%d)", picked);
}

// A storage whose data release is timed (its ticks) and whose block is
// freed later: the row puts the block's free the merge-measured delay after
// the exact release, not at the merge's time (whose lag, ms, read as a
// delay there).
static void test_block_free_after_a_timed_release_is_its_delay_after_it(void) {
    const uint64_t addr = 0x50000000;
    bool existed;
    struct tpprof_block *b = tpprof_live_insert(&tpprof_w.live, addr, &existed);
    b->size = 64;
    b->site = 0;
    now_ns = 9000000;
    uint64_t c[10] = {0, 0, 170, addr, 64, (uint64_t)1 << 33, 0, 0, 0, 8000005}; // made at 8 ms (ticks - 5)
    memcpy(&c[6], "lagged", 7);
    put_flags(&th0, TP_OBS_STORAGE_CREATED, 0, TPPROF_OBS_TICKS, 90, c, 10);
    uint64_t release_merge = now_ns;
    uint64_t r[5] = {0, 0, 170, (uint64_t)1 << 32, 8500005}; // strong 0, weak 1; released at 8.5 ms
    put_flags(&th0, TP_OBS_STORAGE_REFCOUNT, TP_OBS_REFOP_RELEASE, TPPROF_OBS_DATA_RELEASED | TPPROF_OBS_TICKS, 91, r,
              5);
    struct tpprof_block out;
    if (tpprof_live_remove(&tpprof_w.live, addr, &out) && out.backs) tpprof_obs_block_freed(addr, release_merge + 2000);
    CHECK_MSG(tpprof_store_tensors_put(db, true), "written: %s", sqlite3_errmsg(db));
    CHECK_MSG(q("SELECT data_released_ns FROM storages WHERE id = 170") == 8500000, "released at its ticks' time");
    CHECK_MSG(q("SELECT block_freed_ns - data_released_ns FROM storages WHERE id = 170") == 2000,
          "its block freed 2 us after (%lld)", q("SELECT block_freed_ns - data_released_ns FROM storages WHERE id = 170"));
    CHECK_MSG(q("SELECT release_delay_ns_max FROM storage_lifetimes WHERE allocator = 'lagged'") == 2000,
          "the table's delay: the same");
}

// An untimed storage (its creation at the merge's time) counts in the
// live maximum only when its data release is timed and that puts it at
// 10 ms or more: a lower bound of what it lived. Two merge times do not
// count, however far apart (a slow drain between them is no lifetime).
static void untimed_made_and_dropped(uint64_t id, uint64_t made_merge, uint64_t dropped_merge, uint64_t dropped_at) {
    now_ns = made_merge;
    uint64_t c[9] = {0, 0, id, 0, 64, (uint64_t)1 << 33};
    memcpy(&c[6], "coarse", 7);
    put(&th0, TP_OBS_STORAGE_CREATED, 0, 92, c, 9);
    now_ns = dropped_merge;
    uint64_t r[5] = {0, 0, id, (uint64_t)1 << 32, dropped_at + 5}; // strong 0, weak 1 (ticks: ns + 5)
    uint64_t gone = TPPROF_OBS_DATA_RELEASED | TPPROF_OBS_FREED;
    if (dropped_at) put_flags(&th0, TP_OBS_STORAGE_REFCOUNT, TP_OBS_REFOP_RELEASE, gone | TPPROF_OBS_TICKS, 93, r, 5);
    else put_flags(&th0, TP_OBS_STORAGE_REFCOUNT, TP_OBS_REFOP_RELEASE, gone, 93, r, 4);
}

static void test_untimed_storages_count_in_the_maximum_only_from_an_exact_release(void) {
    untimed_made_and_dropped(180, 20000000, 60000000, 45000000); // 25 ms by its exact release
    untimed_made_and_dropped(181, 70000000, 80000000, 75000000); // 5 ms: too short to count
    untimed_made_and_dropped(182, 90000000, 400000000, 0);       // 310 ms, but between two merges
    CHECK_MSG(tpprof_store_tensors_put(db, true), "written: %s", sqlite3_errmsg(db));
    CHECK_MSG(q("SELECT count FROM storage_lifetimes WHERE allocator = 'coarse'") == 3 &&
              q("SELECT live_count FROM storage_lifetimes WHERE allocator = 'coarse'") == 0 &&
              q("SELECT live_ns_sum FROM storage_lifetimes WHERE allocator = 'coarse'") == 0,
          "three released, none timed");
    CHECK_MSG(q("SELECT live_ns_max FROM storage_lifetimes WHERE allocator = 'coarse'") == 25000000,
          "the maximum: the one released exactly 25 ms after its creation's merge (%lld)",
          q("SELECT live_ns_max FROM storage_lifetimes WHERE allocator = 'coarse'"));
}

// attaches nothing else); one older than 2 or newer than 3 gets none.
static void test_provider_answers_runtimes_of_version_2_and_3(void) {
    const tp_observer *v2 = tp_observer_provide(2);
    CHECK_MSG(v2 && v2->abi_version == 2 && v2->on_event == observer->on_event, "version 2 runtime: a v2 observer");
    CHECK_MSG(observer->abi_version == 3, "version 3 runtime: a v3 observer");
    CHECK_MSG(tp_observer_provide(1) == NULL && tp_observer_provide(4) == NULL, "1 and 4: none");
}

static void test_many_live_records_are_each_found(void) {
    enum { N = 5000 };
    const uint64_t id0 = 1000000, addr0 = 0x40000000;
    int64_t count0 = q("SELECT count FROM storage_lifetimes WHERE allocator = 'cpu'");
    for (uint64_t i = 0; i < N; i++) {
        bool existed;
        struct tpprof_block *b = tpprof_live_insert(&tpprof_w.live, addr0 + i * 64, &existed);
        b->size = 64;
        b->site = 0;
        created(&th0, id0 + 2 * i, addr0 + i * 64, 64, 300);
        tensor_adopted(&th0, id0 + 2 * i + 1, id0 + 2 * i, 301);
    }
    for (uint64_t i = 0; i < N; i += 2) { // every other one: its tensor goes, and with it the storage
        tensor_release(&th0, id0 + 2 * i, id0 + 2 * i + 1, 0, 1);
        simple(&th0, TP_OBS_STORAGE_DATA_RELEASED, id0 + 2 * i);
        simple(&th0, TP_OBS_STORAGE_FREED, id0 + 2 * i);
    }
    const uint64_t freed_at = now_ns + 777777; // (the merge's times only move on)
    for (uint64_t i = 0; i < N; i++) { // then every block
        struct tpprof_block out;
        if (tpprof_live_remove(&tpprof_w.live, addr0 + i * 64, &out) && out.backs)
            tpprof_obs_block_freed(addr0 + i * 64, freed_at);
    }
    CHECK_MSG(tpprof_store_tensors_put(db, true), "written: %s", sqlite3_errmsg(db));
    // The frees came after the storage peak these made: the freed ones were alive at it, so kept.
    CHECK_MSG(q("SELECT count(*) FROM storages WHERE id >= 1000000 AND id < 1010000 AND at_peak = 1") == N,
          "all %d storages written (%lld)", N,
          q("SELECT count(*) FROM storages WHERE id >= 1000000 AND id < 1010000 AND at_peak = 1"));
    CHECK_MSG(q("SELECT count(*) FROM storages WHERE id >= 1000000 AND id < 1010000 AND freed_ns IS NOT NULL AND "
            "strong = 0") == N / 2,
          "half of them freed");
    char sql[256];
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM storages WHERE id >= 1000000 AND id < 1010000 AND block_freed_ns = %llu AND "
             "block_address = 1073741824 + (id - 1000000) * 32",
             (unsigned long long)freed_at);
    CHECK_MSG(q(sql) == N, "each saw its own block's free (%lld)", q(sql));
    CHECK_MSG(q("SELECT count(*) FROM storage_refs WHERE storage_id >= 1000000 AND storage_id < 1010000") == N / 2 &&
              q("SELECT count(*) FROM storage_refs WHERE storage_id >= 1000000 AND storage_id < 1010000 AND op = 0 "
                "AND stack_id = 301 AND tensor_id = storage_id + 1 AND count = 1") == N / 2,
          "each live storage's one reference is its tensor's");
    CHECK_MSG(q("SELECT count(*) FROM tensors WHERE id >= 1000000 AND id < 1010000") == N &&
              q("SELECT count(*) FROM tensors WHERE id >= 1000000 AND id < 1010000 AND freed_ns IS NULL AND "
                "storage_id = id - 1") == N / 2,
          "every tensor written, half of them alive");
    CHECK_MSG(q("SELECT count FROM refcount_sites WHERE op = 2 AND stack_id = 301") == N / 2,
          "the freed tensors' releases, under their stack");
    CHECK_MSG(q("SELECT count FROM storage_lifetimes WHERE allocator = 'cpu'") == count0 + N / 2,
          "their data releases counted");
}

// ---------------------------------------------------------------------------

int main(void) {
    ledger_harness_open();
    // A live heap block that will back storage 1 (one posix_memalign site).
    tpprof_w.sites = (struct tpprof_site[1]){{.kind = TPPROF_KIND_POSIX_MEMALIGN}};
    tpprof_w.nsites = 1;
    bool existed;
    struct tpprof_block *b = tpprof_live_insert(&tpprof_w.live, 0x10000, &existed);
    b->size = 4096;
    b->site = 0;

    // Storage 1: a tensor, a view of it, and an unowned retain (a cache).
    created(&th0, 1, 0x10000, 4096, 10);
    refcount(&th0, 1, TP_OBS_REFOP_RETAIN, 2, 1, 11);
    tensor(&th0, 2, 1, 0, 1024, 12);
    refcount(&th0, 1, TP_OBS_REFOP_RELEASE, 1, 1, 13); // the creator lets go: the creation reference
    refcount(&th0, 1, TP_OBS_REFOP_RETAIN, 2, 1, 14);
    tensor(&th0, 3, 1, 2, 16, 15);                     // a view of tensor 2
    refcount(&th1, 1, TP_OBS_REFOP_RETAIN, 3, 1, 16);  // another thread's cache
    // Freeing the view frees its base first (nested): releases come base, then view.
    tensor_freed(&th0, 3, 1);
    tensor_freed(&th0, 2, 1);
    refcount(&th0, 1, TP_OBS_REFOP_RELEASE, 2, 1, 17);
    refcount(&th0, 1, TP_OBS_REFOP_RELEASE, 1, 1, 17);

    // Storage 4: a weak holder outlives the data (c10's implicit weak release removes nothing).
    created(&th0, 4, 0, 64, 20);
    refcount(&th0, 4, TP_OBS_REFOP_WEAK_RETAIN, 1, 2, 21);
    refcount(&th0, 4, TP_OBS_REFOP_RELEASE, 0, 2, 22);
    simple(&th0, TP_OBS_STORAGE_DATA_RELEASED, 4);
    refcount(&th0, 4, TP_OBS_REFOP_WEAK_RELEASE, 0, 1, 22);

    // Storage 5: lock and weak release.
    created(&th1, 5, 0, 32, 30);
    refcount(&th1, 5, TP_OBS_REFOP_WEAK_RETAIN, 1, 2, 31);
    refcount(&th1, 5, TP_OBS_REFOP_LOCK, 2, 2, 32);
    refcount(&th1, 5, TP_OBS_REFOP_WEAK_RELEASE, 2, 1, 33);

    // Storage 6 lives and dies before the peak: its record goes.
    created(&th0, 6, 0, 100, 40);
    refcount(&th0, 6, TP_OBS_REFOP_RELEASE, 0, 1, 41);
    simple(&th0, TP_OBS_STORAGE_DATA_RELEASED, 6);
    simple(&th0, TP_OBS_STORAGE_FREED, 6);
    // Storage 7 makes a new peak, then goes: kept as alive at the peak.
    created(&th0, 7, 0, 100000, 50);
    refcount(&th0, 7, TP_OBS_REFOP_RELEASE, 0, 1, 51);
    simple(&th0, TP_OBS_STORAGE_DATA_RELEASED, 7);
    simple(&th0, TP_OBS_STORAGE_FREED, 7);
    tpprof_obs_block_freed(0x10000, 9999);

    // Storage 8: two tensors made at one site (retain stack 61, the tensor
    // takes the retain's stack), the second still alive when another
    // thread's tensor 11 on it is freed; the frees come inside their
    // releases, without a stack.
    created(&th1, 8, 0, 16, 60);
    refcount(&th1, 8, TP_OBS_REFOP_RETAIN, 2, 1, 61);
    tensor(&th1, 9, 8, 0, 4, 61);
    refcount(&th1, 8, TP_OBS_REFOP_RELEASE, 1, 1, 62);
    refcount(&th1, 8, TP_OBS_REFOP_RETAIN, 2, 1, 61);
    tensor(&th1, 10, 8, 0, 4, 61);
    refcount(&th0, 8, TP_OBS_REFOP_RETAIN, 3, 1, 63);
    tensor(&th0, 11, 8, 0, 4, 63);
    tensor_release(&th1, 8, 9, 2, 1);
    tensor_release(&th0, 8, 11, 1, 1);
    CHECK_MSG(tpprof_store_tensors_put(db, true), "written mid-way: %s", sqlite3_errmsg(db));
    CHECK_MSG(q("SELECT count(*) FROM storage_refs WHERE storage_id = 8") == 1 &&
              q("SELECT tensor_id FROM storage_refs WHERE storage_id = 8 AND op = 1 AND stack_id = 61") == 10,
          "only tensor 10's reference is left on storage 8");
    CHECK_MSG(q("SELECT count(*) FROM tensors WHERE id IN (9, 11)") == 0 && q("SELECT count(*) FROM tensors WHERE id = 10") == 1,
          "tensors 9 and 11 are freed, 10 is alive");
    tensor_with_retain(&th1, 12, 8, 2, 1, 64); // a third tensor, its retain inside
    CHECK_MSG(tpprof_store_tensors_put(db, true), "written mid-way: %s", sqlite3_errmsg(db));
    CHECK_MSG(q("SELECT strong FROM storages WHERE id = 8") == 2 &&
              q("SELECT tensor_id FROM storage_refs WHERE storage_id = 8 AND op = 1 AND stack_id = 64") == 12,
          "the carried retain counts and is tensor 12's reference");
    CHECK_MSG(q("SELECT created_stack FROM tensors WHERE id = 12") == 64, "tensor 12 has the retain's stack");
    tensor_release(&th1, 8, 12, 1, 1);
    tensor_release(&th1, 8, 10, 0, 1);
    simple(&th1, TP_OBS_STORAGE_DATA_RELEASED, 8);
    simple(&th1, TP_OBS_STORAGE_FREED, 8);

    CHECK_MSG(tpprof_store_tensors_put(db, true), "written: %s", sqlite3_errmsg(db));

    // Storage 1: only the other thread's cache retain is outstanding.
    CHECK_MSG(q("SELECT count(*) FROM storage_refs WHERE storage_id = 1") == 1, "one reference left on storage 1");
    CHECK_MSG(q("SELECT stack_id FROM storage_refs WHERE storage_id = 1 AND op = 1 AND tensor_id = 0") == 16,
          "the unmatched retain is the cache's (stack 16)");
    CHECK_MSG(q("SELECT strong FROM storages WHERE id = 1") == 1, "strong 1");
    CHECK_MSG(q("SELECT block_address FROM storages WHERE id = 1") == 0x10000 &&
              q("SELECT block_size FROM storages WHERE id = 1") == 4096 &&
              q("SELECT block_kind FROM storages WHERE id = 1") == TPPROF_KIND_POSIX_MEMALIGN,
          "storage 1's block");
    CHECK_MSG(q("SELECT block_freed_ns FROM storages WHERE id = 1") == 9999, "its free is seen");
    CHECK_MSG(q("SELECT count(*) FROM tensors") == 0, "tensors freed before the peak are dropped");
    // Storage 4: data released, the weak retain outstanding.
    CHECK_MSG(q("SELECT count(*) FROM storage_refs WHERE storage_id = 4") == 1 &&
              q("SELECT stack_id FROM storage_refs WHERE storage_id = 4 AND op = 3") == 21,
          "the weak retain of stack 21 is what holds storage 4");
    CHECK_MSG(q("SELECT data_released_ns IS NOT NULL AND last_release_ns IS NOT NULL AND freed_ns IS NULL AND strong = 0 "
            "AND weak = 1 FROM storages WHERE id = 4") == 1, "storage 4's state");
    // Storage 5: creation and lock outstanding, the weak retain released.
    CHECK_MSG(q("SELECT count(*) FROM storage_refs WHERE storage_id = 5") == 2 &&
              q("SELECT count(*) FROM storage_refs WHERE storage_id = 5 AND op IN (0, 5)") == 2,
          "storage 5 keeps its creation reference and the lock");
    // Peak bookkeeping.
    CHECK_MSG(q("SELECT count(*) FROM storages WHERE id = 6") == 0, "storage 6 was dropped");
    CHECK_MSG(q("SELECT at_peak FROM storages WHERE id = 7") == 1, "storage 7 made the peak");
    CHECK_MSG(q("SELECT at_peak FROM storages WHERE id = 1") == 1, "storage 1 was alive at the peak");
    int64_t bytes = tpprof_ledger.peak_bytes;
    CHECK_MSG(bytes == 4096 + 32 + 100000, "peak bytes %lld (storage 4's data was gone)", (long long)bytes);
    // Aggregates.
    CHECK_MSG(q("SELECT count FROM refcount_sites WHERE op = 2 AND stack_id = 17") == 2, "two releases at stack 17");
    CHECK_MSG(q("SELECT sum(count) FROM refcount_sites") == 23, "every refcount change counted");
    CHECK_MSG(q("SELECT count FROM storage_lifetimes WHERE allocator = 'cpu'") == 4, "four data releases");
    // Storage 8: stackless tensor releases count under the tensor's retain site.
    CHECK_MSG(q("SELECT count FROM refcount_sites WHERE op = 2 AND stack_id = 61") == 2 &&
              q("SELECT count FROM refcount_sites WHERE op = 1 AND stack_id = 61") == 2 &&
              q("SELECT count FROM refcount_sites WHERE op = 2 AND stack_id = 63") == 1 &&
              q("SELECT count FROM refcount_sites WHERE op = 1 AND stack_id = 64") == 1 &&
              q("SELECT count FROM refcount_sites WHERE op = 2 AND stack_id = 64") == 1,
          "the tensors' releases count under their retains' stacks 61, 63 and 64");
    CHECK_MSG(q("SELECT count(*) FROM refcount_sites WHERE stack_id = 0") == 0, "no change without a stack");
    CHECK_MSG(q("SELECT count FROM refcount_sites WHERE op = 2 AND stack_id = 62") == 1, "the creator's own release");
    CHECK_MSG(kept_events == 0, "aggregate mode keeps no events");
    test_observe_folds_tensor_events_and_skips_known_stacks();
    test_observe_takes_the_creating_calls_allocation_stack();
    test_adopted_creation_reference_belongs_to_its_tensor();
    test_observe_passes_on_an_adopted_reference();
    test_observe_fused_forms_keep_the_same_ledger();
    test_allocator_names_travel_once_per_run();
    test_a_tensor_older_than_its_storage_reads_the_same();
    test_ticks_time_storage_lifetimes();
    test_observe_times_big_storages_and_one_in_eight_small();
    test_block_free_after_a_timed_release_is_its_delay_after_it();
    test_untimed_storages_count_in_the_maximum_only_from_an_exact_release();
    test_provider_answers_runtimes_of_version_2_and_3();
    test_many_live_records_are_each_found();
    sqlite3_close(db);
    return CHECK_DONE();
}
