// cmd_run.c: `tpprof run CMD`: run a program under libtpprof.so, then
// symbolize what it recorded and say in a few lines what happened.
//
// The preload is found relative to this executable (the build tree, then the
// installed libdir compiled in by meson), so no environment variable is
// needed. The recorder is configured through TPPROF_OUTPUT, TPPROF_DEPTH and
// TPPROF_MODE. tpprof's exit status is the program's (128 + signal when it
// was killed), so `tpprof run` can stand in for the program in scripts.
// With check's gates (gates.c) or --error-exitcode N, as Valgrind's, a
// program that exits 0 but fails a gate makes tpprof exit N: `tpprof run`
// is then a test runner's wrapper (docs/test-runners.md).
// This file must not interpret the recording beyond the summary lines.
#define _GNU_SOURCE
#include "viewer.h"

#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef TPPROF_INSTALL_PRELOAD
#define TPPROF_INSTALL_PRELOAD "/usr/local/lib/tpprof/libtpprof.so"
#endif
#ifndef TPPROF_INSTALL_LIBDIR_REL
#define TPPROF_INSTALL_LIBDIR_REL "lib"
#endif

const char tpprof_usage_run[] =
    "usage: tpprof run [-o PATH] [--depth N] [--full] [--cupti] [--keep-processes]\n"
    "                  [--error-exitcode N] [--check \"GATES\"] [gates] [--] CMD [ARGS...]\n"
    "\n"
    "Run CMD with libtpprof.so preloaded and record its allocations into a SQLite\n"
    "database, then symbolize it and print a short summary on stderr.\n"
    "\n"
    "  -o, --output PATH  where to write (default tpprof.<program>.<pid>.db here);\n"
    "                     %p in PATH becomes the process id. A forked child writes\n"
    "                     <PATH without .db>.<child pid>.db\n"
    "  --depth N          record at most N frames per stack (1 to 128; default 32)\n"
    "  --full             also record every event in order (much larger database)\n"
    "  --cupti            also load the recorder as the CUDA injection library\n"
    "                     (CUDA_INJECTION64_PATH): device memory calls through CUPTI's\n"
    "                     callbacks and activity records, however the program reaches\n"
    "                     the driver; another CUPTI user (nsys) leaves interposition\n"
    "  --keep-processes   a run that records more than 10 processes (a script, a build)\n"
    "                     leaves them merged into PATH, one recording (tpprof merge);\n"
    "                     with this, one file each\n"
    "  --error-exitcode N when CMD exits 0 but the recording fails a gate, exit N\n"
    "                     (1 to 255; default 1 when a gate is given). With no gate,\n"
    "                     --max-lost-bytes 0 applies, as in tpprof check\n"
    "  --check \"GATES\"    check's gates in one argument (\"--max-lost-bytes 0\n"
    "                     --max-leaked-storages 2\"); each gate is also an option of\n"
    "                     its own:\n";

static const char usage_tail[] =
    "\n"
    "The exit status is CMD's, or 128 + the signal that killed it; with gates, N when\n"
    "CMD exited 0 and a gate failed (each failing gate one line on stderr, and each\n"
    "device gate on a recording without device memory).\n";

// ---------------------------------------------------------------------------
// Finding the preload

// Did an snprintf into a PATH_MAX buffer keep the whole path?
static bool fits(int written) {
    return written >= 0 && written < PATH_MAX;
}

