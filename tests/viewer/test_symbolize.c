// test_symbolize.c: tpprof symbolizes a recording whose `symbols` table is
// empty, with libdw, from real return addresses into this very executable:
// function, file and line; kept in memory for a read-only file, saved into a
// writable one; and refused (left as addresses) when the build-id differs.
#define _GNU_SOURCE
#include "fixture.h"
#include "harness.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

static long long count_symbols(const char *path) {
    sqlite3 *db = NULL;
    long long n = -1;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK) {
        sqlite3_stmt *st = NULL;
        if (sqlite3_prepare_v2(db, "SELECT COUNT(*) FROM symbols", -1, &st, NULL) == SQLITE_OK &&
            sqlite3_step(st) == SQLITE_ROW)
            n = sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
    }
    sqlite3_close(db);
    return n;
}

static void test_frames_resolve_to_function_file_and_line(void) {
    const char *db = harness_path("self.db");
    int lines[3] = {0};
    CHECK(fixture_write_self(db, false, lines) == 0, "fixture");
    CHECK(count_symbols(db) == 0, "starts unsymbolized");
    run_result r = harness_tpprof("report", db, "--leaks", NULL);
    CHECK(r.status == 0, "status %d: %s", r.status, r.err);
    char want[256];
    snprintf(want, sizeof want,
             "      fixture_inlined (fixture.c:%d)\n      fixture_leaker (fixture.c:%d)\n"
             "      fixture_outer (fixture.c:%d)\n",
             lines[0], lines[2], lines[1]);
    CHECK(strstr(r.out, want), "want:\n%s\ngot:\n%s", want, r.out);
    CHECK(strstr(r.out, "symbols     resolved now and saved into the database"), "%s", r.out);
    CHECK(r.err[0] == 0, "no warnings: %s", r.err);
    harness_result_free(&r);
    CHECK(count_symbols(db) == 3, "inlined + containing + outer saved: %lld", count_symbols(db));

    // The second report reads the saved symbols.
    r = harness_tpprof("report", db, "--leaks", "--format", "json", NULL);
    CHECK(r.status == 0, "status %d", r.status);
    snprintf(want, sizeof want, "\"function\": \"fixture_inlined\", \"file\": ");
    CHECK(strstr(r.out, want), "%s", r.out);
    snprintf(want, sizeof want, "fixture.c\", \"line\": %d, \"module\": \"/", lines[2]);
    CHECK(strstr(r.out, want), "%s", r.out);
    CHECK(!strstr(r.out, "resolved now"), "not symbolized twice");
    harness_result_free(&r);
}

static void test_read_only_file_is_symbolized_in_memory_only(void) {
    const char *db = harness_path("self-ro.db");
    int lines[3] = {0};
    CHECK(fixture_write_self(db, false, lines) == 0, "fixture");
    CHECK(chmod(db, 0444) == 0, "chmod");
    run_result r = harness_tpprof("check", db, NULL);
    CHECK(r.status == 1, "status %d: %s", r.status, r.err);
    char want[128];
    snprintf(want, sizeof want, "FAIL lost bytes 64 > 0: 64 B in fixture_inlined (fixture.c:%d)\n",
             lines[0]);
    CHECK(strcmp(r.out, want) == 0, "want %s got %s", want, r.out);
    harness_result_free(&r);
    // root writes a 0444 file anyway (access(W_OK) succeeds), so only others can check this.
    if (geteuid() != 0)
        CHECK(count_symbols(db) == 0, "read-only file untouched");
}

