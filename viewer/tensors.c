// tensors.c: the tensor tables of a recording (docs/schema-tensors.md) in
// memory, and what they say about references: which references no release
// matched, which storages only weak references keep, which small views pin
// big storages.
//
// A recording made before these tables existed, or of a program without
// tensors, reads as empty: nothing here refuses a database that db.c
// accepted. Nothing here prints; the commands choose what to show.
#define _POSIX_C_SOURCE 200809L
#include "viewer.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

// ---------------------------------------------------------------------------
// Reading rows

static int64_t col_time(sqlite3_stmt *st, int i) {
    return sqlite3_column_type(st, i) == SQLITE_NULL ? TPPROF_NO_TIME : sqlite3_column_int64(st, i);
}

static char *col_text(sqlite3_stmt *st, int i) {
    const unsigned char *s = sqlite3_column_text(st, i);
    return s ? strdup((const char *)s) : NULL;
}

// Parse "[3, 4]" into v (at most TPPROF_MAX_DIMS). Returns the count or -1.
static int parse_dims(const char *s, int64_t *v) {
    if (!s)
        return -1;
    while (isspace((unsigned char)*s))
        s++;
    if (*s++ != '[')
        return -1;
    int n = 0;
    for (;;) {
        while (isspace((unsigned char)*s))
            s++;
        if (*s == ']')
            return n;
        if (n == TPPROF_MAX_DIMS)
            return -1;
        char *end = NULL;
        errno = 0;
        long long x = strtoll(s, &end, 10);
        if (end == s || errno)
            return -1;
        v[n++] = x;
        s = end;
        while (isspace((unsigned char)*s))
            s++;
        if (*s == ',')
            s++;
        else if (*s != ']')
            return -1;
    }
}

static int load_storages(tpprof_db *db, tpprof_tensors *t) {
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db->sql,
                           "SELECT id, data, nbytes, allocator, device, resizable, created_ns, "
                           "created_stack, last_release_ns, data_released_ns, freed_ns, strong, "
                           "weak, block_address, block_size, block_kind, block_freed_ns, at_peak, "
                           "version_bumps FROM storages ORDER BY id",
                           -1, &st, NULL) != SQLITE_OK)
        return tpprof_db_error(db, "reading storages");
    size_t cap = 0;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        tpprof_storage *grown = tpprof_grow(t->storages, t->nstorages, &cap, sizeof *grown);
        if (!grown) {
            sqlite3_finalize(st);
            return -1;
        }
        t->storages = grown;
        tpprof_storage *s = &t->storages[t->nstorages++];
        *s = (tpprof_storage){
            .id = sqlite3_column_int64(st, 0),
            .data = sqlite3_column_int64(st, 1),
            .nbytes = sqlite3_column_int64(st, 2),
            .allocator = col_text(st, 3),
            .device = col_text(st, 4),
            .resizable = sqlite3_column_int64(st, 5) != 0,
            .created_ns = col_time(st, 6),
            .created_stack = sqlite3_column_int64(st, 7),
            .last_release_ns = col_time(st, 8),
            .data_released_ns = col_time(st, 9),
            .freed_ns = col_time(st, 10),
            .strong = sqlite3_column_int64(st, 11),
            .weak = sqlite3_column_int64(st, 12),
            .block_address = sqlite3_column_int64(st, 13),
            .block_size = sqlite3_column_int64(st, 14),
            .block_kind = sqlite3_column_int64(st, 15),
            .block_freed_ns = col_time(st, 16),
            .at_peak = sqlite3_column_int64(st, 17) != 0,
            .version_bumps = sqlite3_column_int64(st, 18),
        };
    }
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? 0 : tpprof_db_error(db, "reading storages");
}

