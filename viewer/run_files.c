// run_files.c: the recordings one `tpprof run` leaves beside its own: their
// names, the "also recorded" lines, and folding them into one file.
//
// A build or a test suite leaves hundreds of recordings. Reading them (the
// list's figures) and folding them used to start once the program had
// ended, a serial tail of ~0.7 s after the 40-file build's 0.5 s (169
// recordings). Now a recording is read, and folded, as soon as its process
// has ended (tpprof_run_files_poll, between the run's waits for the
// program): its file is then whole and no longer written. What is left
// after the program is its last few processes, the index and the symbols.
// This file must not interpret a recording beyond the list's figures.
#define _GNU_SOURCE
#include "viewer.h"

#include <errno.h>
#include <glob.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

// At most this many "also recorded" lines: a shell script or a build can
// leave hundreds of recordings; the fold takes a run's recordings when there
// are more than the list would name (OTHERS_SHOWN + 2).
#define OTHERS_SHOWN 8

// A scan for new recordings while the program runs, at most this often.
#define POLL_SCAN_NS 50000000
// Recordings folded in one poll: each ~2-3 ms, and the run waits for the
// program between polls.
#define POLL_FOLDS 4

static bool is_file(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

// ---------------------------------------------------------------------------
// Names

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

// (run_files.h; stale recordings of an earlier run with the same -o are not
// this run's)
bool tpprof_run_written_since(const char *path, const struct timespec *since) {
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
            tpprof_run_written_since(p, since))
            out[n++] = strdup(p);
    }
    globfree(&g);
    return out;
}

