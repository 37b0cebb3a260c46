// perfetto.c: a recording as Chrome trace-event JSON, the format Perfetto UI
// (ui.perfetto.dev) and chrome://tracing open: counter tracks for heap, mmap
// and RSS (every timeline sample) and for each caching allocator's reserved
// and allocated bytes (after every event), and for each CUDA device's
// allocated and pool-reserved bytes (device_timeline); in --full recordings every
// allocation and free as an instant event on its thread, with its stack as
// an argument; tensor storages' lifetimes as async slices.
//
// A big --full recording would give a file no viewer opens (4 M events:
// 927 MB): past max_events allocation events on a thread, its events are
// counted, not written: a counter track per such thread ("tid N: not
// shown": allocations, frees and bytes allocated so far, at most
// HIDDEN_BUCKETS points over the run) and one instant event, category
// "tpprof", with a note saying how many were left out and why. The heap,
// mmap, RSS and allocator counters and the storage slices are always whole.
//
// Format reference: "Trace Event Format" (Google, the document
// chrome://tracing implements): times in microseconds ("ts"), "ph" the event
// type: M metadata, C counter, i instant, b/e nestable async begin/end.
// Strings go through tpprof_html_json_string, so names that are not UTF-8
// still give a file JSON parsers accept. This file only writes.
#define _POSIX_C_SOURCE 200809L
#include "viewer.h"

#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#define STACK_ARG_FRAMES 32
#define HIDDEN_BUCKETS 500

// A thread's allocation events: how many were written, and once past the
// cap what the ones not written add up to.
typedef struct thread_count {
    int64_t tid;
    bool used;
    uint64_t shown, hidden, hidden_allocs, hidden_frees, hidden_bytes;
    int64_t first_hidden_ns, bucket;
} thread_count;

typedef struct trace {
    FILE *out;
    const tpprof_profile *p;
    int64_t pid;
    bool first;
    char **stack_json; // by stack id: the "stack" argument, rendered once
    size_t nstack_json;
    uint64_t max_events;    // per thread; 0: no cap
    thread_count *threads;  // open addressing by tid
    size_t nthreads, cap_threads;
} trace;

// Start the next event object (comma and newline between events).
static void event(trace *t, const char *ph, const char *name) {
    fputs(t->first ? "\n{\"ph\":\"" : ",\n{\"ph\":\"", t->out);
    t->first = false;
    fputs(ph, t->out);
    fputs("\",\"name\":", t->out);
    tpprof_html_json_string(t->out, name);
    fprintf(t->out, ",\"pid\":%lld", (long long)t->pid);
}

// A time in ns as trace microseconds, exact: "1234.567".
static void ts(trace *t, int64_t ns) {
    if (ns < 0)
        ns = 0;
    fprintf(t->out, ",\"ts\":%lld.%03lld", (long long)(ns / 1000), (long long)(ns % 1000));
}

static void counter(trace *t, const char *name, int64_t time_ns, const char *key, int64_t value) {
    event(t, "C", name);
    ts(t, time_ns);
    fprintf(t->out, ",\"args\":{\"%s\":%lld}}", key, (long long)value);
}

// The "stack" argument of stack_id: innermost frame first. Borrowed from the
// cache (NULL when out of memory).
static const char *stack_arg(trace *t, int64_t stack_id) {
    if (stack_id < 0 || (size_t)stack_id >= t->nstack_json)
        stack_id = 0;
    if (t->stack_json[stack_id])
        return t->stack_json[stack_id];
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    if (!m)
        return NULL;
    tpprof_frame f[STACK_ARG_FRAMES];
    size_t n = tpprof_stacks_frames(t->p->stacks, stack_id, f, STACK_ARG_FRAMES, NULL);
    fputc('[', m);
    for (size_t i = 0; i < n; i++) {
        char frame[1024];
        if (i)
            fputc(',', m);
        tpprof_html_json_string(m, tpprof_frame_format(&f[i], frame, sizeof frame));
    }
    fputc(']', m);
    fclose(m);
    return t->stack_json[stack_id] = buf;
}

// ---------------------------------------------------------------------------
// Tracks

static int metadata(trace *t) {
    char name[600];
    snprintf(name, sizeof name, "%s (pid %lld)", t->p->exe ? tpprof_basename(t->p->exe) : "program",
             (long long)t->pid);
    event(t, "M", "process_name");
    fputs(",\"args\":{\"name\":", t->out);
    tpprof_html_json_string(t->out, name);
    fputs("}}", t->out);
    if (!tpprof_db_has_table(t->p->db, "threads"))
        return 0;
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(t->p->db->sql, "SELECT tid, name FROM threads ORDER BY tid", -1, &st, NULL) != SQLITE_OK)
        return tpprof_db_error(t->p->db, "reading threads");
    while (sqlite3_step(st) == SQLITE_ROW) {
        const char *tname = (const char *)sqlite3_column_text(st, 1);
        event(t, "M", "thread_name");
        fprintf(t->out, ",\"tid\":%lld,\"args\":{\"name\":", (long long)sqlite3_column_int64(st, 0));
        tpprof_html_json_string(t->out, tname ? tname : "(unnamed)");
        fputs("}}", t->out);
    }
    sqlite3_finalize(st);
    return 0;
}

