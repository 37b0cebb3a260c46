/*
 * tests/core/test_observer.c - the observer ABI attached in process: which
 * events the runtime sends, in which order, with which counts and fields
 * (src/core/observer.c and the emit points in storage.c and tensor.c).
 * The adopting constructor is internal: its failure path is reached
 * directly through src/core/internal.h.
 */
#include <stdlib.h>

#include "tensorplay/tensorplay.h"
#include "../../src/core/internal.h"
#include "../check.h"
#include "tensor_helpers.h"

// ----------------------------------------------------------------------------
// a recording observer (copies what it needs: event pointers die with the call)

typedef struct rec {
    uint32_t kind;
    uint64_t object;
    tp_obs_storage st;
    char allocator[16];
    tp_obs_refcount rc;
    tp_obs_tensor tn;
    int64_t sizes[TP_MAX_DIMS], strides[TP_MAX_DIMS];
    tp_obs_version ver;
    tp_obs_tensor_ref tr;
} rec;

enum { MAX_RECS = 256 };
static rec recs[MAX_RECS];
static int nrecs;

static void on_event(void *user, const tp_obs_event *ev) {
    CHECK(user == &nrecs);
    CHECK_EQ(ev->struct_size, sizeof(tp_obs_event));
    if (nrecs == MAX_RECS) return;
    rec *r = &recs[nrecs++];
    memset(r, 0, sizeof *r);
    r->kind = ev->kind;
    r->object = ev->object;
    switch (ev->kind) {
    case TP_OBS_STORAGE_CREATED:
    case TP_OBS_STORAGE_DATA_RELEASED:
    case TP_OBS_STORAGE_FREED:
    case TP_OBS_STORAGE_DATA_SWAPPED:
        r->st = ev->u.storage;
        snprintf(r->allocator, sizeof r->allocator, "%s",
                 ev->u.storage.allocator ? ev->u.storage.allocator : "(null)");
        break;
    case TP_OBS_STORAGE_REFCOUNT: r->rc = ev->u.refcount; break;
    case TP_OBS_TENSOR_CREATED:
    case TP_OBS_TENSOR_FREED:
        r->tn = ev->u.tensor;
        for (int i = 0; ev->kind == TP_OBS_TENSOR_CREATED && i < ev->u.tensor.ndim; i++) {
            r->sizes[i] = ev->u.tensor.sizes[i];
            r->strides[i] = ev->u.tensor.strides[i];
        }
        break;
    case TP_OBS_VERSION_BUMPED: r->ver = ev->u.version; break;
    case TP_OBS_TENSOR_REFCOUNT: r->tr = ev->u.tensor_ref; break;
    default: break;
    }
}

static const tp_observer recorder = {
    .abi_version = TP_OBSERVER_ABI_VERSION,
    .struct_size = sizeof(tp_observer),
    .user = &nrecs,
    .on_event = on_event,
};

static void start_recording(void) {
    nrecs = 0;
    CHECK_EQ(tp_observer_set(&recorder), 0);
}

static void stop_recording(void) { tp_observer_set(NULL); }

/* The same recorder through the ABI's direct forms: it files their events
 * as on_event would, and counts what arrived which way. */
static int direct_calls, struct_calls;

static void on_event_counted(void *user, const tp_obs_event *ev) {
    struct_calls++;
    CHECK(ev->kind == TP_OBS_VERSION_BUMPED || ev->kind == TP_OBS_ALLOCATOR || ev->kind == TP_OBS_TENSOR_REFCOUNT);
    on_event(user, ev);
}

static void on_refcount_direct(void *user, uint64_t storage_id, uint32_t op, uint32_t strong, uint32_t weak,
                               uint64_t object) {
    CHECK(user == &nrecs);
    direct_calls++;
    if (nrecs == MAX_RECS) return;
    rec *r = &recs[nrecs++];
    memset(r, 0, sizeof *r);
    r->kind = TP_OBS_STORAGE_REFCOUNT;
    r->object = object;
    r->rc = (tp_obs_refcount){.storage_id = storage_id, .op = op, .strong = strong, .weak = weak};
}

static void on_tensor_freed_direct(void *user, uint64_t tensor_id, uint64_t storage_id, uint64_t base_id) {
    CHECK(user == &nrecs);
    direct_calls++;
    if (nrecs == MAX_RECS) return;
    rec *r = &recs[nrecs++];
    memset(r, 0, sizeof *r);
    r->kind = TP_OBS_TENSOR_FREED;
    r->tn = (tp_obs_tensor){.tensor_id = tensor_id, .storage_id = storage_id, .base_id = base_id};
}

/* Files a direct form's event through on_event's filing. */
static void file_direct(tp_obs_event *ev) {
    direct_calls++;
    ev->struct_size = sizeof *ev;
    on_event(&nrecs, ev);
}

static void on_tensor_created_direct(void *user, const tp_obs_tensor *tensor, uint64_t object) {
    CHECK(user == &nrecs);
    file_direct(&(tp_obs_event){.kind = TP_OBS_TENSOR_CREATED, .object = object, .u.tensor = *tensor});
}

static void on_storage_direct(void *user, uint32_t kind, const tp_obs_storage *storage, uint64_t object) {
    CHECK(user == &nrecs);
    CHECK(kind == TP_OBS_STORAGE_CREATED || kind == TP_OBS_STORAGE_DATA_RELEASED || kind == TP_OBS_STORAGE_FREED ||
          kind == TP_OBS_STORAGE_DATA_SWAPPED);
    file_direct(&(tp_obs_event){.kind = kind, .object = object, .u.storage = *storage});
}