// A writable file that will not take the symbols (its `symbols` is a view:
// the insert fails): the report is whole, named from memory, and says the
// symbols were not saved.
static void test_symbols_that_cannot_be_saved_stay_in_memory(void) {
    const char *db = harness_path("self-view.db");
    int lines[3] = {0};
    CHECK(fixture_write_self(db, false, lines) == 0, "fixture");
    sqlite3 *h = NULL;
    CHECK(sqlite3_open(db, &h) == SQLITE_OK &&
              sqlite3_exec(h, "DROP TABLE symbols; CREATE VIEW symbols(ip, idx, function, file, line, module) AS"
                              " SELECT 0, 0, NULL, NULL, NULL, NULL WHERE 0", NULL, NULL, NULL) == SQLITE_OK,
          "symbols made a view: %s", sqlite3_errmsg(h));
    sqlite3_close(h);
    for (int i = 0; i < 2; i++) { // (the second report symbolizes again: nothing was saved)
        run_result r = harness_tpprof("report", db, "--leaks", NULL);
        CHECK(r.status == 0, "status %d: %s", r.status, r.err);
        char want[128];
        snprintf(want, sizeof want, "      fixture_inlined (fixture.c:%d)\n", lines[0]);
        CHECK(strstr(r.out, want), "want:\n%s\ngot:\n%s", want, r.out);
        CHECK(strstr(r.out, "symbols     resolved now (kept in memory"), "%s", r.out);
        harness_result_free(&r);
    }
}

static void test_rebuilt_binary_is_not_trusted(void) {
    const char *db = harness_path("self-stale.db");
    int lines[3] = {0};
    CHECK(fixture_write_self(db, true, lines) == 0, "fixture");
    run_result r = harness_tpprof("report", db, "--leaks", NULL);
    CHECK(r.status == 0, "status %d", r.status);
    CHECK(!strstr(r.out, "fixture_"), "no names from a mismatched build:\n%s", r.out);
    CHECK(strstr(r.out, " (test_symbolize)\n"), "address + module instead:\n%s", r.out);
    CHECK(strstr(r.err, "was rebuilt since the recording") && harness_lines(r.err) == 1, "%s", r.err);
    harness_result_free(&r);
}

// A listening socket on 127.0.0.1 (non-blocking); its port in *port.
static int listen_local(int *port) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 16) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    *port = ntohs(a.sin_port);
    return fd;
}

static void test_debuginfod_is_never_asked(void) {
    // A copy of this executable without its DWARF: libdw would look for the
    // debug info elsewhere, and ask debuginfod if it were allowed to.
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    CHECK(n > 0, "readlink");
    if (n <= 0)
        return;
    self[n] = 0;
    const char *stripped = harness_path("stripped");
    char *objcopy[] = {(char *)"/usr/bin/objcopy", (char *)"--strip-debug", self, (char *)stripped, NULL};
    run_result r = harness_run(objcopy, NULL, NULL);
    if (r.status != 0) {
        fprintf(stderr, "(objcopy unavailable: skipped)\n");
        harness_result_free(&r);
        return;
    }
    harness_result_free(&r);
    const char *db = harness_path("stripped.db");
    int lines[3] = {0};
    CHECK(fixture_write_self_as(db, stripped, lines) == 0, "fixture");
    int port = 0;
    int server = listen_local(&port);
    CHECK(server >= 0, "listen");
    if (server < 0)
        return;
    char urls[64], cache[600];
    snprintf(urls, sizeof urls, "DEBUGINFOD_URLS=http://127.0.0.1:%d", port);
    snprintf(cache, sizeof cache, "DEBUGINFOD_CACHE_PATH=%s", harness_path("debuginfod-cache"));
    char *env[] = {urls, cache, NULL};
    char *argv[] = {(char *)harness_tpprof_path(), (char *)"report", (char *)db, (char *)"--leaks", NULL};
    r = harness_run(argv, env, NULL);
    CHECK(r.status == 0, "status %d: %s", r.status, r.err);
    // Names still come from the ELF symbol table, without file and line.
    CHECK(strstr(r.out, "      fixture_leaker (stripped)\n"), "%s", r.out);
    harness_result_free(&r);
    int client = accept(server, NULL, NULL);
    CHECK(client < 0, "tpprof connected to the debuginfod server at %s", urls);
    if (client >= 0)
        close(client);
    close(server);
}

int main(int argc, char **argv) {
    harness_init(argc, argv);
    RUN_TEST(test_frames_resolve_to_function_file_and_line);
    RUN_TEST(test_read_only_file_is_symbolized_in_memory_only);
    RUN_TEST(test_symbols_that_cannot_be_saved_stay_in_memory);
    RUN_TEST(test_rebuilt_binary_is_not_trusted);
    RUN_TEST(test_debuginfod_is_never_asked);
    return harness_finish();
}
