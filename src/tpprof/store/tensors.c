// tensors.c: the tensor ledger's tables (docs/schema-tensors.md), written
// inside the store's flush transaction: allocator_events at every flush; at
// the final one storages, storage_refs, tensors, tensor_refs and the
// aggregates. Reads writer/state.h; calls nothing in writer/.
#define _GNU_SOURCE
#include "base/sqlite_api.h"
#include <stdio.h>
#include <string.h>

#include "store/rows.h"
#include "store/store.h"
#include "writer/state.h"

static void device_text(char *out, size_t cap, int type, int index) {
    if (type == 0) snprintf(out, cap, "cpu");
    else if (type == 1) snprintf(out, cap, "cuda:%d", index);
    else snprintf(out, cap, "device%d:%d", type, index);
}
// ---------------------------------------------------------------------------
// Output.

static void dims_json(char *out, size_t cap, const int64_t *v, int n) {
    size_t k = 0;
    out[k++] = '[';
    for (int i = 0; i < n && k + 24 < cap; i++)
        k += (size_t)snprintf(out + k, cap - k, i ? ", %lld" : "%lld", (long long)v[i]);
    out[k++] = ']';
    out[k] = 0;
}

static const char *const dtype_names[] = {"float32", "float64", "float16", "bfloat16", "int8", "int16",
                                          "int32", "int64", "uint8", "bool"};

static bool put_allocator_events(sqlite3 *db) {
    if (!tpprof_ledger.naev) return true;
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, "INSERT OR REPLACE INTO allocator_events(seq, time_ns, tid, allocator, action, device,"
                               " segment, segment_size, block, block_size, requested, stream, stack_id)"
                               " VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?)", -1, &st, NULL) != SQLITE_OK)
        return false;
    bool ok = true;
    for (uint64_t i = 0; i < tpprof_ledger.naev && ok; i++) {
        const struct alloc_event *e = &tpprof_ledger.aev[i];
        char dev[32];
        device_text(dev, sizeof dev, e->dev_type, e->dev_index);
        sqlite3_bind_int64(st, 1, (sqlite3_int64)e->seq);
        sqlite3_bind_int64(st, 2, (sqlite3_int64)e->time_ns);
        sqlite3_bind_int64(st, 3, tpprof_wstate_tid_of(e->thread));
        sqlite3_bind_text(st, 4, e->allocator ? tpprof_ledger.names[e->allocator] : "", -1, SQLITE_TRANSIENT);
        sqlite3_bind_int64(st, 5, e->action);
        sqlite3_bind_text(st, 6, dev, -1, SQLITE_TRANSIENT);
        sqlite3_bind_int64(st, 7, (sqlite3_int64)e->segment);
        sqlite3_bind_int64(st, 8, (sqlite3_int64)e->segment_size);
        sqlite3_bind_int64(st, 9, (sqlite3_int64)e->block);
        sqlite3_bind_int64(st, 10, (sqlite3_int64)e->block_size);
        sqlite3_bind_int64(st, 11, (sqlite3_int64)e->requested);
        sqlite3_bind_int64(st, 12, (sqlite3_int64)e->stream);
        sqlite3_bind_int64(st, 13, e->stack);
        ok = tpprof_store_step(st);
    }
    sqlite3_finalize(st);
    if (ok) tpprof_ledger.naev = 0;
    return ok;
}

// Writes the references of list `head` as rows (put: binds and steps one,
// false when it fails): a tensor's own as a row of its own (a tensor owns
// one), the others grouped by (op, stack) in a few slots, in one pass
// however many there are. A group past the slots may take two rows; the
// counts still add up. (Comparing each reference with all the others took
// 25 s for a storage with 100,000 live views.)
// (owner: the storage or tensor the list is of; holder: the tensor a reference belongs to, 0 none.)
typedef bool (*ref_row_fn)(sqlite3_stmt *st, uint64_t owner, uint32_t op, uint32_t stack, uint64_t holder, int64_t n);

static bool put_ref_rows(sqlite3_stmt *st, uint64_t owner, uint32_t head, ref_row_fn put) {
    struct ref_count { uint32_t op, stack; int64_t n; } by[16];
    int nby = 0;
    for (uint32_t r = head;; r = tpprof_ledger.refs[r].next) {
        const struct obs_ref *x = r ? &tpprof_ledger.refs[r] : NULL;
        if (x && x->tensor) { // held by a tensor: its own row
            if (!put(st, owner, x->op, x->stack, x->tensor, 1)) return false;
            continue;
        }
        int k = 0;
        while (x && k < nby && (by[k].op != x->op || by[k].stack != x->stack)) k++;
        if (!x || k == (int)(sizeof by / sizeof by[0])) { // the end, or full: write them out
            for (int i = 0; i < nby; i++)
                if (!put(st, owner, by[i].op, by[i].stack, 0, by[i].n)) return false;
            nby = k = 0;
            if (!x) return true;
        }
        if (k == nby) by[nby++] = (struct ref_count){x->op, x->stack, 0};
        by[k].n++;
    }
}

