// cmd_check.c: `tpprof check DB...`: the CI gate.
//
// Each gate compares one number of the recording with a limit; exit 0 when
// all hold, 1 when any fails (one FAIL line per failed gate naming the worst
// stack), 2 on usage or input errors. The gates are gates.c's table, which
// `tpprof run` parses too. --junit writes one testcase per gate for CI
// dashboards. Several recordings (or a quoted glob): each is gated, one
// FAIL line per failing recording, then every gate over the sum of their
// figures. This file never writes a database (profile.c may save symbols
// into a writable one).
#define _POSIX_C_SOURCE 200809L
#include "viewer.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const char usage_head[] =
    "usage: tpprof check DB... [--max-lost-bytes N] [--max-leaked-bytes N] [--max-peak-bytes N]\n"
    "                          [--baseline OLD.db [--max-growth PCT]] [--junit FILE]\n"
    "                          [--suppress PATTERN]... [--suppressions FILE]...\n"
    "                          [--max-leaked-storages N] [--max-inactive-split-bytes N]\n"
    "                          [--max-device-leaked-bytes [DEV:]N]... [--max-device-peak-bytes [DEV:]N]...\n"
    "                          [--allow-incomplete]\n"
    "\n"
    "Gate a recording in CI. Exit 0 when every gate holds, 1 when one fails (one\n"
    "FAIL line per failed gate, naming the worst stack) or when the recording is\n"
    "missing something (incomplete, events dropped, threads or allocations not\n"
    "recorded, the leak scan unfinished: one FAIL line saying what), 2 on usage or\n"
    "input errors. Several recordings (or a quoted glob, 'out/*.db'): one FAIL line\n"
    "per failing recording, then each gate over their sum ('total').\n"
    "\n";

static const char usage_tail[] = "  --junit FILE          also write a JUnit XML file, one testcase per gate\n";

static void usage(FILE *out) {
    fputs(usage_head, out);
    fputs(usage_tail, out);
    tpprof_gates_help(out);
}