static const tp_observer direct_recorder = {
    .abi_version = TP_OBSERVER_ABI_VERSION,
    .struct_size = sizeof(tp_observer),
    .user = &nrecs,
    .on_event = on_event_counted,
    .on_refcount = on_refcount_direct,
    .on_tensor_freed = on_tensor_freed_direct,
    .on_tensor_created = on_tensor_created_direct,
    .on_storage = on_storage_direct,
};

/* The same recorder again, also through the fused forms: each fused call is
 * filed as the events it stands for, in the order the ABI gives them, so
 * its record matches the plain one wherever no other event falls between.
 * fused_calls counts the calls, released_flags keeps each release's flags,
 * implied_events counts the DATA_RELEASED and FREED those flags stand for.
 * The filing does not count in direct_calls: that stays the runtime's. */
static int fused_calls, implied_events;
static uint32_t released_flags[MAX_RECS];

static void on_tensor_retained_fused(void *user, const tp_obs_tensor *tensor, uint32_t strong, uint32_t weak,
                                     uint64_t object) {
    CHECK(user == &nrecs);
    fused_calls++;
    CHECK(!(tensor->flags & TP_OBS_TENSOR_ADOPTED_REF));
    int calls = direct_calls;
    on_refcount_direct(user, tensor->storage_id, TP_OBS_REFOP_RETAIN, strong, weak, object);
    on_tensor_created_direct(user, tensor, object);
    direct_calls = calls;
}

static void on_tensor_released_fused(void *user, uint64_t tensor_id, uint64_t storage_id, uint64_t base_id,
                                     uint32_t strong, uint32_t weak, uint32_t flags) {
    CHECK(user == &nrecs);
    if (fused_calls < MAX_RECS) released_flags[fused_calls] = flags;
    fused_calls++;
    int calls = direct_calls;
    on_tensor_freed_direct(user, tensor_id, storage_id, base_id);
    on_refcount_direct(user, storage_id, TP_OBS_REFOP_RELEASE, strong, weak, 0);
    tp_obs_storage st = {.storage_id = storage_id};
    if (flags & TP_OBS_RELEASED_DATA) on_storage_direct(user, TP_OBS_STORAGE_DATA_RELEASED, &st, 0);
    if (flags & TP_OBS_RELEASED_FREED) on_storage_direct(user, TP_OBS_STORAGE_FREED, &st, 0);
    implied_events += !!(flags & TP_OBS_RELEASED_DATA) + !!(flags & TP_OBS_RELEASED_FREED);
    direct_calls = calls;
}

static void on_tensor_new_fused(void *user, const tp_obs_storage *storage, uint64_t storage_object,
                                const tp_obs_tensor *tensor, uint64_t tensor_object) {
    CHECK(user == &nrecs);
    fused_calls++;
    CHECK(tensor->flags & TP_OBS_TENSOR_ADOPTED_REF);
    CHECK_EQ(tensor->storage_id, storage->storage_id);
    CHECK(storage_object != 0 && tensor_object != 0 && storage_object != tensor_object);
    int calls = direct_calls;
    on_storage_direct(user, TP_OBS_STORAGE_CREATED, storage, storage_object);
    on_tensor_created_direct(user, tensor, tensor_object);
    direct_calls = calls;
}

/* direct_recorder with the fused forms too. */
static tp_observer fused_recorder;

static void start_fused(void) {
    fused_recorder = direct_recorder;
    fused_recorder.on_tensor_retained = on_tensor_retained_fused;
    fused_recorder.on_tensor_released = on_tensor_released_fused;
    fused_recorder.on_tensor_new = on_tensor_new_fused;
    nrecs = direct_calls = struct_calls = fused_calls = implied_events = 0;
    CHECK_EQ(tp_observer_set(&fused_recorder), 0);
}

/* Checks recs[*i] is a refcount event with these values, and advances. */
#define EXPECT_REF(i, sid, op_, s_, w_)                                   \
    do {                                                                  \
        CHECK((i) < nrecs);                                               \
        CHECK_EQ(recs[i].kind, TP_OBS_STORAGE_REFCOUNT);                  \
        CHECK_EQ(recs[i].rc.storage_id, sid);                             \
        CHECK_EQ(recs[i].rc.op, op_);                                     \
        CHECK_EQ(recs[i].rc.strong, s_);                                  \
        CHECK_EQ(recs[i].rc.weak, w_);                                    \
        (i)++;                                                            \
    } while (0)

#define EXPECT_KIND(i, kind_)                 \
    do {                                      \
        CHECK((i) < nrecs);                   \
        CHECK_EQ(recs[i].kind, kind_);        \
        (i)++;                                \
    } while (0)

// ----------------------------------------------------------------------------
// attaching

static void test_no_observer_is_attached_without_a_provider(void) {
    CHECK(tp_observer_get() == NULL);
}

