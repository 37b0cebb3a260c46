/*
 * src/io/json.c - the strict JSON parser behind src/io/json.h.
 *
 * Recursive descent with an explicit depth limit (a fuzzer's "[[[[..." must
 * not overflow the stack), every length checked against the end of the input
 * (the text is not NUL-terminated), and no allocation proportional to
 * anything but the input.  It must not know about safetensors.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

// ----------------------------------------------------------------------------
// parser state

typedef struct parser {
    const char *start, *p, *end;
    int depth;
    size_t values;
    char *err;
    size_t errlen;
    bool failed;
} parser;

__attribute__((format(printf, 2, 3))) static bool fail(parser *ps, const char *fmt, ...) {
    if (ps->failed) return false;
    ps->failed = true;
    char msg[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(ps->err, ps->errlen, "%s at byte %zu", msg, (size_t)(ps->p - ps->start));
    return false;
}

static void skip_ws(parser *ps) {
    while (ps->p < ps->end &&
           (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
        ps->p++;
}

static bool parse_value(parser *ps, tp__json *out);

// ----------------------------------------------------------------------------
// growable byte buffer for decoded strings

typedef struct buf {
    char *v;
    size_t n, cap;
} buf;

static bool buf_put(buf *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 16;
        while (cap < b->n + n + 1) cap *= 2;
        char *v = realloc(b->v, cap);
        if (!v) return false;
        b->v = v, b->cap = cap;
    }
    memcpy(b->v + b->n, s, n);
    b->n += n;
    b->v[b->n] = '\0';
    return true;
}

static size_t utf8_encode(uint32_t cp, char out[4]) {
    if (cp < 0x80) { out[0] = (char)cp; return 1; }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Length of the valid UTF-8 sequence at p (RFC 3629: no overlongs, no
 * surrogates, nothing past U+10FFFF), or 0. */
