// full_file.c: a scenario of the preload suite (tests/tpprof/meson.build gives
// each mode its test; harness.h runs the program under libtpprof.so).
// Mode: fullfile.
#include "harness.h"

// A program that put a data file of its own on descriptor 2 and then made
// the recording's writes fail (progs/fullfile.c, RLIMIT_FSIZE standing in
// for a full disk): tpprof's one line goes to the stderr it started with,
// the program's file holds only what it wrote, and the database still opens
// with what was committed.
static void test_full_file(char *prog) {
    char out[600], data[600];
    db_path(out, sizeof out, "fullfile.db");
    db_path(data, sizeof data, "fullfile.txt");
    char *argv[] = {prog, data, NULL};
    struct result r = run(out, argv, NULL);
    CHECK_MSG(r.status == 0 && strcmp(r.out, "fullfile kept 100000\n") == 0, "status %d, stdout '%s'", r.status, r.out);
    char text[4096];
    slurp(data, text, sizeof text);
    CHECK_MSG(strcmp(text, "the program's own data\n") == 0, "the program's file holds what it wrote: '%s'", text);
    const char *line = strstr(r.err, "tpprof: cannot write");
    CHECK_MSG(line && !strstr(line + 1, "tpprof:"), "one line on the first stderr: '%s'", r.err);
    CHECK_MSG(open_db(out) && qi("SELECT count(*) FROM meta WHERE key = 'tool' AND value = 'tpprof'") == 1,
          "the database opens with what was committed");
}

int preload_scenario(const char *mode, char *prog, char *extra) {
    (void)extra;
    if (strcmp(mode, "fullfile") == 0) test_full_file(prog);
    else return -1;
    return check_failures;
}