static int timeline(trace *t) {
    if (!tpprof_db_has_table(t->p->db, "timeline"))
        return 0;
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(t->p->db->sql, "SELECT time_ns, heap_bytes, mmap_bytes, rss_bytes FROM timeline ORDER BY time_ns",
                           -1, &st, NULL) != SQLITE_OK)
        return tpprof_db_error(t->p->db, "reading timeline");
    while (sqlite3_step(st) == SQLITE_ROW) {
        int64_t time = sqlite3_column_int64(st, 0);
        counter(t, "heap", time, "bytes", sqlite3_column_int64(st, 1));
        counter(t, "mmap", time, "bytes", sqlite3_column_int64(st, 2));
        counter(t, "RSS", time, "bytes", sqlite3_column_int64(st, 3));
    }
    sqlite3_finalize(st);
    return 0;
}

static int allocators(trace *t) {
    tpprof_alloc_state *s = NULL;
    size_t n = 0;
    if (tpprof_alloc_load(t->p->db, &s, &n) != 0)
        return -1;
    for (size_t a = 0; a < n; a++) {
        char name[512];
        snprintf(name, sizeof name, "allocator %s (%s)", s[a].allocator, s[a].device ? s[a].device : "?");
        int64_t reserved = 0, allocated = 0;
        for (size_t i = 0; i < s[a].nevents; i++) {
            const tpprof_alloc_event *e = &s[a].events[i];
            switch (e->action) {
            case TPPROF_ALLOC_SEGMENT_RESERVE: reserved += e->segment_size; break;
            case TPPROF_ALLOC_SEGMENT_RELEASE: reserved -= e->segment_size; break;
            case TPPROF_ALLOC_BLOCK_ALLOC: allocated += e->block_size; break;
            case TPPROF_ALLOC_BLOCK_FREE: allocated -= e->block_size; break;
            default: continue; // a split or merge changes neither
            }
            event(t, "C", name);
            ts(t, e->time_ns);
            fprintf(t->out, ",\"args\":{\"reserved\":%lld,\"allocated\":%lld}}", (long long)reserved,
                    (long long)allocated);
        }
    }
    tpprof_alloc_states_free(s, n);
    return 0;
}

// Device (CUDA) memory: one counter track per device, allocated and (where
// the pools' figure was recorded) reserved, from device_timeline.
static int device_counters(trace *t) {
    if (!tpprof_db_has_table(t->p->db, "device_timeline"))
        return 0;
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(t->p->db->sql,
                           "SELECT time_ns, device, allocated_bytes, reserved_bytes FROM device_timeline "
                           "ORDER BY device, time_ns",
                           -1, &st, NULL) != SQLITE_OK)
        return tpprof_db_error(t->p->db, "reading device_timeline");
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        char name[64];
        snprintf(name, sizeof name, "CUDA device %lld", (long long)sqlite3_column_int64(st, 1));
        event(t, "C", name);
        ts(t, sqlite3_column_int64(st, 0));
        fprintf(t->out, ",\"args\":{\"allocated\":%lld", (long long)sqlite3_column_int64(st, 2));
        if (sqlite3_column_type(st, 3) != SQLITE_NULL)
            fprintf(t->out, ",\"reserved\":%lld", (long long)sqlite3_column_int64(st, 3));
        fputs("}}", t->out);
    }
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? 0 : tpprof_db_error(t->p->db, "reading device_timeline");
}

static const char *const op_names[] = {NULL, "alloc", "free", "realloc", "mmap", "munmap", "mremap", "commit"};

// The count of thread tid (made on first use); NULL when out of memory.
static thread_count *thread_of(trace *t, int64_t tid) {
    if (2 * (t->nthreads + 1) > t->cap_threads) { // grow and rehash
        size_t cap = t->cap_threads ? 2 * t->cap_threads : 64;
        thread_count *v = calloc(cap, sizeof *v);
        if (!v)
            return NULL;
        for (size_t i = 0; i < t->cap_threads; i++)
            if (t->threads[i].used) {
                size_t h = (size_t)t->threads[i].tid * 0x9E3779B97F4A7C15ull % cap;
                while (v[h].used)
                    h = (h + 1) % cap;
                v[h] = t->threads[i];
            }
        free(t->threads);
        t->threads = v;
        t->cap_threads = cap;
    }
    size_t h = (size_t)tid * 0x9E3779B97F4A7C15ull % t->cap_threads;
    while (t->threads[h].used && t->threads[h].tid != tid)
        h = (h + 1) % t->cap_threads;
    if (!t->threads[h].used) {
        t->threads[h] = (thread_count){.tid = tid, .used = true, .bucket = -1};
        t->nthreads++;
    }
    return &t->threads[h];
}

