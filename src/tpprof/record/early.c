// early.c: the heap blocks a process allocated before the recorder started.
//
// The program's shared libraries are initialized before the preload's
// constructor runs (a C++ library's static objects, a library's global
// lists and caches), and their blocks were unknown to the leak scan, which
// then did not look inside them: a block allocated later and kept only in
// such a structure (a node appended to a list whose head a constructor
// made) was reported lost. So until the constructor is done the hooks note
// each block here (address and size, no stack; the frees take them out),
// and each anonymous mapping (a pool a constructor maps), and the writer
// adopts what is left as blocks of its own (writer.c): they are scanned
// like any other, pointers in them count, but they are not recorded as
// allocations and never reported.
//
// Runs inside malloc hooks, before main: a spinlock (threads are rare
// then), no malloc, a raw mapping.
#define _GNU_SOURCE
#include <sched.h>

#include "base/mem.h"
#include "record/early.h"

#define EARLY_SLOTS ((uint64_t)1 << 16) // 1 MiB; at most half of them used
#define TOMBSTONE 1u                    // a freed slot (no block is at address 1)

struct early_block {
    uint64_t addr, size; // size | MAP_FLAG for a mapping
};

#define MAP_FLAG ((uint64_t)1 << 63)

_Atomic int tpprof_early = 1;
static atomic_flag lock = ATOMIC_FLAG_INIT;
static struct early_block *table;
static uint64_t used; // slots ever taken (tombstones included)
static bool failed;   // no mapping: nothing more is noted

static void take_lock(void) {
    while (atomic_flag_test_and_set_explicit(&lock, memory_order_acquire)) sched_yield();
}

static void drop_lock(void) { atomic_flag_clear_explicit(&lock, memory_order_release); }

static inline uint64_t home(uint64_t addr) { return (addr * 0x9E3779B97F4A7C15ULL) >> (64 - 16); }

// With the lock held.
static void put_locked(uint64_t addr, uint64_t size) {
    if (!atomic_load_explicit(&tpprof_early, memory_order_relaxed)) return;
    if (!table && !failed) {
        table = tpprof_mem_map(EARLY_SLOTS * sizeof *table);
        failed = table == NULL;
    }
    if (!table || used >= EARLY_SLOTS / 2) return;
    uint64_t j = home(addr);
    while (table[j].addr > TOMBSTONE && table[j].addr != addr) j = (j + 1) & (EARLY_SLOTS - 1);
    if (table[j].addr <= TOMBSTONE) {
        if (table[j].addr == 0) used++;
        table[j].addr = addr;
    }
    table[j].size = size;
}

static void note(uint64_t addr, uint64_t size) {
    take_lock();
    put_locked(addr, size);
    drop_lock();
}

void tpprof_early_alloc(const void *p, size_t n) { note((uint64_t)(uintptr_t)p, n & ~MAP_FLAG); }

void tpprof_early_map(const void *p, size_t len) { note((uint64_t)(uintptr_t)p, (len & ~MAP_FLAG) | MAP_FLAG); }

// An unmapping takes out the mappings it overlaps, or the part of one it
// cuts off an end (a hole in the middle keeps the lower part only).
void tpprof_early_unmap(const void *p, size_t len) {
    uint64_t lo = (uint64_t)(uintptr_t)p, hi = lo + len;
    take_lock();
    for (uint64_t j = 0; table && j < EARLY_SLOTS; j++) {
        struct early_block *e = &table[j];
        if (e->addr <= TOMBSTONE || !(e->size & MAP_FLAG)) continue;
        uint64_t mlo = e->addr, mhi = mlo + (e->size & ~MAP_FLAG);
        if (hi <= mlo || lo >= mhi) continue;
        if (lo > mlo) {
            e->size = (lo - mlo) | MAP_FLAG;
        } else {
            e->addr = TOMBSTONE;
            if (hi < mhi) put_locked(hi, (mhi - hi) | MAP_FLAG); // cut from the start: a new key
        }
    }
    drop_lock();
}

void tpprof_early_free(const void *p) {
    uint64_t addr = (uint64_t)(uintptr_t)p;
    take_lock();
    if (table) {
        for (uint64_t j = home(addr); table[j].addr; j = (j + 1) & (EARLY_SLOTS - 1))
            if (table[j].addr == addr) {
                table[j].addr = TOMBSTONE;
                break;
            }
    }
    drop_lock();
}

void tpprof_early_end(void (*adopt)(uint64_t addr, uint64_t size, bool mapping)) {
    take_lock();
    atomic_store(&tpprof_early, 0);
    if (table) {
        if (adopt)
            for (uint64_t j = 0; j < EARLY_SLOTS; j++)
                if (table[j].addr > TOMBSTONE)
                    adopt(table[j].addr, table[j].size & ~MAP_FLAG, (table[j].size & MAP_FLAG) != 0);
        tpprof_mem_unmap(table, EARLY_SLOTS * sizeof *table);
        table = NULL;
    }
    drop_lock();
}
