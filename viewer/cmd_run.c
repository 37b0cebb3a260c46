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
#include <poll.h>
#include <sys/stat.h>
#include <sys/syscall.h>
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
    bool keep_processes; // --keep-processes: no fold (tpprof_run_files_fold)
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

// Waits for the program, reading and folding the recordings of its ended
// processes in the meantime (run_files.c); it is woken by the program's
// end (a pidfd) or after 50 ms.
static void wait_program(pid_t pid, int *status, tpprof_run_files *files) {
    int pidfd = files ? (int)syscall(SYS_pidfd_open, pid, 0) : -1;
    for (;;) {
        pid_t r = waitpid(pid, status, pidfd >= 0 ? WNOHANG : 0);
        if (r == pid || (r < 0 && errno != EINTR))
            break;
        if (r == 0 && !tpprof_run_files_poll(files)) {
            struct pollfd p = {.fd = pidfd, .events = POLLIN};
            poll(&p, 1, 50);
        }
    }
    if (pidfd >= 0)
        close(pidfd);
}

// Start the program and wait for it. *status: its wait status; *exec_err:
// errno when it could not be started (0 when it ran); *files: its
// recordings, read as its processes end (NULL when out of memory). The
// pid, or -1 + error.
static pid_t launch(const run_options *o, const char *template, const char *preload, const struct timespec *started,
                    int *status, int *exec_err, tpprof_run_files **files) {
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
    char db[PATH_MAX];
    expand(template, pid, db, sizeof db);
    *files = *exec_err ? NULL : tpprof_run_files_new(db, started, !o->keep_processes);
    wait_program(pid, status, *files);
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
                      const struct timespec *started, tpprof_run_files *files) {
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
    if (is_file(db) && !tpprof_run_written_since(db, started)) {
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
    tpprof_run_last_image(db, started, last, sizeof last, &execs);
    tpprof_profile *summarized = summarize(last, execs, &end, o->gated);
    fprintf(stderr, "tpprof: recording: %s  (tpprof report %s)\n", last, last);
    if (files)
        tpprof_run_files_list(files, last);
    bool gate_failed = o->gated && gate_run(o, last, summarized);
    if (!o->keep_processes)
        tpprof_run_files_fold(files);
    if (files)
        tpprof_run_files_symbolize_apart(files);
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
    tpprof_run_files *files = NULL;
    pid_t pid = launch(o, template, preload, &started, &status, &exec_err, &files);
    if (pid < 0) {
        fprintf(stderr, "tpprof run: %s\n", tpprof_error());
        return TPPROF_EXIT_USAGE;
    }
    if (exec_err) {
        fprintf(stderr, "tpprof run: cannot run '%s': %s\n", o->cmd[0], strerror(exec_err));
        return exec_err == ENOENT ? 127 : 126;
    }
    int code = report_run(o, template, pid, status, &started, files);
    tpprof_run_files_free(files);
    return code;
}
