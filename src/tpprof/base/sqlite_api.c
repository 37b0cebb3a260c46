// sqlite_api.c: loading tpprof's own SQLite (see sqlite_api.h for why).
//
// Runs once, in the constructor, with the guard set (the loader's mallocs
// are not recorded). Must not be called from a hook.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <malloc.h>
#include <stddef.h>

#include "base/sqlite_api.h"

#define SQLITE_SONAME "libsqlite3.so.0"

struct tpprof_sqlite_api tpprof_sql;
bool tpprof_sqlite_shared;

static bool resolve(void *h) {
#define TPPROF_SQLITE_RESOLVE(name) \
    if (!(*(void **)&tpprof_sql.name = dlsym(h, "sqlite3_" #name))) return false;
    TPPROF_SQLITE_FUNCS(TPPROF_SQLITE_RESOLVE)
#undef TPPROF_SQLITE_RESOLVE
    return true;
}

bool tpprof_sqlite_load(const char **why) {
    static bool loaded;
    if (loaded) return true;
    // A namespace of its own: its own SQLite globals, and its own libc, whose
    // malloc the preload does not interpose (the writer's memory is neither
    // recorded nor in the program's heap).
    void *h = dlmopen(LM_ID_NEWLM, SQLITE_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (h && resolve(h)) {
        // That libc gives each new thread an arena of its own, 64 MiB of
        // address space reserved (counted by ulimit -v): the writer needs one.
        int (*ns_mallopt)(int, int);
        *(void **)&ns_mallopt = dlsym(h, "mallopt");
        if (ns_mallopt) ns_mallopt(M_ARENA_MAX, 1);
        // This copy is the writer's alone, used by one thread at a time (the
        // writer's mutex): no mutexes and no memory statistics (their
        // lock and unlock around every allocation and page were a fifth of
        // SQLite's time writing a big program's stack nodes).
        int (*ns_config)(int, ...);
        *(void **)&ns_config = dlsym(h, "sqlite3_config");
        if (ns_config) {
            ns_config(SQLITE_CONFIG_SINGLETHREAD);
            ns_config(SQLITE_CONFIG_MEMSTATUS, 0);
        }
        loaded = true;
        return true;
    }
    if (h) dlclose(h);
    // The default namespace's library (the program's, if it uses one).
    h = dlopen(SQLITE_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (h && resolve(h)) {
        tpprof_sqlite_shared = true;
        loaded = true;
        return true;
    }
    *why = h ? "its SQLite library lacks a function tpprof needs" : "cannot load " SQLITE_SONAME;
    return false;
}
