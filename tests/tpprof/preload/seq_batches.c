// seq_batches.c: a scenario of the preload suite (tests/tpprof/meson.build gives
// each mode its test; harness.h runs the program under libtpprof.so).
// Modes: seq_batches, seq_fixed.
#include "harness.h"

// Replays allocator_events in order; `stop` events before the end (0: all).
struct replay {
    int64_t allocated, reserved, inactive_split_bytes, inactive_split, segments, peak_allocated, peak_reserved;
};

struct rblock {
    int64_t addr, size, seg;
    bool alloc;
};

static struct replay replay_allocator(int64_t upto_seq) {
    static struct rblock b[4096];
    int nb = 0;
    struct replay out = {0};
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, "SELECT seq, action, segment, segment_size, block, block_size FROM allocator_events "
                               "ORDER BY seq", -1, &st, NULL) != SQLITE_OK)
        return out;
    while (sqlite3_step(st) == SQLITE_ROW) {
        int64_t seq = sqlite3_column_int64(st, 0), action = sqlite3_column_int64(st, 1);
        int64_t seg = sqlite3_column_int64(st, 2), seg_size = sqlite3_column_int64(st, 3);
        int64_t blk = sqlite3_column_int64(st, 4), size = sqlite3_column_int64(st, 5);
        if (upto_seq && seq >= upto_seq) break;
        if (action == 1 && nb < 4096) { // segment reserve: one free block
            b[nb++] = (struct rblock){seg, seg_size, seg, false};
            out.reserved += seg_size;
            out.segments++;
        } else if (action == 2) {
            for (int i = 0; i < nb; i++)
                if (b[i].seg == seg) b[i--] = b[--nb];
            out.reserved -= seg_size;
            out.segments--;
        } else if (action == 3 || action == 4) {
            for (int i = 0; i < nb; i++)
                if (b[i].addr == blk) {
                    b[i].alloc = action == 3;
                    b[i].size = size;
                    out.allocated += action == 3 ? size : -size;
                }
        } else if (action == 5 && nb < 4096) { // split: the block holding blk ends there
            for (int i = 0; i < nb; i++)
                if (b[i].addr < blk && blk < b[i].addr + b[i].size) {
                    b[i].size = blk - b[i].addr;
                    b[nb++] = (struct rblock){blk, size, b[i].seg, false};
                    break;
                }
        } else if (action == 6) { // merge: one free block covers [blk, blk+size)
            for (int i = 0; i < nb; i++)
                if (b[i].addr >= blk && b[i].addr < blk + size) b[i--] = b[--nb];
            if (nb < 4096) b[nb++] = (struct rblock){blk, size, seg, false};
        }
        if (out.allocated > out.peak_allocated) out.peak_allocated = out.allocated;
        if (out.reserved > out.peak_reserved) out.peak_reserved = out.reserved;
    }
    sqlite3_finalize(st);
    for (int i = 0; i < nb; i++) {
        if (b[i].alloc) continue;
        int in_seg = 0;
        for (int k = 0; k < nb; k++) in_seg += b[k].seg == b[i].seg;
        if (in_seg > 1) {
            out.inactive_split++;
            out.inactive_split_bytes += b[i].size;
        }
    }
    return out;
}

static void test_seq_batches(char *prog, bool fixed) {
    char *argv[] = {prog, fixed ? (char *)"--fixed" : NULL, NULL};
    struct result r;
    if (!record_tensors(fixed ? "seq_fixed.db" : "seq_var.db", argv, NULL, &r)) return;
    long long kept = -1, want[7];
    const char *k = strstr(r.out, "kept ");
    const char *line = strstr(r.out, "stats: ");
    if (k) kept = atoll(k + 5);
    CHECK_MSG(line && kept > 0 &&
              sscanf(line, "stats: allocated_bytes=%lld reserved_bytes=%lld inactive_split_bytes=%lld "
                           "inactive_split=%lld segments=%lld peak_reserved_bytes=%lld peak_allocated_bytes=%lld",
                     &want[0], &want[1], &want[2], &want[3], &want[4], &want[5], &want[6]) == 7,
          "the stats line: %s", r.out);
    if (!line || kept <= 0) return;
    // After printing, the program releases its `kept` activations (one
    // block free each) and destroys the allocator: the line describes the
    // moment before the kept-th block free from the end.
    int64_t at = qi("SELECT seq FROM allocator_events WHERE action = 4 ORDER BY seq DESC LIMIT 1 OFFSET %lld",
                    kept - 1);
    struct replay p = replay_allocator(at);
    CHECK_MSG(p.allocated == want[0] && p.reserved == want[1] && p.inactive_split_bytes == want[2] &&
              p.inactive_split == want[3] && p.segments == want[4],
          "replay: allocated_bytes=%lld reserved_bytes=%lld inactive_split_bytes=%lld inactive_split=%lld "
          "segments=%lld; printed %s",
          (long long)p.allocated, (long long)p.reserved, (long long)p.inactive_split_bytes,
          (long long)p.inactive_split, (long long)p.segments, line);
    struct replay all = replay_allocator(0);
    CHECK_MSG(all.peak_reserved == want[5] && all.peak_allocated == want[6], "peaks %lld %lld",
          (long long)all.peak_reserved, (long long)all.peak_allocated);
    CHECK_MSG(all.allocated == 0 && all.segments == 0 && all.reserved == 0, "everything given back at the end");
    if (fixed) CHECK_MSG(want[2] == 0, "--fixed strands nothing");
    else CHECK_MSG(want[2] > 0, "variable lengths strand free split blocks");
    CHECK_MSG(qi("SELECT count(*) FROM allocator_events WHERE allocator = 'caching' AND device = 'cpu' AND stack_id > 0") ==
              qi("SELECT count(*) FROM allocator_events"), "every event names its allocator, device and stack");
    CHECK_MSG(qi("SELECT count(*) FROM storages WHERE allocator = 'caching' AND block_address IS NOT NULL AND "
             "block_kind = 5 AND data >= block_address AND data < block_address + block_size") ==
              qi("SELECT count(*) FROM storages WHERE allocator = 'caching'"),
          "a caching storage's block is the segment's host allocation");
}

int preload_scenario(const char *mode, char *prog, char *extra) {
    (void)extra;
    if (strcmp(mode, "seq_batches") == 0) test_seq_batches(prog, false);
    else if (strcmp(mode, "seq_fixed") == 0) test_seq_batches(prog, true);
    else return -1;
    return check_failures;
}
