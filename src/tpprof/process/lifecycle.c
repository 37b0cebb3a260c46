// lifecycle.c: start, end, fork, exec and _exit of a recorded process.
//
// The constructor reads the configuration, names the output, loads libunwind,
// takes the module map, opens the database and starts the writer; only then
// do hooks record. An atexit handler registered there (so it runs after the
// program's own handlers) drains the rings and runs the leak scan; the
// library destructor, later still, writes the final state (frees done by
// other libraries' destructors in between are still counted). _exit/_Exit
// scan and write everything before leaving; exec* flush and mark the database ended by exec;
// fork gives the child its own database. Also here: dlclose (the module map
// must record a library before it goes away) and the one-line failure path.
// _exit, quick_exit and exec first flush the CUPTI backend (record/cupti.h;
// at exit its own atexit handler does, before libcupti's teardown).
#define _GNU_SOURCE
#include <dlfcn.h>
#include <spawn.h>
#include <link.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "record/cupti.h"
#include "writer/writer.h"
#include "base/base.h"
#include "base/mem.h"
#include "base/modules.h"
#include "base/fdguard.h"
#include "record/pyframes.h"
#include "record/order.h"
#include "record/rings.h"
#include "record/stacks.h"
#include "record/early.h"
#include "writer/control.h"

static char self_path[1024];
// The process this image records. A vfork child shares tpprof's memory but
// has another pid: it must not end the parent's recording in _exit or exec.
static pid_t recorded_pid;
static bool started;

static bool in_recorded_process(void) { return started && getpid() == recorded_pid; }

// ---------------------------------------------------------------------------
// Configuration and the output name.

static int env_int(const char *name, int dflt, int lo, int hi) {
    const char *v = getenv(name);
    if (!v || !*v) return dflt;
    long x = strtol(v, NULL, 10);
    return x < lo ? lo : x > hi ? hi : (int)x;
}

// Inserts ".<tag>" before a trailing ".db" (or appends it).
static void insert_tag(char *path, size_t cap, const char *tag) {
    size_t len = strlen(path);
    char tail[8] = "";
    if (len >= 3 && strcmp(path + len - 3, ".db") == 0) {
        strcpy(tail, ".db");
        path[len - 3] = 0;
    }
    size_t k = strlen(path);
    snprintf(path + k, cap - k, ".%s%s", tag, tail);
}

static void program_name(char *out, size_t cap) {
    char exe[1024];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = 0;
    const char *base = strrchr(exe, '/');
    snprintf(out, cap, "%s", base ? base + 1 : (exe[0] ? exe : "program"));
}

// TPPROF_OUTPUT with %p expanded, or tpprof.<program>.<pid>.db; a process
// started by a recorded process (spawned, or fork+exec) gets ".<pid>" before
// ".db" unless its name holds its pid already; an image that replaced a
// recorded one by exec (same pid) gets ".exec<N>".
static void output_name(char *out, size_t cap, pid_t pid) {
    char pidtxt[32];
    snprintf(pidtxt, sizeof pidtxt, "%d", (int)pid);
    const char *once = getenv("TPPROF_WARN_ONCE");
    if (once && strlen(once) < sizeof tpprof_warn_once) snprintf(tpprof_warn_once, sizeof tpprof_warn_once, "%s", once);
    const char *tmpl = getenv("TPPROF_OUTPUT");
    if (tmpl && *tmpl) {
        size_t k = 0;
        for (const char *p = tmpl; *p && k + 32 < cap; p++) {
            if (p[0] == '%' && p[1] == 'p') {
                k += (size_t)snprintf(out + k, cap - k, "%s", pidtxt);
                p++;
            } else {
                out[k++] = *p;
            }
        }
        out[k] = 0;
    } else {
        char prog[1024];
        program_name(prog, sizeof prog);
        snprintf(out, cap, "tpprof.%s.%d.db", prog, (int)pid);
    }
    // Absolute, so a fork after a chdir still writes next to its parent's file.
    char cwd[2048];
    if (out[0] != '/' && getcwd(cwd, sizeof cwd)) {
        size_t lc = strlen(cwd), lo = strlen(out);
        if (lc + 1 + lo + 1 <= cap) {
            memmove(out + lc + 1, out, lo + 1);
            memcpy(out, cwd, lc);
            out[lc] = '/';
        }
    }
    const char *prev = getenv("TPPROF_RECORDED_PID");
    const char *prev_out = getenv("TPPROF_PREV_OUTPUT");
    if (prev && atoi(prev) == (int)pid) {
        // Same pid: this image replaced a recorded one. Number it after the
        // database of the image it replaced, minus that one's own .execN.
        if (prev_out && *prev_out) {
            snprintf(out, cap, "%s", prev_out);
            // Only the tag insert_tag put there, last before the ".db": not a
            // ".exec" elsewhere (app.exec_test.db, a folder x.exec_dir).
            size_t len = strlen(out);
            size_t stem = len >= 3 && strcmp(out + len - 3, ".db") == 0 ? len - 3 : len;
            size_t d = stem;
            while (d > 0 && out[d - 1] >= '0' && out[d - 1] <= '9') d--;
            if (d < stem && d >= 5 && strncmp(out + d - 5, ".exec", 5) == 0)
                memmove(out + d - 5, out + stem, len - stem + 1);
        }
        char tag[32], cand[4096];
        for (int gen = 1; gen < 1000; gen++) {
            snprintf(tag, sizeof tag, "exec%d", gen);
            snprintf(cand, sizeof cand, "%s", out);
            insert_tag(cand, sizeof cand, tag);
            if (access(cand, F_OK) != 0) break;
        }
        snprintf(out, cap, "%s", cand);
    } else if (prev && *prev && !strstr(out, pidtxt)) {
        insert_tag(out, cap, pidtxt);
    }
}

