// test_stack_chunks.c: the stack trie as the recorder writes it since schema
// 3, in stack_chunks rows with stack_nodes a view of them, and the sites
// since schema 4, in site_chunks rows with sites a view of them, and the
// blocks alive at the end since schema 6, in live_chunks rows with
// live_blocks a view of them (docs/schema.md), read as the tables of older
// recordings did: in the
// viewer (report, symbolizing, merge) and through the views in plain SQL; a
// damaged chunk is one line and exit 2.
//
// The chunked fixtures are the table ones converted here, written as the
// recorder writes them (a bare ip when the parent is the node before, else
// [parent, ip]; a few nodes a row, so that there are many rows and both
// forms). With a python3 path as the second argument (suite 'preload') it
// also checks a real recording of the writer: a Python run, thousands of
// nodes over several chunks, reports the same as its copy with the view
// made into a table, and its sites are one row per (stack_id, kind).
#define _POSIX_C_SOURCE 200809L
#include "fixture.h"
#include "harness.h"

#include <sqlite3.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// The views, exactly as docs/schema.md gives them and the recorder creates them.
static const char view_sql[] =
    "CREATE VIEW stack_nodes(id, parent, ip) AS SELECT c.first + j.key,"
    " CASE j.type WHEN 'array' THEN j.value ->> 0 ELSE c.first + j.key - 1 END,"
    " CASE j.type WHEN 'array' THEN j.value ->> 1 ELSE j.value END FROM stack_chunks c, json_each(c.nodes) j";
static const char sites_view_sql[] =
    "CREATE VIEW sites(stack_id, kind, alloc_count, alloc_bytes, free_count, freed_bytes, temp_count,"
    " temp_bytes, peak_count, peak_bytes) AS SELECT j.value ->> 0, j.value ->> 1, j.value ->> 2, j.value ->> 3,"
    " j.value ->> 4, j.value ->> 5, j.value ->> 6, j.value ->> 7, j.value ->> 8, j.value ->> 9"
    " FROM site_chunks c, json_each(c.sites) j WHERE j.type = 'array'";
static const char live_view_sql[] =
    "CREATE VIEW live_blocks(address, size, kind, stack_id, tid, time_ns, reachability) AS SELECT"
    " j.value ->> 0, j.value ->> 1, j.value ->> 2, j.value ->> 3, j.value ->> 4, j.value ->> 5, j.value ->> 6"
    " FROM live_chunks c, json_each(c.blocks) j";

static int exec(sqlite3 *db, const char *sql) {
    char *msg = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK) {
        fprintf(stderr, "%s: %s\n", sql, msg ? msg : sqlite3_errmsg(db));
        sqlite3_free(msg);
        return -1;
    }
    return 0;
}

// One chunk row of the nodes in text (a JSON array) from first on.
static int put_chunk(sqlite3 *db, int64_t first, int64_t count, const char *text) {
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db, "INSERT INTO stack_chunks VALUES (?1, ?2, ?3)", -1, &st, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_int64(st, 1, first);
        sqlite3_bind_int64(st, 2, count);
        sqlite3_bind_text(st, 3, text, -1, SQLITE_TRANSIENT);
        rc = sqlite3_step(st) == SQLITE_DONE ? SQLITE_OK : SQLITE_ERROR;
    }
    sqlite3_finalize(st);
    return rc == SQLITE_OK ? 0 : -1;
}

// site_chunks being written by chunk_sites: the row under way.
typedef struct {
    sqlite3_stmt *put;
    char text[8192];
    size_t len;
    int64_t first, count;
    int per_chunk;
} site_rows;

// The row under way into site_chunks; 0 or -1.
static int put_site_row(site_rows *r) {
    if (!r->count)
        return 0;
    snprintf(r->text + r->len, sizeof r->text - r->len, "]");
    sqlite3_bind_int64(r->put, 1, r->first);
    sqlite3_bind_int64(r->put, 2, r->count);
    sqlite3_bind_text(r->put, 3, r->text, -1, SQLITE_TRANSIENT);
    int rc = sqlite3_step(r->put) == SQLITE_DONE ? 0 : -1;
    sqlite3_reset(r->put);
    r->first += r->count;
    r->count = 0;
    r->len = 0;
    return rc;
}

