// cmd_check.c: `tpprof check DB`: the CI gate.
//
// Each gate compares one number of the recording with a limit; exit 0 when
// all hold, 1 when any fails (one FAIL line per failed gate naming the worst
// stack), 2 on usage or input errors. With --baseline, leaked, lost and peak
// bytes may not grow by more than --max-growth percent over an older
// recording. --junit writes one testcase per gate for CI dashboards.
// With no gate given, `--max-lost-bytes 0` applies: a lost block fails.
// --suppress leaves known leaks (globs on function or module names) out of
// the leak gates. This file never writes a database (profile.c may save
// symbols into a writable one).
#define _POSIX_C_SOURCE 200809L
#include "viewer.h"

#include <errno.h>
#include <fnmatch.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

const char tpprof_usage_check[] =
    "usage: tpprof check DB [--max-lost-bytes N] [--max-leaked-bytes N] [--max-peak-bytes N]\n"
    "                       [--baseline OLD.db [--max-growth PCT]] [--junit FILE]\n"
    "                       [--suppress PATTERN]... [--suppressions FILE]\n"
    "                       [--max-leaked-storages N] [--max-inactive-split-bytes N]\n"
    "                       [--max-graph-held-bytes N] [--allow-incomplete]\n"
    "\n"
    "Gate a recording in CI. Exit 0 when every gate holds, 1 when one fails (one\n"
    "FAIL line per failed gate, naming the worst stack) or when the recording is\n"
    "missing something (incomplete, events dropped, threads or allocations not\n"
    "recorded, the leak scan unfinished: one FAIL line saying what), 2 on usage or\n"
    "input errors.\n"
    "\n"
    "  --max-lost-bytes N    blocks unreachable at exit (default gate: 0 when no gate is given)\n"
    "  --max-leaked-bytes N  all blocks still allocated at exit, reachable or not\n"
    "  --max-peak-bytes N    the peak of heap + anonymous mmap bytes\n"
    "  --baseline OLD.db     compare leaked, lost and peak bytes with an older recording:\n"
    "  --max-growth PCT      ... each may grow by at most PCT percent (default 0)\n"
    "  --junit FILE          also write a JUnit XML file, one testcase per gate\n"
    "  --suppress PATTERN    leave out of the leak gates the blocks whose stack has a frame\n"
    "                        whose function or module file name matches the glob PATTERN\n"
    "                        (repeatable; e.g. 'g_type_*', 'libfontconfig.so*')\n"
    "  --suppressions FILE   the same, one pattern per line; '#' starts a comment\n"
    "  --max-leaked-storages N  tensor storages whose struct is still alive at exit\n"
    "  --max-inactive-split-bytes N  free bytes stranded inside partly used segments of the\n"
    "                        caching allocators at exit (replayed from allocator_events)\n"
    "  --max-graph-held-bytes N  tensor storages alive at exit that only autograd graphs alive\n"
    "                        then keep (saved for a backward that never ran, or kept by\n"
    "                        retain_graph; not a weight the program still holds)\n"
    "  --allow-incomplete    what the recording is missing is a warning on stderr, not a\n"
    "                        failure (a recording with nothing in it still fails)\n"
    "\n"
    "Sizes take suffixes: 4096, 4k, 10M, 1G (powers of 1024). When no reachability scan\n"
    "ran (the recording is incomplete, or the program exec'd or died of a signal), the\n"
    "lost gate counts unscanned blocks as lost.\n";

// ---------------------------------------------------------------------------
// Gates

typedef struct gate {
    const char *name;    // testcase name, e.g. "max-lost-bytes"
    bool failed;
    char line[4096];     // "PASS ..." or "FAIL ..."
} gate;

#define MAX_SUPPRESSIONS 256

typedef struct check_options {
    const char *path, *baseline, *junit;
    char *suppress[MAX_SUPPRESSIONS]; // owned copies
    size_t nsuppress;
    bool has_lost, has_leaked, has_peak, has_growth, has_storages, has_split, has_graph;
    bool allow_incomplete; // what the recording misses is a warning, not a failure
    uint64_t max_lost, max_leaked, max_peak, max_storages, max_split, max_graph;
    double max_growth;
} check_options;

