// json.c: a streaming writer of pretty-printed JSON for the --format json
// of `tpprof report` (contract: docs/report-json.md), `graph` and
// `fragmentation`, and the key-value shorthands those commands share.
//
// It tracks only what it needs to place commas and indentation; it does not
// check that callers pair keys with values (the commands are the only
// callers). Strings are escaped per RFC 8259; bytes >= 0x80 pass through, so
// UTF-8 names stay readable.
#include "viewer.h"

#include <inttypes.h>

// ---------------------------------------------------------------------------
// Layout

static void newline(tpprof_json *j) {
    fputc('\n', j->out);
    for (int i = 0; i < j->depth; i++)
        fputs("  ", j->out);
}

static bool is_inline(const tpprof_json *j) {
    return j->inline_depth > 0 && j->depth >= j->inline_depth;
}

// Called before every value and every key.
static void element(tpprof_json *j) {
    if (j->after_key) {
        j->after_key = false;
        return;
    }
    if (j->depth == 0)
        return;
    bool first = j->first[j->depth];
    j->first[j->depth] = false;
    if (is_inline(j)) {
        if (!first)
            fputs(", ", j->out);
    } else {
        if (!first)
            fputc(',', j->out);
        newline(j);
    }
}

size_t tpprof_utf8_len(const unsigned char *s) {
    unsigned c = s[0];
    if (c < 0x80)
        return 1;
    size_t n = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
    for (size_t i = 1; i < n; i++)
        if ((s[i] & 0xc0) != 0x80)
            return 0;
    if (n == 3 && ((c == 0xe0 && s[1] < 0xa0) || (c == 0xed && s[1] >= 0xa0)))
        return 0; // overlong, or a UTF-16 surrogate
    if (n == 4 && ((c == 0xf0 && s[1] < 0x90) || (c == 0xf4 && s[1] >= 0x90)))
        return 0; // overlong, or above U+10FFFF
    return n;
}

static void write_escaped(FILE *out, const char *s) {
    fputc('"', out);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        // JSON is UTF-8: a byte that is not (a function or path name in
        // another encoding) is written as U+FFFD, so parsers accept the file.
        size_t n = *p < 0x80 ? 1 : tpprof_utf8_len(p);
        if (n == 0) {
            fputs("\\ufffd", out);
            continue;
        }
        if (n > 1) {
            fwrite(p, 1, n, out);
            p += n - 1;
            continue;
        }
        switch (*p) {
        case '"': fputs("\\\"", out); break;
        case '\\': fputs("\\\\", out); break;
        case '\n': fputs("\\n", out); break;
        case '\r': fputs("\\r", out); break;
        case '\t': fputs("\\t", out); break;
        default:
            if (*p < 0x20)
                fprintf(out, "\\u%04x", *p);
            else
                fputc(*p, out);
        }
    }
    fputc('"', out);
}

void tpprof_json_init(tpprof_json *j, FILE *out) {
    *j = (tpprof_json){.out = out};
}

void tpprof_json_key(tpprof_json *j, const char *key) {
    element(j);
    write_escaped(j->out, key);
    fputs(": ", j->out);
    j->after_key = true;
}

static void open_container(tpprof_json *j, char c, bool one_line) {
    element(j);
    fputc(c, j->out);
    if (j->depth < 31)
        j->depth++;
    j->first[j->depth] = true;
    if (one_line && j->inline_depth == 0)
        j->inline_depth = j->depth;
}

static void close_container(tpprof_json *j, char c) {
    bool was_inline = is_inline(j);
    bool empty = j->first[j->depth];
    if (j->inline_depth == j->depth)
        j->inline_depth = 0;
    if (j->depth > 0)
        j->depth--;
    if (!was_inline && !empty)
        newline(j);
    fputc(c, j->out);
}

