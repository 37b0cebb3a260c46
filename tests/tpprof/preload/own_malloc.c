// own_malloc.c: a scenario of the preload suite (tests/tpprof/meson.build gives
// each mode its test; harness.h runs the program under libtpprof.so).
// Mode: ownmalloc.
#include "harness.h"

// A program with its own malloc (progs/ownmalloc.c): nothing of it is
// recorded, and meta.malloc_replaced_by names the executable.
static void test_own_malloc(char *prog) {
    char *argv[] = {prog, NULL};
    struct result r;
    if (!record("ownmalloc.db", argv, NULL, &r)) return;
    CHECK_MSG(strcmp(r.out, "ownmalloc done\n") == 0, "stdout '%s'", r.out);
    char v[600];
    qs(v, sizeof v, "SELECT coalesce((SELECT value FROM meta WHERE key = 'malloc_replaced_by'), '')");
    CHECK_MSG(strcmp(v, prog) == 0, "meta.malloc_replaced_by '%s', want '%s'", v, prog);
}

int preload_scenario(const char *mode, char *prog, char *extra) {
    (void)extra;
    if (strcmp(mode, "ownmalloc") == 0) test_own_malloc(prog);
    else return -1;
    return check_failures;
}