// One element (a site's array, or null) into the row under way.
static int put_site_element(site_rows *r, const char *element) {
    r->len += (size_t)snprintf(r->text + r->len, sizeof r->text - r->len, "%s%s", r->count ? "," : "[", element);
    return ++r->count == r->per_chunk ? put_site_row(r) : 0;
}

// The rows of `select` (ncols columns) in db turned into chunk rows (insert:
// first, count, text) of per_chunk elements each, each row an array (NULL
// as null), with a null element (a number with no row) before every third
// row if `gaps`.
static int chunk_rows(sqlite3 *db, const char *insert, const char *select, int ncols, bool gaps, int per_chunk) {
    sqlite3_stmt *st = NULL;
    site_rows r = {.first = 1, .per_chunk = per_chunk};
    if (sqlite3_prepare_v2(db, insert, -1, &r.put, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(db, select, -1, &st, NULL) != SQLITE_OK) {
        sqlite3_finalize(r.put);
        return -1;
    }
    int rc = 0, step;
    for (int64_t seen = 0; rc == 0 && (step = sqlite3_step(st)) == SQLITE_ROW; seen++) {
        char row[512];
        size_t n = 0;
        for (int i = 0; i < ncols; i++)
            n += sqlite3_column_type(st, i) == SQLITE_NULL
                     ? (size_t)snprintf(row + n, sizeof row - n, "%snull", i ? "," : "[")
                     : (size_t)snprintf(row + n, sizeof row - n, "%s%lld", i ? "," : "[",
                                        (long long)sqlite3_column_int64(st, i));
        snprintf(row + n, sizeof row - n, "]");
        if (gaps && seen % 3 == 2)
            rc = put_site_element(&r, "null");
        if (rc == 0)
            rc = put_site_element(&r, row);
    }
    if (rc == 0 && step != SQLITE_DONE)
        rc = -1;
    if (rc == 0)
        rc = put_site_row(&r);
    sqlite3_finalize(st);
    sqlite3_finalize(r.put);
    return rc;
}

// The sites table of db turned into site_chunks rows of per_chunk elements
// each, a null (a number with no site) before every third site, and the view
// in its place.
static int chunk_sites(sqlite3 *db, int per_chunk) {
    int rc = exec(db, "CREATE TABLE site_chunks(first INTEGER PRIMARY KEY, count INTEGER NOT NULL, sites TEXT NOT NULL)");
    if (rc == 0)
        rc = chunk_rows(db, "INSERT INTO site_chunks VALUES (?1, ?2, ?3)",
                        "SELECT stack_id, kind, alloc_count, alloc_bytes, free_count, freed_bytes, temp_count,"
                        " temp_bytes, peak_count, peak_bytes FROM sites ORDER BY rowid",
                        10, true, per_chunk);
    if (rc == 0)
        rc = exec(db, "DROP TABLE sites");
    return rc == 0 ? exec(db, sites_view_sql) : rc;
}

// The live_blocks table of db turned into live_chunks rows of per_chunk
// blocks each, in address order, and the view in its place.
static int chunk_live(sqlite3 *db, int per_chunk) {
    int rc = exec(db, "CREATE TABLE live_chunks(first INTEGER PRIMARY KEY, count INTEGER NOT NULL, blocks TEXT NOT NULL)");
    if (rc == 0)
        rc = chunk_rows(db, "INSERT INTO live_chunks VALUES (?1, ?2, ?3)",
                        "SELECT address, size, kind, stack_id, tid, time_ns, reachability FROM live_blocks ORDER BY address",
                        7, false, per_chunk);
    if (rc == 0)
        rc = exec(db, "DROP TABLE live_blocks");
    return rc == 0 ? exec(db, live_view_sql) : rc;
}

// The recording at path with its stack_nodes table turned into chunks of at
// most per_chunk consecutive nodes (a gap in the ids starts a new one), and
// the view in its place, and its sites and live blocks likewise
// (chunk_sites, chunk_live): what the schema-6 recorder writes.
static int chunk_recording(const char *path, int per_chunk) {
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    if (sqlite3_open(path, &db) != SQLITE_OK || exec(db, "BEGIN") ||
        exec(db, "CREATE TABLE stack_chunks(first INTEGER PRIMARY KEY, count INTEGER NOT NULL, nodes TEXT NOT NULL)") ||
        sqlite3_prepare_v2(db, "SELECT id, parent, ip FROM stack_nodes ORDER BY id", -1, &st, NULL) != SQLITE_OK) {
        sqlite3_close(db);
        return -1;
    }
    char text[8192];
    size_t len = 0;
    int64_t first = 0, count = 0, last = 0;
    int rc = 0;
    while (rc == 0 && sqlite3_step(st) == SQLITE_ROW) {
        int64_t id = sqlite3_column_int64(st, 0), parent = sqlite3_column_int64(st, 1), ip = sqlite3_column_int64(st, 2);
        if (count && (count == per_chunk || id != last + 1)) {
            snprintf(text + len, sizeof text - len, "]");
            rc = put_chunk(db, first, count, text);
            count = 0;
        }
        if (!count) {
            first = id;
            len = (size_t)snprintf(text, sizeof text, "[");
        }
        len += (size_t)snprintf(text + len, sizeof text - len, count ? "," : "");
        if (parent == id - 1)
            len += (size_t)snprintf(text + len, sizeof text - len, "%lld", (long long)ip);
        else
            len += (size_t)snprintf(text + len, sizeof text - len, "[%lld,%lld]", (long long)parent, (long long)ip);
        count++;
        last = id;
    }
    sqlite3_finalize(st);
    if (rc == 0 && count) {
        snprintf(text + len, sizeof text - len, "]");
        rc = put_chunk(db, first, count, text);
    }
    if (rc == 0)
        rc = exec(db, "DROP TABLE stack_nodes");
    if (rc == 0)
        rc = exec(db, view_sql);
    if (rc == 0)
        rc = chunk_sites(db, per_chunk);
    if (rc == 0)
        rc = chunk_live(db, per_chunk);
    if (rc == 0)
        rc = exec(db, "UPDATE meta SET value = '6' WHERE key = 'schema_version'; COMMIT");
    sqlite3_close(db);
    return rc;
}

// stdout of `tpprof report DB args...` past its first line (which names the file).
static char *report_body(const char *db, const char *a1, const char *a2) {
    run_result r = harness_tpprof("report", db, a1, a2, NULL);
    CHECK(r.status == 0, "report %s: status %d: %s", db, r.status, r.err);
    const char *nl = strchr(r.out, '\n');
    char *body = strdup(nl ? nl + 1 : "");
    harness_result_free(&r);
    return body;
}

// The rows of query a in file a (the table) are those of query b in file b (through the view), more than three.
static void expect_same_rows(const char *a, const char *query_a, const char *b, const char *query_b) {
    char *want = harness_db_rows(a, query_a), *got = harness_db_rows(b, query_b);
    CHECK(want && got && harness_lines(want) > 3 && strcmp(want, got) == 0, "%s: want:\n%s\ngot:\n%s", query_b, want,
          got);
    free(want);
    free(got);
}

static void test_chunked_recording_reports_as_its_table_did(void) {
    char *want, *got;
    const char *t = harness_path("table.db");
    CHECK(fixture_write(t, &(fixture_options){0}) == 0, "fixture");
    char *table = strdup(t);
    const char *c = harness_path("chunked.db");
    CHECK(fixture_write(c, &(fixture_options){0}) == 0 && chunk_recording(c, 2) == 0, "chunked fixture");
    char *rows = harness_db_rows(c, "SELECT COUNT(*) > 3, SUM(instr(substr(nodes, 2), '[') > 0) > 0 FROM stack_chunks");
    CHECK(rows && strcmp(rows, "1|1\n") == 0, "several chunks, some with [parent, ip]: %s", rows);
    free(rows);
    rows = harness_db_rows(c, "SELECT COUNT(*) > 2, SUM(instr(sites, 'null') > 0) > 0 FROM site_chunks");
    CHECK(rows && strcmp(rows, "1|1\n") == 0, "several site chunks, some with a null: %s", rows);
    free(rows);
    expect_same_rows(table, "SELECT * FROM sites ORDER BY rowid", c, "SELECT * FROM sites");
    rows = harness_db_rows(c, "SELECT COUNT(*) > 1 FROM live_chunks");
    CHECK(rows && strcmp(rows, "1\n") == 0, "several live chunks: %s", rows);
    free(rows);
    expect_same_rows(table, "SELECT * FROM live_blocks ORDER BY address", c, "SELECT * FROM live_blocks");
    want = report_body(table, "--leaks", NULL);
    got = report_body(c, "--leaks", NULL);
    CHECK(strstr(want, "grow_leak") == NULL && strstr(want, "map_arena (arena.c:30)"), "%s", want);
    CHECK(strcmp(want, got) == 0, "want:\n%s\ngot:\n%s", want, got);
    free(want);
    free(got);
    want = report_body(table, "--format", "json");
    got = report_body(c, "--format", "json");
    // (From the program on: what is before names the file.)
    const char *w = strstr(want, "\"program\""), *g = strstr(got, "\"program\"");
    CHECK(w && g && strcmp(w, g) == 0, "json: want:\n%s\ngot:\n%s", want, got);
    free(want);
    free(got);
    free(table);
}

static void test_stack_nodes_view_reads_the_rows_of_the_table(void) {
    const char *t = harness_path("view-table.db");
    CHECK(fixture_write(t, &(fixture_options){0}) == 0, "fixture");
    char *want = harness_db_rows(t, "SELECT id, parent, ip FROM stack_nodes ORDER BY id");
    const char *c = harness_path("view-chunked.db");
    CHECK(fixture_write(c, &(fixture_options){0}) == 0 && chunk_recording(c, 3) == 0, "chunked fixture");
    char *got = harness_db_rows(c, "SELECT id, parent, ip FROM stack_nodes ORDER BY id");
    CHECK(want && got && harness_lines(want) > 5 && strcmp(want, got) == 0, "want:\n%s\ngot:\n%s", want, got);
    free(want);
    free(got);
    // A walk from a leaf to the root, as a script would do it.
    got = harness_db_rows(c, "WITH RECURSIVE up(id) AS (SELECT MAX(id) FROM stack_nodes UNION ALL"
                   " SELECT n.parent FROM stack_nodes n JOIN up ON n.id = up.id WHERE n.parent != 0)"
                   " SELECT COUNT(*) > 1 FROM up");
    CHECK(got && strcmp(got, "1\n") == 0, "%s", got);
    free(got);
}

static void test_chunked_recording_is_symbolized_from_its_chunks(void) {
    const char *db = harness_path("self-chunked.db");
    int lines[3] = {0};
    CHECK(fixture_write_self(db, false, lines) == 0 && chunk_recording(db, 1) == 0, "fixture");
    run_result r = harness_tpprof("report", db, "--leaks", NULL);
    CHECK(r.status == 0, "status %d: %s", r.status, r.err);
    char want[256];
    snprintf(want, sizeof want,
             "      fixture_inlined (fixture.c:%d)\n      fixture_leaker (fixture.c:%d)\n"
             "      fixture_outer (fixture.c:%d)\n",
             lines[0], lines[2], lines[1]);
    CHECK(strstr(r.out, want), "want:\n%s\ngot:\n%s", want, r.out);
    harness_result_free(&r);
    CHECK(harness_db_int(db, "SELECT COUNT(*) FROM symbols") == 3, "symbols saved");
}

static void test_merge_reads_chunked_and_table_inputs(void) {
    const char *t = harness_path("m-table.db");
    CHECK(fixture_write(t, &(fixture_options){0}) == 0, "fixture");
    char *table = strdup(t);
    const char *c = harness_path("m-chunked.db");
    CHECK(fixture_write(c, &(fixture_options){.extra_lost_bytes = 1048576}) == 0 && chunk_recording(c, 2) == 0,
          "chunked fixture");
    char *chunked = strdup(c);
    const char *out = harness_path("m-job.db");
    run_result r = harness_tpprof("merge", out, table, chunked, NULL);
    CHECK(r.status == 0, "status %d: %s", r.status, r.err);
    harness_result_free(&r);
    r = harness_tpprof("report", out, "--leaks", NULL);
    CHECK(r.status == 0, "status %d: %s", r.status, r.err);
    CHECK(strstr(r.out, "verdict     LEAK: 1.02 MiB lost in 5 blocks"), "%s", r.out);
    CHECK(strstr(r.out, "1.00 MiB in      1 block   lost       malloc\n      grow_leak (grow.c:70)"),
          "the chunked input's own stack, by name:\n%s", r.out);
    harness_result_free(&r);
    // The stacks both have are stored once: the table input's nodes, and
    // the chunked input's innermost libtpprof.so frame (a module without a
    // build id: each process's own).
    long long nodes = harness_db_int(table, "SELECT COUNT(*) FROM stack_nodes") + 1;
    CHECK(harness_db_int(out, "SELECT COUNT(*) FROM stack_nodes") == nodes, "every stack of both once: %lld", nodes);
    // Both inputs' sites, the chunked one's read from its chunks.
    const char *sum = "SELECT SUM(alloc_bytes) * 1000 + SUM(alloc_count) FROM sites";
    long long a = harness_db_int(table, sum), b = harness_db_int(chunked, sum), got = harness_db_int(out, sum);
    CHECK(b > 0 && got == a + b, "merged sites %lld = %lld + %lld", got, a, b);
    CHECK(harness_db_int(out, "SELECT COUNT(*) FROM sites WHERE process = 2") ==
              harness_db_int(chunked, "SELECT COUNT(*) FROM sites"),
          "the chunked input's sites, each once");
    // Kept in chunks itself (schema 5, live blocks 6), its views the tables they were.
    CHECK(harness_db_int(out, "SELECT COUNT(*) FROM sqlite_master WHERE type = 'view' AND name IN ('sites',"
                              " 'stack_nodes', 'live_blocks')") == 3 &&
              harness_db_int(out, "SELECT COUNT(*) FROM site_chunks") > 0 &&
              harness_db_int(out, "SELECT COUNT(*) FROM stack_chunks") > 0 &&
              harness_db_int(out, "SELECT COUNT(*) FROM live_chunks") > 0,
          "the merged recording's nodes, sites and live blocks in chunks");
    // Both inputs' live blocks, the chunked one's read from its chunks, each with its process.
    const char *live = "SELECT SUM(size) * 1000 + COUNT(*) FROM live_blocks";
    a = harness_db_int(table, live);
    b = harness_db_int(chunked, live);
    got = harness_db_int(out, live);
    CHECK(b > 0 && got == a + b, "merged live blocks %lld = %lld + %lld", got, a, b);
    CHECK(harness_db_int(out, "SELECT COUNT(*) FROM live_blocks WHERE process = 2") ==
              harness_db_int(chunked, "SELECT COUNT(*) FROM live_blocks"),
          "the chunked input's blocks, each once");
    CHECK(harness_db_int(out, "SELECT COUNT(*) FROM (SELECT process, stack_id, kind FROM sites GROUP BY 1, 2, 3)") ==
              harness_db_int(out, "SELECT COUNT(*) FROM sites"),
          "one row per (process, stack_id, kind)");
    CHECK(harness_db_int(out, "SELECT COUNT(*) FROM stack_nodes WHERE ip >> 48 NOT IN (1, 2) OR parent >= id") == 0,
          "each node's ip tagged with its input, its parent before it");
    free(table);
    free(chunked);
}

// A merged recording's site elements (schema 5): totals an input lacked
// null, and the process eleventh; its nodes' ips past 2^63 negative (inputs
// from 32,768 on). Read as the views read them.
static void test_merged_chunk_elements_are_read(void) {
    const char *p = harness_path("merged-elements.db");
    CHECK(fixture_write(p, &(fixture_options){0}) == 0 && chunk_recording(p, 4) == 0, "fixture");
    run_result before = harness_tpprof("report", p, "--top", "20", NULL);
    sqlite3 *db = NULL;
    CHECK(sqlite3_open(p, &db) == SQLITE_OK, "open");
    // Every site gets a process: the same report.
    CHECK(exec(db, "UPDATE site_chunks SET sites = (SELECT json_group_array(CASE j.type WHEN 'array' THEN"
                   " json_insert(j.value, '$[#]', 3) ELSE NULL END) FROM json_each(site_chunks.sites) j)") == 0,
          "processes added");
    // A node of input 32,769 (its tag's top bit set).
    CHECK(exec(db, "INSERT INTO stack_chunks SELECT MAX(first + count), 1, '[[1,' || ((32769 << 48) | 4096) || ']]'"
                   " FROM stack_chunks") == 0,
          "a negative ip");
    sqlite3_close(db);
    run_result after = harness_tpprof("report", p, "--top", "20", NULL);
    CHECK(before.status == 0 && after.status == 0, "status %d, %d: %s", before.status, after.status, after.err);
    const char *a = strchr(before.out, '\n'), *b = strchr(after.out, '\n'); // (past the file's name)
    CHECK(a && b && strcmp(a, b) == 0, "the same report:\n%s\n---\n%s", before.out, after.out);
    harness_result_free(&before);
    harness_result_free(&after);
    CHECK(harness_db_int(p, "SELECT COUNT(*) FROM stack_nodes WHERE ip < 0") == 1, "the view reads it negative too");
    // Totals null: absent, as a table's NULL is (a site of 3 calls, all
    // its other totals unknown, adds 3 calls and no bytes).
    CHECK(sqlite3_open(p, &db) == SQLITE_OK &&
              exec(db, "INSERT INTO site_chunks SELECT MAX(first + count), 1,"
                       " '[[1,1,3,null,null,null,null,null,null,null,3]]' FROM site_chunks") == 0,
          "null totals");
    sqlite3_close(db);
    run_result r = harness_tpprof("report", p, "--format", "json", NULL);
    CHECK(r.status == 0, "status %d: %s", r.status, r.err);
    harness_result_free(&r);
    CHECK(harness_db_int(p, "SELECT COUNT(*) FROM sites WHERE alloc_bytes IS NULL AND alloc_count = 3") == 1,
          "the view reads nulls");
}

// Each damage (an UPDATE) done to a chunked fixture of its own: report and
// check say `said` (which row is damaged) in one line and exit 2.
static void expect_damaged(const char *const *damage, size_t n, const char *said) {
    static int k;
    for (size_t i = 0; i < n; i++) {
        char name[32];
        snprintf(name, sizeof name, "damaged%d.db", k++);
        const char *p = harness_path(name);
        CHECK(fixture_write(p, &(fixture_options){0}) == 0 && chunk_recording(p, 4) == 0, "fixture");
        sqlite3 *db = NULL;
        CHECK(sqlite3_open(p, &db) == SQLITE_OK && exec(db, damage[i]) == 0, "%s", damage[i]);
        sqlite3_close(db);
        harness_expect_usage_error(damage[i], harness_tpprof("report", p, NULL), said);
        harness_expect_usage_error(damage[i], harness_tpprof("check", p, NULL), said);
    }
}

static void test_damaged_chunk_is_one_line_and_exit_2(void) {
    static const char *const nodes[] = {
        "UPDATE stack_chunks SET nodes = substr(nodes, 1, length(nodes) - 1) WHERE first = 1", // unterminated
        "UPDATE stack_chunks SET count = count + 1 WHERE first = 1",                          // too few nodes
        "UPDATE stack_chunks SET nodes = '[1,\"x\"]', count = 2 WHERE first = 1",              // not a number
        "UPDATE stack_chunks SET nodes = '[[1,2,3]]', count = 1 WHERE first = 1",              // not a pair
        "UPDATE stack_chunks SET nodes = '[99999999999999999999]', count = 1 WHERE first = 1", // past 64 bits
    };
    expect_damaged(nodes, sizeof nodes / sizeof *nodes, "stack_chunks row 1 is damaged");
    static const char *const sites[] = {
        "UPDATE site_chunks SET sites = substr(sites, 1, length(sites) - 1) WHERE first = 1", // unterminated
        "UPDATE site_chunks SET count = count + 1 WHERE first = 1",                          // too few sites
        "UPDATE site_chunks SET sites = '[[1,1,2,3,4,5,6,7,8]]', count = 1 WHERE first = 1", // nine values
        "UPDATE site_chunks SET sites = '[[1,1,2,3,4,5,6,7,8,\"x\"]]', count = 1 WHERE first = 1", // not a number
        "UPDATE site_chunks SET sites = '[nul]', count = 1 WHERE first = 1",                  // not null
        "UPDATE site_chunks SET sites = '[[1,1,2,3,4,5,6,7,8,9,1,2]]', count = 1 WHERE first = 1", // twelve values
        "UPDATE site_chunks SET sites = '[[null,1,2,3,4,5,6,7,8,9]]', count = 1 WHERE first = 1",  // no stack
        "UPDATE site_chunks SET sites = '[[1,null,2,3,4,5,6,7,8,9]]', count = 1 WHERE first = 1",  // no kind
        "UPDATE site_chunks SET sites = '[[1,1,2,3,4,5,6,7,8,9,null]]', count = 1 WHERE first = 1", // no process
    };
    expect_damaged(sites, sizeof sites / sizeof *sites, "site_chunks row 1 is damaged");
    static const char *const live[] = {
        "UPDATE live_chunks SET blocks = substr(blocks, 1, length(blocks) - 1) WHERE first = 1", // unterminated
        "UPDATE live_chunks SET count = count + 1 WHERE first = 1",                            // too few blocks
        "UPDATE live_chunks SET blocks = '[[65536,64,1,2,1,10]]', count = 1 WHERE first = 1",   // six values
        "UPDATE live_chunks SET blocks = '[[65536,64,1,2,1,10,1,1,1]]', count = 1 WHERE first = 1", // nine values
        "UPDATE live_chunks SET blocks = '[[65536,64,1,2,1,10,1,null]]', count = 1 WHERE first = 1", // no process
        "UPDATE live_chunks SET blocks = '[[65536,\"x\",1,2,1,10,1]]', count = 1 WHERE first = 1", // not a number
        "UPDATE live_chunks SET blocks = '[[65536,64,1,null,1,10,1]]', count = 1 WHERE first = 1", // no stack
        "UPDATE live_chunks SET blocks = '[null]', count = 1 WHERE first = 1",                   // not a block
    };
    expect_damaged(live, sizeof live / sizeof *live, "live_chunks row 1 is damaged");
}

// A real recording: the writer's chunks, read by the viewer and through the
// views (the copy whose views are made tables) give the same report.
static const char *python;

static void test_python_run_reads_the_same_through_the_view(void) {
    const char *p = harness_path("py.db");
    char *db = strdup(p);
    run_result r = harness_tpprof("run", "-o", db, "--", python, "-c",
                                  "import json\nkeep = [json.dumps({'k': [i] * (i % 7)}) for i in range(20000)]\n"
                                  "def grow(n):\n    return [str(i) * 3 for i in range(n)] if n < 2 else grow(n - 1)\n"
                                  "keep += [grow(n) for n in range(60)]\n"
                                  "import ctypes\nc = ctypes.CDLL(None)\nc.malloc.restype = ctypes.c_void_p\n"
                                  "held = [c.malloc(100 + i) for i in range(1000)]\n",
                                  NULL);
    CHECK(r.status == 0, "run: status %d: %s", r.status, r.err);
    harness_result_free(&r);
    CHECK(harness_db_int(db, "SELECT COUNT(*) FROM stack_chunks") > 1, "several chunks");
    long long n = harness_db_int(db, "SELECT SUM(count) FROM stack_chunks");
    CHECK(n > 8192 && harness_db_int(db, "SELECT COUNT(*) FROM stack_nodes") == n &&
              harness_db_int(db, "SELECT MAX(id) FROM stack_nodes") == n,
          "ids 1..%lld, each once through the view", n);
    CHECK(harness_db_int(db, "SELECT COUNT(*) FROM stack_nodes WHERE parent >= id") == 0, "parents come first");
    // sites has no key on (stack_id, kind) since schema 3: the writer keeps each pair once.
    CHECK(harness_db_int(db, "SELECT COUNT(*) FROM sites") > 1000 &&
              harness_db_int(db, "SELECT COUNT(*) - COUNT(DISTINCT stack_id || ',' || kind) FROM sites") == 0,
          "one row per site");
    // Site chunks are whole: 256 numbers from 1 + 256 k, the last one
    // shorter; every number is a site or null, up to the last site.
    CHECK(harness_db_int(db, "SELECT COUNT(*) FROM site_chunks") > 1, "several site chunks");
    CHECK(harness_db_int(db, "SELECT COUNT(*) FROM site_chunks WHERE (first - 1) % 256 != 0 OR count > 256"
                             " OR count != json_array_length(sites) OR (count < 256 AND first < (SELECT MAX(first)"
                             " FROM site_chunks))") == 0,
          "chunks of 256 from 1 + 256 k");
    // Live blocks: chunks of 256 numbered from 1, in address order, one
    // element an address.
    CHECK(harness_db_int(db, "SELECT COUNT(*) FROM live_chunks") > 1, "several live chunks");
    CHECK(harness_db_int(db, "SELECT COUNT(*) FROM live_chunks WHERE (first - 1) % 256 != 0 OR count > 256"
                             " OR count != json_array_length(blocks) OR (count < 256 AND first < (SELECT MAX(first)"
                             " FROM live_chunks))") == 0,
          "live chunks of 256 from 1 + 256 k");
    CHECK(harness_db_int(db, "SELECT COUNT(*) FROM live_blocks") == harness_db_int(db, "SELECT SUM(count) FROM live_chunks") &&
              harness_db_int(db, "SELECT COUNT(*) - COUNT(DISTINCT address) FROM live_blocks") == 0,
          "one block an address");
    CHECK(harness_db_int(db, "SELECT COUNT(*) FROM (SELECT j.value ->> 0 AS address, LAG(j.value ->> 0) OVER (ORDER BY"
                             " c.first, j.key) AS before FROM live_chunks c, json_each(c.blocks) j) WHERE before >= address") == 0,
          "in address order");
    // The copy: the file itself, its view replaced by the table read through it.
    const char *t = harness_path("py-table.db");
    char *copy = strdup(t);
    char cmd[8400];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", db, copy);
    CHECK(system(cmd) == 0, "%s", cmd);
    sqlite3 *h = NULL;
    CHECK(sqlite3_open(copy, &h) == SQLITE_OK &&
              exec(h, "BEGIN; CREATE TABLE n AS SELECT id, parent, ip FROM stack_nodes; DROP VIEW stack_nodes;"
                      " DROP TABLE stack_chunks; CREATE TABLE stack_nodes(id INTEGER PRIMARY KEY, parent INTEGER NOT NULL,"
                      " ip INTEGER NOT NULL); INSERT INTO stack_nodes SELECT * FROM n ORDER BY id; DROP TABLE n;"
                      " CREATE TABLE s AS SELECT * FROM sites; DROP VIEW sites; DROP TABLE site_chunks;"
                      " ALTER TABLE s RENAME TO sites; CREATE TABLE l AS SELECT * FROM live_blocks; DROP VIEW live_blocks;"
                      " DROP TABLE live_chunks; ALTER TABLE l RENAME TO live_blocks; COMMIT") == 0,
          "views made tables");
    sqlite3_close(h);
    char *want = report_body(copy, "--top", "0"), *got = report_body(db, "--top", "0");
    CHECK(harness_lines(got) > 20, "sites listed: %s", got);
    CHECK(strcmp(want, got) == 0, "want:\n%s\ngot:\n%s", want, got);
    free(want);
    free(got);
    free(copy);
    free(db);
}

int main(int argc, char **argv) {
    harness_init(argc, argv);
    if (argc > 2) { // suite 'preload': the real writer's recording
        python = argv[2];
        RUN_TEST(test_python_run_reads_the_same_through_the_view);
        return harness_finish();
    }
    RUN_TEST(test_chunked_recording_reports_as_its_table_did);
    RUN_TEST(test_stack_nodes_view_reads_the_rows_of_the_table);
    RUN_TEST(test_chunked_recording_is_symbolized_from_its_chunks);
    RUN_TEST(test_merge_reads_chunked_and_table_inputs);
    RUN_TEST(test_merged_chunk_elements_are_read);
    RUN_TEST(test_damaged_chunk_is_one_line_and_exit_2);
    return harness_finish();
}
