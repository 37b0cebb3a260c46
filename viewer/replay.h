// replay.h: allocator_events replayed into block maps, for fragmentation (replay.c).
// Private to viewer/; viewer.h includes every header of the viewer.
#ifndef TPPROF_VIEWER_REPLAY_H
#define TPPROF_VIEWER_REPLAY_H

#include "util.h"
#include "db.h"

// ---------------------------------------------------------------------------
// replay.c

enum {
    TPPROF_ALLOC_SEGMENT_RESERVE = 1,
    TPPROF_ALLOC_SEGMENT_RELEASE = 2,
    TPPROF_ALLOC_BLOCK_ALLOC = 3,
    TPPROF_ALLOC_BLOCK_FREE = 4,
    TPPROF_ALLOC_BLOCK_SPLIT = 5,
    TPPROF_ALLOC_BLOCK_MERGE = 6,
};

typedef struct tpprof_alloc_event {
    int64_t seq, time_ns, action, segment, segment_size, block, block_size, requested, stack_id;
} tpprof_alloc_event;

typedef struct tpprof_block {
    int64_t address, size, requested, stack_id;
    bool allocated;
} tpprof_block;

typedef struct tpprof_segment {
    int64_t address, size, stack_id;
    tpprof_block *blocks; // in address order
    size_t nblocks, cap;
} tpprof_segment;

// One point of the reserved/allocated series (after an event).
typedef struct tpprof_alloc_point {
    int64_t time_ns;
    int64_t reserved, allocated;
} tpprof_alloc_point;

// One allocator's events and its state after replaying a prefix of them.
typedef struct tpprof_alloc_state {
    char *allocator;
    char *device;
    tpprof_alloc_event *events; // in seq order
    size_t nevents;
    size_t replayed;            // events applied to segments
    tpprof_segment *segments;   // in address order
    size_t nsegments, cap;
    size_t peak_index;          // events[0..peak_index] reach the largest allocated total
    int64_t peak_allocated;
} tpprof_alloc_state;

// Figures of a state (what `fragmentation` prints and `check` gates).
typedef struct tpprof_frag {
    int64_t segments, reserved, allocated, requested, internal;
    int64_t inactive_split_bytes, inactive_split, free_bytes, largest_free;
    int64_t blocks_allocated, blocks_free;
} tpprof_frag;

// Load allocator_events (absent: none), one state per allocator, nothing
// replayed yet. *out new array freed with tpprof_alloc_states_free.
int tpprof_alloc_load(tpprof_db *db, tpprof_alloc_state **out, size_t *n);
void tpprof_alloc_states_free(tpprof_alloc_state *s, size_t n);
// Free what one state holds (it stays in its array, zeroed).
void tpprof_alloc_state_clear(tpprof_alloc_state *s);

// Replay events[0..count) from scratch. 0 or -1 + error (out of memory).
int tpprof_alloc_replay(tpprof_alloc_state *s, size_t count);
// How many events happened at or before time_ns.
size_t tpprof_alloc_count_until(const tpprof_alloc_state *s, int64_t time_ns);
void tpprof_alloc_figures(const tpprof_alloc_state *s, tpprof_frag *out);

#endif