static void test_set_rejects_an_observer_of_another_abi(void) {
    tp_observer wrong = recorder;
    wrong.abi_version = TP_OBSERVER_ABI_VERSION + 1;
    CHECK_EQ(tp_observer_set(&wrong), -1);
    CHECK(tp_observer_get() == NULL);
    CHECK_EQ(tp_last_status(), TP_STATUS_INVALID_ARGUMENT);
    char want[160];
    snprintf(want, sizeof want,
             "observer: unsupported observer (abi_version 4, struct_size %zu, on_event set); this "
             "runtime speaks abi_version 2 to 3",
             sizeof(tp_observer));
    CHECK_STR(tp_last_error(), want);
    /* Version 1 observers expect a RETAIN for every tensor; since 2 a new
     * tensor adopts its storage's creation reference: not attached. */
    tp_observer v1 = recorder;
    v1.abi_version = 1;
    CHECK_EQ(TP_OBSERVER_ABI_VERSION, 3);
    CHECK_EQ(TP_OBSERVER_ABI_VERSION_MIN, 2);
    CHECK_EQ(tp_observer_set(&v1), -1);
    CHECK(tp_observer_get() == NULL);
    tp_observer small = recorder;
    small.struct_size = 8;
    CHECK_EQ(tp_observer_set(&small), -1);
    tp_observer silent = recorder;
    silent.on_event = NULL;
    CHECK_EQ(tp_observer_set(&silent), -1);
    CHECK(tp_observer_get() == NULL);
    CHECK_EQ(tp_observer_set(&recorder), 0);
    CHECK(tp_observer_get() == &recorder);
    CHECK_EQ(tp_observer_set(NULL), 0);
    CHECK(tp_observer_get() == NULL);
}

static void test_detached_observer_receives_nothing(void) {
    start_recording();
    stop_recording();
    tp_tensor *t = make_tensor(1, SHAPE(4), TP_DTYPE_FLOAT32);
    tp_tensor_bump_version(t);
    tp_tensor_release(t);
    CHECK_EQ(nrecs, 0);
}

// ----------------------------------------------------------------------------
// storage events

static void test_storage_lifecycle_with_weak_refs_reports_every_count(void) {
    start_recording();
    tp_storage *s = tp_storage_new(64, NULL, false);
    uint64_t id = tp_storage_id(s);
    uint64_t data = (uint64_t)(uintptr_t)tp_storage_data(s);
    tp_storage_weak_retain(s);
    tp_storage_retain(s);
    tp_storage_release(s);
    tp_storage *l = tp_storage_weak_lock(s);
    tp_storage_release(l);
    tp_storage_release(s);
    CHECK(tp_storage_weak_lock(s) == NULL); /* no event: nothing changed */
    tp_storage_weak_release(s);
    stop_recording();

    int i = 0;
    CHECK_EQ(recs[i].kind, TP_OBS_STORAGE_CREATED);
    CHECK_EQ(recs[i].st.storage_id, id);
    CHECK_EQ(recs[i].st.data, data);
    CHECK_EQ(recs[i].st.nbytes, 64);
    CHECK_STR(recs[i].allocator, "cpu");
    CHECK_EQ(recs[i].st.device_type, TP_DEVICE_TYPE_CPU);
    CHECK_EQ(recs[i].st.resizable, 0);
    i++;
    EXPECT_REF(i, id, TP_OBS_REFOP_WEAK_RETAIN, 1, 2);
    EXPECT_REF(i, id, TP_OBS_REFOP_RETAIN, 2, 2);
    EXPECT_REF(i, id, TP_OBS_REFOP_RELEASE, 1, 2);
    EXPECT_REF(i, id, TP_OBS_REFOP_LOCK, 2, 2);
    EXPECT_REF(i, id, TP_OBS_REFOP_RELEASE, 1, 2);
    EXPECT_REF(i, id, TP_OBS_REFOP_RELEASE, 0, 2);
    CHECK_EQ(recs[i].kind, TP_OBS_STORAGE_DATA_RELEASED);
    CHECK_EQ(recs[i].st.storage_id, id);
    CHECK_EQ(recs[i].st.data, data);
    i++;
    EXPECT_REF(i, id, TP_OBS_REFOP_WEAK_RELEASE, 0, 1); /* the +1 of strong > 0 goes */
    EXPECT_REF(i, id, TP_OBS_REFOP_WEAK_RELEASE, 0, 0);
    CHECK_EQ(recs[i].kind, TP_OBS_STORAGE_FREED);
    CHECK_EQ(recs[i].st.storage_id, id);
    i++;
    CHECK_EQ(nrecs, i);
}

static void test_storage_without_weak_refs_is_deleted_directly(void) {
    start_recording();
    tp_storage *s = tp_storage_new(8, NULL, true);
    uint64_t id = tp_storage_id(s);
    tp_storage_release(s);
    stop_recording();
    int i = 0;
    EXPECT_KIND(i, TP_OBS_STORAGE_CREATED);
    EXPECT_REF(i, id, TP_OBS_REFOP_RELEASE, 0, 1);
    EXPECT_KIND(i, TP_OBS_STORAGE_DATA_RELEASED); /* still reported, */
    EXPECT_KIND(i, TP_OBS_STORAGE_FREED);         /* then the struct */
    CHECK_EQ(nrecs, i);
}

