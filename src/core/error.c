/*
 * src/core/error.c - the thread-local error state behind tp_last_error().
 *
 * Every failing runtime call ends in tp__error(), which formats one message
 * into a per-thread buffer and records the status.  This file never prints,
 * never aborts and never allocates: it must stay safe to call from any
 * failure path, including out-of-memory ones.
 */
#include <stdarg.h>
#include <stdio.h>

#include "internal.h"

// ----------------------------------------------------------------------------
// per-thread state

/* Long enough for the longest message we build (an 8-dim shape twice plus
 * text); vsnprintf truncates anything longer rather than overflowing. */
#define TP__ERROR_MAX 1024

static _Thread_local char tp__error_msg[TP__ERROR_MAX];
static _Thread_local tp_status tp__error_status = TP_STATUS_OK;
static _Thread_local uint64_t tp__error_serial; /* failures so far on this thread */

// ----------------------------------------------------------------------------
// recording and reading

tp_status tp__error(tp_status status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tp__error_msg, sizeof tp__error_msg, fmt, ap);
    va_end(ap);
    tp__error_status = status;
    tp__error_serial++;
    return status;
}

uint64_t tp__error_count(void) { return tp__error_serial; }

const char *tp_last_error(void) { return tp__error_msg; }

tp_status tp_last_status(void) { return tp__error_status; }

void tp_clear_error(void) {
    tp__error_msg[0] = '\0';
    tp__error_status = TP_STATUS_OK;
}

const char *tp_status_name(tp_status status) {
    switch (status) {
    case TP_STATUS_OK: return "ok";
    case TP_STATUS_INVALID_ARGUMENT: return "invalid argument";
    case TP_STATUS_OUT_OF_BOUNDS: return "out of bounds";
    case TP_STATUS_OUT_OF_MEMORY: return "out of memory";
    case TP_STATUS_UNSUPPORTED: return "unsupported";
    case TP_STATUS_IO: return "i/o error";
    case TP_STATUS_INTERNAL: return "internal error";
    }
    return "unknown status";
}