static bool is_file(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

// The preload's absolute path into out, or -1 + error naming where it looked.
static int find_preload(char *out, size_t size) {
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    char candidates[3][PATH_MAX];
    size_t count = 0;
    if (n > 0) {
        self[n] = 0;
        char *slash = strrchr(self, '/');
        if (slash)
            *slash = 0;
        // Build tree: <build>/viewer/tpprof next to <build>/src/tpprof/libtpprof.so.
        if (fits(snprintf(candidates[count], PATH_MAX, "%s/../src/tpprof/libtpprof.so", self)))
            count++;
        // A relocated install: <prefix>/bin/tpprof and <prefix>/<libdir>/tpprof/.
        if (fits(snprintf(candidates[count], PATH_MAX, "%s/../%s/tpprof/libtpprof.so", self,
                          TPPROF_INSTALL_LIBDIR_REL)))
            count++;
    }
    snprintf(candidates[count++], PATH_MAX, "%s", TPPROF_INSTALL_PRELOAD);
    for (size_t i = 0; i < count; i++)
        if (is_file(candidates[i]) && realpath(candidates[i], out) && strlen(out) < size)
            return 0;
    return tpprof_error_set("cannot find libtpprof.so (looked in %s and %s)", candidates[0],
                            candidates[count - 1]);
}

// ---------------------------------------------------------------------------
// Output names

// Expand %p (the pid) in a template into out, as the recorder would.
static void expand(const char *template, pid_t pid, char *out, size_t size) {
    size_t o = 0;
    for (const char *t = template; *t && o + 1 < size; t++) {
        if (t[0] == '%' && t[1] == 'p') {
            int w = snprintf(out + o, size - o, "%ld", (long)pid);
            o += w > 0 ? (size_t)w : 0;
            t++;
        } else {
            out[o++] = *t;
        }
    }
    out[o < size ? o : size - 1] = 0;
}

// Is `tag` one or more dot-separated pieces, each digits (a child's pid) or
// "exec" + digits (an image that replaced its process)?
static bool is_child_tag(const char *tag, size_t len) {
    size_t i = 0;
    while (i < len) {
        if (len - i > 4 && strncmp(tag + i, "exec", 4) == 0)
            i += 4;
        size_t digits = 0;
        while (i < len && tag[i] >= '0' && tag[i] <= '9') {
            i++;
            digits++;
        }
        if (!digits)
            return false;
        if (i < len && tag[i++] != '.')
            return false;
        if (i == len && tag[len - 1] == '.')
            return false;
    }
    return len > 0;
}

// Was the file modified at or after `since` (stale recordings of an earlier
// run with the same -o are not this run's)?
static bool written_since(const char *path, const struct timespec *since) {
    struct stat sb;
    if (stat(path, &sb) != 0)
        return false;
    return sb.st_mtim.tv_sec > since->tv_sec ||
           (sb.st_mtim.tv_sec == since->tv_sec && sb.st_mtim.tv_nsec >= since->tv_nsec);
}

// Recordings the recorder wrote beside `db` since `since` for the processes
// CMD started or became: <db without .db>.<pid>.db and <db without
// .db>.exec<N>.db, nested. A new NULL-terminated array of new strings (free
// with free_list), sorted.
// db split as the recorder names its relatives: <stem>.<tag><suffix>, the
// suffix ".db" or, without one, "" (the tag is then appended). The stem's
// length into *len.
static const char *db_suffix(const char *db, size_t *len) {
    size_t n = strlen(db);
    const char *suffix = n > 3 && strcmp(db + n - 3, ".db") == 0 ? ".db" : "";
    *len = n - strlen(suffix);
    return suffix;
}

static char **list_children(const char *db, const struct timespec *since) {
    char pattern[PATH_MAX + 16];
    size_t len;
    const char *suffix = db_suffix(db, &len);
    snprintf(pattern, sizeof pattern, "%.*s.*%s", (int)len, db, suffix);
    glob_t g;
    memset(&g, 0, sizeof g);
    int rc = glob(pattern, 0, NULL, &g);
    char **out = calloc((rc == 0 ? g.gl_pathc : 0) + 1, sizeof *out);
    size_t n = 0;
    for (size_t i = 0; out && rc == 0 && i < g.gl_pathc; i++) {
        const char *p = g.gl_pathv[i];
        size_t plen = strlen(p), tail = strlen(suffix);
        if (plen > len + 1 + tail && is_child_tag(p + len + 1, plen - len - 1 - tail) &&
            written_since(p, since))
            out[n++] = strdup(p);
    }
    globfree(&g);
    return out;
}

// The recording of the last program the launched process became by exec:
// <db without .db>.exec<N>.db for the highest N written this run (the
// recorder numbers them 1, 2, ... in turn), or db itself; *execs = N.
static void last_image(const char *db, const struct timespec *since, char *out, size_t size, int *execs) {
    size_t len;
    const char *suffix = db_suffix(db, &len);
    snprintf(out, size, "%s", db);
    *execs = 0;
    for (int n = 1; n < 100000; n++) {
        char next[PATH_MAX + 32];
        snprintf(next, sizeof next, "%.*s.exec%d%s", (int)len, db, n, suffix);
        if (!is_file(next) || !written_since(next, since) || strlen(next) >= size)
            break;
        snprintf(out, size, "%s", next);
        *execs = n;
    }
}

// Is path (a relative of db: <stem>.<tag><suffix>) the recording of an
// image that replaced its process, its tag's last piece "exec<N>"? Only the
// tag is looked at: ".exec" elsewhere in the path (a directory x.exec_dir,
// an output app.exec_test.db) says nothing.
static bool made_by_exec(const char *db, const char *path) {
    size_t len, plen = strlen(path);
    const char *suffix = db_suffix(db, &len);
    size_t tail = strlen(suffix);
    if (plen <= len + 1 + tail || strncmp(path, db, len) != 0 || path[len] != '.')
        return false;
    const char *tag = path + len + 1, *end = path + plen - tail;
    const char *piece = end;
    while (piece > tag && piece[-1] != '.')
        piece--;
    if (end - piece < 5 || strncmp(piece, "exec", 4) != 0)
        return false;
    for (const char *c = piece + 4; c < end; c++)
        if (*c < '0' || *c > '9')
            return false;
    return true;
}

static void free_list(char **list) {
    for (size_t i = 0; list && list[i]; i++)
        free(list[i]);
    free(list);
}

// ---------------------------------------------------------------------------
// Summary

// One line when the program used tensors: storages alive at exit and the
// site of the most common reference no release matched.
static void summarize_tensors(const tpprof_profile *p, const tpprof_tensors *t) {
    // Storages alive at exit (bytes), of which those with data released;
    // those tensors alive at exit hold, and the tensor that stands for them.
    uint64_t alive = 0, bytes = 0, released = 0, held = 0;
    for (size_t i = 0; i < t->nstorages; i++) {
        const tpprof_storage *s = &t->storages[i];
        if (!tpprof_storage_alive(s))
            continue;
        alive++;
        bytes += (uint64_t)s->nbytes;
        released += !tpprof_storage_data_alive(s);
    }
    const tpprof_tensor *lead = tpprof_tensors_holder_lead(t, &held);
    size_t ng = 0;
    tpprof_ref_group *g = tpprof_ref_groups(t, false, &ng);
    char a[32], frame[512];
    fprintf(stderr, "tpprof: tensors: %llu storage%s alive at exit (%s)",
            (unsigned long long)alive, alive == 1 ? "" : "s", tpprof_format_size(bytes, a));
    if (ng)
        fprintf(stderr, "; %llu held by a %s no release matched in %s", (unsigned long long)g[0].storages,
                tpprof_ref_op_name(g[0].op),
                tpprof_stacks_describe_caller(p->stacks, g[0].stack_id, frame, sizeof frame));
    if (held && lead) {
        fprintf(stderr, "; %llu held by tensors alive at exit, such as #%lld %s created in %s",
                (unsigned long long)held, (long long)lead->id, lead->sizes ? lead->sizes : "?",
                tpprof_stacks_describe_caller(p->stacks, lead->created_stack, frame, sizeof frame));
        int64_t kept_at = 0;
        if (tpprof_tensors_unmatched_handles(t, lead->id, &kept_at) > 0)
            fprintf(stderr, ", kept by a tp_tensor_retain no release matched in %s",
                    tpprof_stacks_describe_caller(p->stacks, kept_at, frame, sizeof frame));
    }
    size_t nw = 0;
    tpprof_ref_group *weak = tpprof_ref_groups(t, true, &nw);
    if (released && nw)
        fprintf(stderr, "; %llu with data released, held by weak references taken in %s",
                (unsigned long long)released,
                tpprof_stacks_describe_caller(p->stacks, weak[0].stack_id, frame, sizeof frame));
    fprintf(stderr, "\n");
    free(weak);
    free(g);
}

// The summary's first lines: what ran, the totals, what the recording misses.
static void summarize_totals(const tpprof_profile *p, const char *path, int execs, const tpprof_program_end *end) {
    const tpprof_summary *s = &p->summary;
    char a[32], b[32], c[32], d[32];
    if (execs > 0)
        fprintf(stderr, "tpprof: after %d exec%s it ran %s; that program's summary:\n", execs,
                execs == 1 ? "" : "s", p->exe ? p->exe : "(unknown)");
    fprintf(stderr, "tpprof: %s allocations (%s), %s frees, peak %s\n",
            tpprof_format_count(s->allocations, a), tpprof_format_size(s->total_bytes, b),
            tpprof_format_count(s->frees, c), tpprof_format_size(s->peak_bytes, d));
    // The verdict first, as report's summary (verdict.c): lost, then what
    // is still reachable and who holds most of it.
    tpprof_verdict v;
    char line[512];
    tpprof_verdict_of(p, &v);
    fprintf(stderr, "tpprof: %s\n", tpprof_verdict_headline(&v, line, sizeof line));
    if (v.reachable_count)
        fprintf(stderr, "tpprof: %s\n", tpprof_verdict_reachable(&v, line, sizeof line));
    if (s->reserved_count)
        fprintf(stderr, "tpprof: reserved %s of address space in PROT_NONE mappings (not memory, not counted above)\n",
                tpprof_format_size(s->reserved_total_bytes, a));
    tpprof_profile_warn_skipped(p, stderr, "tpprof: note: ");
    // In report's and check's words (gaps.c); `end` (the process's, so
    // that of its last image: this one) tells tpprof's own failure from the
    // program's.
    tpprof_gaps gaps;
    tpprof_profile_gaps(p, path, end, &gaps);
    for (size_t i = 0; i < gaps.n; i++)
        fprintf(stderr, "tpprof: warning: missing: %s\n", gaps.reason[i]);
}

// The biggest leak that is not reachable, and whether its blocks are
// storages' data.
static void summarize_biggest_leak(const tpprof_profile *p, tpprof_tensors *t, bool tensors) {
    if (!p->nleaks || p->leaks[0].reachability == TPPROF_REACH_REACHABLE)
        return;
    char a[32], frame[512];
    fprintf(stderr, "tpprof: biggest leak: %s in %s", tpprof_format_size(p->leaks[0].bytes, a),
            tpprof_stacks_describe_caller(p->stacks, p->leaks[0].stack_id, frame, sizeof frame));
    tpprof_backing *bk = NULL;
    size_t nbk = 0, backed = 0;
    if (tensors && tpprof_backings_load(p->db, t, &bk, &nbk) == 0)
        for (size_t i = 0; i < nbk; i++)
            backed += tpprof_backing_in(&bk[i], &p->leaks[0]);
    if (backed)
        fprintf(stderr, ", the data of %zu storage%s (tpprof report --leaks names %s)", backed,
                backed == 1 ? "" : "s", backed == 1 ? "it" : "them");
    fprintf(stderr, "\n");
    free(bk);
}

// execs > 0: the recording is of the program the launched one exec'd into.
// end: how the launched process ended. gated: the whole recording is loaded
// (the gates read every site) and returned for gate_run, which would
// otherwise read it again (the PyTorch loop's: +0.3 s); else NULL.
static tpprof_profile *summarize(const char *path, int execs, const tpprof_program_end *end, bool gated) {
    // The load symbolizes and saves the symbols into the file (one read of
    // the stack nodes for both: the PyTorch loop's 3.7 million took 0.1 s a
    // read).
    tpprof_profile *p = gated ? tpprof_profile_load(path) : tpprof_profile_load_brief(path);
    if (!p) { // one line, whatever failed first
        char why[1024];
        if (tpprof_recording_unwritten(path, why, sizeof why))
            fprintf(stderr, "tpprof: %s\n", why);
        else
            fprintf(stderr, "tpprof: cannot read the recording: %s\n", tpprof_error());
        return NULL;
    }
    char full[128];
    if (p->symbolized_now && !p->symbols_saved && !tpprof_fs_full(path, full, sizeof full)) // else the symbols are only not saved
        fprintf(stderr, "tpprof: warning: could not symbolize %s: %s\n", path,
                p->symbols_unsaved ? p->symbols_unsaved : "the file is not writable");
    summarize_totals(p, path, execs, end);
    tpprof_tensors t;
    bool tensors = tpprof_tensors_load(p->db, &t) == 0 && t.attached;
    summarize_biggest_leak(p, &t, tensors);
    if (tensors) {
        summarize_tensors(p, &t);
        // What autograd graphs alive at exit keep (verdict.c), as report
        // --storages' graph-held line.
        char graphs[1024];
        if (tpprof_verdict_graphs(p, &t, graphs, sizeof graphs))
            fprintf(stderr, "tpprof: %s\n", graphs);
    }
    tpprof_tensors_free(&t);
    if (gated)
        return p;
    tpprof_profile_free(p);
    return NULL;
}

// Another recording of the run, for the "also recorded" lines.
typedef struct other {
    char *path;
    int64_t pid;
    uint64_t allocations, lost_bytes;
    bool readable, after_exec; // after_exec: an image another became by exec
    char *error;   // why not, when not readable
    char *missing; // the first thing it misses (gaps.c), or NULL
} other;

// Unreadable first (something went wrong there), then most bytes lost, then
// most allocations: the recordings a reader should open first.
static int cmp_other(const void *a, const void *b) {
    const other *x = a, *y = b;
    if (x->readable != y->readable)
        return x->readable ? 1 : -1;
    if (x->lost_bytes != y->lost_bytes)
        return x->lost_bytes > y->lost_bytes ? -1 : 1;
    if (x->allocations != y->allocations)
        return x->allocations > y->allocations ? -1 : 1;
    return strcmp(x->path, y->path);
}

// Whether the fold takes a recording (fold_run): complete, not full mode,
// no tensor tables. db: the recording, open.
static bool foldable(tpprof_db *h) {
    char *complete = h ? tpprof_db_meta(h, "complete") : NULL, *mode = h ? tpprof_db_meta(h, "mode") : NULL,
         *tensors = h ? tpprof_db_meta(h, "tensors") : NULL;
    bool yes = complete && strcmp(complete, "1") == 0 && !(mode && strcmp(mode, "full") == 0) && !tensors;
    free(complete);
    free(mode);
    free(tensors);
    return yes;
}

// The recordings list_others read, and whether the fold takes each: the fold
// does not open them again (a build's 169 opens, 40-55 ms).
typedef struct seen {
    char **paths; // owned
    bool *fold;
    size_t n;
} seen;

static void seen_free(seen *s) {
    for (size_t i = 0; i < s->n; i++)
        free(s->paths[i]);
    free(s->paths);
    free(s->fold);
    memset(s, 0, sizeof *s);
}

// 1 fold it, 0 not, -1 not seen.
static int seen_fold(const seen *s, const char *path) {
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->paths[i], path) == 0)
            return s->fold[i];
    return -1;
}

