// db.h: opening and validating a recording (read-only or read-write) (db.c).
// Private to viewer/; viewer.h includes every header of the viewer.
#ifndef TPPROF_VIEWER_DB_H
#define TPPROF_VIEWER_DB_H

#include "util.h"

// ---------------------------------------------------------------------------
// db.c

typedef struct tpprof_db {
    sqlite3 *sql;
    char *path;           // owned copy of the path it was opened with
    bool writable;
    int64_t schema_version;
} tpprof_db;

// Is path a recording tpprof created but could not write (an empty file, or
// a SQLite database without a single table)? Then why, in words, into why.
bool tpprof_recording_unwritten(const char *path, char *why, size_t size);
// Has the file system holding path too little room left for a recording
// (under 1 MiB)? Then "the file system holding it is full (N free)" into why.
bool tpprof_fs_full(const char *path, char *why, size_t size);

// Open and validate a recording. `writable` false opens it with
// SQLITE_OPEN_READONLY. Refuses (NULL + error): a missing file, a file that is
// not SQLite, a truncated file, a SQLite database without tpprof's meta, a
// newer schema_version, missing tables. Returns a new handle the caller closes.
tpprof_db *tpprof_db_open(const char *path, bool writable);
void tpprof_db_close(tpprof_db *db);

// meta.value for key as a new string (caller frees), or NULL if absent.
char *tpprof_db_meta(tpprof_db *db, const char *key);
// meta.value for key parsed as an integer; returns false if absent or not a number.
bool tpprof_db_meta_i64(tpprof_db *db, const char *key, int64_t *out);

// Run a statement that returns one integer (e.g. a COUNT). -1 + error on failure.
int tpprof_db_scalar(tpprof_db *db, const char *sql, int64_t *out);

// Turn a failed SQLite call on db into an error message ("reading X: ...").
int tpprof_db_error(tpprof_db *db, const char *doing);

// Does the database have this table (or a view of that name: device_events
// is one in recordings since December 2026)? Optional tables (docs/schema-tensors.md)
// read as empty when absent.
bool tpprof_db_has_table(tpprof_db *db, const char *name);

#endif
