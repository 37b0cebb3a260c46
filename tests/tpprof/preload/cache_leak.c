// cache_leak.c: a scenario of the preload suite (tests/tpprof/meson.build gives
// each mode its test; harness.h runs the program under libtpprof.so).
// Mode: cache_leak.
#include "harness.h"

static void test_cache_leak(char *prog) {
    char *argv[] = {prog, NULL};
    struct result r;
    if (!record_tensors("cache_leak.db", argv, NULL, &r)) return;
    CHECK_MSG(qi("SELECT count(*) FROM storages WHERE freed_ns IS NULL") == 2, "two storages alive at exit (%lld)",
          (long long)qi("SELECT count(*) FROM storages WHERE freed_ns IS NULL"));
    CHECK_MSG(qi("SELECT count(*) FROM storages WHERE freed_ns IS NULL AND nbytes = 262144 AND strong = 1 AND "
             "data_released_ns IS NULL") == 2, "both 256 KiB, one strong reference, data alive");
    CHECK_MSG(qi("SELECT count(*) FROM storage_refs") == 2, "one outstanding reference each (%lld rows)",
          (long long)qi("SELECT count(*) FROM storage_refs"));
    CHECK_MSG(qi("SELECT count(*) FROM storage_refs r JOIN storages s ON s.id = r.storage_id WHERE r.op = 1 AND "
             "r.tensor_id = 0 AND r.count = 1 AND s.freed_ns IS NULL") == 2, "each an unmatched retain");
    int64_t ids[8];
    int n = ref_stacks("op = 1 AND tensor_id = 0", ids, 8);
    for (int i = 0; i < n; i++) CHECK_MSG(stack_has(ids[i], "cache_put"), "retain %d was taken in cache_put", i);
    CHECK_MSG(qi("SELECT count(*) FROM refcount_sites WHERE op = 1 AND count = 8") >= 1,
          "the cache's 8 retains share one site");
}

int preload_scenario(const char *mode, char *prog, char *extra) {
    (void)extra;
    if (strcmp(mode, "cache_leak") == 0) test_cache_leak(prog);
    else return -1;
    return check_failures;
}