static void test_resize_and_set_data_ptr_report_the_swap(void) {
    tp_storage *s = tp_storage_new(8, NULL, true);
    uint64_t old = (uint64_t)(uintptr_t)tp_storage_data(s);
    start_recording();
    CHECK_EQ(tp_storage_resize(s, 128), TP_STATUS_OK);
    uint64_t grown = (uint64_t)(uintptr_t)tp_storage_data(s);
    static char buf[16];
    tp_data_ptr borrowed = {.ptr = buf, .device = tp_device_cpu()};
    tp_data_ptr prev = tp_storage_set_data_ptr(s, borrowed, sizeof buf);
    stop_recording();
    CHECK_EQ(nrecs, 2);
    CHECK_EQ(recs[0].kind, TP_OBS_STORAGE_DATA_SWAPPED);
    CHECK_EQ(recs[0].st.old_data, old);
    CHECK_EQ(recs[0].st.data, grown);
    CHECK_EQ(recs[0].st.nbytes, 128);
    CHECK_EQ(recs[1].kind, TP_OBS_STORAGE_DATA_SWAPPED);
    CHECK_EQ(recs[1].st.old_data, grown);
    CHECK_EQ(recs[1].st.data, (uint64_t)(uintptr_t)buf);
    CHECK_EQ(recs[1].st.nbytes, 16);
    tp_data_ptr_clear(&prev);
    tp_storage_release(s);
}

static void deleting_free(void *ctx) { free(ctx); }

static void test_wrapped_memory_names_its_owner(void) {
    start_recording();
    static char buf[8];
    tp_data_ptr borrowed = {.ptr = buf, .device = tp_device_cpu()};
    tp_storage *b = tp_storage_new_with_data_ptr(borrowed, sizeof buf, NULL, false);
    void *p = malloc(8);
    tp_data_ptr owned = {.ptr = p, .ctx = p, .deleter = deleting_free, .device = tp_device_cpu()};
    tp_storage *o = tp_storage_new_with_data_ptr(owned, 8, NULL, false);
    stop_recording();
    CHECK_EQ(nrecs, 2);
    CHECK_STR(recs[0].allocator, "(null)"); /* borrowed memory */
    CHECK_STR(recs[1].allocator, "external");
    tp_storage_release(o);
    tp_storage_release(b);
}

// ----------------------------------------------------------------------------
// tensor events

static void test_tensor_and_view_events_carry_geometry_and_ids(void) {
    start_recording();
    tp_tensor *x = make_tensor(2, SHAPE(3, 4), TP_DTYPE_FLOAT32);
    tp_tensor *a = tp_tensor_slice(x, 0, 1, 3, 1);
    tp_tensor *v = tp_tensor_slice(a, 1, 1, 4, 1);
    tp_tensor_bump_version(v);
    uint64_t sid = tp_storage_id(tp_tensor_storage(x));
    uint64_t xid = tp_tensor_id(x), aid = tp_tensor_id(a), vid = tp_tensor_id(v);
    tp_tensor_release(a);
    tp_tensor_release(x);
    tp_tensor_release(v);
    stop_recording();

    int i = 0;
    EXPECT_KIND(i, TP_OBS_STORAGE_CREATED);
    EXPECT_REF(i, sid, TP_OBS_REFOP_RETAIN, 2, 1); /* make_tensor's x takes a reference */
    CHECK_EQ(recs[i].kind, TP_OBS_TENSOR_CREATED);
    CHECK_EQ(recs[i].tn.tensor_id, xid);
    CHECK_EQ(recs[i].tn.flags, 0); /* the public constructor retains: the caller keeps its own */
    CHECK_EQ(recs[i].tn.storage_id, sid);
    CHECK_EQ(recs[i].tn.base_id, 0);
    CHECK_EQ(recs[i].tn.ndim, 2);
    CHECK_EQ(recs[i].tn.dtype, TP_DTYPE_FLOAT32);
    CHECK_EQ(recs[i].tn.itemsize, 4);
    i++;
    EXPECT_REF(i, sid, TP_OBS_REFOP_RELEASE, 1, 1); /* make_tensor drops its own */
    EXPECT_REF(i, sid, TP_OBS_REFOP_RETAIN, 2, 1);  /* a */
    CHECK_EQ(recs[i].kind, TP_OBS_TENSOR_CREATED);
    CHECK_EQ(recs[i].tn.tensor_id, aid);
    CHECK_EQ(recs[i].tn.base_id, xid);
    CHECK_EQ(recs[i].tn.storage_offset, 4);
    CHECK_EQ(recs[i].tn.flags, 0); /* a view retains */
    i++;
    EXPECT_REF(i, sid, TP_OBS_REFOP_RETAIN, 3, 1); /* v */
    CHECK_EQ(recs[i].kind, TP_OBS_TENSOR_CREATED);
    CHECK_EQ(recs[i].tn.tensor_id, vid);
    CHECK_EQ(recs[i].tn.base_id, xid); /* the root, not a */
    CHECK_EQ(recs[i].tn.storage_offset, 5);
    CHECK_EQ(recs[i].tn.ndim, 2);
    CHECK_EQ(recs[i].sizes[0], 2);
    CHECK_EQ(recs[i].sizes[1], 3);
    CHECK_EQ(recs[i].strides[0], 4);
    CHECK_EQ(recs[i].strides[1], 1);
    i++;
    CHECK_EQ(recs[i].kind, TP_OBS_VERSION_BUMPED);
    CHECK_EQ(recs[i].ver.tensor_id, vid);
    CHECK_EQ(recs[i].ver.version, 1);
    i++;
    CHECK_EQ(recs[i].kind, TP_OBS_TENSOR_FREED);
    CHECK_EQ(recs[i].tn.tensor_id, aid);
    i++;
    EXPECT_REF(i, sid, TP_OBS_REFOP_RELEASE, 2, 1);
    /* x is still the base of v: releasing x drops the caller's handle, not the last. */
    CHECK_EQ(recs[i].kind, TP_OBS_TENSOR_REFCOUNT);
    CHECK_EQ(recs[i].tr.tensor_id, xid);
    CHECK_EQ(recs[i].tr.op, TP_OBS_REFOP_RELEASE);
    CHECK_EQ(recs[i].tr.count, 1);
    i++;
    CHECK_EQ(recs[i].kind, TP_OBS_TENSOR_FREED);
    CHECK_EQ(recs[i].tn.tensor_id, vid);
    i++;
    CHECK_EQ(recs[i].kind, TP_OBS_TENSOR_FREED); /* v let go of its base x */
    CHECK_EQ(recs[i].tn.tensor_id, xid);
    i++;
    EXPECT_REF(i, sid, TP_OBS_REFOP_RELEASE, 1, 1);
    EXPECT_REF(i, sid, TP_OBS_REFOP_RELEASE, 0, 1);
    EXPECT_KIND(i, TP_OBS_STORAGE_DATA_RELEASED);
    EXPECT_KIND(i, TP_OBS_STORAGE_FREED);
    CHECK_EQ(nrecs, i);
}