// What the lost gate measures (see tpprof_leak_counts_as_lost).
static uint64_t lost_bytes(const tpprof_profile *p) {
    const tpprof_summary *s = &p->summary;
    return s->lost_bytes + (s->leak_scanned ? 0 : s->unscanned_bytes);
}

// The costliest group of live blocks, restricted to those counted lost or not.
static const tpprof_leak *worst_leak(const tpprof_profile *p, bool lost_only) {
    const tpprof_leak *worst = NULL;
    for (size_t i = 0; i < p->nleaks; i++) {
        const tpprof_leak *l = &p->leaks[i];
        if (lost_only && !tpprof_leak_counts_as_lost(p, l))
            continue;
        if (!worst || l->bytes > worst->bytes)
            worst = l;
    }
    return worst;
}

static const tpprof_site *worst_peak_site(const tpprof_profile *p) {
    const tpprof_site *worst = NULL;
    for (size_t i = 0; i < p->nsites; i++)
        if (p->sites[i].peak_bytes && (!worst || p->sites[i].peak_bytes > worst->peak_bytes))
            worst = &p->sites[i];
    return worst;
}

static void where(const tpprof_profile *p, int64_t stack_id, uint64_t bytes, char *out,
                  size_t size) {
    char frame[512];
    snprintf(out, size, ": %llu B in %s", (unsigned long long)bytes,
             tpprof_stacks_describe(p->stacks, stack_id, frame, sizeof frame));
}

static void gate_limit(gate *g, const char *name, const char *what, uint64_t value,
                       uint64_t limit, const char *detail) {
    g->name = name;
    g->failed = value > limit;
    snprintf(g->line, sizeof g->line, "%s %s %llu %s %llu%s", g->failed ? "FAIL" : "PASS", what,
             (unsigned long long)value, g->failed ? ">" : "<=", (unsigned long long)limit,
             g->failed ? detail : "");
}

// ---------------------------------------------------------------------------
// Tensor and allocator gates (docs/schema-tensors.md; absent tables: 0)

// " (a view of #N)" for a view, else "".
static const char *view_of(const tpprof_tensor *x, char *out, size_t size) {
    out[0] = 0;
    if (x->base_id && x->base_id != x->id)
        snprintf(out, size, " (a view of #%lld)", (long long)x->base_id);
    return out;
}