// ---------------------------------------------------------------------------
// Start and end.

static void on_quick_exit(void);

// Where the leak scan starts reading this thread's stack: the stack pointer
// of the function that calls this (inlined into it), after its prologue has
// spilled the callee-saved registers (__builtin_unwind_init), so the
// program's registers are read and nothing below them is. Not the frame
// address less a margin: below the stack pointer lie the dead frames of the
// recorder's own calls (the hooks, the drain that ran just before the scan),
// and their copies of the program's pointers made lost blocks reachable
// (dlerr's lost block, a forked child's).
static inline __attribute__((always_inline)) uintptr_t scan_start(void) {
    uintptr_t sp;
#if defined(__x86_64__)
    __asm__ volatile("mov %%rsp, %0" : "=r"(sp));
#elif defined(__aarch64__)
    __asm__ volatile("mov %0, sp" : "=r"(sp));
#else
    sp = (uintptr_t)__builtin_frame_address(0) - 256; // a margin: may read some dead frames
#endif
    return sp;
}


// Device memory the CUPTI backend still holds in its activity buffers goes
// into the rings now, before the final write (a no-op without the backend):
// for the ends that run no atexit handler (at exit, the backend's own
// handler, registered after libcupti's, flushes while libcupti is still
// whole; from here it would run after libcupti's teardown). On the calling
// thread with tpprof_guard clear: its records are the program's. Not from a
// fatal signal's handler (CUPTI is not async-signal-safe): those recordings
// lack what was not yet flushed.
static void flush_device_activity(void) {
    if (tpprof_guard) return;
    tpprof_cupti_flush();
}

static void on_exit_scan(void) {
    // The program's stack is read from where it called exit, as memcheck
    // and LeakSanitizer read it: not exit's own frames, nor the handlers' it
    // runs (this one is registered before the loader's, so it runs inside
    // _dl_fini, whose frame holds an array the size of the loaded modules,
    // uninitialized: a lost block's address left there by an earlier call
    // made it reachable: dlerr, a forked child's leak). exit does not
    // return, so its caller keeps nothing in registers for after it. Where
    // that frame is not found: from here, this frame's spilled registers
    // included.
    __builtin_unwind_init();
    uintptr_t sp = scan_start(), caller = tpprof_unwind_exit_caller_sp();
    if (caller > sp) sp = caller;
    int saved = tpprof_guard;
    tpprof_guard = 1;
    if (atomic_load(&tpprof_active)) tpprof_writer_leak_scan(sp);
    tpprof_guard = saved;
}

// Forked from a thread other than main: the child's main thread (the
// forking one) may end by returning from its thread function, which glibc
// turns into exit(0) when no thread is left but the writer cannot see (the
// Python threading module's threads end so; test_threading's fork from a
// thread hung for ever): the writer watches for it (writer.c).
static bool fork_off_main;

static void fork_prepare(void) {
    tpprof_guard++;
    fork_off_main = (pid_t)syscall(SYS_gettid) != getpid();
    if (started) tpprof_writer_fork_prepare();
}

static void fork_parent(void) {
    if (started) tpprof_writer_fork_parent();
    tpprof_guard--;
}

static void fork_child(void) {
    if (started) {
        tpprof_w.parent_pid = getppid();
        char path[4096];
        snprintf(path, sizeof path, "%s", tpprof_output_path);
        char pidtxt[32];
        snprintf(pidtxt, sizeof pidtxt, "%d", (int)getpid());
        insert_tag(path, sizeof path, pidtxt);
        snprintf(tpprof_output_path, sizeof tpprof_output_path, "%s", path);
        char env[32];
        snprintf(env, sizeof env, "%d", (int)getpid());
        setenv("TPPROF_RECORDED_PID", env, 1);
        recorded_pid = getpid();
        tpprof_obs_order_fork_child();
        tpprof_writer_fork_child(path);
        if (fork_off_main) atomic_store(&tpprof_main_exited, 1);
    }
    tpprof_guard--;
}