static void test_reshape_copy_adopts_its_new_storage_without_refcount_events(void) {
    tp_tensor *x = make_tensor(2, SHAPE(3, 4), TP_DTYPE_FLOAT32);
    tp_tensor *xt = tp_tensor_t(x); /* not viewable as [12]: reshape copies */
    start_recording();
    tp_tensor *r = tp_tensor_reshape(xt, 1, SHAPE(12));
    int made = nrecs;
    CHECK(r != NULL && !tp_tensor_is_view(r));
    tp_storage *s = tp_tensor_storage(r);
    uint64_t sid = tp_storage_id(s), rid = tp_tensor_id(r);
    uint64_t s_addr = (uint64_t)(uintptr_t)s, r_addr = (uint64_t)(uintptr_t)r;
    CHECK(s != tp_tensor_storage(x));
    CHECK_EQ(tp_storage_use_count(s), 1); /* the tensor's, and nobody else's */
    CHECK_EQ(tp_storage_weak_count(s), 1);
    tp_tensor_release(r);
    stop_recording();

    CHECK_EQ(made, 2); /* STORAGE_CREATED, TENSOR_CREATED: no RETAIN, no RELEASE */
    int i = 0;
    CHECK_EQ(recs[i].kind, TP_OBS_STORAGE_CREATED);
    CHECK_EQ(recs[i].st.storage_id, sid);
    CHECK_EQ(recs[i].object, s_addr);
    i++;
    CHECK_EQ(recs[i].kind, TP_OBS_TENSOR_CREATED);
    CHECK_EQ(recs[i].tn.tensor_id, rid);
    CHECK_EQ(recs[i].tn.storage_id, sid);
    CHECK_EQ(recs[i].tn.base_id, 0);
    CHECK_EQ(recs[i].tn.flags, TP_OBS_TENSOR_ADOPTED_REF);
    CHECK_EQ(recs[i].object, r_addr);
    i++;
    CHECK_EQ(recs[i].kind, TP_OBS_TENSOR_FREED);
    CHECK_EQ(recs[i].tn.tensor_id, rid);
    CHECK_EQ(recs[i].tn.flags, 0);
    i++;
    EXPECT_REF(i, sid, TP_OBS_REFOP_RELEASE, 0, 1); /* the adopted reference, the only one */
    CHECK_EQ(recs[i - 1].object, 0);
    EXPECT_KIND(i, TP_OBS_STORAGE_DATA_RELEASED);
    EXPECT_KIND(i, TP_OBS_STORAGE_FREED);
    CHECK_EQ(nrecs, i);
    tp_tensor_release(xt);
    tp_tensor_release(x);
}

static void test_failed_adoption_releases_the_creation_reference_once(void) {
    start_recording();
    tp_storage *s = tp_storage_new(16, NULL, false);
    uint64_t sid = tp_storage_id(s), s_addr = (uint64_t)(uintptr_t)s;
    /* 5 floats do not fit 16 bytes: the tensor is refused and the storage,
     * whose only reference the call consumed, is gone. */
    CHECK(tp__tensor_make(s, 0, 1, SHAPE(5), NULL, TP_DTYPE_FLOAT32, NULL, NULL,
                          TP__STORAGE_REF_ADOPT) == NULL);
    CHECK_EQ(tp_last_status(), TP_STATUS_OUT_OF_BOUNDS);
    stop_recording();
    int i = 0;
    EXPECT_KIND(i, TP_OBS_STORAGE_CREATED);
    EXPECT_REF(i, sid, TP_OBS_REFOP_RELEASE, 0, 1);
    CHECK_EQ(recs[i - 1].object, s_addr); /* released by the call that created it */
    EXPECT_KIND(i, TP_OBS_STORAGE_DATA_RELEASED);
    EXPECT_KIND(i, TP_OBS_STORAGE_FREED);
    CHECK_EQ(nrecs, i); /* no TENSOR_CREATED */
}

