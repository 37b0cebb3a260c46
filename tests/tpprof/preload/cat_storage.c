// cat_storage.c: a scenario of the preload suite (tests/tpprof/meson.build gives
// each mode its test; harness.h runs the program under libtpprof.so).
// Mode: cat_storage.
#include "harness.h"

static void test_cat_storage(char *prog) {
    char *argv[] = {prog, NULL};
    struct result r;
    if (!record_tensors("cat_storage.db", argv, NULL, &r)) return;
    int64_t joined = qi("SELECT storage_id FROM tensors WHERE sizes = '[13]'");
    CHECK_MSG(joined > 0, "the cat result is recorded");
    CHECK_MSG(qi("SELECT count(*) FROM tensors WHERE sizes != '[13]'") == 3, "and the three inputs");
    CHECK_MSG(qi("SELECT count(*) FROM tensors WHERE sizes != '[13]' AND storage_id = %lld", (long long)joined) == 0,
          "the cat result's storage is none of the inputs'");
    CHECK_MSG(qi("SELECT nbytes FROM storages WHERE id = %lld", (long long)joined) == 52, "13 floats");
    CHECK_MSG(qi("SELECT count(DISTINCT storage_id) FROM tensors WHERE sizes != '[13]'") == 2,
          "the view shares its base's storage");
}

int preload_scenario(const char *mode, char *prog, char *extra) {
    (void)extra;
    if (strcmp(mode, "cat_storage") == 0) test_cat_storage(prog);
    else return -1;
    return check_failures;
}
