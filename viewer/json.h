// json.h: a small streaming JSON writer (json.c).
// Private to viewer/; viewer.h includes every header of the viewer.
#ifndef TPPROF_VIEWER_JSON_H
#define TPPROF_VIEWER_JSON_H

#include "util.h"
#include "tensors.h"

// ---------------------------------------------------------------------------
// json.c

// A streaming writer of pretty-printed JSON. Keys and values are written in
// call order; the writer inserts commas, newlines and indentation.
typedef struct tpprof_json {
    FILE *out;
    int depth;
    bool first[32];   // per depth: no element written yet
    bool after_key;
    int inline_depth; // containers opened at or deeper than this stay on one line
} tpprof_json;

void tpprof_json_init(tpprof_json *j, FILE *out);
// Init j and open the document's object with the keys every tpprof document
// starts with: format ("tpprof-report"), its version, the database path.
void tpprof_json_document_begin(tpprof_json *j, FILE *out, const char *format, int64_t version,
                                const char *database);
void tpprof_json_key(tpprof_json *j, const char *key);
void tpprof_json_object_begin(tpprof_json *j);
void tpprof_json_object_end(tpprof_json *j);
void tpprof_json_array_begin(tpprof_json *j);
void tpprof_json_array_end(tpprof_json *j);
// Begin a container whose contents stay on one line (frames, shapes).
void tpprof_json_object_begin_inline(tpprof_json *j);
void tpprof_json_array_begin_inline(tpprof_json *j);
void tpprof_json_string(tpprof_json *j, const char *s); // NULL writes null
void tpprof_json_int(tpprof_json *j, int64_t v);
void tpprof_json_uint(tpprof_json *j, uint64_t v);
void tpprof_json_bool(tpprof_json *j, bool v);
void tpprof_json_null(tpprof_json *j);
// Finish the document with a newline.
void tpprof_json_finish(tpprof_json *j);
// Length of the valid UTF-8 sequence at s (1-4), or 0 when s does not start
// one (a stray continuation byte, an overlong form, a surrogate, a cut end).
// Strings are written with U+FFFD for such bytes, so output is valid UTF-8.
size_t tpprof_utf8_len(const unsigned char *s);

// Shorthands: a key and its value in one call.
void tpprof_json_kv_int(tpprof_json *j, const char *key, int64_t v);
void tpprof_json_kv_uint(tpprof_json *j, const char *key, uint64_t v);
void tpprof_json_kv_string(tpprof_json *j, const char *key, const char *v); // NULL writes null
void tpprof_json_kv_bool(tpprof_json *j, const char *key, bool v);
// An address as a hex string ("0x7f12a000"), as the report writes every address.
void tpprof_json_kv_address(tpprof_json *j, const char *key, int64_t address);
// An id column where 0 means "none": 0 writes null.
void tpprof_json_kv_id(tpprof_json *j, const char *key, int64_t id);
// A tensor's sizes (strides false) or strides as an inline array of numbers;
// null when they did not parse (ndim -1).
void tpprof_json_kv_dims(tpprof_json *j, const char *key, const tpprof_tensor *x, bool strides);
// A tensor's keys in the open object: id, offset, sizes, strides, dtype and
// base (null for a tensor that is not a view).
void tpprof_json_tensor_fields(tpprof_json *j, const tpprof_tensor *x);

#endif
