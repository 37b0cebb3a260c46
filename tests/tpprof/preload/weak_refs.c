// weak_refs.c: a scenario of the preload suite (tests/tpprof/meson.build gives
// each mode its test; harness.h runs the program under libtpprof.so).
// Mode: weak_refs.
#include "harness.h"

static void test_weak_refs(char *prog) {
    char *argv[] = {prog, NULL};
    struct result r;
    if (!record_tensors("weak_refs.db", argv, NULL, &r)) return;
    CHECK_MSG(qi("SELECT count(*) FROM storages WHERE freed_ns IS NULL") == 5, "five structs alive");
    CHECK_MSG(qi("SELECT count(*) FROM storages WHERE freed_ns IS NULL AND data_released_ns IS NOT NULL AND strong = 0 "
             "AND weak = 1 AND last_release_ns IS NOT NULL") == 5, "data released, strong 0, weak 1 each");
    CHECK_MSG(qi("SELECT count(*) FROM storage_refs") == 5 &&
              qi("SELECT count(*) FROM storage_refs WHERE op = 3 AND tensor_id = 0 AND count = 1") == 5,
          "one weak retain each, nothing else");
    int64_t ids[8];
    int n = ref_stacks("op = 3", ids, 8);
    CHECK_MSG(n == 5, "5 weak retains");
    for (int i = 0; i < n; i++) CHECK_MSG(stack_has(ids[i], "memo_remember"), "weak retain %d in memo_remember", i);
}

int preload_scenario(const char *mode, char *prog, char *extra) {
    (void)extra;
    if (strcmp(mode, "weak_refs") == 0) test_weak_refs(prog);
    else return -1;
    return check_failures;
}
