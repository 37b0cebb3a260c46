// tensor_threads.c: a scenario of the preload suite (tests/tpprof/meson.build gives
// each mode its test; harness.h runs the program under libtpprof.so).
// Mode: tensor_threads.
#include "harness.h"

// Views made on one thread and freed on another: each free pairs with its
// view's reference (the runtime sends it as one fused call, on the freeing
// thread), so only the kept view's reference and the base's are left.
static void test_tensor_threads(char *prog) {
    char *argv[] = {prog, NULL};
    struct result r;
    if (!record_tensors("tensor_threads.db", argv, NULL, &r)) return;
    CHECK_MSG(strcmp(r.out, "tensor_threads: done\n") == 0, "stdout '%s'", r.out);
    CHECK_MSG(qi("SELECT count(*) FROM storages WHERE freed_ns IS NULL") == 1 &&
              qi("SELECT strong FROM storages WHERE freed_ns IS NULL") == 2,
          "one storage alive, strong 2 (%lld)", (long long)qi("SELECT strong FROM storages WHERE freed_ns IS NULL"));
    CHECK_MSG(qi("SELECT count(*) FROM tensors WHERE freed_ns IS NULL") == 2, "the base and the kept view are alive");
    CHECK_MSG(qi("SELECT count(*) FROM storage_refs WHERE tensor_id = 0") == 0, "no unmatched reference");
    CHECK_MSG(qi("SELECT count(*) FROM storage_refs") == 2, "two references: the base's and the kept view's");
    int64_t ids[4];
    int n = ref_stacks("op = 1", ids, 4);
    CHECK_MSG(n == 1 && stack_has(ids[0], "threads_keep"), "the kept view's reference was taken in threads_keep");
    CHECK_MSG(qi("SELECT sum(count) FROM refcount_sites WHERE op = 1") == 2001 &&
              qi("SELECT sum(count) FROM refcount_sites WHERE op = 2") == 2000,
          "2001 retains (the views) and 2000 releases (the freed views; the base lives on as the kept view's base)");
}

int preload_scenario(const char *mode, char *prog, char *extra) {
    (void)extra;
    if (strcmp(mode, "tensor_threads") == 0) test_tensor_threads(prog);
    else return -1;
    return check_failures;
}
