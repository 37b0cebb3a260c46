/*
 * src/io/safetensors_load.c - validates a safetensors file and turns it into
 * named tensors that point into the file's mapping.
 *
 * Order of work: every check on the header runs before a single tensor is
 * made, so a bad file never leaves half-built state behind, and every check
 * is written against the bytes actually present (lengths come from the file
 * and are never trusted).  Messages name the tensor and the numbers that
 * disagree.  This file must not write files or know about allocators beyond
 * asking for a CPU storage when a tensor has to be copied.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/internal.h"
#include "json.h"
#include "safetensors_dtype.h"
#include "tensorplay/safetensors.h"

/* Names in messages are cut here so a hostile name cannot flood a log. */
#define NAME_FMT "'%.64s%s'"
#define NAME_ARG(s) (s), (strlen(s) > 64 ? "..." : "")

// ----------------------------------------------------------------------------
// validated entries

typedef struct entry {
    const char *name; /* borrowed from the JSON tree */
    tp_dtype dtype;
    int ndim;
    int64_t sizes[TP_MAX_DIMS];
    uint64_t begin, end;
} entry;

#define bad(...) tp__error(TP_STATUS_INVALID_ARGUMENT, "safetensors: " __VA_ARGS__)

static const char *shape_str(const tp__json *shape, char *buf, size_t len) {
    size_t used = (size_t)snprintf(buf, len, "[");
    for (size_t i = 0; i < shape->len && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%llu", i ? ", " : "",
                                 (unsigned long long)shape->items[i].uint_value);
    if (used < len) snprintf(buf + used, len - used, "]");
    return buf;
}

static tp_status check_metadata(const tp__json *meta) {
    if (meta->type != TP__JSON_OBJECT)
        return bad("__metadata__ must be an object of strings, got %s",
                   tp__json_type_name(meta->type));
    for (size_t i = 0; i < meta->len; i++) {
        if (meta->key_has_nul[i]) return bad("__metadata__ key contains a NUL character");
        const tp__json *v = &meta->items[i];
        if (v->type != TP__JSON_STRING)
            return bad("__metadata__ value for " NAME_FMT " must be a string, got %s",
                       NAME_ARG(meta->keys[i]), tp__json_type_name(v->type));
        if (v->has_nul)
            return bad("__metadata__ value for " NAME_FMT " contains a NUL character",
                       NAME_ARG(meta->keys[i]));
    }
    return TP_STATUS_OK;
}

