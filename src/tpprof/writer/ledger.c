// ledger.c: the writer's view of the tensor runtime (observe.c's records):
// storages, tensors, the outstanding-reference ledger, allocator events and
// their tables (docs/schema-tensors.md).
//
// Writer-owned like everything in writer.h: called by writer.c's apply() in
// its merge order, interleaved with the malloc records, so a storage's
// data is looked up in the live table as it stood at its creation, and the
// backing block's free is seen when it happens. Aggregate mode keeps a
// storage or tensor record while it is alive, or while it was alive at the
// current storage peak; when the peak moves, the records of the dead ones are
// dropped, so memory stays bounded by what is alive. Full mode keeps all.
// Never runs on a program thread.
//
// A small tensor op sends half a dozen records, and the writer competes with
// the program for a CPU, so one record's path is kept short
// (bench/tensor_overhead.c): the storage a record names is looked up once
// for everything the record carries, ids and blocks are found in a
// direct-mapped table before any hash map (ledger_index), a tensor's record
// is written field by field rather than cleared first, and the helpers on
// that path are inline into tpprof_obs_apply.
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>

#include "tensorplay/observer.h"
#include "writer/device.h"
#include "writer/graph.h"
#include "writer/state.h"
#include "base/base.h"
#include "base/mem.h"
#include "record/format.h"
#include "record/order.h"
#include "record/rings.h"
#include "writer/writer.h"


struct tpprof_ledger tpprof_ledger;

// ---------------------------------------------------------------------------
// Small containers.

// Grows a pool array to hold index `need`; false when out of memory.
static bool grow(void **arr, uint32_t *cap, uint32_t need, size_t elem, uint32_t first) {
    if (need < *cap) return true;
    uint32_t ncap = *cap ? *cap : first;
    while (ncap <= need) ncap *= 2;
    void *n = tpprof_mem_grow(*arr, (size_t)*cap * elem, (size_t)ncap * elem);
    if (!n) return false;
    *arr = n;
    *cap = ncap;
    return true;
}

// A key's entry: an id's low bits, an address's hash (Fibonacci: the top
// bits of a multiply). Which index it is folds away where ix_* are inline.
static inline struct ix_entry *ix_entry_of(struct ledger_index *x, uint64_t key) {
    uint64_t h = x == &tpprof_ledger.by_block ? (key * 0x9E3779B97F4A7C15ull) >> (64 - IX_BITS) : key;
    return &x->front[h & ((1u << IX_BITS) - 1)];
}

// Whether `key`, not in its entry, may be in back.
static inline bool ix_in_back(const struct ledger_index *x, uint64_t key) {
    return key <= x->back_max && x->back.count;
}

// The value of `key` (0: none).
static inline uint32_t ix_get(struct ledger_index *x, uint64_t key) {
    const struct ix_entry *e = ix_entry_of(x, key);
    if (TPPROF_LIKELY(e->key == key)) return e->val; // key 0 finds a free entry: 0
    return ix_in_back(x, key) ? tpprof_map_get(&x->back, key) : 0;
}

// ix_put where its inline path does not do.
static __attribute__((noinline)) bool ix_put_slow(struct ledger_index *x, uint64_t key, uint32_t val) {
    struct ix_entry *e = ix_entry_of(x, key);
    if (!key) return false;
    if (e->key == key) {
        e->val = val;
        return true;
    }
    if (e->key == 0 && !(ix_in_back(x, key) && tpprof_map_get(&x->back, key))) {
        e->key = key;
        e->val = val;
        return true;
    }
    if (!tpprof_map_put(&x->back, key, val)) return false; // in back already, or its entry is taken
    if (key > x->back_max) x->back_max = key;
    return true;
}

// Sets the value of `key`; false if key is 0 or memory ran out. Inline: a
// key in its entry, or a new one whose entry is free (nearly all: above
// back_max, a key is not in back).
static inline bool ix_put(struct ledger_index *x, uint64_t key, uint32_t val) {
    struct ix_entry *e = ix_entry_of(x, key);
    if (TPPROF_LIKELY(e->key == 0 ? key > x->back_max : e->key == key)) { // so not 0, not in back
        e->key = key;
        e->val = val;
        return true;
    }
    return ix_put_slow(x, key, val);
}

// ix_put that also hands back the value `key` had (0: none) in *old.
static inline bool ix_swap(struct ledger_index *x, uint64_t key, uint32_t val, uint32_t *old) {
    struct ix_entry *e = ix_entry_of(x, key);
    if (TPPROF_LIKELY(e->key == 0 ? key > x->back_max : e->key == key)) {
        *old = e->val; // 0 in a free entry
        e->key = key;
        e->val = val;
        return true;
    }
    *old = ix_get(x, key);
    return ix_put_slow(x, key, val);
}

// Sets `key`, if its value is `old`, to `val` (0: removes it); false if
// its value is not `old` (nothing changed).
static inline bool ix_replace(struct ledger_index *x, uint64_t key, uint32_t old, uint32_t val) {
    struct ix_entry *e = ix_entry_of(x, key);
    if (TPPROF_LIKELY(e->key == key && key)) {
        if (e->val != old) return false;
        e->val = val;
        if (!val) e->key = 0;
        return true;
    }
    if (!ix_in_back(x, key) || !old || tpprof_map_get(&x->back, key) != old) return false;
    if (val) tpprof_map_put(&x->back, key, val);
    else tpprof_map_take(&x->back, key);
    return true;
}

// Removes `key`; returns its value (0: it was not there).
static inline uint32_t ix_take(struct ledger_index *x, uint64_t key) {
    struct ix_entry *e = ix_entry_of(x, key);
    if (TPPROF_LIKELY(e->key == key)) { // key 0: a free entry, left so
        uint32_t val = e->val;
        e->key = 0;
        e->val = 0;
        return val;
    }
    return ix_in_back(x, key) ? tpprof_map_take(&x->back, key) : 0;
}

static __attribute__((noinline)) struct obs_thread *thread_grow(uint32_t index) {
    if (!grow((void **)&tpprof_ledger.freed, &tpprof_ledger.capfreed, index, sizeof *tpprof_ledger.freed, 64)) return NULL;
    if (!grow((void **)&tpprof_ledger.threads, &tpprof_ledger.capthreads, index, sizeof *tpprof_ledger.threads, 64)) return NULL;
    return &tpprof_ledger.threads[index];
}

static inline struct obs_thread *thread_state(uint32_t index) {
    if (TPPROF_LIKELY(index < tpprof_ledger.capthreads)) return &tpprof_ledger.threads[index];
    return thread_grow(index);
}

