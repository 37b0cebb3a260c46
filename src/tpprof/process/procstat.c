// procstat.c: the program's own thread count, read as natively.
//
// tpprof's writer is a thread of the program's process, and the kernel
// counts it in /proc/self/stat (field 20) and /proc/self/status
// ("Threads:"). Programs act on that count: CPython 3.12 and later read
// /proc/self/stat with fopen in os.fork() (multiprocessing's fork too) and,
// finding more than one thread, warn that the fork may deadlock (an
// exception under `python -W error`, a failed test under pytest's
// filterwarnings = error). So a program reading either file through fopen
// gets it with tpprof's threads taken out of the count: the file's contents
// as the kernel gives them, copied into a memory file (memfd) with that one
// number changed. Only a read-only fopen of those two files of this process
// is touched; everything else goes straight to the C library. (A read
// through open(2) or of /proc/self/task/ still sees the writer.)
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/base.h"
#include "writer/control.h"

static FILE *(*real_fopen)(const char *, const char *);

enum own_file { NOT_OWN, OWN_STAT, OWN_STATUS };

// Whether path is this process's stat or status file: /proc/self/stat,
// /proc/<pid>/stat (this pid), the same with status.
static enum own_file own_file(const char *path) {
    static const char proc[] = "/proc/";
    if (!path || strncmp(path, proc, sizeof proc - 1) != 0) return NOT_OWN;
    const char *p = path + sizeof proc - 1;
    if (strncmp(p, "self/", 5) == 0) {
        p += 5;
    } else {
        char *end;
        long pid = strtol(p, &end, 10);
        if (end == p || *end != '/' || pid != (long)getpid()) return NOT_OWN;
        p = end + 1;
    }
    return strcmp(p, "stat") == 0 ? OWN_STAT : strcmp(p, "status") == 0 ? OWN_STATUS : NOT_OWN;
}

// The number at text[at..], lowered by `less` when more than `less`
// threads are counted; the rest of the text moved to follow it. Returns the
// new length of the text (len when nothing changed).
static size_t lower_count(char *text, size_t len, size_t cap, size_t at, long less) {
    char *end;
    long n = strtol(text + at, &end, 10);
    if (end == text + at || n <= less) return len;
    char num[24];
    int w = snprintf(num, sizeof num, "%ld", n - less);
    size_t old = (size_t)(end - (text + at)), tail = len - at - old;
    if (w < 0 || len - old + (size_t)w >= cap) return len;
    memmove(text + at + w, end, tail);
    memcpy(text + at, num, (size_t)w);
    text[len - old + (size_t)w] = 0;
    return len - old + (size_t)w;
}

// Where the thread count starts in the text, or len when it is not found.
static size_t count_at(const char *text, size_t len, enum own_file which) {
    if (which == OWN_STATUS) {
        const char *t = strstr(text, "\nThreads:");
        if (!t) return len;
        t += 9;
        while (*t == ' ' || *t == '\t') t++;
        return (size_t)(t - text);
    }
    // stat: "pid (comm) state ..." where comm may hold spaces and
    // parentheses: fields count from the last ')', field 3 just after it;
    // num_threads is field 20.
    const char *t = strrchr(text, ')');
    if (!t) return len;
    for (int field = 3;; field++) {
        while (*t == ' ' || *t == ')') t++;
        if (field == 20) return (size_t)(t - text);
        if (!(t = strchr(t, ' '))) return len;
    }
}

// The kernel's text of `which`, tpprof's threads taken out of its count,
// written into fd (a memory file) from its start; false when there is
// nothing to change or it cannot be done.
static bool fill(int fd, enum own_file which, long ours) {
    char text[8192];
    int in = (int)syscall(SYS_openat, AT_FDCWD, which == OWN_STAT ? "/proc/self/stat" : "/proc/self/status",
                          O_RDONLY | O_CLOEXEC);
    if (in < 0) return false;
    size_t len = 0;
    bool eof = false;
    while (!eof && len < sizeof text - 64) {
        ssize_t r = read(in, text + len, sizeof text - 64 - len);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) break;
        eof = r == 0;
        len += (size_t)r;
    }
    close(in);
    // (A file that failed to read or fills the buffer: left as it is.)
    if (!eof || len == 0) return false;
    text[len] = 0;
    size_t at = count_at(text, len, which);
    if (at >= len) return false;
    len = lower_count(text, len, sizeof text, at, ours);
    for (size_t done = 0; done < len;) {
        ssize_t w = write(fd, text + done, len - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return false;
        done += (size_t)w;
    }
    return lseek(fd, 0, SEEK_SET) == 0;
}

// The file of `which` as the program would read it without tpprof's
// threads, or NULL to leave the open to the C library. The stream is made
// before the text is read (its allocation, as fopen's own, comes first), so
// the text is what the kernel would give at that point of a native run.
static FILE *adjusted(enum own_file which, bool cloexec) {
    long ours = tpprof_writer_threads();
    if (ours <= 0) return NULL;
    int fd = memfd_create("tpprof-proc", cloexec ? MFD_CLOEXEC : 0);
    if (fd < 0) return NULL;
    FILE *f = fdopen(fd, "r");
    if (!f) {
        close(fd);
        return NULL;
    }
    if (fill(fd, which, ours)) return f;
    fclose(f);
    return NULL;
}

static FILE *open_file(const char *path, const char *mode) {
    if (!real_fopen) *(void **)&real_fopen = dlsym(RTLD_NEXT, "fopen64");
    enum own_file which = own_file(path);
    // Only a read: "r" with any of glibc's b, c, m and e after it.
    if (which != NOT_OWN && mode && mode[0] == 'r' && !strpbrk(mode, "+wax")) {
        int saved = errno;
        FILE *f = adjusted(which, strchr(mode, 'e') != NULL);
        errno = saved;
        if (f) return f;
    }
    return real_fopen ? real_fopen(path, mode) : NULL;
}

// Under _FILE_OFFSET_BITS=64 the headers name fopen fopen64: each symbol is
// defined by its own name here (glibc's two are one function on 64-bit).
TPPROF_EXPORT FILE *tpprof_fopen_(const char *path, const char *mode) __asm__("fopen");
TPPROF_EXPORT FILE *tpprof_fopen64_(const char *path, const char *mode) __asm__("fopen64");

FILE *tpprof_fopen_(const char *path, const char *mode) { return open_file(path, mode); }

FILE *tpprof_fopen64_(const char *path, const char *mode) { return open_file(path, mode); }