// Storages whose struct is alive at exit; the detail names the stack that
// took the most unmatched references, else the handle retains that keep
// tensors, else a tensor alive at exit that holds them (a view or an alias:
// the one the run summary names) and where it was made, else the biggest
// storage's creation.
static int gate_storages(gate *g, const tpprof_profile *p, uint64_t limit) {
    tpprof_tensors t;
    if (tpprof_tensors_load(p->db, &t) != 0)
        return -1;
    uint64_t alive = 0;
    const tpprof_storage *biggest = NULL;
    for (size_t i = 0; i < t.nstorages; i++)
        if (tpprof_storage_alive(&t.storages[i])) {
            alive++;
            if (!biggest || t.storages[i].nbytes > biggest->nbytes)
                biggest = &t.storages[i];
        }
    char detail[1024] = "", frame[512], base[64];
    uint64_t held = 0;
    const tpprof_tensor *lead = NULL;
    size_t ng = 0;
    tpprof_ref_group *groups = tpprof_ref_groups(&t, false, &ng);
    if (ng == 0) {
        free(groups);
        groups = tpprof_ref_groups(&t, true, &ng);
    }
    // Else the handle retains that keep tensors (and so their storages), else the biggest.
    size_t nh = 0;
    tpprof_ref_group *handles = ng ? NULL : tpprof_handle_groups(&t, &nh);
    if (ng)
        snprintf(detail, sizeof detail, ": %llu storage%s held by a %s no release matched in %s",
                 (unsigned long long)groups[0].storages, groups[0].storages == 1 ? "" : "s",
                 tpprof_ref_op_name(groups[0].op),
                 tpprof_stacks_describe_caller(p->stacks, groups[0].stack_id, frame, sizeof frame));
    else if (nh)
        snprintf(detail, sizeof detail,
                 ": %llu storage%s held by tensors a tp_tensor_retain no release matched keeps, in %s",
                 (unsigned long long)handles[0].storages, handles[0].storages == 1 ? "" : "s",
                 tpprof_stacks_describe_caller(p->stacks, handles[0].stack_id, frame, sizeof frame));
    else if ((lead = tpprof_tensors_holder_lead(&t, &held)) != NULL) // a view or alias holds them
        snprintf(detail, sizeof detail, ": %llu storage%s held by tensors alive at exit, such as #%lld %s%s created in %s",
                 (unsigned long long)held, held == 1 ? "" : "s", (long long)lead->id, lead->sizes ? lead->sizes : "?",
                 view_of(lead, base, sizeof base),
                 tpprof_stacks_describe_caller(p->stacks, lead->created_stack, frame, sizeof frame));
    else if (biggest)
        snprintf(detail, sizeof detail, ": the biggest, %lld B, created in %s",
                 (long long)biggest->nbytes,
                 tpprof_stacks_describe_caller(p->stacks, biggest->created_stack, frame, sizeof frame));
    free(groups);
    free(handles);
    gate_limit(g, "max-leaked-storages", "leaked storages", alive, limit, detail);
    tpprof_tensors_free(&t);
    return 0;
}

// Graph-held bytes: the storages alive at exit that only autograd graphs
// alive then keep (autograd.c: they would go with the graphs); the detail
// names the biggest group: the graphs' root, the stack that made it, why
// they are alive.
static int gate_graph(gate *g, const tpprof_profile *p, uint64_t limit) {
    tpprof_tensors t;
    if (tpprof_tensors_load(p->db, &t) != 0)
        return -1;
    tpprof_autograd ag;
    if (tpprof_autograd_load(p->db, &ag) != 0) {
        tpprof_tensors_free(&t);
        return -1;
    }
    size_t ng = 0;
    tpprof_graph_held held;
    tpprof_graph_group *groups = tpprof_autograd_groups(&ag, &t, &ng, &held);
    char detail[1024] = "", frame[512];
    if (ng && groups[0].alone_bytes)
        snprintf(detail, sizeof detail, ": %llu storage%s (%llu B) kept by %llu graph%s whose root %s was made in %s; "
                 "graph alive: %s",
                 (unsigned long long)groups[0].alone_storages, groups[0].alone_storages == 1 ? "" : "s",
                 (unsigned long long)groups[0].alone_bytes, (unsigned long long)groups[0].graphs,
                 groups[0].graphs == 1 ? "" : "s", groups[0].root_name,
                 tpprof_stacks_describe_caller(p->stacks, groups[0].stack_id, frame, sizeof frame),
                 !groups[0].backward_ran ? "backward never ran" : groups[0].retained ? "retain_graph" : "backward ran");
    gate_limit(g, "max-graph-held-bytes", "graph-held bytes", held.alone_bytes, limit, detail);
    free(groups);
    tpprof_autograd_free(&ag);
    tpprof_tensors_free(&t);
    return 0;
}

