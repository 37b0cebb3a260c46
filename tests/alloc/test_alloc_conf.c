/*
 * tests/alloc/test_alloc_conf.c - TP_ALLOC_CONF parsing: what is accepted,
 * and the exact message for each thing that is refused.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>

#include "../check.h"
#include "fake_raw.h"
#include "tensorplay/caching_allocator.h"

#define MIB ((uint64_t)1 << 20)

static tp_caching_allocator_config sentinel(void) {
    return (tp_caching_allocator_config){.max_split_size = 12345, .roundup_power2_divisions = 7};
}

/* Parses text, expects failure with exactly msg, and *out untouched. */
static void expect_refused(const char *text, const char *msg) {
    tp_caching_allocator_config c = sentinel();
    tp_clear_error();
    CHECK(tp_caching_allocator_config_parse(text, &c) == TP_STATUS_INVALID_ARGUMENT);
    CHECK_STR_EQ(tp_last_error(), msg);
    CHECK_EQ_U64(c.max_split_size, 12345);
    CHECK_EQ_U64(c.roundup_power2_divisions, 7);
}

static void test_both_keys_are_parsed(void) {
    tp_caching_allocator_config c = sentinel();
    CHECK(tp_caching_allocator_config_parse("max_split_size_mb:128,roundup_power2_divisions:4",
                                            &c) == TP_STATUS_OK);
    CHECK_EQ_U64(c.max_split_size, 128 * MIB);
    CHECK_EQ_U64(c.roundup_power2_divisions, 4);
}

static void test_spaces_around_tokens_are_allowed(void) {
    tp_caching_allocator_config c = sentinel();
    CHECK(tp_caching_allocator_config_parse(" max_split_size_mb : 21 , roundup_power2_divisions:0 ",
                                            &c) == TP_STATUS_OK);
    CHECK_EQ_U64(c.max_split_size, 21 * MIB);
    CHECK_EQ_U64(c.roundup_power2_divisions, 0);
}

static void test_empty_or_null_gives_the_defaults(void) {
    tp_caching_allocator_config c = sentinel();
    CHECK(tp_caching_allocator_config_parse("", &c) == TP_STATUS_OK);
    CHECK_EQ_U64(c.max_split_size, TP_CACHING_UNLIMITED);
    CHECK_EQ_U64(c.roundup_power2_divisions, 0);
    c = sentinel();
    CHECK(tp_caching_allocator_config_parse(NULL, &c) == TP_STATUS_OK);
    CHECK_EQ_U64(c.max_split_size, TP_CACHING_UNLIMITED);
    /* Only given keys change: the rest are defaults, not left-overs. */
    c = sentinel();
    CHECK(tp_caching_allocator_config_parse("roundup_power2_divisions:8", &c) == TP_STATUS_OK);
    CHECK_EQ_U64(c.max_split_size, TP_CACHING_UNLIMITED);
    CHECK_EQ_U64(c.roundup_power2_divisions, 8);
}

static void test_huge_max_split_means_unlimited(void) {
    tp_caching_allocator_config c = sentinel();
    CHECK(tp_caching_allocator_config_parse("max_split_size_mb:18446744073709551615", &c) ==
          TP_STATUS_OK);
    CHECK_EQ_U64(c.max_split_size, TP_CACHING_UNLIMITED);
}

static void test_bad_settings_are_refused_with_clear_messages(void) {
    expect_refused("max_split_size_mb:20", "TP_ALLOC_CONF: max_split_size_mb too small, must be > 20");
    expect_refused("max_split_size_mb:0", "TP_ALLOC_CONF: max_split_size_mb too small, must be > 20");
    expect_refused("foo:1", "TP_ALLOC_CONF: unknown key 'foo' (known: max_split_size_mb, "
                            "roundup_power2_divisions, backend)");
    expect_refused("expandable_segments:True",
                   "TP_ALLOC_CONF: unknown key 'expandable_segments' (known: max_split_size_mb, "
                   "roundup_power2_divisions, backend)");
    expect_refused("max_split_size_mb", "TP_ALLOC_CONF: expected key:value, got 'max_split_size_mb'");
    expect_refused("max_split_size_mb:64,", "TP_ALLOC_CONF: expected key:value, got ''");
    expect_refused("max_split_size_mb:abc",
                   "TP_ALLOC_CONF: max_split_size_mb: 'abc' is not a whole number");
    expect_refused("max_split_size_mb:-64",
                   "TP_ALLOC_CONF: max_split_size_mb: '-64' is not a whole number");
    expect_refused("max_split_size_mb:64MB",
                   "TP_ALLOC_CONF: max_split_size_mb: '64MB' is not a whole number");
    expect_refused("max_split_size_mb:99999999999999999999999",
                   "TP_ALLOC_CONF: max_split_size_mb: '99999999999999999999999' is not a whole "
                   "number");
    expect_refused("roundup_power2_divisions:3",
                   "TP_ALLOC_CONF: roundup_power2_divisions must be 0 or a power of 2 up to 64, got 3");
    expect_refused("roundup_power2_divisions:128",
                   "TP_ALLOC_CONF: roundup_power2_divisions must be 0 or a power of 2 up to 64, got 128");
    expect_refused("roundup_power2_divisions:",
                   "TP_ALLOC_CONF: roundup_power2_divisions: '' is not a whole number");
}

static void test_new_reads_the_environment(void) {
    fake_raw raw;
    fake_raw_init(&raw, 0);
    setenv("TP_ALLOC_CONF", "roundup_power2_divisions:4", 1);
    tp_caching_allocator *ca = tp_caching_allocator_new(&raw.vt, NULL);
    CHECK(ca != NULL);
    CHECK_EQ_U64(tp_caching_allocator_round_size(ca, 1200), 1280);
    tp_caching_allocator_destroy(ca);

    setenv("TP_ALLOC_CONF", "max_split_size_mb:5", 1);
    CHECK(tp_caching_allocator_new(&raw.vt, NULL) == NULL);
    CHECK_STR_EQ(tp_last_error(), "TP_ALLOC_CONF: max_split_size_mb too small, must be > 20");
    unsetenv("TP_ALLOC_CONF");
    ca = tp_caching_allocator_new(&raw.vt, NULL);
    CHECK(ca != NULL);
    CHECK_EQ_U64(tp_caching_allocator_round_size(ca, 1200), 1536);
    tp_caching_allocator_destroy(ca);
}

static void test_new_refuses_a_bad_explicit_config(void) {
    fake_raw raw;
    fake_raw_init(&raw, 0);
    tp_caching_allocator_config c;
    tp_caching_allocator_config_default(&c);
    c.max_split_size = 20 * MIB;
    CHECK(tp_caching_allocator_new(&raw.vt, &c) == NULL);
    CHECK_CONTAINS(tp_last_error(), "too small, must be > 20 MiB");
    tp_caching_allocator_config_default(&c);
    c.roundup_power2_divisions = 6;
    CHECK(tp_caching_allocator_new(&raw.vt, &c) == NULL);
    CHECK_CONTAINS(tp_last_error(), "power of 2");
    CHECK(tp_caching_allocator_new(NULL, NULL) == NULL);
}

int main(void) {
    RUN(test_both_keys_are_parsed);
    RUN(test_spaces_around_tokens_are_allowed);
    RUN(test_empty_or_null_gives_the_defaults);
    RUN(test_huge_max_split_means_unlimited);
    RUN(test_bad_settings_are_refused_with_clear_messages);
    RUN(test_new_reads_the_environment);
    RUN(test_new_refuses_a_bad_explicit_config);
    return CHECK_EXIT_STATUS();
}
