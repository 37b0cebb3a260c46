// device.c: the device memory tables (device_calls, device_blocks,
// device_timeline, and the device_events view over the first two;
// docs/schema.md) and their meta keys. Every SQL statement
// about device memory but the schema's (schema.c) is here; it reads the
// writer's device state (writer/device_state.h, through state.h) and marks
// what it wrote. Called by store.c, in the flush's transaction, with the writer's lock held.
#include <stdio.h>
#include <string.h>

#include "base/sqlite_api.h"
#include "store/store.h"
#include "writer/state.h"
#include "record/device.h"

static void bind_opt(sqlite3_stmt *st, int i, uint64_t v) {
    if (v) sqlite3_bind_int64(st, i, (sqlite3_int64)v);
    else sqlite3_bind_null(st, i);
}

static bool put_events(sqlite3 *db) {
    struct tpprof_dev_state *d = &tpprof_dev;
    if (!d->nevents) return true;
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, "INSERT OR REPLACE INTO device_calls(seq, time_ns, tid, op, api, kind, device, stream,"
                               " pool, address, size, stack_id, result, flag) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                           -1, &st, NULL) != SQLITE_OK)
        return false;
    bool ok = true;
    for (uint64_t i = 0; i < d->nevents && ok; i++) {
        const struct tpprof_dev_event *e = &d->events[i];
        sqlite3_bind_int64(st, 1, (sqlite3_int64)e->seq);
        sqlite3_bind_int64(st, 2, (sqlite3_int64)e->time_ns);
        sqlite3_bind_int64(st, 3, tpprof_wstate_tid_of(e->thread));
        sqlite3_bind_int64(st, 4, e->op);
        sqlite3_bind_text(st, 5, e->api ? e->api : "", -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 6, TPPROF_DEV_KIND_BASE + e->kind);
        sqlite3_bind_int64(st, 7, e->device);
        bind_opt(st, 8, e->stream);
        bind_opt(st, 9, e->pool);
        bind_opt(st, 10, e->address);
        bind_opt(st, 11, e->size);
        sqlite3_bind_int64(st, 12, e->stack);
        sqlite3_bind_int64(st, 13, e->result);
        sqlite3_bind_int64(st, 14, e->flag);
        ok = sqlite3_step(st) == SQLITE_DONE;
        sqlite3_reset(st);
    }
    sqlite3_finalize(st);
    if (ok) d->nevents = 0;
    return ok;
}

// A block's row is its rowid: rewritten in place when it changes (freed,
// ended by a reset). A quiet block (aggregate mode, past its site's detail
// rows: writer/device.c) is written by the final flush if still alive.
static bool put_blocks(sqlite3 *db, bool final) {
    struct tpprof_dev_state *d = &tpprof_dev;
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, "INSERT OR REPLACE INTO device_blocks(rowid, address, device, kind, size, api, stream,"
                               " stack_id, tid, alloc_ns, free_ns, free_stack_id, free_api, ended_by, pool, alloc_seq,"
                               " free_seq, free_tid, free_kind, free_device)"
                               " VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", -1, &st, NULL) != SQLITE_OK)
        return false;
    bool ok = true;
    for (uint64_t i = 0; i < d->nblocks && ok; i++) {
        struct tpprof_dev_block *b = &d->blocks[i];
        if (!b->dirty && !(final && !b->stored && !b->free_ns)) continue;
        sqlite3_bind_int64(st, 1, (sqlite3_int64)b->rowid);
        sqlite3_bind_int64(st, 2, (sqlite3_int64)b->address);
        sqlite3_bind_int64(st, 3, b->device);
        sqlite3_bind_int64(st, 4, TPPROF_DEV_KIND_BASE + b->kind);
        sqlite3_bind_int64(st, 5, (sqlite3_int64)b->size);
        sqlite3_bind_text(st, 6, b->api ? b->api : "", -1, SQLITE_STATIC);
        bind_opt(st, 7, b->stream);
        sqlite3_bind_int64(st, 8, b->stack);
        sqlite3_bind_int64(st, 9, tpprof_wstate_tid_of(b->thread));
        sqlite3_bind_int64(st, 10, (sqlite3_int64)b->alloc_ns);
        if (b->free_ns) {
            sqlite3_bind_int64(st, 11, (sqlite3_int64)b->free_ns);
            sqlite3_bind_int64(st, 12, b->free_stack);
        } else {
            sqlite3_bind_null(st, 11);
            sqlite3_bind_null(st, 12);
        }
        if (b->free_api) sqlite3_bind_text(st, 13, b->free_api, -1, SQLITE_STATIC);
        else sqlite3_bind_null(st, 13);
        if (b->ended_by) sqlite3_bind_text(st, 14, b->ended_by, -1, SQLITE_STATIC);
        else sqlite3_bind_null(st, 14);
        bind_opt(st, 15, b->pool);
        bind_opt(st, 16, b->alloc_seq);
        if (b->free_seq) {
            sqlite3_bind_int64(st, 17, (sqlite3_int64)b->free_seq);
            sqlite3_bind_int64(st, 18, tpprof_wstate_tid_of(b->free_thread));
            sqlite3_bind_int64(st, 19, TPPROF_DEV_KIND_BASE + b->free_kind);
            sqlite3_bind_int64(st, 20, b->free_device);
        } else {
            for (int c = 17; c <= 20; c++) sqlite3_bind_null(st, c);
        }
        ok = sqlite3_step(st) == SQLITE_DONE;
        sqlite3_reset(st);
        if (ok) b->dirty = false, b->stored = true;
    }
    sqlite3_finalize(st);
    if (ok) d->unwritten = 0;
    return ok;
}