// At most this many "also recorded" lines: a shell script or a build can
// leave hundreds of recordings.
#define OTHERS_SHOWN 8

// Names the most telling of the run's other recordings (the first image of
// an exec chain, forked children and what they became). They are
// symbolized afterwards (symbolize_apart), once folded where they are: a
// build's 170 recordings share most of their frames.
static void list_others(const char *db, const char *shown, const struct timespec *since, seen *read) {
    char **children = list_children(db, since);
    size_t n = 0, cap = 1;
    for (size_t c = 0; children && children[c]; c++)
        cap++;
    other *v = calloc(cap, sizeof *v);
    read->paths = calloc(cap, sizeof *read->paths);
    read->fold = calloc(cap, sizeof *read->fold);
    if (!v || !read->paths || !read->fold) {
        free(v);
        seen_free(read);
        free_list(children);
        return;
    }
    if (strcmp(db, shown) != 0)
        v[n++].path = strdup(db);
    for (size_t c = 0; children && children[c]; c++)
        if (strcmp(children[c], shown) != 0)
            v[n++].path = strdup(children[c]);
    free_list(children);
    uint64_t lost_total = 0;
    for (size_t i = 0; i < n; i++) {
        tpprof_profile *p = NULL;
        if (!v[i].path || !(p = tpprof_profile_load_figures(v[i].path))) {
            char why[1024], line[2048];
            if (v[i].path && tpprof_recording_unwritten(v[i].path, why, sizeof why))
                v[i].error = strdup(why);
            else if (snprintf(line, sizeof line, "unreadable: %s", tpprof_error()) > 0)
                v[i].error = strdup(line);
            continue;
        }
        v[i].readable = true;
        if ((read->paths[read->n] = strdup(v[i].path)) != NULL)
            read->fold[read->n++] = foldable(p->db);
        tpprof_gaps gaps;
        if (tpprof_profile_gaps(p, v[i].path, NULL, &gaps))
            v[i].missing = strdup(gaps.reason[0]);
        v[i].after_exec = made_by_exec(db, v[i].path);
        v[i].pid = p->summary.pid;
        v[i].allocations = p->summary.allocations;
        v[i].lost_bytes = p->summary.lost_bytes;
        lost_total += p->summary.lost_bytes;
        tpprof_profile_free(p);
    }
    qsort(v, n, sizeof *v, cmp_other);
    size_t shown_n = n <= OTHERS_SHOWN + 2 ? n : OTHERS_SHOWN;
    for (size_t i = 0; i < shown_n; i++) {
        char a[32], b[32];
        if (!v[i].path)
            continue;
        if (!v[i].readable) {
            fprintf(stderr, "tpprof: also recorded: %s (%s)\n", v[i].path,
                    v[i].error ? v[i].error : "unreadable: out of memory");
            continue;
        }
        fprintf(stderr, "tpprof: also recorded: %s (pid %lld%s: %s allocations, lost %s%s%s)\n", v[i].path,
                (long long)v[i].pid, v[i].after_exec ? ", after exec" : "",
                tpprof_format_count(v[i].allocations, a), tpprof_format_size(v[i].lost_bytes, b),
                v[i].missing ? "; missing: " : "", v[i].missing ? v[i].missing : "");
    }
    if (shown_n < n) {
        char a[32];
        size_t len;
        const char *suffix = db_suffix(db, &len);
        fprintf(stderr, "tpprof: %zu more recordings of this run are not listed (%zu in all, %s lost among them): %.*s.*%s\n",
                n - shown_n, n, tpprof_format_size(lost_total, a), (int)len, db, suffix);
    }
    for (size_t i = 0; i < n; i++) {
        free(v[i].path);
        free(v[i].error);
        free(v[i].missing);
    }
    free(v);
}