static void hidden_counter(trace *t, const thread_count *c, int64_t time_ns) {
    char name[64];
    snprintf(name, sizeof name, "tid %lld: not shown", (long long)c->tid);
    event(t, "C", name);
    ts(t, time_ns);
    fprintf(t->out, ",\"args\":{\"events\":%llu,\"allocations\":%llu,\"frees\":%llu,\"bytes_allocated\":%llu}}",
            (unsigned long long)c->hidden, (unsigned long long)c->hidden_allocs,
            (unsigned long long)c->hidden_frees, (unsigned long long)c->hidden_bytes);
}

// An event past its thread's cap: counted, and the thread's counter track
// written when the event starts a new bucket of the run.
static void hide(trace *t, thread_count *c, int64_t op, int64_t size, int64_t time_ns) {
    if (!c->hidden)
        c->first_hidden_ns = time_ns;
    c->hidden++;
    if (op == 1 || op == 4) {
        c->hidden_allocs++;
        c->hidden_bytes += size > 0 ? (uint64_t)size : 0;
    } else if (op == 2 || op == 5) {
        c->hidden_frees++;
    } else if (op == 3 || op == 6) { // a move: a free and an allocation (events counts it once)
        c->hidden_allocs++;
        c->hidden_frees++;
        c->hidden_bytes += size > 0 ? (uint64_t)size : 0;
    }
    int64_t span = t->p->summary.duration_ns / HIDDEN_BUCKETS;
    int64_t bucket = time_ns / (span > 1000 ? span : 1000);
    if (bucket != c->bucket) {
        c->bucket = bucket;
        hidden_counter(t, c, time_ns);
    }
}

// After the events: each capped thread's last counter point and its note.
static void hidden_notes(trace *t, int64_t end_ns) {
    for (size_t i = 0; i < t->cap_threads; i++) {
        const thread_count *c = &t->threads[i];
        if (!c->used || !c->hidden)
            continue;
        hidden_counter(t, c, end_ns > c->first_hidden_ns ? end_ns : c->first_hidden_ns);
        char note[300];
        snprintf(note, sizeof note,
                 "%llu allocation events of this thread after its first %llu are not shown, only counted in the "
                 "track 'tid %lld: not shown' (tpprof export --max-events-per-thread)",
                 (unsigned long long)c->hidden, (unsigned long long)t->max_events, (long long)c->tid);
        event(t, "i", "tpprof: events not shown");
        ts(t, c->first_hidden_ns);
        fprintf(t->out, ",\"tid\":%lld,\"s\":\"t\",\"cat\":\"tpprof\",\"args\":{\"note\":", (long long)c->tid);
        tpprof_html_json_string(t->out, note);
        fprintf(t->out, ",\"not_shown\":%llu}}", (unsigned long long)c->hidden);
    }
}

// --full: every allocation op as an instant event on its thread.
static int full_events(trace *t) {
    if (!t->p->mode || strcmp(t->p->mode, "full") != 0 || !tpprof_db_has_table(t->p->db, "events"))
        return 0;
    int64_t max_id = 0;
    if (tpprof_stack_nodes_count(t->p->db, NULL, &max_id) != 0)
        return -1;
    t->nstack_json = (size_t)max_id + 1;
    t->stack_json = calloc(t->nstack_json, sizeof *t->stack_json);
    if (!t->stack_json)
        return tpprof_error_set("out of memory");
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(t->p->db->sql,
                           "SELECT time_ns, tid, op, kind, address, size, stack_id, old_address FROM events "
                           "WHERE op BETWEEN 1 AND 7 ORDER BY seq",
                           -1, &st, NULL) != SQLITE_OK)
        return tpprof_db_error(t->p->db, "reading events");
    int rc;
    int64_t last_ns = 0;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        int64_t op = sqlite3_column_int64(st, 2);
        if (t->max_events) {
            thread_count *c = thread_of(t, sqlite3_column_int64(st, 1));
            if (!c) {
                sqlite3_finalize(st);
                return tpprof_error_set("out of memory");
            }
            last_ns = sqlite3_column_int64(st, 0);
            if (c->shown >= t->max_events) {
                hide(t, c, op, sqlite3_column_int64(st, 5), last_ns);
                continue;
            }
            c->shown++;
        }
        bool has_stack = sqlite3_column_type(st, 6) != SQLITE_NULL;
        // An allocation is named by its kind (malloc, calloc, mmap...).
        const char *name = op == 1 || op == 4 ? tpprof_profile_kind(t->p, sqlite3_column_int64(st, 3)) : op_names[op];
        event(t, "i", name);
        ts(t, sqlite3_column_int64(st, 0));
        fprintf(t->out, ",\"tid\":%lld,\"s\":\"t\",\"cat\":\"memory\",\"args\":{\"address\":\"0x%llx\"",
                (long long)sqlite3_column_int64(st, 1), (unsigned long long)sqlite3_column_int64(st, 4));
        if (sqlite3_column_type(st, 5) != SQLITE_NULL)
            fprintf(t->out, ",\"size\":%lld", (long long)sqlite3_column_int64(st, 5));
        if (op == 3 || op == 6)
            fprintf(t->out, ",\"old_address\":\"0x%llx\"", (unsigned long long)sqlite3_column_int64(st, 7));
        if (has_stack) {
            const char *stack = stack_arg(t, sqlite3_column_int64(st, 6));
            if (!stack) {
                sqlite3_finalize(st);
                return tpprof_error_set("out of memory");
            }
            fputs(",\"stack\":", t->out);
            fputs(stack, t->out);
        }
        fputs("}}", t->out);
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE)
        return tpprof_db_error(t->p->db, "reading events");
    hidden_notes(t, t->p->summary.duration_ns > last_ns ? t->p->summary.duration_ns : last_ns);
    return 0;
}

