/*
 * tests/check.h - the few macros the allocator and io tests share.
 *
 * CHECK records a failure with file:line and keeps going, so one run shows
 * every broken expectation; RUN runs one test function by name.  The
 * program's exit status is the number of failures (capped).  Not a
 * framework: no fixtures, no registration.
 */
#ifndef TP_TESTS_CHECK_H
#define TP_TESTS_CHECK_H

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static int check_failures;

#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
            check_failures++;                                                        \
        }                                                                            \
    } while (0)

#define CHECK_EQ_U64(a, b)                                                                  \
    do {                                                                                    \
        uint64_t a_ = (uint64_t)(a), b_ = (uint64_t)(b);                                    \
        if (a_ != b_) {                                                                     \
            fprintf(stderr, "%s:%d: CHECK failed: %s == %s (%" PRIu64 " vs %" PRIu64 ")\n", \
                    __FILE__, __LINE__, #a, #b, a_, b_);                                    \
            check_failures++;                                                               \
        }                                                                                   \
    } while (0)

#define CHECK_STR_EQ(a, b)                                                                 \
    do {                                                                                   \
        const char *a_ = (a), *b_ = (b);                                                   \
        if (!a_ || !b_ || strcmp(a_, b_) != 0) {                                           \
            fprintf(stderr, "%s:%d: CHECK failed: %s == %s\n  got:      %s\n  expected: %s\n", \
                    __FILE__, __LINE__, #a, #b, a_ ? a_ : "(null)", b_ ? b_ : "(null)");   \
            check_failures++;                                                              \
        }                                                                                  \
    } while (0)

#define CHECK_CONTAINS(hay, needle)                                                     \
    do {                                                                                \
        const char *h_ = (hay), *n_ = (needle);                                         \
        if (!h_ || !strstr(h_, n_)) {                                                   \
            fprintf(stderr, "%s:%d: CHECK failed: \"%s\" contains \"%s\"\n", __FILE__, \
                    __LINE__, h_ ? h_ : "(null)", n_);                                  \
            check_failures++;                                                           \
        }                                                                               \
    } while (0)

#define RUN(test)                                         \
    do {                                                  \
        int before_ = check_failures;                     \
        test();                                           \
        fprintf(stderr, "%s %s\n",                        \
                check_failures == before_ ? "ok  " : "FAIL", #test); \
    } while (0)

#define CHECK_EXIT_STATUS() (check_failures > 100 ? 100 : check_failures)

#endif