// The stack_nodes id of a depot stack id: writer.c's memo of it (a stack's
// node never changes once found), read here because every record asks;
// writer.c's function finds the ones not known yet.
static inline uint32_t stack_of(uint32_t sid) {
    const struct tpprof_wstate *w = &tpprof_w;
    if (!sid) return 0;
    if (TPPROF_LIKELY(sid < w->capleaf) && w->leaf_of[sid]) return w->leaf_of[sid];
    return tpprof_writer_leaf_of(sid);
}

static uint16_t name_lookup(const uint64_t *words);

// The name's index (0: none); names are at most 23 bytes (observe.c).
static inline uint16_t name_index(const uint64_t *words, bool present) {
    if (!present) return 0;
    // Nearly every storage comes from the allocator of the one before.
    static uint64_t last[3];
    static uint16_t last_index;
    if (TPPROF_LIKELY(last_index) && words[0] == last[0] && words[1] == last[1] && words[2] == last[2])
        return last_index;
    memcpy(last, words, sizeof last);
    last_index = name_lookup(words);
    return last_index;
}

static __attribute__((noinline)) uint16_t name_lookup(const uint64_t *words) {
    char name[24];
    memcpy(name, words, 24);
    name[23] = 0;
    if (tpprof_ledger.nnames == 0) tpprof_ledger.nnames = 1;
    for (uint32_t i = 1; i < tpprof_ledger.nnames; i++)
        if (strcmp(tpprof_ledger.names[i], name) == 0) return (uint16_t)i;
    if (tpprof_ledger.nnames == MAX_NAMES) return MAX_NAMES - 1; // shares the last slot
    memcpy(tpprof_ledger.names[tpprof_ledger.nnames], name, 24);
    return (uint16_t)tpprof_ledger.nnames++;
}


// ---------------------------------------------------------------------------
// References.

// A reference record at the head of the list *head (a storage's references,
// a tensor's handles); 0 when out of memory.
static inline uint32_t ref_push(uint32_t *head, uint32_t op, uint32_t stack, uint32_t sid) {
    uint32_t r = tpprof_ledger.free_ref;
    if (TPPROF_LIKELY(r)) {
        tpprof_ledger.free_ref = tpprof_ledger.refs[r].next;
    } else {
        if (!grow((void **)&tpprof_ledger.refs, &tpprof_ledger.caprefs, tpprof_ledger.nrefs + 1, sizeof *tpprof_ledger.refs, 1024)) return 0;
        r = ++tpprof_ledger.nrefs;
    }
    tpprof_ledger.refs[r] = (struct obs_ref){.next = *head, .stack = stack, .op = op, .sid = sid};
    if (*head) tpprof_ledger.refs[*head].prev = r;
    *head = r;
    return r;
}

// Unlinks reference r from the list *head and gives it back to the pool
// (its stack and sid stay readable until the next ref_push; its owner is
// cleared, so a tensor's obs_tensor.ref naming it is seen to be stale).
static inline void ref_unlink(uint32_t *head, uint32_t r) {
    uint32_t p = tpprof_ledger.refs[r].prev, n = tpprof_ledger.refs[r].next;
    if (p) tpprof_ledger.refs[p].next = n;
    else *head = n;
    if (n) tpprof_ledger.refs[n].prev = p;
    tpprof_ledger.refs[r].next = tpprof_ledger.free_ref;
    tpprof_ledger.refs[r].tensor = 0;
    tpprof_ledger.free_ref = r;
}

static inline uint32_t ref_add(struct obs_storage *s, uint32_t op, uint32_t stack, uint32_t sid) {
    return ref_push(&s->refs, op, stack, sid);
}

// Gives every record of the list *head back to the pool.
static inline void refs_release(uint32_t *head) {
    while (*head) {
        uint32_t r = *head;
        *head = tpprof_ledger.refs[r].next;
        tpprof_ledger.refs[r].tensor = 0;
        tpprof_ledger.refs[r].next = tpprof_ledger.free_ref;
        tpprof_ledger.free_ref = r;
    }
}

// Unlinks the newest reference matching (tensor != 0: owned by it; else an
// unowned one of the given strength); NULL if none, else the reference,
// whose stack and sid stay readable until the next ref_add.
// A tensor's reference is found by `hint` (its obs_tensor.ref, which the
// tensor's free handed on), not by a walk: a storage with 100,000 live
// views freed oldest first took 12 s here when each free walked its list.
// (A tensor-id index of the references did that before: three index
// operations a tensor and 64 KiB; without it the writer spends ~3% less on
// bench/tensor_overhead's records.) The walk is left for a tensor whose
// record was not kept (out of memory).
static inline const struct obs_ref *ref_remove(struct obs_storage *s, uint64_t tensor, uint32_t hint, bool weak) {
    if (tensor && TPPROF_LIKELY(hint && tpprof_ledger.refs[hint].tensor == tensor)) {
        ref_unlink(&s->refs, hint);
        return &tpprof_ledger.refs[hint];
    }
    for (uint32_t r = s->refs; r; r = tpprof_ledger.refs[r].next) {
        struct obs_ref *x = &tpprof_ledger.refs[r];
        bool match = tensor ? x->tensor == tensor
                            : x->tensor == 0 && (weak ? x->op == TP_OBS_REFOP_WEAK_RETAIN
                                                      : x->op != TP_OBS_REFOP_WEAK_RETAIN);
        if (!match) continue;
        ref_unlink(&s->refs, r);
        return x;
    }
    return NULL;
}

// ---------------------------------------------------------------------------
// Record lifetime and the peak.


static inline __attribute__((always_inline)) void block_unlink(struct obs_storage *s, uint32_t slot) {
    if (!(s->flags & S_HAS_BLOCK) || (s->flags & S_BLOCK_FREED)) return;
    // Heading the block's list (nearly always its only storage): the next one heads it now.
    if (ix_replace(&tpprof_ledger.by_block, s->block_addr, slot + 1, s->next_in_block)) return;
    for (uint32_t k = ix_get(&tpprof_ledger.by_block, s->block_addr); k; k = tpprof_ledger.st[k - 1].next_in_block)
        if (tpprof_ledger.st[k - 1].next_in_block == slot + 1) {
            tpprof_ledger.st[k - 1].next_in_block = s->next_in_block;
            return;
        }
}

static inline __attribute__((always_inline)) void storage_drop(uint32_t slot) {
    struct obs_storage *s = &tpprof_ledger.st[slot];
    block_unlink(s, slot);
    refs_release(&s->refs);
    ix_take(&tpprof_ledger.st_ids, s->id);
    s->used = false;
    s->next_kept = tpprof_ledger.free_st;
    tpprof_ledger.free_st = slot + 1;
}