typedef struct check_options {
    tpprof_inputs in;
    const char *junit;
    tpprof_gate_options gates;
} check_options;

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
static int write_junit(FILE *f, const char *path, const char *db, const tpprof_gate *g, size_t n) {
    size_t failures = 0;
    for (size_t i = 0; i < n; i++)
        failures += g[i].failed;
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    fprintf(f, "<testsuites tests=\"%zu\" failures=\"%zu\">\n", n, failures);
    fprintf(f, "  <testsuite name=\"tpprof check ");
    xml_escaped(f, db);
    fprintf(f, "\" tests=\"%zu\" failures=\"%zu\" errors=\"0\">\n", n, failures);
    for (size_t i = 0; i < n; i++) {
        fprintf(f, "    <testcase classname=\"tpprof.check\" name=\"");
        xml_escaped(f, g[i].name);
        fputc('"', f);
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
// Command

static int parse(int argc, char **argv, check_options *o) {
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        int r = tpprof_gate_option(&o->gates, argc, argv, &i);
        if (r < 0)
            return -1;
        if (r > 0)
            continue;
        if ((r = tpprof_opt(argc, argv, &i, "--junit", &v)) != 0) {
            if (r < 0)
                return -1;
            o->junit = v;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return tpprof_error_set("unknown option '%s' (see tpprof check --help)", argv[i]);
        } else if (tpprof_inputs_add(&o->in, argv[i]) != 0) {
            return -1;
        }
    }
    if (!o->in.n)
        return tpprof_error_set("missing the database (usage: tpprof check DB [gates])");
    if (o->in.n > 1 && o->gates.baseline)
        return tpprof_error_set("--baseline compares one recording (tpprof merge the others first)");
    return tpprof_gate_options_finish(&o->gates);
}

// Print the gates' lines, write the JUnit file; the exit status.
static int conclude(const tpprof_gate *g, size_t n, FILE *junit, const check_options *o, const char *shown) {
    bool failed = false;
    for (size_t i = 0; i < n; i++) {
        puts(g[i].line);
        failed |= g[i].failed;
    }
    fflush(stdout);
    int status = failed ? TPPROF_EXIT_FAIL : TPPROF_EXIT_OK;
    if (junit && write_junit(junit, o->junit, shown, g, n) != 0) {
        fprintf(stderr, "tpprof check: %s\n", tpprof_error());
        status = TPPROF_EXIT_USAGE;
    }
    return status;
}

// A recording that could not be loaded: when tpprof created it and could
// not write a thing into it (a full disk), the FAIL gate into *g and 0;
// else -1 (the load's error stays in tpprof_error()).
static int unloadable(const char *path, tpprof_gate *g) {
    char load_error[1024], why[2048];
    snprintf(load_error, sizeof load_error, "%s", tpprof_error());
    if (!tpprof_recording_unwritten(path, why, sizeof why)) {
        tpprof_error_set("%s", load_error);
        return -1;
    }
    *g = (tpprof_gate){.name = "complete-recording", .def = -1, .choice = -1, .failed = true};
    snprintf(g->line, sizeof g->line, "FAIL recording cannot be vouched for: %s", why);
    return 0;
}

// The gates of one recording into g; their count, or -1 + error (a usage
// or input error: exit 2).
static int gate_one(check_options *o, const char *path, bool quiet_suppressions, tpprof_gate *g) {
    tpprof_profile *p = tpprof_profile_load(path);
    if (!p)
        return unloadable(path, g) == 0 ? 1 : -1;
    tpprof_profile *old = NULL;
    if (o->gates.baseline && !(old = tpprof_profile_load(o->gates.baseline))) {
        char why[1024];
        snprintf(why, sizeof why, "%s", tpprof_error());
        tpprof_error_set("baseline: %s", why);
        tpprof_profile_free(p);
        return -1;
    }
    tpprof_suppressions_reset(&o->gates.suppressions);
    if (quiet_suppressions) { // several recordings: the sums are said once
        tpprof_suppressions_apply(p, &o->gates.suppressions);
    } else {
        tpprof_gates_suppress(&o->gates, p, old, "tpprof check: ");
    }
    tpprof_profile_warn_skipped(p, stderr, "tpprof check: note: ");
    tpprof_gates_note_ending(p, path, "tpprof check: ");
    int n = tpprof_gates_evaluate(&o->gates, p, path, old, "tpprof check: ", g);
    tpprof_profile_free(old);
    tpprof_profile_free(p);
    return n;
}

static int check_one(check_options *o, FILE *junit) {
    tpprof_gate g[TPPROF_GATES_MAX + 4];
    int n = gate_one(o, o->in.v[0], false, g);
    if (n < 0) {
        fprintf(stderr, "tpprof check: %s\n", tpprof_error());
        if (junit)
            fclose(junit);
        return TPPROF_EXIT_USAGE;
    }
    return conclude(g, (size_t)n, junit, o, o->in.v[0]);
}

// Several recordings: each is gated (a FAIL line per failing recording, its
// failed gates joined), then each chosen gate over the sum of their figures.
static int check_several(check_options *o, FILE *junit) {
    size_t ndefs = 0;
    const tpprof_gate_def *defs = tpprof_gate_defs(&ndefs);
    // Per chosen gate: the sum, the biggest recording's figure and which
    // (1-based), and how many recordings had the figure at all.
    uint64_t total[TPPROF_GATES_MAX] = {0}, most[TPPROF_GATES_MAX] = {0};
    size_t most_at[TPPROF_GATES_MAX] = {0}, recorded[TPPROF_GATES_MAX] = {0};
    // Every recording's line plus the totals, for the JUnit file and the output.
    size_t cap = o->in.n + o->gates.nchosen, n = 0, failing = 0;
    tpprof_gate *lines = calloc(cap, sizeof *lines);
    uint64_t *sup_bytes = calloc(o->gates.suppressions.n + 1, sizeof *sup_bytes);
    uint64_t *sup_blocks = calloc(o->gates.suppressions.n + 1, sizeof *sup_blocks);
    uint64_t *sup_groups = calloc(o->gates.suppressions.n + 1, sizeof *sup_groups);
    if (!lines || !sup_bytes || !sup_blocks || !sup_groups) {
        free(lines), free(sup_bytes), free(sup_blocks), free(sup_groups);
        fprintf(stderr, "tpprof check: out of memory\n");
        if (junit)
            fclose(junit);
        return TPPROF_EXIT_USAGE;
    }
    int status = TPPROF_EXIT_OK;
    for (size_t r = 0; r < o->in.n; r++) {
        tpprof_gate g[TPPROF_GATES_MAX + 4];
        int k = gate_one(o, o->in.v[r], true, g);
        if (k < 0) { // one line, exit 2: a missing file, not a database, ...
            fprintf(stderr, "tpprof check: %s\n", tpprof_error());
            status = TPPROF_EXIT_USAGE;
            break;
        }
        for (size_t s = 0; s < o->gates.suppressions.n; s++) {
            sup_bytes[s] += o->gates.suppressions.rules[s].bytes;
            sup_blocks[s] += o->gates.suppressions.rules[s].count;
            sup_groups[s] += o->gates.suppressions.rules[s].groups;
        }
        tpprof_gate *line = &lines[n++];
        line->name = o->in.v[r]; // the testcase is the recording (o owns the path)
        line->def = -1;
        line->choice = -1;
        int w = snprintf(line->line, sizeof line->line, "PASS %s", o->in.v[r]);
        for (int i = 0; i < k; i++) {
            int c = g[i].choice;
            if (c >= 0 && !g[i].unrecorded) {
                total[c] += g[i].value;
                recorded[c]++;
                if (g[i].value > most[c] || !most_at[c]) {
                    most[c] = g[i].value;
                    most_at[c] = r + 1;
                }
            }
            if (!g[i].failed || w < 0 || (size_t)w >= sizeof line->line)
                continue;
            if (!line->failed) {
                line->failed = true;
                failing++;
                w = snprintf(line->line, sizeof line->line, "FAIL %s: %s", o->in.v[r], g[i].line + 5);
            } else {
                w += snprintf(line->line + w, sizeof line->line - (size_t)w, "; %s", g[i].line + 5);
            }
        }
    }
    if (status == TPPROF_EXIT_OK) {
        uint64_t bytes = 0, blocks = 0;
        for (size_t s = 0; s < o->gates.suppressions.n; s++)
            bytes += sup_bytes[s], blocks += sup_blocks[s];
        if (blocks)
            fprintf(stderr, "tpprof check: note: %llu B in %llu blocks suppressed in %zu recordings\n",
                    (unsigned long long)bytes, (unsigned long long)blocks, o->in.n);
        for (size_t s = 0; s < o->gates.suppressions.n; s++) {
            tpprof_suppression r = o->gates.suppressions.rules[s];
            r.bytes = sup_bytes[s], r.count = sup_blocks[s], r.groups = sup_groups[s];
            char text[1200];
            fprintf(stderr, "tpprof check: note: suppressed %s\n", tpprof_suppression_describe(&r, text, sizeof text));
        }
        // A line per failing recording (and a testcase in the JUnit file).
        size_t shown = 0;
        for (size_t i = 0; i < n; i++)
            if (lines[i].failed)
                lines[shown++] = lines[i];
        n = shown;
        for (size_t c = 0; c < o->gates.nchosen; c++) {
            const tpprof_gate_choice *ch = &o->gates.chosen[c];
            tpprof_gate *t = &lines[n++];
            *t = (tpprof_gate){.name = ch->name, .def = ch->def, .choice = (int)c, .value = total[c],
                               .limit = ch->limit, .unrecorded = !recorded[c]};
            t->failed = total[c] > ch->limit;
            char worst[600] = "";
            if (t->failed && most_at[c])
                snprintf(worst, sizeof worst, ": %llu in %s", (unsigned long long)most[c], o->in.v[most_at[c] - 1]);
            else if (t->unrecorded && defs[ch->def].unrecorded) // in none of them
                snprintf(worst, sizeof worst, "%s", defs[ch->def].unrecorded);
            snprintf(t->line, sizeof t->line, "%s total %s %llu %s %llu over %zu recordings (%zu failing)%s",
                     t->failed ? "FAIL" : "PASS", ch->what, (unsigned long long)total[c], t->failed ? ">" : "<=",
                     (unsigned long long)ch->limit, o->in.n, failing, worst);
        }
        char shown_name[64];
        snprintf(shown_name, sizeof shown_name, "%zu recordings", o->in.n);
        status = conclude(lines, n, junit, o, shown_name);
    } else if (junit) {
        fclose(junit);
    }
    free(lines), free(sup_bytes), free(sup_blocks), free(sup_groups);
    return status;
}

int tpprof_cmd_check(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return TPPROF_EXIT_OK;
        }
    check_options o = {0};
    int status;
    if (parse(argc, argv, &o) != 0) {
        fprintf(stderr, "tpprof check: %s\n", tpprof_error());
        status = TPPROF_EXIT_USAGE;
    } else {
        // Opened first: a JUnit path that cannot be written fails before any
        // gate's PASS line could be taken for the verdict.
        FILE *junit = NULL;
        if (o.junit && !(junit = fopen(o.junit, "w"))) {
            fprintf(stderr, "tpprof check: cannot write '%s': %s\n", o.junit, strerror(errno));
            status = TPPROF_EXIT_USAGE;
        } else {
            status = o.in.n == 1 ? check_one(&o, junit) : check_several(&o, junit);
        }
    }
    tpprof_gate_options_free(&o.gates);
    tpprof_inputs_free(&o.in);
    return status;
}
