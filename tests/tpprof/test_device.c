// test_device.c: unit tests of the writer's device memory state
// (writer/device.c), on hand-built TPPROF_OP_DEVICE records: blocks begin
// and end as their calls say, bad frees and failures are flagged, VMM
// memory is counted once, resets end what they end, the state stays small
// however many blocks come and go, and the timeline keeps exact peaks.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "writer/device.h"
#include "writer/writer.h"
#include "record/device.h"
#include "record/format.h"
#include "../check.h"

// What writer/device.c takes from the rest of the writer.
struct tpprof_wstate tpprof_w;
struct tpprof_config tpprof_cfg = {.depth = 32}; // aggregate mode
uint32_t tpprof_writer_leaf_of(uint32_t sid) { return sid; }
static uint64_t block_freed_addr, block_freed_ns;
void tpprof_obs_block_freed(uint64_t addr, uint64_t time) {
    block_freed_addr = addr;
    block_freed_ns = time;
}

static struct tpprof_thread thread;
static uint64_t seq;

static void rec_full(int op, int kind, int dev, uint64_t pool, uint64_t addr, uint64_t size, int result, const char *api,
                     uint64_t time, uint64_t reserved) {
    uint64_t r[TPPROF_DEVICE_WORDS] = {
        tpprof_hdr(0, TPPROF_OP_DEVICE, 0), (uint64_t)op | (uint64_t)kind << 8 | (uint64_t)(uint32_t)dev << 32, 0, pool,
        addr, size, (uint32_t)result | (uint64_t)7 << 32, (uint64_t)(uintptr_t)api, time, reserved};
    tpprof_device_apply(&thread, r, seq++);
}

static void rec(int op, int kind, int dev, uint64_t addr, uint64_t size, int result, const char *api, uint64_t time) {
    rec_full(op, kind, dev, 0, addr, size, result, api, time, UINT64_MAX);
}

// The last device_calls row (NULL: none pending).
static const struct tpprof_dev_event *last_event(void) {
    static const struct tpprof_dev_event none = {.flag = 0xff};
    return tpprof_dev.nevents ? &tpprof_dev.events[tpprof_dev.nevents - 1] : &none;
}

static const struct tpprof_dev_block *block_at(uint64_t addr) {
    const struct tpprof_dev_block *found = NULL;
    for (uint64_t i = 0; i < tpprof_dev.nblocks; i++)
        if (tpprof_dev.blocks[i].address == addr) found = &tpprof_dev.blocks[i];
    return found;
}

static int64_t live_blocks(void) {
    int64_t n = 0;
    for (uint64_t i = 0; i < tpprof_dev.nblocks; i++) n += tpprof_dev.blocks[i].free_ns == 0;
    return n;
}

static void reset_state(void) {
    // Mark everything written, so the state can drop ended blocks.
    for (uint64_t i = 0; i < tpprof_dev.nblocks; i++) tpprof_dev.blocks[i].stored = true, tpprof_dev.blocks[i].dirty = false;
    tpprof_dev.nevents = 0;
    tpprof_dev.nsamples = 0;
    tpprof_dev.unwritten = 0;
}

static void test_a_block_lives_from_its_allocation_to_its_free(void) {
    uint64_t seq0 = seq;
    rec(TPPROF_DEV_OP_ALLOC, TPPROF_DEV_KIND_DEVICE, 0, 0x7000000, 1 << 20, 0, "cudaMalloc", 10);
    CHECK_MSG(tpprof_dev.allocated[0] == 1 << 20, "device 0 holds 1 MiB");
    CHECK_MSG(live_blocks() == 1, "one live block");
    rec(TPPROF_DEV_OP_FREE, TPPROF_DEV_KIND_DEVICE, 2, 0x7000000, 0, 0, "cudaFree", 20);
    CHECK_MSG(tpprof_dev.allocated[0] == 0, "device 0 back to 0");
    CHECK_MSG(live_blocks() == 0, "no live block");
    const struct tpprof_dev_block *b = &tpprof_dev.blocks[tpprof_dev.nblocks - 1];
    CHECK_MSG(b->free_ns == 20 && b->free_api && strcmp(b->free_api, "cudaFree") == 0 && b->free_stack == 7,
          "the free's time, api and stack");
    // Both calls are the block's row, not device_calls rows of their own.
    CHECK_MSG(tpprof_dev.nevents == 0, "no device_calls row for a plain allocation and free, got %llu",
              (unsigned long long)tpprof_dev.nevents);
    CHECK_MSG(b->alloc_seq == seq0 && b->free_seq == seq0 + 1, "the block carries both calls' seq");
    CHECK_MSG(b->free_kind == TPPROF_DEV_KIND_DEVICE && b->free_device == 2, "and the free's own kind and device");
    reset_state();
}

