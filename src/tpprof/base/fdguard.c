// fdguard.c: keeping the recording's file descriptors out of the program's
// way, and the program's hands off them.
//
// The database (and its -wal and -shm files) are open in the program's own
// descriptor table. A daemon or a forked child that closes every descriptor
// from 3 up, then opens files of its own, would otherwise hand SQLite's
// numbers to those files: the recording would be lost, and the writer's next
// flush would write database pages into the program's file. And a shell's
// `exec 3>log` (dup2 onto 3) would do the same in the other direction. So:
// - SQLite's unix VFS opens through vfs_open (its xSetSystemCall hook): the
//   descriptors tpprof opens are moved up near 1024 (below the soft limit),
//   where programs do not ask for numbers, and remembered;
// - close, close_range and closefrom from the program leave those alone: a
//   close of one fails with EBADF, as it would without tpprof, where that
//   number is not open;
// - dup2 or dup3 onto one closes the database first, does the dup, and
//   reopens it (on other numbers), as a failed exec does (writer.c): those
//   two are process/fdhooks.c's, as they stop and restart the writer;
// - tpprof's other files (/proc reads) and libunwind's pipe (pipe2 with
//   tpprof_guard set) are kept the same way.
// - a raw close system call cannot be seen: so every write SQLite makes to
//   the database's files (write, pwrite, ftruncate, fcntl locks, mmap of the
//   -shm file) first checks that the descriptor still holds the file it
//   opened (device and inode, fstat). If not, recording stops with one line
//   and nothing is written: never into a file of the program's that got
//   the number; SQLite's close of that number is skipped too. (What is
//   left: a raw close and an open of the same number by another thread
//   between the check and the write it guards, microseconds. Six loaded
//   runs of rawcloser at once, closing in the middle of a flush, hit it
//   once.)
// Calls made by tpprof itself (tpprof_guard set) pass straight through.
// Not covered: posix_spawn's file actions, which run in the new process
// just before its exec (the descriptors are close-on-exec).
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include "base/sqlite_api.h"
#include <stdarg.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/base.h"
#include "base/fdguard.h"

#define MAX_OWN 16

// fd + 1 of each descriptor tpprof holds (0: free slot), and of those the
// database's (SQLite's), which a forked child abandons.
static _Atomic int own[MAX_OWN], own_db[MAX_OWN];
// The file each of own_db's descriptors was opened on (same slot).
static struct {
    dev_t dev;
    ino_t ino;
} own_db_file[MAX_OWN];

static int (*real_close)(int);
static int (*real_pipe2)(int[2], int);

static void resolve(void) {
    if (!real_close) *(void **)&real_close = dlsym(RTLD_NEXT, "close");
    if (!real_pipe2) *(void **)&real_pipe2 = dlsym(RTLD_NEXT, "pipe2");
}

static int do_close(int fd) {
    if (real_close) return real_close(fd);
    return (int)syscall(SYS_close, fd);
}

static bool in_set(_Atomic int *set, int fd) {
    if (fd < 0) return false;
    for (int i = 0; i < MAX_OWN; i++)
        if (atomic_load_explicit(&set[i], memory_order_relaxed) == fd + 1) return true;
    return false;
}

static bool is_own(int fd) { return in_set(own, fd); }
bool tpprof_fd_is_own(int fd) { return is_own(fd); }
bool tpprof_fd_is_db(int fd) { return in_set(own_db, fd); }

static void set_add(_Atomic int *set, int fd) {
    for (int i = 0; i < MAX_OWN; i++) {
        int expect = 0;
        if (atomic_compare_exchange_strong(&set[i], &expect, fd + 1)) return;
    }
    // More than MAX_OWN open at once (SQLite holds three): not guarded.
}

static void set_remove(_Atomic int *set, int fd) {
    for (int i = 0; i < MAX_OWN; i++) {
        int expect = fd + 1;
        if (atomic_compare_exchange_strong(&set[i], &expect, 0)) return;
    }
}

static void own_add(int fd) { set_add(own, fd); }