static void tensor_drop(uint32_t slot) {
    struct obs_tensor *x = &tpprof_ledger.tn[slot];
    ix_take(&tpprof_ledger.tn_ids, x->id);
    x->used = false;
    x->next_kept = tpprof_ledger.free_tn;
    tpprof_ledger.free_tn = slot + 1;
}

// A new storage peak: the records kept only for the old one go.
static __attribute__((noinline)) void new_peak(uint64_t seq, uint64_t time) {
    tpprof_ledger.peak_bytes = tpprof_ledger.storage_bytes;
    tpprof_ledger.peak_seq = seq;
    tpprof_ledger.peak_end = 0;
    tpprof_ledger.peak_ns = time;
    if (tpprof_cfg.full) return;
    while (tpprof_ledger.kept_st) {
        uint32_t slot = tpprof_ledger.kept_st - 1;
        tpprof_ledger.kept_st = tpprof_ledger.st[slot].next_kept;
        storage_drop(slot);
    }
    while (tpprof_ledger.kept_tn) {
        uint32_t slot = tpprof_ledger.kept_tn - 1;
        tpprof_ledger.kept_tn = tpprof_ledger.tn[slot].next_kept;
        tensor_drop(slot);
    }
}

// ---------------------------------------------------------------------------
// Backing blocks.

// The host block whose range holds `data` now: a live heap block starting at
// it, the caching allocator segment around it, or a mapping around it.
static struct tpprof_block *block_of(uint64_t data) {
    struct tpprof_wstate *w = &tpprof_w;
    struct tpprof_block *b = tpprof_live_find(&w->live, data);
    if (b) return b;
    for (uint32_t i = 0; i < tpprof_ledger.nsegs; i++)
        if (data >= tpprof_ledger.segs[i].base && data < tpprof_ledger.segs[i].base + tpprof_ledger.segs[i].size) {
            b = tpprof_live_find(&w->live, tpprof_ledger.segs[i].base);
            if (b && data < b->addr + b->size) return b;
        }
    int64_t k = tpprof_writer_map_at(data); // a mapping of its own: found by its start
    if (k >= 0) return &w->maps[k];
    for (uint64_t i = 0; i < w->nmaps; i++)
        if (data >= w->maps[i].addr && data < w->maps[i].addr + w->maps[i].size) return &w->maps[i];
    return NULL;
}

// A CUDA storage's device allocation (writer/device.c): the one at its
// data (cudaMalloc, cudaMallocAsync), or the caching allocator's segment
// around it. Its end calls tpprof_obs_block_freed, as a host block's does.
static __attribute__((noinline)) bool device_block_of(uint64_t data, uint64_t *addr, uint64_t *size, uint16_t *kind) {
    if (tpprof_device_block_at(data, size, kind)) {
        *addr = data;
        return true;
    }
    for (uint32_t i = 0; i < tpprof_ledger.nsegs; i++) {
        uint64_t base = tpprof_ledger.segs[i].base;
        if (data >= base && data < base + tpprof_ledger.segs[i].size && tpprof_device_block_at(base, size, kind) &&
            data < base + *size) {
            *addr = base;
            return true;
        }
    }
    return false;
}

static inline __attribute__((always_inline)) void attach_block(struct obs_storage *s, uint32_t slot) {
    s->flags &= (uint16_t)~(S_HAS_BLOCK | S_BLOCK_FREED);
    if (!s->data) return;
    // A storage on a device (not the CPU) looks among device blocks first:
    // a runtime double hands out host memory as device memory, and a
    // unified address space may put both in one range.
    bool on_device = s->dev_type != 0 && tpprof_dev.any; // 0: the CPU (observer.h device types)
    struct tpprof_block *b = NULL;
    if (on_device && device_block_of(s->data, &s->block_addr, &s->block_size, &s->block_kind)) {
        // found
    } else if ((b = block_of(s->data)) != NULL) {
        b->backs = 1;
        s->block_addr = b->addr;
        s->block_size = b->size;
        s->block_kind = tpprof_w.sites[b->site].kind;
    } else {
        return;
    }
    s->flags |= S_HAS_BLOCK;
    if (!ix_swap(&tpprof_ledger.by_block, s->block_addr, slot + 1, &s->next_in_block)) {
        s->next_in_block = 0;
        s->flags &= (uint16_t)~S_HAS_BLOCK; // out of memory: not linked, not claimed
    }
}

static void lifetime_add_delay(struct obs_storage *s, uint64_t delay) {
    struct lifetime *l = &tpprof_ledger.lifetimes[s->allocator];
    l->delay_sum += (int64_t)delay;
    l->delay_count++;
    if ((int64_t)delay > l->delay_max) l->delay_max = (int64_t)delay;
    s->flags &= (uint16_t)~S_LIFETIME_PENDING;
}

// The storages backed by the block at `addr` (k: the first's slot + 1).
static __attribute__((noinline)) void block_freed(uint64_t addr, uint64_t time, uint32_t k) {
    while (k) {
        struct obs_storage *s = &tpprof_ledger.st[k - 1];
        k = s->next_in_block;
        s->next_in_block = 0;
        s->flags |= S_BLOCK_FREED;
        s->block_freed_ns = time;
        // Against the release's merge time: the block's free has no exact time.
        uint64_t delay = time > s->released_batch_ns ? time - s->released_batch_ns : 0;
        // After an exactly timed release, the free is put that delay after
        // it: its merge time less the exact release would count the
        // merge's lag (ms) as a delay in the storage's row.
        if (s->flags & S_RELEASED) s->block_freed_ns = s->data_released_ns + delay;
        if (s->flags & S_LIFETIME_PENDING) lifetime_add_delay(s, delay);
    }
    ix_take(&tpprof_ledger.by_block, addr);
}

// Usually no storage is left on the block: its last one was dropped first.
void tpprof_obs_block_freed(uint64_t addr, uint64_t time) {
    uint32_t k = ix_get(&tpprof_ledger.by_block, addr);
    if (k) block_freed(addr, time, k);
}

// ---------------------------------------------------------------------------
// Applying one observer record (writer.c's apply, in merge order).

// What every handler of a record takes from it.
struct rec {
    struct obs_thread *th; // the sending thread's pairing state (NULL: out of memory)
    uint32_t tindex;       // its index
    uint32_t stack, sid;   // the record's stack: stack_nodes id, depot id (0: none)
    uint64_t seq, time;
    bool exact;            // time is the event's own (its ticks, or full mode), not the merge's
};

static inline uint32_t new_storage_slot(void) {
    if (TPPROF_LIKELY(tpprof_ledger.free_st)) {
        uint32_t slot = tpprof_ledger.free_st - 1;
        tpprof_ledger.free_st = tpprof_ledger.st[slot].next_kept;
        return slot;
    }
    if (!grow((void **)&tpprof_ledger.st, &tpprof_ledger.capst, tpprof_ledger.nst, sizeof *tpprof_ledger.st, 1024)) return UINT32_MAX;
    return tpprof_ledger.nst++;
}

