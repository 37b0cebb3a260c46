// suppressions.h: LeakSanitizer suppression files applied to a profile (suppressions.c).
// Private to viewer/; viewer.h includes every header of the viewer.
#ifndef TPPROF_VIEWER_SUPPRESSIONS_H
#define TPPROF_VIEWER_SUPPRESSIONS_H

#include "util.h"
#include "profile.h"

// ---------------------------------------------------------------------------
// suppressions.c: LeakSanitizer's suppression files (leak:PATTERN lines)

typedef struct tpprof_suppression {
    char *pattern;                // after "leak:"; owned
    bool glob;                    // a --suppress shell glob, not an LSan pattern
    uint64_t bytes, count, groups; // what it matched (set by apply)
} tpprof_suppression;

typedef struct tpprof_suppressions {
    tpprof_suppression *rules;
    size_t n, cap;
} tpprof_suppressions;

// Read an LSan suppression file: `leak:PATTERN` lines, `#` comments, blank
// lines, and append its rules to out (zeroed, or holding earlier files').
// Any other line is an error naming its file and line. 0, or -1 + error
// (out keeps only the rules it had).
int tpprof_suppressions_load(const char *path, tpprof_suppressions *out);
// Append one rule: an LSan pattern, or with glob a shell glob matched
// against a frame's function name and module file name (--suppress). 0 or -1.
int tpprof_suppressions_add(tpprof_suppressions *s, const char *pattern, bool glob);
void tpprof_suppressions_free(tpprof_suppressions *s);
// Zero what each rule matched (before applying the rules to another profile).
void tpprof_suppressions_reset(tpprof_suppressions *s);
// "leak:PATTERN matched 8.00 KiB in 1 block (1 stack)" into out; returns out.
char *tpprof_suppression_describe(const tpprof_suppression *r, char *out, size_t size);
// LSan's pattern match: substring, '*' any run, leading '^' and trailing '$'
// anchors. false for a NULL or empty str.
bool tpprof_suppression_match(const char *pattern, const char *str);
// Drop from p the leak groups a rule matches (a frame's function, file or
// module), and their bytes and blocks from p->summary; each rule counts what
// it took (the first matching rule takes a group).
void tpprof_suppressions_apply(tpprof_profile *p, tpprof_suppressions *s);

#endif