// The output template (%p not yet expanded) as an absolute path into
// template: the program may chdir before the recorder opens it. 0 or -1 + error.
static int output_template(const char *output, const char *cmd0, char *template, size_t size) {
    char cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof cwd))
        return tpprof_error_set("cannot read the current directory: %s", strerror(errno));
    int w;
    if (!output)
        w = snprintf(template, size, "%s/tpprof.%s.%%p.db", cwd, tpprof_basename(cmd0));
    else if (output[0] == '/')
        w = snprintf(template, size, "%s", output);
    else
        w = snprintf(template, size, "%s/%s", cwd, output);
    if (!fits(w) || (size_t)w >= size)
        return tpprof_error_set("the output path is too long");
    // Checked as this process's pid would name it: the program's differs
    // only in its digits.
    char now[PATH_MAX];
    expand(template, getpid(), now, sizeof now);
    return tpprof_run_check_output(now);
}

// ---------------------------------------------------------------------------
// Folding a run's many recordings into one

// A run that left more recordings than the summary lists (a shell script, a
// build, a test suite: hundreds of short processes) leaves one file instead:
// they are merged as `tpprof merge` does, unsymbolized, into db, the run's
// recording's name (whose frames are then symbolized once for all the
// processes: the 40-file build's 169 recordings took 1.78 s to symbolize
// one by one and merge, 0.95 s so), and the files merged are removed.
// What cannot be read, or is not complete (a process killed, or one still
// running after the program: a daemon writing on), stays apart as it is,
// and so does what a merge would lose: a full-mode recording's events, a
// tensor recording's tables.
// Returns how many were folded (0: none).
static size_t fold_run(const char *db, const struct timespec *since, const seen *read) {
    char **children = list_children(db, since);
    size_t n = 0;
    for (size_t c = 0; children && children[c]; c++)
        n++;
    bool main_too = is_file(db) && written_since(db, since);
    char **in = calloc(n + 2, sizeof *in);
    size_t k = 0;
    for (size_t c = 0; in && c <= n; c++) {
        const char *path = c == 0 ? (main_too ? db : NULL) : children[c - 1];
        int known = path ? seen_fold(read, path) : 0;
        if (known < 0) { // (the run's own recording, which the summary read)
            tpprof_db *h = tpprof_db_open(path, false);
            known = foldable(h);
            tpprof_db_close(h);
        }
        if (known)
            in[k++] = (char *)path;
    }
    // Into db, unless the run's own recording is there and stays apart (not
    // complete): then beside it, <db without .db>.run.db.
    char target[PATH_MAX + 16], tmp[PATH_MAX + 32];
    size_t stem;
    const char *suffix = db_suffix(db, &stem);
    if (main_too && (!k || in[0] != db))
        snprintf(target, sizeof target, "%.*s.run%s", (int)stem, db, suffix);
    else
        snprintf(target, sizeof target, "%s", db);
    snprintf(tmp, sizeof tmp, "%s.fold", target);
    unlink(tmp);
    size_t folded = 0;
    if (k > OTHERS_SHOWN + 2) {
        if (tpprof_merge(tmp, in, k, true, false, NULL) != 0) {
            fprintf(stderr, "tpprof: the run's %zu recordings stay apart: %s\n", k, tpprof_error());
        } else {
            static const char *const sidecar[] = {"", "-wal", "-shm", "-journal"};
            char side[PATH_MAX + 16];
            for (size_t i = 0; i < k; i++)
                for (size_t j = 0; j < 4; j++) {
                    snprintf(side, sizeof side, "%s%s", in[i], sidecar[j]);
                    unlink(side);
                }
            if (rename(tmp, target) != 0) {
                fprintf(stderr, "tpprof: cannot name the run's recording %s: %s; it is %s\n", target, strerror(errno),
                        tmp);
            } else {
                folded = k;
                fprintf(stderr, "tpprof: the run's %zu recordings are folded into %s, one recording of %zu processes"
                                " (tpprof report %s; --keep-processes keeps one file each)\n", k, target, k, target);
            }
        }
    }
    free(in);
    free_list(children);
    return folded;
}