static int load_tensor_rows(tpprof_db *db, tpprof_tensors *t) {
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db->sql,
                           "SELECT id, storage_id, base_id, storage_offset, sizes, strides, dtype, "
                           "itemsize, created_ns, created_stack, freed_ns, version, at_peak "
                           "FROM tensors ORDER BY id",
                           -1, &st, NULL) != SQLITE_OK)
        return tpprof_db_error(db, "reading tensors");
    size_t cap = 0;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        tpprof_tensor *grown = tpprof_grow(t->tensors, t->ntensors, &cap, sizeof *grown);
        if (!grown) {
            sqlite3_finalize(st);
            return -1;
        }
        t->tensors = grown;
        tpprof_tensor *x = &t->tensors[t->ntensors++];
        *x = (tpprof_tensor){
            .id = sqlite3_column_int64(st, 0),
            .storage_id = sqlite3_column_int64(st, 1),
            .base_id = sqlite3_column_int64(st, 2),
            .offset = sqlite3_column_int64(st, 3),
            .sizes = col_text(st, 4),
            .strides = col_text(st, 5),
            .dtype = col_text(st, 6),
            .itemsize = sqlite3_column_int64(st, 7),
            .created_ns = col_time(st, 8),
            .created_stack = sqlite3_column_int64(st, 9),
            .freed_ns = col_time(st, 10),
            .version = sqlite3_column_int64(st, 11),
            .at_peak = sqlite3_column_int64(st, 12) != 0,
        };
        x->ndim = parse_dims(x->sizes, x->shape);
        int64_t strides[TPPROF_MAX_DIMS];
        if (parse_dims(x->strides, strides) != x->ndim)
            x->ndim = -1;
        else if (x->ndim > 0)
            memcpy(x->stride, strides, (size_t)x->ndim * sizeof *strides);
    }
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? 0 : tpprof_db_error(db, "reading tensors");
}

static int load_refs(tpprof_db *db, tpprof_tensors *t) {
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db->sql,
                           "SELECT storage_id, op, stack_id, tensor_id, count FROM storage_refs "
                           "ORDER BY storage_id, op, stack_id, tensor_id",
                           -1, &st, NULL) != SQLITE_OK)
        return tpprof_db_error(db, "reading storage_refs");
    size_t cap = 0;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        tpprof_ref *grown = tpprof_grow(t->refs, t->nrefs, &cap, sizeof *grown);
        if (!grown) {
            sqlite3_finalize(st);
            return -1;
        }
        t->refs = grown;
        t->refs[t->nrefs++] = (tpprof_ref){
            .storage_id = sqlite3_column_int64(st, 0),
            .op = sqlite3_column_int64(st, 1),
            .stack_id = sqlite3_column_int64(st, 2),
            .tensor_id = sqlite3_column_int64(st, 3),
            .count = sqlite3_column_int64(st, 4),
        };
    }
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? 0 : tpprof_db_error(db, "reading storage_refs");
}

static int load_handles(tpprof_db *db, tpprof_tensors *t) {
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db->sql,
                           "SELECT tensor_id, op, stack_id, count FROM tensor_refs ORDER BY tensor_id, op, stack_id",
                           -1, &st, NULL) != SQLITE_OK)
        return tpprof_db_error(db, "reading tensor_refs");
    size_t cap = 0;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        tpprof_handle_ref *grown = tpprof_grow(t->handles, t->nhandles, &cap, sizeof *grown);
        if (!grown) {
            sqlite3_finalize(st);
            return -1;
        }
        t->handles = grown;
        t->handles[t->nhandles++] = (tpprof_handle_ref){
            .tensor_id = sqlite3_column_int64(st, 0),
            .op = sqlite3_column_int64(st, 1),
            .stack_id = sqlite3_column_int64(st, 2),
            .count = sqlite3_column_int64(st, 3),
        };
    }
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? 0 : tpprof_db_error(db, "reading tensor_refs");
}

const tpprof_handle_ref *tpprof_tensors_handles(const tpprof_tensors *t, int64_t tensor_id, size_t *n) {
    size_t lo = 0, hi = t->nhandles;
    while (lo < hi) { // first row of the tensor
        size_t mid = lo + (hi - lo) / 2;
        if (t->handles[mid].tensor_id < tensor_id)
            lo = mid + 1;
        else
            hi = mid;
    }
    size_t end = lo;
    while (end < t->nhandles && t->handles[end].tensor_id == tensor_id)
        end++;
    *n = end - lo;
    return t->handles ? t->handles + lo : NULL;
}

