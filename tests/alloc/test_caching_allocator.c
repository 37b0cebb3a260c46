/*
 * tests/alloc/test_caching_allocator.c - the caching allocator's policy,
 * pinned down with exact block layouts from snapshots and exact stats.
 *
 * The raw allocator is tests/alloc/fake_raw.h (real memory, a capacity to
 * provoke out-of-memory).  Sizes are written as KiB/MiB expressions so each
 * expected layout can be checked by hand against the rules in
 * include/tensorplay/caching_allocator.h.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdlib.h>

#include "../check.h"
#include "fake_raw.h"
#include "tensorplay/caching_allocator.h"

#define KIB ((uint64_t)1 << 10)
#define MIB ((uint64_t)1 << 20)

// ----------------------------------------------------------------------------
// helpers

static tp_caching_allocator *make(fake_raw *raw, uint64_t capacity, uint64_t max_split_mb,
                                  uint32_t divisions) {
    fake_raw_init(raw, capacity);
    tp_caching_allocator_config cfg;
    tp_caching_allocator_config_default(&cfg);
    if (max_split_mb) cfg.max_split_size = max_split_mb * MIB;
    cfg.roundup_power2_divisions = divisions;
    tp_caching_allocator *ca = tp_caching_allocator_new(&raw->vt, &cfg);
    if (!ca) {
        fprintf(stderr, "tp_caching_allocator_new: %s\n", tp_last_error());
        abort();
    }
    return ca;
}

static tp_data_ptr alloc_on(tp_caching_allocator *ca, size_t n, uint64_t stream) {
    tp_data_ptr dp;
    tp_status st = tp_caching_allocator_allocate(ca, n, stream, &dp);
    if (st != TP_STATUS_OK) {
        fprintf(stderr, "allocate(%zu): %s\n", n, tp_last_error());
        abort();
    }
    return dp;
}

static tp_data_ptr alloc(tp_caching_allocator *ca, size_t n) { return alloc_on(ca, n, 0); }

/* One expected block: size, requested (0 = free). */
typedef struct exp_block {
    uint64_t size, requested;
} exp_block;

/* Checks that segment `seg` (index in address order) has exactly these
 * blocks, that they tile it, and that allocated flags match requested. */
static void check_layout(tp_caching_allocator *ca, size_t seg, uint64_t total, bool small,
                         size_t n, const exp_block *exp, int line) {
    tp_caching_snapshot *s = tp_caching_allocator_snapshot(ca);
    CHECK(s != NULL);
    if (!s) return;
    if (seg >= s->nsegments) {
        fprintf(stderr, "line %d: no segment %zu (have %zu)\n", line, seg, s->nsegments);
        check_failures++;
        tp_caching_snapshot_free(s);
        return;
    }
    const tp_caching_segment_info *si = &s->segments[seg];
    int before = check_failures;
    CHECK_EQ_U64(si->total_size, total);
    CHECK(si->is_small_pool == small);
    CHECK_EQ_U64(si->nblocks, n);
    uint64_t addr = si->address, alloc_sum = 0;
    for (size_t i = 0; i < si->nblocks && i < n; i++) {
        CHECK_EQ_U64(si->blocks[i].address, addr);
        CHECK_EQ_U64(si->blocks[i].size, exp[i].size);
        CHECK_EQ_U64(si->blocks[i].requested_size, exp[i].requested);
        CHECK(si->blocks[i].allocated == (exp[i].requested != 0));
        if (si->blocks[i].allocated) alloc_sum += si->blocks[i].size;
        addr += si->blocks[i].size;
    }
    CHECK_EQ_U64(addr, si->address + si->total_size);
    CHECK_EQ_U64(si->allocated_size, alloc_sum);
    if (check_failures != before) fprintf(stderr, "  (layout checked at line %d)\n", line);
    tp_caching_snapshot_free(s);
}

#define LAYOUT(ca, seg, total, small, ...)                                               \
    do {                                                                                 \
        const exp_block e_[] = {__VA_ARGS__};                                            \
        check_layout(ca, seg, total, small, sizeof e_ / sizeof e_[0], e_, __LINE__);     \
    } while (0)

static size_t nsegments(tp_caching_allocator *ca) {
    tp_caching_snapshot *s = tp_caching_allocator_snapshot(ca);
    size_t n = s ? s->nsegments : 0;
    tp_caching_snapshot_free(s);
    return n;
}

// ----------------------------------------------------------------------------
// rounding and pools

static void test_requests_round_up_to_512_byte_multiples(void) {
    fake_raw raw;
    tp_caching_allocator *ca = make(&raw, 0, 0, 0);
    CHECK_EQ_U64(tp_caching_allocator_round_size(ca, 1), 512);
    CHECK_EQ_U64(tp_caching_allocator_round_size(ca, 512), 512);
    CHECK_EQ_U64(tp_caching_allocator_round_size(ca, 513), 1024);
    CHECK_EQ_U64(tp_caching_allocator_round_size(ca, 1200), 1536);
    CHECK_EQ_U64(tp_caching_allocator_round_size(ca, 3 * MIB + 1), 3 * MIB + 512);
    tp_caching_allocator_destroy(ca);
}

