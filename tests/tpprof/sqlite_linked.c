// sqlite_linked.c: the writer's SQLite table (src/tpprof/sqlite_api.h) filled
// with the library this test is linked with, so that the code under test
// and the test share one SQLite and one database handle.
#define TPPROF_SQLITE_LINKED
#include "base/sqlite_api.h"

struct tpprof_sqlite_api tpprof_sql = {
#define TPPROF_SQLITE_LINK(name) .name = sqlite3_##name,
    TPPROF_SQLITE_FUNCS(TPPROF_SQLITE_LINK)
#undef TPPROF_SQLITE_LINK
};
bool tpprof_sqlite_shared = true;