static tp_status check_tensor(const char *name, const tp__json *info, uint64_t buffer_len,
                              entry *e) {
    if (info->type != TP__JSON_OBJECT)
        return bad("tensor " NAME_FMT ": expected an object, got %s", NAME_ARG(name),
                   tp__json_type_name(info->type));
    for (size_t i = 0; i < info->len; i++) {
        const char *k = info->keys[i];
        if (strcmp(k, "dtype") && strcmp(k, "shape") && strcmp(k, "data_offsets"))
            return bad("tensor " NAME_FMT ": unknown field " NAME_FMT, NAME_ARG(name), NAME_ARG(k));
    }
    const tp__json *dtype = tp__json_get(info, "dtype");
    const tp__json *shape = tp__json_get(info, "shape");
    const tp__json *offs = tp__json_get(info, "data_offsets");
    if (!dtype) return bad("tensor " NAME_FMT ": missing \"dtype\"", NAME_ARG(name));
    if (!shape) return bad("tensor " NAME_FMT ": missing \"shape\"", NAME_ARG(name));
    if (!offs) return bad("tensor " NAME_FMT ": missing \"data_offsets\"", NAME_ARG(name));

    if (dtype->type != TP__JSON_STRING)
        return bad("tensor " NAME_FMT ": dtype must be a string, got %s", NAME_ARG(name),
                   tp__json_type_name(dtype->type));
    if (!tp__st_dtype_from_name(dtype->str, &e->dtype))
        return bad("tensor " NAME_FMT ": dtype " NAME_FMT " is not supported (supported: "
                   TP__SAFETENSORS_SUPPORTED ")", NAME_ARG(name), NAME_ARG(dtype->str));

    if (shape->type != TP__JSON_ARRAY)
        return bad("tensor " NAME_FMT ": shape must be an array, got %s", NAME_ARG(name),
                   tp__json_type_name(shape->type));
    if (shape->len > TP_MAX_DIMS)
        return bad("tensor " NAME_FMT ": %zu dims, more than the %d TensorPlay supports",
                   NAME_ARG(name), shape->len, TP_MAX_DIMS);
    uint64_t numel = 1;
    bool overflow = false;
    for (size_t i = 0; i < shape->len; i++) {
        const tp__json *d = &shape->items[i];
        if (d->type != TP__JSON_NUMBER || !d->is_uint || d->uint_value > (uint64_t)INT64_MAX)
            return bad("tensor " NAME_FMT ": shape entry %zu is not a non-negative integer "
                       "below 2^63", NAME_ARG(name), i);
        e->sizes[i] = (int64_t)d->uint_value;
        if (__builtin_mul_overflow(numel, d->uint_value, &numel)) overflow = true;
    }
    e->ndim = (int)shape->len;
    /* A zero dim makes the product 0 whatever overflowed before it. */
    for (size_t i = 0; i < shape->len; i++)
        if (shape->items[i].uint_value == 0) overflow = false, numel = 0;
    uint64_t nbytes;
    if (overflow || numel > (uint64_t)INT64_MAX ||
        __builtin_mul_overflow(numel, (uint64_t)tp_dtype_itemsize(e->dtype), &nbytes))
        return bad("tensor " NAME_FMT ": shape is too large (element count overflows)",
                   NAME_ARG(name));

    if (offs->type != TP__JSON_ARRAY || offs->len != 2)
        return bad("tensor " NAME_FMT ": data_offsets must be an array [BEGIN, END]",
                   NAME_ARG(name));
    for (size_t i = 0; i < 2; i++)
        if (offs->items[i].type != TP__JSON_NUMBER || !offs->items[i].is_uint)
            return bad("tensor " NAME_FMT ": data_offsets must be non-negative integers below "
                       "2^64", NAME_ARG(name));
    e->begin = offs->items[0].uint_value;
    e->end = offs->items[1].uint_value;
    char sbuf[256];
    if (e->end < e->begin)
        return bad("tensor " NAME_FMT ": data_offsets [%llu, %llu] end before they begin",
                   NAME_ARG(name), (unsigned long long)e->begin, (unsigned long long)e->end);
    if (e->end - e->begin != nbytes)
        return bad("tensor " NAME_FMT ": data_offsets [%llu, %llu] do not match shape %s of %s "
                   "(%llu bytes)", NAME_ARG(name), (unsigned long long)e->begin,
                   (unsigned long long)e->end, shape_str(shape, sbuf, sizeof sbuf), dtype->str,
                   (unsigned long long)nbytes);
    if (e->end > buffer_len)
        return bad("tensor " NAME_FMT ": data_offsets [%llu, %llu] reach past the end of the "
                   "%llu-byte data buffer", NAME_ARG(name), (unsigned long long)e->begin,
                   (unsigned long long)e->end, (unsigned long long)buffer_len);
    e->name = name;
    return TP_STATUS_OK;
}

static int entry_cmp(const void *a, const void *b) {
    const entry *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return 0;
}

/* Entries sorted by offset must tile [0, buffer_len) exactly. */
static tp_status check_tiling(const entry *es, size_t n, uint64_t buffer_len) {
    uint64_t expected = 0;
    for (size_t i = 0; i < n; i++) {
        if (es[i].begin > expected)
            return bad("bytes [%llu, %llu) of the data buffer belong to no tensor (a gap "
                       "before tensor " NAME_FMT ")", (unsigned long long)expected,
                       (unsigned long long)es[i].begin, NAME_ARG(es[i].name));
        if (es[i].begin < expected)
            return bad("tensor " NAME_FMT " at [%llu, %llu] overlaps tensor " NAME_FMT
                       " which ends at %llu", NAME_ARG(es[i].name),
                       (unsigned long long)es[i].begin, (unsigned long long)es[i].end,
                       NAME_ARG(es[i - 1].name), (unsigned long long)expected);
        expected = es[i].end;
    }
    if (expected != buffer_len)
        return bad("the tensors end at byte %llu but the data buffer has %llu bytes (trailing "
                   "bytes belong to no tensor)", (unsigned long long)expected,
                   (unsigned long long)buffer_len);
    return TP_STATUS_OK;
}

