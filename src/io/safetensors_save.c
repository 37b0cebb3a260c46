/*
 * src/io/safetensors_save.c - writes tensors as a safetensors file.
 *
 * The header is built in memory first (it is small), then the file is
 * written to a temporary name next to the target and renamed into place, so
 * a failure half-way never leaves a truncated file under the real name.
 * Strided tensors are gathered element by element into a staging buffer;
 * contiguous ones are written straight from their storage.  This file must
 * not parse anything; the loader checks what we write.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../core/internal.h"
#include "json.h"
#include "safetensors_dtype.h"
#include "tensorplay/safetensors.h"

#define bad(...) tp__error(TP_STATUS_INVALID_ARGUMENT, "safetensors: " __VA_ARGS__)

// ----------------------------------------------------------------------------
// header text

typedef struct sbuf {
    char *v;
    size_t n, cap;
    bool oom;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *v = realloc(b->v, cap);
        if (!v) {
            b->oom = true;
            return;
        }
        b->v = v, b->cap = cap;
    }
    memcpy(b->v + b->n, s, n);
    b->n += n;
    b->v[b->n] = '\0';
}

static void sb_puts(sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }

static void sb_printf(sbuf *b, const char *fmt, unsigned long long v) {
    char tmp[32];
    int n = snprintf(tmp, sizeof tmp, fmt, v);
    sb_put(b, tmp, (size_t)n);
}

/* A JSON string literal; s must be valid UTF-8 (checked by the caller). */
static void sb_json_string(sbuf *b, const char *s) {
    sb_put(b, "\"", 1);
    for (const char *p = s; *p; p++) {
        unsigned char c = (unsigned char)*p;
        if (c == '"') sb_puts(b, "\\\"");
        else if (c == '\\') sb_puts(b, "\\\\");
        else if (c < 0x20) sb_printf(b, "\\u%04llx", c);
        else sb_put(b, p, 1);
    }
    sb_put(b, "\"", 1);
}

// ----------------------------------------------------------------------------
// argument checks and order

typedef struct item {
    const char *name;
    tp_tensor *t;
    size_t itemsize;
    uint64_t nbytes;
} item;

/* Largest itemsize first keeps every tensor aligned when the buffer is;
 * then by name, so the output does not depend on argument order. */
static int item_cmp(const void *a, const void *b) {
    const item *x = a, *y = b;
    if (x->itemsize != y->itemsize) return x->itemsize > y->itemsize ? -1 : 1;
    return strcmp(x->name, y->name);
}

static tp_status check_args(size_t n, const char *const *names, tp_tensor *const *tensors,
                            const char *const *metadata, item *items) {
    for (size_t i = 0; i < n; i++) {
        if (!names[i]) return bad("name %zu is NULL", i);
        if (!tensors[i]) return bad("tensor '%.64s' is NULL", names[i]);
        if (strcmp(names[i], "__metadata__") == 0)
            return bad("'__metadata__' is reserved and cannot name a tensor");
        if (!tp__json_utf8_valid(names[i], strlen(names[i])))
            return bad("tensor name %zu is not valid UTF-8", i);
        tp_device dev = tp_tensor_device(tensors[i]);
        if (dev.type != TP_DEVICE_TYPE_CPU)
            return tp__error(TP_STATUS_UNSUPPORTED, "safetensors: tensor '%.64s' is not on the CPU",
                             names[i]);
        if (!tp__st_dtype_name(tp_tensor_dtype(tensors[i])))
            return bad("tensor '%.64s' has dtype %s, which safetensors cannot hold", names[i],
                       tp_dtype_name(tp_tensor_dtype(tensors[i])));
        items[i] = (item){
            .name = names[i], .t = tensors[i],
            .itemsize = tp_tensor_itemsize(tensors[i]),
            .nbytes = (uint64_t)tp_tensor_nbytes(tensors[i]),
        };
    }
    qsort(items, n, sizeof *items, item_cmp);
    for (size_t i = 1; i < n; i++)
        for (size_t j = 0; j < i; j++)
            if (strcmp(items[i].name, items[j].name) == 0)
                return bad("tensor name '%.64s' appears twice", items[i].name);
    if (metadata) {
        for (size_t i = 0; metadata[i]; i += 2) {
            if (!metadata[i + 1]) return bad("metadata key '%.64s' has no value", metadata[i]);
            if (!tp__json_utf8_valid(metadata[i], strlen(metadata[i])) ||
                !tp__json_utf8_valid(metadata[i + 1], strlen(metadata[i + 1])))
                return bad("metadata entry %zu is not valid UTF-8", i / 2);
            for (size_t j = 0; j < i; j += 2)
                if (strcmp(metadata[i], metadata[j]) == 0)
                    return bad("metadata key '%.64s' appears twice", metadata[i]);
        }
    }
    return TP_STATUS_OK;
}