static void test_calls_the_block_cannot_hold_stay_rows(void) {
    // A stream-ordered free names its stream and pool: a row of its own.
    uint64_t r[TPPROF_DEVICE_WORDS] = {
        tpprof_hdr(0, TPPROF_OP_DEVICE, 0),
        (uint64_t)TPPROF_DEV_OP_ALLOC | (uint64_t)TPPROF_DEV_KIND_ASYNC << 8, 34, 0x900, 0x7100000, 512, 0,
        (uint64_t)(uintptr_t)"cudaMallocAsync", 30, UINT64_MAX};
    tpprof_device_apply(&thread, r, seq++);
    CHECK_MSG(tpprof_dev.nevents == 0, "the allocation is its block's (stream %llu, pool %#llx)",
              (unsigned long long)block_at(0x7100000)->stream, (unsigned long long)block_at(0x7100000)->pool);
    CHECK_MSG(block_at(0x7100000)->pool == 0x900 && block_at(0x7100000)->stream == 34, "with its stream and pool");
    r[1] = (uint64_t)TPPROF_DEV_OP_FREE | (uint64_t)TPPROF_DEV_KIND_ASYNC << 8;
    r[5] = 0;
    r[7] = (uint64_t)(uintptr_t)"cudaFreeAsync";
    r[8] = 31;
    tpprof_device_apply(&thread, r, seq++);
    CHECK_MSG(tpprof_dev.nevents == 1 && last_event()->op == TPPROF_DEV_OP_FREE && last_event()->stream == 34,
              "the stream-ordered free is a row, with its stream");
    CHECK_MSG(block_at(0x7100000)->free_ns == 31 && block_at(0x7100000)->free_seq == 0,
              "its block ended, without a free_seq");
    // VMM calls stay rows (their ops are not the view's 1 and 2).
    rec(TPPROF_DEV_OP_VA_RESERVE, TPPROF_DEV_KIND_VMM_RESERVE, -1, 0xb8000000, 1 << 20, 0, "cuMemAddressReserve", 32);
    CHECK_MSG(tpprof_dev.nevents == 2 && block_at(0xb8000000)->alloc_seq == 0, "a reservation is a row");
    rec(TPPROF_DEV_OP_VA_FREE, TPPROF_DEV_KIND_VMM_RESERVE, -1, 0xb8000000, 1 << 20, 0, "cuMemAddressFree", 33);
    CHECK_MSG(tpprof_dev.nevents == 3, "and its free");
    reset_state();
}

static void test_a_flush_is_due_once_many_rows_wait(void) {
    tpprof_cfg.full = true; // every block a row
    CHECK_MSG(!tpprof_device_flush_due(), "nothing waits: no flush due");
    uint64_t pairs = 0;
    while (!tpprof_device_flush_due() && pairs < 1000000) {
        rec(TPPROF_DEV_OP_ALLOC, TPPROF_DEV_KIND_DEVICE, 0, 0x10000000 + pairs * 256, 256, 0, "cudaMalloc", 100 + 2 * pairs);
        rec(TPPROF_DEV_OP_FREE, TPPROF_DEV_KIND_DEVICE, 0, 0x10000000 + pairs * 256, 0, 0, "cudaFree", 101 + 2 * pairs);
        pairs++;
    }
    CHECK_MSG(pairs == 262144, "due after 262,144 blocks made and ended unwritten, got %llu", (unsigned long long)pairs);
    reset_state(); // what the store does once it wrote them
    CHECK_MSG(!tpprof_device_flush_due(), "written: no flush due");
    // A block written alive counts again when it ends.
    rec(TPPROF_DEV_OP_ALLOC, TPPROF_DEV_KIND_DEVICE, 0, 0x7300000, 256, 0, "cudaMalloc", 1);
    CHECK_MSG(tpprof_dev.unwritten == 1, "a new block waits");
    reset_state();
    rec(TPPROF_DEV_OP_FREE, TPPROF_DEV_KIND_DEVICE, 0, 0x7300000, 0, 0, "cudaFree", 2);
    CHECK_MSG(tpprof_dev.unwritten == 1, "its end waits");
    reset_state();
    tpprof_cfg.full = false;
}

