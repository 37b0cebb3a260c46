// fixture.h: synthetic tpprof recordings written with the sqlite3 C API,
// exactly as docs/schema.md describes them, with known leaks, sites and peak.
//
// The "app" recording (fixture_write) has one fake module /opt/fake/app and
// a pre-filled `symbols` table. Its contents, which tests assert on:
//
//   stack  innermost frame                       kind    sites: calls/bytes    live at exit
//   A      leak_once (leak.c:12)  [+ a libtpprof.so frame innermost, to drop]
//                                                malloc  1 / 4096              4096 B lost
//   B      make_buffer (buffer.c:20)             calloc  10 / 1000, 8 freed    2 x 100 B reachable
//   C      map_arena (arena.c:30)                mmap    1 / 8192              8192 B lost
//   D      inner_helper (helpers.h:7) inlined into outer_fn (app.c:40)
//                                                malloc  100 / 1 MiB, all freed
//   E      parse_token (parse.c:60)              malloc  5000 / 80000, 4000 temporary
//   F      grow_leak (grow.c:70)                 malloc  only with extra_lost_bytes
//   every stack's outermost frame: main (app.c:50)
//
// The "self" recording (fixture_write_self) instead names this test
// executable as its module, with real return addresses into fixture.c, and
// leaves `symbols` empty, so tpprof must symbolize it with libdw.
#ifndef TPPROF_TEST_FIXTURE_H
#define TPPROF_TEST_FIXTURE_H

#include <stdbool.h>
#include <stdint.h>

typedef struct fixture_options {
    int64_t schema_version;     // 0 means 1
    bool foreign;               // meta without tool = tpprof
    bool incomplete;            // complete = 0 and every live block unscanned
    bool no_symbols;            // leave `symbols` empty (the fake module has no file)
    bool no_leaks;              // every block freed: live_blocks empty
    uint64_t extra_lost_bytes;  // one more lost block, at stack F
    uint64_t extra_peak_bytes;  // added to meta.peak_bytes and to stack F's peak
    bool tensors;               // add the tensor and allocator tables (below)
    bool full_mode;             // with tensors: meta.mode = full and refcount events
} fixture_options;

// With `tensors` (docs/schema-tensors.md), on top of the app recording:
//
//   storage  bytes    strong weak  state at exit                    tensors (alive)
//   1        262144   1      1     unmatched retain in cache_put    none
//   2        262144   1      1     unmatched retain in cache_put    none
//   3        4096     3      1     unmatched retain in extra_hold   10 [16, 64], 11 view of 10
//   4        32768    0      1     data released (9 us; block freed 12.5 us), weak ref from memo_remember
//   5        4 MiB    2      1     at the peak too                  19 [1024, 1024], 20 [1024] view of 19
//   6        2 MiB    freed at 20 us, at the peak                    30 [2, 256] strides [1024, 1]
//   7        2 MiB    2      1                                      40 [524288], 41 [1024, 512] view of 40
//
// Stacks: cache_put (cache.c:27) called into tp_storage_retain (storage.c:88,
// module /opt/fake/libtensorplay.so.0: a runtime frame), extra_hold (hold.c:15), memo_remember
// (memo.c:22), keep_row (views.c:18, tensors 20, 30, 41), make_tensor
// (tensor.c:9, storages and tensors 10, 11, 19, 40). storage_lifetimes: cpu 3
// storages, live sum 3000 max 2000 ns, no delay; deferred 2, live 10000/6000,
// delay 4000/3000. In full mode, events op 11 set storage 1 to strong 2 at
// 1500 ns and back to 1 at 8000 ns.
//
// allocator_events of allocator "caching" (segments A = 0x100000 2 MiB,
// B = 0x800000 20 MiB, C = 0x2000000 4 MiB), one ms apart, stacks
// make_buffer (X), parse_token (Y), map_arena (Z):
//   1 ms reserve A; 2 ms 1024 B for 1000 (X); 3 ms 4096 for 4000 (Y);
//   4 ms 8192 for 8192 (X); 5 ms free the 4096; 6 ms reserve B, 10 MiB for
//   10000000 (Z); 7 ms reserve C, all of it for 4194304 (Y) = the peak;
//   8 ms free it; 9 ms release C; 10 ms free the 8192, two merges.
#define FIX_STORAGES_ALIVE 6u
#define FIX_EXIT_INACTIVE_SPLIT_BYTES 12581888u

// Expected totals of fixture_write with default options.
#define FIX_ALLOCATIONS 5112u
#define FIX_FREES 5108u
#define FIX_TOTAL_BYTES 1141864u
#define FIX_PEAK_BYTES 23028u
#define FIX_LEAKED_BYTES 12488u
#define FIX_LEAKED_COUNT 4u
#define FIX_LOST_BYTES 12288u
#define FIX_LOST_COUNT 2u
#define FIX_REACHABLE_BYTES 200u
#define FIX_REACHABLE_COUNT 2u
#define FIX_TEMP_COUNT 4000u

// Write the "app" recording to path (replacing it). Returns 0 or -1 (message on stderr).
int fixture_write(const char *path, const fixture_options *o);

// fixture_write to a copy of path (harness_path's buffer is reused), for a
// recording a whole test file shares. Returns the copy (caller frees) or NULL.
char *fixture_write_copy(const char *path, const fixture_options *o);

// fixture_write, then run sql on the recording: a test's own damage or
// extra rows. Returns 0 or -1 (message on stderr).
int fixture_write_edited(const char *path, const fixture_options *o, const char *sql);

// Expected results of fixture_write_self: the innermost stack node is a
// return address in fixture_inlined (line lines[0] of fixture.c), inlined
// into fixture_leaker at lines[2]; the next node is in fixture_outer at
// lines[1]. wrong_build_id records a build-id that does not match.
int fixture_write_self(const char *path, bool wrong_build_id, int lines[3]);
// The same, naming `module_path` (a copy of this executable, say stripped) as
// the module's file instead of this executable.
int fixture_write_self_as(const char *path, const char *module_path, int lines[3]);

// A recording shaped like alloc_heavy's: `nodes` trie nodes (depth up to 20,
// 2000 distinct ips in one fake module, symbols pre-filled), a site on every
// 4th node, `leaks` lost blocks. For the speed test.
int fixture_write_big(const char *path, int nodes, int leaks);

// A SQLite database that is not a tpprof recording.
int fixture_write_foreign_sqlite(const char *path);

#endif