// Storage lifetimes: created to freed (or to the end), as async slices.
static void storages(trace *t, const tpprof_tensors *x) {
    int64_t end = t->p->summary.duration_ns;
    for (size_t i = 0; i < x->nstorages; i++) {
        const tpprof_storage *s = &x->storages[i];
        char name[600], size[32];
        // One name per allocator: Perfetto lays the slices of one name out
        // in one group of rows, not a track per storage.
        snprintf(name, sizeof name, "storage (%s)", s->allocator ? s->allocator : "borrowed");
        int64_t from = s->created_ns == TPPROF_NO_TIME ? 0 : s->created_ns;
        int64_t to = s->freed_ns != TPPROF_NO_TIME ? s->freed_ns : end > from ? end : from;
        event(t, "b", name);
        ts(t, from);
        fprintf(t->out, ",\"cat\":\"storage\",\"id\":%lld,\"tid\":0,\"args\":{\"storage\":%lld,\"nbytes\":%lld,"
                "\"size\":\"%s\",\"device\":",
                (long long)s->id, (long long)s->id, (long long)s->nbytes, tpprof_format_size((uint64_t)s->nbytes, size));
        tpprof_html_json_string(t->out, s->device);
        fprintf(t->out, ",\"alive_at_exit\":%s,\"data_released_ns\":", tpprof_storage_alive(s) ? "true" : "false");
        if (s->data_released_ns == TPPROF_NO_TIME)
            fputs("null", t->out);
        else
            fprintf(t->out, "%lld", (long long)s->data_released_ns);
        fputs(",\"stack\":", t->out);
        const char *stack = t->stack_json ? stack_arg(t, s->created_stack) : NULL;
        fputs(stack ? stack : "[]", t->out);
        fputs("}}", t->out);
        event(t, "e", name);
        ts(t, to);
        fprintf(t->out, ",\"cat\":\"storage\",\"id\":%lld,\"tid\":0}", (long long)s->id);
    }
}

int tpprof_export_perfetto(FILE *out, const tpprof_profile *p, const tpprof_tensors *x, const char *path,
                           uint64_t max_events) {
    trace t = {.out = out, .p = p, .pid = p->summary.pid ? p->summary.pid : 1, .first = true,
               .max_events = max_events};
    fputs("{\"displayTimeUnit\":\"ns\",\"otherData\":{\"tool\":\"tpprof\",\"database\":", out);
    tpprof_html_json_string(out, path);
    fputs(",\"mode\":", out);
    tpprof_html_json_string(out, p->mode);
    fputs("},\"traceEvents\":[", out);
    int rc = metadata(&t);
    if (rc == 0)
        rc = timeline(&t);
    if (rc == 0)
        rc = allocators(&t);
    if (rc == 0)
        rc = device_counters(&t);
    if (rc == 0)
        rc = full_events(&t);
    if (rc == 0 && !t.stack_json) {
        // Storage slices carry their creation stack: the cache is needed anyway.
        int64_t max_id = 0;
        if (tpprof_stack_nodes_count(p->db, NULL, &max_id) == 0) {
            t.nstack_json = (size_t)max_id + 1;
            t.stack_json = calloc(t.nstack_json, sizeof *t.stack_json);
        }
    }
    if (rc == 0)
        storages(&t, x);
    fputs("\n]}\n", out);
    for (size_t i = 0; i < t.nstack_json; i++)
        free(t.stack_json[i]);
    free(t.stack_json);
    free(t.threads);
    return rc;
}