// Inactive split bytes of every allocator at exit; the detail names the
// allocator with the most.
static int gate_split(gate *g, const tpprof_profile *p, uint64_t limit) {
    tpprof_alloc_state *s = NULL;
    size_t n = 0;
    if (tpprof_alloc_load(p->db, &s, &n) != 0)
        return -1;
    uint64_t total = 0, worst = 0;
    const char *worst_name = NULL;
    for (size_t i = 0; i < n; i++) {
        if (tpprof_alloc_replay(&s[i], s[i].nevents) != 0) {
            tpprof_alloc_states_free(s, n);
            return -1;
        }
        tpprof_frag f;
        tpprof_alloc_figures(&s[i], &f);
        total += (uint64_t)f.inactive_split_bytes;
        if (!worst_name || (uint64_t)f.inactive_split_bytes > worst) {
            worst = (uint64_t)f.inactive_split_bytes;
            worst_name = s[i].allocator;
        }
    }
    char detail[256] = "";
    if (worst_name)
        snprintf(detail, sizeof detail, ": %llu B in allocator '%s' (tpprof fragmentation shows the blocks)",
                 (unsigned long long)worst, worst_name);
    gate_limit(g, "max-inactive-split-bytes", "inactive split bytes", total, limit, detail);
    tpprof_alloc_states_free(s, n);
    return 0;
}

// ---------------------------------------------------------------------------
// Baseline: growth per quantity, the worst stack being the one that grew most.
// Stacks of two runs are matched by their innermost function names (diff.c).

#define KEY_FRAMES 4

enum { Q_LEAKED, Q_LOST, Q_PEAK };

// The stack whose bytes grew most from the baseline, described into out
// (empty when none grew). d: the two runs matched by tpprof_diff.
static void grew_most(const tpprof_profile *now, const tpprof_delta *d, size_t n, int q, char *out,
                      size_t size) {
    const tpprof_delta *best = NULL;
    int64_t best_growth = 0;
    for (size_t i = 0; i < n; i++) {
        int64_t growth = q == Q_LEAKED ? d[i].leaked_new - d[i].leaked_old
                         : q == Q_LOST ? d[i].lost_new - d[i].lost_old
                                       : d[i].peak_new - d[i].peak_old;
        if (d[i].stack_new >= 0 && growth > best_growth) {
            best = &d[i];
            best_growth = growth;
        }
    }
    out[0] = 0;
    if (best) {
        char frame[512];
        snprintf(out, size, ": +%lld B in %s", (long long)best_growth,
                 tpprof_stacks_describe(now->stacks, best->stack_new, frame, sizeof frame));
    }
}

static void gate_growth(gate *g, const char *name, const char *what, uint64_t now, uint64_t old,
                        double max_pct, const char *detail) {
    g->name = name;
    double pct = old ? 100.0 * ((double)now - (double)old) / (double)old
                     : (now ? INFINITY : 0.0);
    g->failed = pct > max_pct;
    char pct_text[32];
    if (isinf(pct))
        snprintf(pct_text, sizeof pct_text, "from 0");
    else
        snprintf(pct_text, sizeof pct_text, "%+.1f%%", pct);
    snprintf(g->line, sizeof g->line, "%s %s %llu vs baseline %llu (%s) %s %g%%%s",
             g->failed ? "FAIL" : "PASS", what, (unsigned long long)now, (unsigned long long)old,
             pct_text, g->failed ? ">" : "<=", max_pct, g->failed ? detail : "");
}

// ---------------------------------------------------------------------------
// JUnit

static void xml_escaped(FILE *f, const char *s) {
    for (; *s; s++) {
        switch (*s) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        default:
            if ((unsigned char)*s >= 0x20 || *s == '\t')
                fputc(*s, f);
        }
    }
}

// f: the JUnit file, opened before any gate ran (an unwritable path is an
// error before any PASS line); closed here.
static int write_junit(FILE *f, const char *path, const char *db, const gate *g, size_t n) {
    size_t failures = 0;
    for (size_t i = 0; i < n; i++)
        failures += g[i].failed;
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    fprintf(f, "<testsuites tests=\"%zu\" failures=\"%zu\">\n", n, failures);
    fprintf(f, "  <testsuite name=\"tpprof check ");
    xml_escaped(f, db);
    fprintf(f, "\" tests=\"%zu\" failures=\"%zu\" errors=\"0\">\n", n, failures);
    for (size_t i = 0; i < n; i++) {
        fprintf(f, "    <testcase classname=\"tpprof.check\" name=\"%s\"", g[i].name);
        if (!g[i].failed) {
            fprintf(f, "/>\n");
            continue;
        }
        fprintf(f, ">\n      <failure message=\"");
        xml_escaped(f, g[i].line + 5); // without "FAIL "
        fprintf(f, "\"/>\n    </testcase>\n");
    }
    fprintf(f, "  </testsuite>\n</testsuites>\n");
    if (ferror(f) | (fclose(f) != 0))
        return tpprof_error_set("cannot write '%s': %s", path, strerror(errno));
    return 0;
}