static inline uint32_t new_tensor_slot(void) {
    if (TPPROF_LIKELY(tpprof_ledger.free_tn)) {
        uint32_t slot = tpprof_ledger.free_tn - 1;
        tpprof_ledger.free_tn = tpprof_ledger.tn[slot].next_kept;
        return slot;
    }
    if (!grow((void **)&tpprof_ledger.tn, &tpprof_ledger.captn, tpprof_ledger.ntn, sizeof *tpprof_ledger.tn, 1024)) return UINT32_MAX;
    return tpprof_ledger.ntn++;
}

static inline struct obs_storage *storage_get(uint64_t id, uint32_t *slot) {
    uint32_t k = ix_get(&tpprof_ledger.st_ids, id);
    if (!k) return NULL;
    *slot = k - 1;
    return &tpprof_ledger.st[k - 1];
}

static __attribute__((noinline)) void rc_count_slow(uint32_t op, uint32_t stack, uint32_t sid) {
    uint32_t hint = sid << 1 | (op & 1);
    uint64_t key = ((uint64_t)stack << 3 | op) + 1;
    uint32_t k = tpprof_map_get(&tpprof_ledger.rc_index, key);
    if (!k) {
        if (!grow((void **)&tpprof_ledger.rc, &tpprof_ledger.caprc, tpprof_ledger.nrc, sizeof *tpprof_ledger.rc, 256)) return;
        tpprof_ledger.rc[tpprof_ledger.nrc].stack = stack;
        tpprof_ledger.rc[tpprof_ledger.nrc].op = op;
        tpprof_ledger.rc[tpprof_ledger.nrc].count = 0;
        if (!tpprof_map_put(&tpprof_ledger.rc_index, key, tpprof_ledger.nrc + 1)) return;
        k = ++tpprof_ledger.nrc;
    }
    tpprof_ledger.rc[k - 1].count++;
    if (sid && grow((void **)&tpprof_ledger.rc_hint, &tpprof_ledger.caprc_hint, hint, sizeof *tpprof_ledger.rc_hint, 8192)) tpprof_ledger.rc_hint[hint] = k;
}

// Adds n changes at once (folded views: tpprof_obs_fold_collect).
static void rc_add(uint32_t op, uint32_t stack, uint32_t sid, int64_t n) {
    if (n <= 0) return;
    rc_count_slow(op, stack, sid); // the row, made if new
    uint64_t key = ((uint64_t)stack << 3 | op) + 1;
    uint32_t k = tpprof_map_get(&tpprof_ledger.rc_index, key);
    if (k) tpprof_ledger.rc[k - 1].count += n - 1;
}

// Counts one refcount change; `sid` (the depot id of `stack`) remembers the
// row it used last, so the common case skips the hash lookup. A retain site
// also counts its tensors' releases (TPPROF_OBS_TENSOR_REF), so each sid has
// two hints: odd ops (retains, lock) and even ones (releases).
static inline void rc_count(uint32_t op, uint32_t stack, uint32_t sid) {
    uint32_t hint = sid << 1 | (op & 1);
    if (TPPROF_LIKELY(hint < tpprof_ledger.caprc_hint) && tpprof_ledger.rc_hint[hint]) {
        uint32_t h = tpprof_ledger.rc_hint[hint] - 1;
        if (TPPROF_LIKELY(tpprof_ledger.rc[h].op == op)) {
            tpprof_ledger.rc[h].count++;
            return;
        }
    }
    rc_count_slow(op, stack, sid);
}

// r: the record, its storage's words from r[2]; `name`: its allocator's index.
// Returns the storage's creation reference (0: none kept), for a tensor
// that adopts it in the same record.
static uint32_t on_storage_created(const struct rec *c, const uint64_t *r, uint16_t name) {
    uint32_t slot = new_storage_slot();
    if (slot == UINT32_MAX) return 0;
    struct obs_storage *s = &tpprof_ledger.st[slot];
    *s = (struct obs_storage){
        .id = r[2],
        .data = r[3],
        .nbytes = r[4],
        .created_ns = c->time,
        .created_seq = c->seq,
        .created_stack = c->stack,
        .strong = 1,
        .weak = 1,
        .allocator = name,
        .dev_type = (int16_t)(r[5] & 0xffff),
        .dev_index = (int16_t)(r[5] >> 16 & 0xffff),
        .flags = (uint16_t)((r[5] >> 32 & 1 ? S_RESIZABLE : 0) | (c->exact ? S_TIMED : 0)),
        .used = true,
    };
    if (!ix_put(&tpprof_ledger.st_ids, s->id, slot + 1)) {
        s->used = false;
        s->next_kept = tpprof_ledger.free_st;
        tpprof_ledger.free_st = slot + 1;
        return 0;
    }
    uint32_t ref = ref_add(s, 0, c->stack, c->sid);
    attach_block(s, slot);
    tpprof_ledger.storage_bytes += (int64_t)s->nbytes;
    if (tpprof_ledger.storage_bytes > tpprof_ledger.peak_bytes) new_peak(c->seq, c->time);
    return ref;
}

// The tensor `id` is freed (its storage reference is paired by the caller).
// Returns the reference it owned as its record says (obs_tensor.ref, 0 if
// no record: ref_remove checks it is still the tensor's).
static inline __attribute__((always_inline)) uint32_t tensor_freed_at(uint64_t id, uint64_t seq, uint64_t time) {
    if (tpprof_ledger.peak_seq && !tpprof_ledger.peak_end) tpprof_ledger.peak_end = seq;
    // Full mode keeps every record under its id; aggregate mode lets go of it.
    bool full = tpprof_cfg.full;
    // Its grad link (writer/graph.c) goes with it: a test when none is kept.
    if (!full && TPPROF_UNLIKELY(tpprof_graph.grad_ids.count)) tpprof_graph_tensor_freed(id);
    uint32_t k = full ? ix_get(&tpprof_ledger.tn_ids, id) : ix_take(&tpprof_ledger.tn_ids, id);
    if (!k) return 0;
    uint32_t slot = k - 1;
    struct obs_tensor *x = &tpprof_ledger.tn[slot];
    x->freed = true;
    x->freed_ns = time;
    x->freed_seq = seq;
    refs_release(&x->handle_refs); // its handles went with it
    if (full) return x->ref;
    if (alive_at_peak(x->created_seq, true, seq)) {
        x->next_kept = tpprof_ledger.kept_tn;
        tpprof_ledger.kept_tn = slot + 1;
    } else {
        x->used = false;
        x->next_kept = tpprof_ledger.free_tn;
        tpprof_ledger.free_tn = slot + 1;
    }
    return x->ref;
}

