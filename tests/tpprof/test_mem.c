// test_mem.c: tpprof's own memory (base/mem.c) for big tables
// (tpprof_mem_map_huge): a table of 2 MiB or more starts at a 2 MiB boundary
// (so that all of it can be on huge pages), is zeroed and writable, and is
// exactly as long as asked: the over-mapped head and tail are given back,
// so unmapping (p, bytes) leaves nothing behind. A smaller one is a plain
// mapping.
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/mem.h"
#include "../check.h"

#define HUGE ((size_t)2 << 20)

// Whether the page at p is mapped (mincore fails with ENOMEM where not).
static bool mapped(const void *p) {
    unsigned char v;
    return mincore((void *)((uintptr_t)p & ~(uintptr_t)4095), 4096, &v) == 0 || errno != ENOMEM;
}

// The mapping that holds p, from /proc/self/maps (*lo == 0: none).
static void mapping_of(const void *p, uintptr_t *lo, uintptr_t *hi) {
    *lo = *hi = 0;
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        unsigned long a, b;
        if (sscanf(line, "%lx-%lx", &a, &b) == 2 && a <= (uintptr_t)p && (uintptr_t)p < b) {
            *lo = a, *hi = b;
            break;
        }
    }
    fclose(f);
}

static void test_a_big_table_is_aligned_zeroed_and_exact(void) {
    size_t bytes = 12 * HUGE + 3 * 4096;
    unsigned char *p = tpprof_mem_map_huge(bytes);
    CHECK(p != NULL);
    if (!p) return;
    CHECK_MSG((uintptr_t)p % HUGE == 0, "%p not at a 2 MiB boundary", (void *)p);
    size_t nonzero = 0;
    for (size_t i = 0; i < bytes; i += 4096) nonzero += p[i] != 0 || p[i + 4095] != 0;
    CHECK_MSG(nonzero == 0, "%zu pages not zeroed", nonzero);
    p[0] = 1, p[bytes - 1] = 2;
    CHECK(p[0] == 1 && p[bytes - 1] == 2);
    // Its own mapping (advised onto huge pages, it merges with no
    // neighbour): what was mapped around it for the alignment is gone.
    uintptr_t lo, hi;
    mapping_of(p, &lo, &hi);
    CHECK_MSG(lo == (uintptr_t)p && hi == (uintptr_t)p + bytes, "mapped %#lx-%#lx for %p + %zu", (unsigned long)lo,
              (unsigned long)hi, (void *)p, bytes);
    // Over-mapping by 2 MiB leaves at least a page past the end (the head
    // may be empty): nothing else maps it in between in this one thread.
    CHECK_MSG(!mapped(p + bytes), "the page past the table is still mapped");
    tpprof_mem_unmap(p, bytes);
    CHECK_MSG(!mapped(p) && !mapped(p + bytes - 1), "still mapped after tpprof_mem_unmap");
}

static void test_a_small_table_is_a_plain_mapping(void) {
    size_t bytes = 768 << 10;
    unsigned char *p = tpprof_mem_map_huge(bytes);
    CHECK(p != NULL);
    if (!p) return;
    CHECK((uintptr_t)p % 4096 == 0);
    CHECK(p[0] == 0 && p[bytes - 1] == 0);
    p[bytes - 1] = 7;
    CHECK(p[bytes - 1] == 7);
    tpprof_mem_unmap(p, bytes);
    CHECK(!mapped(p));
}

int main(void) {
    RUN_TEST(test_a_big_table_is_aligned_zeroed_and_exact);
    RUN_TEST(test_a_small_table_is_a_plain_mapping);
    return CHECK_DONE();
}