static void test_version_bump_through_a_view_reports_the_shared_value(void) {
    tp_tensor *x = make_tensor(1, SHAPE(4), TP_DTYPE_FLOAT32);
    tp_tensor *v = tp_tensor_narrow(x, 0, 1, 2);
    tp_tensor *d = tp_tensor_detach(x);
    start_recording();
    tp_tensor_bump_version(x);
    tp_tensor_bump_version(v);
    tp_tensor_bump_version(d);
    stop_recording();
    CHECK_EQ(nrecs, 3);
    for (int i = 0; i < 3; i++) {
        CHECK_EQ(recs[i].kind, TP_OBS_VERSION_BUMPED);
        CHECK_EQ(recs[i].ver.version, i + 1);
    }
    CHECK_EQ(recs[1].ver.tensor_id, tp_tensor_id(v));
    CHECK_EQ(recs[2].ver.tensor_id, tp_tensor_id(d));
    tp_tensor_release(d);
    tp_tensor_release(v);
    tp_tensor_release(x);
}

// ----------------------------------------------------------------------------
// the direct forms

/* A workload touching every refcount op and tensor frees (views, a weak
 * reference, a lock, an adopting constructor). */
static void refcount_workload(void) {
    tp_tensor *x = make_tensor(1, SHAPE(8), TP_DTYPE_FLOAT32);
    tp_tensor *v = tp_tensor_narrow(x, 0, 2, 4);
    tp_tensor_bump_version(v);
    tp_storage *s = tp_tensor_storage(x);
    tp_storage_weak_retain(s);
    tp_storage *locked = tp_storage_weak_lock(s);
    tp_storage_release(locked);
    CHECK_EQ(tp_storage_resize(s, 64), TP_STATUS_OK);
    tp_tensor *e = tp_empty(1, (int64_t[]){3}, TP_DTYPE_FLOAT32);
    tp_tensor_release(e);
    tp_tensor_release(v);
    tp_tensor_release(x);
    tp_storage_weak_release(s);
}

static void test_direct_forms_carry_the_same_events_in_the_same_order(void) {
    start_recording();
    refcount_workload();
    stop_recording();
    int n = nrecs;
    CHECK(n > 10);
    static rec want[MAX_RECS];
    memcpy(want, recs, sizeof want);

    nrecs = direct_calls = struct_calls = 0;
    CHECK_EQ(tp_observer_set(&direct_recorder), 0);
    refcount_workload();
    stop_recording();
    CHECK_EQ(nrecs, n);
    int kinds[16] = {0};
    for (int i = 0; i < n && i < nrecs; i++) {
        CHECK_EQ(recs[i].kind, want[i].kind);
        CHECK_EQ(recs[i].object != 0, want[i].object != 0);
        if (want[i].kind < 16) kinds[want[i].kind]++;
        switch (want[i].kind) {
        case TP_OBS_STORAGE_REFCOUNT:
            CHECK_EQ(recs[i].rc.op, want[i].rc.op);
            CHECK_EQ(recs[i].rc.strong, want[i].rc.strong);
            CHECK_EQ(recs[i].rc.weak, want[i].rc.weak);
            break;
        case TP_OBS_TENSOR_CREATED:
            CHECK_EQ(recs[i].tn.ndim, want[i].tn.ndim);
            CHECK_EQ(recs[i].tn.flags, want[i].tn.flags);
            CHECK_EQ(recs[i].tn.storage_offset, want[i].tn.storage_offset);
            CHECK_EQ(recs[i].sizes[0], want[i].sizes[0]);
            CHECK_EQ(recs[i].tn.base_id != 0, want[i].tn.base_id != 0);
            break;
        case TP_OBS_TENSOR_FREED: CHECK_EQ(recs[i].tn.base_id != 0, want[i].tn.base_id != 0); break;
        case TP_OBS_STORAGE_CREATED:
        case TP_OBS_STORAGE_DATA_SWAPPED:
            CHECK_EQ(recs[i].st.nbytes, want[i].st.nbytes);
            CHECK_STR(recs[i].allocator, want[i].allocator);
            CHECK_EQ(recs[i].st.old_data != 0, want[i].st.old_data != 0);
            break;
        default: break;
        }
    }
    /* Every kind the workload sends came through, each the expected way. */
    CHECK_EQ(kinds[TP_OBS_TENSOR_FREED], 3);
    CHECK_EQ(kinds[TP_OBS_TENSOR_CREATED], 3);
    CHECK_EQ(kinds[TP_OBS_STORAGE_CREATED], 2);
    CHECK_EQ(kinds[TP_OBS_STORAGE_DATA_SWAPPED], 1);
    CHECK_EQ(kinds[TP_OBS_STORAGE_DATA_RELEASED], 2);
    CHECK_EQ(kinds[TP_OBS_STORAGE_FREED], 2);
    CHECK_EQ(kinds[TP_OBS_VERSION_BUMPED], 1);
    CHECK_EQ(struct_calls, kinds[TP_OBS_VERSION_BUMPED] + kinds[TP_OBS_TENSOR_REFCOUNT]);
    CHECK_EQ(direct_calls, n - struct_calls);
}