// The C library's exec, spawn and signal functions, looked up in the
// constructor: a vfork child (on its parent's stack, heap and TLS) that
// asked dlsym then allocated in its parent's heap, and through the hooks into
// its parent's recording.
enum real_id { R_EXECVE, R_EXECVPE, R_FEXECVE, R_EXECVEAT, R_SPAWN, R_SPAWNP, R_SIGACTION, R_SIGNAL, R_BSD_SIGNAL,
               R_SYSV_SIGNAL_, R_SYSV_SIGNAL, R_SIGSET, NREAL };
static const char *const real_names[NREAL] = {"execve",      "execvpe",      "fexecve",    "execveat",
                                              "posix_spawn", "posix_spawnp", "sigaction",  "signal",
                                              "bsd_signal",  "__sysv_signal", "sysv_signal", "sigset"};
static void *real_fns[NREAL];

static void *real_fn(enum real_id id) {
    if (!real_fns[id]) real_fns[id] = dlsym(RTLD_NEXT, real_names[id]);
    return real_fns[id];
}

static void resolve_real(void) {
    for (int i = 0; i < NREAL; i++) real_fn((enum real_id)i);
}

// ---------------------------------------------------------------------------
// Dying of a signal. A program that crashes (SIGSEGV, SIGBUS, SIGFPE,
// SIGILL), aborts (abort(): an assert, an uncaught C++ exception, a
// std::bad_alloc at the OOM point) or is ended by a signal it leaves at its
// default (^C, kill, a closed pipe, a hangup, an alarm() timeout, a CPU-time
// limit, a seccomp kill) would leave a recording cut at
// its last periodic flush, without the live set. So for those signals a
// handler of the recorder's stands in for the default: it writes everything
// first, the live set as it is at that moment (scanned, except after a
// fault, where the less a crashing process does the better),
// meta.end_reason 'signal' and meta.end_signal, then makes the default
// action happen: a fault returns into the faulting instruction, which faults
// again; any other signal is raised again. The recorder writes with its own
// SQLite and libc (sqlite_api.h), so a heap corrupted by the program does not
// stand in its way.
//
// The program must not see the difference: sigaction and signal are
// interposed, so it finds SIG_DFL where the stand-in is (CPython installs its
// KeyboardInterrupt handler only where it finds the default), a handler it
// installs replaces the stand-in, and setting SIG_DFL again puts the stand-in
// back. Raw rt_sigaction system calls see the stand-in.
static const int covered_signals[] = {SIGSEGV, SIGBUS,  SIGFPE,  SIGILL,  SIGABRT, SIGHUP,    SIGINT,
                                      SIGQUIT, SIGTERM, SIGPIPE, SIGALRM, SIGUSR1, SIGUSR2,   SIGXCPU,
                                      SIGXFSZ, SIGVTALRM, SIGPROF, SIGSYS};

static int real_sigaction(int sig, const struct sigaction *act, struct sigaction *old) {
    int (*real)(int, const struct sigaction *, struct sigaction *);
    *(void **)&real = real_fn(R_SIGACTION);
    if (!real) {
        errno = ENOSYS;
        return -1;
    }
    return real(sig, act, old);
}

static bool covered(int sig) {
    for (size_t i = 0; i < sizeof covered_signals / sizeof covered_signals[0]; i++)
        if (covered_signals[i] == sig) return true;
    return false;
}

static bool is_fault_signal(int sig) { return sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE || sig == SIGILL; }

// The thread writing the recording for a signal (0: none). The stand-in
// stays installed while it writes (no SA_RESETHAND): a second signal, as
// `timeout` sends (to the process group, and `tpprof run` forwards it) or
// any storm of them, must not take the default action half-way through the
// write. Another thread it reaches waits here for the writer to end the
// process; the writing thread itself (SA_NODEFER) goes back to its write.
static _Atomic pid_t ending_tid;

static void on_fatal(int sig, siginfo_t *si, void *uc) {
    (void)uc;
    int saved_errno = errno;
    bool fault = is_fault_signal(sig) && si && si->si_code > 0;
    pid_t me = (pid_t)syscall(SYS_gettid), writer = 0;
    if (in_recorded_process() && !atomic_compare_exchange_strong(&ending_tid, &writer, me)) {
        if (writer != me)
            for (;;) pause(); // the writing thread ends the process
        if (!fault) {         // a second signal while this thread writes
            errno = saved_errno;
            return;
        }
        // A fault inside the write: to the default action (below).
    } else if (in_recorded_process()) {
        int saved = tpprof_guard;
        tpprof_guard = 1;
        __builtin_unwind_init(); // the program's registers are roots too
        uintptr_t sp = fault ? 0 : scan_start();
        tpprof_writer_end_signal(sig, sp);
        started = false;
        tpprof_guard = saved;
    }
    // The default action next, whoever called this: the kernel, or a
    // handler of the program's that chained to this one and would otherwise
    // return into the fault, and here, for ever.
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    real_sigaction(sig, &dfl, NULL);
    errno = saved_errno;
    if (!fault) raise(sig); // sent, or not a fault: to the default action now
    // A fault returns to the faulting instruction, which faults again.
}