// Symbolizes every recording of the run still apart (all of them with
// --keep-processes; else those not folded: fewer than the fold takes, or
// incomplete, full mode, tensors), in place, while the programs' files
// are still there. The run's own recording (the last image) is already.
static void symbolize_apart(const char *db, const struct timespec *since) {
    char **children = list_children(db, since);
    if (is_file(db) && written_since(db, since))
        tpprof_symbolize_file(db);
    for (size_t c = 0; children && children[c]; c++)
        tpprof_symbolize_file(children[c]); // (a failure shows when it is read)
    free_list(children);
}

// ---------------------------------------------------------------------------
// Running the program. Signals: the terminal's ^C reaches the program;
// tpprof waits and reports.

static volatile sig_atomic_t child_pid;

static void forward(int sig) {
    if (child_pid > 0)
        kill((pid_t)child_pid, sig);
}

typedef struct run_options {
    const char *output, *depth;
    bool full;
    bool cupti; // --cupti: the preload is also CUDA's injection library
    bool keep_processes; // --keep-processes: no fold_run
    char **cmd; // the program and its arguments (argv's)
    bool gated; // a gate or --error-exitcode was given
    int error_exitcode;
    tpprof_gate_options gates;
} run_options;

// The file whose creation lets one process of the run say that it could
// not write its recording (TPPROF_WARN_ONCE: the recorder's lifecycle.c);
// removed when the program ends.
static char warn_once[64];