static void test_power2_divisions_round_to_steps_between_powers_of_two(void) {
    fake_raw raw;
    tp_caching_allocator *ca = make(&raw, 0, 0, 4);
    CHECK_EQ_U64(tp_caching_allocator_round_size(ca, 1200), 1280); /* 1024 + 256 */
    CHECK_EQ_U64(tp_caching_allocator_round_size(ca, 2048), 2048); /* a power of two stays */
    CHECK_EQ_U64(tp_caching_allocator_round_size(ca, 3000), 3072); /* steps of 512 above 2048 */
    CHECK_EQ_U64(tp_caching_allocator_round_size(ca, 600), 640);   /* steps of 128 above 512 */
    CHECK_EQ_U64(tp_caching_allocator_round_size(ca, 100), 512);   /* the minimum still holds */
    CHECK_EQ_U64(tp_caching_allocator_round_size(ca, 5 * MIB), 5 * MIB); /* 4M + 1M step */
    CHECK_EQ_U64(tp_caching_allocator_round_size(ca, 5 * MIB + 1), 6 * MIB);
    tp_caching_allocator_destroy(ca);
    /* 64 divisions of 512 would be 8-byte steps: clamped to 64 to keep alignment. */
    ca = make(&raw, 0, 0, 64);
    CHECK_EQ_U64(tp_caching_allocator_round_size(ca, 520), 576);
    tp_caching_allocator_destroy(ca);
}

static void test_small_request_is_carved_from_a_2mib_small_pool_segment(void) {
    fake_raw raw;
    tp_caching_allocator *ca = make(&raw, 0, 0, 0);
    tp_data_ptr a = alloc(ca, 1000);
    CHECK(a.ptr != NULL && a.ctx != NULL && a.deleter != NULL);
    CHECK_EQ_U64((uintptr_t)a.ptr % 64, 0);
    LAYOUT(ca, 0, 2 * MIB, true, {1024, 1000}, {2 * MIB - 1024, 0});
    tp_data_ptr b = alloc(ca, 1 * MIB); /* exactly 1 MiB is still small */
    LAYOUT(ca, 0, 2 * MIB, true, {1024, 1000}, {1 * MIB, 1 * MIB}, {1 * MIB - 1024, 0});
    CHECK_EQ_U64(raw.allocs, 1);
    tp_data_ptr_clear(&a);
    tp_data_ptr_clear(&b);
    tp_caching_allocator_destroy(ca);
    CHECK_EQ_U64(raw.frees, 1);
}

static void test_medium_request_gets_a_20mib_large_pool_segment(void) {
    fake_raw raw;
    tp_caching_allocator *ca = make(&raw, 0, 0, 0);
    tp_data_ptr a = alloc(ca, 1 * MIB + 1);
    LAYOUT(ca, 0, 20 * MIB, false, {1 * MIB + 512, 1 * MIB + 1}, {19 * MIB - 512, 0});
    tp_data_ptr_clear(&a);
    tp_caching_allocator_destroy(ca);
}

static void test_request_of_10mib_or_more_gets_its_own_segment_rounded_to_2mib(void) {
    fake_raw raw;
    tp_caching_allocator *ca = make(&raw, 0, 0, 0);
    /* 11 MiB -> a 12 MiB segment; the 1 MiB rest is not > 1 MiB, so no split. */
    tp_data_ptr a = alloc(ca, 11 * MIB);
    LAYOUT(ca, 0, 12 * MIB, false, {12 * MIB, 11 * MIB});
    tp_caching_allocator_stats st;
    tp_caching_allocator_get_stats(ca, &st);
    CHECK_EQ_U64(st.allocated_bytes.current, 12 * MIB);
    CHECK_EQ_U64(st.requested_bytes.current, 11 * MIB);
    tp_data_ptr_clear(&a);
    tp_caching_allocator_destroy(ca);
}

// ----------------------------------------------------------------------------
// split and merge

static void test_small_pool_splits_when_the_remainder_is_at_least_512(void) {
    fake_raw raw;
    tp_caching_allocator *ca = make(&raw, 0, 0, 0);
    tp_data_ptr a = alloc(ca, 1 * MIB);
    tp_data_ptr b = alloc(ca, 1 * MIB - 512); /* leaves exactly 512: split */
    LAYOUT(ca, 0, 2 * MIB, true, {1 * MIB, 1 * MIB}, {1 * MIB - 512, 1 * MIB - 512}, {512, 0});
    tp_data_ptr c = alloc(ca, 1); /* takes the 512 block whole */
    LAYOUT(ca, 0, 2 * MIB, true, {1 * MIB, 1 * MIB}, {1 * MIB - 512, 1 * MIB - 512}, {512, 1});
    CHECK_EQ_U64(nsegments(ca), 1);
    tp_data_ptr_clear(&a);
    tp_data_ptr_clear(&b);
    tp_data_ptr_clear(&c);
    tp_caching_allocator_destroy(ca);
}

