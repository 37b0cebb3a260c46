// leaks.c: a scenario of the preload suite (tests/tpprof/meson.build gives
// each mode its test; harness.h runs the program under libtpprof.so).
// Mode: leaks.
#include "harness.h"

static void test_leaks(char *prog) {
    char out[600];
    db_path(out, sizeof out, "leaks.db");
    char *argv[] = {prog, NULL};
    struct result r = run(out, argv, NULL);
    CHECK_MSG(r.status == 0, "exit status %d, stderr: %s", r.status, r.err);
    CHECK_MSG(strcmp(r.out, "leaks: done\n") == 0, "stdout '%s'", r.out);
    if (!open_db(out)) {
        CHECK_MSG(false, "no database at %s", out);
        return;
    }
    expect_complete("leaks");
    // Lost: exact counts and sizes, the innermost frame in the leaking function.
    CHECK_MSG(count_blocks(1, 100, 1, "leak_direct", 0) == 3, "3 x 100 B malloc lost in leak_direct");
    CHECK_MSG(count_blocks(1, 240, 2, "leak_calloc", 0) == 1, "240 B calloc lost in leak_calloc");
    CHECK_MSG(count_blocks(1, 320, 5, "leak_aligned", 0) == 1, "320 B posix_memalign lost");
    CHECK_MSG(count_blocks(1, 256, 6, "leak_aligned", 0) == 1, "256 B aligned_alloc lost");
    CHECK_MSG(count_blocks(1, 19, 1, "leak_strdup", 1) == 1, "19 B strdup lost, caller frame in leak_strdup");
    CHECK_MSG(count_blocks(1, 7000, 3, "leak_realloc_chain", 0) == 1, "7000 B realloc lost");
    CHECK_MSG(count_blocks(1, 12288, 10, "leak_mmap", 0) == 1, "3-page mmap lost");
    int64_t lost = qi("SELECT count(*) FROM live_blocks WHERE reachability = 1");
    CHECK_MSG(lost == 9, "exactly 9 lost blocks, got %lld", (long long)lost);
    CHECK_MSG(qi("SELECT sum(size) FROM live_blocks WHERE reachability = 1") == 300 + 240 + 320 + 256 + 19 + 7000 + 12288,
          "lost bytes");
    // Reachable from globals, directly or through another block.
    CHECK_MSG(count_blocks(2, 4321, 2, "keep_global", 0) == 1, "4321 B reachable from a global");
    CHECK_MSG(count_blocks(2, 555, 2, "keep_chain", 0) == 1, "555 B reachable through a block");
    CHECK_MSG(count_blocks(2, 4096, 10, "keep_pieces", 0) == 1 && count_blocks(2, 8192, 10, "keep_pieces", 0) == 1,
          "a partly unmapped mapping is two reachable pieces");
    // The realloc chain: its intermediate blocks were freed, not leaked.
    CHECK_MSG(qi("SELECT count(*) FROM live_blocks WHERE size IN (10, 1000, 5000)") == 0, "realloc chain intermediates");
    CHECK_MSG(qi("SELECT count(*) FROM live_blocks WHERE size BETWEEN 50 AND 99") == 0, "no_leak blocks");
    CHECK_MSG(qi("SELECT sum(alloc_count) FROM sites WHERE kind = 3") >= 3, "realloc sites counted");
    CHECK_MSG(qi("SELECT count(*) FROM live_blocks WHERE kind IN (10, 11) AND size = 20480") == 0, "mremap'ed then unmapped");
    // The stack trie is consistent: every parent exists.
    CHECK_MSG(qi("SELECT count(*) FROM stack_nodes n WHERE parent != 0 AND NOT EXISTS"
             " (SELECT 1 FROM stack_nodes p WHERE p.id = n.parent)") == 0, "trie parents exist");
    CHECK_MSG(qi("SELECT count(*) FROM modules WHERE build_id IS NOT NULL") > 0, "modules have build ids");
}

int preload_scenario(const char *mode, char *prog, char *extra) {
    (void)extra;
    if (strcmp(mode, "leaks") == 0) test_leaks(prog);
    else return -1;
    return check_failures;
}
