// test_usage.c: `tpprof --help`, `tpprof <cmd> --help`, `tpprof --version`
// and a bare `tpprof`: help goes to stdout with status 0; a bare call is a
// usage error (status 2, usage on stderr).
#include "harness.h"

#include <stdio.h>
#include <string.h>

static void test_help_lists_every_command(void) {
    run_result r = harness_tpprof("--help", NULL);
    CHECK(r.status == 0, "status %d", r.status);
    CHECK(strstr(r.out, "usage: tpprof <command>"), "%s", r.out);
    CHECK(strstr(r.out, "  run [-o PATH]") && strstr(r.out, "  report DB") &&
              strstr(r.out, "  check DB"),
          "%s", r.out);
    CHECK(r.err[0] == 0, "%s", r.err);
    harness_result_free(&r);
}

static void test_each_command_has_its_own_help(void) {
    const char *cmds[] = {"run", "report", "check"};
    const char *marks[] = {"--depth N", "--temporary", "--max-growth PCT"};
    for (int i = 0; i < 3; i++) {
        run_result r = harness_tpprof(cmds[i], "--help", NULL);
        CHECK(r.status == 0, "%s --help: status %d", cmds[i], r.status);
        CHECK(strstr(r.out, "usage: tpprof ") && strstr(r.out, marks[i]), "%s --help:\n%s",
              cmds[i], r.out);
        harness_result_free(&r);
    }
}

static void test_help_wins_over_other_arguments(void) {
    run_result r = harness_tpprof("check", "missing.db", "--help", NULL);
    CHECK(r.status == 0 && strstr(r.out, "usage: tpprof check"), "status %d: %s", r.status, r.out);
    harness_result_free(&r);
}

static void test_version_names_tool_and_schema(void) {
    run_result r = harness_tpprof("--version", NULL);
    CHECK(r.status == 0, "status %d", r.status);
    char schema[64];
    snprintf(schema, sizeof schema, "(database schema %d)\n", TPPROF_SCHEMA_VERSION);
    CHECK(strncmp(r.out, "tpprof ", 7) == 0 && strstr(r.out, schema), "%s", r.out);
    harness_result_free(&r);
}

static void test_no_command_is_a_usage_error(void) {
    run_result r = harness_tpprof(NULL);
    CHECK(r.status == 2, "status %d", r.status);
    CHECK(r.out[0] == 0 && strstr(r.err, "usage: tpprof <command>"), "out: %s err: %s", r.out, r.err);
    harness_result_free(&r);
}

int main(int argc, char **argv) {
    harness_init(argc, argv);
    RUN_TEST(test_help_lists_every_command);
    RUN_TEST(test_each_command_has_its_own_help);
    RUN_TEST(test_help_wins_over_other_arguments);
    RUN_TEST(test_version_names_tool_and_schema);
    RUN_TEST(test_no_command_is_a_usage_error);
    return harness_finish();
}
