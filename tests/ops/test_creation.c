/*
 * tests/ops/test_creation.c - factories: empty/zeros/ones/full, arange,
 * linspace, seeded rand/randn, from_blob (no copy, deleter ownership), and
 * the observer events of a new tensor on a new storage (it adopts the
 * storage's creation reference).
 */
#include "check.h"

static void test_zeros_ones_full_fill_every_dtype(void) {
    int64_t sz[2] = {2, 3};
    for (int d = 0; d < TP_DTYPE_COUNT; d++) {
        tp_tensor *z = tp_zeros(2, sz, (tp_dtype)d), *o = tp_ones(2, sz, (tp_dtype)d);
        tp_tensor *f = tp_full(2, sz, 5, (tp_dtype)d);
        CHECK(z && o && f);
        double want_f = d == TP_DTYPE_BOOL ? 1 : 5;
        for (int k = 0; k < 6; k++) {
            CHECK_EQ(at(z, k), 0);
            CHECK_EQ(at(o, k), 1);
            CHECK_EQ(at(f, k), want_f);
        }
        CHECK(tp_tensor_is_contiguous(f));
        CHECK_EQ(tp_tensor_version(f), 0);
        CHECK_EQ(tp_tensor_dtype(f), d);
        tp_tensor_release(z);
        tp_tensor_release(o);
        tp_tensor_release(f);
    }
}

static void test_full_rounds_half_types_and_wraps_integers(void) {
    int64_t n = 1;
    tp_tensor *h = tp_full(1, &n, 0.1, TP_DTYPE_FLOAT16);
    tp_tensor *b = tp_full(1, &n, 0.1, TP_DTYPE_BFLOAT16);
    tp_tensor *u = tp_full(1, &n, -1, TP_DTYPE_UINT8);
    tp_tensor *i8 = tp_full(1, &n, 300, TP_DTYPE_INT8);
    CHECK_VALUES(h, 0, {0.0999755859375});   /* nearest float16 */
    CHECK_VALUES(b, 0, {0.10009765625});     /* nearest bfloat16 */
    CHECK_VALUES(u, 0, {255});
    CHECK_VALUES(i8, 0, {44});
    tp_tensor_release(h);
    tp_tensor_release(b);
    tp_tensor_release(u);
    tp_tensor_release(i8);
}

static void test_empty_rejects_bad_sizes_and_dtype(void) {
    int64_t bad[1] = {-1};
    CHECK_ERROR(fails(tp_empty(1, bad, TP_DTYPE_FLOAT32)), "");
    CHECK_ERROR(fails(tp_empty(1, (int64_t[]){2}, (tp_dtype)99)), "invalid dtype");
    int64_t huge[2] = {INT64_C(1) << 40, INT64_C(1) << 40};
    CHECK_ERROR(fails(tp_zeros(2, huge, TP_DTYPE_FLOAT64)), "");
}

static void test_arange_counts_like_python(void) {
    tp_tensor *a = tp_arange(0, 5, 1, TP_DTYPE_INT64);
    CHECK_VALUES(a, 0, {0, 1, 2, 3, 4});
    tp_tensor *b = tp_arange(1, 2, 0.3, TP_DTYPE_FLOAT64);
    CHECK_VALUES(b, 1e-12, {1, 1.3, 1.6, 1.9});
    tp_tensor *c = tp_arange(5, 0, -2, TP_DTYPE_FLOAT32);
    CHECK_VALUES(c, 0, {5, 3, 1});
    tp_tensor *e = tp_arange(3, 3, 1, TP_DTYPE_FLOAT32);
    CHECK_EQ(tp_tensor_numel(e), 0);
    CHECK_ERROR(fails(tp_arange(0, 1, 0, TP_DTYPE_FLOAT32)), "step must be nonzero");
    CHECK_ERROR(fails(tp_arange(0, 5, -1, TP_DTYPE_FLOAT32)), "inconsistent with step sign");
    tp_tensor_release(a);
    tp_tensor_release(b);
    tp_tensor_release(c);
    tp_tensor_release(e);
}