static void own_remove(int fd) {
    set_remove(own, fd);
    set_remove(own_db, fd);
}
void tpprof_fd_forget(int fd) { own_remove(fd); }

// ---------------------------------------------------------------------------
// SQLite's side.

static sqlite3_syscall_ptr sqlite_open;

// The lowest number tpprof's descriptors are moved to: 64 below the soft
// limit, or below 1024 when the limit is higher (a descriptor near a limit
// of a million would grow the table to it), or 256 past the number a
// program dup'ed onto one; 0: leave them where they are.
static int base_moved; // > 0: after a dup2 onto one of them, move to this
void tpprof_fd_move_above(int base) { base_moved = base; }

static int high_base(void) {
    if (base_moved > 0) return base_moved;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return 0;
    rlim_t top = rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > 1024 ? 1024 : rl.rlim_cur;
    return top > 128 ? (int)(top - 64) : 0;
}

// fd moved up and kept as tpprof's; -1 if it is gone. Between the open and
// the move a close loop on another thread can take the low number, and the
// program's next open reuse it: then the move finds another file, which is
// left alone. (Files tpprof opens while the program runs are few and rare;
// the database and statm are opened before main or in a fork child still
// alone in its process.)
static int keep(int fd) {
    struct stat a, b;
    if (fstat(fd, &a) != 0) return -1;
    int base = high_base();
    if (base > fd) {
        int moved = fcntl(fd, F_DUPFD_CLOEXEC, base);
        if (moved >= 0) {
            if (fstat(moved, &b) != 0 || a.st_dev != b.st_dev || a.st_ino != b.st_ino) {
                do_close(moved); // the program's file now: not ours to close
                errno = EBADF;
                return -1;
            }
            do_close(fd);
            fd = moved;
        } else if (errno == EBADF) {
            return -1;
        }
    }
    own_add(fd);
    return fd;
}

// Adds fd to own_db with the file it holds now.
static void db_add(int fd) {
    struct stat st;
    if (fstat(fd, &st) != 0) return;
    for (int i = 0; i < MAX_OWN; i++) {
        if (atomic_load(&own_db[i])) continue;
        own_db_file[i].dev = st.st_dev;
        own_db_file[i].ino = st.st_ino;
        int expect = 0;
        if (atomic_compare_exchange_strong(&own_db[i], &expect, fd + 1)) return;
    }
}

// False when fd is one of the database's descriptors and no longer holds
// the file SQLite opened (the program closed it with a raw system call,
// and perhaps opened a file of its own on the number): recording stops,
// with one line, the first time.
static bool db_still_ours(int fd) {
    for (int i = 0; fd >= 0 && i < MAX_OWN; i++) {
        if (atomic_load_explicit(&own_db[i], memory_order_relaxed) != fd + 1) continue;
        struct stat st;
        if (fstat(fd, &st) == 0 && st.st_dev == own_db_file[i].dev && st.st_ino == own_db_file[i].ino)
            return true;
        char why[160];
        snprintf(why, sizeof why,
                 "the program closed its descriptor %d behind the C library's back (a raw close system "
                 "call)%s; nothing more is written",
                 fd, fstat(fd, &st) == 0 ? " and opened a file of its own on it" : "");
        tpprof_disable("the recording", why);
        return false;
    }
    return true;
}

static int vfs_open(const char *path, int flags, int mode) {
    int fd = ((int (*)(const char *, int, int))sqlite_open)(path, flags, mode);
    // The program's own use of this SQLite library (the same shared one)
    // goes through here too: only tpprof's calls are moved and kept.
    if (fd < 0 || !tpprof_guard) return fd;
    fd = keep(fd);
    if (fd >= 0) db_add(fd);
    return fd;
}

// SQLite's calls that change a file, each after db_still_ours.
static sqlite3_syscall_ptr sqlite_write, sqlite_pwrite, sqlite_pwrite64, sqlite_ftruncate, sqlite_fcntl,
    sqlite_mmap;