static int install_stand_in(int sig, struct sigaction *old) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fatal;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER; // not SA_RESETHAND: see ending_tid
    sigemptyset(&sa.sa_mask);
    return real_sigaction(sig, &sa, old);
}

// Whether a disposition is the stand-in (read from the kernel each time: a
// vfork child has dispositions of its own but shares this memory).
static bool is_stand_in(const struct sigaction *a) {
    return (a->sa_flags & SA_SIGINFO) && a->sa_sigaction == on_fatal;
}

static void catch_fatal_signals(void) {
    for (size_t i = 0; i < sizeof covered_signals / sizeof covered_signals[0]; i++) {
        int sig = covered_signals[i];
        struct sigaction old;
        if (real_sigaction(sig, NULL, &old) != 0 || (old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL)
            continue; // the program's, or ignored
        install_stand_in(sig, NULL);
    }
}

TPPROF_EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *oldact) {
    if (sig <= 0 || sig >= _NSIG || !covered(sig)) return real_sigaction(sig, act, oldact);
    struct sigaction prev;
    int rc;
    if (act && !(act->sa_flags & SA_SIGINFO) && act->sa_handler == SIG_DFL && in_recorded_process())
        rc = install_stand_in(sig, &prev); // the default, as far as the program can tell
    else
        rc = real_sigaction(sig, act, &prev);
    if (rc == 0 && oldact) {
        if (is_stand_in(&prev)) { // what the program set, or found: the default
            memset(oldact, 0, sizeof *oldact);
            oldact->sa_handler = SIG_DFL;
        } else {
            *oldact = prev;
        }
    }
    return rc;
}

// glibc's signal() and its SysV and BSD forms call its own sigaction, past
// the one above (a program built as strict ISO C calls __sysv_signal for
// signal): they are interposed too, with glibc's semantics for the covered
// signals (BSD: SA_RESTART, the signal blocked in its handler; SysV: the
// handler reset on entry, the signal not blocked) and glibc's own for the
// others.
typedef void (*sighandler_fn)(int);

// The C library's own function fn (signal, sigset...) for a signal the
// recorder does not stand in for.
static sighandler_fn real_handler_fn(enum real_id fn, int sig, sighandler_fn handler) {
    sighandler_fn (*real)(int, sighandler_fn);
    *(void **)&real = real_fn(fn);
    if (!real) {
        errno = ENOSYS;
        return SIG_ERR;
    }
    return real(sig, handler);
}

static sighandler_fn set_handler(enum real_id fn, int sig, sighandler_fn handler, bool sysv) {
    if (sig <= 0 || sig >= _NSIG || !covered(sig)) return real_handler_fn(fn, sig, handler);
    if (handler == SIG_ERR) {
        errno = EINVAL;
        return SIG_ERR;
    }
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sigemptyset(&sa.sa_mask);
    if (sysv) {
        sa.sa_flags = SA_RESETHAND | SA_NODEFER;
    } else {
        sigaddset(&sa.sa_mask, sig);
        sa.sa_flags = SA_RESTART;
    }
    if (sigaction(sig, &sa, &old) != 0) return SIG_ERR;
    return old.sa_handler;
}

TPPROF_EXPORT sighandler_fn signal(int sig, sighandler_fn handler) { return set_handler(R_SIGNAL, sig, handler, false); }

TPPROF_EXPORT sighandler_fn bsd_signal(int sig, sighandler_fn handler) {
    return set_handler(R_BSD_SIGNAL, sig, handler, false);
}

TPPROF_EXPORT sighandler_fn __sysv_signal(int sig, sighandler_fn handler) {
    return set_handler(R_SYSV_SIGNAL_, sig, handler, true);
}

TPPROF_EXPORT sighandler_fn sysv_signal(int sig, sighandler_fn handler) {
    return set_handler(R_SYSV_SIGNAL, sig, handler, true);
}

// SysV's sigset, with glibc's semantics, through the sigaction above for the
// covered signals: SIG_HOLD blocks the signal; anything else becomes its
// disposition (no flags) and unblocks it; the result is SIG_HOLD if it was
// blocked, else the disposition before (SIG_DFL where the stand-in was).
TPPROF_EXPORT sighandler_fn sigset(int sig, sighandler_fn disp) {
    if (sig <= 0 || sig >= _NSIG || !covered(sig)) return real_handler_fn(R_SIGSET, sig, disp);
    if (disp == SIG_ERR) {
        errno = EINVAL;
        return SIG_ERR;
    }
    sigset_t one, before;
    sigemptyset(&one);
    sigaddset(&one, sig);
    struct sigaction sa, old;
    if (disp == SIG_HOLD) {
        if (sigaction(sig, NULL, &old) != 0 || sigprocmask(SIG_BLOCK, &one, &before) != 0) return SIG_ERR;
    } else {
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = disp;
        sigemptyset(&sa.sa_mask);
        if (sigaction(sig, &sa, &old) != 0 || sigprocmask(SIG_UNBLOCK, &one, &before) != 0) return SIG_ERR;
    }
    return sigismember(&before, sig) ? SIG_HOLD : old.sa_handler;
}