// ---------------------------------------------------------------------------
// Suppressions: known leaks in code one does not own (like LSan's).

static int add_suppression(check_options *o, const char *pattern, const char *where) {
    if (!pattern[0])
        return tpprof_error_set("%s: empty pattern", where);
    if (o->nsuppress == MAX_SUPPRESSIONS)
        return tpprof_error_set("%s: more than %d patterns", where, MAX_SUPPRESSIONS);
    o->suppress[o->nsuppress] = strdup(pattern);
    if (!o->suppress[o->nsuppress])
        return tpprof_error_set("out of memory");
    o->nsuppress++;
    return 0;
}

static int read_suppressions(check_options *o, const char *path) {
    FILE *f = fopen(path, "r");
    if (!f)
        return tpprof_error_set("--suppressions: cannot open '%s': %s", path, strerror(errno));
    char line[1024];
    int rc = 0;
    while (rc == 0 && fgets(line, sizeof line, f)) {
        char *hash = strchr(line, '#');
        if (hash)
            *hash = 0;
        // Trim blanks at both ends.
        char *start = line;
        while (*start == ' ' || *start == '\t')
            start++;
        char *end = start + strlen(start);
        while (end > start && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\n' || end[-1] == '\r'))
            *--end = 0;
        if (*start)
            rc = add_suppression(o, start, path);
    }
    fclose(f);
    return rc;
}

static bool stack_suppressed(const tpprof_profile *p, int64_t stack_id, const check_options *o) {
    static tpprof_frame frames[2048];
    size_t n = tpprof_stacks_frames(p->stacks, stack_id, frames, 2048, NULL);
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < o->nsuppress; k++) {
            const char *pat = o->suppress[k];
            if ((frames[i].function && fnmatch(pat, frames[i].function, 0) == 0) ||
                (frames[i].module && fnmatch(pat, tpprof_basename(frames[i].module), 0) == 0))
                return true;
        }
    return false;
}

// Drop suppressed leak groups from p and from its summary. Returns the bytes
// dropped; *blocks gets their count.
static uint64_t apply_suppressions(tpprof_profile *p, const check_options *o, uint64_t *blocks) {
    uint64_t bytes = 0;
    *blocks = 0;
    if (!o->nsuppress)
        return 0;
    size_t kept = 0;
    tpprof_summary *s = &p->summary;
    for (size_t i = 0; i < p->nleaks; i++) {
        tpprof_leak l = p->leaks[i];
        if (!stack_suppressed(p, l.stack_id, o)) {
            p->leaks[kept++] = l;
            continue;
        }
        bytes += l.bytes;
        *blocks += l.count;
        s->leaked_bytes -= l.bytes;
        s->leaked_count -= l.count;
        if (l.reachability == TPPROF_REACH_LOST) {
            s->lost_bytes -= l.bytes;
            s->lost_count -= l.count;
        } else if (l.reachability == TPPROF_REACH_REACHABLE) {
            s->reachable_bytes -= l.bytes;
            s->reachable_count -= l.count;
        } else {
            s->unscanned_bytes -= l.bytes;
            s->unscanned_count -= l.count;
        }
    }
    p->nleaks = kept;
    return bytes;
}

// ---------------------------------------------------------------------------
// Command