static void test_linspace_hits_both_ends_exactly(void) {
    tp_tensor *a = tp_linspace(0, 1, 5, TP_DTYPE_FLOAT32);
    CHECK_VALUES(a, 0, {0, 0.25, 0.5, 0.75, 1});
    tp_tensor *b = tp_linspace(-1, 0.3, 7, TP_DTYPE_FLOAT64);
    CHECK_EQ(at(b, 0) == -1.0, 1);
    CHECK_EQ(at(b, 6) == 0.3, 1);
    tp_tensor *one = tp_linspace(3, 9, 1, TP_DTYPE_FLOAT32);
    CHECK_VALUES(one, 0, {3});
    tp_tensor *none = tp_linspace(3, 9, 0, TP_DTYPE_FLOAT32);
    CHECK_EQ(tp_tensor_numel(none), 0);
    CHECK_ERROR(fails(tp_linspace(0, 1, -1, TP_DTYPE_FLOAT32)), "non-negative");
    tp_tensor_release(a);
    tp_tensor_release(b);
    tp_tensor_release(one);
    tp_tensor_release(none);
}

static void test_rand_is_seeded_uniform_below_one(void) {
    int64_t n = 10000;
    tp_dtype dts[4] = {TP_DTYPE_FLOAT32, TP_DTYPE_FLOAT64, TP_DTYPE_FLOAT16, TP_DTYPE_BFLOAT16};
    for (int k = 0; k < 4; k++) {
        tp_tensor *a = tp_rand(1, &n, dts[k], 42), *b = tp_rand(1, &n, dts[k], 42);
        tp_tensor *c = tp_rand(1, &n, dts[k], 43);
        double mean = 0;
        int same = 1, differ = 0;
        for (int64_t i = 0; i < n; i++) {
            double x = at(a, i);
            CHECK(x >= 0 && x < 1);
            mean += x;
            same &= x == at(b, i);
            differ += x != at(c, i);
        }
        mean /= (double)n;
        CHECK(same);
        CHECK(differ > n / 2);
        CHECK(fabs(mean - 0.5) < 0.02);
        tp_tensor_release(a);
        tp_tensor_release(b);
        tp_tensor_release(c);
    }
    CHECK_ERROR(fails(tp_rand(1, &n, TP_DTYPE_INT32, 1)), "expected a floating point dtype");
}

static void test_randn_has_unit_moments(void) {
    int64_t n = 20001; /* odd: the last Box-Muller pair is cut in half */
    tp_tensor *a = tp_randn(1, &n, TP_DTYPE_FLOAT64, 7);
    double m = 0, v = 0;
    for (int64_t i = 0; i < n; i++) m += at(a, i);
    m /= (double)n;
    for (int64_t i = 0; i < n; i++) v += (at(a, i) - m) * (at(a, i) - m);
    v /= (double)n;
    CHECK(fabs(m) < 0.03);
    CHECK(fabs(v - 1) < 0.05);
    tp_tensor *b = tp_randn(1, &n, TP_DTYPE_FLOAT64, 7);
    CHECK_EQ(at(a, 12345) == at(b, 12345), 1);
    tp_tensor_release(a);
    tp_tensor_release(b);
}

static int deleted;
static void count_delete(void *ctx) { deleted += *(int *)ctx; }

static void test_from_blob_shares_memory_and_runs_deleter_once(void) {
    float data[6] = {0, 1, 2, 3, 4, 5};
    int weight = 1;
    deleted = 0;
    tp_tensor *t = tp_from_blob(data, 2, (int64_t[]){2, 3}, NULL, TP_DTYPE_FLOAT32, count_delete, &weight);
    CHECK(t && tp_tensor_data(t) == (void *)data);
    data[4] = 40;
    CHECK_EQ(at(t, 4), 40);
    /* strided: the transpose of a 3x2 layout */
    tp_tensor *s = tp_from_blob(data, 2, (int64_t[]){2, 3}, (int64_t[]){1, 2}, TP_DTYPE_FLOAT32, NULL, NULL);
    CHECK_VALUES(s, 0, {0, 2, 40, 1, 3, 5});
    CHECK_EQ(deleted, 0);
    tp_tensor_release(t);
    CHECK_EQ(deleted, 1);
    tp_tensor_release(s);
    CHECK_EQ(deleted, 1);
    /* a failed call still owns (and frees) the blob */
    CHECK_ERROR(fails(tp_from_blob(data, 1, (int64_t[]){2}, (int64_t[]){-1}, TP_DTYPE_FLOAT32, count_delete,
                                   &weight)),
                "negative stride");
    CHECK_EQ(deleted, 2);
}

