/*
 * tests/check.h - the few assertion macros every C test suite shares.
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

/* CHECK that also says why, printf-style: CHECK_MSG(n == 3, "%d rows", n). */
#define CHECK_MSG(cond, ...)                                                             \
    do {                                                                                 \
        if (!(cond)) {                                                                   \
            fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond);     \
            fprintf(stderr, __VA_ARGS__);                                                \
            fputc('\n', stderr);                                                         \
            check_failures++;                                                            \
        }                                                                                \
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


/* The names the core and ops suites use. */
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

/* A program of named scenarios, one meson test each:
 *
 *     static const check_scenario scenarios[] = {{"pool", test_pool_records}, ...};
 *     return check_run_scenarios(argc > 1 ? argv[1] : NULL, scenarios, sizeof scenarios / sizeof *scenarios);
 *
 * runs the scenario called `name` (NULL: every one, in order) and returns
 * CHECK_DONE(); a name no scenario has is a failure that says so. */
typedef struct check_scenario {
    const char *name;
    void (*fn)(void);
} check_scenario;

static inline int check_run_scenarios(const char *name, const check_scenario *scenarios, size_t n) {
    int ran = 0;
    for (size_t i = 0; i < n; i++)
        if (!name || strcmp(name, scenarios[i].name) == 0) {
            scenarios[i].fn();
            ran = 1;
        }
    CHECK_MSG(ran, "no scenario '%s'", name);
    return CHECK_DONE();
}

#endif