static void test_large_pool_splits_only_when_the_remainder_is_over_1mib(void) {
    fake_raw raw;
    tp_caching_allocator *ca = make(&raw, 0, 0, 0);
    tp_data_ptr a = alloc(ca, 2 * MIB);
    LAYOUT(ca, 0, 20 * MIB, false, {2 * MIB, 2 * MIB}, {18 * MIB, 0});
    tp_data_ptr b = alloc(ca, 17 * MIB); /* rest would be exactly 1 MiB: no split */
    LAYOUT(ca, 0, 20 * MIB, false, {2 * MIB, 2 * MIB}, {18 * MIB, 17 * MIB});
    tp_data_ptr_clear(&b);
    tp_data_ptr c = alloc(ca, 17 * MIB - 512); /* rest 1 MiB + 512: split */
    LAYOUT(ca, 0, 20 * MIB, false, {2 * MIB, 2 * MIB}, {17 * MIB - 512, 17 * MIB - 512},
           {1 * MIB + 512, 0});
    tp_data_ptr_clear(&a);
    tp_data_ptr_clear(&c);
    tp_caching_allocator_destroy(ca);
}

static void test_large_pool_does_not_split_for_requests_at_max_split_size(void) {
    fake_raw raw;
    tp_caching_allocator *ca = make(&raw, 0, 32, 0);
    tp_data_ptr a = alloc(ca, 40 * MIB);
    tp_data_ptr_clear(&a);
    /* 34 MiB >= max_split (32): takes the cached 40 MiB block (< 34 + 20) whole. */
    tp_data_ptr b = alloc(ca, 34 * MIB);
    LAYOUT(ca, 0, 40 * MIB, false, {40 * MIB, 34 * MIB});
    CHECK_EQ_U64(raw.allocs, 1);
    tp_data_ptr_clear(&b);
    tp_caching_allocator_destroy(ca);
}

static void test_freed_blocks_merge_with_free_neighbours(void) {
    fake_raw raw;
    tp_caching_allocator *ca = make(&raw, 0, 0, 0);
    tp_data_ptr a = alloc(ca, 4 * KIB), b = alloc(ca, 8 * KIB), c = alloc(ca, 16 * KIB);
    const uint64_t rest = 2 * MIB - 28 * KIB;
    LAYOUT(ca, 0, 2 * MIB, true, {4 * KIB, 4 * KIB}, {8 * KIB, 8 * KIB}, {16 * KIB, 16 * KIB},
           {rest, 0});
    tp_data_ptr_clear(&b); /* neighbours allocated: stays alone */
    LAYOUT(ca, 0, 2 * MIB, true, {4 * KIB, 4 * KIB}, {8 * KIB, 0}, {16 * KIB, 16 * KIB},
           {rest, 0});
    tp_data_ptr_clear(&a); /* merges forward with b */
    LAYOUT(ca, 0, 2 * MIB, true, {12 * KIB, 0}, {16 * KIB, 16 * KIB}, {rest, 0});
    tp_data_ptr_clear(&c); /* merges both ways: the whole segment again */
    LAYOUT(ca, 0, 2 * MIB, true, {2 * MIB, 0});
    tp_caching_allocator_destroy(ca);
}

static void test_large_pool_blocks_merge_too(void) {
    fake_raw raw;
    tp_caching_allocator *ca = make(&raw, 0, 0, 0);
    tp_data_ptr a = alloc(ca, 2 * MIB), b = alloc(ca, 3 * MIB);
    LAYOUT(ca, 0, 20 * MIB, false, {2 * MIB, 2 * MIB}, {3 * MIB, 3 * MIB}, {15 * MIB, 0});
    tp_data_ptr_clear(&b);
    LAYOUT(ca, 0, 20 * MIB, false, {2 * MIB, 2 * MIB}, {18 * MIB, 0});
    tp_data_ptr_clear(&a);
    LAYOUT(ca, 0, 20 * MIB, false, {20 * MIB, 0});
    tp_caching_allocator_destroy(ca);
}

// ----------------------------------------------------------------------------
// reuse