static size_t utf8_valid_len(const unsigned char *p, const unsigned char *end) {
    unsigned c = p[0];
    size_t n;
    uint32_t cp, min;
    if (c < 0x80) return 1;
    if ((c & 0xE0) == 0xC0) n = 2, cp = c & 0x1F, min = 0x80;
    else if ((c & 0xF0) == 0xE0) n = 3, cp = c & 0x0F, min = 0x800;
    else if ((c & 0xF8) == 0xF0) n = 4, cp = c & 0x07, min = 0x10000;
    else return 0;
    if ((size_t)(end - p) < n) return 0;
    for (size_t i = 1; i < n; i++) {
        if ((p[i] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (p[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return n;
}

static bool parse_hex4(parser *ps, uint32_t *out) {
    if (ps->end - ps->p < 4) return fail(ps, "truncated \\u escape");
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        char c = ps->p[i];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= (uint32_t)(c - '0');
        else if (c >= 'a' && c <= 'f') v |= (uint32_t)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v |= (uint32_t)(c - 'A' + 10);
        else return fail(ps, "bad hex digit in \\u escape");
    }
    ps->p += 4;
    *out = v;
    return true;
}

// ----------------------------------------------------------------------------
// values

/* At the opening quote.  Fills a NUL-terminated decoded copy. */
static bool parse_string(parser *ps, char **out, size_t *out_len, bool *has_nul) {
    ps->p++; /* the quote */
    buf b = {0};
    *has_nul = false;
    if (!buf_put(&b, "", 0)) return fail(ps, "out of memory");
    for (;;) {
        const char *run = ps->p;
        while (ps->p < ps->end && *ps->p != '"' && *ps->p != '\\' &&
               (unsigned char)*ps->p >= 0x20 && (unsigned char)*ps->p < 0x80)
            ps->p++;
        if (ps->p > run && !buf_put(&b, run, (size_t)(ps->p - run))) goto oom;
        if (ps->p >= ps->end) { fail(ps, "unterminated string"); goto bad; }
        unsigned char c = (unsigned char)*ps->p;
        if (c == '"') {
            ps->p++;
            *out = b.v;
            *out_len = b.n;
            return true;
        }
        if (c < 0x20) { fail(ps, "raw control character in string"); goto bad; }
        if (c >= 0x80) {
            size_t n = utf8_valid_len((const unsigned char *)ps->p, (const unsigned char *)ps->end);
            if (n == 0) { fail(ps, "invalid UTF-8 in string"); goto bad; }
            if (!buf_put(&b, ps->p, n)) goto oom;
            ps->p += n;
            continue;
        }
        /* backslash */
        ps->p++;
        if (ps->p >= ps->end) { fail(ps, "unterminated string"); goto bad; }
        char e = *ps->p++;
        const char *lit = NULL;
        switch (e) {
        case '"': lit = "\""; break;
        case '\\': lit = "\\"; break;
        case '/': lit = "/"; break;
        case 'b': lit = "\b"; break;
        case 'f': lit = "\f"; break;
        case 'n': lit = "\n"; break;
        case 'r': lit = "\r"; break;
        case 't': lit = "\t"; break;
        case 'u': break;
        default: ps->p--; fail(ps, "bad escape '\\%c'", e); goto bad;
        }
        if (lit) {
            if (!buf_put(&b, lit, 1)) goto oom;
            continue;
        }
        uint32_t cp;
        if (!parse_hex4(ps, &cp)) goto bad;
        if (cp >= 0xDC00 && cp <= 0xDFFF) { fail(ps, "lone low surrogate"); goto bad; }
        if (cp >= 0xD800 && cp <= 0xDBFF) {
            uint32_t lo;
            if (ps->end - ps->p < 2 || ps->p[0] != '\\' || ps->p[1] != 'u') {
                fail(ps, "high surrogate without a low one");
                goto bad;
            }
            ps->p += 2;
            if (!parse_hex4(ps, &lo)) goto bad;
            if (lo < 0xDC00 || lo > 0xDFFF) { fail(ps, "high surrogate without a low one"); goto bad; }
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        }
        if (cp == 0) *has_nul = true;
        char enc[4];
        if (!buf_put(&b, enc, utf8_encode(cp, enc))) goto oom;
    }
oom:
    fail(ps, "out of memory");
bad:
    free(b.v);
    return false;
}

static bool parse_number(parser *ps, tp__json *out) {
    bool neg = false, integral = true, overflow = false;
    uint64_t v = 0;
    if (ps->p < ps->end && *ps->p == '-') neg = true, ps->p++;
    if (ps->p >= ps->end || *ps->p < '0' || *ps->p > '9') return fail(ps, "bad number");
    if (*ps->p == '0') {
        ps->p++;
        if (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9')
            return fail(ps, "leading zero in number");
    } else {
        while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9') {
            uint64_t d = (uint64_t)(*ps->p - '0');
            if (v > (UINT64_MAX - d) / 10) overflow = true;
            else v = v * 10 + d;
            ps->p++;
        }
    }
    if (ps->p < ps->end && *ps->p == '.') {
        integral = false;
        ps->p++;
        if (ps->p >= ps->end || *ps->p < '0' || *ps->p > '9') return fail(ps, "bad fraction");
        while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9') ps->p++;
    }
    if (ps->p < ps->end && (*ps->p == 'e' || *ps->p == 'E')) {
        integral = false;
        ps->p++;
        if (ps->p < ps->end && (*ps->p == '+' || *ps->p == '-')) ps->p++;
        if (ps->p >= ps->end || *ps->p < '0' || *ps->p > '9') return fail(ps, "bad exponent");
        while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9') ps->p++;
    }
    out->type = TP__JSON_NUMBER;
    /* -0 is a valid zero. */
    out->is_uint = integral && !overflow && (!neg || v == 0);
    out->uint_value = out->is_uint ? v : 0;
    return true;
}

static bool parse_literal(parser *ps, const char *lit, tp__json *out, tp__json_type type,
                          bool value) {
    size_t n = strlen(lit);
    if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, lit, n) != 0)
        return fail(ps, "unexpected character '%c'", *ps->p);
    ps->p += n;
    out->type = type;
    out->boolean = value;
    return true;
}

static int key_cmp(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Keys with an embedded NUL compare by their prefix here, which can only
 * report a false duplicate for such keys; the loader refuses them anyway. */
static bool has_duplicate_keys(char **keys, size_t n, const char **dup) {
    if (n < 2) return false;
    if (n <= 8) {
        for (size_t i = 0; i < n; i++)
            for (size_t j = i + 1; j < n; j++)
                if (strcmp(keys[i], keys[j]) == 0) return *dup = keys[i], true;
        return false;
    }
    char **sorted = malloc(n * sizeof *sorted);
    if (!sorted) return false; /* cannot check: treat as unique; the loader sees each key */
    memcpy(sorted, keys, n * sizeof *sorted);
    qsort(sorted, n, sizeof *sorted, key_cmp);
    bool found = false;
    for (size_t i = 1; i < n && !found; i++)
        if (strcmp(sorted[i - 1], sorted[i]) == 0) *dup = sorted[i], found = true;
    free(sorted);
    return found;
}

/* Grows an ARRAY/OBJECT by one slot. */
static bool grow(tp__json *v, size_t *cap, bool with_keys) {
    if (v->len < *cap) return true;
    size_t cap2 = *cap ? *cap * 2 : 4;
    tp__json *items = realloc(v->items, cap2 * sizeof *items);
    if (!items) return false;
    v->items = items;
    if (with_keys) {
        char **keys = realloc(v->keys, cap2 * sizeof *keys);
        if (!keys) return false;
        v->keys = keys;
        bool *nul = realloc(v->key_has_nul, cap2 * sizeof *nul);
        if (!nul) return false;
        v->key_has_nul = nul;
    }
    *cap = cap2;
    return true;
}

static bool parse_container(parser *ps, tp__json *out, bool object) {
    if (++ps->depth > TP__JSON_MAX_DEPTH) return fail(ps, "nesting deeper than %d", TP__JSON_MAX_DEPTH);
    out->type = object ? TP__JSON_OBJECT : TP__JSON_ARRAY;
    char close = object ? '}' : ']';
    size_t cap = 0;
    ps->p++;
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == close) {
        ps->p++;
        ps->depth--;
        return true;
    }
    for (;;) {
        if (!grow(out, &cap, object)) return fail(ps, "out of memory");
        tp__json *item = &out->items[out->len];
        memset(item, 0, sizeof *item);
        if (object) {
            skip_ws(ps);
            if (ps->p >= ps->end || *ps->p != '"') return fail(ps, "expected a string key");
            size_t klen;
            if (!parse_string(ps, &out->keys[out->len], &klen, &out->key_has_nul[out->len]))
                return false;
            skip_ws(ps);
            if (ps->p >= ps->end || *ps->p != ':') {
                free(out->keys[out->len]);
                return fail(ps, "expected ':'");
            }
            ps->p++;
        }
        bool ok = parse_value(ps, item);
        out->len++; /* counted even on failure so tp__json_free frees it */
        if (!ok) return false;
        skip_ws(ps);
        if (ps->p < ps->end && *ps->p == ',') {
            ps->p++;
            continue;
        }
        if (ps->p < ps->end && *ps->p == close) {
            ps->p++;
            break;
        }
        return fail(ps, object ? "expected ',' or '}'" : "expected ',' or ']'");
    }
    const char *dup;
    if (object && has_duplicate_keys(out->keys, out->len, &dup))
        return fail(ps, "duplicate key \"%.60s\"", dup);
    ps->depth--;
    return true;
}

static bool parse_value(parser *ps, tp__json *out) {
    if (++ps->values > TP__JSON_MAX_VALUES)
        return fail(ps, "more than %d values", TP__JSON_MAX_VALUES);
    skip_ws(ps);
    if (ps->p >= ps->end) return fail(ps, "unexpected end of input");
    switch (*ps->p) {
    case '{': return parse_container(ps, out, true);
    case '[': return parse_container(ps, out, false);
    case '"':
        out->type = TP__JSON_STRING;
        return parse_string(ps, &out->str, &out->len, &out->has_nul);
    case 't': return parse_literal(ps, "true", out, TP__JSON_BOOL, true);
    case 'f': return parse_literal(ps, "false", out, TP__JSON_BOOL, false);
    case 'n': return parse_literal(ps, "null", out, TP__JSON_NULL, false);
    default:
        if (*ps->p == '-' || (*ps->p >= '0' && *ps->p <= '9')) return parse_number(ps, out);
        if ((unsigned char)*ps->p >= 0x20 && (unsigned char)*ps->p < 0x7F)
            return fail(ps, "unexpected character '%c'", *ps->p);
        return fail(ps, "unexpected byte 0x%02x", (unsigned char)*ps->p);
    }
}

// ----------------------------------------------------------------------------
// public (to src/io)

static void free_children(tp__json *v) {
    if (v->type == TP__JSON_STRING) free(v->str);
    if (v->type == TP__JSON_ARRAY || v->type == TP__JSON_OBJECT) {
        for (size_t i = 0; i < v->len; i++) {
            free_children(&v->items[i]);
            if (v->keys) free(v->keys[i]);
        }
        free(v->items);
        free(v->keys);
        free(v->key_has_nul);
    }
}

void tp__json_free(tp__json *v) {
    if (!v) return;
    free_children(v);
    free(v);
}

tp__json *tp__json_parse(const char *text, size_t len, char *err, size_t errlen) {
    parser ps = {.start = text, .p = text, .end = text + len, .err = err, .errlen = errlen};
    if (errlen) err[0] = '\0';
    tp__json *root = calloc(1, sizeof *root);
    if (!root) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    if (parse_value(&ps, root)) {
        skip_ws(&ps);
        if (ps.p == ps.end) return root;
        fail(&ps, "trailing characters after the JSON value");
    }
    tp__json_free(root);
    return NULL;
}

const tp__json *tp__json_get(const tp__json *object, const char *key) {
    if (!object || object->type != TP__JSON_OBJECT) return NULL;
    for (size_t i = 0; i < object->len; i++)
        if (strcmp(object->keys[i], key) == 0) return &object->items[i];
    return NULL;
}

bool tp__json_utf8_valid(const char *s, size_t n) {
    const unsigned char *p = (const unsigned char *)s, *end = p + n;
    while (p < end) {
        size_t k = utf8_valid_len(p, end);
        if (k == 0) return false;
        p += k;
    }
    return true;
}

const char *tp__json_type_name(tp__json_type type) {
    switch (type) {
    case TP__JSON_NULL: return "null";
    case TP__JSON_BOOL: return "boolean";
    case TP__JSON_NUMBER: return "number";
    case TP__JSON_STRING: return "string";
    case TP__JSON_ARRAY: return "array";
    case TP__JSON_OBJECT: return "object";
    }
    return "?";
}
