/*
 * samples/tensors/weak_refs.c - a helper that keeps weak references after
 * the data is gone.
 *
 * A "memo" remembers storages through weak references so it can reuse them
 * while they are alive (tp_storage_weak_lock).  Nobody ever calls
 * memo_forget(): when the tensors go, their data is released, but every
 * storage struct stays allocated, held by the memo's weak reference taken in
 * memo_remember().  tpprof must list these storages as "data released,
 * struct held by weak references" with that call site.
 *
 * Usage: weak_refs [n] (default 5)
 */
#include "common.h"

#define MAX_MEMO 32

static tp_storage *memo[MAX_MEMO]; /* weak references */
static int memo_len;

__attribute__((noinline)) static void memo_remember(tp_tensor *t) {
    tp_storage *s = tp_tensor_storage(t);
    tp_storage_weak_retain(s);
    memo[memo_len++] = s;
}

/* Returns a new strong reference to a live memoized storage, or NULL. */
__attribute__((noinline)) static tp_storage *memo_lookup(int i) {
    return tp_storage_weak_lock(memo[i]);
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 5;
    if (n < 1 || n > MAX_MEMO) {
        fprintf(stderr, "usage: weak_refs [n 1..%d]\n", MAX_MEMO);
        return 2;
    }
    for (int i = 0; i < n; i++) {
        tp_tensor *t = CHECK(tp_ones(1, (int64_t[]){4096}, TP_DTYPE_FLOAT64));
        memo_remember(t);
        tp_storage *alive = memo_lookup(i); /* succeeds: t still holds it */
        tp_storage_release(alive);
        tp_tensor_release(t); /* data released; the struct stays for the memo */
    }
    int dead = 0;
    for (int i = 0; i < memo_len; i++) {
        tp_storage *s = memo_lookup(i);
        if (s) tp_storage_release(s);
        else dead++;
    }
    printf("weak_refs: %d storages memoized, %d with data released, structs still held\n", memo_len,
           dead);
    return 0;
}