static void test_best_fit_takes_the_smallest_block_that_fits(void) {
    fake_raw raw;
    tp_caching_allocator *ca = make(&raw, 0, 0, 0);
    tp_data_ptr a = alloc(ca, 4 * KIB), x1 = alloc(ca, 512);
    tp_data_ptr b = alloc(ca, 16 * KIB), x2 = alloc(ca, 512);
    tp_data_ptr c = alloc(ca, 8 * KIB), x3 = alloc(ca, 512);
    void *c_addr = c.ptr;
    tp_data_ptr_clear(&a);
    tp_data_ptr_clear(&b);
    tp_data_ptr_clear(&c);
    /* Free: 4K, 16K, 8K (+ the tail).  6K fits 8K best. */
    tp_data_ptr d = alloc(ca, 6 * KIB);
    CHECK(d.ptr == c_addr);
    LAYOUT(ca, 0, 2 * MIB, true, {4 * KIB, 0}, {512, 512}, {16 * KIB, 0}, {512, 512},
           {6 * KIB, 6 * KIB}, {2 * KIB, 0}, {512, 512}, {2 * MIB - 28 * KIB - 1536, 0});
    /* Now the 2K remainder is the tightest fit. */
    tp_data_ptr e = alloc(ca, 2 * KIB);
    CHECK((char *)e.ptr == (char *)c_addr + 6 * KIB);
    tp_data_ptr *all[] = {&x1, &x2, &x3, &d, &e};
    for (size_t i = 0; i < 5; i++) tp_data_ptr_clear(all[i]);
    tp_caching_allocator_destroy(ca);
}

static void test_freed_block_is_reused_for_the_same_size(void) {
    fake_raw raw;
    tp_caching_allocator *ca = make(&raw, 0, 0, 0);
    tp_data_ptr a = alloc(ca, 3000);
    void *p = a.ptr;
    tp_data_ptr_clear(&a);
    tp_data_ptr b = alloc(ca, 2900); /* same rounded size */
    CHECK(b.ptr == p);
    CHECK_EQ_U64(raw.allocs, 1);
    tp_data_ptr_clear(&b);
    tp_caching_allocator_destroy(ca);
}

static void test_streams_never_share_cached_blocks(void) {
    fake_raw raw;
    tp_caching_allocator *ca = make(&raw, 0, 0, 0);
    tp_data_ptr a = alloc_on(ca, 1000, 1);
    void *p1 = a.ptr;
    tp_data_ptr_clear(&a);
    tp_data_ptr b = alloc_on(ca, 1000, 2); /* stream 1's cache is not for stream 2 */
    CHECK(b.ptr != p1);
    CHECK_EQ_U64(nsegments(ca), 2);
    tp_data_ptr c = alloc_on(ca, 1000, 1);
    CHECK(c.ptr == p1);
    tp_caching_snapshot *s = tp_caching_allocator_snapshot(ca);
    CHECK(s && s->nsegments == 2);
    if (s && s->nsegments == 2) {
        uint64_t s0 = s->segments[0].stream, s1 = s->segments[1].stream;
        CHECK((s0 == 1 && s1 == 2) || (s0 == 2 && s1 == 1));
    }
    tp_caching_snapshot_free(s);
    tp_data_ptr_clear(&b);
    tp_data_ptr_clear(&c);
    tp_caching_allocator_destroy(ca);
}

static void test_request_below_max_split_never_takes_an_oversize_block(void) {
    fake_raw raw;
    tp_caching_allocator *ca = make(&raw, 0, 32, 0);
    tp_data_ptr big = alloc(ca, 40 * MIB);
    void *big_addr = big.ptr;
    tp_data_ptr_clear(&big);
    tp_data_ptr a = alloc(ca, 12 * MIB); /* below 32 MiB: the cached 40 MiB block is off limits */
    CHECK(a.ptr != big_addr);
    CHECK_EQ_U64(nsegments(ca), 2);
    CHECK_EQ_U64(raw.allocs, 2);
    tp_data_ptr_clear(&a);
    tp_caching_allocator_destroy(ca);
}

static void test_oversize_request_takes_a_cached_block_only_within_20mib(void) {
    fake_raw raw;
    tp_caching_allocator *ca = make(&raw, 0, 32, 0);
    tp_data_ptr big = alloc(ca, 64 * MIB);
    void *big_addr = big.ptr;
    tp_data_ptr_clear(&big);
    tp_data_ptr a = alloc(ca, 40 * MIB); /* 64 >= 40 + 20: refused, new segment */
    CHECK(a.ptr != big_addr);
    CHECK_EQ_U64(raw.allocs, 2);
    tp_data_ptr_clear(&a);
    tp_data_ptr b = alloc(ca, 50 * MIB); /* best fit is 64 (40 is too small); 64 < 70: taken */
    CHECK(b.ptr == big_addr);
    CHECK_EQ_U64(raw.allocs, 2);
    tp_caching_allocator_stats st;
    tp_caching_allocator_get_stats(ca, &st);
    CHECK_EQ_U64(st.allocated_bytes.current, 64 * MIB);
    CHECK_EQ_U64(st.requested_bytes.current, 50 * MIB);
    tp_data_ptr_clear(&b);
    tp_caching_allocator_destroy(ca);
}

// ----------------------------------------------------------------------------
// empty_cache, stats

