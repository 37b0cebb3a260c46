// train_loop.c: a scenario of the preload suite (tests/tpprof/meson.build gives
// each mode its test; harness.h runs the program under libtpprof.so).
// Mode: train_loop.
#include "harness.h"

static void test_train_loop(char *prog) {
    char *argv[] = {prog, (char *)"20", NULL};
    struct result r;
    if (!record_tensors("train_loop.db", argv, NULL, &r)) return;
    CHECK_MSG(qi("SELECT count(*) FROM storages WHERE freed_ns IS NULL") == 0, "no storage alive at exit");
    CHECK_MSG(qi("SELECT count(*) FROM storage_refs") == 0, "no outstanding reference");
    CHECK_MSG(qi("SELECT count(*) FROM storages") > 0, "the peak's storages are kept");
    // Each step makes 7 tensors on new storages (they adopt the creation
    // reference: no retain) and one view (x.t(): a retain); 8 tensors
    // released a step, and the 5 made before the loop at the end.
    CHECK_MSG(qi("SELECT sum(count) FROM refcount_sites WHERE op = 1") == 20,
          "one retain a step, the view's (%lld)", (long long)qi("SELECT sum(count) FROM refcount_sites WHERE op = 1"));
    CHECK_MSG(qi("SELECT sum(count) FROM refcount_sites WHERE op = 2") == 20 * 8 + 5,
          "one release per tensor (%lld)", (long long)qi("SELECT sum(count) FROM refcount_sites WHERE op = 2"));
    // DataPtr lifetimes: every release of data counted (7 a step and the 5
    // before the loop), the live times of the first 64 of the allocator's
    // small storages measured, then of about 1 in 8; with
    // TPPROF_LIFETIMES=all, of every one.
    char *longer[] = {prog, (char *)"200", NULL};
    if (!record_tensors("train_loop_200.db", longer, NULL, &r)) return;
    int64_t count = qi("SELECT count FROM storage_lifetimes WHERE allocator = 'cpu'");
    int64_t timed = qi("SELECT live_count FROM storage_lifetimes WHERE allocator = 'cpu'");
    CHECK_MSG(count == 1405 && timed >= 64 + 1341 / 16 && timed <= 64 + 1341 / 4,
          "1405 counted (%lld), 64 and then about 1 in 8 timed (%lld)", (long long)count, (long long)timed);
    if (!record_tensors("train_loop_all.db", longer, "TPPROF_LIFETIMES=all", &r)) return;
    CHECK_MSG(qi("SELECT count FROM storage_lifetimes WHERE allocator = 'cpu'") == 1405 &&
              qi("SELECT live_count FROM storage_lifetimes WHERE allocator = 'cpu'") == 1405,
          "TPPROF_LIFETIMES=all: all 1405 timed (%lld)",
          (long long)qi("SELECT live_count FROM storage_lifetimes WHERE allocator = 'cpu'"));
}

int preload_scenario(const char *mode, char *prog, char *extra) {
    (void)extra;
    if (strcmp(mode, "train_loop") == 0) test_train_loop(prog);
    else return -1;
    return check_failures;
}
