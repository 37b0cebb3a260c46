// test_suppressions.c: `tpprof report --suppressions FILE` with
// LeakSanitizer's format: leak:PATTERN lines match a frame's function, file
// or module (substring, '*', '^' and '$' as compiler-rt's TemplateMatch),
// suppressed groups leave the leak list, the figures and the verdict, each
// rule says what it matched, and a malformed file is one line and exit 2.
#define _POSIX_C_SOURCE 200809L
#include "fixture.h"
#include "harness.h"

#include <stdlib.h>
#include <string.h>

static const char *app_db;

static const char *write_rules(const char *name, const char *text) {
    const char *path = harness_path(name);
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
    return path;
}

static void test_suppressed_leaks_leave_the_list_figures_and_verdict(void) {
    char rules[600];
    snprintf(rules, sizeof rules, "%s",
             write_rules("two.supp", "# known leaks of code we do not own\n"
                                     "leak:map_arena\n"
                                     "\n"
                                     "leak:^leak_on*$   # anchored, with a wildcard\n"
                                     "leak:no_such_function\n"));
    run_result r = harness_tpprof("report", app_db, "--suppressions", rules, "--leaks", NULL);
    CHECK(r.status == 0, "status %d: %s", r.status, r.err);
    CHECK(strstr(r.out, "  verdict     no leak: 0 B lost\n"), "both lost groups suppressed:\n%s", r.out);
    CHECK(strstr(r.out, "  suppressed  leak:map_arena matched 8.00 KiB in 1 block (1 stack)\n"
                        "  suppressed  leak:^leak_on*$ matched 4.00 KiB in 1 block (1 stack)\n"
                        "  suppressed  leak:no_such_function matched 0 B in 0 blocks (0 stacks)\n"),
          "a line per rule:\n%s", r.out);
    CHECK(strstr(r.out, "at exit     200 B in 2 blocks still allocated: lost 0 B in 0, reachable 200 B in 2"), "%s",
          r.out);
    CHECK(!strstr(r.out, "map_arena (arena.c:30)") && strstr(r.out, "make_buffer (buffer.c:20)"),
          "only the reachable group is listed:\n%s", r.out);
    harness_result_free(&r);

    r = harness_tpprof("report", app_db, "--suppressions", rules, "--format", "json", NULL);
    char *j = harness_json_squash(r.out);
    CHECK(j && strstr(j, "\"suppressions\":[{\"pattern\":\"map_arena\",\"bytes\":8192,\"count\":1,\"stacks\":1},"),
          "%s", r.out);
    CHECK(j && strstr(j, "\"lost_bytes\":0,") && strstr(j, "\"verdict\":\"no_leak\""), "%s", r.out);
    free(j);
    harness_result_free(&r);
}

// File and module names match too; an unanchored pattern is a substring.
static void test_patterns_match_files_and_modules_as_lsan_does(void) {
    const char *rules = write_rules("file.supp", "leak:arena.c\nleak:fake/app$\n");
    run_result r = harness_tpprof("report", app_db, "--suppressions", rules, NULL);
    CHECK(strstr(r.out, "leak:arena.c matched 8.00 KiB in 1 block"), "by file:\n%s", r.out);
    CHECK(strstr(r.out, "leak:fake/app$ matched 4.20 KiB in 3 blocks (2 stacks)"), "by module, the rest:\n%s", r.out);
    CHECK(strstr(r.out, "nothing still reachable at exit"), "%s", r.out);
    harness_result_free(&r);
    rules = write_rules("nomatch.supp", "leak:^arena\nleak:map$\nleak:^map_aren$\n");
    r = harness_tpprof("report", app_db, "--suppressions", rules, NULL);
    CHECK(strstr(r.out, "LEAK: 12.0 KiB lost in 2 blocks"), "^arena, map$ and ^map_aren$ match no name whole:\n%s", r.out);
    harness_result_free(&r);
}

static void test_a_malformed_file_is_one_line_and_exit_2(void) {
    const char *rules = write_rules("bad.supp", "leak:ok\nrace:not_a_leak_rule\n");
    harness_expect_usage_error("other type", harness_tpprof("report", app_db, "--suppressions", rules, NULL),
                               "bad.supp:2: expected leak:PATTERN (LeakSanitizer's format), got 'race:not_a_leak_rule'");
    rules = write_rules("empty.supp", "leak:\n");
    harness_expect_usage_error("empty pattern", harness_tpprof("report", app_db, "--suppressions", rules, NULL),
                               "empty.supp:1: expected leak:PATTERN");
    harness_expect_usage_error("missing file",
                               harness_tpprof("report", app_db, "--suppressions", harness_path("none.supp"), NULL),
                               "--suppressions: cannot open");
}

int main(int argc, char **argv) {
    harness_init(argc, argv);
    app_db = fixture_write_copy(harness_path("app.db"), &(fixture_options){0});
    if (!app_db)
        return 1;
    RUN_TEST(test_suppressed_leaks_leave_the_list_figures_and_verdict);
    RUN_TEST(test_patterns_match_files_and_modules_as_lsan_does);
    RUN_TEST(test_a_malformed_file_is_one_line_and_exit_2);
    free((void *)app_db);
    return harness_finish();
}
