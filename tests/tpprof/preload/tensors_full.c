// tensors_full.c: a scenario of the preload suite (tests/tpprof/meson.build gives
// each mode its test; harness.h runs the program under libtpprof.so).
// Mode: tensors_full.
#include "harness.h"

static void test_tensors_full(char *prog) {
    char *argv[] = {prog, NULL};
    struct result r;
    if (!record_tensors("full_tensors.db", argv, "TPPROF_MODE=full", &r)) return;
    CHECK_MSG(qi("SELECT count(*) FROM storages") == 8, "full mode keeps all 8 storages");
    CHECK_MSG(qi("SELECT count(*) FROM events WHERE op = 10") == 8, "8 storage-created events");
    CHECK_MSG(qi("SELECT count(*) FROM events WHERE op = 11 AND kind = 1") ==
              qi("SELECT sum(count) FROM refcount_sites WHERE op = 1"), "every retain is an event");
    CHECK_MSG(qi("SELECT count(*) FROM events WHERE op = 13") == 6, "6 storages freed");
    // Each storage's data block was allocated before it was created.
    CHECK_MSG(qi("SELECT count(*) FROM storages s WHERE (SELECT max(seq) FROM events e WHERE e.op = 1 AND "
             "e.address = s.block_address AND e.seq < (SELECT seq FROM events c WHERE c.op = 10 AND c.address = s.id)) "
             "IS NOT NULL") == 8, "creation follows the block's allocation in sequence");
}

int preload_scenario(const char *mode, char *prog, char *extra) {
    (void)extra;
    if (strcmp(mode, "tensors_full") == 0) test_tensors_full(prog);
    else return -1;
    return check_failures;
}