static const struct tpprof_dev_site *site_with(uint32_t stack, int kind, int32_t dev) {
    for (uint64_t i = 0; i < tpprof_dev.nsites; i++)
        if (tpprof_dev.sites[i].stack == stack && tpprof_dev.sites[i].kind == kind && tpprof_dev.sites[i].device == dev)
            return &tpprof_dev.sites[i];
    return NULL;
}

static void rec_stack(int op, int kind, int dev, uint64_t addr, uint64_t size, uint32_t stack, uint64_t time) {
    uint64_t r[TPPROF_DEVICE_WORDS] = {
        tpprof_hdr(0, TPPROF_OP_DEVICE, 0), (uint64_t)op | (uint64_t)kind << 8 | (uint64_t)(uint32_t)dev << 32, 0, 0,
        addr, size, (uint64_t)stack << 32, (uint64_t)(uintptr_t)(op == TPPROF_DEV_OP_ALLOC ? "cudaMalloc" : "cudaFree"),
        time, UINT64_MAX};
    tpprof_device_apply(&thread, r, seq++);
}

static void test_aggregate_mode_writes_a_site_not_a_row_per_block(void) {
    // A loop at one site: its first 1024 blocks are rows, the rest only
    // its totals; no flush ever becomes due, and the state stays small.
    uint64_t pairs = 0, ended_rows = 0;
    for (; pairs < 1000000; pairs++) {
        rec_stack(TPPROF_DEV_OP_ALLOC, TPPROF_DEV_KIND_DEVICE, 3, 0x20000000 + pairs * 512, 512, 41, 10 + 2 * pairs);
        rec_stack(TPPROF_DEV_OP_FREE, TPPROF_DEV_KIND_DEVICE, 3, 0x20000000 + pairs * 512, 0, 42, 11 + 2 * pairs);
        CHECK_MSG(!tpprof_device_flush_due(), "no flush due after %llu pairs", (unsigned long long)pairs);
        if (tpprof_device_flush_due()) break;
    }
    ended_rows = tpprof_dev.unwritten;
    CHECK_MSG(ended_rows == 1024, "1024 rows wait (the site's detail rows), got %llu", (unsigned long long)ended_rows);
    CHECK_MSG(tpprof_dev.nevents == 0, "no device_calls row");
    const struct tpprof_dev_site *s = site_with(41, TPPROF_DEV_KIND_DEVICE, 3);
    CHECK_MSG(s && s->alloc_count == 1000000 && s->alloc_bytes == 512000000 && s->free_count == 1000000 &&
                  s->freed_bytes == 512000000 && s->live_count == 0,
              "the site counts every pair");
    CHECK_MSG(tpprof_dev.capblocks <= 4096, "the state stays small: room for %llu blocks",
              (unsigned long long)tpprof_dev.capblocks);
    reset_state();
    // A quiet block alive at the end waits for the final flush (no row
    // before); one a reset ends is a row (a leak).
    rec_stack(TPPROF_DEV_OP_ALLOC, TPPROF_DEV_KIND_DEVICE, 3, 0x30000000, 4096, 41, 3000000);
    rec_stack(TPPROF_DEV_OP_ALLOC, TPPROF_DEV_KIND_DEVICE, 3, 0x30010000, 4096, 41, 3000001);
    const struct tpprof_dev_block *q = block_at(0x30000000);
    CHECK_MSG(q && q->quiet && !q->dirty && !q->stored && tpprof_dev.unwritten == 0, "a quiet block: no row yet");
    rec(TPPROF_DEV_OP_DEVICE_RESET, TPPROF_DEV_KIND_DEVICE, 3, 0, 0, 0, "cudaDeviceReset", 3000002);
    q = block_at(0x30000000);
    CHECK_MSG(q->dirty && q->ended_by && strcmp(q->ended_by, "device_reset") == 0 && tpprof_dev.unwritten == 2,
              "ended by the reset: both rows wait, got %llu", (unsigned long long)tpprof_dev.unwritten);
    s = site_with(41, TPPROF_DEV_KIND_DEVICE, 3);
    CHECK_MSG(s->free_count == 1000000 && s->live_count == 0, "a reset is no free");
    reset_state();
}