int64_t tpprof_tensors_unmatched_handles(const tpprof_tensors *t, int64_t tensor_id, int64_t *stack) {
    size_t n = 0;
    const tpprof_handle_ref *h = tpprof_tensors_handles(t, tensor_id, &n);
    int64_t count = 0;
    *stack = 0;
    for (size_t i = 0; i < n; i++)
        if (tpprof_handle_unmatched(&h[i])) {
            if (!count)
                *stack = h[i].stack_id;
            count += h[i].count;
        }
    return count;
}

static int load_lifetimes(tpprof_db *db, tpprof_tensors *t) {
    sqlite3_stmt *st = NULL;
    // release_delay_count and then live_count came later: older recordings
    // measured every delay and every live time (their count stands in).
    static const char *const measured[] = {"release_delay_count, live_count", "release_delay_count, count",
                                           "count, count"};
    int prepared = SQLITE_ERROR;
    for (size_t i = 0; i < sizeof measured / sizeof measured[0] && prepared != SQLITE_OK; i++) {
        char sql[256];
        snprintf(sql, sizeof sql,
                 "SELECT allocator, count, live_ns_sum, live_ns_max, release_delay_ns_sum, release_delay_ns_max, "
                 "%s FROM storage_lifetimes ORDER BY allocator",
                 measured[i]);
        prepared = sqlite3_prepare_v2(db->sql, sql, -1, &st, NULL);
    }
    if (prepared != SQLITE_OK)
        return tpprof_db_error(db, "reading storage_lifetimes");
    size_t cap = 0;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        tpprof_lifetime *grown = tpprof_grow(t->lifetimes, t->nlifetimes, &cap, sizeof *grown);
        if (!grown) {
            sqlite3_finalize(st);
            return -1;
        }
        t->lifetimes = grown;
        t->lifetimes[t->nlifetimes++] = (tpprof_lifetime){
            .allocator = col_text(st, 0),
            .count = sqlite3_column_int64(st, 1),
            .live_ns_sum = sqlite3_column_int64(st, 2),
            .live_ns_max = sqlite3_column_int64(st, 3),
            .delay_ns_sum = sqlite3_column_int64(st, 4),
            .delay_ns_max = sqlite3_column_int64(st, 5),
            .delay_count = sqlite3_column_int64(st, 6),
            .live_count = sqlite3_column_int64(st, 7),
        };
    }
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? 0 : tpprof_db_error(db, "reading storage_lifetimes");
}

// ---------------------------------------------------------------------------
// Indexes

static const tpprof_tensors *index_ctx;