void tpprof_json_object_begin(tpprof_json *j) { open_container(j, '{', false); }
void tpprof_json_object_begin_inline(tpprof_json *j) { open_container(j, '{', true); }
void tpprof_json_object_end(tpprof_json *j) { close_container(j, '}'); }
void tpprof_json_array_begin(tpprof_json *j) { open_container(j, '[', false); }
void tpprof_json_array_begin_inline(tpprof_json *j) { open_container(j, '[', true); }
void tpprof_json_array_end(tpprof_json *j) { close_container(j, ']'); }

// ---------------------------------------------------------------------------
// Values

void tpprof_json_string(tpprof_json *j, const char *s) {
    if (s == NULL) {
        tpprof_json_null(j);
        return;
    }
    element(j);
    write_escaped(j->out, s);
}

void tpprof_json_int(tpprof_json *j, int64_t v) {
    element(j);
    fprintf(j->out, "%lld", (long long)v);
}

void tpprof_json_uint(tpprof_json *j, uint64_t v) {
    element(j);
    fprintf(j->out, "%llu", (unsigned long long)v);
}

void tpprof_json_bool(tpprof_json *j, bool v) {
    element(j);
    fputs(v ? "true" : "false", j->out);
}

void tpprof_json_null(tpprof_json *j) {
    element(j);
    fputs("null", j->out);
}

void tpprof_json_finish(tpprof_json *j) {
    fputc('\n', j->out);
}

// ---------------------------------------------------------------------------
// Shorthands: the header every document starts with; a key and its value in one call

void tpprof_json_document_begin(tpprof_json *j, FILE *out, const char *format, int64_t version,
                                const char *database) {
    tpprof_json_init(j, out);
    tpprof_json_object_begin(j);
    tpprof_json_kv_string(j, "format", format);
    tpprof_json_kv_int(j, "version", version);
    tpprof_json_kv_string(j, "database", database);
}

void tpprof_json_kv_int(tpprof_json *j, const char *key, int64_t v) {
    tpprof_json_key(j, key);
    tpprof_json_int(j, v);
}

void tpprof_json_kv_uint(tpprof_json *j, const char *key, uint64_t v) {
    tpprof_json_key(j, key);
    tpprof_json_uint(j, v);
}

void tpprof_json_kv_string(tpprof_json *j, const char *key, const char *v) {
    tpprof_json_key(j, key);
    tpprof_json_string(j, v);
}

void tpprof_json_kv_bool(tpprof_json *j, const char *key, bool v) {
    tpprof_json_key(j, key);
    tpprof_json_bool(j, v);
}

void tpprof_json_kv_address(tpprof_json *j, const char *key, int64_t address) {
    char buf[24];
    snprintf(buf, sizeof buf, "0x%" PRIx64, (uint64_t)address);
    tpprof_json_kv_string(j, key, buf);
}

void tpprof_json_kv_id(tpprof_json *j, const char *key, int64_t id) {
    tpprof_json_key(j, key);
    if (id)
        tpprof_json_int(j, id);
    else
        tpprof_json_null(j);
}

void tpprof_json_kv_dims(tpprof_json *j, const char *key, const tpprof_tensor *x, bool strides) {
    tpprof_json_key(j, key);
    if (x->ndim < 0) {
        tpprof_json_null(j);
        return;
    }
    tpprof_json_array_begin_inline(j);
    for (int i = 0; i < x->ndim; i++)
        tpprof_json_int(j, strides ? x->stride[i] : x->shape[i]);
    tpprof_json_array_end(j);
}

// Shared by `report --storages` and `graph`, so that a tensor reads the same
// in both documents.
void tpprof_json_tensor_fields(tpprof_json *j, const tpprof_tensor *x) {
    tpprof_json_kv_int(j, "id", x->id);
    tpprof_json_kv_int(j, "offset", x->offset);
    tpprof_json_kv_dims(j, "sizes", x, false);
    tpprof_json_kv_dims(j, "strides", x, true);
    tpprof_json_kv_string(j, "dtype", x->dtype);
    tpprof_json_kv_id(j, "base", x->base_id);
}