static ssize_t vfs_write(int fd, const void *buf, size_t n) {
    if (!db_still_ours(fd)) return errno = EIO, -1;
    return ((ssize_t(*)(int, const void *, size_t))sqlite_write)(fd, buf, n);
}

static ssize_t vfs_pwrite(int fd, const void *buf, size_t n, off_t at) {
    if (!db_still_ours(fd)) return errno = EIO, -1;
    return ((ssize_t(*)(int, const void *, size_t, off_t))sqlite_pwrite)(fd, buf, n, at);
}

static ssize_t vfs_pwrite64(int fd, const void *buf, size_t n, off_t at) {
    if (!db_still_ours(fd)) return errno = EIO, -1;
    return ((ssize_t(*)(int, const void *, size_t, off_t))sqlite_pwrite64)(fd, buf, n, at);
}

static int vfs_ftruncate(int fd, off_t size) {
    if (!db_still_ours(fd)) return errno = EIO, -1;
    return ((int (*)(int, off_t))sqlite_ftruncate)(fd, size);
}

// SQLite's fcntl calls pass one argument or none: a struct flock pointer,
// or an int (F_SETFD's flags), which x86-64 and arm64 pass in the same
// register, read here as a pointer and handed on unchanged.
static int vfs_fcntl(int fd, int cmd, ...) {
    va_list ap;
    va_start(ap, cmd);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    if (!db_still_ours(fd)) return errno = EIO, -1;
    return ((int (*)(int, int, ...))sqlite_fcntl)(fd, cmd, arg);
}

static void *vfs_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
    if (!db_still_ours(fd)) return errno = EIO, MAP_FAILED;
    return ((void *(*)(void *, size_t, int, int, int, off_t))sqlite_mmap)(addr, len, prot, flags, fd, off);
}

int tpprof_fd_open(const char *path) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    return fd < 0 ? fd : keep(fd);
}

void tpprof_fd_close(int fd) {
    if (fd < 0) return;
    own_remove(fd);
    do_close(fd);
}

static int vfs_close(int fd) {
    bool ours = db_still_ours(fd);
    own_remove(fd);
    return ours ? do_close(fd) : 0; // another file's now: the program's to close
}

bool tpprof_fdguard_install(void) {
    static bool done;
    if (done) return true;
    resolve();
    sqlite3_vfs *vfs = sqlite3_vfs_find(NULL);
    if (!vfs || vfs->iVersion < 3 || !vfs->xGetSystemCall || !vfs->xSetSystemCall) return false;
    sqlite_open = vfs->xGetSystemCall(vfs, "open");
    if (!sqlite_open) return false;
    if (vfs->xSetSystemCall(vfs, "open", (sqlite3_syscall_ptr)vfs_open) != SQLITE_OK) return false;
    if (vfs->xSetSystemCall(vfs, "close", (sqlite3_syscall_ptr)vfs_close) != SQLITE_OK) {
        vfs->xSetSystemCall(vfs, "open", sqlite_open);
        return false;
    }
    // The calls that change a file: each SQLite build has some of them
    // (pwrite or pwrite64 or write, mmap only with WAL or mmap I/O).
    static const struct {
        const char *name;
        sqlite3_syscall_ptr *real, wrapper;
    } writes[] = {
        {"write", &sqlite_write, (sqlite3_syscall_ptr)vfs_write},
        {"pwrite", &sqlite_pwrite, (sqlite3_syscall_ptr)vfs_pwrite},
        {"pwrite64", &sqlite_pwrite64, (sqlite3_syscall_ptr)vfs_pwrite64},
        {"ftruncate", &sqlite_ftruncate, (sqlite3_syscall_ptr)vfs_ftruncate},
        {"fcntl", &sqlite_fcntl, (sqlite3_syscall_ptr)vfs_fcntl},
        {"mmap", &sqlite_mmap, (sqlite3_syscall_ptr)vfs_mmap},
    };
    for (size_t i = 0; i < sizeof writes / sizeof writes[0]; i++) {
        *writes[i].real = vfs->xGetSystemCall(vfs, writes[i].name);
        if (*writes[i].real) vfs->xSetSystemCall(vfs, writes[i].name, writes[i].wrapper);
    }
    done = true;
    return true;
}