// ----------------------------------------------------------------------------
// a new tensor on a new storage: the creation reference is the tensor's

typedef struct seen_event {
    uint32_t kind, op, strong, weak, flags;
    uint64_t storage, tensor, object;
} seen_event;
static seen_event seen[16];
static int nseen;

static void remember(void *user, const tp_obs_event *ev) {
    (void)user;
    if (nseen == 16) return;
    seen_event *e = &seen[nseen++];
    *e = (seen_event){.kind = ev->kind, .object = ev->object};
    if (ev->kind == TP_OBS_STORAGE_REFCOUNT) {
        e->storage = ev->u.refcount.storage_id;
        e->op = ev->u.refcount.op;
        e->strong = ev->u.refcount.strong;
        e->weak = ev->u.refcount.weak;
    } else if (ev->kind == TP_OBS_TENSOR_CREATED || ev->kind == TP_OBS_TENSOR_FREED) {
        e->storage = ev->u.tensor.storage_id;
        e->tensor = ev->u.tensor.tensor_id;
        e->flags = ev->u.tensor.flags;
    } else {
        e->storage = ev->u.storage.storage_id;
    }
}

static const tp_observer watcher = {
    .abi_version = TP_OBSERVER_ABI_VERSION, .struct_size = sizeof watcher, .on_event = remember,
};

/* Checks the events of making `t` (made while watching): STORAGE_CREATED
 * of its storage, then TENSOR_CREATED flagged ADOPTED_REF; nothing else. */
static void check_adopted(const tp_tensor *t, int n) {
    CHECK_EQ(n, 2);
    uint64_t sid = tp_storage_id(tp_tensor_storage(t));
    CHECK_EQ(seen[0].kind, TP_OBS_STORAGE_CREATED);
    CHECK_EQ(seen[0].storage, sid);
    CHECK_EQ(seen[0].object, (uint64_t)(uintptr_t)tp_tensor_storage(t));
    CHECK_EQ(seen[1].kind, TP_OBS_TENSOR_CREATED);
    CHECK_EQ(seen[1].storage, sid);
    CHECK_EQ(seen[1].tensor, tp_tensor_id(t));
    CHECK_EQ(seen[1].flags, TP_OBS_TENSOR_ADOPTED_REF);
    CHECK_EQ(seen[1].object, (uint64_t)(uintptr_t)t);
    CHECK_EQ(tp_storage_use_count(tp_tensor_storage(t)), 1);
}

/* Checks the events of releasing the only reference to a tensor that
 * adopted its storage's: TENSOR_FREED, the one RELEASE to 0, the data and
 * the struct. */
static void check_released(uint64_t tid, uint64_t sid, int n) {
    CHECK_EQ(n, 4);
    CHECK_EQ(seen[0].kind, TP_OBS_TENSOR_FREED);
    CHECK_EQ(seen[0].tensor, tid);
    CHECK_EQ(seen[1].kind, TP_OBS_STORAGE_REFCOUNT);
    CHECK_EQ(seen[1].storage, sid);
    CHECK_EQ(seen[1].op, TP_OBS_REFOP_RELEASE);
    CHECK_EQ(seen[1].strong, 0);
    CHECK_EQ(seen[1].weak, 1);
    CHECK_EQ(seen[2].kind, TP_OBS_STORAGE_DATA_RELEASED);
    CHECK_EQ(seen[2].storage, sid);
    CHECK_EQ(seen[3].kind, TP_OBS_STORAGE_FREED);
    CHECK_EQ(seen[3].storage, sid);
}

