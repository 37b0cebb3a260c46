/*
 * tensorplay/error.h - status codes and the thread-local error message.
 *
 * Every library call that can fail returns either a tp_status or NULL and
 * leaves a human-readable message that tp_last_error() returns on the same
 * thread.  The runtime never aborts on bad user input.
 *
 *     tp_tensor *v = tp_tensor_narrow(x, 0, 4, 3);
 *     if (!v) fprintf(stderr, "narrow failed: %s\n", tp_last_error());
 */
#ifndef TENSORPLAY_ERROR_H
#define TENSORPLAY_ERROR_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tp_status {
    TP_STATUS_OK = 0,
    TP_STATUS_INVALID_ARGUMENT = 1, /* bad shape, dim, dtype or value */
    TP_STATUS_OUT_OF_BOUNDS = 2,    /* a view or index past its storage or dimension */
    TP_STATUS_OUT_OF_MEMORY = 3,    /* an allocator could not satisfy a request */
    TP_STATUS_UNSUPPORTED = 4,      /* valid request the runtime cannot do (e.g. CUDA here) */
    TP_STATUS_IO = 5,               /* a file could not be read or written */
    TP_STATUS_INTERNAL = 6,
} tp_status;

/* The message of the most recent failure on this thread (borrowed; valid
 * until the next failing call on this thread).  "" if nothing failed yet. */
const char *tp_last_error(void);

/* The status of the most recent failure on this thread. */
tp_status tp_last_status(void);

/* Clears this thread's error state. */
void tp_clear_error(void);

/* Short name of a status ("out of bounds", ...); static string. */
const char *tp_status_name(tp_status status);

#ifdef __cplusplus
}
#endif
#endif