static void test_empty_cache_returns_only_wholly_free_segments(void) {
    fake_raw raw;
    tp_caching_allocator *ca = make(&raw, 0, 0, 0);
    tp_data_ptr a = alloc(ca, 1000);        /* small segment, stays in use */
    tp_data_ptr b = alloc(ca, 2 * MIB);     /* large segment */
    tp_data_ptr_clear(&b);
    CHECK_EQ_U64(nsegments(ca), 2);
    tp_caching_allocator_empty_cache(ca);
    CHECK_EQ_U64(nsegments(ca), 1);
    CHECK_EQ_U64(raw.frees, 1);
    CHECK_EQ_U64(raw.live_bytes, 2 * MIB);
    tp_caching_allocator_stats st;
    tp_caching_allocator_get_stats(ca, &st);
    CHECK_EQ_U64(st.reserved_bytes.current, 2 * MIB);
    CHECK_EQ_U64(st.reserved_bytes.peak, 22 * MIB);
    CHECK_EQ_U64(st.segment.current, 1);
    tp_data_ptr_clear(&a);
    tp_caching_allocator_empty_cache(ca);
    CHECK_EQ_U64(nsegments(ca), 0);
    CHECK_EQ_U64(raw.live_bytes, 0);
    tp_caching_allocator_destroy(ca);
}

static void test_stats_follow_a_scripted_sequence_exactly(void) {
    fake_raw raw;
    tp_caching_allocator *ca = make(&raw, 0, 0, 0);
    tp_caching_allocator_stats st;
    tp_data_ptr a = alloc(ca, 1000); /* 1024 */
    tp_data_ptr b = alloc(ca, 3000); /* 3072 */
    tp_caching_allocator_get_stats(ca, &st);
    CHECK_EQ_U64(st.allocation.current, 2);
    CHECK_EQ_U64(st.active.current, 2);
    CHECK_EQ_U64(st.segment.current, 1);
    CHECK_EQ_U64(st.allocated_bytes.current, 4096);
    CHECK_EQ_U64(st.active_bytes.current, 4096);
    CHECK_EQ_U64(st.reserved_bytes.current, 2 * MIB);
    CHECK_EQ_U64(st.requested_bytes.current, 4000);
    CHECK_EQ_U64(st.inactive_split.current, 1); /* the tail */
    CHECK_EQ_U64(st.inactive_split_bytes.current, 2 * MIB - 4096);
    CHECK_EQ_U64(st.inactive_split_bytes.peak, 2 * MIB - 1024); /* after a alone */

    tp_data_ptr_clear(&a); /* a's block free next to allocated b: inactive split */
    tp_caching_allocator_get_stats(ca, &st);
    CHECK_EQ_U64(st.allocation.current, 1);
    CHECK_EQ_U64(st.allocated_bytes.current, 3072);
    CHECK_EQ_U64(st.requested_bytes.current, 3000);
    CHECK_EQ_U64(st.inactive_split.current, 2);
    CHECK_EQ_U64(st.inactive_split.peak, 2);
    CHECK_EQ_U64(st.inactive_split_bytes.current, 2 * MIB - 4096 + 1024);

    tp_data_ptr_clear(&b); /* everything merges into one unsplit block */
    tp_caching_allocator_get_stats(ca, &st);
    CHECK_EQ_U64(st.allocation.current, 0);
    CHECK_EQ_U64(st.allocation.peak, 2);
    CHECK_EQ_U64(st.allocation.allocated, 2);
    CHECK_EQ_U64(st.allocation.freed, 2);
    CHECK_EQ_U64(st.active.peak, 2);
    CHECK_EQ_U64(st.allocated_bytes.current, 0);
    CHECK_EQ_U64(st.allocated_bytes.peak, 4096);
    CHECK_EQ_U64(st.active_bytes.peak, 4096);
    CHECK_EQ_U64(st.requested_bytes.peak, 4000);
    CHECK_EQ_U64(st.inactive_split.current, 0);
    CHECK_EQ_U64(st.inactive_split_bytes.current, 0);
    CHECK_EQ_U64(st.reserved_bytes.current, 2 * MIB); /* cached, not returned */
    CHECK_EQ_U64(st.num_alloc_retries, 0);
    CHECK_EQ_U64(st.num_ooms, 0);

    tp_caching_allocator_reset_peak_stats(ca);
    tp_caching_allocator_get_stats(ca, &st);
    CHECK_EQ_U64(st.allocated_bytes.peak, 0);
    CHECK_EQ_U64(st.inactive_split.peak, 0);
    CHECK_EQ_U64(st.reserved_bytes.peak, 2 * MIB);
    CHECK_EQ_U64(st.allocation.allocated, 2); /* totals survive a peak reset */

    tp_caching_allocator_empty_cache(ca);
    tp_caching_allocator_get_stats(ca, &st);
    CHECK_EQ_U64(st.reserved_bytes.current, 0);
    CHECK_EQ_U64(st.segment.freed, 1);
    tp_caching_allocator_destroy(ca);
}