// In the child: the recorder's environment, then the program. Writes exec's
// errno into errfd when it cannot start.
static void exec_program(const run_options *o, const char *template, const char *preload, int errfd) {
    char out[PATH_MAX];
    expand(template, getpid(), out, sizeof out);
    setenv("TPPROF_OUTPUT", out, 1);
    if (warn_once[0])
        setenv("TPPROF_WARN_ONCE", warn_once, 1);
    if (o->depth)
        setenv("TPPROF_DEPTH", o->depth, 1);
    if (o->full)
        setenv("TPPROF_MODE", "full", 1);
    else
        unsetenv("TPPROF_MODE");
    const char *old = getenv("LD_PRELOAD");
    char ld[2 * PATH_MAX + 2];
    if (old && *old)
        snprintf(ld, sizeof ld, "%s:%s", preload, old);
    else
        snprintf(ld, sizeof ld, "%s", preload);
    setenv("LD_PRELOAD", ld, 1);
    if (o->cupti) {
        // The CUDA driver loads it at cuInit and calls its InitializeInjection.
        setenv("CUDA_INJECTION64_PATH", preload, 1);
        setenv("TPPROF_CUPTI", "1", 1);
    }
    execvp(o->cmd[0], o->cmd);
    int err = errno;
    ssize_t w = write(errfd, &err, sizeof err);
    (void)w;
    _exit(127);
}

// Start the program and wait for it. *status: its wait status; *exec_err:
// errno when it could not be started (0 when it ran). The pid, or -1 +
// error.
static pid_t launch(const run_options *o, const char *template, const char *preload, int *status,
                    int *exec_err) {
    int errpipe[2];
    if (pipe2(errpipe, O_CLOEXEC) != 0)
        return tpprof_error_set("pipe: %s", strerror(errno));
    fflush(NULL);
    if (access("/dev/shm", W_OK) == 0) {
        snprintf(warn_once, sizeof warn_once, "/dev/shm/tpprof-warned-%d", (int)getpid());
        unlink(warn_once);
    }
    pid_t pid = fork();
    if (pid < 0) {
        close(errpipe[0]);
        close(errpipe[1]);
        return tpprof_error_set("fork: %s", strerror(errno));
    }
    if (pid == 0) {
        close(errpipe[0]);
        exec_program(o, template, preload, errpipe[1]);
    }
    close(errpipe[1]);
    child_pid = pid;
    struct sigaction ignore = {.sa_handler = SIG_IGN}, fwd = {.sa_handler = forward};
    sigaction(SIGINT, &ignore, NULL);
    sigaction(SIGQUIT, &ignore, NULL);
    sigaction(SIGTERM, &fwd, NULL);
    sigaction(SIGHUP, &fwd, NULL);
    ssize_t got;
    *exec_err = 0;
    while ((got = read(errpipe[0], exec_err, sizeof *exec_err)) < 0 && errno == EINTR)
        ;
    if (got != (ssize_t)sizeof *exec_err)
        *exec_err = 0;
    close(errpipe[0]);
    while (waitpid(pid, status, 0) < 0 && errno == EINTR)
        ;
    child_pid = 0;
    if (warn_once[0])
        unlink(warn_once);
    // The program is gone: ^C may interrupt the symbolizing again.
    struct sigaction dfl = {.sa_handler = SIG_DFL};
    sigaction(SIGINT, &dfl, NULL);
    sigaction(SIGQUIT, &dfl, NULL);
    return pid;
}

