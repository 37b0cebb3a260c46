// suppressions.c: LeakSanitizer's suppression files, read and applied to a
// loaded profile: known leaks in code one does not own are left out of the
// leak list and the leak figures, and each rule says how much it matched.
//
// The format is LSan's (compiler-rt's sanitizer_common): one `leak:PATTERN`
// a line, `#` to the end of a line a comment, blank lines ignored. A pattern
// matches a leak group when it matches the function name, the source file
// or the module path of any frame of its stack; it is a substring match
// where `*` matches any run of characters, a leading `^` anchors it at the
// start and a trailing `$` at the end (compiler-rt's TemplateMatch). The
// first rule that matches a group takes it.
//
// `check --suppress PATTERN` (and `run --suppress`) adds a rule of another
// kind: a shell glob on a frame's function name or module file name
// (fnmatch), kept for the command lines written before the LSan format.
// report, check and run share these rules and the line that says how much
// each matched (tpprof_suppression_describe).
//
// This file never prints; the commands say what was suppressed.
#define _POSIX_C_SOURCE 200809L
#include "viewer.h"

#include <errno.h>
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

#define SUPPRESSION_FRAMES 2048

// compiler-rt's TemplateMatch, on a copy of the template's pieces.
bool tpprof_suppression_match(const char *templ, const char *str) {
    if (!str || !str[0])
        return false;
    bool start = false, asterisk = false;
    if (templ[0] == '^') {
        start = true;
        templ++;
    }
    while (templ[0]) {
        if (templ[0] == '*') {
            templ++;
            start = false;
            asterisk = true;
            continue;
        }
        if (templ[0] == '$')
            return str[0] == 0 || asterisk;
        if (str[0] == 0)
            return false;
        // The literal piece up to the next '*' or '$'.
        size_t len = strcspn(templ, "*$");
        char piece[1024];
        if (len >= sizeof piece)
            len = sizeof piece - 1;
        memcpy(piece, templ, len);
        piece[len] = 0;
        const char *found = strstr(str, piece);
        if (!found || (start && found != str))
            return false;
        str = found + len;
        templ += strcspn(templ, "*$");
        start = false;
        asterisk = false;
    }
    return true;
}

int tpprof_suppressions_add(tpprof_suppressions *s, const char *pattern, bool glob) {
    if (!pattern[0])
        return tpprof_error_set("--suppress: empty pattern");
    tpprof_suppression *v = tpprof_grow(s->rules, s->n, &s->cap, sizeof *v);
    if (!v)
        return -1;
    s->rules = v;
    memset(&v[s->n], 0, sizeof v[s->n]);
    if (!(v[s->n].pattern = strdup(pattern)))
        return tpprof_error_set("out of memory");
    v[s->n].glob = glob;
    s->n++;
    return 0;
}

int tpprof_suppressions_load(const char *path, tpprof_suppressions *out) {
    FILE *f = fopen(path, "r");
    if (!f)
        return tpprof_error_set("--suppressions: cannot open %s: %s", path, strerror(errno));
    char line[4096];
    size_t before = out->n;
    int lineno = 0, rc = 0;
    while (rc == 0 && fgets(line, sizeof line, f)) {
        lineno++;
        char *hash = strchr(line, '#');
        if (hash)
            *hash = 0;
        char *s = line;
        while (*s == ' ' || *s == '\t')
            s++;
        char *end = s + strlen(s);
        while (end > s && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\n' || end[-1] == '\r'))
            *--end = 0;
        if (!*s)
            continue;
        if (strncmp(s, "leak:", 5) != 0 || !s[5]) {
            rc = tpprof_error_set("--suppressions: %s:%d: expected leak:PATTERN (LeakSanitizer's format), got '%s'",
                                  path, lineno, s);
            break;
        }
        rc = tpprof_suppressions_add(out, s + 5, false);
    }
    if (rc == 0 && ferror(f))
        rc = tpprof_error_set("--suppressions: cannot read %s: %s", path, strerror(errno));
    fclose(f);
    // A file that fails adds nothing: the rules before it stay.
    for (; rc != 0 && out->n > before; out->n--)
        free(out->rules[out->n - 1].pattern);
    return rc;
}

void tpprof_suppressions_reset(tpprof_suppressions *s) {
    for (size_t i = 0; i < s->n; i++)
        s->rules[i].bytes = s->rules[i].count = s->rules[i].groups = 0;
}

char *tpprof_suppression_describe(const tpprof_suppression *r, char *out, size_t size) {
    char a[32], b[32];
    snprintf(out, size, "%s%s matched %s in %s block%s (%llu stack%s)", r->glob ? "--suppress " : "leak:",
             r->pattern, tpprof_format_size(r->bytes, a), tpprof_format_count(r->count, b),
             r->count == 1 ? "" : "s", (unsigned long long)r->groups, r->groups == 1 ? "" : "s");
    return out;
}

void tpprof_suppressions_free(tpprof_suppressions *s) {
    for (size_t i = 0; i < s->n; i++)
        free(s->rules[i].pattern);
    free(s->rules);
    memset(s, 0, sizeof *s);
}

// A --suppress glob: the function name or the module's file name.
static bool glob_match(const char *pattern, const tpprof_frame *f) {
    return (f->function && fnmatch(pattern, f->function, 0) == 0) ||
           (f->module && fnmatch(pattern, tpprof_basename(f->module), 0) == 0);
}

// The first rule matching a frame of the stack, or -1.
static ptrdiff_t rule_for(const tpprof_profile *p, const tpprof_suppressions *s, int64_t stack_id) {
    static tpprof_frame frames[SUPPRESSION_FRAMES];
    size_t n = tpprof_stacks_frames(p->stacks, stack_id, frames, SUPPRESSION_FRAMES, NULL);
    for (size_t k = 0; k < s->n; k++)
        for (size_t i = 0; i < n; i++)
            if (s->rules[k].glob ? glob_match(s->rules[k].pattern, &frames[i])
                                 : (tpprof_suppression_match(s->rules[k].pattern, frames[i].function) ||
                                    tpprof_suppression_match(s->rules[k].pattern, frames[i].file) ||
                                    tpprof_suppression_match(s->rules[k].pattern, frames[i].module)))
                return (ptrdiff_t)k;
    return -1;
}

void tpprof_suppressions_apply(tpprof_profile *p, tpprof_suppressions *s) {
    size_t kept = 0;
    tpprof_summary *sum = &p->summary;
    for (size_t i = 0; i < p->nleaks; i++) {
        tpprof_leak l = p->leaks[i];
        ptrdiff_t k = s->n ? rule_for(p, s, l.stack_id) : -1;
        if (k < 0) {
            p->leaks[kept++] = l;
            continue;
        }
        s->rules[k].bytes += l.bytes;
        s->rules[k].count += l.count;
        s->rules[k].groups++;
        sum->leaked_bytes -= l.bytes;
        sum->leaked_count -= l.count;
        if (l.reachability == TPPROF_REACH_LOST) {
            sum->lost_bytes -= l.bytes;
            sum->lost_count -= l.count;
        } else if (l.reachability == TPPROF_REACH_REACHABLE) {
            sum->reachable_bytes -= l.bytes;
            sum->reachable_count -= l.count;
        } else {
            sum->unscanned_bytes -= l.bytes;
            sum->unscanned_count -= l.count;
        }
    }
    p->nleaks = kept;
}
