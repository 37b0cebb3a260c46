/*
 * tests/io/test_json.c - the strict header JSON parser (src/io/json.h):
 * what it builds, and what it refuses with which message.
 */
#include <stdlib.h>

#include "../check.h"
#include "../../src/io/json.h"

static tp__json *parse(const char *s) {
    char err[256];
    return tp__json_parse(s, strlen(s), err, sizeof err);
}

/* Fails to parse s with exactly msg. */
static void expect_error(const char *s, size_t len, const char *msg, int line) {
    char err[256];
    tp__json *v = tp__json_parse(s, len, err, sizeof err);
    int before = check_failures;
    CHECK(v == NULL);
    CHECK_STR_EQ(err, msg);
    tp__json_free(v);
    if (check_failures != before) fprintf(stderr, "  (expect_error at line %d)\n", line);
}
#define EXPECT_ERROR(s, msg) expect_error(s, strlen(s), msg, __LINE__)

static void test_builds_a_tree_of_every_type(void) {
    tp__json *v = parse(" {\"a\": [1, -0, 2.5, 1e3, true, false, null, \"x\"], \"b\": {}} ");
    CHECK(v && v->type == TP__JSON_OBJECT && v->len == 2);
    if (!v) return;
    const tp__json *a = tp__json_get(v, "a");
    CHECK(a && a->type == TP__JSON_ARRAY && a->len == 8);
    CHECK(a->items[0].is_uint && a->items[0].uint_value == 1);
    CHECK(a->items[1].is_uint && a->items[1].uint_value == 0);
    CHECK(a->items[2].type == TP__JSON_NUMBER && !a->items[2].is_uint);
    CHECK(!a->items[3].is_uint);
    CHECK(a->items[4].type == TP__JSON_BOOL && a->items[4].boolean);
    CHECK(a->items[5].type == TP__JSON_BOOL && !a->items[5].boolean);
    CHECK(a->items[6].type == TP__JSON_NULL);
    CHECK(a->items[7].type == TP__JSON_STRING && strcmp(a->items[7].str, "x") == 0);
    CHECK(tp__json_get(v, "b")->type == TP__JSON_OBJECT);
    CHECK(tp__json_get(v, "c") == NULL);
    tp__json_free(v);
}

static void test_numbers_report_whether_they_fit_uint64(void) {
    tp__json *v = parse("[18446744073709551615, 18446744073709551616, -1, 0]");
    CHECK(v && v->len == 4);
    if (!v) return;
    CHECK(v->items[0].is_uint && v->items[0].uint_value == UINT64_MAX);
    CHECK(!v->items[1].is_uint);
    CHECK(!v->items[2].is_uint);
    CHECK(v->items[3].is_uint && v->items[3].uint_value == 0);
    tp__json_free(v);
}

static void test_string_escapes_decode_to_utf8(void) {
    tp__json *v = parse("\"a\\\"b\\\\c\\/d\\n\\t\\u00e9\\ud83d\\ude00\\u0000z\"");
    CHECK(v && v->type == TP__JSON_STRING);
    if (!v) return;
    const char want[] = "a\"b\\c/d\n\t\xc3\xa9\xf0\x9f\x98\x80";
    CHECK(v->len == sizeof want - 1 + 2); /* + NUL + 'z' */
    CHECK(memcmp(v->str, want, sizeof want - 1) == 0);
    CHECK(v->has_nul);
    tp__json_free(v);
    v = parse("\"h\xc3\xa9llo \xe2\x82\xac\""); /* raw UTF-8 passes through */
    CHECK(v && strcmp(v->str, "h\xc3\xa9llo \xe2\x82\xac") == 0 && !v->has_nul);
    tp__json_free(v);
}