static int parse(int argc, char **argv, check_options *o) {
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        int r;
        if ((r = tpprof_opt(argc, argv, &i, "--max-lost-bytes", &v)) != 0) {
            if (r < 0 || tpprof_parse_size("--max-lost-bytes", v, &o->max_lost))
                return -1;
            o->has_lost = true;
        } else if ((r = tpprof_opt(argc, argv, &i, "--max-leaked-bytes", &v)) != 0) {
            if (r < 0 || tpprof_parse_size("--max-leaked-bytes", v, &o->max_leaked))
                return -1;
            o->has_leaked = true;
        } else if ((r = tpprof_opt(argc, argv, &i, "--max-peak-bytes", &v)) != 0) {
            if (r < 0 || tpprof_parse_size("--max-peak-bytes", v, &o->max_peak))
                return -1;
            o->has_peak = true;
        } else if ((r = tpprof_opt(argc, argv, &i, "--max-leaked-storages", &v)) != 0) {
            if (r < 0 || tpprof_parse_count("--max-leaked-storages", v, &o->max_storages))
                return -1;
            o->has_storages = true;
        } else if ((r = tpprof_opt(argc, argv, &i, "--max-inactive-split-bytes", &v)) != 0) {
            if (r < 0 || tpprof_parse_size("--max-inactive-split-bytes", v, &o->max_split))
                return -1;
            o->has_split = true;
        } else if ((r = tpprof_opt(argc, argv, &i, "--max-graph-held-bytes", &v)) != 0) {
            if (r < 0 || tpprof_parse_size("--max-graph-held-bytes", v, &o->max_graph))
                return -1;
            o->has_graph = true;
        } else if ((r = tpprof_opt(argc, argv, &i, "--max-growth", &v)) != 0) {
            if (r < 0 || tpprof_parse_percent("--max-growth", v, &o->max_growth))
                return -1;
            o->has_growth = true;
        } else if (strcmp(argv[i], "--allow-incomplete") == 0) {
            o->allow_incomplete = true;
        } else if ((r = tpprof_opt(argc, argv, &i, "--baseline", &v)) != 0) {
            if (r < 0)
                return -1;
            o->baseline = v;
        } else if ((r = tpprof_opt(argc, argv, &i, "--junit", &v)) != 0) {
            if (r < 0)
                return -1;
            o->junit = v;
        } else if ((r = tpprof_opt(argc, argv, &i, "--suppress", &v)) != 0) {
            if (r < 0 || add_suppression(o, v, "--suppress") != 0)
                return -1;
        } else if ((r = tpprof_opt(argc, argv, &i, "--suppressions", &v)) != 0) {
            if (r < 0 || read_suppressions(o, v) != 0)
                return -1;
        } else if (tpprof_opt_database("check", argv[i], &o->path) != 0) {
            return -1;
        }
    }
    if (!o->path)
        return tpprof_error_set("missing the database (usage: tpprof check DB [gates])");
    if (o->has_growth && !o->baseline)
        return tpprof_error_set("--max-growth needs --baseline OLD.db");
    if (!o->has_lost && !o->has_leaked && !o->has_peak && !o->baseline && !o->has_storages &&
        !o->has_split && !o->has_graph) {
        o->has_lost = true;
        o->max_lost = 0;
    }
    return 0;
}

static int run_check(int argc, char **argv, check_options *opts);

int tpprof_cmd_check(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(tpprof_usage_check, stdout);
            return TPPROF_EXIT_OK;
        }
    check_options o = {0};
    int status = run_check(argc, argv, &o);
    for (size_t i = 0; i < o.nsuppress; i++)
        free(o.suppress[i]);
    return status;
}

// Everything after the --help scan; opts owns the suppression patterns,
// which the caller frees.
// The gate a recording must pass before any other: nothing missing from it
// (gaps.c). Added only when something is missing; with --allow-incomplete the
// reasons are a warning instead and no gate is added. Returns whether one was.
static bool gate_complete(gate *g, const tpprof_profile *p, const check_options *o) {
    tpprof_gaps gaps;
    if (tpprof_profile_gaps(p, o->path, NULL, &gaps) == 0)
        return false; // no PASS line: every recording is meant to be whole
    char why[sizeof g->line - 64];
    tpprof_gaps_join(&gaps, why, sizeof why);
    if (o->allow_incomplete) {
        fprintf(stderr, "tpprof check: warning: cannot vouch for %s: %s\n", o->path, why);
        return false;
    }
    g->name = "complete-recording";
    g->failed = true;
    snprintf(g->line, sizeof g->line, "FAIL recording cannot be vouched for: %s", why);
    return true;
}

