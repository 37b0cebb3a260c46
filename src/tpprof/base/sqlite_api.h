// sqlite_api.h: the SQLite that tpprof writes with, kept apart from the
// program's own.
//
// A program that uses SQLite itself (the sqlite3 shell, Python, any C
// program with a database) would otherwise share one library, and its
// global state, with the recorder: SQLite is initialized by the time main
// runs, so the program's sqlite3_config() calls fail with SQLITE_MISUSE, and
// its sqlite3_shutdown() or a switch to SQLITE_CONFIG_SINGLETHREAD pulls the
// library out from under the writer thread. So libtpprof.so is not linked
// against SQLite: sqlite_api.c loads a copy of its own with dlmopen into a
// new link namespace (its own libc with it, whose malloc is not interposed),
// and the recorder calls it through this table. Where that cannot be done
// (the loader has no room left for another namespace's TLS) the library of
// the default namespace is used, shared as before, and meta.sqlite_shared
// says so.
//
// Include this instead of <sqlite3.h>: the names below then call the table.
// Every function used must be listed here and in sqlite_api.c.
#ifndef TPPROF_SQLITE_API_H
#define TPPROF_SQLITE_API_H

#include <sqlite3.h>
#include <stdbool.h>

#define TPPROF_SQLITE_FUNCS(X) \
    X(bind_int)                \
    X(bind_int64)              \
    X(bind_null)               \
    X(bind_text)               \
    X(busy_timeout)            \
    X(changes)                 \
    X(clear_bindings)          \
    X(close)                   \
    X(errmsg)                  \
    X(exec)                    \
    X(finalize)                \
    X(libversion)              \
    X(open_v2)                 \
    X(prepare_v2)              \
    X(reset)                   \
    X(step)                    \
    X(vfs_find)

struct tpprof_sqlite_api {
#define TPPROF_SQLITE_MEMBER(name) __typeof__(&sqlite3_##name) name;
    TPPROF_SQLITE_FUNCS(TPPROF_SQLITE_MEMBER)
#undef TPPROF_SQLITE_MEMBER
};

extern struct tpprof_sqlite_api tpprof_sql __attribute__((visibility("hidden")));

// Loads the library (once; the constructor calls it before the first
// open). False when no SQLite could be loaded: *why says what went wrong.
bool tpprof_sqlite_load(const char **why) __attribute__((visibility("hidden")));

// True when the private copy could not be loaded and the program's own
// (default namespace) library is used.
extern bool tpprof_sqlite_shared __attribute__((visibility("hidden")));

// (A unit test that hands the writer's code a database of the SQLite it is
// linked with defines TPPROF_SQLITE_LINKED and fills the table itself.)
#ifndef TPPROF_SQLITE_LINKED
#define sqlite3_bind_int tpprof_sql.bind_int
#define sqlite3_bind_int64 tpprof_sql.bind_int64
#define sqlite3_bind_null tpprof_sql.bind_null
#define sqlite3_bind_text tpprof_sql.bind_text
#define sqlite3_busy_timeout tpprof_sql.busy_timeout
#define sqlite3_changes tpprof_sql.changes
#define sqlite3_clear_bindings tpprof_sql.clear_bindings
#define sqlite3_close tpprof_sql.close
#define sqlite3_errmsg tpprof_sql.errmsg
#define sqlite3_exec tpprof_sql.exec
#define sqlite3_finalize tpprof_sql.finalize
#define sqlite3_libversion tpprof_sql.libversion
#define sqlite3_open_v2 tpprof_sql.open_v2
#define sqlite3_prepare_v2 tpprof_sql.prepare_v2
#define sqlite3_reset tpprof_sql.reset
#define sqlite3_step tpprof_sql.step
#define sqlite3_vfs_find tpprof_sql.vfs_find
#endif

#endif