// One refcount change of storage `id`, to `counts` (strong | weak << 32).
// `tensor_ref`: a RELEASE sent without a stack because a tensor's free made
// it, carrying that TENSOR_FREED (`tensor`; observe.c): the tensor is freed
// first, then the release is paired with its reference and counted under
// that reference's stack. Returns the storage (and its *slot) for the events
// the record also carries; NULL if it is not known.
static inline __attribute__((always_inline)) struct obs_storage *
on_refcount(const struct rec *c, uint64_t id, uint64_t counts, uint32_t refop, bool tensor_ref, uint64_t tensor,
            uint32_t *slot) {
    struct obs_thread *th = c->th;
    uint32_t owner_ref = 0;
    if (tensor_ref) owner_ref = tensor_freed_at(tensor, c->seq, c->time);
    else rc_count(refop, c->stack, c->sid);
    struct obs_storage *s = storage_get(id, slot);
    if (!s) {
        if (tensor_ref) rc_count(refop, 0, 0);
        return NULL;
    }
    s->strong = (uint32_t)counts;
    s->weak = (uint32_t)(counts >> 32);
    if (refop == TP_OBS_REFOP_RELEASE) { // the most frequent, a tensor's free: tested first
        uint64_t owner = tensor_ref ? tensor : 0;
        if (th && !tensor_ref) { // the newest freed tensor of this storage on this thread owns it
            struct freed_stack *f = &tpprof_ledger.freed[c->tindex];
            for (uint32_t i = th->nfreed; i-- > 0;)
                if (f->e[i].storage == s->id) {
                    owner = f->e[i].tensor;
                    owner_ref = f->e[i].ref;
                    memmove(&f->e[i], &f->e[i + 1], (th->nfreed - i - 1) * sizeof f->e[0]);
                    th->nfreed--;
                    break;
                }
        }
        const struct obs_ref *gone = owner ? ref_remove(s, owner, owner_ref, false) : NULL;
        if (!gone) gone = ref_remove(s, 0, 0, false);
        if (tensor_ref) rc_count(refop, gone ? gone->stack : 0, gone ? gone->sid : 0);
        if (s->strong == 0) {
            s->flags |= S_LAST_RELEASE;
            s->last_release_ns = c->time;
            s->implicit_weak = c->tindex + 1;
        }
    } else if (refop == TP_OBS_REFOP_RETAIN) {
        uint32_t ref = ref_add(s, refop, c->stack, c->sid);
        if (th && ref) {
            th->retain_storage = s->id;
            th->retain_ref = ref;
        }
        return s; // keeps the pending retain for a TENSOR_CREATED
    } else if (refop == TP_OBS_REFOP_LOCK || refop == TP_OBS_REFOP_WEAK_RETAIN) {
        ref_add(s, refop, c->stack, c->sid);
    } else if (refop == TP_OBS_REFOP_WEAK_RELEASE) {
        if (s->strong == 0 && s->implicit_weak == c->tindex + 1) s->implicit_weak = 0; // c10's +1
        else ref_remove(s, 0, 0, true);
    }
    if (th) th->retain_storage = 0;
    return s;
}

// exact: `time` is the event's own (ticks, or full mode), not the merge's.
// A storage whose lifetime is not timed (observe.c, "Timed lifetimes") is
// left out of the live count and sum. Released with an exact time (on
// another thread than made it, or long after), it still counts in the
// maximum when that time less its creation's merge time is this long: the
// merge's time comes after the event (by up to a drain's wait and a slow
// commit's, hundreds of ms), so the difference is at most what the storage
// lived, and a small storage kept for seconds is not missed. Two merge
// times would not do: a storage of microseconds made just before a slow
// drain and dropped just after looks as old as the drain was slow.
#define COARSE_LIVE_NS ((uint64_t)10000000)
static inline void on_data_released(struct obs_storage *s, uint64_t seq, uint64_t time, bool exact) {
    if (s->flags & S_RELEASED) return;
    s->flags |= S_RELEASED;
    // (An untimed creation has the merge's time, which may come after an
    // exact release's.)
    if (time < s->created_ns) time = s->created_ns;
    s->data_released_ns = time;
    s->released_batch_ns = tpprof_ledger.batch_ns;
    s->released_seq = seq;
    tpprof_ledger.storage_bytes -= (int64_t)s->nbytes;
    if (s->nbytes && !tpprof_ledger.peak_end) tpprof_ledger.peak_end = seq;
    struct lifetime *l = &tpprof_ledger.lifetimes[s->allocator];
    l->count++;
    uint64_t live = time - s->created_ns;
    if ((s->flags & S_TIMED) && exact) {
        l->live_count++;
        l->live_sum += (int64_t)live;
        if ((int64_t)live > l->live_max) l->live_max = (int64_t)live;
    } else if (exact && live >= COARSE_LIVE_NS && (int64_t)live > l->live_max) {
        l->live_max = (int64_t)live; // untimed, but long, and at most what it was
    }
    if ((s->flags & S_HAS_BLOCK) && !(s->flags & S_BLOCK_FREED)) s->flags |= S_LIFETIME_PENDING;
    else lifetime_add_delay(s, 0);
}

static inline __attribute__((always_inline)) void on_storage_freed(struct obs_storage *s, uint32_t slot, uint64_t seq,
                                                                   uint64_t time, bool exact) {
    if (!(s->flags & S_RELEASED)) on_data_released(s, seq, time, exact);
    s->flags |= S_FREED;
    s->freed_ns = time;
    s->implicit_weak = 0;
    if (tpprof_cfg.full) return;
    if (alive_at_peak(s->created_seq, true, s->released_seq)) {
        s->next_kept = tpprof_ledger.kept_st;
        tpprof_ledger.kept_st = slot + 1;
        ix_take(&tpprof_ledger.st_ids, s->id); // the id may not come again, but the record is history now
    } else {
        storage_drop(slot);
    }
}

static void on_data_swapped(const struct rec *c, const uint64_t *r) {
    uint32_t slot;
    struct obs_storage *s = storage_get(r[2], &slot);
    if (!s) return;
    block_unlink(s, slot);
    tpprof_ledger.storage_bytes += (int64_t)r[4] - (int64_t)s->nbytes;
    if (r[4] < s->nbytes && !tpprof_ledger.peak_end) tpprof_ledger.peak_end = c->seq;
    s->data = r[3];
    s->nbytes = r[4];
    attach_block(s, slot);
    if (tpprof_ledger.storage_bytes > tpprof_ledger.peak_bytes) new_peak(c->seq, c->time);
}

