// test_schema.c: unit tests of the recording's schema (store/schema.c): the
// build's copy of the empty recording, which every new recording starts
// from, is exactly what the schema's statements make, and it says so
// (user_version), so a reopened recording is not made again.
#define _GNU_SOURCE
#include <stdio.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/sqlite_api.h"
#include "store/store.h"
#include "../check.h"

static char dir[] = "/tmp/tpprof_test_schema.XXXXXX";

// Every row of sql, fields '|'-joined, rows '\n'-joined (malloc'd).
static char *rows(sqlite3 *db, const char *sql) {
    size_t cap = 1 << 16, len = 0;
    char *out = malloc(cap);
    out[0] = 0;
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) return out;
    while (sqlite3_step(st) == SQLITE_ROW) {
        for (int i = 0; i < sqlite3_column_count(st); i++) {
            const char *v = (const char *)sqlite3_column_text(st, i);
            size_t n = strlen(v ? v : "NULL") + 2;
            while (len + n + 1 > cap) out = realloc(out, cap *= 2);
            len += (size_t)snprintf(out + len, cap - len, "%s%s", i ? "|" : "", v ? v : "NULL");
        }
        out[len++] = '\n';
        out[len] = 0;
    }
    sqlite3_finalize(st);
    return out;
}

static const char master_sql[] = "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name";

static void test_a_new_recordings_copy_of_the_empty_recording_is_the_schema_made_statement_by_statement(void) {
    char copy[256], made[256];
    snprintf(copy, sizeof copy, "%s/copy.db", dir);
    snprintf(made, sizeof made, "%s/made.db", dir);
    CHECK(tpprof_store_schema_copy(copy, false));
    CHECK_MSG(!tpprof_store_schema_copy(copy, false), "the copy overwrote a file that was there");
    // In place (a claimed file): whatever the file held is replaced, same inode.
    char inplace[256];
    snprintf(inplace, sizeof inplace, "%s/inplace.db", dir);
    FILE *f = fopen(inplace, "w");
    CHECK(f && fputs("not yet a recording, longer than nothing", f) >= 0 && fclose(f) == 0);
    struct stat before, after, fresh;
    CHECK(stat(inplace, &before) == 0 && stat(copy, &fresh) == 0);
    CHECK(tpprof_store_schema_copy(inplace, true));
    CHECK(stat(inplace, &after) == 0);
    CHECK_MSG(after.st_ino == before.st_ino, "the in-place copy made a new file");
    CHECK_MSG(after.st_size == fresh.st_size, "in-place copy holds %lld bytes, a new one %lld", (long long)after.st_size,
              (long long)fresh.st_size);

    sqlite3 *a = NULL, *b = NULL;
    CHECK(sqlite3_open_v2(copy, &a, SQLITE_OPEN_READWRITE, NULL) == SQLITE_OK);
    CHECK(sqlite3_open_v2(made, &b, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) == SQLITE_OK);
    CHECK_MSG(!tpprof_store_schema_current(b), "an empty file passes for a made recording");
    CHECK(sqlite3_exec(b, "BEGIN", NULL, NULL, NULL) == SQLITE_OK && tpprof_store_schema_make(b) &&
          sqlite3_exec(b, "COMMIT", NULL, NULL, NULL) == SQLITE_OK);

    char *ma = rows(a, master_sql), *mb = rows(b, master_sql);
    CHECK_MSG(strcmp(ma, mb) == 0, "sqlite_master of the copy:\n%s\nmade statement by statement:\n%s", ma, mb);
    int tables = 0;
    for (const char *p = mb; (p = strstr(p, "table|")); p++) tables++;
    CHECK_MSG(tables >= 20, "%d tables", tables); // not two empty lists
    char *ka = rows(a, "SELECT id, name FROM kinds ORDER BY id"), *kb = rows(b, "SELECT id, name FROM kinds ORDER BY id");
    CHECK_MSG(strcmp(ka, kb) == 0 && strstr(ka, "1|malloc\n"), "kinds:\n%s\nvs\n%s", ka, kb);
    char *ja = rows(a, "PRAGMA journal_mode"), *pa = rows(a, "PRAGMA page_size"), *pb = rows(b, "PRAGMA page_size");
    CHECK_MSG(strcmp(ja, "wal\n") == 0, "the copy's journal mode: %s", ja); // as store.c opens it: no switch
    CHECK_MSG(strcmp(pa, pb) == 0, "page size %s vs %s", pa, pb);
    CHECK_MSG(tpprof_store_schema_current(a) && tpprof_store_schema_current(b), "user_version is not the schema's");
    char *ia = rows(a, "PRAGMA integrity_check");
    CHECK_MSG(strcmp(ia, "ok\n") == 0, "%s", ia);
    // Killed before its first meta writes, a recording is this copy: it must
    // read as an incomplete tpprof recording (check fails it), not as some
    // other database.
    char *meta = rows(a, "SELECT key, value FROM meta WHERE key IN ('tool', 'complete', 'schema_version') ORDER BY key");
    char want[96];
    snprintf(want, sizeof want, "complete|0\nschema_version|%d\ntool|tpprof\n", TPPROF_SCHEMA_VERSION);
    CHECK_MSG(strcmp(meta, want) == 0, "the copy's meta:\n%s", meta);
    free(meta);

    // A schema changed after the copy was made is not taken for the same.
    CHECK(sqlite3_exec(a, "PRAGMA user_version = 7", NULL, NULL, NULL) == SQLITE_OK);
    CHECK(!tpprof_store_schema_current(a));
    free(ma), free(mb), free(ka), free(kb), free(ja), free(pa), free(pb), free(ia);
    sqlite3_close(a);
    sqlite3_close(b);
}

int main(void) {
    if (!mkdtemp(dir)) return 1;
    test_a_new_recordings_copy_of_the_empty_recording_is_the_schema_made_statement_by_statement();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return CHECK_DONE();
}