// Notes on how the program ended that change what the gates count.
static void note_ending(const tpprof_profile *p, const char *path) {
    const tpprof_summary *s = &p->summary;
    if (s->end_signal)
        fprintf(stderr, "tpprof check: note: the program of %s died of signal %d (%s)\n", path, s->end_signal,
                strsignal(s->end_signal));
    if (s->unscanned_count && !s->leak_scanned)
        fprintf(stderr, "tpprof check: note: %s: %llu B in %llu blocks were never scanned and count as lost (%s)\n",
                path, (unsigned long long)s->unscanned_bytes, (unsigned long long)s->unscanned_count,
                !s->complete                                          ? "the recording is incomplete"
                : p->end_reason && strcmp(p->end_reason, "exec") == 0 ? "the program exec'd another"
                : s->end_signal                                       ? "the program died of a signal"
                                                                      : "no scan ran");
}

// The gates on the recording's own figures (lost, leaked, peak, tensors,
// allocators) into g; returns how many, or -1 + error.
static int gates_of(gate *g, const tpprof_profile *p, const check_options *o) {
    const tpprof_summary *s = &p->summary;
    size_t n = 0;
    char detail[1024];
    if (o->has_lost) {
        const tpprof_leak *w = worst_leak(p, true);
        detail[0] = 0;
        if (w)
            where(p, w->stack_id, w->bytes, detail, sizeof detail);
        gate_limit(&g[n++], "max-lost-bytes", "lost bytes", lost_bytes(p), o->max_lost, detail);
    }
    if (o->has_leaked) {
        const tpprof_leak *w = worst_leak(p, false);
        detail[0] = 0;
        if (w)
            where(p, w->stack_id, w->bytes, detail, sizeof detail);
        gate_limit(&g[n++], "max-leaked-bytes", "leaked bytes", s->leaked_bytes, o->max_leaked, detail);
    }
    if (o->has_peak) {
        const tpprof_site *w = worst_peak_site(p);
        detail[0] = 0;
        if (w)
            where(p, w->stack_id, w->peak_bytes, detail, sizeof detail);
        gate_limit(&g[n++], "max-peak-bytes", "peak bytes", s->peak_bytes, o->max_peak, detail);
    }
    if (o->has_storages && gate_storages(&g[n++], p, o->max_storages) != 0)
        return -1;
    if (o->has_split && gate_split(&g[n++], p, o->max_split) != 0)
        return -1;
    if (o->has_graph && gate_graph(&g[n++], p, o->max_graph) != 0)
        return -1;
    return (int)n;
}

// The three baseline gates into g.
static void gates_of_baseline(gate *g, const tpprof_profile *p, const tpprof_profile *old,
                              const check_options *o) {
    const tpprof_summary *s = &p->summary, *b = &old->summary;
    char detail[1024];
    tpprof_delta *d = NULL;
    size_t nd = 0;
    if (tpprof_diff(p, old, KEY_FRAMES, &d, &nd) != 0)
        fprintf(stderr, "tpprof check: note: %s; stacks not named\n", tpprof_error());
    grew_most(p, d, nd, Q_LEAKED, detail, sizeof detail);
    gate_growth(&g[0], "baseline-leaked-bytes", "leaked bytes", s->leaked_bytes, b->leaked_bytes,
                o->max_growth, detail);
    grew_most(p, d, nd, Q_LOST, detail, sizeof detail);
    gate_growth(&g[1], "baseline-lost-bytes", "lost bytes", lost_bytes(p), lost_bytes(old), o->max_growth,
                detail);
    grew_most(p, d, nd, Q_PEAK, detail, sizeof detail);
    gate_growth(&g[2], "baseline-peak-bytes", "peak bytes", s->peak_bytes, b->peak_bytes, o->max_growth,
                detail);
    tpprof_diff_free(d, nd);
}

