// util.c: small shared helpers of the tpprof CLI: the thread-local error
// message, parsing of sizes/counts/percentages from the command line, and
// human-readable formatting, growing arrays. Nothing here touches a database.
#define _POSIX_C_SOURCE 200809L
#include "viewer.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

// ---------------------------------------------------------------------------
// Errors

static _Thread_local char error_message[512];

int tpprof_error_set(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(error_message, sizeof error_message, fmt, ap);
    va_end(ap);
    return -1;
}

const char *tpprof_error(void) {
    return error_message[0] ? error_message : "unknown error";
}

// ---------------------------------------------------------------------------
// Parsing

int tpprof_parse_count(const char *what, const char *s, uint64_t *out) {
    if (!s || !*s || !isdigit((unsigned char)s[0]))
        return tpprof_error_set("%s: expected a non-negative integer, got '%s'", what, s ? s : "");
    errno = 0;
    char *end = NULL;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno == ERANGE)
        return tpprof_error_set("%s: '%s' is too large", what, s);
    if (*end)
        return tpprof_error_set("%s: expected a non-negative integer, got '%s'", what, s);
    *out = v;
    return 0;
}

int tpprof_parse_size(const char *what, const char *s, uint64_t *out) {
    if (!s || !isdigit((unsigned char)s[0]))
        return tpprof_error_set("%s: expected a size like 4096, 4k, 10M or 1G, got '%s'", what,
                                s ? s : "");
    errno = 0;
    char *end = NULL;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno == ERANGE)
        return tpprof_error_set("%s: '%s' is too large", what, s);
    unsigned shift = 0;
    switch (tolower((unsigned char)*end)) {
    case 'k': shift = 10; end++; break;
    case 'm': shift = 20; end++; break;
    case 'g': shift = 30; end++; break;
    case 't': shift = 40; end++; break;
    default: break;
    }
    // Accept "4k", "4kB", "4KiB", "4096B".
    if (shift && *end == 'i')
        end++;
    if (*end == 'B' || *end == 'b')
        end++;
    if (*end)
        return tpprof_error_set("%s: expected a size like 4096, 4k, 10M or 1G, got '%s'", what, s);
    if (shift && v > (UINT64_MAX >> shift))
        return tpprof_error_set("%s: '%s' is too large", what, s);
    *out = (uint64_t)v << shift;
    return 0;
}

int tpprof_parse_percent(const char *what, const char *s, double *out) {
    if (!s || !(isdigit((unsigned char)s[0]) || s[0] == '.'))
        return tpprof_error_set("%s: expected a percentage like 5 or 2.5, got '%s'", what,
                                s ? s : "");
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno == ERANGE || !isfinite(v))
        return tpprof_error_set("%s: expected a percentage like 5 or 2.5, got '%s'", what, s);
    if (*end == '%')
        end++;
    if (*end)
        return tpprof_error_set("%s: expected a percentage like 5 or 2.5, got '%s'", what, s);
    *out = v;
    return 0;
}

// ---------------------------------------------------------------------------
// Formatting

char *tpprof_format_size(uint64_t bytes, char buf[32]) {
    static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (bytes < 1024) {
        snprintf(buf, 32, "%llu B", (unsigned long long)bytes);
        return buf;
    }
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024.0 && u < 6) {
        v /= 1024.0;
        u++;
    }
    // Three significant digits: 4.00 KiB, 12.5 MiB, 512 GiB.
    if (v < 10)
        snprintf(buf, 32, "%.2f %s", v, units[u]);
    else if (v < 100)
        snprintf(buf, 32, "%.1f %s", v, units[u]);
    else
        snprintf(buf, 32, "%.0f %s", v, units[u]);
    return buf;
}

char *tpprof_format_count(uint64_t n, char buf[32]) {
    char digits[24];
    int len = snprintf(digits, sizeof digits, "%llu", (unsigned long long)n);
    int o = 0;
    for (int i = 0; i < len; i++) {
        if (i > 0 && (len - i) % 3 == 0)
            buf[o++] = ',';
        buf[o++] = digits[i];
    }
    buf[o] = 0;
    return buf;
}

const char *tpprof_basename(const char *path) {
    if (!path)
        return "";
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

char *tpprof_strdup(const char *s) {
    return s ? strdup(s) : NULL;
}

void *tpprof_grow(void *v, size_t n, size_t *cap, size_t size) {
    if (n < *cap)
        return v;
    size_t c = *cap ? *cap * 2 : 16;
    void *grown = realloc(v, c * size);
    if (!grown) {
        tpprof_error_set("out of memory");
        return NULL;
    }
    *cap = c;
    return grown;
}

static size_t u64_home(uint64_t x, size_t cap) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    return (size_t)(x ^ (x >> 33)) & (cap - 1);
}

int tpprof_u64_set_add(tpprof_u64_set *s, uint64_t key) {
    if ((s->n + 1) * 2 > s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 1024;
        uint64_t *slots = calloc(cap, sizeof *slots);
        if (!slots) {
            tpprof_error_set("out of memory");
            return -1;
        }
        for (size_t i = 0; i < s->cap; i++)
            if (s->slots[i]) {
                size_t j = u64_home(s->slots[i], cap);
                while (slots[j])
                    j = (j + 1) & (cap - 1);
                slots[j] = s->slots[i];
            }
        free(s->slots);
        s->slots = slots;
        s->cap = cap;
    }
    size_t j = u64_home(key, s->cap);
    for (; s->slots[j]; j = (j + 1) & (s->cap - 1))
        if (s->slots[j] == key)
            return 0;
    s->slots[j] = key;
    s->n++;
    return 1;
}

bool tpprof_u64_set_has(const tpprof_u64_set *s, uint64_t key) {
    if (!s->cap)
        return false;
    for (size_t j = u64_home(key, s->cap); s->slots[j]; j = (j + 1) & (s->cap - 1))
        if (s->slots[j] == key)
            return true;
    return false;
}

void tpprof_u64_set_clear(tpprof_u64_set *s) {
    if (s->slots)
        memset(s->slots, 0, s->cap * sizeof *s->slots);
    s->n = 0;
}

void tpprof_u64_set_free(tpprof_u64_set *s) {
    free(s->slots);
    *s = (tpprof_u64_set){0};
}

// ---------------------------------------------------------------------------
// Options

int tpprof_opt(int argc, char **argv, int *i, const char *name, const char **value) {
    const char *arg = argv[*i];
    size_t len = strlen(name);
    if (strncmp(arg, name, len) != 0)
        return 0;
    if (arg[len] == '=') {
        *value = arg + len + 1;
        return 1;
    }
    if (arg[len] != 0)
        return 0;
    if (*i + 1 >= argc)
        return tpprof_error_set("%s needs a value", name);
    *value = argv[++*i];
    return 1;
}

int tpprof_opt_database(const char *command, const char *arg, const char **path) {
    if (arg[0] == '-' && arg[1] != 0)
        return tpprof_error_set("unknown option '%s' (see tpprof %s --help)", arg, command);
    if (*path)
        return tpprof_error_set("one database at a time: '%s' and '%s'", *path, arg);
    *path = arg;
    return 0;
}