// ---------------------------------------------------------------------------
// Command

// Can --cupti be honoured: the recorder was built with the CUPTI backend,
// and no other injection library is set (it would be replaced)? 0 or -1 + error.
static int check_cupti(void) {
#ifndef TPPROF_HAVE_CUPTI
    return tpprof_error_set("--cupti: this tpprof's recorder was built without the CUPTI backend (it needs "
                            "cupti.h under /usr/local/cuda/extras/CUPTI/include or /usr/local/cuda/include at "
                            "build time); device memory is recorded by interposition without it");
#else
    const char *other = getenv("CUDA_INJECTION64_PATH");
    if (other && *other)
        return tpprof_error_set("--cupti: CUDA_INJECTION64_PATH is already set (%s): another tool injects into "
                                "CUDA; run without --cupti to keep it",
                                other);
    return 0;
#endif
}

// Options into o; 0, 1 after --help, or -1 + error.
static int parse_run(int argc, char **argv, run_options *o) {
    int i = 1;
    for (; i < argc; i++) {
        const char *v = NULL;
        int r;
        if (strcmp(argv[i], "--") == 0) {
            i++;
            break;
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(tpprof_usage_run, stdout);
            tpprof_gates_help(stdout);
            fputs(usage_tail, stdout);
            return 1;
        } else if (strcmp(argv[i], "--full") == 0) {
            o->full = true;
        } else if (strcmp(argv[i], "--cupti") == 0) {
            if (check_cupti() != 0)
                return -1;
            o->cupti = true;
        } else if (strcmp(argv[i], "--keep-processes") == 0) {
            o->keep_processes = true;
        } else if ((r = tpprof_opt(argc, argv, &i, "-o", &v)) != 0 ||
                   (r = tpprof_opt(argc, argv, &i, "--output", &v)) != 0) {
            if (r < 0)
                return -1;
            o->output = v;
        } else if ((r = tpprof_opt(argc, argv, &i, "--depth", &v)) != 0) {
            uint64_t d = 0;
            if (r < 0 || tpprof_parse_count("--depth", v, &d) != 0)
                return -1;
            // The recorder keeps at most 128 frames (docs/schema.md).
            if (d == 0 || d > 128)
                return tpprof_error_set("--depth: expected 1 to 128, got %s", v);
            o->depth = v;
        } else if ((r = tpprof_opt(argc, argv, &i, "--error-exitcode", &v)) != 0) {
            uint64_t n = 0;
            if (r < 0 || tpprof_parse_count("--error-exitcode", v, &n) != 0)
                return -1;
            if (n == 0 || n > 255)
                return tpprof_error_set("--error-exitcode: expected 1 to 255, got %s", v);
            o->error_exitcode = (int)n;
            o->gated = true;
        } else if ((r = tpprof_opt(argc, argv, &i, "--check", &v)) != 0) {
            if (r < 0 || tpprof_gate_options_parse_string(&o->gates, v) != 0)
                return -1;
            o->gated = true;
        } else if ((r = tpprof_gate_option(&o->gates, argc, argv, &i)) != 0) {
            if (r < 0)
                return -1;
            o->gated = true;
        } else if (argv[i][0] == '-') {
            return tpprof_error_set("unknown option '%s' (see tpprof run --help)", argv[i]);
        } else {
            break;
        }
    }
    if (i >= argc)
        return tpprof_error_set("missing the command to run (usage: tpprof run [options] CMD [ARGS...])");
    o->cmd = argv + i;
    if (!o->gated)
        return 0;
    if (!o->error_exitcode)
        o->error_exitcode = 1;
    // A baseline that cannot be read is refused now, not after the run.
    if (o->gates.baseline && access(o->gates.baseline, R_OK) != 0)
        return tpprof_error_set("--baseline: cannot read %s: %s", o->gates.baseline, strerror(errno));
    return tpprof_gate_options_finish(&o->gates);
}

// ---------------------------------------------------------------------------
// Gates (gates.c): the recording the summary is of, after the summary.
// p: that recording as summarize loaded it (taken), or NULL to load it here.
// Returns whether a gate failed (each failing gate one line on stderr).