static tp_status check_bools(const entry *e, const unsigned char *data) {
    for (uint64_t i = 0; i < e->end - e->begin; i++)
        if (data[i] > 1)
            return bad("tensor " NAME_FMT ": BOOL element %llu is %u, not 0 or 1",
                       NAME_ARG(e->name), (unsigned long long)i, data[i]);
    return TP_STATUS_OK;
}

// ----------------------------------------------------------------------------
// building the result

void tp_safetensors_free(tp_safetensors *st) {
    if (!st) return;
    for (size_t i = 0; i < st->count; i++) {
        free(st->names ? st->names[i] : NULL);
        tp_tensor_release(st->tensors ? st->tensors[i] : NULL);
    }
    for (size_t i = 0; i < st->metadata_count; i++) {
        free(st->metadata_keys[i]);
        free(st->metadata_values[i]);
    }
    free(st->names);
    free(st->tensors);
    free(st->metadata_keys);
    free(st->metadata_values);
    free(st);
}

static tp_tensor *make_tensor(const entry *e, const unsigned char *buffer, size_t buffer_offset,
                              tp_file_mapping *map) {
    size_t itemsize = tp_dtype_itemsize(e->dtype);
    size_t nbytes = (size_t)(e->end - e->begin);
    const unsigned char *src = buffer + e->begin;
    tp_storage *s;
    if (map && (uintptr_t)src % itemsize == 0) {
        s = tp_file_mapping_storage(map, buffer_offset + (size_t)e->begin, nbytes);
    } else {
        /* In-memory input, or misaligned data a kernel could not read as
         * its type: give the tensor its own aligned copy. */
        s = tp_storage_new(nbytes, NULL, false);
        if (s && nbytes) memcpy(tp_storage_data(s), src, nbytes);
    }
    if (!s) return NULL;
    /* s is new in this call (the mapping's storage too): the tensor takes
     * its creation reference, as tp_empty's does. */
    return tp__tensor_make(s, 0, e->ndim, e->sizes, NULL, e->dtype, NULL, NULL,
                           TP__STORAGE_REF_ADOPT);
}