static int by_storage_then_id(const void *a, const void *b) {
    const tpprof_tensor *x = &index_ctx->tensors[*(const size_t *)a];
    const tpprof_tensor *y = &index_ctx->tensors[*(const size_t *)b];
    if (x->storage_id != y->storage_id)
        return x->storage_id < y->storage_id ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

static int by_base_then_id(const void *a, const void *b) {
    const tpprof_tensor *x = &index_ctx->tensors[*(const size_t *)a];
    const tpprof_tensor *y = &index_ctx->tensors[*(const size_t *)b];
    if (x->base_id != y->base_id)
        return x->base_id < y->base_id ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

static int build_indexes(tpprof_tensors *t) {
    t->on_storage = malloc((t->ntensors + 1) * sizeof *t->on_storage);
    t->by_base = malloc((t->ntensors + 1) * sizeof *t->by_base);
    if (!t->on_storage || !t->by_base)
        return tpprof_error_set("out of memory");
    for (size_t i = 0; i < t->ntensors; i++)
        t->on_storage[i] = t->by_base[i] = i;
    index_ctx = t;
    if (t->ntensors) {
        qsort(t->on_storage, t->ntensors, sizeof *t->on_storage, by_storage_then_id);
        qsort(t->by_base, t->ntensors, sizeof *t->by_base, by_base_then_id);
    }
    return 0;
}

// The run of idx (sorted by key) whose key equals want.
static const size_t *equal_run(const tpprof_tensors *t, const size_t *idx, bool base, int64_t want,
                               size_t *n) {
    size_t lo = 0, hi = t->ntensors;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        const tpprof_tensor *x = &t->tensors[idx[mid]];
        if ((base ? x->base_id : x->storage_id) < want)
            lo = mid + 1;
        else
            hi = mid;
    }
    size_t end = lo;
    while (end < t->ntensors &&
           (base ? t->tensors[idx[end]].base_id : t->tensors[idx[end]].storage_id) == want)
        end++;
    *n = end - lo;
    return idx ? idx + lo : NULL;
}

const size_t *tpprof_tensors_on(const tpprof_tensors *t, int64_t storage_id, size_t *n) {
    return equal_run(t, t->on_storage, false, storage_id, n);
}

const size_t *tpprof_tensors_views_of(const tpprof_tensors *t, int64_t base, size_t *n) {
    return equal_run(t, t->by_base, true, base, n);
}

size_t tpprof_tensors_live_views(const tpprof_tensors *t, int64_t base) {
    size_t nv = 0, alive = 0;
    const size_t *views = tpprof_tensors_views_of(t, base, &nv);
    for (size_t i = 0; i < nv; i++)
        alive += tpprof_tensor_alive(&t->tensors[views[i]]);
    return alive;
}

const tpprof_tensor *tpprof_tensors_holder_lead(const tpprof_tensors *t, uint64_t *held) {
    const tpprof_tensor *lead = NULL;
    int64_t lead_bytes = -1;
    *held = 0;
    for (size_t i = 0; i < t->nstorages; i++) {
        const tpprof_storage *s = &t->storages[i];
        if (!tpprof_storage_alive(s))
            continue;
        size_t non = 0;
        const size_t *on = tpprof_tensors_on(t, s->id, &non);
        bool any = false;
        for (size_t k = 0; k < non; k++) {
            const tpprof_tensor *x = &t->tensors[on[k]];
            if (!tpprof_tensor_alive(x))
                continue;
            any = true;
            if (!tpprof_tensors_live_views(t, x->id) && s->nbytes > lead_bytes) {
                lead = x;
                lead_bytes = s->nbytes;
            }
        }
        *held += any;
    }
    return lead;
}

const tpprof_ref *tpprof_tensors_refs(const tpprof_tensors *t, int64_t storage_id, size_t *n) {
    size_t lo = 0, hi = t->nrefs;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (t->refs[mid].storage_id < storage_id)
            lo = mid + 1;
        else
            hi = mid;
    }
    size_t end = lo;
    while (end < t->nrefs && t->refs[end].storage_id == storage_id)
        end++;
    *n = end - lo;
    return t->refs + lo;
}

int tpprof_tensors_load(tpprof_db *db, tpprof_tensors *out) {
    *out = (tpprof_tensors){.peak_storage_time_ns = TPPROF_NO_TIME};
    int64_t v = 0;
    out->attached = tpprof_db_meta_i64(db, "tensors", &v) && v == 1;
    char *mode = tpprof_db_meta(db, "mode");
    out->full = mode && strcmp(mode, "full") == 0;
    free(mode);
    if (tpprof_db_meta_i64(db, "peak_storage_bytes", &v))
        out->peak_storage_bytes = v;
    if (tpprof_db_meta_i64(db, "peak_storage_time_ns", &v))
        out->peak_storage_time_ns = v;
    if ((tpprof_db_has_table(db, "storages") && load_storages(db, out)) ||
        (tpprof_db_has_table(db, "tensors") && load_tensor_rows(db, out)) ||
        (tpprof_db_has_table(db, "storage_refs") && load_refs(db, out)) ||
        (tpprof_db_has_table(db, "storage_lifetimes") && load_lifetimes(db, out)) ||
        (tpprof_db_has_table(db, "tensor_refs") && load_handles(db, out)) ||
        build_indexes(out)) {
        tpprof_tensors_free(out);
        return -1;
    }
    return 0;
}

