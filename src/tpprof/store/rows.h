// rows.h: the two steps of writing a row that the store's table writers
// share (store/tensors.c, store/graph.c). Private to store/: nothing outside
// it writes SQL.
#ifndef TPPROF_STORE_ROWS_H
#define TPPROF_STORE_ROWS_H

#include <stdbool.h>
#include <stdint.h>

#include "base/sqlite_api.h"

// Runs the prepared insert st once (its bound row), then resets it and
// clears its bindings for the next row; false when SQLite failed.
static inline bool tpprof_store_step(sqlite3_stmt *st) {
    bool ok = sqlite3_step(st) == SQLITE_DONE;
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    return ok;
}

// Binds column col to the time v when set, else to NULL (not happened).
static inline void tpprof_store_bind_time(sqlite3_stmt *st, int col, bool set, uint64_t v) {
    if (set) sqlite3_bind_int64(st, col, (sqlite3_int64)v);
    else sqlite3_bind_null(st, col);
}

#endif
