/*
 * src/alloc/alloc_conf.c - parses TP_ALLOC_CONF ("max_split_size_mb:128,
 * roundup_power2_divisions:4") into a tp_caching_allocator_config.
 *
 * Strict on purpose: a typo in an environment variable that silently does
 * nothing costs hours, so unknown keys, missing values, junk after numbers
 * and out-of-range values are all errors naming the offending token.  This
 * file must not read any other environment variable or touch an allocator.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "../core/internal.h"
#include "tensorplay/caching_allocator.h"

#define MIB ((uint64_t)1 << 20)

// ----------------------------------------------------------------------------
// tokens

typedef struct span {
    const char *p;
    size_t n;
} span;

static span span_trim(const char *p, size_t n) {
    while (n > 0 && isspace((unsigned char)p[0])) p++, n--;
    while (n > 0 && isspace((unsigned char)p[n - 1])) n--;
    return (span){p, n};
}

static bool span_eq(span s, const char *lit) {
    return s.n == strlen(lit) && memcmp(s.p, lit, s.n) == 0;
}

/* Decimal digits only (no sign, no hex, no spaces); false on overflow. */
static bool span_to_u64(span s, uint64_t *out) {
    if (s.n == 0 || s.n > 20) return false;
    uint64_t v = 0;
    for (size_t i = 0; i < s.n; i++) {
        if (s.p[i] < '0' || s.p[i] > '9') return false;
        uint64_t d = (uint64_t)(s.p[i] - '0');
        if (v > (UINT64_MAX - d) / 10) return false;
        v = v * 10 + d;
    }
    *out = v;
    return true;
}

// ----------------------------------------------------------------------------
// one key:value pair

static tp_status apply_pair(span key, span value, tp_caching_allocator_config *cfg) {
    uint64_t v;
    if (span_eq(key, "max_split_size_mb")) {
        if (!span_to_u64(value, &v))
            return tp__error(TP_STATUS_INVALID_ARGUMENT,
                             "TP_ALLOC_CONF: max_split_size_mb: '%.*s' is not a whole number",
                             (int)value.n, value.p);
        if (v <= 20)
            return tp__error(TP_STATUS_INVALID_ARGUMENT,
                             "TP_ALLOC_CONF: max_split_size_mb too small, must be > 20");
        /* Anything past 2^44 MiB is beyond any address space: treat as no limit. */
        cfg->max_split_size = v > (UINT64_MAX / MIB) ? TP_CACHING_UNLIMITED : v * MIB;
        return TP_STATUS_OK;
    }
    if (span_eq(key, "roundup_power2_divisions")) {
        if (!span_to_u64(value, &v))
            return tp__error(TP_STATUS_INVALID_ARGUMENT,
                             "TP_ALLOC_CONF: roundup_power2_divisions: '%.*s' is not a whole number",
                             (int)value.n, value.p);
        if (v > 64 || (v & (v - 1)) != 0)
            return tp__error(TP_STATUS_INVALID_ARGUMENT,
                             "TP_ALLOC_CONF: roundup_power2_divisions must be 0 or a power of 2 "
                             "up to 64, got %llu", (unsigned long long)v);
        cfg->roundup_power2_divisions = (uint32_t)v;
        return TP_STATUS_OK;
    }
    if (span_eq(key, "backend")) {
        /* Read by the CUDA device to pick its allocator; the caching
         * allocator itself ignores it (PyTorch: cudaMallocAsync ignores the
         * other keys). */
        if (span_eq(value, "native")) cfg->backend = TP_CACHING_BACKEND_NATIVE;
        else if (span_eq(value, "cudaMallocAsync")) cfg->backend = TP_CACHING_BACKEND_CUDA_MALLOC_ASYNC;
        else
            return tp__error(TP_STATUS_INVALID_ARGUMENT,
                             "TP_ALLOC_CONF: backend: '%.*s' is not native or cudaMallocAsync",
                             (int)value.n, value.p);
        return TP_STATUS_OK;
    }
    return tp__error(TP_STATUS_INVALID_ARGUMENT,
                     "TP_ALLOC_CONF: unknown key '%.*s' (known: max_split_size_mb, "
                     "roundup_power2_divisions, backend)", (int)key.n, key.p);
}

// ----------------------------------------------------------------------------
// public

void tp_caching_allocator_config_default(tp_caching_allocator_config *out) {
    out->max_split_size = TP_CACHING_UNLIMITED;
    out->roundup_power2_divisions = 0;
    out->backend = TP_CACHING_BACKEND_NATIVE;
}

tp_status tp_caching_allocator_config_parse(const char *text, tp_caching_allocator_config *out) {
    if (!out) return tp__error(TP_STATUS_INVALID_ARGUMENT, "TP_ALLOC_CONF: NULL output");
    tp_caching_allocator_config cfg = *out;
    if (!text) text = "";
    if (span_trim(text, strlen(text)).n == 0) {
        tp_caching_allocator_config_default(out);
        return TP_STATUS_OK;
    }
    tp_caching_allocator_config_default(&cfg);
    const char *p = text;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        span item = span_trim(p, n);
        const char *colon = memchr(item.p, ':', item.n);
        if (item.n == 0 || !colon)
            return tp__error(TP_STATUS_INVALID_ARGUMENT,
                             "TP_ALLOC_CONF: expected key:value, got '%.*s'", (int)item.n, item.p);
        span key = span_trim(item.p, (size_t)(colon - item.p));
        span value = span_trim(colon + 1, item.n - (size_t)(colon - item.p) - 1);
        tp_status st = apply_pair(key, value, &cfg);
        if (st != TP_STATUS_OK) return st;
        if (!comma) break;
        p = comma + 1;
    }
    *out = cfg;
    return TP_STATUS_OK;
}

tp_status tp_caching_allocator_config_from_env(tp_caching_allocator_config *out) {
    return tp_caching_allocator_config_parse(getenv("TP_ALLOC_CONF"), out);
}
