// db.c: opening a tpprof recording and deciding whether to trust it.
//
// Every way a file can be wrong ends here as one error line, never a crash:
// missing, not SQLite, truncated, a foreign SQLite database, a newer schema,
// missing tables. The checks read the 100-byte SQLite header first so that a
// truncated file is named as such instead of failing later mid-report.
// This file knows the schema's tables by name only; what they mean is for
// profile.c and stacks.c.
#define _POSIX_C_SOURCE 200809L
#include "viewer.h"

#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

// ---------------------------------------------------------------------------
// The SQLite file header (https://www.sqlite.org/fileformat.html, section 1.3)

static uint32_t be32(const unsigned char *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

// Refuse files that are not SQLite or are shorter than their header says.
static int check_header(const char *path) {
    struct stat sb;
    if (stat(path, &sb) != 0)
        return tpprof_error_set("cannot open '%s': %s", path, strerror(errno));
    if (S_ISDIR(sb.st_mode))
        return tpprof_error_set("cannot open '%s': is a directory", path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return tpprof_error_set("cannot open '%s': %s", path, strerror(errno));
    unsigned char h[100];
    ssize_t got = read(fd, h, sizeof h);
    close(fd);
    char why[4200];
    if (got == 0 && tpprof_recording_unwritten(path, why, sizeof why))
        return tpprof_error_set("'%s': %s", path, why);
    if (got < (ssize_t)sizeof h || memcmp(h, "SQLite format 3", 16) != 0)
        return tpprof_error_set("'%s' is not a SQLite database (not a tpprof recording)", path);
    uint32_t page_size = (uint32_t)h[16] << 8 | h[17];
    if (page_size == 1)
        page_size = 65536;
    if (page_size < 512 || (page_size & (page_size - 1)))
        return tpprof_error_set("'%s' is corrupt: bad page size %u", path, page_size);
    // The in-header page count is valid only when "version-valid-for" equals
    // the change counter (SQLite >= 3.7.0 keeps them in step).
    uint32_t pages = be32(h + 28);
    // A -wal file beside it holds committed pages the file itself may not
    // have yet: a recording cut short (kill -9, a full disk mid-checkpoint)
    // is whole only with it, and SQLite reads it.
    char wal[4096 + 8];
    struct stat wb;
    snprintf(wal, sizeof wal, "%s-wal", path);
    bool has_wal = stat(wal, &wb) == 0 && S_ISREG(wb.st_mode) && wb.st_size > 0;
    if (pages && !has_wal && be32(h + 92) == be32(h + 24)) {
        uint64_t want = (uint64_t)pages * page_size;
        if ((uint64_t)sb.st_size < want)
            return tpprof_error_set("'%s' is truncated: %lld of %llu bytes", path,
                                    (long long)sb.st_size, (unsigned long long)want);
    }
    if (sb.st_size % page_size)
        return tpprof_error_set("'%s' is truncated: %lld bytes is not a whole number of %u-byte pages",
                                path, (long long)sb.st_size, page_size);
    return 0;
}

// ---------------------------------------------------------------------------
// Errors from SQLite

int tpprof_db_error(tpprof_db *db, const char *doing) {
    int code = sqlite3_errcode(db->sql);
    const char *msg = sqlite3_errmsg(db->sql);
    if (code == SQLITE_NOTADB)
        return tpprof_error_set("'%s' is not a SQLite database (not a tpprof recording)", db->path);
    if (code == SQLITE_CORRUPT)
        return tpprof_error_set("'%s' is corrupt or truncated (%s while %s)", db->path, msg, doing);
    return tpprof_error_set("'%s': %s while %s", db->path, msg, doing);
}

int tpprof_db_scalar(tpprof_db *db, const char *sql, int64_t *out) {
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db->sql, sql, -1, &st, NULL) != SQLITE_OK)
        return tpprof_db_error(db, "preparing a query");
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        *out = sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
        return 0;
    }
    if (rc == SQLITE_DONE) {
        *out = 0;
        sqlite3_finalize(st);
        return 0;
    }
    tpprof_db_error(db, "reading");
    sqlite3_finalize(st);
    return -1;
}