__attribute__((constructor(101))) static void tpprof_start(void) {
    tpprof_guard = 1;
    tpprof_clock_start();
    tpprof_cfg.full = tpprof_mode_full();
    const char *uw = getenv("TPPROF_UNWIND");
    tpprof_cfg.unwind_fp = uw && strcmp(uw, "fp") == 0;
    tpprof_cfg.unwind_unw = uw && strcmp(uw, "libunwind") == 0;
    tpprof_cfg.unwind_nocfi = tpprof_cfg.unwind_unw || (uw && strcmp(uw, "fp+libunwind") == 0);
    tpprof_cfg.depth = env_int("TPPROF_DEPTH", 32, 1, TPPROF_MAX_DEPTH);
    tpprof_cfg.interval_ms = env_int("TPPROF_INTERVAL_MS", 10, 1, 60000);
    tpprof_cfg.scan_stop = env_int("TPPROF_SCAN_STOP", 1, 0, 1) != 0;
    const char *lt = getenv("TPPROF_LIFETIMES");
    tpprof_cfg.lifetimes_all = lt && strcmp(lt, "all") == 0;
    // A test's: the order tickets and epochs start a few thousand events
    // before they wrap (they do every ~15 s of a busy thread), so a short
    // run crosses the wrap (tests/tpprof handoff_wrap).
    const char *order = getenv("TPPROF_ORDER_START");
    if (order && strcmp(order, "wrap") == 0) {
        for (int i = 0; i < TPPROF_STRIPES; i++) atomic_store(&tpprof_stripes[i].v, ((uint64_t)1 << TPPROF_TICKET_BITS) - 3000);
        atomic_store(&tpprof_epoch.v, ((uint64_t)1 << TPPROF_EPOCH_BITS) - 50);
    }
    tpprof_fd_stderr(); // stderr as it is now, before the program can move it

    Dl_info info;
    if (dladdr((void *)&tpprof_start, &info) && info.dli_fname)
        snprintf(self_path, sizeof self_path, "%s", info.dli_fname);
    // A program that brings its own malloc (jemalloc or mimalloc linked into
    // the executable) is found before this library: its allocations never
    // reach the hooks. Said in meta.malloc_replaced_by, for the reports.
    // A program built without -fpie that takes malloc's address (node, in
    // Debian) has a canonical PLT entry for it, which is what this lookup
    // finds: its symbol there is undefined, and its calls do come here.
    void *first = dlsym(RTLD_DEFAULT, "malloc");
    Dl_info owner;
    const ElfW(Sym) *first_sym = NULL;
    if (first && dladdr1(first, &owner, (void **)&first_sym, RTLD_DL_SYMENT) && owner.dli_fname &&
        owner.dli_fbase != info.dli_fbase && !(first_sym && first_sym->st_shndx == SHN_UNDEF))
        if (!owner.dli_fname[0] || !realpath(owner.dli_fname, tpprof_malloc_owner)) // the executable: ""
            snprintf(tpprof_malloc_owner, sizeof tpprof_malloc_owner, "%s",
                     owner.dli_fname[0] ? owner.dli_fname : "the program");
    // An allocator preloaded after this library (LD_PRELOAD=libjemalloc.so
    // under `tpprof run`, which puts itself first): the hooks call glibc's
    // allocator, not the next one, so the program runs on glibc's malloc
    // here. Its requests (sizes, stacks, leaks) are the same; its heap's
    // shape is not. Said in meta.malloc_skipped.
    void *next = dlsym(RTLD_NEXT, "malloc");
    if (next && dladdr(next, &owner) && owner.dli_fname && owner.dli_fname[0]) {
        const char *slash = strrchr(owner.dli_fname, '/');
        if (strncmp(slash ? slash + 1 : owner.dli_fname, "libc.so", 7) != 0 &&
            !realpath(owner.dli_fname, tpprof_malloc_skipped))
            snprintf(tpprof_malloc_skipped, sizeof tpprof_malloc_skipped, "%s", owner.dli_fname);
    }
    output_name(tpprof_output_path, sizeof tpprof_output_path, getpid());
    char pidtxt[32];
    snprintf(pidtxt, sizeof pidtxt, "%d", (int)getpid());
    if (tpprof_writer_claim(tpprof_output_path) == 0) {
        // Another live process records to this name: started beside this
        // one with the same TPPROF_OUTPUT (the commands of a pipeline, under
        // an exported LD_PRELOAD), not by a recorded process, which would
        // have given this one its pid. Replacing that file would destroy a
        // recording being written; this one takes its pid too, and says so.
        char taken[sizeof tpprof_output_path];
        snprintf(taken, sizeof taken, "%s", tpprof_output_path);
        insert_tag(tpprof_output_path, sizeof tpprof_output_path, pidtxt);
        tpprof_writer_claim(tpprof_output_path);
        char line[2 * sizeof taken + 96];
        int n = snprintf(line, sizeof line, "tpprof: %s is being recorded by another process; this one records to %s\n",
                         taken, tpprof_output_path);
        int fd = tpprof_fd_stderr();
        if (n > 0 && fd >= 0 && write(fd, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1) < 0) {
            // nothing more to do
        }
    }
    setenv("TPPROF_RECORDED_PID", pidtxt, 1);

    tpprof_self_range_init();
    if (!tpprof_stacks_init()) {
        tpprof_disable(tpprof_output_path, "out of memory");
        tpprof_early_end(NULL);
        tpprof_guard = 0;
        return;
    }
    tpprof_unwind_init();
    tpprof_py_init();
    tpprof_modules_refresh();
    // Before the writer thread exists: registering for membarrier while the
    // process has one thread is a barrier on this CPU; with two it waits for
    // an RCU grace period (synchronize_rcu), which took 9-16 ms of every
    // process's start on a loaded machine (/bin/true: 25 ms under the
    // preload, 2.3 natively).
    tpprof_obs_order_init();
    if (!tpprof_writer_start(tpprof_output_path)) {
        tpprof_early_end(NULL);
        tpprof_guard = 0;
        return;
    }
    recorded_pid = getpid();
    started = true;
    atexit(on_exit_scan);
    at_quick_exit(on_quick_exit);
    pthread_atfork(fork_prepare, fork_parent, fork_child);
    resolve_real();
    tpprof_scan_prepare();
    tpprof_cpu_init();
    tpprof_writer_go(); // recording on; the blocks of before are adopted
    catch_fatal_signals();
    tpprof_guard = 0;
}

