/*
 * tests/core/check.h - the few assertion macros the core tests share.
 *
 * A failed CHECK prints file:line and the expression, counts the failure and
 * lets the test go on, so one run shows every broken rule.  RUN_TEST names
 * each test as it starts; main returns non-zero if anything failed.
 */
#ifndef TP_TESTS_CORE_CHECK_H
#define TP_TESTS_CORE_CHECK_H

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static int check_failures;

#define CHECK(cond)                                                                 \
    do {                                                                            \
        if (!(cond)) {                                                              \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
            check_failures++;                                                       \
        }                                                                           \
    } while (0)

#define CHECK_EQ(a, b)                                                                  \
    do {                                                                                \
        long long check_a_ = (long long)(a), check_b_ = (long long)(b);                 \
        if (check_a_ != check_b_) {                                                     \
            fprintf(stderr, "%s:%d: CHECK_EQ failed: %s == %lld, %s == %lld\n", __FILE__, \
                    __LINE__, #a, check_a_, #b, check_b_);                              \
            check_failures++;                                                           \
        }                                                                               \
    } while (0)

#define CHECK_STR(a, b)                                                                  \
    do {                                                                                 \
        const char *check_a_ = (a), *check_b_ = (b);                                     \
        if (!check_a_ || !check_b_ || strcmp(check_a_, check_b_) != 0) {                 \
            fprintf(stderr, "%s:%d: CHECK_STR failed:\n  got:      \"%s\"\n  expected: \"%s\"\n", \
                    __FILE__, __LINE__, check_a_ ? check_a_ : "(null)",                  \
                    check_b_ ? check_b_ : "(null)");                                     \
            check_failures++;                                                            \
        }                                                                                \
    } while (0)

#define RUN_TEST(fn)                          \
    do {                                      \
        int check_before_ = check_failures;   \
        fn();                                 \
        fprintf(stderr, "%s %s\n", check_failures == check_before_ ? "ok  " : "FAIL", #fn); \
    } while (0)

#define CHECK_DONE() (check_failures ? (fprintf(stderr, "%d check(s) failed\n", check_failures), 1) : 0)

#endif