static bool storage_ref_row(sqlite3_stmt *st, uint64_t storage, uint32_t op, uint32_t stack, uint64_t holder,
                            int64_t n) {
    sqlite3_bind_int64(st, 1, (sqlite3_int64)storage);
    sqlite3_bind_int64(st, 2, op);
    sqlite3_bind_int64(st, 3, stack);
    sqlite3_bind_int64(st, 4, (sqlite3_int64)holder);
    sqlite3_bind_int64(st, 5, n);
    return tpprof_store_step(st);
}

static bool put_storages(sqlite3 *db) {
    sqlite3_stmt *st, *rs;
    if (sqlite3_prepare_v2(db, "INSERT OR REPLACE INTO storages(id, data, nbytes, allocator, device, resizable,"
                               " created_ns, created_stack, last_release_ns, data_released_ns, freed_ns, strong, weak,"
                               " block_address, block_size, block_kind, block_freed_ns, at_peak, version_bumps)"
                               " VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", -1, &st, NULL) != SQLITE_OK)
        return false;
    if (sqlite3_prepare_v2(db, "INSERT INTO storage_refs(storage_id, op, stack_id, tensor_id, count) VALUES(?,?,?,?,?)",
                           -1, &rs, NULL) != SQLITE_OK) {
        sqlite3_finalize(st);
        return false;
    }
    bool ok = true;
    for (uint32_t i = 0; i < tpprof_ledger.nst && ok; i++) {
        const struct obs_storage *s = &tpprof_ledger.st[i];
        if (!s->used) continue;
        char dev[32];
        device_text(dev, sizeof dev, s->dev_type, s->dev_index);
        sqlite3_bind_int64(st, 1, (sqlite3_int64)s->id);
        sqlite3_bind_int64(st, 2, (sqlite3_int64)s->data);
        sqlite3_bind_int64(st, 3, (sqlite3_int64)s->nbytes);
        if (s->allocator) sqlite3_bind_text(st, 4, tpprof_ledger.names[s->allocator], -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 5, dev, -1, SQLITE_TRANSIENT);
        sqlite3_bind_int(st, 6, (s->flags & S_RESIZABLE) != 0);
        sqlite3_bind_int64(st, 7, (sqlite3_int64)s->created_ns);
        sqlite3_bind_int64(st, 8, s->created_stack);
        tpprof_store_bind_time(st, 9, s->flags & S_LAST_RELEASE, s->last_release_ns);
        tpprof_store_bind_time(st, 10, s->flags & S_RELEASED, s->data_released_ns);
        tpprof_store_bind_time(st, 11, s->flags & S_FREED, s->freed_ns);
        sqlite3_bind_int64(st, 12, s->strong);
        sqlite3_bind_int64(st, 13, s->weak);
        if (s->flags & S_HAS_BLOCK) {
            sqlite3_bind_int64(st, 14, (sqlite3_int64)s->block_addr);
            sqlite3_bind_int64(st, 15, (sqlite3_int64)s->block_size);
            sqlite3_bind_int64(st, 16, s->block_kind);
        }
        tpprof_store_bind_time(st, 17, s->flags & S_BLOCK_FREED, s->block_freed_ns);
        sqlite3_bind_int(st, 18, alive_at_peak(s->created_seq, s->flags & S_RELEASED, s->released_seq));
        sqlite3_bind_int64(st, 19, s->version_bumps);
        ok = tpprof_store_step(st);
        if (ok) ok = put_ref_rows(rs, s->id, s->refs, storage_ref_row);
    }
    sqlite3_finalize(st);
    sqlite3_finalize(rs);
    return ok;
}

static bool put_tensors(sqlite3 *db) {
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, "INSERT OR REPLACE INTO tensors(id, storage_id, base_id, storage_offset, sizes, strides,"
                               " dtype, itemsize, created_ns, created_stack, freed_ns, version, at_peak)"
                               " VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?)", -1, &st, NULL) != SQLITE_OK)
        return false;
    bool ok = true;
    for (uint32_t i = 0; i < tpprof_ledger.ntn && ok; i++) {
        const struct obs_tensor *x = &tpprof_ledger.tn[i];
        if (!x->used) continue;
        char sizes[256], strides[256], dt[32];
        dims_json(sizes, sizeof sizes, x->sizes, x->ndim);
        dims_json(strides, sizeof strides, x->strides, x->ndim);
        if (x->dtype >= 0 && x->dtype < (int)(sizeof dtype_names / sizeof *dtype_names))
            snprintf(dt, sizeof dt, "%s", dtype_names[x->dtype]);
        else
            snprintf(dt, sizeof dt, "dtype%d", x->dtype);
        sqlite3_bind_int64(st, 1, (sqlite3_int64)x->id);
        sqlite3_bind_int64(st, 2, (sqlite3_int64)x->storage);
        sqlite3_bind_int64(st, 3, (sqlite3_int64)x->base);
        sqlite3_bind_int64(st, 4, x->offset);
        sqlite3_bind_text(st, 5, sizes, -1, SQLITE_TRANSIENT);
        sqlite3_bind_text(st, 6, strides, -1, SQLITE_TRANSIENT);
        sqlite3_bind_text(st, 7, dt, -1, SQLITE_TRANSIENT);
        sqlite3_bind_int64(st, 8, x->itemsize);
        sqlite3_bind_int64(st, 9, (sqlite3_int64)x->created_ns);
        sqlite3_bind_int64(st, 10, x->created_stack);
        tpprof_store_bind_time(st, 11, x->freed, x->freed_ns);
        sqlite3_bind_int64(st, 12, x->version);
        sqlite3_bind_int(st, 13, alive_at_peak(x->created_seq, x->freed, x->freed_seq));
        ok = tpprof_store_step(st);
    }
    sqlite3_finalize(st);
    return ok;
}