// The sites changed since the last flush (every site at the final one:
// a new peak changes what untouched sites held at it), and the peaks.
static bool put_sites(sqlite3 *db, bool final) {
    struct tpprof_dev_state *d = &tpprof_dev;
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, "INSERT OR REPLACE INTO device_sites(stack_id, kind, device, api, alloc_count, alloc_bytes,"
                               " free_count, freed_bytes, peak_count, peak_bytes, total_peak_count, total_peak_bytes)"
                               " VALUES(?,?,?,?,?,?,?,?,?,?,?,?)", -1, &st, NULL) != SQLITE_OK)
        return false;
    bool ok = true;
    for (uint64_t i = 0; i < d->nsites && ok; i++) {
        struct tpprof_dev_site *s = &d->sites[i];
        if (!s->dirty && !final) continue;
        int64_t pk[4];
        tpprof_dev_site_peaks(s, pk);
        sqlite3_bind_int64(st, 1, s->stack);
        sqlite3_bind_int64(st, 2, TPPROF_DEV_KIND_BASE + s->kind);
        sqlite3_bind_int64(st, 3, s->device);
        sqlite3_bind_text(st, 4, s->api ? s->api : "", -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 5, (sqlite3_int64)s->alloc_count);
        sqlite3_bind_int64(st, 6, (sqlite3_int64)s->alloc_bytes);
        sqlite3_bind_int64(st, 7, (sqlite3_int64)s->free_count);
        sqlite3_bind_int64(st, 8, (sqlite3_int64)s->freed_bytes);
        for (int c = 0; c < 4; c++) sqlite3_bind_int64(st, 9 + c, pk[c]);
        ok = sqlite3_step(st) == SQLITE_DONE;
        sqlite3_reset(st);
        if (ok) s->dirty = false;
    }
    sqlite3_finalize(st);
    if (!ok || !final) return ok;
    if (sqlite3_prepare_v2(db, "INSERT OR REPLACE INTO device_peaks(scope, device, peak_bytes, peak_time_ns) VALUES(?,?,?,?)",
                           -1, &st, NULL) != SQLITE_OK)
        return false;
    for (int sc = 0; sc < TPPROF_DEV_SCOPES && ok; sc++) {
        if (!d->scope_peak[sc]) continue;
        const char *scope = sc == TPPROF_DEV_SCOPE_PINNED ? "pinned" : sc == TPPROF_DEV_SCOPE_TOTAL ? "total" : "device";
        sqlite3_bind_text(st, 1, scope, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 2, sc < TPPROF_DEV_MAX ? sc : -1);
        sqlite3_bind_int64(st, 3, d->scope_peak[sc]);
        sqlite3_bind_int64(st, 4, (sqlite3_int64)d->scope_peak_ns[sc]);
        ok = sqlite3_step(st) == SQLITE_DONE;
        sqlite3_reset(st);
    }
    sqlite3_finalize(st);
    return ok;
}

static bool put_samples(sqlite3 *db) {
    struct tpprof_dev_state *d = &tpprof_dev;
    if (!d->nsamples) return true;
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, "INSERT OR REPLACE INTO device_timeline(time_ns, device, allocated_bytes, reserved_bytes)"
                               " VALUES(?,?,?,?)", -1, &st, NULL) != SQLITE_OK)
        return false;
    bool ok = true;
    for (uint64_t i = 0; i < d->nsamples && ok; i++) {
        const struct tpprof_dev_sample *s = &d->samples[i];
        sqlite3_bind_int64(st, 1, (sqlite3_int64)s->time_ns);
        sqlite3_bind_int64(st, 2, s->device);
        sqlite3_bind_int64(st, 3, s->allocated);
        if (s->reserved >= 0) sqlite3_bind_int64(st, 4, s->reserved);
        else sqlite3_bind_null(st, 4);
        ok = sqlite3_step(st) == SQLITE_DONE;
        sqlite3_reset(st);
    }
    sqlite3_finalize(st);
    if (ok) d->nsamples = 0;
    return ok;
}

static bool meta(sqlite3 *db, const char *key, const char *value) {
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, "INSERT OR REPLACE INTO meta(key, value) VALUES(?, ?)", -1, &st, NULL) != SQLITE_OK)
        return false;
    sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, value, -1, SQLITE_TRANSIENT);
    bool ok = sqlite3_step(st) == SQLITE_DONE;
    sqlite3_finalize(st);
    return ok;
}

static bool meta_i(sqlite3 *db, const char *key, int64_t v) {
    char buf[32];
    snprintf(buf, sizeof buf, "%lld", (long long)v);
    return meta(db, key, buf);
}

// A periodic flush with nothing new for these tables costs no statement
// (most programs make no device call); the final one always writes the
// meta keys, so every recording says how device memory was captured.
bool tpprof_store_device_put(sqlite3 *db, bool final) {
    struct tpprof_dev_state *d = &tpprof_dev;
    static uint64_t wrapped_written = UINT64_MAX;
    static const char *how_written;
    uint64_t wrapped = atomic_load(&tpprof_device_wrapped);
    const char *how = atomic_load(&tpprof_device_capture);
    if (!how && d->any) how = "interpose";
    if (!how) how = "none";
    if (!final && !d->changed && wrapped == wrapped_written && how == how_written) return true;
    bool ok = put_events(db) && put_blocks(db, final) && put_sites(db, final) && put_samples(db) && meta(db, "device_capture", how) &&
              meta_i(db, "device_calls_failed", d->calls_failed) && meta_i(db, "device_bad_frees", d->bad_frees) &&
              meta_i(db, "device_entry_points_wrapped", (int64_t)wrapped);
    if (ok) {
        d->changed = false;
        wrapped_written = wrapped;
        how_written = how;
    }
    return ok;
}
