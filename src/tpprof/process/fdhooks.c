// fdhooks.c: dup2 and dup3 onto one of the recording's descriptors
// (base/fdguard.c keeps them out of the program's way otherwise). The
// database is moved: the writer ends it as for an exec and reopens it on
// other numbers after the dup; other files of tpprof's are reopened with the
// writer held still.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <sys/resource.h>
#include <unistd.h>

#include "base/base.h"
#include "base/fdguard.h"
#include "writer/control.h"

static int (*real_dup2)(int, int);
static int (*real_dup3)(int, int, int);

// The program wants a number one of tpprof's files holds. The database is
// moved away: closed, and opened again on other numbers after the dup (as a
// failed exec does, writer.c). Of the others, statm is opened again on this
// thread with the writer held, and libunwind's pipe is let go (it checks
// memory with mincore where that works, as on Linux). All of it here, not
// by the writer later, so that no open of tpprof's races the program's next
// dup2 (which would then fail with EBUSY).
static int dup_onto_own(int oldfd, int newfd, int flags, bool three) {
    bool db = tpprof_fd_is_db(newfd);
    tpprof_guard = 1; // SQLite's allocations are not the program's
    if (db) {
        // A program taking numbers in a row upward (dup2 onto 3, 4, 5, ...)
        // would find the database on the next one again: reopen it well
        // ahead (or low, at the soft limit).
        struct rlimit rl;
        bool room = getrlimit(RLIMIT_NOFILE, &rl) == 0 &&
                    (rl.rlim_cur == RLIM_INFINITY || (rlim_t)newfd + 320 < rl.rlim_cur);
        tpprof_fd_move_above(room ? newfd + 256 : 0);
        tpprof_writer_finish(TPPROF_END_EXEC);
    } else {
        tpprof_writer_pause();
        tpprof_fd_forget(newfd);
    }
    int rc = three ? real_dup3(oldfd, newfd, flags) : real_dup2(oldfd, newfd);
    int saved = errno;
    if (db) tpprof_writer_exec_failed();
    else tpprof_writer_resume(newfd);
    tpprof_guard = 0;
    errno = saved;
    return rc;
}

// real_dup2 and real_dup3 are glibc's (they always are).
TPPROF_EXPORT int dup2(int oldfd, int newfd) {
    if (!real_dup2) *(void **)&real_dup2 = dlsym(RTLD_NEXT, "dup2");
    if (!tpprof_guard && oldfd != newfd && tpprof_fd_is_own(newfd)) return dup_onto_own(oldfd, newfd, 0, false);
    return real_dup2(oldfd, newfd);
}

TPPROF_EXPORT int dup3(int oldfd, int newfd, int flags) {
    if (!real_dup3) *(void **)&real_dup3 = dlsym(RTLD_NEXT, "dup3");
    if (!tpprof_guard && oldfd != newfd && tpprof_fd_is_own(newfd)) return dup_onto_own(oldfd, newfd, flags, true);
    return real_dup3(oldfd, newfd, flags);
}