__attribute__((destructor(101))) static void tpprof_stop(void) {
    if (!started) return;
    int saved = tpprof_guard;
    tpprof_guard = 1;
    tpprof_writer_finish(TPPROF_END_EXIT);
    started = false;
    tpprof_guard = saved;
}

// ---------------------------------------------------------------------------
// _exit, _Exit: a normal way for many programs to end (shells, forked
// children, daemons): scan for leaks and write everything, as at exit, but
// without atexit handlers or destructors to wait for, then leave.

// Scans and writes everything, for a process about to leave without exit's
// handlers (noinline: its frame is where the scan of the stack starts).
static __attribute__((noinline)) void end_now(void) {
    if (!in_recorded_process()) return;
    flush_device_activity();
    __builtin_unwind_init(); // the program's registers are roots too
    uintptr_t sp = scan_start();
    tpprof_guard = 1;
    if (atomic_load(&tpprof_active)) tpprof_writer_leak_scan(sp);
    tpprof_writer_finish(TPPROF_END_EXIT);
    started = false;
}

TPPROF_EXPORT void _exit(int status) {
    end_now();
    syscall(SYS_exit_group, status);
    __builtin_unreachable();
}

// quick_exit runs the at_quick_exit handlers and then glibc's own _exit,
// which a call inside the C library does not reach through this one's
// symbol: the recording ended with its last periodic flush, often empty.
// Registered at the start, before the program's: it runs last.
static void on_quick_exit(void) {
    int saved = tpprof_guard;
    end_now();
    tpprof_guard = saved;
}

TPPROF_EXPORT void _Exit(int status) { _exit(status); }

// ---------------------------------------------------------------------------
// pthread_exit on the main thread: the process ends with its last thread
// (glibc calls exit(0) when its thread count falls to zero), but the writer
// is a thread too and would keep it alive for ever. So the writer is told,
// and once it is the only thread left it calls exit(0) itself (writer.c).

TPPROF_EXPORT void pthread_exit(void *retval) {
    static void (*real)(void *) __attribute__((noreturn));
    if (!real) *(void **)&real = dlsym(RTLD_NEXT, "pthread_exit");
    if (started && (pid_t)syscall(SYS_gettid) == getpid()) atomic_store(&tpprof_main_exited, 1);
    if (real) real(retval);
    syscall(SYS_exit, 0); // no pthread_exit to be found: end this thread
    __builtin_unreachable();
}

// ---------------------------------------------------------------------------
// dlclose: the module map must hold the library before it goes.

TPPROF_EXPORT int dlclose(void *handle) {
    static int (*real)(void *);
    if (!real) real = (int (*)(void *))dlsym(RTLD_NEXT, "dlclose");
    int saved = tpprof_guard;
    tpprof_guard = 1;
    if (started) {
        struct link_map *lm = NULL;
        bool known = dlinfo(handle, RTLD_DI_LINKMAP, &lm) == 0 && lm; // (a bad handle fails dlclose too)
        tpprof_modules_refresh_closing(known ? lm->l_addr : 0);
    }
    int rc = real ? real(handle) : -1;
    if (started) {
        tpprof_modules_refresh();
        tpprof_unwind_flush();
    }
    tpprof_guard = saved;
    return rc;
}

// ---------------------------------------------------------------------------
// exec*: end this image's database; the new image records into its own.
// LD_PRELOAD and the TPPROF_* settings are put back into an environment that
// lost them, so the new program is recorded too.