static void test_sites_keep_what_was_live_at_each_peak(void) {
    // Device 5: A 100 (t1), B 300 (t2) -> peak 400; A freed, then A 50:
    // device 5's peak holds A 100 + B 300. Device 6: C (1 TiB, past what
    // the earlier tests left) at t5 makes the all-devices peak: B 300, A 50, C.
    rec_stack(TPPROF_DEV_OP_ALLOC, TPPROF_DEV_KIND_DEVICE, 5, 0x40000000, 100, 51, 1);
    rec_stack(TPPROF_DEV_OP_ALLOC, TPPROF_DEV_KIND_DEVICE, 5, 0x40001000, 300, 52, 2);
    rec_stack(TPPROF_DEV_OP_FREE, TPPROF_DEV_KIND_DEVICE, 5, 0x40000000, 0, 51, 3);
    rec_stack(TPPROF_DEV_OP_ALLOC, TPPROF_DEV_KIND_DEVICE, 5, 0x40002000, 50, 51, 4);
    rec_stack(TPPROF_DEV_OP_ALLOC, TPPROF_DEV_KIND_DEVICE, 6, 0x40003000, 1ull << 40, 53, 5);
    rec_stack(TPPROF_DEV_OP_FREE, TPPROF_DEV_KIND_DEVICE, 6, 0x40003000, 0, 53, 6);
    int64_t a[4], b[4], c[4];
    tpprof_dev_site_peaks(site_with(51, TPPROF_DEV_KIND_DEVICE, 5), a);
    tpprof_dev_site_peaks(site_with(52, TPPROF_DEV_KIND_DEVICE, 5), b);
    tpprof_dev_site_peaks(site_with(53, TPPROF_DEV_KIND_DEVICE, 6), c);
    CHECK_MSG(tpprof_dev.scope_peak[5] == 400 && tpprof_dev.scope_peak_ns[5] == 2, "device 5 peaks at 400 at t2");
    CHECK_MSG(a[0] == 1 && a[1] == 100 && b[1] == 300, "device 5's peak: A 100 + B 300, got %lld + %lld",
              (long long)a[1], (long long)b[1]);
    CHECK_MSG(c[1] == 1ll << 40 && tpprof_dev.scope_peak[6] == 1ll << 40, "device 6's peak: C");
    int64_t total = tpprof_dev.scope_peak[TPPROF_DEV_SCOPE_TOTAL];
    CHECK_MSG(a[3] == 50 && b[3] == 300 && c[3] == 1ll << 40 && tpprof_dev.scope_peak_ns[TPPROF_DEV_SCOPE_TOTAL] == 5 &&
                  total >= (1ll << 40) + 350,
              "the all-devices peak: A 50 + B 300 + C (got %lld %lld %lld)", (long long)a[3], (long long)b[3],
              (long long)c[3]);
    rec_stack(TPPROF_DEV_OP_FREE, TPPROF_DEV_KIND_DEVICE, 5, 0x40001000, 0, 52, 7);
    rec_stack(TPPROF_DEV_OP_FREE, TPPROF_DEV_KIND_DEVICE, 5, 0x40002000, 0, 51, 8);
    tpprof_dev_site_peaks(site_with(51, TPPROF_DEV_KIND_DEVICE, 5), a);
    CHECK_MSG(a[1] == 100 && a[3] == 50, "frees after the peaks change no peak figure");
    tpprof_device_timeline_tick();
    reset_state();
}

