// turns.c: a scenario of the preload suite (tests/tpprof/meson.build gives
// each mode its test; harness.h runs the program under libtpprof.so).
// Modes: turns, turns_full.
#include "harness.h"

// Two threads take turns holding one 2 MiB block (progs/turns.c): the
// threads' records are merged from two rings, yet the peak must be one
// block (plus the few small ones live with it), in both modes.
static void test_turns(char *prog, bool full) {
    char *argv[] = {prog, NULL};
    struct result r;
    if (!record(full ? "turns_full.db" : "turns.db", argv, full ? "TPPROF_MODE=full" : NULL, &r)) return;
    CHECK_MSG(strcmp(r.out, "turns: 1000\n") == 0, "stdout '%s'", r.out);
    int64_t peak = qi("SELECT value FROM meta WHERE key = 'peak_bytes'");
    CHECK_MSG(peak >= 2 << 20 && peak < (2 << 20) + (64 << 10), "peak %lld: one 2 MiB block at a time", (long long)peak);
    CHECK_MSG(qi("SELECT count(*) FROM sites WHERE alloc_bytes >= %d", 2 << 20) == 1 &&
              qi("SELECT alloc_count FROM sites WHERE alloc_bytes >= %d", 2 << 20) == 1000,
          "one site, 1000 big blocks");
    CHECK_MSG(qi("SELECT peak_bytes FROM sites WHERE alloc_bytes >= %d", 2 << 20) == 2 << 20,
          "one big block live at the peak");
}

int preload_scenario(const char *mode, char *prog, char *extra) {
    (void)extra;
    if (strcmp(mode, "turns") == 0) test_turns(prog, false);
    else if (strcmp(mode, "turns_full") == 0) test_turns(prog, true);
    else return -1;
    return check_failures;
}