void tpprof_tensors_free(tpprof_tensors *t) {
    for (size_t i = 0; i < t->nstorages; i++) {
        free(t->storages[i].allocator);
        free(t->storages[i].device);
    }
    for (size_t i = 0; i < t->ntensors; i++) {
        free(t->tensors[i].sizes);
        free(t->tensors[i].strides);
        free(t->tensors[i].dtype);
    }
    for (size_t i = 0; i < t->nlifetimes; i++)
        free(t->lifetimes[i].allocator);
    free(t->storages);
    free(t->tensors);
    free(t->refs);
    free(t->handles);
    free(t->lifetimes);
    free(t->on_storage);
    free(t->by_base);
    *t = (tpprof_tensors){0};
}

// ---------------------------------------------------------------------------
// Lookups

const tpprof_storage *tpprof_tensors_storage(const tpprof_tensors *t, int64_t id) {
    size_t lo = 0, hi = t->nstorages;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (t->storages[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < t->nstorages && t->storages[lo].id == id ? &t->storages[lo] : NULL;
}

const tpprof_tensor *tpprof_tensors_tensor(const tpprof_tensors *t, int64_t id) {
    size_t lo = 0, hi = t->ntensors;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (t->tensors[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < t->ntensors && t->tensors[lo].id == id ? &t->tensors[lo] : NULL;
}

bool tpprof_storage_alive(const tpprof_storage *s) { return s->freed_ns == TPPROF_NO_TIME; }
bool tpprof_storage_data_alive(const tpprof_storage *s) {
    return s->freed_ns == TPPROF_NO_TIME && s->data_released_ns == TPPROF_NO_TIME;
}
bool tpprof_tensor_alive(const tpprof_tensor *t) { return t->freed_ns == TPPROF_NO_TIME; }

uint64_t tpprof_tensor_numel(const tpprof_tensor *t) {
    if (t->ndim < 0)
        return 0;
    uint64_t n = 1;
    for (int i = 0; i < t->ndim; i++)
        n *= t->shape[i] > 0 ? (uint64_t)t->shape[i] : 0;
    return n;
}

uint64_t tpprof_tensor_covered_bytes(const tpprof_tensor *t) {
    uint64_t numel = tpprof_tensor_numel(t);
    if (numel == 0)
        return 0;
    // Broadcast (stride 0) and overlapping views reach fewer distinct
    // elements than numel: bound by the span.
    uint64_t span = 1;
    for (int i = 0; i < t->ndim; i++)
        span += (uint64_t)(t->shape[i] - 1) * (uint64_t)llabs(t->stride[i]);
    uint64_t elems = numel < span ? numel : span;
    return elems * (uint64_t)(t->itemsize > 0 ? t->itemsize : 1);
}

bool tpprof_ref_is_strong(int64_t op) {
    return op == TPPROF_REF_CREATE || op == TPPROF_REF_RETAIN || op == TPPROF_REF_LOCK;
}

bool tpprof_ref_unmatched(const tpprof_ref *r, bool weak) {
    if (r->tensor_id != 0)
        return false;
    return weak ? r->op == TPPROF_REF_WEAK_RETAIN : tpprof_ref_is_strong(r->op);
}

const char *tpprof_ref_op_name(int64_t op) {
    switch (op) {
    case TPPROF_REF_CREATE: return "create";
    case TPPROF_REF_RETAIN: return "retain";
    case TPPROF_REF_RELEASE: return "release";
    case TPPROF_REF_WEAK_RETAIN: return "weak_retain";
    case TPPROF_REF_WEAK_RELEASE: return "weak_release";
    case TPPROF_REF_LOCK: return "lock";
    default: return "unknown";
    }
}

// ---------------------------------------------------------------------------
// Unmatched references, grouped by stack

static int by_group_weight(const void *a, const void *b) {
    const tpprof_ref_group *x = a, *y = b;
    if (x->storages != y->storages)
        return x->storages > y->storages ? -1 : 1;
    if (x->bytes != y->bytes)
        return x->bytes > y->bytes ? -1 : 1;
    if (x->stack_id != y->stack_id)
        return x->stack_id < y->stack_id ? -1 : 1;
    return (x->op > y->op) - (x->op < y->op);
}

// One reference, or one tensor's handle retains, to be grouped: its group
// is (op, stack); storages are counted once a group.
typedef struct group_item {
    int64_t op, stack_id, storage_id, count;
} group_item;

static int by_op_stack_storage(const void *a, const void *b) {
    const group_item *x = a, *y = b;
    if (x->op != y->op)
        return x->op < y->op ? -1 : 1;
    if (x->stack_id != y->stack_id)
        return x->stack_id < y->stack_id ? -1 : 1;
    return (x->storage_id > y->storage_id) - (x->storage_id < y->storage_id);
}

// Groups v[0..m) (which it sorts and frees) by (op, stack), most storages
// first. New array (caller frees), *n its length.
static tpprof_ref_group *group_items(const tpprof_tensors *t, group_item *v, size_t m, size_t *n) {
    *n = 0;
    tpprof_ref_group *g = v ? malloc((m + 1) * sizeof *g) : NULL;
    if (!g) {
        free(v);
        return NULL;
    }
    if (m)
        qsort(v, m, sizeof *v, by_op_stack_storage);
    for (size_t i = 0; i < m; i++) {
        const group_item *r = &v[i];
        bool same_group = i > 0 && v[i - 1].op == r->op && v[i - 1].stack_id == r->stack_id;
        if (!same_group)
            g[(*n)++] = (tpprof_ref_group){.op = r->op, .stack_id = r->stack_id};
        tpprof_ref_group *x = &g[*n - 1];
        x->refs += (uint64_t)r->count;
        if (!same_group || v[i - 1].storage_id != r->storage_id) {
            const tpprof_storage *s = tpprof_tensors_storage(t, r->storage_id);
            x->storages++;
            x->bytes += s && s->nbytes > 0 ? (uint64_t)s->nbytes : 0;
        }
    }
    free(v);
    if (*n)
        qsort(g, *n, sizeof *g, by_group_weight);
    return g;
}

tpprof_ref_group *tpprof_ref_groups(const tpprof_tensors *t, bool weak, size_t *n) {
    // The unowned references of storages alive at the end.
    group_item *v = malloc((t->nrefs + 1) * sizeof *v);
    size_t m = 0;
    for (size_t i = 0; v && i < t->nrefs; i++) {
        const tpprof_ref *r = &t->refs[i];
        if (!tpprof_ref_unmatched(r, weak))
            continue;
        const tpprof_storage *s = tpprof_tensors_storage(t, r->storage_id);
        if (s && tpprof_storage_alive(s))
            v[m++] = (group_item){r->op, r->stack_id, r->storage_id, r->count};
    }
    return group_items(t, v, m, n);
}

tpprof_ref_group *tpprof_handle_groups(const tpprof_tensors *t, size_t *n) {
    // The handle retains no release matched of tensors alive at the end,
    // under the storage each tensor is on.
    group_item *v = malloc((t->nhandles + 1) * sizeof *v);
    size_t m = 0;
    for (size_t i = 0; v && i < t->nhandles; i++) {
        const tpprof_handle_ref *h = &t->handles[i];
        const tpprof_tensor *x = tpprof_tensors_tensor(t, h->tensor_id);
        if (tpprof_handle_unmatched(h) && x && tpprof_tensor_alive(x))
            v[m++] = (group_item){TPPROF_REF_RETAIN, h->stack_id, x->storage_id, h->count};
    }
    return group_items(t, v, m, n);
}

// ---------------------------------------------------------------------------
// Small views pinning big storages

static int by_pinned(const void *a, const void *b) {
    const tpprof_pinned *x = a, *y = b;
    if (x->pinned_bytes != y->pinned_bytes)
        return x->pinned_bytes > y->pinned_bytes ? -1 : 1;
    return (x->storage_id > y->storage_id) - (x->storage_id < y->storage_id);
}

tpprof_pinned *tpprof_pinned_views(const tpprof_tensors *t, bool at_peak, size_t *n) {
    *n = 0;
    tpprof_pinned *v = NULL;
    size_t cap = 0;
    for (size_t i = 0; i < t->nstorages; i++) {
        const tpprof_storage *s = &t->storages[i];
        bool live = at_peak ? s->at_peak : tpprof_storage_data_alive(s);
        if (!live || s->nbytes < (int64_t)TPPROF_PIN_MIN_BYTES)
            continue;
        // A view keeps its base tensor alive (as PyTorch's _base does), so a
        // base with a live view proves no use of its elements: only the
        // other tensors count as covering, and the base is named instead.
        const tpprof_tensor *best = NULL, *held_base = NULL;
        uint64_t best_cover = 0;
        size_t non = 0;
        const size_t *on = tpprof_tensors_on(t, s->id, &non);
        for (size_t k = 0; k < non; k++) {
            const tpprof_tensor *x = &t->tensors[on[k]];
            if (!(at_peak ? x->at_peak : tpprof_tensor_alive(x)))
                continue;
            bool has_live_view = false;
            size_t nv = 0;
            const size_t *views = tpprof_tensors_views_of(t, x->id, &nv);
            for (size_t m = 0; m < nv && !has_live_view; m++) {
                const tpprof_tensor *w = &t->tensors[views[m]];
                has_live_view = w->id != x->id && (at_peak ? w->at_peak : tpprof_tensor_alive(w));
            }
            if (has_live_view) {
                if (!held_base)
                    held_base = x;
                continue;
            }
            uint64_t c = tpprof_tensor_covered_bytes(x);
            if (!best || c > best_cover) {
                best = x;
                best_cover = c;
            }
        }
        if (!best || (double)best_cover >= TPPROF_PIN_FRACTION * (double)s->nbytes)
            continue;
        tpprof_pinned *grown = tpprof_grow(v, *n, &cap, sizeof *grown);
        if (!grown) {
            free(v);
            *n = 0;
            return NULL;
        }
        v = grown;
        v[(*n)++] = (tpprof_pinned){
            .tensor_id = best->id,
            .storage_id = s->id,
            .storage_bytes = (uint64_t)s->nbytes,
            .covered_bytes = best_cover,
            .pinned_bytes = (uint64_t)s->nbytes - best_cover,
            .held_base = held_base ? held_base->id : 0,
        };
    }
    if (*n)
        qsort(v, *n, sizeof *v, by_pinned);
    return v;
}

// ---------------------------------------------------------------------------
// Times on the command line

int tpprof_parse_time(const char *what, const char *s, int64_t *out) {
    if (!s || !(isdigit((unsigned char)s[0]) || s[0] == '.'))
        return tpprof_error_set("%s: expected a time like 20ms, 1.5s or 2000000 (ns), got '%s'",
                                what, s ? s : "");
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno == ERANGE || !isfinite(v) || v < 0)
        return tpprof_error_set("%s: expected a time like 20ms, 1.5s or 2000000 (ns), got '%s'",
                                what, s);
    double scale = 1;
    if (strcmp(end, "") == 0 || strcmp(end, "ns") == 0)
        scale = 1;
    else if (strcmp(end, "us") == 0)
        scale = 1e3;
    else if (strcmp(end, "ms") == 0)
        scale = 1e6;
    else if (strcmp(end, "s") == 0)
        scale = 1e9;
    else
        return tpprof_error_set("%s: unknown unit in '%s' (use ns, us, ms or s)", what, s);
    double ns = v * scale;
    if (ns > 9.2e18)
        return tpprof_error_set("%s: '%s' is too large", what, s);
    *out = (int64_t)(ns + 0.5);
    return 0;
}