static bool gate_run(run_options *o, const char *path, tpprof_profile *p) {
    if (!p)
        p = tpprof_profile_load(path);
    if (!p) {
        fprintf(stderr, "tpprof: FAIL recording cannot be gated: %s\n", tpprof_error());
        return true;
    }
    tpprof_profile *old = NULL;
    if (o->gates.baseline && !(old = tpprof_profile_load(o->gates.baseline))) {
        fprintf(stderr, "tpprof: FAIL baseline cannot be read: %s\n", tpprof_error());
        tpprof_profile_free(p);
        return true;
    }
    tpprof_gates_suppress(&o->gates, p, old, "tpprof: ");
    tpprof_gate g[TPPROF_GATES_MAX + 4];
    int n = tpprof_gates_evaluate(&o->gates, p, path, old, "tpprof: ", g);
    bool failed = n < 0;
    if (n < 0)
        fprintf(stderr, "tpprof: FAIL the gates cannot be evaluated: %s\n", tpprof_error());
    size_t passed = 0;
    for (int i = 0; i < n; i++) {
        // A passing gate is a line of its own only when the recording did
        // not have its figure (a device gate on a program without CUDA).
        if (g[i].failed || g[i].unrecorded)
            fprintf(stderr, "tpprof: %s\n", g[i].line);
        failed |= g[i].failed;
        passed += !g[i].failed;
    }
    if (!failed)
        fprintf(stderr, "tpprof: PASS %zu gate%s\n", passed, passed == 1 ? "" : "s");
    tpprof_profile_free(old);
    tpprof_profile_free(p);
    return failed;
}

// After the program: how it ended, then the summary of what was recorded,
// then the gates. Returns tpprof's exit status (the program's, or
// --error-exitcode's when the program exited 0 and a gate failed).
static int report_run(run_options *o, const char *template, pid_t pid, int status,
                      const struct timespec *started) {
    const char *cmd0 = o->cmd[0];
    int code;
    char how[64];
    tpprof_program_end end = {.signaled = WIFSIGNALED(status)};
    if (WIFSIGNALED(status)) {
        end.value = WTERMSIG(status);
        code = 128 + end.value;
        snprintf(how, sizeof how, "was killed by signal %d (%s)", end.value, strsignal(end.value));
    } else {
        end.value = code = WEXITSTATUS(status);
        snprintf(how, sizeof how, "exited with status %d", code);
    }
    char db[PATH_MAX];
    expand(template, pid, db, sizeof db);
    fprintf(stderr, "tpprof: %s %s\n", cmd0, how);
    // With gates, a run that leaves nothing to gate fails them.
    int ungated = o->gated && code == 0 ? o->error_exitcode : code;
    if (is_file(db) && !written_since(db, started)) {
        fprintf(stderr, "tpprof: no recording was written; %s is from an earlier run\n", db);
        if (o->gated)
            fprintf(stderr, "tpprof: FAIL no recording to gate\n");
        return ungated;
    }
    if (!is_file(db)) {
        fprintf(stderr,
                "tpprof: no recording at %s (a setuid program, or one that cleared LD_PRELOAD before it started?)\n",
                db);
        if (o->gated)
            fprintf(stderr, "tpprof: FAIL no recording to gate\n");
        return ungated;
    }
    char last[PATH_MAX];
    int execs = 0;
    last_image(db, started, last, sizeof last, &execs);
    tpprof_profile *summarized = summarize(last, execs, &end, o->gated);
    fprintf(stderr, "tpprof: recording: %s  (tpprof report %s)\n", last, last);
    seen read = {0};
    list_others(db, last, started, &read);
    bool gate_failed = o->gated && gate_run(o, last, summarized);
    if (!o->keep_processes)
        fold_run(db, started, &read);
    seen_free(&read);
    symbolize_apart(db, started);
    if (gate_failed && code == 0)
        return o->error_exitcode;
    return code;
}

static int run_main(run_options *o, int argc, char **argv);

int tpprof_cmd_run(int argc, char **argv) {
    run_options o = {0};
    int status = run_main(&o, argc, argv);
    tpprof_gate_options_free(&o.gates);
    return status;
}

// Everything but freeing o (which parsing fills).
static int run_main(run_options *o, int argc, char **argv) {
    int parsed = parse_run(argc, argv, o);
    if (parsed != 0) {
        if (parsed < 0)
            fprintf(stderr, "tpprof run: %s\n", tpprof_error());
        return parsed < 0 ? TPPROF_EXIT_USAGE : TPPROF_EXIT_OK;
    }
    char preload[PATH_MAX], template[PATH_MAX];
    if (tpprof_run_refuse_unrecordable(o->cmd) != 0 || find_preload(preload, sizeof preload) != 0 ||
        output_template(o->output, o->cmd[0], template, sizeof template) != 0) {
        fprintf(stderr, "tpprof run: %s\n", tpprof_error());
        return TPPROF_EXIT_USAGE;
    }
    // File systems keep coarser mtimes than the clock: start a tick early.
    struct timespec started;
    clock_gettime(CLOCK_REALTIME, &started);
    started.tv_sec -= 1;
    int status = 0, exec_err = 0;
    pid_t pid = launch(o, template, preload, &status, &exec_err);
    if (pid < 0) {
        fprintf(stderr, "tpprof run: %s\n", tpprof_error());
        return TPPROF_EXIT_USAGE;
    }
    if (exec_err) {
        fprintf(stderr, "tpprof run: cannot run '%s': %s\n", o->cmd[0], strerror(exec_err));
        return exec_err == ENOENT ? 127 : 126;
    }
    return report_run(o, template, pid, status, &started);
}