// The storage's creation reference (op 0), if no tensor owns it yet; 0 none.
static inline uint32_t creation_ref(const struct obs_storage *s) {
    for (uint32_t r = s->refs; r; r = tpprof_ledger.refs[r].next)
        if (tpprof_ledger.refs[r].op == 0 && tpprof_ledger.refs[r].tensor == 0) return r;
    return 0;
}

// `adopted`: the tensor took over its storage's creation reference (no
// RETAIN came): that reference becomes the tensor's, taken where the tensor
// was made (the storage's creation stack stays when the tensor has none),
// so the tensor's free pairs with it, its release counts under the tensor's
// stack, and a tensor alive at the end is that reference's holder.
// Otherwise the RETAIN just before, if of this storage, is its.
// `made`: the creation reference of a storage made in the same record (0:
// none, or the storage came in a record of its own): the one adopted.
static inline void on_tensor_created(const struct rec *c, const uint64_t *r, bool adopted, uint32_t made) {
    struct obs_thread *th = c->th;
    uint32_t ref = 0; // the reference it owns now (its free releases it)
    if (adopted) {
        uint32_t slot;
        struct obs_storage *s;
        ref = made;
        if (!ref && (s = storage_get(r[3], &slot)) != NULL) ref = creation_ref(s);
        if (ref && c->sid) {
            tpprof_ledger.refs[ref].stack = c->stack;
            tpprof_ledger.refs[ref].sid = c->sid;
        }
    } else if (th && th->retain_storage == r[3] && th->retain_ref) {
        ref = th->retain_ref;
    }
    if (ref) tpprof_ledger.refs[ref].tensor = r[2];
    uint32_t slot = new_tensor_slot();
    if (slot == UINT32_MAX) return;
    struct obs_tensor *x = &tpprof_ledger.tn[slot];
    // Every field but the dims past ndim, which nothing reads: a tensor
    // record is written for every tensor, nearly all of them short-lived.
    int nd = (int)(r[6] & 0xff);
    if (nd > MAX_DIMS) nd = MAX_DIMS;
    x->id = r[2];
    x->storage = r[3];
    x->base = r[4];
    x->offset = (int64_t)r[5];
    x->created_ns = c->time;
    x->created_seq = c->seq;
    x->freed_ns = x->freed_seq = 0;
    x->created_stack = c->stack;
    x->itemsize = (uint32_t)(r[6] >> 32);
    x->version = x->next_kept = 0;
    x->dtype = (int32_t)(uint32_t)(r[6] >> 8 & 0xffffff);
    x->ndim = (uint8_t)nd;
    x->freed = false;
    x->used = true;
    for (int i = 0; i < nd; i++) {
        x->sizes[i] = (int64_t)r[7 + i];
        x->strides[i] = (int64_t)r[7 + nd + i];
    }
    x->handle_refs = 0;
    x->ref = ref;
    x->creation_dropped = false;
    if (!ix_put(&tpprof_ledger.tn_ids, x->id, slot + 1)) {
        x->used = false;
        x->next_kept = tpprof_ledger.free_tn;
        tpprof_ledger.free_tn = slot + 1;
    }
}

// A TENSOR_FREED on its own (full mode, or more nested than observe.c
// holds): its RELEASE comes later and is paired through the freed stack.
static void on_tensor_freed(const struct rec *c, const uint64_t *r) {
    struct obs_thread *th = c->th;
    if (th) {
        struct freed_stack *f = &tpprof_ledger.freed[c->tindex];
        if (th->nfreed == FREED_STACK) { // deeper than any release chain: forget the oldest
            memmove(&f->e[0], &f->e[1], (FREED_STACK - 1) * sizeof f->e[0]);
            th->nfreed--;
        }
        f->e[th->nfreed].tensor = r[2];
        f->e[th->nfreed].storage = r[3];
        f->e[th->nfreed].ref = tensor_freed_at(r[2], c->seq, c->time);
        th->nfreed++;
    } else {
        tensor_freed_at(r[2], c->seq, c->time);
    }
}

#define HANDLE_WINDOW 16

// How many outer frames stacks a and b (stack_nodes ids: a trie from the
// outermost frame) have in common.
static int common_frames(uint32_t a, uint32_t b) {
    const struct tpprof_node *nodes = tpprof_w.nodes;
    int da = 0, db = 0;
    for (uint32_t n = a; n && da < 4 * TPPROF_MAX_DEPTH; n = nodes[n].parent) da++;
    for (uint32_t n = b; n && db < 4 * TPPROF_MAX_DEPTH; n = nodes[n].parent) db++;
    for (; da > db; da--) a = nodes[a].parent;
    for (; db > da; db--) b = nodes[b].parent;
    for (; a != b && da > 0; da--) {
        a = nodes[a].parent;
        b = nodes[b].parent;
    }
    return da;
}

// A tensor handle taken (tp_tensor_retain) or dropped, not the last (op:
// RETAIN or RELEASE; r[3] the handles after it), with its own stack. The
// ledger keeps the retains no release has matched. A release names no
// handle, so it cancels the outstanding one whose stack shares the most
// outer frames with its own (the code that took a handle is usually the
// code that gives it back: a helper's retain and release inside one call
// share that call's frames), on a tie the handle the tensor was created
// with, then the newest retain. refcount_sites counts them as ops 6 and 7.
static void on_tensor_ref(const struct rec *c, const uint64_t *r, uint32_t refop) {
    bool retain = refop == TP_OBS_REFOP_RETAIN;
    rc_count(retain ? 6 : 7, c->stack, c->sid);
    uint32_t k = ix_get(&tpprof_ledger.tn_ids, r[2]);
    if (!k) return;
    struct obs_tensor *x = &tpprof_ledger.tn[k - 1];
    if (x->freed) return;
    if (retain) {
        ref_push(&x->handle_refs, TP_OBS_REFOP_RETAIN, c->stack, c->sid);
        return;
    }
    // Only the newest HANDLE_WINDOW handles are weighed: a program that
    // holds thousands of one tensor's handles costs a few compares a release.
    int best = x->creation_dropped ? -1 : common_frames(c->stack, x->created_stack);
    uint32_t *best_link = NULL;
    int seen = 0;
    for (uint32_t *link = &x->handle_refs; *link && seen < HANDLE_WINDOW; link = &tpprof_ledger.refs[*link].next, seen++) {
        int d = common_frames(c->stack, tpprof_ledger.refs[*link].stack);
        if (d > best) {
            best = d;
            best_link = link;
        }
    }
    if (best_link) {
        ref_unlink(&x->handle_refs, *best_link);
    } else if (best >= 0) {
        x->creation_dropped = true;
    }
}