static void test_vtable_stats_report_allocated_bytes(void) {
    fake_raw raw;
    tp_caching_allocator *ca = make(&raw, 0, 0, 0);
    tp_allocator *vt = tp_caching_allocator_as_allocator(ca);
    CHECK_STR_EQ(vt->name, "caching");
    tp_data_ptr a;
    CHECK(tp_allocator_allocate(vt, 700, &a) == TP_STATUS_OK);
    tp_allocator_stats s;
    tp_allocator_get_stats(vt, &s);
    CHECK_EQ_U64(s.current_bytes, 1024);
    CHECK_EQ_U64(s.current_count, 1);
    CHECK_EQ_U64(s.alloc_count, 1);
    tp_data_ptr_clear(&a);
    tp_allocator_get_stats(vt, &s);
    CHECK_EQ_U64(s.current_bytes, 0);
    CHECK_EQ_U64(s.peak_bytes, 1024);
    CHECK_EQ_U64(s.free_count, 1);
    tp_caching_allocator_destroy(ca);
}

static void test_storage_memory_comes_back_to_the_cache(void) {
    fake_raw raw;
    tp_caching_allocator *ca = make(&raw, 0, 0, 0);
    tp_storage *s = tp_storage_new(5000, tp_caching_allocator_as_allocator(ca), false);
    CHECK(s != NULL);
    void *p = s ? tp_storage_data(s) : NULL;
    LAYOUT(ca, 0, 2 * MIB, true, {5120, 5000}, {2 * MIB - 5120, 0});
    tp_storage_release(s);
    LAYOUT(ca, 0, 2 * MIB, true, {2 * MIB, 0});
    tp_storage *t = tp_storage_new(5100, tp_caching_allocator_as_allocator(ca), false);
    CHECK(t && tp_storage_data(t) == p);
    tp_storage_release(t);
    tp_caching_allocator_destroy(ca);
    CHECK_EQ_U64(raw.live_bytes, 0);
}

static void test_resizing_a_storage_moves_it_to_a_new_block(void) {
    fake_raw raw;
    tp_caching_allocator *ca = make(&raw, 0, 0, 0);
    tp_storage *s = tp_storage_new(1000, tp_caching_allocator_as_allocator(ca), true);
    CHECK(s != NULL);
    if (!s) return;
    memset(tp_storage_data(s), 0x5A, 1000);
    CHECK(tp_storage_resize(s, 3000) == TP_STATUS_OK);
    CHECK(((unsigned char *)tp_storage_data(s))[999] == 0x5A);
    /* The old 1024-byte block went back and sits free in front of the new one. */
    LAYOUT(ca, 0, 2 * MIB, true, {1024, 0}, {3072, 3000}, {2 * MIB - 4096, 0});
    tp_storage_release(s);
    tp_caching_allocator_destroy(ca);
    CHECK_EQ_U64(raw.live_bytes, 0);
}

static void test_zero_byte_request_gives_null_and_no_ctx(void) {
    fake_raw raw;
    tp_caching_allocator *ca = make(&raw, 0, 0, 0);
    tp_data_ptr dp;
    CHECK(tp_caching_allocator_allocate(ca, 0, 0, &dp) == TP_STATUS_OK);
    CHECK(dp.ptr == NULL && dp.ctx == NULL);
    CHECK_EQ_U64(raw.allocs, 0);
    tp_caching_allocator_destroy(ca);
}

// ----------------------------------------------------------------------------
// out of memory

static void test_raw_failure_frees_cached_segments_and_retries(void) {
    fake_raw raw;
    tp_caching_allocator *ca = make(&raw, 21 * MIB, 0, 0);
    tp_data_ptr a = alloc(ca, 1000);
    tp_data_ptr_clear(&a); /* 2 MiB cached */
    tp_data_ptr b = alloc(ca, 5 * MIB); /* 2 + 20 > 21: fails once, cache freed, retried */
    CHECK(b.ptr != NULL);
    CHECK_EQ_U64(raw.failures, 1);
    CHECK_EQ_U64(nsegments(ca), 1);
    tp_caching_allocator_stats st;
    tp_caching_allocator_get_stats(ca, &st);
    CHECK_EQ_U64(st.num_alloc_retries, 1);
    CHECK_EQ_U64(st.num_ooms, 0);
    CHECK_EQ_U64(st.reserved_bytes.current, 20 * MIB);
    tp_data_ptr_clear(&b);
    tp_caching_allocator_destroy(ca);
}

static void test_raw_failure_frees_oversize_segments_first(void) {
    fake_raw raw;
    tp_caching_allocator *ca = make(&raw, 70 * MIB, 32, 0);
    tp_data_ptr small = alloc(ca, 1000);
    tp_data_ptr_clear(&small);           /* 2 MiB cached, not oversize */
    tp_data_ptr big = alloc(ca, 40 * MIB);
    tp_data_ptr_clear(&big);             /* 40 MiB cached, oversize */
    tp_data_ptr c = alloc(ca, 12 * MIB); /* below max_split: cannot use the 40 MiB block */
    CHECK(c.ptr != NULL);
    /* 2 + 40 + 12 = 54 <= 70: no failure yet.  Now 20 more: 74 > 70. */
    tp_data_ptr d = alloc(ca, 20 * MIB);
    CHECK(d.ptr != NULL);
    CHECK_EQ_U64(raw.failures, 1);
    tp_caching_snapshot *s = tp_caching_allocator_snapshot(ca);
    /* The oversize block went; the small cached segment survived. */
    CHECK(s && s->nsegments == 3);
    size_t small_segments = 0;
    for (size_t i = 0; s && i < s->nsegments; i++) small_segments += s->segments[i].is_small_pool;
    CHECK_EQ_U64(small_segments, 1);
    tp_caching_snapshot_free(s);
    tp_data_ptr_clear(&c);
    tp_data_ptr_clear(&d);
    tp_caching_allocator_destroy(ca);
}

