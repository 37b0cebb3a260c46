// device.h: device (CUDA) memory: per-device figures, leaks, peaks (device.c).
// Private to viewer/; viewer.h includes every header of the viewer.
#ifndef TPPROF_VIEWER_DEVICE_H
#define TPPROF_VIEWER_DEVICE_H

#include "util.h"
#include "profile.h"

// ---------------------------------------------------------------------------
// device.c: device (CUDA) memory (device_blocks, device_events,
// device_timeline; docs/schema.md). Absent tables: recorded false.

// What a device kind's bytes are.
enum {
    TPPROF_DEV_MEMORY = 0,  // device, async, managed, pitch, VMM physical: counted
    TPPROF_DEV_PINNED = 1,  // pinned host memory: counted on its own
    TPPROF_DEV_ADDRESS = 2, // VMM reservations and mappings: shown, never added to bytes
};
// device_events.flag
enum {
    TPPROF_DEV_FLAG_OK = 0,
    TPPROF_DEV_FLAG_DOUBLE_FREE = 1,
    TPPROF_DEV_FLAG_UNKNOWN_POINTER = 2,
    TPPROF_DEV_FLAG_HOST_POINTER = 3,
    TPPROF_DEV_FLAG_OUT_OF_MEMORY = 4,
};
// The device of figures taken over every device together.
#define TPPROF_DEV_ALL INT32_MIN

// One row of device_blocks. Strings owned by the tpprof_devices.
typedef struct tpprof_dev_block {
    int64_t address, kind, stack_id, alloc_ns, free_ns; // free_ns TPPROF_NO_TIME: never freed
    uint64_t size;
    int32_t device;
    int cls;          // TPPROF_DEV_*
    bool is_mapping;  // kind cuda_vmm_mapping (else a reservation, when cls is ADDRESS)
    char *api, *ended_by; // ended_by: "device_reset", "context_destroyed" or NULL
} tpprof_dev_block;

// Blocks grouped by (device, stack, kind[, ended_by]): a leak group, a site,
// or what was live at a peak. Strings borrowed from the tpprof_devices.
typedef struct tpprof_dev_group {
    int32_t device;
    int cls;
    int64_t stack_id, kind;
    const char *ended_by; // leaks: NULL alive at exit, else what ended it
    const char *api;      // the API of the group's first block
    uint64_t bytes, count;
} tpprof_dev_group;

// Figures of one device (or of all together, or of pinned host memory).
typedef struct tpprof_dev_stats {
    int32_t device;
    uint64_t allocations, allocated_bytes, frees;
    uint64_t peak_bytes;      // the most bytes live at once (device_sites, or device_blocks swept by time)
    int64_t peak_time_ns;     // when first reached
    uint64_t leaked_bytes, leaked_count; // alive at exit or ended by a reset
    uint64_t reset_bytes, reset_count;   // ... of which ended by a reset
    uint64_t failed_calls, oom_calls, bad_frees;
    int64_t pool_reserved_peak;          // most reserved by pools (device_timeline); -1 unknown
    uint64_t vmm_reservations, vmm_reserved_bytes, vmm_mappings, vmm_mapped_bytes;
    tpprof_dev_group *peak_sites;        // live at the peak, by bytes; owned
    size_t npeak_sites;
} tpprof_dev_stats;

// One row of device_sites (recordings that have the table): a site's
// totals and what it held at the peaks. api owned by the tpprof_devices.
typedef struct tpprof_dev_site {
    int64_t stack_id, kind;
    int32_t device;
    int cls;
    bool is_mapping;
    char *api;
    uint64_t alloc_count, alloc_bytes, free_count;
    uint64_t peak_count, peak_bytes, total_peak_count, total_peak_bytes;
} tpprof_dev_site;

// Bad frees grouped by (flag, device, stack, api).
typedef struct tpprof_dev_bad {
    int64_t flag, stack_id, address; // address: the first one
    int32_t device;
    char *api; // owned
    uint64_t count;
} tpprof_dev_bad;

typedef struct tpprof_devices {
    bool recorded;          // the recording has device_blocks
    bool filtered;          // only filter_device's rows were read (report --device)
    int32_t filter_device;
    char *capture;          // meta.device_capture; owned, NULL when absent
    int64_t meta_calls_failed, meta_bad_frees; // -1 when absent
    uint64_t failed_calls, bad_frees;          // counted in device_events
    tpprof_dev_block *blocks; // by alloc_ns (with device_sites: the leaks and each site's first blocks only)
    size_t nblocks;
    tpprof_dev_site *site_rows; // device_sites, when the recording has it (counts, sites and peaks come from it)
    size_t nsite_rows;
    tpprof_dev_stats *devices; // device memory per ordinal, ascending
    size_t ndevices, cap_devices;
    tpprof_dev_stats total;    // every device together (device TPPROF_DEV_ALL)
    tpprof_dev_stats pinned;   // pinned host memory
    tpprof_dev_group *leaks;   // memory and pinned first, by bytes; then address space
    size_t nleaks;
    tpprof_dev_group *sites;   // every block by (device, stack, kind), same order
    size_t nsites;
    tpprof_dev_bad *bad;
    size_t nbad;
} tpprof_devices;

// Load p's device tables (only `device`'s rows when filtered). 0, or -1 +
// error (out emptied). Free with tpprof_devices_free.
int tpprof_devices_load(const tpprof_profile *p, bool filtered, int32_t device, tpprof_devices *out);
void tpprof_devices_free(tpprof_devices *d);
// The stats of an ordinal (TPPROF_DEV_ALL: the total); borrowed, NULL if none.
const tpprof_dev_stats *tpprof_devices_find(const tpprof_devices *d, int32_t device);
// Failed calls and bad frees: meta's counts when larger (the recorder counts
// calls it could not list), the counted ones when filtered.
uint64_t tpprof_devices_calls_failed(const tpprof_devices *d);
uint64_t tpprof_devices_bad_frees(const tpprof_devices *d);
// TPPROF_DEV_* of a kind id, by its name.
int tpprof_device_kind_class(const tpprof_profile *p, int64_t kind);
// "double_free", "unknown_pointer", "host_pointer", "out_of_memory", "ok".
const char *tpprof_device_flag_name(int64_t flag);
// Whether b still held its memory at the end (never freed, or a reset ended it).
bool tpprof_dev_block_leaked(const tpprof_dev_block *b);
// Parse a device limit: "N" (*device TPPROF_DEV_ALL) or "DEV:N". 0 or -1 + error.
int tpprof_parse_device_size(const char *what, const char *s, int32_t *device, uint64_t *bytes);

#endif