// The program's stderr as it was at the start, on a number of tpprof's own
// (-1 if it had none): a program that closes descriptor 2 and opens a file
// of its own there would otherwise get tpprof's one line inside that file.
// Its file (device, inode) is remembered: a program that closed that copy
// with a raw system call may hold another file on the number, and the line
// then goes to descriptor 2 if that is still the same stderr, or nowhere.
static int err_fd = -2;
static struct stat err_file;

static bool holds(int fd, const struct stat *file) {
    struct stat st;
    return fd >= 0 && fstat(fd, &st) == 0 && st.st_dev == file->st_dev && st.st_ino == file->st_ino;
}

int tpprof_fd_stderr(void) {
    if (err_fd == -2) {
        int fd = fcntl(2, F_DUPFD_CLOEXEC, 3);
        err_fd = fd >= 0 ? keep(fd) : -1;
        if (err_fd >= 0 && fstat(err_fd, &err_file) != 0) {
            tpprof_fd_close(err_fd);
            err_fd = -1;
        }
    }
    if (holds(err_fd, &err_file)) return err_fd;
    return err_fd >= 0 && holds(2, &err_file) ? 2 : -1;
}

void tpprof_fdguard_fork_child(void) {
    // The parent's database was abandoned (writer.c): its descriptors are
    // the child's to close. (statm and libunwind's pipe stay: writer.c
    // reopens statm, and libunwind keeps using its pipe.)
    for (int i = 0; i < MAX_OWN; i++) {
        int v = atomic_exchange(&own_db[i], 0);
        if (v) {
            set_remove(own, v - 1);
            do_close(v - 1);
        }
    }
}

// ---------------------------------------------------------------------------
// The program's side (exported, tpprof.map).

TPPROF_EXPORT int close(int fd) {
    if (is_own(fd)) {
        if (!tpprof_guard) {
            errno = EBADF;
            return -1;
        }
        own_remove(fd); // libunwind closing its pipe
    }
    if (!real_close) resolve();
    return do_close(fd);
}

static int close_range_raw(unsigned lo, unsigned hi, int flags) {
    return (int)syscall(SYS_close_range, lo, hi, flags);
}

// close_range(lo, hi) around tpprof's descriptors: the gaps between them.
TPPROF_EXPORT int close_range(unsigned int first, unsigned int last, int flags) {
    if (tpprof_guard || first > last) return close_range_raw(first, last, flags);
    int fds[MAX_OWN], n = 0;
    for (int i = 0; i < MAX_OWN; i++) {
        int v = atomic_load(&own[i]);
        if (v && (unsigned)(v - 1) >= first && (unsigned)(v - 1) <= last) fds[n++] = v - 1;
    }
    for (int i = 1; i < n; i++) // sort: few
        for (int j = i; j > 0 && fds[j - 1] > fds[j]; j--) {
            int t = fds[j];
            fds[j] = fds[j - 1];
            fds[j - 1] = t;
        }
    unsigned lo = first;
    int rc = 0;
    for (int i = 0; i < n; i++) {
        unsigned fd = (unsigned)fds[i];
        if (fd > lo && close_range_raw(lo, fd - 1, flags) != 0) rc = -1;
        lo = fd + 1;
    }
    if (lo <= last && lo != 0 && close_range_raw(lo, last, flags) != 0) rc = -1;
    return rc;
}

TPPROF_EXPORT void closefrom(int lowfd) {
    if (lowfd < 0) lowfd = 0;
    if (close_range((unsigned)lowfd, ~0u, 0) == 0) return;
    // Without close_range (a kernel before 5.9): one at a time.
    struct rlimit rl;
    long top = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY ? (long)rl.rlim_cur : 65536;
    for (long fd = lowfd; fd < top; fd++)
        if (!is_own((int)fd)) do_close((int)fd);
}

