// maps.c: a scenario of the preload suite (tests/tpprof/meson.build gives
// each mode its test; harness.h runs the program under libtpprof.so).
// Mode: maps.
#include "harness.h"

// Mappings (maps.c): 30,000 made and all but 10 unmapped oldest first; a
// MAP_FIXED mapping over the middle of another; a hole unmapped in a third.
// Sums of the live mappings by the function that mapped them (kind 10, mmap).
static int64_t mapped_by(const char *fn, int frame, int *pieces) {
    sqlite3_stmt *st;
    int64_t sum = 0;
    *pieces = 0;
    if (sqlite3_prepare_v2(db, "SELECT stack_id, size FROM live_blocks WHERE kind = 10", -1, &st, NULL) != SQLITE_OK) return -1;
    while (sqlite3_step(st) == SQLITE_ROW) {
        int64_t ips[64];
        int depth = stack_ips(sqlite3_column_int64(st, 0), ips, 64);
        if (frame < depth && ip_in(ips[frame], fn, NULL)) {
            sum += sqlite3_column_int64(st, 1);
            (*pieces)++;
        }
    }
    sqlite3_finalize(st);
    return sum;
}

// The sites row of the mappings made by fn (kind 10): its counts, in out[6]
// (alloc_count, free_count, freed_bytes, peak_count, peak_bytes, rows).
static void site_of(const char *fn, int frame, int64_t out[6]) {
    sqlite3_stmt *st;
    memset(out, 0, 6 * sizeof *out);
    if (sqlite3_prepare_v2(db, "SELECT stack_id, alloc_count, free_count, freed_bytes, peak_count, peak_bytes"
                               " FROM sites WHERE kind = 10", -1, &st, NULL) != SQLITE_OK)
        return;
    while (sqlite3_step(st) == SQLITE_ROW) {
        int64_t ips[64];
        int depth = stack_ips(sqlite3_column_int64(st, 0), ips, 64);
        if (frame < depth && ip_in(ips[frame], fn, NULL)) {
            for (int i = 0; i < 5; i++) out[i] = sqlite3_column_int64(st, i + 1);
            out[5]++;
        }
    }
    sqlite3_finalize(st);
}

static void test_maps(char *prog) {
    char *argv[] = {prog, NULL};
    struct result r;
    if (!record("maps.db", argv, NULL, &r)) return;
    CHECK_MSG(strcmp(r.out, "maps ok\n") == 0, "stdout '%s'", r.out);
    int n = 0;
    int64_t b = mapped_by("maps_many", 1, &n);
    CHECK_MSG(b == 10 * 4096 && n == 10, "maps_many: 10 pages in 10 mappings (%lld B in %d)", (long long)b, n);
    b = mapped_by("maps_big", 1, &n);
    CHECK_MSG(b == 12 * 4096 && n == 2, "maps_big: 12 pages in 2 pieces (%lld B in %d)", (long long)b, n);
    b = mapped_by("maps_fixed", 0, &n);
    CHECK_MSG(b == 4 * 4096 && n == 1, "maps_fixed: 4 pages (%lld B in %d)", (long long)b, n);
    b = mapped_by("maps_hole", 1, &n);
    CHECK_MSG(b == 6 * 4096 && n == 2, "maps_hole: 6 pages in 2 pieces (%lld B in %d)", (long long)b, n);
    // The hole's site: one allocation, no free (its two pieces are live),
    // the hole's bytes freed (the writer derives these: writer/state.h).
    int64_t h[6];
    site_of("maps_hole", 1, h);
    CHECK_MSG(h[5] == 1 && h[0] == 1 && h[1] == 0 && h[2] == 2 * 4096,
              "maps_hole's site: %lld rows, alloc %lld, free %lld, freed %lld B", (long long)h[5], (long long)h[0],
              (long long)h[1], (long long)h[2]);
    site_of("maps_big", 1, h); // (cut in two by maps_fixed's MAP_FIXED mapping)
    CHECK_MSG(h[5] == 1 && h[0] == 1 && h[1] == 0 && h[2] == 4 * 4096,
              "maps_big's site: %lld rows, alloc %lld, free %lld, freed %lld B", (long long)h[5], (long long)h[0],
              (long long)h[1], (long long)h[2]);
    site_of("maps_many", 1, h);
    CHECK_MSG(h[5] == 1 && h[0] == 30000 && h[1] == 29990 && h[2] == 29990 * 4096,
              "maps_many's site: %lld rows, alloc %lld, free %lld, freed %lld B", (long long)h[5], (long long)h[0],
              (long long)h[1], (long long)h[2]);
    CHECK_MSG(qi("SELECT count(*) FROM live_blocks WHERE kind = 10") == 15, "15 mappings live (%lld)",
          (long long)qi("SELECT count(*) FROM live_blocks WHERE kind = 10"));
}

int preload_scenario(const char *mode, char *prog, char *extra) {
    (void)extra;
    if (strcmp(mode, "maps") == 0) test_maps(prog);
    else return -1;
    return check_failures;
}