extern char **environ;

static bool has_var(char *const envp[], const char *name) {
    size_t n = strlen(name);
    for (char *const *e = envp; e && *e; e++)
        if (strncmp(*e, name, n) == 0 && (*e)[n] == '=') return true;
    return false;
}

static const char *const keep_vars[] = {"LD_PRELOAD", "TPPROF_OUTPUT", "TPPROF_MODE", "TPPROF_DEPTH",
                                        "TPPROF_UNWIND", "TPPROF_INTERVAL_MS", "TPPROF_RECORDED_PID",
                                        "TPPROF_SCAN_STOP", "TPPROF_TENSORS", "TPPROF_LIFETIMES",
                                        "TPPROF_PYTHON"};
#define NKEEP (sizeof keep_vars / sizeof keep_vars[0])
#define PREV_OUTPUT "TPPROF_PREV_OUTPUT="

// The value an exec'd environment that lacks `name` gets, or NULL.
static const char *keep_value(char *const envp[], size_t i) {
    if (has_var(envp, keep_vars[i])) return NULL;
    const char *v = strcmp(keep_vars[i], "LD_PRELOAD") == 0 ? self_path : getenv(keep_vars[i]);
    return v && *v ? v : NULL;
}

// The bytes fix_env needs for envp: its pointers and the added strings.
static size_t env_bytes(char *const envp[]) {
    size_t n = 0, strings = sizeof PREV_OUTPUT + strlen(tpprof_output_path);
    for (char *const *e = envp; e && *e; e++) n++;
    for (size_t i = 0; i < NKEEP; i++) {
        const char *v = keep_value(envp, i);
        if (v) strings += strlen(keep_vars[i]) + 1 + strlen(v) + 1;
    }
    return (n + NKEEP + 2) * sizeof(char *) + strings;
}

// Writes into mem (env_bytes(envp) bytes) a copy of envp with the missing
// settings added and TPPROF_PREV_OUTPUT naming this image's database.
static char **fix_env(char *const envp[], char *mem) {
    size_t n = 0;
    for (char *const *e = envp; e && *e; e++) n++;
    char **out = (char **)mem;
    char *strings = mem + (n + NKEEP + 2) * sizeof(char *);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(envp[i], PREV_OUTPUT, sizeof PREV_OUTPUT - 1) != 0) out[k++] = envp[i];
    for (size_t i = 0; i < NKEEP; i++) {
        const char *v = keep_value(envp, i);
        if (!v) continue;
        out[k++] = strings;
        strings += sprintf(strings, "%s=%s", keep_vars[i], v) + 1;
    }
    out[k++] = strings;
    sprintf(strings, "%s%s", PREV_OUTPUT, tpprof_output_path);
    out[k] = NULL;
    return out;
}

// Memory for an exec's new environment or argument list: on this frame's
// caller's stack when it is small and the stack has room (a vfork child
// runs on its parent's stack and memory: a mapping it made stayed in the
// parent, 50 KiB a vfork+exec), else a mapping of tpprof's own.
#define EXEC_STACK_MAX ((size_t)16 << 10)

static bool exec_on_stack(size_t bytes) {
    return bytes <= EXEC_STACK_MAX && tpprof_stack_room() > bytes + ((size_t)16 << 10);
}

static void before_exec(void) {
    if (!in_recorded_process()) return;
    flush_device_activity();
    int saved = tpprof_guard;
    tpprof_guard = 1;
    tpprof_writer_finish(TPPROF_END_EXEC);
    tpprof_guard = saved;
}

static void after_failed_exec(void) {
    if (!in_recorded_process()) return;
    int saved = tpprof_guard;
    tpprof_guard = 1;
    tpprof_writer_exec_failed();
    tpprof_guard = saved;
}

// One exec or spawn call of any form. An exec finishes the database first
// (the new image records into its own) and reopens it if the exec failed;
// both carry the settings on in the environment.
struct exec_call {
    enum real_id fn;
    int fd, flags; // fexecve's descriptor; execveat's directory and flags
    const char *path;
    char *const *argv;
    pid_t *pid; // posix_spawn's
    const posix_spawn_file_actions_t *fa;
    const posix_spawnattr_t *attr;
};