// (run_files.h)
void tpprof_run_last_image(const char *db, const struct timespec *since, char *out, size_t size, int *execs) {
    size_t len;
    const char *suffix = db_suffix(db, &len);
    snprintf(out, size, "%s", db);
    *execs = 0;
    for (int n = 1; n < 100000; n++) {
        char next[PATH_MAX + 32];
        snprintf(next, sizeof next, "%.*s.exec%d%s", (int)len, db, n, suffix);
        if (!is_file(next) || !tpprof_run_written_since(next, since) || strlen(next) >= size)
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
// The recordings, as read

// Another recording of the run, for the "also recorded" lines.
typedef struct other {
    const char *path; // its seen_file's
    int64_t pid;
    uint64_t allocations, lost_bytes;
    bool readable, after_exec; // after_exec: an image another became by exec
    char *error;   // why not, when not readable (owned)
    char *missing; // the first thing it misses (gaps.c), or NULL (owned)
} other;

// One recording of the run as it was read.
typedef struct seen_file {
    char *path; // owned
    struct stat st; // the file when read: one written since is read again
    other o;
    bool read;   // o and fold hold what it says
    bool fold;   // the fold takes it (foldable)
    bool folded; // in f->merge
    int64_t pid; // its process, from its name or its complete recording (0: not known yet)
    tpprof_db *db; // open from the read for the fold (read, fold, not folded), or NULL
} seen_file;

struct tpprof_run_files {
    char db[PATH_MAX];
    struct timespec since;
    bool may_fold;
    seen_file **v; // sorted by path
    size_t n, cap;
    // The fold under way, into tmp (renamed at the end), or NULL. Process
    // number 1 is kept for db, the launched process's, whose recording is
    // written last; the others take 2, 3, ... as their processes end.
    tpprof_merging *merge;
    bool merge_failed; // during the run: the end folds from scratch
    int64_t next_process;
    char tmp[PATH_MAX + 16];
    uint64_t scanned_ns;
};

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

tpprof_run_files *tpprof_run_files_new(const char *db, const struct timespec *since, bool fold) {
    tpprof_run_files *f = calloc(1, sizeof *f);
    if (!f)
        return NULL;
    snprintf(f->db, sizeof f->db, "%s", db);
    snprintf(f->tmp, sizeof f->tmp, "%s.fold", db);
    f->since = *since;
    f->may_fold = fold;
    f->next_process = 2;
    return f;
}

static void other_clear(other *o) {
    free(o->error);
    free(o->missing);
    memset(o, 0, sizeof *o);
}

void tpprof_run_files_free(tpprof_run_files *f) {
    if (!f)
        return;
    tpprof_merge_abandon(f->merge);
    for (size_t i = 0; i < f->n; i++) {
        other_clear(&f->v[i]->o);
        tpprof_db_close(f->v[i]->db);
        free(f->v[i]->path);
        free(f->v[i]);
    }
    free(f->v);
    free(f);
}

// The entry of path, made if new; NULL when out of memory.
static seen_file *seen_get(tpprof_run_files *f, const char *path) {
    size_t lo = 0, hi = f->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strcmp(f->v[mid]->path, path);
        if (c == 0)
            return f->v[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (f->n == f->cap) {
        size_t cap = f->cap ? 2 * f->cap : 64;
        seen_file **v = realloc(f->v, cap * sizeof *v);
        if (!v)
            return NULL;
        f->v = v;
        f->cap = cap;
    }
    seen_file *s = calloc(1, sizeof *s);
    if (!s || !(s->path = strdup(path))) {
        free(s);
        return NULL;
    }
    memmove(f->v + lo + 1, f->v + lo, (f->n - lo) * sizeof *f->v);
    f->v[lo] = s;
    f->n++;
    return s;
}

// Is the file still the one read (not one another process with the same
// pid wrote since, nor written on)?
static bool same_file(const seen_file *s) {
    struct stat st;
    return stat(s->path, &st) == 0 && st.st_dev == s->st.st_dev && st.st_ino == s->st.st_ino &&
           st.st_size == s->st.st_size && st.st_mtim.tv_sec == s->st.st_mtim.tv_sec &&
           st.st_mtim.tv_nsec == s->st.st_mtim.tv_nsec;
}

// Whether the fold takes a recording: complete, not full mode, no tensor
// tables. h: the recording, open.
static bool foldable(tpprof_db *h) {
    char *complete = h ? tpprof_db_meta(h, "complete") : NULL, *mode = h ? tpprof_db_meta(h, "mode") : NULL,
         *tensors = h ? tpprof_db_meta(h, "tensors") : NULL;
    bool yes = complete && strcmp(complete, "1") == 0 && !(mode && strcmp(mode, "full") == 0) && !tensors;
    free(complete);
    free(mode);
    free(tensors);
    return yes;
}

// Reads s's figures (the list's) and whether the fold takes it. A file
// folded already and written since is another recording now (a new process
// with the same pid): its old one stays in the fold.
static void read_figures(const tpprof_run_files *f, seen_file *s) {
    other_clear(&s->o);
    tpprof_db_close(s->db);
    s->db = NULL;
    s->o.path = s->path;
    s->read = true;
    s->fold = s->folded = false;
    if (stat(s->path, &s->st) != 0)
        memset(&s->st, 0, sizeof s->st);
    tpprof_profile *p = tpprof_profile_load_figures(s->path);
    if (!p) {
        char why[1024], line[2048];
        if (tpprof_recording_unwritten(s->path, why, sizeof why))
            s->o.error = strdup(why);
        else if (snprintf(line, sizeof line, "unreadable: %s", tpprof_error()) > 0)
            s->o.error = strdup(line);
        return;
    }
    s->o.readable = true;
    s->fold = foldable(p->db);
    tpprof_gaps gaps;
    if (tpprof_profile_gaps(p, s->path, NULL, &gaps))
        s->o.missing = strdup(gaps.reason[0]);
    s->o.after_exec = made_by_exec(f->db, s->path);
    s->o.pid = p->summary.pid;
    s->o.allocations = p->summary.allocations;
    s->o.lost_bytes = p->summary.lost_bytes;
    if (s->fold && f->may_fold && !f->merge_failed) { // the fold's read of it: one open, not two
        s->db = p->db;
        p->db = NULL;
    }
    tpprof_profile_free(p);
}

// The pid in the name of a recording of the run: <stem>.<pid><suffix> or
// <stem>.<pid>.exec<N><suffix>, the names the processes of a run give
// themselves (the run's TPPROF_OUTPUT is theirs too); 0 for any other.
static int64_t pid_of_name(const char *db, const char *path) {
    size_t len, plen = strlen(path);
    const char *suffix = db_suffix(db, &len);
    size_t tail = strlen(suffix);
    if (plen <= len + 1 + tail || strncmp(path, db, len) != 0 || path[len] != '.')
        return 0;
    const char *c = path + len + 1, *end = path + plen - tail;
    int64_t pid = 0;
    for (; c < end && *c >= '0' && *c <= '9' && pid < INT32_MAX; c++)
        pid = pid * 10 + (*c - '0');
    if (c == end)
        return pid;
    if (end - c < 6 || strncmp(c, ".exec", 5) != 0)
        return 0;
    for (c += 5; c < end; c++)
        if (*c < '0' || *c > '9')
            return 0;
    return pid;
}

// Has s's process ended, its recording whole? Its file closed (no -wal:
// the recorder's close removes it; a process killed leaves it, and is read
// after the program) and its process gone: an image that ended by exec is
// complete while its process runs on (and reopens it should the exec
// fail). The pid is the name's; for a file named otherwise, its recording's
// once that says it is complete.
static bool ended(const tpprof_run_files *f, seen_file *s) {
    char wal[PATH_MAX + 8];
    snprintf(wal, sizeof wal, "%s-wal", s->path);
    if (access(wal, F_OK) == 0)
        return false;
    if (!s->pid)
        s->pid = pid_of_name(f->db, s->path);
    if (!s->pid) {
        tpprof_db *h = tpprof_db_open(s->path, false);
        if (!h)
            return false; // (being made; or damaged: read after the program)
        int64_t complete = 0, pid = 0;
        bool whole = tpprof_db_meta_i64(h, "complete", &complete) && complete == 1 &&
                     tpprof_db_meta_i64(h, "pid", &pid) && pid > 0;
        tpprof_db_close(h);
        if (!whole)
            return false;
        s->pid = pid;
    }
    return kill((pid_t)s->pid, 0) != 0 && errno == ESRCH;
}

// ---------------------------------------------------------------------------
// While the program runs

// Closes the recordings kept open for the fold: none is kept for a fold
// that waits for the end (hundreds of descriptors).
static void drop_kept(tpprof_run_files *f) {
    for (size_t i = 0; i < f->n; i++) {
        tpprof_db_close(f->v[i]->db);
        f->v[i]->db = NULL;
    }
}

// Adds up to max of the recordings read and not yet folded to the fold.
// Whether it added any. A failure ends the fold under way: the end tries
// again from scratch, and says why if it fails too.
static bool fold_some(tpprof_run_files *f, size_t max) {
    size_t added = 0;
    for (size_t i = 0; i < f->n && f->merge && added < max; i++) {
        seen_file *s = f->v[i];
        if (!s->read || !s->fold || s->folded || strcmp(s->path, f->db) == 0)
            continue;
        int added_ok = tpprof_merge_add(f->merge, s->path, f->next_process++, s->db);
        tpprof_db_close(s->db);
        s->db = NULL;
        if (added_ok != 0) {
            tpprof_merge_abandon(f->merge);
            f->merge = NULL;
            f->merge_failed = true;
            for (size_t j = 0; j < f->n; j++)
                f->v[j]->folded = false;
            drop_kept(f);
            return true;
        }
        s->folded = true;
        added++;
    }
    return added > 0;
}

static size_t count_foldable(const tpprof_run_files *f) {
    size_t k = 0;
    for (size_t i = 0; i < f->n; i++)
        k += f->v[i]->read && f->v[i]->fold;
    return k;
}

bool tpprof_run_files_poll(tpprof_run_files *f) {
    if (!f)
        return false;
    if (fold_some(f, POLL_FOLDS))
        return true;
    uint64_t now = now_ns();
    if (now - f->scanned_ns < POLL_SCAN_NS)
        return false;
    f->scanned_ns = now;
    bool did = false;
    char **children = list_children(f->db, &f->since);
    for (size_t c = 0; children && children[c]; c++) {
        seen_file *s = seen_get(f, children[c]);
        if (s && !s->read && ended(f, s)) {
            read_figures(f, s);
            did = true;
        }
    }
    free_list(children);
    if (f->may_fold && !f->merge && !f->merge_failed && count_foldable(f) > OTHERS_SHOWN + 2) {
        unlink(f->tmp); // (an earlier run's, killed)
        f->merge = tpprof_merge_begin(f->tmp);
        f->merge_failed = !f->merge;
        if (f->merge_failed)
            drop_kept(f);
    }
    return fold_some(f, POLL_FOLDS) || did;
}

// ---------------------------------------------------------------------------
// After the program

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

// The list names the most telling of the run's other recordings (the first
// image of an exec chain, forked children and what they became). They are
// symbolized afterwards (symbolize_apart), once folded where they are: a
// build's 170 recordings share most of their frames. Those read while the
// program ran are not read again.
void tpprof_run_files_list(tpprof_run_files *f, const char *shown) {
    char **children = list_children(f->db, &f->since);
    size_t n = 0, cap = 1;
    for (size_t c = 0; children && children[c]; c++)
        cap++;
    other *v = calloc(cap, sizeof *v);
    if (!v) {
        free_list(children);
        return;
    }
    uint64_t lost_total = 0;
    for (size_t c = 0; c < cap; c++) {
        const char *path = c == 0 ? f->db : children[c - 1];
        if (strcmp(path, shown) == 0)
            continue;
        seen_file *s = seen_get(f, path);
        if (!s)
            continue;
        if (!s->read || !same_file(s))
            read_figures(f, s);
        v[n++] = s->o;
        lost_total += s->o.readable ? s->o.lost_bytes : 0;
    }
    free_list(children);
    qsort(v, n, sizeof *v, cmp_other);
    size_t shown_n = n <= OTHERS_SHOWN + 2 ? n : OTHERS_SHOWN;
    for (size_t i = 0; i < shown_n; i++) {
        char a[32], b[32];
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
        const char *suffix = db_suffix(f->db, &len);
        fprintf(stderr, "tpprof: %zu more recordings of this run are not listed (%zu in all, %s lost among them): %.*s.*%s\n",
                n - shown_n, n, tpprof_format_size(lost_total, a), (int)len, f->db, suffix);
    }
    free(v);
}

// Whether the fold takes s: as read, if its file is still the one read,
// else from its meta (the summary's recording, which the list does not read).
static bool fold_flag(seen_file *s) {
    if (s->read && same_file(s))
        return s->fold;
    if (s->folded) // written since it was folded: another recording now
        s->folded = false;
    s->read = false;
    tpprof_db_close(s->db);
    s->db = NULL;
    tpprof_db *h = tpprof_db_open(s->path, false);
    bool yes = foldable(h);
    tpprof_db_close(h);
    return yes;
}

// A run that left more recordings than the list names (a shell script, a
// build, a test suite: hundreds of short processes) leaves one file instead:
// they are merged as `tpprof merge` does, unsymbolized, into db, the run's
// recording's name (whose frames are then symbolized once for all the
// processes: the 40-file build's 169 recordings took 1.78 s to symbolize
// one by one and merge, 0.95 s so), and the files merged are removed.
// What cannot be read, or is not complete (a process killed, or one still
// running after the program: a daemon writing on), stays apart as it is,
// and so does what a merge would lose: a full-mode recording's events, a
// tensor recording's tables. Those folded while the program ran are not
// read again.
size_t tpprof_run_files_fold(tpprof_run_files *f) {
    if (!f || !f->may_fold)
        return 0;
    char **children = list_children(f->db, &f->since);
    size_t nc = 0;
    for (size_t c = 0; children && children[c]; c++)
        nc++;
    bool main_too = is_file(f->db) && tpprof_run_written_since(f->db, &f->since);
    seen_file **in = calloc(nc + 2, sizeof *in);
    size_t k = 0, already = 0;
    bool main_in = false;
    for (size_t c = 0; in && c <= nc; c++) {
        const char *path = c == 0 ? (main_too ? f->db : NULL) : children[c - 1];
        seen_file *s = path ? seen_get(f, path) : NULL;
        if (!s || !fold_flag(s))
            continue;
        in[k++] = s;
        already += s->folded;
        main_in |= c == 0;
    }
    // Into db, unless the run's own recording is there and stays apart (not
    // complete): then beside it, <db without .db>.run.db.
    char target[PATH_MAX + 16];
    size_t stem;
    const char *suffix = db_suffix(f->db, &stem);
    if (main_too && !main_in)
        snprintf(target, sizeof target, "%.*s.run%s", (int)stem, f->db, suffix);
    else
        snprintf(target, sizeof target, "%s", f->db);
    // The merge under way holds recordings no longer there or rewritten
    // (already < its count) only when files went away or pids came again.
    size_t total = k + tpprof_merge_count(f->merge) - already;
    size_t folded = 0;
    if (total > OTHERS_SHOWN + 2 && in) {
        if (!f->merge) {
            unlink(f->tmp);
            f->merge = tpprof_merge_begin(f->tmp);
        }
        int status = f->merge ? 0 : -1;
        for (size_t i = 0; i < k && status == 0; i++)
            if (!in[i]->folded) {
                bool is_main = strcmp(in[i]->path, f->db) == 0;
                status = tpprof_merge_add(f->merge, in[i]->path, is_main ? 1 : f->next_process++, in[i]->db);
                in[i]->folded = status == 0;
            }
        size_t n = tpprof_merge_count(f->merge);
        if (status == 0)
            status = tpprof_merge_end(f->merge, NULL);
        else
            tpprof_merge_abandon(f->merge);
        f->merge = NULL;
        if (status != 0) {
            fprintf(stderr, "tpprof: the run's %zu recordings stay apart: %s\n", total, tpprof_error());
        } else {
            static const char *const sidecar[] = {"", "-wal", "-shm", "-journal"};
            char side[PATH_MAX + 16];
            for (size_t i = 0; i < k; i++)
                for (size_t j = 0; j < 4; j++) {
                    snprintf(side, sizeof side, "%s%s", in[i]->path, sidecar[j]);
                    unlink(side);
                }
            if (rename(f->tmp, target) != 0) {
                fprintf(stderr, "tpprof: cannot name the run's recording %s: %s; it is %s\n", target, strerror(errno),
                        f->tmp);
            } else {
                folded = n;
                fprintf(stderr, "tpprof: the run's %zu recordings are folded into %s, one recording of %zu processes"
                                " (tpprof report %s; --keep-processes keeps one file each)\n", n, target, n, target);
            }
        }
    } else {
        tpprof_merge_abandon(f->merge);
        f->merge = NULL;
    }
    free(in);
    free_list(children);
    return folded;
}

// Symbolizes every recording of the run still apart (all of them with
// --keep-processes; else those not folded: fewer than the fold takes, or
// incomplete, full mode, tensors), in place, while the programs' files
// are still there. The run's own recording (the last image) is already.
void tpprof_run_files_symbolize_apart(tpprof_run_files *f) {
    char **children = list_children(f->db, &f->since);
    if (is_file(f->db) && tpprof_run_written_since(f->db, &f->since))
        tpprof_symbolize_file(f->db);
    for (size_t c = 0; children && children[c]; c++)
        tpprof_symbolize_file(children[c]); // (a failure shows when it is read)
    free_list(children);
}
