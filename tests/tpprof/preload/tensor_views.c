// tensor_views.c: a scenario of the preload suite (tests/tpprof/meson.build gives
// each mode its test; harness.h runs the program under libtpprof.so).
// Mode: tensor_views.
#include "harness.h"

// 40,000 views of one tensor, the oldest 20,000 released first to last
// (tensor_views.c): every view's free pairs with its own reference, and the
// 20,000 left are written one row each.
static void test_tensor_views(char *prog) {
    char *argv[] = {prog, NULL};
    struct result r;
    if (!record_tensors("tensor_views.db", argv, NULL, &r)) return;
    CHECK_MSG(strcmp(r.out, "tensor_views ok\n") == 0, "stdout '%s'", r.out);
    CHECK_MSG(qi("SELECT strong FROM storages WHERE freed_ns IS NULL") == 20001, "strong 20,001 (%lld)",
          (long long)qi("SELECT strong FROM storages WHERE freed_ns IS NULL"));
    CHECK_MSG(qi("SELECT count(*) FROM tensors WHERE freed_ns IS NULL") == 20001, "the base and 20,000 views alive");
    CHECK_MSG(qi("SELECT count(*) FROM storage_refs WHERE count = 1 AND tensor_id != 0") == 20001 &&
              qi("SELECT count(*) FROM storage_refs") == 20001,
          "one row a tensor, none unmatched (%lld rows)", (long long)qi("SELECT count(*) FROM storage_refs"));
    CHECK_MSG(qi("SELECT count(*) FROM storage_refs r JOIN tensors t ON t.id = r.tensor_id WHERE t.freed_ns IS NULL") == 20001,
          "each reference's tensor is alive: the released views' references were the ones paired");
    // Ids come from one counter: the views alive are the newest 20,000.
    CHECK_MSG(qi("SELECT min(id) - max(base_id) FROM tensors WHERE freed_ns IS NULL AND base_id != 0") > 20000 &&
              qi("SELECT max(id) - min(id) FROM tensors WHERE freed_ns IS NULL AND base_id != 0") == 19999,
          "the views alive are the newest (%lld)",
          (long long)qi("SELECT min(id) - max(base_id) FROM tensors WHERE freed_ns IS NULL AND base_id != 0"));
}

int preload_scenario(const char *mode, char *prog, char *extra) {
    (void)extra;
    if (strcmp(mode, "tensor_views") == 0) test_tensor_views(prog);
    else return -1;
    return check_failures;
}