// ---------------------------------------------------------------------------
// meta

char *tpprof_db_meta(tpprof_db *db, const char *key) {
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db->sql, "SELECT value FROM meta WHERE key = ?1", -1, &st, NULL) !=
        SQLITE_OK)
        return NULL;
    sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
    char *value = NULL;
    if (sqlite3_step(st) == SQLITE_ROW)
        value = tpprof_strdup((const char *)sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    return value;
}

bool tpprof_db_meta_i64(tpprof_db *db, const char *key, int64_t *out) {
    char *v = tpprof_db_meta(db, key);
    if (!v)
        return false;
    char *end = NULL;
    errno = 0;
    long long n = strtoll(v, &end, 10);
    bool ok = end != v && *end == 0 && errno == 0;
    if (ok)
        *out = n;
    free(v);
    return ok;
}

// ---------------------------------------------------------------------------
// Recordings tpprof could not write
//
// The recorder creates its file, then writes the schema: when that first
// write fails (a full disk) the file is left empty, or a SQLite database
// without a table. Such a file is a failed recording, not a foreign file.

// Less than this free on a file system and a recording cannot be written:
// its WAL alone grows by hundreds of KiB.
#define NEARLY_FULL_BYTES (1u << 20)

bool tpprof_fs_full(const char *path, char *why, size_t size) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else
        *(slash == dir ? slash + 1 : slash) = 0;
    struct statvfs sv;
    if (statvfs(dir, &sv) != 0 || (uint64_t)sv.f_bavail * sv.f_frsize >= NEARLY_FULL_BYTES)
        return false;
    char free_text[32];
    snprintf(why, size, "the file system holding it is full: %s free",
             tpprof_format_size((uint64_t)sv.f_bavail * sv.f_frsize, free_text));
    return true;
}

// From the file's first page alone, without SQLite (which may not open a
// file whose -shm the failed write left short): one page, whose b-tree
// (sqlite_master) has no cell, and no WAL that could hold more.
static bool header_says_no_table(const char *path) {
    unsigned char h[108];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t got = fd >= 0 ? read(fd, h, sizeof h) : -1;
    if (fd >= 0)
        close(fd);
    if (got != (ssize_t)sizeof h || memcmp(h, "SQLite format 3", 16) != 0)
        return false;
    char wal[4200];
    struct stat wb;
    snprintf(wal, sizeof wal, "%s-wal", path);
    if (stat(wal, &wb) == 0 && wb.st_size > 0)
        return false;
    bool one_page = be32(h + 28) == 1 && be32(h + 92) == be32(h + 24);
    return one_page && h[100] == 0x0d && h[103] == 0 && h[104] == 0;
}

bool tpprof_recording_unwritten(const char *path, char *why, size_t size) {
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode))
        return false;
    bool empty = sb.st_size == 0 || header_says_no_table(path);
    if (!empty) {
        sqlite3 *db = NULL;
        sqlite3_stmt *st = NULL;
        if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
            sqlite3_prepare_v2(db, "SELECT count(*) FROM sqlite_master", -1, &st, NULL) == SQLITE_OK &&
            sqlite3_step(st) == SQLITE_ROW)
            empty = sqlite3_column_int64(st, 0) == 0;
        sqlite3_finalize(st);
        sqlite3_close(db);
    }
    if (!empty)
        return false;
    char full[128];
    snprintf(why, size, "nothing was recorded: tpprof could not write it (%s)",
             tpprof_fs_full(path, full, sizeof full) ? full : "its warning while the program ran says why");
    return true;
}

// ---------------------------------------------------------------------------
// Open

bool tpprof_db_has_table(tpprof_db *db, const char *name) {
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db->sql,
                           "SELECT 1 FROM sqlite_master WHERE type IN ('table', 'view') AND name = ?1", -1,
                           &st, NULL) != SQLITE_OK)
        return false;
    sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
    bool found = sqlite3_step(st) == SQLITE_ROW;
    sqlite3_finalize(st);
    return found;
}

