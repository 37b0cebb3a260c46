// profile.h: summary, leaks, sites: everything report and check show (profile.c).
// Private to viewer/; viewer.h includes every header of the viewer.
#ifndef TPPROF_VIEWER_PROFILE_H
#define TPPROF_VIEWER_PROFILE_H

#include "util.h"
#include "db.h"
#include "stacks.h"

// ---------------------------------------------------------------------------
// profile.c

enum {
    TPPROF_REACH_UNSCANNED = 0,
    TPPROF_REACH_LOST = 1,
    TPPROF_REACH_REACHABLE = 2,
};
// live_blocks.reachability 3: a block the C library keeps to the end (not a leak).
#define TPPROF_REACH_STORED_LIBC 3
// live_blocks.reachability as stored (anything but 1 or 2: not scanned;
// load_leaks sets 3 apart before this).
static inline int tpprof_reach_of(int64_t stored) {
    return stored == 1 ? TPPROF_REACH_LOST : stored == 2 ? TPPROF_REACH_REACHABLE : TPPROF_REACH_UNSCANNED;
}

typedef struct tpprof_summary {
    uint64_t allocations, frees, total_bytes;
    uint64_t temporary_count, temporary_bytes;
    uint64_t peak_bytes;
    int64_t peak_time_ns;
    uint64_t leaked_bytes, leaked_count;
    uint64_t lost_bytes, lost_count;
    uint64_t reachable_bytes, reachable_count;
    uint64_t unscanned_bytes, unscanned_count;
    // Anonymous PROT_NONE mappings (kind mmap_reserved): address space, no
    // memory; left out of every other figure. Reserved in total, and still
    // reserved at exit.
    uint64_t reserved_total_bytes, reserved_count;
    uint64_t reserved_bytes, reserved_live_count;
    // Blocks the C library keeps to the end (reachability 3: its caches,
    // stdio buffers), freed only by its __libc_freeres; not leaks, so in no
    // leak figure.
    uint64_t libc_bytes, libc_count;
    bool complete;
    bool leak_scanned; // meta.leak_scan = 1: unscanned blocks came after the scan
    int64_t dropped_events; // meta.dropped_events: a dropped free fakes a leak
    int64_t stacks_full;    // meta.stacks_full: allocations recorded without a stack (memory ran out for the stack table)
    int64_t pid, duration_ns;
    // The recording ended without its final flush (killed, the OOM killer,
    // a crash) and has no live set: the leaks are what each site had live
    // at its last flush (sites: allocated minus freed), all "unscanned".
    bool live_from_sites;
    // Not complete, and the recorded process is still running (its pid is
    // alive and started when the recording did): a recording being written.
    bool still_running;
    // The signal the program died of, when the recorder's handler wrote the
    // recording on the way (meta.end_signal), or 0.
    int end_signal;
    // meta.threads_unrecorded: threads the recorder could not record (no
    // event buffer for them); absent in recordings that do not count them.
    int64_t threads_unrecorded;
    // meta.events_unrecorded: the program's allocations and frees that were
    // not recorded (those threads', and a signal handler's inside a hook).
    int64_t events_unrecorded;
} tpprof_summary;

// Live blocks at the end, grouped by (stack, kind, reachability).
typedef struct tpprof_leak {
    int64_t stack_id;
    int64_t kind;
    int reachability;
    uint64_t bytes, count;
} tpprof_leak;

// One row of `sites`.
typedef struct tpprof_site {
    int64_t stack_id, kind;
    uint64_t alloc_count, alloc_bytes, free_count, freed_bytes;
    uint64_t temp_count, temp_bytes, peak_count, peak_bytes;
} tpprof_site;

typedef struct tpprof_profile {
    tpprof_db *db;
    tpprof_stacks *stacks;
    tpprof_summary summary;
    char *mode, *exe, *tool_version; // owned; may be NULL
    char *malloc_owner;   // meta.malloc_replaced_by: whose malloc the program called; owned, NULL: ours
    char *end_reason;     // meta.end_reason: "exit", "exec", "signal"; owned, NULL: absent
    char *malloc_skipped; // meta.malloc_skipped: the preloaded allocator glibc's stood in for; owned, NULL: none
    tpprof_leak *leaks;   // sorted: lost, unscanned, reachable; then bytes desc
    size_t nleaks;
    tpprof_site *sites;   // in table order
    size_t nsites;
    char **kind_names;    // indexed by kind id; NULL where unknown
    size_t nkinds;
    int64_t reserved_kind; // the id of kind mmap_reserved (0: none)
    bool symbolized_now;  // symbols were computed by this load
    bool symbols_saved;   // ... and written back into the file
    char *symbols_unsaved; // why a writable file did not take them (owned; NULL: it did, or not tried)
    // meta.bypassing_modules: libraries seen calling the C library's
    // allocator directly (RTLD_DEEPBIND): their allocations are missing and
    // blocks they freed look leaked. Owned.
    char **bypassing;
    size_t nbypassing;
} tpprof_profile;

// The line about an allocator preloaded after tpprof (meta.malloc_skipped),
// starting with `prefix`, when there is one. (What the recording is missing
// is for tpprof_profile_gaps.)
void tpprof_profile_warn_skipped(const tpprof_profile *p, FILE *out, const char *prefix);

// Open path read-only, symbolize if `symbols` is empty (saving the result if
// the file is writable, keeping it in memory otherwise) and load everything.
// New object the caller frees, or NULL + error.
tpprof_profile *tpprof_profile_load(const char *path);
// Symbolized as tpprof_profile_load, but brief:
// a complete recording's sites are only added up into `summary` (sites
// NULL, nsites 0); an incomplete one's are loaded, its leaks made of them.
// For summaries (`run`), not for a report.
tpprof_profile *tpprof_profile_load_brief(const char *path);
// Its figures only, brief and without stacks or symbols (stacks NULL): the
// summary, leak groups and meta (what tpprof_profile_gaps reads), for
// `run`'s list of the other recordings, symbolized later, once, when folded.
tpprof_profile *tpprof_profile_load_figures(const char *path);
void tpprof_profile_free(tpprof_profile *p);

// Name of a kind ("malloc", "mmap", ...); "kind<N>" (static buffer) if unknown.
const char *tpprof_profile_kind(const tpprof_profile *p, int64_t kind);
const char *tpprof_reach_name(int reachability);

#endif