static void build_header(sbuf *h, size_t n, const item *items, const char *const *metadata) {
    sb_put(h, "{", 1);
    bool first = true;
    if (metadata && metadata[0]) {
        sb_puts(h, "\"__metadata__\":{");
        for (size_t i = 0; metadata[i]; i += 2) {
            if (i) sb_put(h, ",", 1);
            sb_json_string(h, metadata[i]);
            sb_put(h, ":", 1);
            sb_json_string(h, metadata[i + 1]);
        }
        sb_put(h, "}", 1);
        first = false;
    }
    uint64_t offset = 0;
    for (size_t i = 0; i < n; i++) {
        const item *it = &items[i];
        if (!first) sb_put(h, ",", 1);
        first = false;
        sb_json_string(h, it->name);
        sb_puts(h, ":{\"dtype\":\"");
        sb_puts(h, tp__st_dtype_name(tp_tensor_dtype(it->t)));
        sb_puts(h, "\",\"shape\":[");
        int nd = tp_tensor_dim(it->t);
        const int64_t *sizes = tp_tensor_sizes(it->t);
        for (int d = 0; d < nd; d++)
            sb_printf(h, d ? ",%llu" : "%llu", (unsigned long long)sizes[d]);
        sb_printf(h, "],\"data_offsets\":[%llu,", offset);
        offset += it->nbytes;
        sb_printf(h, "%llu]}", offset);
    }
    sb_put(h, "}", 1);
    while (h->n % 8 != 0) sb_put(h, " ", 1); /* the data buffer starts 8-aligned */
}

// ----------------------------------------------------------------------------
// data

static bool write_tensor(FILE *f, tp_tensor *t) {
    size_t nbytes = tp_tensor_nbytes(t);
    if (nbytes == 0) return true;
    if (tp_tensor_is_contiguous(t)) return fwrite(tp_tensor_data(t), 1, nbytes, f) == nbytes;
    /* Walk the elements in row-major order through a staging buffer. */
    int nd = tp_tensor_dim(t);
    const int64_t *sizes = tp_tensor_sizes(t), *strides = tp_tensor_strides(t);
    size_t isz = tp_tensor_itemsize(t);
    const char *base = tp_tensor_data(t);
    int64_t idx[TP_MAX_DIMS] = {0};
    char stage[1 << 16];
    size_t used = 0;
    int64_t numel = tp_tensor_numel(t);
    for (int64_t k = 0; k < numel; k++) {
        int64_t off = 0;
        for (int d = 0; d < nd; d++) off += idx[d] * strides[d];
        memcpy(stage + used, base + off * (int64_t)isz, isz);
        used += isz;
        if (used + isz > sizeof stage) {
            if (fwrite(stage, 1, used, f) != used) return false;
            used = 0;
        }
        for (int d = nd - 1; d >= 0; d--) {
            if (++idx[d] < sizes[d]) break;
            idx[d] = 0;
        }
    }
    return fwrite(stage, 1, used, f) == used;
}

// ----------------------------------------------------------------------------
// public

tp_status tp_safetensors_save(const char *path, size_t n, const char *const *names,
                              tp_tensor *const *tensors, const char *const *metadata) {
    if (!path) return bad("NULL path");
    if (n && (!names || !tensors)) return bad("NULL names or tensors");
    item *items = calloc(n ? n : 1, sizeof *items);
    if (!items) return tp__error(TP_STATUS_OUT_OF_MEMORY, "safetensors: no memory");
    tp_status st = check_args(n, names, tensors, metadata, items);
    sbuf h = {0};
    char *tmp = NULL;
    FILE *f = NULL;
    if (st != TP_STATUS_OK) goto done;
    build_header(&h, n, items, metadata);
    if (h.oom) {
        st = tp__error(TP_STATUS_OUT_OF_MEMORY, "safetensors: no memory for the header");
        goto done;
    }
    size_t plen = strlen(path);
    tmp = malloc(plen + 16);
    if (!tmp) {
        st = tp__error(TP_STATUS_OUT_OF_MEMORY, "safetensors: no memory");
        goto done;
    }
    snprintf(tmp, plen + 16, "%s.tmp.XXXXXX", path);
    int fd = mkstemp(tmp);
    if (fd < 0) {
        st = tp__error(TP_STATUS_IO, "safetensors: cannot create '%s': %s", tmp, strerror(errno));
        free(tmp), tmp = NULL;
        goto done;
    }
    fchmod(fd, 0644); /* mkstemp's 0600 would surprise whoever reads the file next */
    f = fdopen(fd, "wb");
    if (!f) {
        close(fd);
        st = tp__error(TP_STATUS_IO, "safetensors: cannot write '%s': %s", tmp, strerror(errno));
        goto done;
    }
    unsigned char len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (unsigned char)((uint64_t)h.n >> (8 * i));
    bool ok = fwrite(len8, 1, 8, f) == 8 && fwrite(h.v, 1, h.n, f) == h.n;
    for (size_t i = 0; ok && i < n; i++) ok = write_tensor(f, items[i].t);
    int e = errno;
    if (fclose(f) != 0 && ok) ok = false, e = errno;
    f = NULL;
    if (!ok) {
        st = tp__error(TP_STATUS_IO, "safetensors: writing '%s' failed: %s", path, strerror(e));
        goto done;
    }
    if (rename(tmp, path) != 0) {
        st = tp__error(TP_STATUS_IO, "safetensors: cannot rename '%s' to '%s': %s", tmp, path,
                       strerror(errno));
        goto done;
    }
    free(tmp), tmp = NULL;
done:
    if (tmp) {
        unlink(tmp);
        free(tmp);
    }
    free(h.v);
    free(items);
    return st;
}