static void test_fused_forms_stand_for_the_same_events(void) {
    start_recording();
    refcount_workload();
    stop_recording();
    int n = nrecs;
    static rec want[MAX_RECS];
    memcpy(want, recs, sizeof want);

    start_fused();
    refcount_workload();
    stop_recording();
    /* Filed back into events they match the plain ones one for one. */
    CHECK_EQ(nrecs, n);
    for (int i = 0; i < n && i < nrecs; i++) {
        CHECK_EQ(recs[i].kind, want[i].kind);
        if (want[i].kind == TP_OBS_STORAGE_REFCOUNT) {
            CHECK_EQ(recs[i].rc.op, want[i].rc.op);
            CHECK_EQ(recs[i].rc.strong, want[i].rc.strong);
            CHECK_EQ(recs[i].rc.weak, want[i].rc.weak);
        }
        if (want[i].kind == TP_OBS_TENSOR_CREATED || want[i].kind == TP_OBS_TENSOR_FREED)
            CHECK_EQ(recs[i].tn.tensor_id != 0, want[i].tn.tensor_id != 0);
    }
    /* Every tensor made on an existing storage and every tensor freed went
     * through a fused form (one call each); the rest came as before. */
    int retained = 0, freed = 0, adopted = 0;
    for (int i = 0; i < n; i++) {
        retained += want[i].kind == TP_OBS_TENSOR_CREATED && !(want[i].tn.flags & TP_OBS_TENSOR_ADOPTED_REF);
        adopted += want[i].kind == TP_OBS_TENSOR_CREATED && (want[i].tn.flags & TP_OBS_TENSOR_ADOPTED_REF);
        freed += want[i].kind == TP_OBS_TENSOR_FREED;
    }
    CHECK(retained >= 1);
    CHECK(adopted >= 1);
    CHECK_EQ(freed, 3);
    CHECK_EQ(fused_calls, retained + adopted + freed);
    CHECK_EQ(struct_calls, 1); /* the version bump */
    /* The runtime sent every other event once, and none that a fused call
     * stood for: two events each, and the implied DATA_RELEASED and FREED. */
    CHECK(implied_events >= 2);
    CHECK_EQ(direct_calls, n - struct_calls - 2 * fused_calls - implied_events);
}

static void test_fused_release_comes_after_the_base_and_implies_the_data_release(void) {
    tp_tensor *x = make_tensor(1, SHAPE(8), TP_DTYPE_FLOAT32);
    uint64_t sid = tp_storage_id(tp_tensor_storage(x));
    start_fused();
    tp_tensor *v = tp_tensor_narrow(x, 0, 2, 4); /* strong 2 */
    tp_tensor_release(x);                        /* v's base keeps x */
    tp_tensor_release(v);                        /* frees x, then v's reference */
    stop_recording();
    CHECK_EQ(fused_calls, 3);
    /* v: RETAIN + CREATED; x's handle dropped (not its last: v's is left);
     * then x's free and release come inside v's: FREED(x), RELEASE 1, then
     * FREED(v), RELEASE 0, DATA_RELEASED, FREED. */
    int i = 0;
    EXPECT_REF(i, sid, TP_OBS_REFOP_RETAIN, 2, 1);
    EXPECT_KIND(i, TP_OBS_TENSOR_CREATED);
    EXPECT_KIND(i, TP_OBS_TENSOR_REFCOUNT);
    EXPECT_KIND(i, TP_OBS_TENSOR_FREED);
    CHECK_EQ(recs[i - 1].tn.base_id, 0);
    EXPECT_REF(i, sid, TP_OBS_REFOP_RELEASE, 1, 1);
    EXPECT_KIND(i, TP_OBS_TENSOR_FREED);
    CHECK(recs[i - 1].tn.base_id != 0);
    EXPECT_REF(i, sid, TP_OBS_REFOP_RELEASE, 0, 1);
    EXPECT_KIND(i, TP_OBS_STORAGE_DATA_RELEASED);
    EXPECT_KIND(i, TP_OBS_STORAGE_FREED);
    CHECK_EQ(nrecs, i);
    CHECK_EQ(released_flags[1], 0);
    CHECK_EQ(released_flags[2], TP_OBS_RELEASED_DATA | TP_OBS_RELEASED_FREED);
}

static void test_fused_release_with_a_weak_holder_leaves_the_struct_to_it(void) {
    tp_tensor *x = make_tensor(1, SHAPE(8), TP_DTYPE_FLOAT32);
    tp_storage *s = tp_tensor_storage(x);
    uint64_t sid = tp_storage_id(s);
    tp_storage_weak_retain(s); /* weak 2 */
    start_fused();
    tp_tensor_release(x);
    CHECK_EQ(fused_calls, 1);
    CHECK_EQ(released_flags[0], TP_OBS_RELEASED_DATA);
    tp_storage_weak_release(s);
    stop_recording();
    /* FREED(x), RELEASE 0 (weak 2), DATA_RELEASED implied; then the strong
     * side's +1 and the holder's weak releases, and FREED, as always. */
    int i = 0;
    EXPECT_KIND(i, TP_OBS_TENSOR_FREED);
    EXPECT_REF(i, sid, TP_OBS_REFOP_RELEASE, 0, 2);
    EXPECT_KIND(i, TP_OBS_STORAGE_DATA_RELEASED);
    EXPECT_REF(i, sid, TP_OBS_REFOP_WEAK_RELEASE, 0, 1);
    EXPECT_REF(i, sid, TP_OBS_REFOP_WEAK_RELEASE, 0, 0);
    EXPECT_KIND(i, TP_OBS_STORAGE_FREED);
    CHECK_EQ(nrecs, i);
}

static void test_direct_forms_beyond_struct_size_are_not_read(void) {
    /* An observer built before the direct forms ends at on_event: whatever
     * lies beyond is not its, so everything comes to on_event. */
    tp_observer older = recorder;
    older.struct_size = (uint32_t)offsetof(tp_observer, on_refcount);
    older.on_refcount = on_refcount_direct; /* must not be called */
    nrecs = direct_calls = 0;
    CHECK_EQ(tp_observer_set(&older), 0);
    refcount_workload();
    stop_recording();
    CHECK_EQ(direct_calls, 0);
    CHECK(nrecs > 10);
}