// ---------------------------------------------------------------------------
// A file the program opens on one of tpprof's numbers: the program closed
// that descriptor with a raw system call (the C library's close is guarded
// above). Recording stops at once, with one line, before anything of
// tpprof's (SQLite's writes, libunwind's writes into its validation pipe,
// which happen inside the hooks and cannot be checked one by one) reaches
// the program's file on that number.

static void opened_on_own(int fd) {
    if (fd < 0 || tpprof_guard || !is_own(fd)) return;
    char why[200];
    snprintf(why, sizeof why,
             "the program closed its descriptor %d behind the C library's back (a raw close system call) and "
             "opened a file of its own on it; nothing more is written",
             fd);
    tpprof_disable("the recording", why);
}

static int (*real_open)(const char *, int, ...), (*real_openat)(int, const char *, int, ...);

// The mode argument, where the flags say there is one.
static mode_t open_mode(int flags, va_list ap) {
    return flags & (O_CREAT | O_TMPFILE) ? (mode_t)va_arg(ap, int) : 0;
}

static int guarded_open(const char *path, int flags, mode_t mode) {
    if (!real_open) *(void **)&real_open = dlsym(RTLD_NEXT, "open64");
    int fd = real_open ? real_open(path, flags, mode) : (int)syscall(SYS_openat, AT_FDCWD, path, flags, mode);
    opened_on_own(fd);
    return fd;
}

static int guarded_openat(int dirfd, const char *path, int flags, mode_t mode) {
    if (!real_openat) *(void **)&real_openat = dlsym(RTLD_NEXT, "openat64");
    int fd = real_openat ? real_openat(dirfd, path, flags, mode) : (int)syscall(SYS_openat, dirfd, path, flags, mode);
    opened_on_own(fd);
    return fd;
}

// Under _FILE_OFFSET_BITS=64 the headers name open open64: each symbol is
// defined by its own name here (glibc's two are one function on 64-bit).
TPPROF_EXPORT int tpprof_open_(const char *path, int flags, ...) __asm__("open");
TPPROF_EXPORT int tpprof_open64_(const char *path, int flags, ...) __asm__("open64");
TPPROF_EXPORT int tpprof_openat_(int dirfd, const char *path, int flags, ...) __asm__("openat");
TPPROF_EXPORT int tpprof_openat64_(int dirfd, const char *path, int flags, ...) __asm__("openat64");

int tpprof_open_(const char *path, int flags, ...) {
    va_list ap;
    va_start(ap, flags);
    mode_t mode = open_mode(flags, ap);
    va_end(ap);
    return guarded_open(path, flags, mode);
}

int tpprof_open64_(const char *path, int flags, ...) {
    va_list ap;
    va_start(ap, flags);
    mode_t mode = open_mode(flags, ap);
    va_end(ap);
    return guarded_open(path, flags, mode);
}

int tpprof_openat_(int dirfd, const char *path, int flags, ...) {
    va_list ap;
    va_start(ap, flags);
    mode_t mode = open_mode(flags, ap);
    va_end(ap);
    return guarded_openat(dirfd, path, flags, mode);
}

int tpprof_openat64_(int dirfd, const char *path, int flags, ...) {
    va_list ap;
    va_start(ap, flags);
    mode_t mode = open_mode(flags, ap);
    va_end(ap);
    return guarded_openat(dirfd, path, flags, mode);
}

// libunwind checks that an address is readable by writing from it into a
// pipe it opens (with tpprof_guard set: it runs inside the hooks); a
// program's close loop would take those numbers too.
TPPROF_EXPORT int pipe2(int fds[2], int flags) {
    if (!real_pipe2) resolve();
    int rc = real_pipe2(fds, flags);
    if (rc == 0 && tpprof_guard) {
        int r = keep(fds[0]), w = keep(fds[1]);
        if (r < 0 || w < 0) {
            if (r >= 0) tpprof_fd_close(r);
            if (w >= 0) tpprof_fd_close(w);
            errno = EBADF;
            return -1;
        }
        fds[0] = r;
        fds[1] = w;
    }
    return rc;
}
