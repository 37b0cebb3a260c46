/*
 * tensorplay/safetensors.h - file-backed storage (mmap) and the safetensors
 * format: zero-copy loading, contiguous saving.
 *
 *     tp_safetensors *st;
 *     if (tp_safetensors_load("model.safetensors", &st) != TP_STATUS_OK) {
 *         fprintf(stderr, "%s\n", tp_last_error());   // e.g. "safetensors: tensor 'w': ..."
 *         return 1;
 *     }
 *     tp_tensor *w = tp_tensor_retain(tp_safetensors_get(st, "w"));  // data lives in the mapping
 *     tp_safetensors_free(st);    // the mapping stays: w's storage still holds it
 *     tp_tensor_release(w);       // last storage gone: unmapped
 *
 *     const char *names[] = {"w", "b"};
 *     tp_tensor *ts[] = {w, b};                          // any strides; written contiguous
 *     const char *meta[] = {"format", "pt", NULL};       // key, value, ..., NULL
 *     tp_safetensors_save("out.safetensors", 2, names, ts, meta);
 *
 * Format: an 8-byte little-endian header length N, N bytes of JSON, then the
 * data buffer.  The loader is strict: N <= 100,000,000 and <= file size - 8;
 * the JSON must be valid (UTF-8, no duplicate keys, at most 64 levels deep
 * and 4,000,000 values, only whitespace after it); dtypes F32 F64 F16 BF16
 * I8 I16 I32 I64 U8 BOOL only; at most TP_MAX_DIMS dims; END - BEGIN ==
 * numel * itemsize; the offsets tile the buffer from 0 to its end without
 * gaps or overlaps; BOOL bytes are 0 or 1; __metadata__ maps strings to
 * strings; names contain no NUL.  Any violation is
 * TP_STATUS_INVALID_ARGUMENT with a message starting "safetensors: ", never
 * a crash.  A tensor whose data is not aligned to its itemsize inside the
 * file (possible with other writers) is copied to aligned memory; every
 * other tensor points straight into the mapping.
 *
 * The mapping is private copy-on-write: in-place ops on a loaded tensor
 * change the process's copy of the page, never the file.  Like any mmap, a
 * file truncated by another process while mapped faults (SIGBUS) on access;
 * load from files nobody rewrites in place.
 */
#ifndef TENSORPLAY_SAFETENSORS_H
#define TENSORPLAY_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>
#include "tensorplay/storage.h"
#include "tensorplay/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

// ----------------------------------------------------------------------------
// file mappings: refcounted mmap'd files that storages can point into

typedef struct tp_file_mapping tp_file_mapping;

/* Maps the whole file at `path` (private, copy-on-write).  Returns a new
 * reference in *out, or TP_STATUS_IO with the error set.  An empty file
 * gives a mapping of size 0 with NULL data. */
tp_status tp_file_mapping_open(const char *path, tp_file_mapping **out);

void tp_file_mapping_retain(tp_file_mapping *m);
/* Drops a reference; the last one unmaps the file.  NULL is ignored. */
void tp_file_mapping_release(tp_file_mapping *m);

/* Borrowed views. */
void *tp_file_mapping_data(const tp_file_mapping *m);
size_t tp_file_mapping_size(const tp_file_mapping *m);

/* A storage over bytes [offset, offset + nbytes) of the mapping, without
 * copying: its DataPtr's ctx holds a reference on the mapping.  The storage
 * is not resizable.  Returns a new reference, or NULL with the error set
 * (TP_STATUS_OUT_OF_BOUNDS if the range leaves the file). */
tp_storage *tp_file_mapping_storage(tp_file_mapping *m, size_t offset, size_t nbytes);

/* Number of mappings alive in the process (opened and not yet unmapped). */
uint64_t tp_file_mapping_live_count(void);

// ----------------------------------------------------------------------------
// safetensors

typedef struct tp_safetensors {
    size_t count;                /* tensors, in file order of their data */
    char **names;                /* owned by this struct */
    tp_tensor **tensors;         /* references owned by this struct */
    size_t metadata_count;
    char **metadata_keys;        /* owned by this struct, in file order */
    char **metadata_values;
} tp_safetensors;

/* Maps and validates the file at `path`; on success *out is a new object
 * the caller frees with tp_safetensors_free.  TP_STATUS_IO if the file
 * cannot be read, TP_STATUS_INVALID_ARGUMENT if it is not valid. */
tp_status tp_safetensors_load(const char *path, tp_safetensors **out);

/* The same validation over bytes in memory; the tensors get their own
 * (copied) storages, so `data` may be freed afterwards. */
tp_status tp_safetensors_load_bytes(const void *data, size_t len, tp_safetensors **out);

/* Frees the struct and drops its tensor references (tensors retained by the
 * caller stay valid).  NULL is ignored. */
void tp_safetensors_free(tp_safetensors *st);

/* The tensor called `name` (borrowed), or NULL without setting an error. */
tp_tensor *tp_safetensors_get(const tp_safetensors *st, const char *name);
/* The metadata value for `key` (borrowed), or NULL. */
const char *tp_safetensors_metadata_get(const tp_safetensors *st, const char *key);

/* Writes n CPU tensors of any strides to `path` as a safetensors file: the
 * header padded with spaces to a multiple of 8, tensors ordered by
 * descending itemsize then name (so each starts aligned), data contiguous.
 * `metadata` is NULL or a NULL-terminated list key0, value0, key1, ...
 * Names must be non-NULL, unique and not "__metadata__".  On failure no
 * file is left at `path`. */
tp_status tp_safetensors_save(const char *path, size_t n, const char *const *names,
                              tp_tensor *const *tensors, const char *const *metadata);

#ifdef __cplusplus
}
#endif
#endif
