/*
 * samples/tensors/cache_leak.c - a tensor cache that leaks a storage on an
 * error path.
 *
 * cache_put() takes an extra strong reference on each tensor's storage (the
 * cache's own hold).  cache_evict() gives it back - except when validation
 * of the entry fails, where the early return forgets the release.  The
 * tensors themselves are all released, so a malloc-level tool sees only "a
 * block allocated in the CPU allocator"; tpprof must name the storage and
 * the retain in cache_put() that no release matched.
 *
 * Usage: cache_leak [entries] (default 8; every 4th entry leaks)
 */
#include "common.h"

#define MAX_ENTRIES 64

typedef struct cache_entry {
    tp_storage *storage; /* strong reference owned by the cache */
    int64_t rows;
} cache_entry;

static cache_entry cache[MAX_ENTRIES];

__attribute__((noinline)) static void cache_put(int slot, tp_tensor *t) {
    tp_storage *s = tp_tensor_storage(t); /* borrowed */
    tp_storage_retain(s);                 /* the cache's own reference */
    cache[slot].storage = s;
    cache[slot].rows = tp_tensor_size(t, 0);
}

/* Returns 0 on success, -1 if the entry is "corrupt" (every 4th one). */
__attribute__((noinline)) static int cache_evict(int slot) {
    cache_entry *e = &cache[slot];
    if (slot % 4 == 3) {
        fprintf(stderr, "cache: entry %d failed validation, skipping\n", slot);
        e->storage = NULL; /* BUG: the reference taken in cache_put is never released */
        return -1;
    }
    tp_storage_release(e->storage);
    e->storage = NULL;
    return 0;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 8;
    if (n < 1 || n > MAX_ENTRIES) {
        fprintf(stderr, "usage: cache_leak [entries 1..%d]\n", MAX_ENTRIES);
        return 2;
    }
    for (int i = 0; i < n; i++) {
        tp_tensor *t = CHECK(tp_full(2, (int64_t[]){256, 256}, (double)i, TP_DTYPE_FLOAT32));
        cache_put(i, t);
        tp_tensor_release(t); /* the cache keeps the storage alive */
    }
    int failed = 0;
    for (int i = 0; i < n; i++) failed += cache_evict(i) != 0;
    printf("cache_leak: %d entries, %d evictions failed (leaked %d x 256 KiB storages)\n", n, failed,
           failed);
    return 0;
}
