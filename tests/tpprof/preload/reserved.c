// reserved.c: a scenario of the preload suite (tests/tpprof/meson.build gives
// each mode its test; harness.h runs the program under libtpprof.so).
// Mode: reserved.
#include "harness.h"

// Address space reserved PROT_NONE, committed in parts (progs/reserved.c):
// the reservation is kind mmap_reserved (12), which the peak leaves out; the
// parts committed are mmap (10) with the stacks that committed them, as
// reachable as their reservation; a plain mapping flipped by mprotect keeps
// its own.
static void test_reserved(char *prog) {
    char *argv[] = {prog, NULL};
    struct result r;
    if (!record("reserved.db", argv, NULL, &r)) return;
    CHECK_MSG(strcmp(r.out, "reserved ok\n") == 0, "stdout '%s'", r.out);
    const int64_t mib = 1 << 20;
    int64_t reserved = qi("SELECT coalesce(sum(size), 0) FROM live_blocks WHERE kind = 12");
    CHECK_MSG(reserved == 1024 * mib - 4 * mib - 2 * mib + 16 * mib - (64 << 10), "reserved at exit: %lld KiB",
              (long long)(reserved >> 10));
    CHECK_MSG(count_blocks(2, 4 * mib, 10, "commit_fixed", 0) == 1, "the 4 MiB mapped over the start, kept");
    // Reached through the reservation's base, which the program keeps
    // (scan.c, "Reservations"): nothing points into it.
    CHECK_MSG(count_blocks(2, mib, 10, "commit_protect", 0) == 1,
              "the 1 MiB left of the 2 made accessible by mprotect, reachable");
    CHECK_MSG(count_blocks(1, 64 << 10, 10, "commit_lost", 0) == 1, "the part committed in a lost reservation, lost");
    CHECK_MSG(count_blocks(2, 64 << 10, 10, "plain_map", 0) == 1, "the plain mapping, still plain_map's");
    CHECK_MSG(qi("SELECT count(*) FROM live_blocks WHERE kind = 10 AND size >= %lld", mib) == 2, "no other mapping");
    int64_t peak = qi("SELECT value FROM meta WHERE key = 'peak_bytes'");
    CHECK_MSG(peak >= 6 * mib && peak < 64 * mib, "the peak counts what was committed, not the 1 GiB: %lld",
          (long long)peak);
    CHECK_MSG(qi("SELECT count(*) FROM kinds WHERE id = 12 AND name = 'mmap_reserved'") == 1, "kind 12 is named");
    CHECK_MSG(qi("SELECT count(*) FROM sites WHERE kind = 12") > 0, "reserved sites have rows");
    site_totals_match();
}

int preload_scenario(const char *mode, char *prog, char *extra) {
    (void)extra;
    if (strcmp(mode, "reserved") == 0) test_reserved(prog);
    else return -1;
    return check_failures;
}