static void test_a_forked_child_keeps_blocks_not_the_parents_calls(void) {
    rec(TPPROF_DEV_OP_ALLOC, TPPROF_DEV_KIND_DEVICE, 0, 0x7200000, 4096, 0, "cudaMalloc", 40);
    CHECK_MSG(block_at(0x7200000)->alloc_seq != 0, "the parent's allocation is its block's");
    tpprof_device_fork_child();
    CHECK_MSG(block_at(0x7200000)->alloc_seq == 0 && block_at(0x7200000)->dirty, "the child rewrites the block, without it");
    rec(TPPROF_DEV_OP_FREE, TPPROF_DEV_KIND_DEVICE, 0, 0x7200000, 0, 0, "cudaFree", 41);
    CHECK_MSG(block_at(0x7200000)->free_seq != 0 && live_blocks() == 0, "the child's free is");
    reset_state();
}

static void test_bad_frees_and_failures_are_flagged(void) {
    int64_t failed0 = tpprof_dev.calls_failed, bad0 = tpprof_dev.bad_frees;
    rec(TPPROF_DEV_OP_ALLOC, TPPROF_DEV_KIND_DEVICE, 0, 0x8000000, 4096, 0, "cudaMalloc", 1);
    rec(TPPROF_DEV_OP_FREE, TPPROF_DEV_KIND_DEVICE, 0, 0x8000000, 0, 0, "cudaFree", 2);
    rec(TPPROF_DEV_OP_FREE, TPPROF_DEV_KIND_DEVICE, 0, 0x8000000, 0, 1, "cudaFree", 3);
    CHECK_MSG(last_event()->flag == 1, "double free: flag 1");
    rec(TPPROF_DEV_OP_FREE, TPPROF_DEV_KIND_DEVICE, 0, 0xdead0000, 0, 1, "cudaFree", 4);
    CHECK_MSG(last_event()->flag == 2, "never given out: flag 2");
    // A host pointer: a live heap block of the program's.
    bool existed;
    struct tpprof_block *hb = tpprof_live_insert(&tpprof_w.live, 0x5550000, &existed);
    hb->size = 100;
    rec(TPPROF_DEV_OP_FREE, TPPROF_DEV_KIND_DEVICE, 0, 0x5550000, 0, 1, "cudaFree", 5);
    CHECK_MSG(last_event()->flag == 3, "host pointer: flag 3");
    // Pinned host memory through cudaFree: flag 3, and the block stays.
    rec(TPPROF_DEV_OP_ALLOC, TPPROF_DEV_KIND_PINNED_HOST, -1, 0x9000000, 8192, 0, "cudaMallocHost", 6);
    rec(TPPROF_DEV_OP_FREE, TPPROF_DEV_KIND_DEVICE, 0, 0x9000000, 0, 1, "cudaFree", 7);
    CHECK_MSG(last_event()->flag == 3 && live_blocks() == 1, "pinned memory through cudaFree: flag 3, still alive");
    rec(TPPROF_DEV_OP_FREE, TPPROF_DEV_KIND_PINNED_HOST, -1, 0x9000000, 0, 0, "cudaFreeHost", 8);
    CHECK_MSG(block_at(0x9000000)->free_seq == seq - 1 && block_at(0x9000000)->free_kind == TPPROF_DEV_KIND_PINNED_HOST &&
              live_blocks() == 0, "cudaFreeHost frees it (a good free: the block's)");
    // Out of memory: an event, no block.
    uint64_t blocks = tpprof_dev.nblocks;
    rec(TPPROF_DEV_OP_ALLOC, TPPROF_DEV_KIND_DEVICE, 0, 0, (uint64_t)4 << 30, 2, "cudaMalloc", 9);
    CHECK_MSG(last_event()->flag == 4 && tpprof_dev.nblocks == blocks, "out of memory: flag 4, no block");
    CHECK_MSG(tpprof_dev.allocated[0] == 0, "nothing counted for it");
    CHECK_MSG(tpprof_dev.calls_failed - failed0 == 5, "5 failed calls, got %lld", (long long)(tpprof_dev.calls_failed - failed0));
    CHECK_MSG(tpprof_dev.bad_frees - bad0 == 4, "4 bad frees, got %lld", (long long)(tpprof_dev.bad_frees - bad0));
    // A failed free of a live block leaves it alive.
    rec(TPPROF_DEV_OP_ALLOC, TPPROF_DEV_KIND_DEVICE, 0, 0xa000000, 4096, 0, "cudaMalloc", 10);
    rec(TPPROF_DEV_OP_FREE, TPPROF_DEV_KIND_DEVICE, 0, 0xa000000, 0, 999, "cudaFree", 11);
    CHECK_MSG(live_blocks() == 1 && last_event()->flag == 0, "a failed free ends nothing");
    rec(TPPROF_DEV_OP_FREE, TPPROF_DEV_KIND_DEVICE, 0, 0xa000000, 0, 0, "cudaFree", 12);
    reset_state();
}