static void test_out_of_memory_is_an_error_with_a_clear_message(void) {
    fake_raw raw;
    tp_caching_allocator *ca = make(&raw, 21 * MIB, 0, 0);
    tp_data_ptr a = alloc(ca, 1000); /* held: nothing to free */
    tp_data_ptr b = {.ptr = (void *)1};
    CHECK(tp_caching_allocator_allocate(ca, 5 * MIB, 7, &b) == TP_STATUS_OUT_OF_MEMORY);
    CHECK(b.ptr == NULL && b.ctx == NULL && b.deleter == NULL);
    CHECK(tp_last_status() == TP_STATUS_OUT_OF_MEMORY);
    CHECK_CONTAINS(tp_last_error(), "caching allocator: out of memory allocating 5242880 bytes");
    CHECK_CONTAINS(tp_last_error(), "on stream 7");
    CHECK_CONTAINS(tp_last_error(), "2097152 bytes reserved, 1024 allocated");
    CHECK_CONTAINS(tp_last_error(), "raw allocator 'fake' failed: fake device full");
    tp_caching_allocator_stats st;
    tp_caching_allocator_get_stats(ca, &st);
    CHECK_EQ_U64(st.num_ooms, 1);
    CHECK_EQ_U64(st.num_alloc_retries, 1);
    CHECK_EQ_U64(st.allocation.current, 1);
    /* An absurd request fails cleanly too. */
    CHECK(tp_caching_allocator_allocate(ca, SIZE_MAX, 0, &b) == TP_STATUS_OUT_OF_MEMORY);
    tp_data_ptr_clear(&a);
    tp_caching_allocator_destroy(ca);
}

// ----------------------------------------------------------------------------
// observer events

typedef struct seen {
    uint32_t action;
    uint64_t block, block_size, requested, stream;
} seen;
static seen events[64];
static size_t nevents;

static void on_event(void *user, const tp_obs_event *ev) {
    (void)user;
    if (ev->kind != TP_OBS_ALLOCATOR || nevents == 64) return;
    const tp_obs_allocator_event *e = &ev->u.allocator;
    if (strcmp(e->allocator, "caching") != 0) return;
    events[nevents++] = (seen){e->action, e->block, e->block_size, e->requested, e->stream};
}

static void test_observer_sees_segments_and_block_lifecycle(void) {
    static const tp_observer obs = {
        .abi_version = TP_OBSERVER_ABI_VERSION, .struct_size = sizeof obs, .on_event = on_event,
    };
    fake_raw raw;
    tp_caching_allocator *ca = make(&raw, 0, 0, 0);
    nevents = 0;
    CHECK(tp_observer_set(&obs) == 0);
    tp_data_ptr a = alloc_on(ca, 1000, 3);
    tp_data_ptr_clear(&a);
    tp_caching_allocator_empty_cache(ca);
    tp_observer_set(NULL);
    const uint32_t want[] = {
        TP_OBS_ALLOC_SEGMENT_RESERVE, TP_OBS_ALLOC_BLOCK_SPLIT, TP_OBS_ALLOC_BLOCK_ALLOC,
        TP_OBS_ALLOC_BLOCK_FREE,      TP_OBS_ALLOC_BLOCK_MERGE, TP_OBS_ALLOC_SEGMENT_RELEASE,
    };
    CHECK_EQ_U64(nevents, 6);
    for (size_t i = 0; i < 6 && i < nevents; i++) CHECK_EQ_U64(events[i].action, want[i]);
    if (nevents == 6) {
        CHECK_EQ_U64(events[0].block_size, 2 * MIB);
        CHECK_EQ_U64(events[1].block_size, 2 * MIB - 1024); /* the free remainder */
        CHECK_EQ_U64(events[2].block_size, 1024);
        CHECK_EQ_U64(events[2].requested, 1000);
        CHECK_EQ_U64(events[2].stream, 3);
        CHECK_EQ_U64(events[3].requested, 1000);
        CHECK_EQ_U64(events[4].block_size, 2 * MIB);
        CHECK_EQ_U64(events[2].block, events[0].block);
    }
    tp_caching_allocator_destroy(ca);
}

// ----------------------------------------------------------------------------
// lifetime and threads

