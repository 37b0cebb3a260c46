// spawn.c: a scenario of the preload suite (tests/tpprof/meson.build gives
// each mode its test; harness.h runs the program under libtpprof.so).
// Modes: spawn, spawnp.
#include "harness.h"

// A child started with posix_spawn and a clean environment (progs/spawner.c,
// `how` "spawn" or "spawnp") is recorded into its own database.
static void test_spawn(char *prog, const char *how) {
    char out[600];
    db_path(out, sizeof out, "spawn.db");
    char *argv[] = {prog, strcmp(how, "spawnp") == 0 ? "spawnp" : "spawn", NULL};
    struct result r = run(out, argv, NULL);
    CHECK_MSG(r.status == 0, "exit status %d: %s", r.status, r.err);
    const char *c = strstr(r.out, "child=");
    int child = c ? atoi(c + 6) : 0;
    if (!open_child_db("spawn", child, "spawned child")) return;
    CHECK_MSG(count_blocks(1, 321, 1, "spawn_child_leak", 0) + count_blocks(2, 321, 1, "spawn_child_leak", 0) == 1,
          "the child's leak");
}

int preload_scenario(const char *mode, char *prog, char *extra) {
    (void)extra;
    if (strcmp(mode, "spawn") == 0 || strcmp(mode, "spawnp") == 0) test_spawn(prog, mode);
    else return -1;
    return check_failures;
}
