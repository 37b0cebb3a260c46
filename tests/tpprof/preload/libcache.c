// libcache.c: a scenario of the preload suite (tests/tpprof/meson.build gives
// each mode its test; harness.h runs the program under libtpprof.so).
// Mode: libcache.
#include "harness.h"

// What the C library keeps (NSS, the loader, the time zone) is
// reachability 3; the program's own blocks are reachable or lost as ever,
// one held only by the C library (on_exit's argument) included.
static void test_libcache(char *prog) {
    char *argv[] = {prog, NULL};
    struct result r;
    if (!record("libcache.db", argv, NULL, &r)) return;
    CHECK_MSG(strncmp(r.out, "libcache ok", 11) == 0, "stdout '%s'", r.out);
    CHECK_MSG(count_blocks(2, 12, 1, "libcache_keep", 1) == 1, "the kept strdup is reachable (%d)",
          count_blocks(2, 12, 1, "libcache_keep", 1));
    CHECK_MSG(count_blocks(1, 15, 1, "libcache_drop", 1) == 1, "the dropped strdup is lost (%d)",
          count_blocks(1, 15, 1, "libcache_drop", 1));
    CHECK_MSG(count_blocks(2, 777, 1, "libcache_arg", 0) == 1, "on_exit's argument is the program's, reachable (3: %d)",
          count_blocks(3, 777, 1, "libcache_arg", 0));
    // getpwuid's buffer, at least, is the C library's.
    CHECK_MSG(count_blocks(3, -1, -1, "getpwuid", 0) >= 1, "getpwuid's buffer is the C library's (reachable: %d)",
          count_blocks(2, -1, -1, "getpwuid", 0));
    CHECK_MSG(qi("SELECT count(*) FROM live_blocks WHERE reachability = 2") == 2, "nothing else is reachable: %lld",
          (long long)qi("SELECT count(*) FROM live_blocks WHERE reachability = 2"));
    CHECK_MSG(qi("SELECT count(*) FROM live_blocks WHERE reachability = 1") == 1, "nothing else is lost");
}

int preload_scenario(const char *mode, char *prog, char *extra) {
    (void)extra;
    if (strcmp(mode, "libcache") == 0) test_libcache(prog);
    else return -1;
    return check_failures;
}