static void test_new_tensor_adopts_its_storage_without_refcount_events(void) {
    const tp_observer *saved = tp_observer_get();
    CHECK_EQ(tp_observer_set(&watcher), 0);
    float data[6] = {0};
    int weight = 1;
    deleted = 0;
    for (int k = 0; k < 2; k++) {
        nseen = 0;
        tp_tensor *t = k == 0 ? tp_empty(2, (int64_t[]){2, 3}, TP_DTYPE_FLOAT32)
                              : tp_from_blob(data, 2, (int64_t[]){2, 3}, NULL, TP_DTYPE_FLOAT32,
                                             count_delete, &weight);
        CHECK(t != NULL);
        if (!t) continue;
        check_adopted(t, nseen);
        uint64_t tid = tp_tensor_id(t), sid = tp_storage_id(tp_tensor_storage(t));
        CHECK_EQ(tp_tensor_use_count(t), 1);
        nseen = 0;
        tp_tensor_release(t);
        check_released(tid, sid, nseen);
    }
    CHECK_EQ(deleted, 1); /* from_blob's deleter, once */
    tp_observer_set(saved);
}

static void test_from_blob_refused_by_the_bounds_check_frees_the_blob_once(void) {
    /* 2^62 floats pass the size checks, but their bytes wrap size_t: the
     * storage is created, then the tensor over it is refused, and the
     * creation reference it was handed is released exactly once. */
    const tp_observer *saved = tp_observer_get();
    CHECK_EQ(tp_observer_set(&watcher), 0);
    float data[1];
    int weight = 1;
    deleted = 0;
    nseen = 0;
    CHECK_ERROR(fails(tp_from_blob(data, 1, (int64_t[]){INT64_C(1) << 62}, NULL, TP_DTYPE_FLOAT32,
                                   count_delete, &weight)),
                "overflow the storage size calculation");
    tp_observer_set(saved);
    CHECK_EQ(deleted, 1);
    CHECK_EQ(nseen, 4);
    CHECK_EQ(seen[0].kind, TP_OBS_STORAGE_CREATED);
    CHECK_EQ(seen[1].kind, TP_OBS_STORAGE_REFCOUNT);
    CHECK_EQ(seen[1].op, TP_OBS_REFOP_RELEASE);
    CHECK_EQ(seen[1].strong, 0);
    CHECK(seen[1].object != 0); /* the creating call's own release names the storage */
    CHECK_EQ(seen[1].object, seen[0].object);
    CHECK_EQ(seen[2].kind, TP_OBS_STORAGE_DATA_RELEASED);
    CHECK_EQ(seen[3].kind, TP_OBS_STORAGE_FREED);
}

static void test_allocation_failure_returns_null_with_message(void) {
    limit_begin(1024);
    tp_clear_error();
    tp_tensor *t = tp_zeros(1, (int64_t[]){1000}, TP_DTYPE_FLOAT32);
    CHECK(t == NULL);
    CHECK_EQ(tp_last_status(), TP_STATUS_OUT_OF_MEMORY);
    CHECK(strstr(tp_last_error(), "limited allocator: failed to allocate 4000 bytes") != NULL);
    CHECK_ERROR(fails(tp_randn(1, (int64_t[]){1000}, TP_DTYPE_FLOAT64, 1)), "failed to allocate");
    CHECK_ERROR(fails(tp_arange(0, 1000, 1, TP_DTYPE_INT64)), "failed to allocate");
    tp_tensor *small = tp_ones(1, (int64_t[]){10}, TP_DTYPE_FLOAT32); /* under the limit */
    CHECK(small != NULL);
    limit_end();
    tp_tensor_release(small);
}

int main(void) {
    RUN_TEST(test_zeros_ones_full_fill_every_dtype);
    RUN_TEST(test_full_rounds_half_types_and_wraps_integers);
    RUN_TEST(test_empty_rejects_bad_sizes_and_dtype);
    RUN_TEST(test_arange_counts_like_python);
    RUN_TEST(test_linspace_hits_both_ends_exactly);
    RUN_TEST(test_rand_is_seeded_uniform_below_one);
    RUN_TEST(test_randn_has_unit_moments);
    RUN_TEST(test_from_blob_shares_memory_and_runs_deleter_once);
    RUN_TEST(test_new_tensor_adopts_its_storage_without_refcount_events);
    RUN_TEST(test_from_blob_refused_by_the_bounds_check_frees_the_blob_once);
    RUN_TEST(test_allocation_failure_returns_null_with_message);
    return CHECK_DONE();
}