// Print the gates' lines, write the JUnit file; the exit status.
static int conclude(const gate *g, size_t n, FILE *junit, const check_options *o) {
    bool failed = false;
    for (size_t i = 0; i < n; i++) {
        puts(g[i].line);
        failed |= g[i].failed;
    }
    fflush(stdout);
    int status = failed ? TPPROF_EXIT_FAIL : TPPROF_EXIT_OK;
    if (junit && write_junit(junit, o->junit, o->path, g, n) != 0) {
        fprintf(stderr, "tpprof check: %s\n", tpprof_error());
        status = TPPROF_EXIT_USAGE;
    }
    return status;
}

// A recording that could not be loaded: one FAIL line (exit 1) when tpprof
// created it and could not write a thing into it (a full disk), else the
// load's error (exit 2).
static int unloadable(FILE *junit, const check_options *o) {
    char load_error[1024], why[2048];
    snprintf(load_error, sizeof load_error, "%s", tpprof_error());
    if (!tpprof_recording_unwritten(o->path, why, sizeof why)) {
        fprintf(stderr, "tpprof check: %s\n", load_error);
        if (junit)
            fclose(junit);
        return TPPROF_EXIT_USAGE;
    }
    gate g = {.name = "complete-recording", .failed = true};
    snprintf(g.line, sizeof g.line, "FAIL recording cannot be vouched for: %s", why);
    return conclude(&g, 1, junit, o);
}

// Everything after the --help scan; opts owns the suppression patterns,
// which the caller frees.
static int run_check(int argc, char **argv, check_options *opts) {
    if (parse(argc, argv, opts) != 0) {
        fprintf(stderr, "tpprof check: %s\n", tpprof_error());
        return TPPROF_EXIT_USAGE;
    }
    const check_options o = *opts;
    // Opened first: a JUnit path that cannot be written fails before any
    // gate's PASS line could be taken for the verdict.
    FILE *junit = NULL;
    if (o.junit && !(junit = fopen(o.junit, "w"))) {
        fprintf(stderr, "tpprof check: cannot write '%s': %s\n", o.junit, strerror(errno));
        return TPPROF_EXIT_USAGE;
    }
    tpprof_profile *p = tpprof_profile_load(o.path);
    if (!p)
        return unloadable(junit, &o);
    tpprof_profile *old = NULL;
    if (o.baseline && !(old = tpprof_profile_load(o.baseline))) {
        fprintf(stderr, "tpprof check: baseline: %s\n", tpprof_error());
        tpprof_profile_free(p);
        if (junit)
            fclose(junit);
        return TPPROF_EXIT_USAGE;
    }
    uint64_t suppressed_blocks = 0;
    uint64_t suppressed = apply_suppressions(p, &o, &suppressed_blocks);
    if (old) {
        uint64_t ignored = 0;
        apply_suppressions(old, &o, &ignored);
    }
    if (suppressed_blocks)
        fprintf(stderr, "tpprof check: note: %llu B in %llu blocks suppressed\n",
                (unsigned long long)suppressed, (unsigned long long)suppressed_blocks);
    tpprof_profile_warn_skipped(p, stderr, "tpprof check: note: ");
    note_ending(p, o.path);

    gate gates[10];
    size_t n = gate_complete(&gates[0], p, &o) ? 1 : 0;
    int k = gates_of(gates + n, p, &o);
    int status = TPPROF_EXIT_USAGE;
    if (k < 0) {
        fprintf(stderr, "tpprof check: %s\n", tpprof_error());
        if (junit)
            fclose(junit);
    } else {
        n += (size_t)k;
        if (old) {
            gates_of_baseline(gates + n, p, old, &o);
            n += 3;
        }
        status = conclude(gates, n, junit, &o);
    }
    tpprof_profile_free(old);
    tpprof_profile_free(p);
    return status;
}
