// test_tables.c: unit tests of the writer's tables (livetable.c): the live
// set keeps exactly what was inserted and not removed, through growth and
// backward-shift deletions; the u64 -> u32 map returns what was put.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "writer/writer.h"
#include "../check.h"

static uint64_t rng = 88172645463325252ULL;
static uint64_t next(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return rng; }

static void test_live_set_survives_growth_and_deletions(void) {
    enum { N = 200000 };
    struct tpprof_livetable lt = {0};
    uint64_t *addr = malloc(N * sizeof *addr);
    char *live = calloc(N, 1);
    for (int i = 0; i < N; i++) {
        addr[i] = (next() & 0xffffffffff0ULL) + 16 * (uint64_t)i + 16; // distinct, heap-like, nonzero
        addr[i] = 0x10000000000ULL + 16 * (uint64_t)i * 7 + (addr[i] & 0xf0000000000ULL);
    }
    for (int i = 0; i < N; i++) {
        bool existed;
        struct tpprof_block *b = tpprof_live_insert(&lt, addr[i], &existed);
        if (!b || existed) continue; // duplicate address by construction: skip
        b->size = (uint64_t)i;
        live[i] = 1;
    }
    uint64_t count = 0;
    for (int i = 0; i < N; i++) count += live[i];
    CHECK_MSG(lt.count == count, "count %llu vs %llu", (unsigned long long)lt.count, (unsigned long long)count);
    // Remove two thirds, in an order unrelated to insertion.
    for (int k = 0; k < N; k++) {
        int i = (int)((uint64_t)k * 7919 % N);
        if (!live[i] || i % 3 == 0) continue;
        struct tpprof_block out;
        CHECK_MSG(tpprof_live_remove(&lt, addr[i], &out) && out.size == (uint64_t)i, "remove %d", i);
        live[i] = 0;
    }
    for (int i = 0; i < N; i++) {
        struct tpprof_block *b = tpprof_live_find(&lt, addr[i]);
        if (live[i]) CHECK_MSG(b && b->size == (uint64_t)i, "find %d after deletions", i);
        else CHECK_MSG(!b, "removed %d still found", i);
    }
    struct tpprof_block out;
    CHECK_MSG(!tpprof_live_remove(&lt, 12345, &out), "removing an unknown address fails");
    for (int i = 0; i < N; i++) {
        if (!live[i]) continue;
        bool existed;
        struct tpprof_block *b = tpprof_live_insert(&lt, addr[i], &existed);
        CHECK_MSG(b && existed && b->size == (uint64_t)i, "inserting a live address returns the block");
        break;
    }
    free(addr);
    free(live);
}

static void test_map_returns_what_was_put(void) {
    struct tpprof_map m = {0};
    for (uint64_t k = 1; k <= 50000; k++) CHECK_MSG(tpprof_map_put(&m, k * 0x9E3779B97F4A7C15ULL | 1, (uint32_t)k), "put");
    for (uint64_t k = 1; k <= 50000; k++)
        CHECK_MSG(tpprof_map_get(&m, k * 0x9E3779B97F4A7C15ULL | 1) == (uint32_t)k, "get %llu", (unsigned long long)k);
    CHECK_MSG(tpprof_map_get(&m, 2) == 0, "absent key");
    CHECK_MSG(tpprof_map_put(&m, 3, 7) && tpprof_map_put(&m, 3, 9) && tpprof_map_get(&m, 3) == 9, "overwrite");
}

int main(void) {
    test_live_set_survives_growth_and_deletions();
    test_map_returns_what_was_put();
    return CHECK_DONE();
}