static void test_vmm_memory_is_counted_once(void) {
    rec(TPPROF_DEV_OP_VA_RESERVE, TPPROF_DEV_KIND_VMM_RESERVE, -1, 0xb0000000, 8 << 20, 0, "cuMemAddressReserve", 1);
    rec(TPPROF_DEV_OP_PHYS_CREATE, TPPROF_DEV_KIND_VMM_PHYSICAL, 1, 0x5001, 2 << 20, 0, "cuMemCreate", 2);
    rec(TPPROF_DEV_OP_MAP, TPPROF_DEV_KIND_VMM_MAPPING, -1, 0xb0000000, 2 << 20, 0, "cuMemMap", 3);
    // The same handle mapped twice more (PyTorch maps one handle into
    // several views): still 2 MiB of memory.
    rec(TPPROF_DEV_OP_MAP, TPPROF_DEV_KIND_VMM_MAPPING, -1, 0xb0200000, 2 << 20, 0, "cuMemMap", 4);
    CHECK_MSG(tpprof_dev.allocated[1] == 2 << 20, "device 1: 2 MiB (the handle), not the mappings or the reservation");
    CHECK_MSG(live_blocks() == 4, "a reservation, a handle and two mappings");
    rec(TPPROF_DEV_OP_UNMAP, TPPROF_DEV_KIND_VMM_MAPPING, -1, 0xb0000000, 2 << 20, 0, "cuMemUnmap", 5);
    rec(TPPROF_DEV_OP_UNMAP, TPPROF_DEV_KIND_VMM_MAPPING, -1, 0xb0200000, 2 << 20, 0, "cuMemUnmap", 6);
    CHECK_MSG(tpprof_dev.allocated[1] == 2 << 20, "unmapping frees no memory");
    rec(TPPROF_DEV_OP_PHYS_RELEASE, TPPROF_DEV_KIND_VMM_PHYSICAL, -1, 0x5001, 0, 0, "cuMemRelease", 7);
    CHECK_MSG(tpprof_dev.allocated[1] == 0, "releasing the handle does");
    rec(TPPROF_DEV_OP_PHYS_RELEASE, TPPROF_DEV_KIND_VMM_PHYSICAL, -1, 0x5001, 0, 1, "cuMemRelease", 8);
    CHECK_MSG(last_event()->flag == 1, "a handle released twice: flag 1");
    rec(TPPROF_DEV_OP_VA_FREE, TPPROF_DEV_KIND_VMM_RESERVE, -1, 0xb0000000, 8 << 20, 0, "cuMemAddressFree", 9);
    CHECK_MSG(live_blocks() == 0, "all ended");
    reset_state();
}