// Check meta before anything else: a foreign database must be named foreign,
// not "missing table stack_nodes".
static int validate(tpprof_db *db) {
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db->sql, "SELECT name FROM sqlite_master LIMIT 1", -1, &st, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(st);
    sqlite3_finalize(st);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return tpprof_db_error(db, "reading the schema");
    char why[4200];
    if (rc == SQLITE_DONE && tpprof_recording_unwritten(db->path, why, sizeof why))
        return tpprof_error_set("'%s': %s", db->path, why);
    if (!tpprof_db_has_table(db, "meta"))
        return tpprof_error_set("'%s' is a SQLite database but not a tpprof recording (no meta table)",
                                db->path);
    char *tool = tpprof_db_meta(db, "tool");
    bool ours = tool && strcmp(tool, "tpprof") == 0;
    free(tool);
    if (!ours)
        return tpprof_error_set("'%s' is a SQLite database but not a tpprof recording (meta.tool is not 'tpprof')",
                                db->path);
    int64_t version = 0;
    if (!tpprof_db_meta_i64(db, "schema_version", &version) || version < 1)
        return tpprof_error_set("'%s' has no valid meta.schema_version", db->path);
    if (version > TPPROF_SCHEMA_VERSION)
        return tpprof_error_set("'%s' uses schema version %lld; this tpprof reads version %d or older: upgrade tpprof",
                                db->path, (long long)version, TPPROF_SCHEMA_VERSION);
    db->schema_version = version;
    static const char *required[] = {"modules", "stack_nodes", "sites", "live_blocks"};
    for (size_t i = 0; i < sizeof required / sizeof *required; i++)
        if (!tpprof_db_has_table(db, required[i]))
            return tpprof_error_set("'%s' lacks the table '%s' (damaged recording)", db->path,
                                    required[i]);
    if (!tpprof_db_has_table(db, "symbols")) {
        // The recorder should create it; tolerate its absence on read, create it on write.
        if (db->writable &&
            sqlite3_exec(db->sql,
                         "CREATE TABLE symbols(ip INTEGER NOT NULL, idx INTEGER NOT NULL, function TEXT, "
                         "file TEXT, line INTEGER, module TEXT, PRIMARY KEY (ip, idx)) WITHOUT ROWID",
                         NULL, NULL, NULL) != SQLITE_OK)
            return tpprof_db_error(db, "creating the symbols table");
    }
    return 0;
}

tpprof_db *tpprof_db_open(const char *path, bool writable) {
    if (check_header(path) != 0)
        return NULL;
    tpprof_db *db = calloc(1, sizeof *db);
    if (!db) {
        tpprof_error_set("out of memory");
        return NULL;
    }
    db->path = strdup(path);
    db->writable = writable;
    // NOMUTEX: a connection is only ever used by the thread that opened it,
    // and the per-call mutex was a sixth of reading a big `events` table.
    int flags = (writable ? SQLITE_OPEN_READWRITE : SQLITE_OPEN_READONLY) | SQLITE_OPEN_NOMUTEX;
    if (sqlite3_open_v2(path, &db->sql, flags, NULL) != SQLITE_OK) {
        tpprof_error_set("cannot open '%s': %s", path,
                         db->sql ? sqlite3_errmsg(db->sql) : "out of memory");
        tpprof_db_close(db);
        return NULL;
    }
    sqlite3_busy_timeout(db->sql, 5000);
    // What the viewer writes into a recording (its symbols) is derived and
    // made again if lost: no fsync for it. Two per saved table, on a virtual
    // disk a third of symbolizing a small recording (tpprof run's listing of
    // a build's hundreds of recordings).
    if (writable)
        sqlite3_exec(db->sql, "PRAGMA synchronous=OFF", NULL, NULL, NULL);
    if (validate(db) != 0) {
        tpprof_db_close(db);
        return NULL;
    }
    return db;
}

void tpprof_db_close(tpprof_db *db) {
    if (!db)
        return;
    sqlite3_close(db->sql);
    free(db->path);
    free(db);
}
