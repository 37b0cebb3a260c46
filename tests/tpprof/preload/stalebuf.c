// stalebuf.c: a scenario of the preload suite (tests/tpprof/meson.build gives
// each mode its test; harness.h runs the program under libtpprof.so).
// Mode: stalebuf.
#include "harness.h"

// A stdio buffer is bytes: the stale address of a leaked block that the
// buffer's uncleared chunk still holds does not make the leak reachable.
static void test_stalebuf(char *prog) {
    char *argv[] = {prog, NULL};
    struct result r;
    if (!record("stalebuf.db", argv, "MALLOC_PERTURB_=0", &r)) return;
    long long at = 0;
    CHECK_MSG(sscanf(r.out, "stalebuf %lld", &at) == 1, "stdout '%s'", r.out);
    CHECK_MSG(qi("SELECT count(*) FROM live_blocks WHERE address = %lld AND size = 4096", at) == 1,
          "stdout's buffer took the freed chunk at %lld (else the case shows nothing)", at);
    CHECK_MSG(count_blocks(1, 100000, 1, "stale_target", 0) == 1, "the block is lost (reachable: %d)",
          count_blocks(2, 100000, 1, "stale_target", 0));
}

int preload_scenario(const char *mode, char *prog, char *extra) {
    (void)extra;
    if (strcmp(mode, "stalebuf") == 0) test_stalebuf(prog);
    else return -1;
    return check_failures;
}
