// fdguard.h: tpprof's own file descriptors, kept out of the program's way
// (base/fdguard.c; dup2 and dup3 onto them: process/fdhooks.c).
#ifndef TPPROF_BASE_FDGUARD_H
#define TPPROF_BASE_FDGUARD_H

#include "base/base.h"

// The database's file descriptors (fdguard.c).

// Routes SQLite's opens and closes through fdguard.c; once, before the first
// database is opened. False if the VFS does not allow it (not guarded).
TPPROF_HIDDEN bool tpprof_fdguard_install(void);
// Opens a file of tpprof's own for reading (/proc), guarded like the
// database's; -1 on error. Close it with tpprof_fd_close.
TPPROF_HIDDEN int tpprof_fd_open(const char *path);
TPPROF_HIDDEN void tpprof_fd_close(int fd);
// Where tpprof's one line goes: a copy of descriptor 2 taken at the first
// call (the constructor's), -1 if there was none.
TPPROF_HIDDEN int tpprof_fd_stderr(void);
// A forked child: closes the parent's abandoned database descriptors.
TPPROF_HIDDEN void tpprof_fdguard_fork_child(void);


// For process/fdhooks.c: whether fd is one of tpprof's (of the database's),
// forgetting one, and where the database's next numbers go (0: anywhere).
TPPROF_HIDDEN bool tpprof_fd_is_own(int fd);
TPPROF_HIDDEN bool tpprof_fd_is_db(int fd);
TPPROF_HIDDEN void tpprof_fd_forget(int fd);
TPPROF_HIDDEN void tpprof_fd_move_above(int base);

#endif
