// tensor_handles.c: a scenario of the preload suite (tests/tpprof/meson.build gives
// each mode its test; harness.h runs the program under libtpprof.so).
// Mode: tensor_handles.
#include "harness.h"

// Tensor handles (tensor_handles.c): the ledger keeps the retains no
// release matched, pairing a release with the handle whose stack shares the
// most with its own.
static void test_tensor_handles(char *prog) {
    char *argv[] = {prog, NULL};
    struct result r;
    if (!record_tensors("tensor_handles.db", argv, NULL, &r)) return;
    CHECK_MSG(strcmp(r.out, "tensor_handles ok\n") == 0, "stdout '%s'", r.out);
    CHECK_MSG(qi("SELECT count(*) FROM tensors WHERE freed_ns IS NULL") == 3, "kept, cached and crowd are alive (%lld)",
          (long long)qi("SELECT count(*) FROM tensors WHERE freed_ns IS NULL"));
    // kept: its creation handle, made in handles_make; the helper's matched.
    int64_t kept_id = qi("SELECT id FROM tensors WHERE freed_ns IS NULL AND sizes = '[16]'");
    CHECK_MSG(qi("SELECT count(*) FROM tensor_refs WHERE tensor_id = %lld", (long long)kept_id) == 1 &&
              qi("SELECT count(*) FROM tensor_refs WHERE tensor_id = %lld AND op = 0 AND count = 1", (long long)kept_id) == 1,
          "kept: only its creation handle is left");
    CHECK_MSG(stack_has(qi("SELECT stack_id FROM tensor_refs WHERE tensor_id = %lld", (long long)kept_id), "handles_make"),
          "kept's creation handle was made in handles_make");
    // cached: 2 retains in handles_cache (called from two lines of main: two
    // stacks); the creation handle released.
    int64_t cached_id = qi("SELECT id FROM tensors WHERE freed_ns IS NULL AND sizes = '[32]'");
    CHECK_MSG(qi("SELECT count(*) FROM tensor_refs WHERE tensor_id = %lld", (long long)cached_id) == 2 &&
              qi("SELECT sum(count) FROM tensor_refs WHERE tensor_id = %lld AND op = 1", (long long)cached_id) == 2,
          "cached: two retains no release matched, and no creation handle");
    int64_t ids[4];
    int n = 0;
    sqlite3_stmt *st;
    char *sql = sqlite3_mprintf("SELECT stack_id FROM tensor_refs WHERE tensor_id = %lld", (long long)cached_id);
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK) {
        while (sqlite3_step(st) == SQLITE_ROW && n < 4) ids[n++] = sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
    }
    sqlite3_free(sql);
    for (int i = 0; i < n; i++) CHECK_MSG(stack_has(ids[i], "handles_cache"), "cached's retain %d was taken in handles_cache", i);
    // crowd: its creation handle and 10 of handles_hoard's.
    int64_t crowd_id = qi("SELECT id FROM tensors WHERE freed_ns IS NULL AND sizes = '[128]'");
    CHECK_MSG(qi("SELECT sum(count) FROM tensor_refs WHERE tensor_id = %lld AND op = 1", (long long)crowd_id) == 10 &&
              qi("SELECT count(*) FROM tensor_refs WHERE tensor_id = %lld AND op = 0", (long long)crowd_id) == 1,
          "crowd: 10 retains left and its creation handle (%lld)",
          (long long)qi("SELECT sum(count) FROM tensor_refs WHERE tensor_id = %lld AND op = 1", (long long)crowd_id));
    CHECK_MSG(stack_has(qi("SELECT stack_id FROM tensor_refs WHERE tensor_id = %lld AND op = 1", (long long)crowd_id),
                    "handles_hoard"),
          "crowd's were taken in handles_hoard");
    CHECK_MSG(qi("SELECT count(*) FROM tensor_refs") == 5, "nothing of gone is left");
    // refcount_sites: handle retains (1 borrow, 3 cache, 50,000 hoard) and
    // releases not the last (1 borrow, 2 creators', 49,990 unhoard).
    CHECK_MSG(qi("SELECT sum(count) FROM refcount_sites WHERE op = 6") == 50004 &&
              qi("SELECT sum(count) FROM refcount_sites WHERE op = 7") == 49993,
          "4 handle retains, 3 releases not the last (%lld, %lld)",
          (long long)qi("SELECT sum(count) FROM refcount_sites WHERE op = 6"),
          (long long)qi("SELECT sum(count) FROM refcount_sites WHERE op = 7"));
}

int preload_scenario(const char *mode, char *prog, char *extra) {
    (void)extra;
    if (strcmp(mode, "tensor_handles") == 0) test_tensor_handles(prog);
    else return -1;
    return check_failures;
}