static int exec_with(const struct exec_call *c, char *const envp[]) {
    void *real = real_fn(c->fn);
    bool spawn = c->fn == R_SPAWN || c->fn == R_SPAWNP;
    if (!real) {
        if (spawn) return ENOSYS;
        errno = ENOSYS;
        return -1;
    }
    size_t bytes = env_bytes(envp);
    bool on_stack = exec_on_stack(bytes);
    char *local[on_stack ? (bytes + sizeof(char *) - 1) / sizeof(char *) : 1]; // (pointer-aligned)
    char *mem = on_stack ? (char *)local : tpprof_mem_map(bytes);
    char **env = mem ? fix_env(envp, mem) : (char **)envp;
    if (!spawn) before_exec();
    int rc;
    if (spawn)
        rc = ((int (*)(pid_t *, const char *, const posix_spawn_file_actions_t *, const posix_spawnattr_t *,
                       char *const[], char *const[]))real)(c->pid, c->path, c->fa, c->attr, c->argv, env);
    else if (c->fn == R_FEXECVE)
        rc = ((int (*)(int, char *const[], char *const[]))real)(c->fd, c->argv, env);
    else if (c->fn == R_EXECVEAT)
        rc = ((int (*)(int, const char *, char *const[], char *const[], int))real)(c->fd, c->path, c->argv, env,
                                                                                  c->flags);
    else
        rc = ((int (*)(const char *, char *const[], char *const[]))real)(c->path, c->argv, env);
    int err = errno;
    if (!spawn) after_failed_exec();
    if (mem && !on_stack) tpprof_mem_unmap(mem, bytes);
    errno = err;
    return rc;
}

static int do_exec(const char *name, char *const argv[], char *const envp[], enum real_id fn) {
    return exec_with(&(struct exec_call){.fn = fn, .path = name, .argv = argv}, envp);
}

TPPROF_EXPORT int execve(const char *path, char *const argv[], char *const envp[]) {
    return do_exec(path, argv, envp, R_EXECVE);
}

// fexecve and execveat run the new image without the C library calling
// execve by name: the first image's recording was left unfinished.
TPPROF_EXPORT int fexecve(int fd, char *const argv[], char *const envp[]) {
    return exec_with(&(struct exec_call){.fn = R_FEXECVE, .fd = fd, .argv = argv}, envp);
}

TPPROF_EXPORT int execveat(int dirfd, const char *path, char *const argv[], char *const envp[], int flags) {
    return exec_with(&(struct exec_call){.fn = R_EXECVEAT, .fd = dirfd, .path = path, .argv = argv, .flags = flags},
                     envp);
}

// posix_spawn with an environment of its own making (a clean one, as
// subprocess modules build) would start a child nothing records: it gets
// LD_PRELOAD and the TPPROF_* settings back, as an exec does. (system() and
// popen() spawn inside the C library, with the program's environment.)
TPPROF_EXPORT int posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa,
                              const posix_spawnattr_t *attr, char *const argv[], char *const envp[]) {
    return exec_with(&(struct exec_call){.fn = R_SPAWN, .pid = pid, .path = path, .fa = fa, .attr = attr, .argv = argv},
                     envp);
}

TPPROF_EXPORT int posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *fa,
                               const posix_spawnattr_t *attr, char *const argv[], char *const envp[]) {
    return exec_with(&(struct exec_call){.fn = R_SPAWNP, .pid = pid, .path = file, .fa = fa, .attr = attr, .argv = argv},
                     envp);
}

TPPROF_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[]) {
    return do_exec(file, argv, envp, R_EXECVPE);
}

TPPROF_EXPORT int execv(const char *path, char *const argv[]) { return do_exec(path, argv, environ, R_EXECVE); }

TPPROF_EXPORT int execvp(const char *file, char *const argv[]) { return do_exec(file, argv, environ, R_EXECVPE); }

// execl, execlp, execle: the variadic arguments, collected into an argv
// array (and execle's environment taken), not in the heap (it may be in any
// state in a child about to exec): on the stack for up to LIST_LOCAL
// arguments, else in a mapping of tpprof's own (see exec_on_stack).
#define LIST_LOCAL 64

static int exec_list(const char *name, const char *arg, va_list ap, bool with_env, enum real_id which) {
    va_list c;
    va_copy(c, ap);
    size_t n = 1;
    while (va_arg(c, const char *)) n++;
    va_end(c);
    size_t bytes = (n + 1) * sizeof(char *);
    char *local[LIST_LOCAL];
    bool on_stack = n + 1 <= LIST_LOCAL;
    char **argv = on_stack ? local : tpprof_mem_map(bytes);
    if (!argv) {
        errno = ENOMEM;
        return -1;
    }
    argv[0] = (char *)arg;
    for (size_t i = 1; i <= n; i++) argv[i] = va_arg(ap, char *); // the last is the NULL
    char **envp = with_env ? va_arg(ap, char **) : environ;
    int rc = do_exec(name, argv, envp, which);
    if (!on_stack) tpprof_mem_unmap(argv, bytes);
    return rc;
}

TPPROF_EXPORT int execl(const char *path, const char *arg, ...) {
    va_list ap;
    va_start(ap, arg);
    int rc = exec_list(path, arg, ap, false, R_EXECVE);
    va_end(ap);
    return rc;
}

TPPROF_EXPORT int execlp(const char *file, const char *arg, ...) {
    va_list ap;
    va_start(ap, arg);
    int rc = exec_list(file, arg, ap, false, R_EXECVPE);
    va_end(ap);
    return rc;
}

TPPROF_EXPORT int execle(const char *path, const char *arg, ...) {
    va_list ap;
    va_start(ap, arg);
    int rc = exec_list(path, arg, ap, true, R_EXECVE);
    va_end(ap);
    return rc;
}