static void test_malformed_documents_are_refused_with_positions(void) {
    EXPECT_ERROR("", "unexpected end of input at byte 0");
    EXPECT_ERROR("[1,]", "unexpected character ']' at byte 3");
    EXPECT_ERROR("{\"a\" 1}", "expected ':' at byte 5");
    EXPECT_ERROR("{\"a\":1 \"b\":2}", "expected ',' or '}' at byte 7");
    EXPECT_ERROR("[1 2]", "expected ',' or ']' at byte 3");
    EXPECT_ERROR("{1:2}", "expected a string key at byte 1");
    EXPECT_ERROR("01", "leading zero in number at byte 1");
    EXPECT_ERROR("1.", "bad fraction at byte 2");
    EXPECT_ERROR("1e", "bad exponent at byte 2");
    EXPECT_ERROR("-", "bad number at byte 1");
    EXPECT_ERROR("tru", "unexpected character 't' at byte 0");
    EXPECT_ERROR("NaN", "unexpected character 'N' at byte 0");
    EXPECT_ERROR("\"abc", "unterminated string at byte 4");
    EXPECT_ERROR("\"a\tb\"", "raw control character in string at byte 2");
    EXPECT_ERROR("\"\\x\"", "bad escape '\\x' at byte 2");
    EXPECT_ERROR("\"\\u12g4\"", "bad hex digit in \\u escape at byte 3");
    EXPECT_ERROR("\"\\udc00\"", "lone low surrogate at byte 7");
    EXPECT_ERROR("\"\\ud800x\"", "high surrogate without a low one at byte 7");
    EXPECT_ERROR("\"\xc0\xaf\"", "invalid UTF-8 in string at byte 1");         /* overlong */
    EXPECT_ERROR("\"\xed\xa0\x80\"", "invalid UTF-8 in string at byte 1");     /* surrogate */
    EXPECT_ERROR("\"\xf4\x90\x80\x80\"", "invalid UTF-8 in string at byte 1"); /* > U+10FFFF */
    EXPECT_ERROR("{} {}", "trailing characters after the JSON value at byte 3");
    EXPECT_ERROR("{\"k\":1,\"k\":2}", "duplicate key \"k\" at byte 13");
    expect_error("[\0]", 3, "unexpected byte 0x00 at byte 1", __LINE__);
}

static void test_duplicate_keys_are_found_in_large_objects(void) {
    char buf[4096];
    size_t n = (size_t)snprintf(buf, sizeof buf, "{");
    for (int i = 0; i < 100; i++) n += (size_t)snprintf(buf + n, sizeof buf - n, "\"k%d\":0,", i);
    snprintf(buf + n, sizeof buf - n, "\"k57\":1}");
    char err[256];
    CHECK(tp__json_parse(buf, strlen(buf), err, sizeof err) == NULL);
    CHECK_CONTAINS(err, "duplicate key \"k57\"");
    buf[n] = '}', buf[n - 1] = ' ';
    tp__json *v = tp__json_parse(buf, n + 1, err, sizeof err);
    CHECK(v && v->len == 100);
    tp__json_free(v);
}

static void test_nesting_is_limited(void) {
    char deep[200];
    memset(deep, '[', sizeof deep);
    char err[256];
    CHECK(tp__json_parse(deep, sizeof deep, err, sizeof err) == NULL);
    CHECK_STR_EQ(err, "nesting deeper than 64 at byte 64");
    char ok[2 * TP__JSON_MAX_DEPTH];
    memset(ok, '[', TP__JSON_MAX_DEPTH);
    memset(ok + TP__JSON_MAX_DEPTH, ']', TP__JSON_MAX_DEPTH);
    tp__json *v = tp__json_parse(ok, sizeof ok, err, sizeof err);
    CHECK(v != NULL);
    tp__json_free(v);
}

static void test_value_count_is_limited(void) {
    size_t n = 2 * (size_t)TP__JSON_MAX_VALUES + 4; /* "[0,0,...,0]" one value too many */
    char *doc = malloc(n);
    doc[0] = '[';
    size_t k = 1;
    for (int i = 0; i < TP__JSON_MAX_VALUES; i++) doc[k++] = '0', doc[k++] = ',';
    doc[k - 1] = ']';
    char err[256];
    tp__json *v = tp__json_parse(doc, k, err, sizeof err);
    CHECK(v == NULL); /* the array itself counts as a value */
    CHECK_CONTAINS(err, "more than 4000000 values");
    tp__json_free(v);
    v = tp__json_parse(doc + 2, k - 2, err, sizeof err); /* "0,0,...]": not one value */
    CHECK(v == NULL);
    doc[2] = '[';
    v = tp__json_parse(doc + 2, k - 2, err, sizeof err); /* exactly the limit */
    CHECK(v != NULL && v->len == TP__JSON_MAX_VALUES - 1);
    tp__json_free(v);
    free(doc);
}

int main(void) {
    RUN(test_builds_a_tree_of_every_type);
    RUN(test_numbers_report_whether_they_fit_uint64);
    RUN(test_string_escapes_decode_to_utf8);
    RUN(test_malformed_documents_are_refused_with_positions);
    RUN(test_duplicate_keys_are_found_in_large_objects);
    RUN(test_nesting_is_limited);
    RUN(test_value_count_is_limited);
    return CHECK_EXIT_STATUS();
}
