// streams.c: a scenario of the preload suite (tests/tpprof/meson.build gives
// each mode its test; harness.h runs the program under libtpprof.so).
// Mode: streams.
#include "harness.h"

// Streams open at exit: their stdio buffers are the C library's
// (reachability 3), the unclosed stream's FILE and a buffer the program
// handed to setvbuf are the program's (reachable); a closed stream leaves
// nothing.
static void test_streams(char *prog) {
    char *argv[] = {prog, ".", NULL};
    struct result r;
    if (!record("streams.db", argv, NULL, &r)) return;
    CHECK_MSG(strcmp(r.out, "streams ok\n") == 0, "stdout '%s'", r.out);
    // stdout's and the kept file's buffers, allocated in _IO_file_doallocate.
    CHECK_MSG(count_blocks(3, -1, 1, "_IO_file_doallocate", 0) == 2, "2 stdio buffers (%d), none reachable (%d)",
          count_blocks(3, -1, 1, "_IO_file_doallocate", 0), count_blocks(2, -1, 1, "_IO_file_doallocate", 0));
    CHECK_MSG(qi("SELECT count(*) FROM live_blocks WHERE reachability = 3") == 2, "nothing else is a stdio buffer");
    // The kept stream's FILE, at fopen, called from streams_open.
    int files = 0;
    for (int frame = 1; frame < 4; frame++) files += count_blocks(2, -1, 1, "streams_open", frame);
    CHECK_MSG(files == 1, "the unclosed stream's FILE is reachable at streams_open (%d)", files);
    CHECK_MSG(count_blocks(2, 3000, 1, "streams_own", 0) == 1, "the program's own stream buffer is reachable (lost %d)",
          count_blocks(1, 3000, 1, "streams_own", 0));
    CHECK_MSG(qi("SELECT count(*) FROM live_blocks WHERE reachability = 1") == 0, "nothing is lost");
}

int preload_scenario(const char *mode, char *prog, char *extra) {
    (void)extra;
    if (strcmp(mode, "streams") == 0) test_streams(prog);
    else return -1;
    return check_failures;
}