static bool tensor_ref_row(sqlite3_stmt *st, uint64_t tensor, uint32_t op, uint32_t stack, uint64_t holder, int64_t n) {
    (void)holder; // a handle is held by no tensor: always 0
    sqlite3_bind_int64(st, 1, (sqlite3_int64)tensor);
    sqlite3_bind_int(st, 2, (int)op);
    sqlite3_bind_int64(st, 3, stack);
    sqlite3_bind_int64(st, 4, n);
    return tpprof_store_step(st);
}

// tensor_refs: the handles of every tensor alive at the end, by (op,
// stack): the one it was created with (op 0, its created_stack), unless
// released, and the retains no release matched (op 1).
static bool put_tensor_refs(sqlite3 *db) {
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, "INSERT INTO tensor_refs(tensor_id, op, stack_id, count) VALUES(?,?,?,?)", -1, &st,
                           NULL) != SQLITE_OK)
        return false;
    bool ok = true;
    for (uint32_t i = 0; i < tpprof_ledger.ntn && ok; i++) {
        const struct obs_tensor *x = &tpprof_ledger.tn[i];
        if (!x->used || x->freed) continue;
        if (!x->creation_dropped) ok = tensor_ref_row(st, x->id, 0, x->created_stack, 0, 1);
        if (ok) ok = put_ref_rows(st, x->id, x->handle_refs, tensor_ref_row);
    }
    sqlite3_finalize(st);
    return ok;
}

static bool put_aggregates(sqlite3 *db) {
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, "INSERT OR REPLACE INTO refcount_sites(op, stack_id, count) VALUES(?,?,?)", -1, &st,
                           NULL) != SQLITE_OK)
        return false;
    bool ok = true;
    for (uint32_t i = 0; i < tpprof_ledger.nrc && ok; i++) {
        sqlite3_bind_int64(st, 1, tpprof_ledger.rc[i].op);
        sqlite3_bind_int64(st, 2, tpprof_ledger.rc[i].stack);
        sqlite3_bind_int64(st, 3, tpprof_ledger.rc[i].count);
        ok = tpprof_store_step(st);
    }
    sqlite3_finalize(st);
    if (!ok) return false;
    if (sqlite3_prepare_v2(db, "INSERT OR REPLACE INTO storage_lifetimes(allocator, count, live_ns_sum, live_ns_max,"
                               " release_delay_ns_sum, release_delay_ns_max, release_delay_count, live_count)"
                               " VALUES(?,?,?,?,?,?,?,?)", -1, &st, NULL) != SQLITE_OK)
        return false;
    for (uint32_t i = 0; i < MAX_NAMES && ok; i++) {
        const struct lifetime *l = &tpprof_ledger.lifetimes[i];
        if (!l->count) continue;
        sqlite3_bind_text(st, 1, i ? tpprof_ledger.names[i] : "(borrowed)", -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 2, l->count);
        sqlite3_bind_int64(st, 3, l->live_sum);
        sqlite3_bind_int64(st, 4, l->live_max);
        sqlite3_bind_int64(st, 5, l->delay_sum);
        sqlite3_bind_int64(st, 6, l->delay_max);
        sqlite3_bind_int64(st, 7, l->delay_count);
        sqlite3_bind_int64(st, 8, l->live_count);
        ok = tpprof_store_step(st);
    }
    sqlite3_finalize(st);
    return ok;
}

static bool exec_sql(sqlite3 *db, const char *sql) { return sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK; }

bool tpprof_store_tensors_put(sqlite3 *db, bool final) {
    if (!put_allocator_events(db)) return false;
    if (!final) return true;
    // The final state replaces whatever an earlier image (a forked parent)
    // wrote; a new file has nothing to replace (emptying its eight empty
    // tables was 70-90 us of every process's end).
    return (!tpprof_store_reopened() ||
            exec_sql(db, "DELETE FROM storages; DELETE FROM storage_refs; DELETE FROM tensors; DELETE FROM tensor_refs;"
                         " DELETE FROM graph_nodes; DELETE FROM graph_edges; DELETE FROM saved_tensors;"
                         " DELETE FROM tensor_grads;")) &&
           put_storages(db) && put_tensors(db) && put_tensor_refs(db) && put_aggregates(db) &&
           tpprof_store_graph_put(db);
}
