// tensor_race.c: a scenario of the preload suite (tests/tpprof/meson.build gives
// each mode its test; harness.h runs the program under libtpprof.so).
// Modes: tensor_race, tensor_race_wrap.
#include "harness.h"

// Main sent the observer events alone, then 4 workers joined it (taking
// the observer stripe from it, src/tpprof/obsorder.c): every event is
// applied, each release after its retain.
static void test_tensor_race(char *prog, bool wrap) {
    char *argv[] = {prog, NULL};
    struct result r;
    // wrap: the order tickets start just before they wrap (every ~15 s of a
    // busy thread), so the plain stores of the stripe's owner and the locked
    // adds after it cross the wrap.
    if (!record_tensors(wrap ? "tensor_race_wrap.db" : "tensor_race.db", argv, wrap ? "TPPROF_ORDER_START=wrap" : NULL,
                        &r))
        return;
    CHECK_MSG(strcmp(r.out, "tensor_race: done\n") == 0, "stdout '%s'", r.out);
    CHECK_MSG(qi("SELECT value FROM meta WHERE key = 'dropped_events'") == 0, "no event dropped");
    // Retains: main's 1000 + 3000 views, the workers' 4 x 3000, the kept one.
    // Releases: those views but the kept one, the workers' 12000 sums and 4
    // tensors of their own (their creation references).
    CHECK_MSG(qi("SELECT sum(count) FROM refcount_sites WHERE op = 1") == 16001 &&
              qi("SELECT sum(count) FROM refcount_sites WHERE op = 2") == 28004,
          "16001 retains and 28004 releases (%lld, %lld)", (long long)qi("SELECT sum(count) FROM refcount_sites WHERE op = 1"),
          (long long)qi("SELECT sum(count) FROM refcount_sites WHERE op = 2"));
    CHECK_MSG(qi("SELECT count(*) FROM storages WHERE freed_ns IS NULL") == 1 &&
              qi("SELECT strong FROM storages WHERE freed_ns IS NULL") == 2,
          "the base's storage alone is alive, strong 2");
    CHECK_MSG(qi("SELECT count(*) FROM tensors WHERE freed_ns IS NULL") == 2, "the base and the kept view are alive");
    CHECK_MSG(qi("SELECT count(*) FROM storage_refs") == 2 && qi("SELECT count(*) FROM storage_refs WHERE tensor_id = 0") == 0,
          "two references, both a tensor's");
    int64_t ids[4];
    int n = ref_stacks("op = 1", ids, 4);
    CHECK_MSG(n == 1 && stack_has(ids[0], "race_keep"), "the kept view's reference was taken in race_keep");
}

int preload_scenario(const char *mode, char *prog, char *extra) {
    (void)extra;
    if (strcmp(mode, "tensor_race") == 0) test_tensor_race(prog, false);
    else if (strcmp(mode, "tensor_race_wrap") == 0) test_tensor_race(prog, true);
    else return -1;
    return check_failures;
}