static void test_destroy_waits_for_live_blocks(void) {
    fake_raw raw;
    tp_caching_allocator *ca = make(&raw, 0, 0, 0);
    tp_data_ptr a = alloc(ca, 1000);
    tp_data_ptr b = alloc(ca, 3 * MIB);
    tp_data_ptr_clear(&b);
    tp_caching_allocator_destroy(ca); /* the large segment goes now, the small one waits */
    CHECK_EQ_U64(raw.live_bytes, 2 * MIB);
    tp_data_ptr_clear(&a);
    CHECK_EQ_U64(raw.live_bytes, 0);
    CHECK_EQ_U64(raw.frees, 2);
}

typedef struct worker_arg {
    tp_caching_allocator *ca;
    unsigned seed;
    uint64_t stream;
} worker_arg;

static void *worker(void *p) {
    worker_arg *w = p;
    tp_data_ptr live[16] = {0};
    unsigned x = w->seed;
    for (int i = 0; i < 3000; i++) {
        x = x * 1103515245u + 12345u;
        size_t slot = (x >> 8) % 16;
        if (live[slot].ctx) {
            tp_data_ptr_clear(&live[slot]);
        } else {
            size_t n = 1 + (x >> 12) % (3 * MIB);
            if (tp_caching_allocator_allocate(w->ca, n, w->stream, &live[slot]) != TP_STATUS_OK)
                abort();
            memset(live[slot].ptr, 0xAB, n < 64 ? n : 64); /* the memory is really ours */
        }
    }
    for (size_t i = 0; i < 16; i++) tp_data_ptr_clear(&live[i]);
    return NULL;
}

static void test_concurrent_threads_keep_the_books_balanced(void) {
    fake_raw raw;
    tp_caching_allocator *ca = make(&raw, 0, 0, 0);
    pthread_t th[4];
    worker_arg args[4];
    for (int i = 0; i < 4; i++) {
        args[i] = (worker_arg){ca, 17u * (unsigned)i + 1, (uint64_t)(i % 2)};
        pthread_create(&th[i], NULL, worker, &args[i]);
    }
    for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
    tp_caching_allocator_stats st;
    tp_caching_allocator_get_stats(ca, &st);
    CHECK_EQ_U64(st.allocation.current, 0);
    CHECK_EQ_U64(st.allocated_bytes.current, 0);
    CHECK_EQ_U64(st.requested_bytes.current, 0);
    CHECK_EQ_U64(st.inactive_split.current, 0); /* all merged back */
    CHECK_EQ_U64(st.allocation.allocated, st.allocation.freed);
    tp_caching_snapshot *s = tp_caching_allocator_snapshot(ca);
    for (size_t i = 0; s && i < s->nsegments; i++) {
        CHECK_EQ_U64(s->segments[i].nblocks, 1);
        CHECK(!s->segments[i].blocks[0].allocated);
    }
    tp_caching_snapshot_free(s);
    tp_caching_allocator_destroy(ca);
    CHECK_EQ_U64(raw.live_bytes, 0);
}

int main(void) {
    RUN(test_requests_round_up_to_512_byte_multiples);
    RUN(test_power2_divisions_round_to_steps_between_powers_of_two);
    RUN(test_small_request_is_carved_from_a_2mib_small_pool_segment);
    RUN(test_medium_request_gets_a_20mib_large_pool_segment);
    RUN(test_request_of_10mib_or_more_gets_its_own_segment_rounded_to_2mib);
    RUN(test_small_pool_splits_when_the_remainder_is_at_least_512);
    RUN(test_large_pool_splits_only_when_the_remainder_is_over_1mib);
    RUN(test_large_pool_does_not_split_for_requests_at_max_split_size);
    RUN(test_freed_blocks_merge_with_free_neighbours);
    RUN(test_large_pool_blocks_merge_too);
    RUN(test_best_fit_takes_the_smallest_block_that_fits);
    RUN(test_freed_block_is_reused_for_the_same_size);
    RUN(test_streams_never_share_cached_blocks);
    RUN(test_request_below_max_split_never_takes_an_oversize_block);
    RUN(test_oversize_request_takes_a_cached_block_only_within_20mib);
    RUN(test_empty_cache_returns_only_wholly_free_segments);
    RUN(test_stats_follow_a_scripted_sequence_exactly);
    RUN(test_vtable_stats_report_allocated_bytes);
    RUN(test_storage_memory_comes_back_to_the_cache);
    RUN(test_resizing_a_storage_moves_it_to_a_new_block);
    RUN(test_zero_byte_request_gives_null_and_no_ctx);
    RUN(test_raw_failure_frees_cached_segments_and_retries);
    RUN(test_raw_failure_frees_oversize_segments_first);
    RUN(test_out_of_memory_is_an_error_with_a_clear_message);
    RUN(test_observer_sees_segments_and_block_lifecycle);
    RUN(test_destroy_waits_for_live_blocks);
    RUN(test_concurrent_threads_keep_the_books_balanced);
    return CHECK_EXIT_STATUS();
}
