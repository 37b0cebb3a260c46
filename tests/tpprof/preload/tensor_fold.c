// tensor_fold.c: a scenario of the preload suite (tests/tpprof/meson.build gives
// each mode its test; harness.h runs the program under libtpprof.so).
// Mode: tensor_fold.
#include "harness.h"

// 20000 small ops on a worker thread, folded on it (observe.c, "Folded
// views"), count in refcount_sites and storage_lifetimes as if recorded one
// by one; what the worker leaks while still running at exit (a view, a sum
// on its new storage) is recorded in full.
static void test_tensor_fold(char *prog) {
    char *argv[] = {prog, NULL};
    struct result r;
    if (!record_tensors("tensor_fold.db", argv, NULL, &r)) return;
    CHECK_MSG(strcmp(r.out, "tensor_fold: done\n") == 0, "stdout '%s'", r.out);
    CHECK_MSG(qi("SELECT sum(count) FROM refcount_sites WHERE op = 1") == 2 * 20000 + 1 &&
                  qi("SELECT sum(count) FROM refcount_sites WHERE op = 2") == 3 * 20000,
              "retains %lld (two views an op, the kept view), releases %lld (the three tensors of each op)",
              (long long)qi("SELECT sum(count) FROM refcount_sites WHERE op = 1"),
              (long long)qi("SELECT sum(count) FROM refcount_sites WHERE op = 2"));
    CHECK_MSG(qi("SELECT count FROM storage_lifetimes WHERE allocator = 'cpu'") == 20000,
              "every op's result storage released: %lld",
              (long long)qi("SELECT count FROM storage_lifetimes WHERE allocator = 'cpu'"));
    CHECK_MSG(qi("SELECT count(*) FROM tensors WHERE freed_ns IS NULL") == 4, "a, b, the kept view and sum alive: %lld",
              (long long)qi("SELECT count(*) FROM tensors WHERE freed_ns IS NULL"));
    CHECK_MSG(qi("SELECT count(*) FROM storages WHERE freed_ns IS NULL") == 3, "a's, b's and the sum's storages alive");
    CHECK_MSG(qi("SELECT count(*) FROM storage_refs WHERE tensor_id = 0") == 0, "no unmatched reference");
    int64_t ids[4];
    int n = ref_stacks("op = 1", ids, 4);
    CHECK_MSG(n == 1 && stack_has(ids[0], "fold_keep_view"), "the kept view's reference, taken in fold_keep_view");
    CHECK_MSG(qi("SELECT value FROM meta WHERE key = 'dropped_events'") == 0, "nothing dropped");
}

int preload_scenario(const char *mode, char *prog, char *extra) {
    (void)extra;
    if (strcmp(mode, "tensor_fold") == 0) test_tensor_fold(prog);
    else return -1;
    return check_failures;
}
