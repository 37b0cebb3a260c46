// sqlite_linked.c: the recorder's SQLite table (base/sqlite_api.h) filled
// with the library the program is linked with, for programs that run the
// recorder's store code outside the preload: the build's schema generator
// (store/schema_gen.c) and the tests, which share one SQLite and one
// database handle with the code under test. Never part of libtpprof.so,
// which loads a private SQLite (base/sqlite_api.c).
#define TPPROF_SQLITE_LINKED
#include "base/sqlite_api.h"

struct tpprof_sqlite_api tpprof_sql = {
#define TPPROF_SQLITE_LINK(name) .name = sqlite3_##name,
    TPPROF_SQLITE_FUNCS(TPPROF_SQLITE_LINK)
#undef TPPROF_SQLITE_LINK
};
bool tpprof_sqlite_shared = true;