static void on_version(const uint64_t *r) {
    uint32_t k = ix_get(&tpprof_ledger.tn_ids, r[2]);
    if (!k) return;
    struct obs_tensor *x = &tpprof_ledger.tn[k - 1];
    x->version = (uint32_t)r[3];
    uint32_t slot;
    struct obs_storage *s = storage_get(x->storage, &slot);
    if (s) s->version_bumps++;
}

static void on_allocator(struct tpprof_thread *t, const uint64_t *r, uint64_t seq, uint64_t time, uint32_t stack) {
    uint32_t action = (uint32_t)(r[2] & 0xff);
    if (action == TP_OBS_ALLOC_SEGMENT_RESERVE) {
        uint32_t n = tpprof_ledger.nsegs;
        if (grow((void **)&tpprof_ledger.segs, &tpprof_ledger.capsegs, n, sizeof *tpprof_ledger.segs, 64)) {
            tpprof_ledger.segs[n].base = r[3];
            tpprof_ledger.segs[n].size = r[4];
            tpprof_ledger.nsegs++;
        }
    } else if (action == TP_OBS_ALLOC_SEGMENT_RELEASE) {
        for (uint32_t i = 0; i < tpprof_ledger.nsegs; i++)
            if (tpprof_ledger.segs[i].base == r[3]) {
                tpprof_ledger.segs[i] = tpprof_ledger.segs[--tpprof_ledger.nsegs];
                break;
            }
    }
    if (tpprof_ledger.naev == tpprof_ledger.capaev) {
        uint64_t ncap = tpprof_ledger.capaev ? tpprof_ledger.capaev * 2 : 4096;
        struct alloc_event *n = tpprof_mem_grow(tpprof_ledger.aev, tpprof_ledger.capaev * sizeof *n, ncap * sizeof *n);
        if (!n) return;
        tpprof_ledger.aev = n;
        tpprof_ledger.capaev = ncap;
    }
    struct alloc_event *e = &tpprof_ledger.aev[tpprof_ledger.naev++];
    e->seq = seq;
    e->time_ns = time;
    e->thread = (uint32_t)t->index;
    e->stack = stack;
    e->allocator = name_index(&r[9], true);
    e->action = (uint16_t)action;
    e->dev_type = (int16_t)(r[2] >> 8 & 0xffff);
    e->dev_index = (int16_t)(r[2] >> 24 & 0xffff);
    e->segment = r[3];
    e->segment_size = r[4];
    e->block = r[5];
    e->block_size = r[6];
    e->requested = r[7];
    e->stream = r[8];
}

// events rows (full mode): op 10.. as docs/schema-tensors.md lists them.
static void keep_event(struct tpprof_thread *t, const uint64_t *r, int kind, uint32_t refop, uint64_t seq,
                       uint64_t time, uint32_t sid) {
    static const int op_of[] = {0, 10, 11, 12, 13, 0, 14, 15, 16, 0, 17, 18, 19, 20, 21, 22};
    uint64_t addr = r[2], size = 0, old = 0;
    int k = 0;
    if (kind == TP_OBS_NODE_CREATED && (r[1] & TPPROF_OBS_MORE_EDGES)) return; // the rest of an 18's edges
    if (kind == TP_OBS_TENSOR_SAVED && (r[1] & TPPROF_OBS_GRAD)) { // GRAD_SET
        tpprof_writer_keep_event(t, seq, 23, 0, time, r[2], r[3], sid, r[4]);
        return;
    }
    switch (kind) {
    case TP_OBS_STORAGE_CREATED: size = r[4]; old = r[3]; break;
    case TP_OBS_STORAGE_REFCOUNT: size = r[3] & 0xffffffffu; old = r[3] >> 32; k = (int)refop; break;
    case TP_OBS_TENSOR_CREATED: size = r[3]; old = r[4]; break;
    case TP_OBS_TENSOR_FREED: size = r[3]; break;
    case TP_OBS_VERSION_BUMPED: size = r[3]; break;
    case TP_OBS_TENSOR_REFCOUNT: size = r[3]; k = (int)refop; break;
    // The graph: address = the node id (the node's edges are graph_edges rows)
    case TP_OBS_NODE_RAN: size = r[3]; break;
    case TP_OBS_TENSOR_SAVED:
    case TP_OBS_SAVED_RELEASED: size = r[3]; old = r[4]; k = (int)r[5]; break;
    default: break;
    }
    if (kind < (int)(sizeof op_of / sizeof op_of[0]) && op_of[kind]) tpprof_writer_keep_event(t, seq, op_of[kind], k, time, addr, size, sid, old);
}

// The apply order of the record being applied (tpprof_obs_apply's).
static uint64_t cur_order;

// The record's common fields. Any record but a RETAIN ends a RETAIN's
// wait for its TENSOR_CREATED (`keep_retain`: the caller decides).
static inline __attribute__((always_inline)) struct rec rec_of(struct tpprof_thread *t, const uint64_t *r,
                                                              uint64_t time, bool keep_retain, uint32_t sid) {
    struct rec c = {.th = thread_state((uint32_t)t->index), .tindex = (uint32_t)t->index,
                    .stack = stack_of(sid), .sid = sid, .seq = cur_order, .time = time,
                    .exact = (r[1] & TPPROF_OBS_TICKS) || tpprof_cfg.full};
    if (!keep_retain && c.th) c.th->retain_storage = 0;
    return c;
}

