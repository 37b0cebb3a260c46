// device_state.h: the writer's device memory state, data only (writer/
// device.c keeps it; store/device.c writes it out and marks what it
// wrote): every device block the program made (device_blocks rows), the
// device events not yet written (device_events), the per-device timeline
// samples (device_timeline) and the counters meta reports. Part of the
// store's one view of the writer: state.h includes it. The writer's
// functions over it are in device.h.
//
// Writer-owned, like state.h's: touched with the writer's lock held, never
// from a hook.
#ifndef TPPROF_WRITER_DEVICE_STATE_H
#define TPPROF_WRITER_DEVICE_STATE_H

#include "base/base.h"

#define TPPROF_DEV_MAX 64 // device ordinals the timeline follows (0..63)

// One device_blocks row. A plain successful allocation and free (the
// commonest calls by far) are not device_calls rows of their own: the
// block carries their event's facts (alloc_seq, pool; free_seq,
// free_thread, free_kind, free_device) and the device_events view reads
// them back (store/device.c). 0 in alloc_seq/free_seq: that call is a
// device_calls row, or was not seen.
struct tpprof_dev_block {
    uint64_t rowid;                            // its device_blocks row
    uint64_t address, size, alloc_ns, free_ns; // free_ns 0: not freed
    uint64_t stream, pool;
    uint64_t alloc_seq, free_seq;              // device_events seq of the allocation / the free
    const char *api, *free_api, *ended_by;     // static strings; free_api/ended_by NULL when none
    int32_t device, free_device;
    uint32_t stack, free_stack;                // stack_nodes ids
    uint32_t thread, free_thread;              // thread index
    uint8_t kind, free_kind;                   // kind_code (record/device.h)
    bool stored, dirty;                        // has a row / changed since written
    bool backs;                                // holds a storage's data (the ledger wants its end)
    bool quiet;                                // aggregate mode, past its site's detail rows: a row only if alive at the end or reset
    uint32_t site;                             // its tpprof_dev_site index
};
// One device_sites row: a (stack, kind, device) allocation site's totals
// for the whole run (writer/device.c). peak_*: its live blocks at its
// scope's peak (its device's memory, or pinned host memory); total_peak_*:
// at the peak of all devices' memory together. Both kept lazily: a site
// touched since its scope's last peak holds its value then (*_epoch equal
// to the scope's), an untouched one's value is its live one.
struct tpprof_dev_site {
    uint64_t alloc_count, alloc_bytes, free_count, freed_bytes;
    int64_t live_count, live_bytes;
    int64_t peak_count, peak_bytes, total_peak_count, total_peak_bytes;
    uint64_t peak_epoch, total_peak_epoch;
    const char *api; // the first allocation's
    uint32_t stack, rows; // rows: its blocks given a device_blocks row as made
    int32_t device;
    uint8_t kind;
    int8_t scope; // TPPROF_DEV_SCOPE_*, or a device ordinal; -1 address space (no peak)
    bool dirty;
};
// Peak scopes: 0..TPPROF_DEV_MAX-1 a device's memory, then these.
#define TPPROF_DEV_SCOPE_OTHER TPPROF_DEV_MAX         // memory of an unknown device (or an ordinal >= 64)
#define TPPROF_DEV_SCOPE_PINNED (TPPROF_DEV_MAX + 1)  // pinned host memory
#define TPPROF_DEV_SCOPE_TOTAL (TPPROF_DEV_MAX + 2)   // every device's memory together
#define TPPROF_DEV_SCOPES (TPPROF_DEV_MAX + 3)

// One device_calls row (the device_events view's other calls).
struct tpprof_dev_event {
    uint64_t seq, time_ns, stream, pool, address, size;
    const char *api;
    int32_t device, result;
    uint32_t thread, stack;
    uint8_t op, kind, flag;
};

struct tpprof_dev_sample {
    uint64_t time_ns;
    int32_t device;
    int64_t allocated, reserved; // reserved < 0: unknown
};

struct tpprof_dev_state {
    // The blocks alive, and those ended but not written yet (written and
    // ended ones leave: writer/device.c compacts before the array grows).
    struct tpprof_dev_block *blocks;
    uint64_t nblocks, capblocks;
    struct tpprof_dev_event *events; // pending rows
    uint64_t nevents, capevents;
    struct tpprof_dev_sample *samples; // pending rows
    uint64_t nsamples, capsamples;
    int64_t allocated[TPPROF_DEV_MAX];
    struct tpprof_dev_site *sites; // device_sites rows, by index
    uint64_t nsites, capsites;
    int64_t scope_live[TPPROF_DEV_SCOPES], scope_peak[TPPROF_DEV_SCOPES];
    uint64_t scope_peak_ns[TPPROF_DEV_SCOPES], scope_epoch[TPPROF_DEV_SCOPES];
    int64_t calls_failed, bad_frees;
    uint64_t next_rowid;
    uint64_t unwritten; // blocks made or ended since the store last wrote (it clears this)
    bool any;     // a device event was applied
    bool changed; // since the store last wrote (it clears this)
};

TPPROF_HIDDEN extern struct tpprof_dev_state tpprof_dev;

// A site's live blocks at its scope's peak (out[0] count, out[1] bytes)
// and at all devices' peak (out[2], out[3]); 0s where it has none.
static inline void tpprof_dev_site_peaks(const struct tpprof_dev_site *s, int64_t out[4]) {
    const uint64_t *ep = tpprof_dev.scope_epoch;
    bool mem = s->scope >= 0 && s->scope != TPPROF_DEV_SCOPE_PINNED;
    bool kept = s->scope >= 0 && s->peak_epoch == ep[s->scope];
    bool tkept = s->total_peak_epoch == ep[TPPROF_DEV_SCOPE_TOTAL];
    out[0] = s->scope < 0 ? 0 : kept ? s->peak_count : s->live_count;
    out[1] = s->scope < 0 ? 0 : kept ? s->peak_bytes : s->live_bytes;
    out[2] = !mem ? 0 : tkept ? s->total_peak_count : s->live_count;
    out[3] = !mem ? 0 : tkept ? s->total_peak_bytes : s->live_bytes;
}

#endif