static void test_resets_end_what_they_own(void) {
    rec(TPPROF_DEV_OP_ALLOC, TPPROF_DEV_KIND_DEVICE, 1, 0xc000000, 1000, 0, "cuMemAlloc_v2", 1);
    rec(TPPROF_DEV_OP_ALLOC, TPPROF_DEV_KIND_ASYNC, 1, 0xc100000, 2000, 0, "cuMemAllocAsync", 2);
    rec(TPPROF_DEV_OP_ALLOC, TPPROF_DEV_KIND_DEVICE, 0, 0xc200000, 3000, 0, "cuMemAlloc_v2", 3);
    rec(TPPROF_DEV_OP_ALLOC, TPPROF_DEV_KIND_PINNED_HOST, -1, 0xc300000, 4000, 0, "cuMemHostAlloc", 4);
    rec(TPPROF_DEV_OP_DEVICE_RESET, TPPROF_DEV_KIND_DEVICE, 1, 0, 0, 0, "cuCtxDestroy_v2", 5);
    CHECK_MSG(live_blocks() == 3 && tpprof_dev.allocated[1] == 2000,
          "a context's destruction ends its allocation, not the stream-ordered one");
    const char *why = NULL;
    for (uint64_t i = 0; i < tpprof_dev.nblocks; i++)
        if (tpprof_dev.blocks[i].address == 0xc000000) why = tpprof_dev.blocks[i].ended_by;
    CHECK_MSG(why && strcmp(why, "context_destroyed") == 0, "ended_by context_destroyed");
    rec(TPPROF_DEV_OP_DEVICE_RESET, TPPROF_DEV_KIND_DEVICE, 1, 0, 0, 0, "cudaDeviceReset", 6);
    CHECK_MSG(live_blocks() == 2 && tpprof_dev.allocated[1] == 0 && tpprof_dev.allocated[0] == 3000,
          "a device reset ends the rest of that device, nothing of device 0 or pinned memory");
    rec(TPPROF_DEV_OP_FREE, TPPROF_DEV_KIND_ASYNC, 1, 0xc100000, 0, 1, "cudaFreeAsync", 7);
    CHECK_MSG(last_event()->flag == 2, "a free after the reset is of a pointer no longer given out");
    rec(TPPROF_DEV_OP_FREE, TPPROF_DEV_KIND_DEVICE, 0, 0xc200000, 0, 0, "cuMemFree_v2", 8);
    rec(TPPROF_DEV_OP_FREE, TPPROF_DEV_KIND_PINNED_HOST, -1, 0xc300000, 0, 0, "cuMemFreeHost", 9);
    reset_state();
}

static void test_a_storage_backed_block_tells_the_ledger_its_end(void) {
    rec(TPPROF_DEV_OP_ALLOC, TPPROF_DEV_KIND_ASYNC, 0, 0xe000000, 4096, 0, "cudaMallocAsync", 1);
    uint64_t size = 0;
    uint16_t kind = 0;
    CHECK_MSG(!tpprof_device_block_at(0xe000010, &size, &kind), "only the block's start is its address");
    CHECK_MSG(tpprof_device_block_at(0xe000000, &size, &kind) && size == 4096 && kind == 14, "found: 4096 bytes, kind 14");
    rec(TPPROF_DEV_OP_FREE, TPPROF_DEV_KIND_ASYNC, 0, 0xe000000, 0, 0, "cudaFreeAsync", 42);
    CHECK_MSG(block_freed_addr == 0xe000000 && block_freed_ns == 42, "its free told the ledger");
    CHECK_MSG(!tpprof_device_block_at(0xe000000, &size, &kind), "gone once freed");
    reset_state();
}

static void test_state_stays_small_as_blocks_come_and_go(void) {
    for (int round = 0; round < 50; round++) {
        for (uint64_t i = 0; i < 1000; i++) {
            uint64_t a = 0x100000000ull + ((uint64_t)round * 1000 + i) * 4096;
            rec(TPPROF_DEV_OP_ALLOC, TPPROF_DEV_KIND_DEVICE, 0, a, 4096, 0, "cuMemAlloc_v2", 100);
            if (i != 0) rec(TPPROF_DEV_OP_FREE, TPPROF_DEV_KIND_DEVICE, 0, a, 0, 0, "cuMemFree_v2", 101);
        }
        reset_state(); // a flush wrote them
    }
    CHECK_MSG(tpprof_dev.capblocks <= 4096, "50,000 blocks made, %llu slots kept", (unsigned long long)tpprof_dev.capblocks);
    CHECK_MSG(live_blocks() == 50 && tpprof_dev.allocated[0] == 50 * 4096, "the 50 kept blocks still live");
    // Each can still be freed after the compactions moved it.
    for (int round = 0; round < 50; round++)
        rec(TPPROF_DEV_OP_FREE, TPPROF_DEV_KIND_DEVICE, 0, 0x100000000ull + (uint64_t)round * 1000 * 4096, 0, 0,
            "cuMemFree_v2", 102);
    CHECK_MSG(live_blocks() == 0 && tpprof_dev.allocated[0] == 0, "all freed");
    uint64_t rowid = 0;
    bool ascending = true;
    for (uint64_t i = 0; i < tpprof_dev.nblocks; i++) {
        ascending &= tpprof_dev.blocks[i].rowid > rowid;
        rowid = tpprof_dev.blocks[i].rowid;
    }
    CHECK_MSG(ascending, "rows keep their ids through compaction");
    reset_state();
}

