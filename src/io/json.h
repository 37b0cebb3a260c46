/*
 * src/io/json.h - a small strict JSON parser for file headers (safetensors).
 *
 * RFC 8259 without extensions: no comments, no trailing commas, no NaN, no
 * leading zeros, strings must be valid UTF-8 without raw control characters,
 * lone surrogates are refused, duplicate object keys are refused, nesting is
 * limited to TP__JSON_MAX_DEPTH and the number of values to
 * TP__JSON_MAX_VALUES.  Private to src/io; not a general JSON
 * library: it builds a tree and only answers the questions a header asks.
 */
#ifndef TENSORPLAY_IO_JSON_H
#define TENSORPLAY_IO_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TP__JSON_MAX_DEPTH 64
/* Each value costs a ~56-byte node, so a 100 MB header of "0," pairs would
 * need ~3 GB; capping the count keeps the worst case near 220 MB while
 * leaving room for ~250,000 safetensors entries. */
#define TP__JSON_MAX_VALUES 4000000

typedef enum tp__json_type {
    TP__JSON_NULL,
    TP__JSON_BOOL,
    TP__JSON_NUMBER,
    TP__JSON_STRING,
    TP__JSON_ARRAY,
    TP__JSON_OBJECT,
} tp__json_type;

typedef struct tp__json tp__json;
struct tp__json {
    tp__json_type type;
    bool boolean;
    bool is_uint;        /* NUMBER: a non-negative integer that fits uint64_t */
    uint64_t uint_value; /* valid when is_uint */
    char *str;           /* STRING: decoded, NUL-terminated */
    size_t len;          /* STRING: bytes; ARRAY/OBJECT: elements */
    bool has_nul;        /* STRING: contains \u0000 */
    tp__json *items;     /* ARRAY/OBJECT: values, in document order */
    char **keys;         /* OBJECT: keys (decoded, NUL-terminated) */
    bool *key_has_nul;   /* OBJECT: a key contains \u0000 */
};

/* Parses text[0, len): one value, then only whitespace.  Returns a tree the
 * caller frees with tp__json_free, or NULL with a message in err ("expected
 * ':' at byte 17").  Does not set the runtime's error. */
tp__json *tp__json_parse(const char *text, size_t len, char *err, size_t errlen);
void tp__json_free(tp__json *value);

/* The member of an OBJECT called key, or NULL. */
const tp__json *tp__json_get(const tp__json *object, const char *key);

/* True if s[0, n) is valid UTF-8 (the same rules strings are held to). */
bool tp__json_utf8_valid(const char *s, size_t n);

/* "object", "string", ... for messages. */
const char *tp__json_type_name(tp__json_type type);

#endif