static char *dup_str(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

/* Shared by both entry points; map NULL means copy every tensor. */
static tp_status load(const unsigned char *bytes, size_t len, tp_file_mapping *map,
                      tp_safetensors **out) {
    if (len < 8) return bad("file is %zu bytes, too short for the 8-byte header length", len);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = (n << 8) | bytes[i];
    if (n > TP__SAFETENSORS_MAX_HEADER)
        return bad("header length %llu is over the limit of %u bytes", (unsigned long long)n,
                   TP__SAFETENSORS_MAX_HEADER);
    if (n > len - 8)
        return bad("header length %llu is more than the %zu bytes after the length field",
                   (unsigned long long)n, len - 8);
    if (n == 0 || bytes[8] != '{') return bad("header does not start with '{'");
    uint64_t buffer_len = len - 8 - n;

    char jerr[256];
    tp__json *root = tp__json_parse((const char *)bytes + 8, (size_t)n, jerr, sizeof jerr);
    if (!root) return bad("header is not valid JSON: %s", jerr);
    tp_status st = TP_STATUS_OK;
    const tp__json *meta = NULL;
    size_t ntensors = 0;
    entry *es = calloc(root->len ? root->len : 1, sizeof *es);
    tp_safetensors *res = calloc(1, sizeof *res);
    if (!es || !res) {
        st = tp__error(TP_STATUS_OUT_OF_MEMORY, "safetensors: no memory for the header");
        goto done;
    }
    for (size_t i = 0; i < root->len && st == TP_STATUS_OK; i++) {
        if (root->key_has_nul[i]) {
            st = bad("a tensor name contains a NUL character");
        } else if (strcmp(root->keys[i], "__metadata__") == 0) {
            meta = &root->items[i];
            st = check_metadata(meta);
        } else {
            st = check_tensor(root->keys[i], &root->items[i], buffer_len, &es[ntensors]);
            ntensors++;
        }
    }
    if (st != TP_STATUS_OK) goto done;
    qsort(es, ntensors, sizeof *es, entry_cmp);
    if ((st = check_tiling(es, ntensors, buffer_len)) != TP_STATUS_OK) goto done;
    const unsigned char *buffer = bytes + 8 + n;
    for (size_t i = 0; i < ntensors; i++)
        if (es[i].dtype == TP_DTYPE_BOOL && (st = check_bools(&es[i], buffer + es[i].begin)))
            goto done;

    /* Valid: build the result. */
    size_t nmeta = meta ? meta->len : 0;
    res->names = calloc(ntensors ? ntensors : 1, sizeof *res->names);
    res->tensors = calloc(ntensors ? ntensors : 1, sizeof *res->tensors);
    res->metadata_keys = calloc(nmeta ? nmeta : 1, sizeof(char *));
    res->metadata_values = calloc(nmeta ? nmeta : 1, sizeof(char *));
    if (!res->names || !res->tensors || !res->metadata_keys || !res->metadata_values) {
        st = tp__error(TP_STATUS_OUT_OF_MEMORY, "safetensors: no memory for the result");
        goto done;
    }
    for (size_t i = 0; i < nmeta; i++) {
        res->metadata_keys[i] = dup_str(meta->keys[i]);
        res->metadata_values[i] = dup_str(meta->items[i].str);
        res->metadata_count++;
        if (!res->metadata_keys[i] || !res->metadata_values[i]) {
            st = tp__error(TP_STATUS_OUT_OF_MEMORY, "safetensors: no memory for the metadata");
            goto done;
        }
    }
    for (size_t i = 0; i < ntensors; i++) {
        res->names[i] = dup_str(es[i].name);
        res->tensors[i] = make_tensor(&es[i], buffer, (size_t)(8 + n), map);
        res->count++;
        if (!res->names[i] || !res->tensors[i]) {
            st = res->names[i] ? tp_last_status()
                               : tp__error(TP_STATUS_OUT_OF_MEMORY, "safetensors: no memory");
            goto done;
        }
    }
done:
    tp__json_free(root);
    free(es);
    if (st != TP_STATUS_OK) {
        tp_safetensors_free(res);
        res = NULL;
    }
    *out = res;
    return st;
}

// ----------------------------------------------------------------------------
// public

tp_status tp_safetensors_load(const char *path, tp_safetensors **out) {
    if (!out) return bad("NULL output");
    *out = NULL;
    tp_file_mapping *map;
    tp_status st = tp_file_mapping_open(path, &map);
    if (st != TP_STATUS_OK) return st;
    st = load(tp_file_mapping_data(map), tp_file_mapping_size(map), map, out);
    tp_file_mapping_release(map); /* the storages hold their own references */
    return st;
}

tp_status tp_safetensors_load_bytes(const void *data, size_t len, tp_safetensors **out) {
    if (!out) return bad("NULL output");
    *out = NULL;
    if (!data && len) return bad("NULL data");
    static const unsigned char empty[1];
    return load(data ? data : empty, len, NULL, out);
}

tp_tensor *tp_safetensors_get(const tp_safetensors *st, const char *name) {
    if (!st || !name) return NULL;
    for (size_t i = 0; i < st->count; i++)
        if (strcmp(st->names[i], name) == 0) return st->tensors[i];
    return NULL;
}

const char *tp_safetensors_metadata_get(const tp_safetensors *st, const char *key) {
    if (!st || !key) return NULL;
    for (size_t i = 0; i < st->metadata_count; i++)
        if (strcmp(st->metadata_keys[i], key) == 0) return st->metadata_values[i];
    return NULL;
}