void tpprof_obs_apply(struct tpprof_thread *t, const uint64_t *r, uint64_t time, uint64_t order) {
    tpprof_ledger.batch_ns = time;
    cur_order = order;
    if (r[1] & TPPROF_OBS_TICKS) time = tpprof_writer_ticks_to_ns(r[(r[1] & 0xff) - 1], time);
    int kind = (int)(r[0] & 15);
    // Its events row needs nothing from the ledger: kept first.
    if (TPPROF_UNLIKELY(tpprof_cfg.full) &&
        ((kind >= TP_OBS_STORAGE_CREATED && kind <= TP_OBS_VERSION_BUMPED) || kind >= TP_OBS_TENSOR_REFCOUNT))
        keep_event(t, r, kind, (uint32_t)(r[1] >> 8 & 0xff), order, time, (uint32_t)(r[1] >> 32));
    uint32_t slot;
    struct obs_storage *s;
    // The two kinds of nearly every record first: a compare costs less than a switch's jump.
    if (kind == TP_OBS_STORAGE_REFCOUNT) {
        uint64_t storage = r[2], tensor = 0;
        bool tensor_ref = (r[1] & TPPROF_OBS_TENSOR_REF) && (r[1] & 0xff) >= 5;
        if (tensor_ref) tensor = r[4];
        struct rec c = rec_of(t, r, time, true, (uint32_t)(r[1] >> 32));
        s = on_refcount(&c, storage, r[3], (uint32_t)(r[1] >> 8 & 0xff), tensor_ref, tensor, &slot);
        if (!s) return;
        if (r[1] & TPPROF_OBS_DATA_RELEASED) on_data_released(s, c.seq, c.time, c.exact); // it carries that too
        if (r[1] & TPPROF_OBS_FREED) on_storage_freed(s, slot, c.seq, c.time, c.exact);  // and maybe this
        return;
    }
    if (kind == TP_OBS_TENSOR_CREATED) {
        struct rec c = rec_of(t, r, time, true, (uint32_t)(r[1] >> 32));
        if (r[1] & TPPROF_OBS_WITH_RETAIN) { // the RETAIN it carries comes first
            uint32_t nd = (uint32_t)(r[6] & 0xff), words = (uint32_t)(r[1] & 0xff);
            if (nd > MAX_DIMS || words < 8 + 2 * nd) {
                if (c.th) c.th->retain_storage = 0;
                return;
            }
            on_refcount(&c, r[3], r[7 + 2 * nd], TP_OBS_REFOP_RETAIN, false, 0, &slot);
        }
        on_tensor_created(&c, r, (r[1] & TPPROF_OBS_ADOPTED) != 0, 0);
        if (c.th) c.th->retain_storage = 0;
        return;
    }
    struct rec c = rec_of(t, r, time, false, (uint32_t)(r[1] >> 32));
    switch (kind) {
    case TP_OBS_STORAGE_CREATED: {
        // Its allocator's name: none, its 3 words, or the one this ring's
        // last record with a name carried (TPPROF_OBS_SAME_NAME).
        bool has_name = r[5] >> 33 & 1, named = has_name && !(r[1] & TPPROF_OBS_SAME_NAME);
        uint32_t b = named ? 9 : 6, words = (uint32_t)(r[1] & 0xff); // b: the word after the storage's
        if (words < b) break;
        uint16_t name = named ? name_index(&r[6], true) : has_name ? t->w_obs_name : 0;
        if (named) t->w_obs_name = name;
        uint32_t made = on_storage_created(&c, r, name);
        if (!(r[1] & TPPROF_OBS_WITH_TENSOR)) break;
        // And the tensor made on it: record + b - 1 reads as its own.
        const uint64_t *x = r + b - 1;
        uint32_t nd = (uint32_t)(r[b + 5] & 0xff);
        if (nd > MAX_DIMS || words < b + 6 + 2 * nd) break; // (+ 1 with its ticks)
        uint32_t tsid = (uint32_t)r[b];
        struct rec ct = c;
        ct.sid = tsid;
        ct.stack = stack_of(tsid);
        on_tensor_created(&ct, x, (r[1] & TPPROF_OBS_ADOPTED) != 0, made);
        break;
    }
    case TP_OBS_STORAGE_DATA_RELEASED:
        if ((s = storage_get(r[2], &slot)) != NULL) on_data_released(s, c.seq, c.time, c.exact);
        break;
    case TP_OBS_STORAGE_FREED:
        if ((s = storage_get(r[2], &slot)) != NULL) on_storage_freed(s, slot, c.seq, c.time, c.exact);
        break;
    case TP_OBS_STORAGE_DATA_SWAPPED: on_data_swapped(&c, r); break;
    case TP_OBS_TENSOR_FREED: on_tensor_freed(&c, r); break;
    case TP_OBS_VERSION_BUMPED: on_version(r); break;
    case TP_OBS_ALLOCATOR: on_allocator(t, r, c.seq, c.time, c.stack); break;
    case TP_OBS_TENSOR_REFCOUNT: on_tensor_ref(&c, r, (uint32_t)(r[1] >> 8 & 0xff)); break;
    case TP_OBS_NODE_CREATED:
    case TP_OBS_NODE_RAN:
    case TP_OBS_NODE_FREED:
    case TP_OBS_TENSOR_SAVED:
    case TP_OBS_SAVED_RELEASED: tpprof_graph_apply(kind, r, c.time, c.stack); break; // (graph.c)
    default: break;
    }
}

// A forked child's database starts empty of allocator events: the parent's
// are in the parent's file.
void tpprof_obs_fork_child(void) { tpprof_ledger.naev = 0; }

// ---------------------------------------------------------------------------
// Folded views (record/obsfold.c): counted on their thread, added here. Each slot
// of a thread keeps its stack once taken, so what is new is the count less
// what was added before (w_fold_taken); a struct recycled for another thread
// is collected first (merge.c), then cleared with its counts.

void tpprof_obs_fold_collect(struct tpprof_thread *t) {
    for (uint32_t k = 0; k < TPPROF_FOLD_SLOTS; k++) {
        uint64_t count = t->fold_count[k];
        if (count == t->w_fold_taken[k]) continue;
        uint32_t key = t->fold_sid[k], sid = key >> 1, stack = stack_of(sid);
        int64_t n = (int64_t)(count - t->w_fold_taken[k]);
        t->w_fold_taken[k] = count;
        if (!(key & 1)) rc_add(TP_OBS_REFOP_RETAIN, stack, sid, n); // a view's retain (a new storage's tensor: none)
        rc_add(TP_OBS_REFOP_RELEASE, stack, sid, n); // under its reference's stack, as a tensor's release
    }
    // Storages folded with their tensor: their data was released (not
    // timed: only counted; their release delay is never measured, as for any
    // storage freed before its block).
    for (uint32_t a = 0; a < TPPROF_FOLD_ALLOCATORS; a++) {
        uint64_t count = t->fold_alloc_count[a];
        if (count == t->w_fold_alloc_taken[a]) continue;
        const uint64_t *name = t->fold_alloc_name[a];
        tpprof_ledger.lifetimes[name_index(name, name[0] != 0)].count += (int64_t)(count - t->w_fold_alloc_taken[a]);
        t->w_fold_alloc_taken[a] = count;
    }
}

void tpprof_obs_fold_collect_all(void) {
    // What a thread still running holds back (it may be alive at the end,
    // a leak) is applied here, last, as if it came now.
    uint64_t held[TPPROF_OBS_HELD][TPPROF_OBS_HELD_WORDS];
    struct tpprof_thread *owner = NULL;
    uint32_t n = tpprof_obs_seize_held(held, &owner);
    for (uint32_t i = 0; i < n; i++) {
        held[i][0] = tpprof_hdr(0, TPPROF_OP_OBS, (int)(held[i][0] & 0xff));
        tpprof_obs_apply(owner, held[i], tpprof_ledger.batch_ns, tpprof_w.order++);
    }
    for (struct tpprof_thread *t = atomic_load(&tpprof_threads); t; t = t->next) tpprof_obs_fold_collect(t);
}