static void test_timeline_keeps_exact_peaks_and_pools(void) {
    uint64_t t = 1000000000;
    rec(TPPROF_DEV_OP_ALLOC, TPPROF_DEV_KIND_DEVICE, 2, 0xd000000, 100, 0, "cudaMalloc", t);
    // Many changes within a millisecond: one row each for the new highs only.
    for (int i = 0; i < 100; i++) {
        rec(TPPROF_DEV_OP_ALLOC, TPPROF_DEV_KIND_DEVICE, 2, 0xd100000, 50, 0, "cudaMalloc", t + 10 + 2 * (uint64_t)i);
        rec(TPPROF_DEV_OP_FREE, TPPROF_DEV_KIND_DEVICE, 2, 0xd100000, 0, 0, "cudaFree", t + 11 + 2 * (uint64_t)i);
    }
    int64_t peak = 0;
    uint64_t rows = 0;
    for (uint64_t i = 0; i < tpprof_dev.nsamples; i++)
        if (tpprof_dev.samples[i].device == 2) {
            rows++;
            if (tpprof_dev.samples[i].allocated > peak) peak = tpprof_dev.samples[i].allocated;
        }
    CHECK_MSG(peak == 150, "the peak row is exact: %lld", (long long)peak);
    CHECK_MSG(rows <= 3, "200 changes within a millisecond: %llu rows", (unsigned long long)rows);
    tpprof_device_timeline_tick();
    CHECK_MSG(tpprof_dev.samples[tpprof_dev.nsamples - 1].allocated == 100, "the tick writes the last state");
    // A pool's reserved bytes.
    rec_full(TPPROF_DEV_OP_ALLOC, TPPROF_DEV_KIND_ASYNC, 2, 0xabc, 0xd200000, 64, 0, "cudaMallocAsync", t + 5000000,
             1 << 20);
    CHECK_MSG(tpprof_dev.samples[tpprof_dev.nsamples - 1].reserved == 1 << 20, "reserved from the pool's sample");
    rec_full(TPPROF_DEV_OP_POOL_DESTROY, TPPROF_DEV_KIND_ASYNC, -1, 0xabc, 0, 0, 0, "cudaMemPoolDestroy", t + 6000000,
             UINT64_MAX);
    rec(TPPROF_DEV_OP_FREE, TPPROF_DEV_KIND_ASYNC, 2, 0xd200000, 0, 0, "cudaFreeAsync", t + 7000000);
    CHECK_MSG(tpprof_dev.samples[tpprof_dev.nsamples - 1].reserved < 0, "no pool left: reserved unknown");
    rec(TPPROF_DEV_OP_FREE, TPPROF_DEV_KIND_DEVICE, 2, 0xd000000, 0, 0, "cudaFree", t + 8000000);
    reset_state();
}

int main(void) {
    RUN_TEST(test_a_block_lives_from_its_allocation_to_its_free);
    RUN_TEST(test_calls_the_block_cannot_hold_stay_rows);
    RUN_TEST(test_a_forked_child_keeps_blocks_not_the_parents_calls);
    RUN_TEST(test_aggregate_mode_writes_a_site_not_a_row_per_block);
    RUN_TEST(test_sites_keep_what_was_live_at_each_peak);
    RUN_TEST(test_bad_frees_and_failures_are_flagged);
    RUN_TEST(test_vmm_memory_is_counted_once);
    RUN_TEST(test_resets_end_what_they_own);
    RUN_TEST(test_a_storage_backed_block_tells_the_ledger_its_end);
    RUN_TEST(test_state_stays_small_as_blocks_come_and_go);
    RUN_TEST(test_timeline_keeps_exact_peaks_and_pools);
    RUN_TEST(test_a_flush_is_due_once_many_rows_wait); // last: it grows the block array past what the above allow
    return CHECK_DONE();
}
