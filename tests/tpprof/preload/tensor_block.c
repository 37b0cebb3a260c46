// tensor_block.c: a scenario of the preload suite (tests/tpprof/meson.build gives
// each mode its test; harness.h runs the program under libtpprof.so).
// Modes: tensor_block, tensor_static.
#include "harness.h"

// The storage's block is the posix_memalign block behind its data; `static`:
// the program links libtensorplay statically.
static void test_tensor_block(char *prog, const char *name) {
    char *argv[] = {prog, NULL};
    struct result r;
    if (!record_tensors(name, argv, NULL, &r)) return;
    unsigned long long data = 0, nbytes = 0;
    CHECK_MSG(sscanf(r.out, "data=%llu nbytes=%llu", &data, &nbytes) == 2, "output: %s", r.out);
    CHECK_MSG(qi("SELECT count(*) FROM storages WHERE freed_ns IS NULL") == 1, "one storage alive");
    CHECK_MSG(qi("SELECT data FROM storages WHERE freed_ns IS NULL") == (int64_t)data, "its data pointer");
    CHECK_MSG(qi("SELECT block_address FROM storages WHERE freed_ns IS NULL") == (int64_t)data, "block at the data");
    CHECK_MSG(qi("SELECT block_kind FROM storages WHERE freed_ns IS NULL") == 5, "a posix_memalign block");
    CHECK_MSG(qi("SELECT block_size FROM storages WHERE freed_ns IS NULL") == (int64_t)nbytes, "of nbytes");
    CHECK_MSG(qi("SELECT count(*) FROM live_blocks WHERE address = %lld AND kind = 5 AND size = %lld", (long long)data,
             (long long)nbytes) == 1, "the same block is a live block");
    // The kept tensor adopted its storage's creation reference: it is the
    // holder, at its own creation stack, which names the leaking function.
    int64_t kept = qi("SELECT id FROM tensors WHERE freed_ns IS NULL");
    CHECK_MSG(qi("SELECT count(*) FROM tensors WHERE freed_ns IS NULL") == 1 && kept > 0, "one tensor alive");
    CHECK_MSG(qi("SELECT count(*) FROM storage_refs WHERE tensor_id = %lld AND op = 0 AND count = 1", (long long)kept) == 1 &&
              qi("SELECT count(*) FROM storage_refs") == 1,
          "the only outstanding reference is the live tensor's, the adopted creation reference");
    int64_t ref_stack = 0;
    CHECK_MSG(ref_stacks("op = 0", &ref_stack, 1) == 1 &&
              ref_stack == qi("SELECT created_stack FROM tensors WHERE id = %lld", (long long)kept),
          "taken at the tensor's creation stack");
    CHECK_MSG(stack_has(ref_stack, "leak_tensor"), "which is in leak_tensor");
    CHECK_MSG(stack_has(qi("SELECT created_stack FROM storages WHERE freed_ns IS NULL"), "leak_tensor"),
          "so is the storage's");
    CHECK_MSG(qi("SELECT coalesce(sum(count), 0) FROM refcount_sites WHERE op = 1") == 0 &&
              qi("SELECT sum(count) FROM refcount_sites WHERE op = 2") == 1,
          "no retain at all; one release, the freed tensor's");
    CHECK_MSG(qi("SELECT count(*) FROM storages WHERE freed_ns IS NOT NULL AND block_freed_ns IS NOT NULL AND "
             "block_kind = 5") == 1, "the freed storage's block was freed");
    CHECK_MSG(qi("SELECT count FROM storage_lifetimes WHERE allocator = 'cpu'") == 1, "one lifetime measured");
    // Without the preload the program runs the same.
    struct result native = run(NULL, argv, NULL);
    CHECK_MSG(native.status == 0 && strncmp(native.out, "data=", 5) == 0, "runs without the preload: %s", native.out);
    // TPPROF_TENSORS=0 declines: host recording only.
    char out[600];
    db_path(out, sizeof out, "declined.db");
    struct result d = run(out, argv, "TPPROF_TENSORS=0");
    CHECK_MSG(d.status == 0 && open_db(out), "declined run");
    CHECK_MSG(qi("SELECT count(*) FROM meta WHERE key = 'tensors'") == 0 && qi("SELECT count(*) FROM storages") == 0,
          "no tensor rows when declined");
}

int preload_scenario(const char *mode, char *prog, char *extra) {
    (void)extra;
    if (strcmp(mode, "tensor_block") == 0) test_tensor_block(prog, "block.db");
    else if (strcmp(mode, "tensor_static") == 0) test_tensor_block(prog, "static.db");
    else return -1;
    return check_failures;
}