static void test_fused_forms_beyond_struct_size_are_not_read(void) {
    /* An observer built before the fused forms ends at on_storage. */
    start_fused();
    tp_observer older = fused_recorder;
    older.struct_size = (uint32_t)offsetof(tp_observer, on_tensor_retained);
    CHECK(older.on_tensor_new != NULL); /* set, but beyond its struct: never called */
    CHECK_EQ(tp_observer_set(&older), 0);
    refcount_workload();
    stop_recording();
    CHECK_EQ(fused_calls, 0);
    CHECK(nrecs > 10);
}

/* Handles: tp_tensor_retain and a release that is not the last are
 * announced with the count after them; the runtime's own handles (a view's
 * on its base, a tensor's on its grad) are not; the last release is the
 * TENSOR_FREED. */
static void test_tensor_handles_taken_and_dropped_are_announced(void) {
    tp_tensor *x = make_tensor(1, SHAPE(8), TP_DTYPE_FLOAT32);
    tp_tensor *g = make_tensor(1, SHAPE(8), TP_DTYPE_FLOAT32);
    uint64_t xid = tp_tensor_id(x);
    start_recording();
    CHECK(tp_tensor_retain(x) == x);
    CHECK(tp_tensor_retain(x) == x);
    tp_tensor_release(x);
    tp_tensor *v = tp_tensor_narrow(x, 0, 2, 4); /* holds x: not announced */
    CHECK_EQ(tp_tensor_set_grad(x, g), TP_STATUS_OK); /* x holds g: not announced */
    CHECK_EQ(tp_tensor_set_grad(x, NULL), TP_STATUS_OK);
    CHECK(tp_tensor_retain(NULL) == NULL);
    tp_tensor_release(NULL);
    stop_recording();
    int handles = 0, i = 0;
    for (int k = 0; k < nrecs; k++) handles += recs[k].kind == TP_OBS_TENSOR_REFCOUNT;
    CHECK_EQ(handles, 3);
    for (; i < nrecs && recs[i].kind != TP_OBS_TENSOR_REFCOUNT; i++) {}
    CHECK(i + 2 < nrecs);
    CHECK_EQ(recs[i].tr.tensor_id, xid);
    CHECK_EQ(recs[i].tr.op, TP_OBS_REFOP_RETAIN);
    CHECK_EQ(recs[i].tr.count, 2);
    CHECK_EQ(recs[i].object, 0);
    CHECK_EQ(recs[i + 1].tr.op, TP_OBS_REFOP_RETAIN);
    CHECK_EQ(recs[i + 1].tr.count, 3);
    CHECK_EQ(recs[i + 2].kind, TP_OBS_TENSOR_REFCOUNT);
    CHECK_EQ(recs[i + 2].tr.op, TP_OBS_REFOP_RELEASE);
    CHECK_EQ(recs[i + 2].tr.count, 2);
    CHECK_EQ(tp_tensor_use_count(x), 3); /* two handles and v's */
    /* The last handle: its release is the tensor's free, no REFCOUNT. */
    start_recording();
    tp_tensor_release(x);
    tp_tensor_release(x);
    tp_tensor_release(v);
    stop_recording();
    CHECK_EQ(recs[0].kind, TP_OBS_TENSOR_REFCOUNT);
    CHECK_EQ(recs[0].tr.count, 2);
    CHECK_EQ(recs[1].kind, TP_OBS_TENSOR_REFCOUNT);
    CHECK_EQ(recs[1].tr.count, 1);
    int freed_x = 0;
    for (int k = 2; k < nrecs; k++) {
        CHECK(recs[k].kind != TP_OBS_TENSOR_REFCOUNT);
        freed_x += recs[k].kind == TP_OBS_TENSOR_FREED && recs[k].tn.tensor_id == xid;
    }
    CHECK_EQ(freed_x, 1);
    tp_tensor_release(g);
}

int main(void) {
    RUN_TEST(test_no_observer_is_attached_without_a_provider);
    RUN_TEST(test_set_rejects_an_observer_of_another_abi);
    RUN_TEST(test_detached_observer_receives_nothing);
    RUN_TEST(test_storage_lifecycle_with_weak_refs_reports_every_count);
    RUN_TEST(test_storage_without_weak_refs_is_deleted_directly);
    RUN_TEST(test_resize_and_set_data_ptr_report_the_swap);
    RUN_TEST(test_wrapped_memory_names_its_owner);
    RUN_TEST(test_tensor_and_view_events_carry_geometry_and_ids);
    RUN_TEST(test_reshape_copy_adopts_its_new_storage_without_refcount_events);
    RUN_TEST(test_failed_adoption_releases_the_creation_reference_once);
    RUN_TEST(test_version_bump_through_a_view_reports_the_shared_value);
    RUN_TEST(test_direct_forms_carry_the_same_events_in_the_same_order);
    RUN_TEST(test_direct_forms_beyond_struct_size_are_not_read);
    RUN_TEST(test_fused_forms_stand_for_the_same_events);
    RUN_TEST(test_fused_release_comes_after_the_base_and_implies_the_data_release);
    RUN_TEST(test_fused_release_with_a_weak_holder_leaves_the_struct_to_it);
    RUN_TEST(test_fused_forms_beyond_struct_size_are_not_read);
    RUN_TEST(test_tensor_handles_taken_and_dropped_are_announced);
    return CHECK_DONE();
}
