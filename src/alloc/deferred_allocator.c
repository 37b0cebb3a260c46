/*
 * src/alloc/deferred_allocator.c - the deferred-free wrapper allocator.
 *
 * Each allocation gets a small record that holds the inner DataPtr; the
 * outer DataPtr's ctx is that record and its deleter only links it onto a
 * FIFO queue.  A flush detaches the whole queue under the lock and runs the
 * inner deleters after dropping it, so a slow or locking inner allocator
 * never runs under our mutex.  This file must not look inside the memory it
 * hands out or second-guess the inner allocator's sizes.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../core/internal.h"
#include "tensorplay/deferred_allocator.h"

// ----------------------------------------------------------------------------
// data structures

typedef struct dfr_record {
    tp_data_ptr inner;
    size_t nbytes;
    struct tp_deferred_allocator *owner;
    struct dfr_record *next; /* queue link */
} dfr_record;

struct tp_deferred_allocator {
    tp_allocator vtable; /* vtable.state == this */
    tp_allocator *inner;
    uint64_t max_bytes, max_count;
    pthread_mutex_t mu;
    dfr_record *head, *tail; /* queued, oldest first */
    tp_deferred_allocator_stats stats;
    bool destroyed;
};

// ----------------------------------------------------------------------------
// flushing

/* Runs the inner deleters of a detached list; returns how many. */
static size_t run_batch(dfr_record *r) {
    size_t n = 0;
    while (r) {
        dfr_record *next = r->next;
        tp_data_ptr_clear(&r->inner);
        free(r);
        r = next;
        n++;
    }
    return n;
}

/* Detaches the queue and does the bookkeeping of freeing it. */
static dfr_record *detach_locked(tp_deferred_allocator *d, bool automatic) {
    dfr_record *batch = d->head;
    if (!batch) return NULL;
    d->stats.freed_count += d->stats.queued_count;
    d->stats.flush_count++;
    if (automatic) d->stats.auto_flush_count++;
    d->stats.queued_bytes = 0;
    d->stats.queued_count = 0;
    d->head = d->tail = NULL;
    return batch;
}

static void destroy_now(tp_deferred_allocator *d) {
    pthread_mutex_destroy(&d->mu);
    free(d);
}

static void record_free(void *ctx) {
    dfr_record *r = ctx;
    tp_deferred_allocator *d = r->owner;
    pthread_mutex_lock(&d->mu);
    d->stats.live_bytes -= r->nbytes;
    d->stats.live_count--;
    r->next = NULL;
    if (d->tail) d->tail->next = r;
    else d->head = r;
    d->tail = r;
    d->stats.queued_bytes += r->nbytes;
    d->stats.queued_count++;
    if (d->stats.queued_bytes > d->stats.peak_queued_bytes)
        d->stats.peak_queued_bytes = d->stats.queued_bytes;
    bool over = (d->max_bytes && d->stats.queued_bytes > d->max_bytes) ||
                (d->max_count && d->stats.queued_count > d->max_count);
    dfr_record *batch = (over || d->destroyed) ? detach_locked(d, !d->destroyed) : NULL;
    bool finish = d->destroyed && d->stats.live_count == 0;
    pthread_mutex_unlock(&d->mu);
    run_batch(batch);
    if (finish) destroy_now(d);
}

size_t tp_deferred_allocator_flush(tp_deferred_allocator *d) {
    if (!d) return 0;
    pthread_mutex_lock(&d->mu);
    dfr_record *batch = detach_locked(d, false);
    pthread_mutex_unlock(&d->mu);
    return run_batch(batch);
}

// ----------------------------------------------------------------------------
// allocation

static tp_status vt_allocate(tp_allocator *self, size_t nbytes, tp_data_ptr *out) {
    tp_deferred_allocator *d = self->state;
    memset(out, 0, sizeof *out);
    out->device = tp_device_cpu();
    if (nbytes == 0) return TP_STATUS_OK;
    dfr_record *r = calloc(1, sizeof *r);
    if (!r)
        return tp__error(TP_STATUS_OUT_OF_MEMORY,
                         "deferred allocator: no memory for the record of %zu bytes", nbytes);
    tp_status st = tp_allocator_allocate(d->inner, nbytes, &r->inner);
    if (st != TP_STATUS_OK) {
        free(r);
        return st; /* the inner allocator's message stands */
    }
    r->nbytes = nbytes;
    r->owner = d;
    pthread_mutex_lock(&d->mu);
    d->stats.live_bytes += nbytes;
    d->stats.live_count++;
    d->stats.alloc_count++;
    pthread_mutex_unlock(&d->mu);
    out->ptr = r->inner.ptr;
    out->ctx = r;
    out->deleter = record_free;
    out->device = r->inner.device;
    return TP_STATUS_OK;
}

static void vt_get_stats(tp_allocator *self, tp_allocator_stats *out) {
    tp_deferred_allocator_stats s;
    tp_deferred_allocator_get_stats(self->state, &s);
    out->current_bytes = s.live_bytes;
    out->peak_bytes = 0; /* not tracked: the inner allocator's peak is the real one */
    out->current_count = s.live_count;
    out->alloc_count = s.alloc_count;
    out->free_count = s.alloc_count - s.live_count;
}

// ----------------------------------------------------------------------------
// lifetime and stats

tp_deferred_allocator *tp_deferred_allocator_new(tp_allocator *inner, uint64_t max_queued_bytes,
                                                 uint64_t max_queued_count) {
    if (!inner || !inner->allocate) {
        tp__error(TP_STATUS_INVALID_ARGUMENT, "deferred allocator: the inner allocator is NULL");
        return NULL;
    }
    tp_deferred_allocator *d = calloc(1, sizeof *d);
    if (!d) {
        tp__error(TP_STATUS_OUT_OF_MEMORY, "deferred allocator: no memory for the allocator");
        return NULL;
    }
    d->vtable = (tp_allocator){
        .name = "deferred",
        .allocate = vt_allocate,
        .get_stats = vt_get_stats,
        .state = d,
    };
    d->inner = inner;
    d->max_bytes = max_queued_bytes;
    d->max_count = max_queued_count;
    pthread_mutex_init(&d->mu, NULL);
    return d;
}

void tp_deferred_allocator_destroy(tp_deferred_allocator *d) {
    if (!d) return;
    pthread_mutex_lock(&d->mu);
    d->destroyed = true;
    dfr_record *batch = detach_locked(d, false);
    bool finish = d->stats.live_count == 0;
    pthread_mutex_unlock(&d->mu);
    run_batch(batch);
    if (finish) destroy_now(d);
}

tp_allocator *tp_deferred_allocator_as_allocator(tp_deferred_allocator *d) {
    return d ? &d->vtable : NULL;
}

void tp_deferred_allocator_get_stats(tp_deferred_allocator *d, tp_deferred_allocator_stats *out) {
    if (!out) return;
    memset(out, 0, sizeof *out);
    if (!d) return;
    pthread_mutex_lock(&d->mu);
    *out = d->stats;
    pthread_mutex_unlock(&d->mu);
}
