// check.h: the one assertion of tests/tpprof's own programs. CHECK(cond,
// fmt, ...) counts a failure in `failures` and says where, what failed and
// why (fmt); each program's main exits non-zero when failures is not 0.
#ifndef TPPROF_TESTS_CHECK_H
#define TPPROF_TESTS_CHECK_H

#include <stdio.h>

static int failures;
#define CHECK(cond, ...)                                                    \
    do {                                                                    \
        if (!(cond)) {                                                      \
            failures++;                                                     \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                   \
            fputc('\n', stderr);                                            \
        }                                                                   \
    } while (0)

#endif
