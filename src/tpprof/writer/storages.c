// storages.c: the writer's view of the tensor runtime (observe.c's records):
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
#include "store/sqlite_api.h"
#include <stdio.h>
#include <string.h>

#include "tensorplay/observer.h"
#include "writer/writer.h"

// ---------------------------------------------------------------------------
// Records.

enum {
    S_RESIZABLE = 1, S_RELEASED = 2, S_FREED = 4, S_HAS_BLOCK = 8, S_BLOCK_FREED = 16,
    S_LIFETIME_PENDING = 32, S_LAST_RELEASE = 64, S_HAS_ALLOCATOR = 128,
    S_TIMED = 256, // its creation's time is exact: its lifetime is measured (observe.c, "Timed lifetimes")
};

struct obs_storage {
    uint64_t id, data, nbytes;
    uint64_t created_ns, last_release_ns, data_released_ns, freed_ns;
    uint64_t released_batch_ns; // the merge time data_released_ns came in (aggregate mode: delays)
    uint64_t block_addr, block_size, block_freed_ns;
    uint64_t created_seq, released_seq;
    uint32_t created_stack, strong, weak, version_bumps;
    uint32_t refs;           // newest outstanding reference (ref pool index, 0 none)
    uint32_t next_in_block;  // next storage (slot + 1) backed by the same block
    uint32_t next_kept;      // peak list link (slot + 1)
    uint32_t implicit_weak;  // thread index + 1 owing c10's implicit weak release
    uint16_t allocator;      // index into names
    int16_t dev_type, dev_index;
    uint16_t block_kind;
    uint16_t flags;
    bool used;
};

#define MAX_DIMS 8
struct obs_tensor {
    uint64_t id, storage, base;
    int64_t offset;
    uint64_t created_ns, created_seq, freed_ns, freed_seq;
    uint32_t created_stack, itemsize, version, next_kept;
    uint32_t handle_refs; // outstanding tp_tensor_retain handles, newest first (ref pool index, 0 none)
    int32_t dtype;
    uint8_t ndim;
    bool freed, used;
    bool creation_dropped; // the handle it was created with was released (others hold it)
    int64_t sizes[MAX_DIMS], strides[MAX_DIMS]; // the first ndim of each are set
};

struct obs_ref {
    uint32_t next;   // older reference of the same storage
    uint32_t prev;   // newer one (0: the list's head)
    uint32_t stack;  // stack_nodes id
    uint64_t tensor; // owning tensor, 0 none
    uint32_t op;     // 0 creation, 1 retain, 3 weak retain, 5 lock
    uint32_t sid;    // depot id of the stack (rc_count's hint, for its release)
};

struct alloc_event {
    uint64_t seq, time_ns, segment, segment_size, block, block_size, requested, stream;
    uint32_t thread, stack;
    uint16_t allocator, action;
    int16_t dev_type, dev_index;
};

struct lifetime {
    int64_t count, live_sum, live_max, delay_sum, delay_max;
    int64_t delay_count; // storages whose release delay was measured
    int64_t live_count;  // storages whose live time was measured (timed: S_TIMED)
};

// Key (a record's id, a block's address; never 0) -> slot + 1 of the
// records alive now. writer.h's map costs a call and a hash probe an
// operation, and one small tensor op makes a dozen of them on records that
// live for microseconds, so a direct-mapped table in front takes the keys
// first, and the map (`back`) only a key whose entry another key holds.
// Ids come from the runtime's one counter and take the entry of their low
// bits, so the short-lived records of consecutive ids pass through
// different entries, and a long-lived one keeps its entry; addresses are
// hashed. Each key is in one place: its entry, or else `back`. The front is
// tpprof's own data (never a root of the leak scan).
#define IX_BITS 12
struct ix_entry {
    uint64_t key; // 0: free (val 0 too)
    uint32_t val;
};
struct ledger_index {
    struct ix_entry front[1 << IX_BITS];
    uint64_t back_max; // no key above it was ever put in back
    struct tpprof_map back;
};

#define MAX_NAMES 64
#define FREED_STACK 16

// Per program thread: what pairs a refcount change with a tensor. Every
// record touches its thread's, so it is 16 bytes; the stack of freed
// tensors, which only a TENSOR_FREED sent on its own and an unowned RELEASE
// use, is apart (o.freed, same index).
struct obs_thread {
    uint64_t retain_storage; // the last event was a RETAIN of this storage...
    uint32_t retain_ref;     // ...that made this reference
    uint32_t nfreed;         // entries in the thread's freed stack
};
struct freed_stack {
    struct { uint64_t tensor, storage; } e[FREED_STACK]; // TENSOR_FREED awaiting their RELEASE
};

static struct {
    struct obs_storage *st;
    uint32_t nst, capst, free_st; // free list through next_kept
    struct obs_tensor *tn;
    uint32_t ntn, captn, free_tn;
    struct obs_ref *refs;
    uint32_t nrefs, caprefs, free_ref;
    struct ledger_index st_ids, tn_ids;
    struct ledger_index by_block;  // live block address -> first storage slot + 1
    struct ledger_index ref_of;    // tensor id -> the storage reference it owns (ref pool index)
    uint32_t kept_st, kept_tn;    // freed, but alive at the current peak
    struct obs_thread *threads;
    struct freed_stack *freed;
    uint32_t capthreads, capfreed;
    char names[MAX_NAMES][24];
    uint32_t nnames;               // names[0] is "no allocator"
    struct lifetime lifetimes[MAX_NAMES];
    struct tpprof_map rc_index;    // (stack << 3 | op) + 1 -> rc slot + 1
    struct { uint32_t stack, op; int64_t count; } *rc;
    uint32_t nrc, caprc;
    uint32_t *rc_hint;            // (depot stack id, op parity) -> rc slot + 1 it used last
    uint32_t caprc_hint;
    struct alloc_event *aev;
    uint64_t naev, capaev;
    struct { uint64_t base, size; } *segs;
    uint32_t nsegs, capsegs;
    int64_t storage_bytes, peak_bytes;
    uint64_t peak_seq, peak_end, peak_ns;
    uint64_t batch_ns;             // merge time of the record being applied
} o;

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
    uint64_t h = x == &o.by_block ? (key * 0x9E3779B97F4A7C15ull) >> (64 - IX_BITS) : key;
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
    if (!grow((void **)&o.freed, &o.capfreed, index, sizeof *o.freed, 64)) return NULL;
    if (!grow((void **)&o.threads, &o.capthreads, index, sizeof *o.threads, 64)) return NULL;
    return &o.threads[index];
}

static inline struct obs_thread *thread_state(uint32_t index) {
    if (TPPROF_LIKELY(index < o.capthreads)) return &o.threads[index];
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
    if (o.nnames == 0) o.nnames = 1;
    for (uint32_t i = 1; i < o.nnames; i++)
        if (strcmp(o.names[i], name) == 0) return (uint16_t)i;
    if (o.nnames == MAX_NAMES) return MAX_NAMES - 1; // shares the last slot
    memcpy(o.names[o.nnames], name, 24);
    return (uint16_t)o.nnames++;
}

static void device_text(char *out, size_t cap, int type, int index) {
    if (type == 0) snprintf(out, cap, "cpu");
    else if (type == 1) snprintf(out, cap, "cuda:%d", index);
    else snprintf(out, cap, "device%d:%d", type, index);
}

// ---------------------------------------------------------------------------
// References.

// A reference record at the head of the list *head (a storage's references,
// a tensor's handles); 0 when out of memory.
static inline uint32_t ref_push(uint32_t *head, uint32_t op, uint32_t stack, uint32_t sid) {
    uint32_t r = o.free_ref;
    if (TPPROF_LIKELY(r)) {
        o.free_ref = o.refs[r].next;
    } else {
        if (!grow((void **)&o.refs, &o.caprefs, o.nrefs + 1, sizeof *o.refs, 1024)) return 0;
        r = ++o.nrefs;
    }
    o.refs[r] = (struct obs_ref){.next = *head, .stack = stack, .op = op, .sid = sid};
    if (*head) o.refs[*head].prev = r;
    *head = r;
    return r;
}

// Unlinks reference r from the list *head and gives it back to the pool
// (its fields stay readable until the next ref_push).
static inline void ref_unlink(uint32_t *head, uint32_t r) {
    uint32_t p = o.refs[r].prev, n = o.refs[r].next;
    if (p) o.refs[p].next = n;
    else *head = n;
    if (n) o.refs[n].prev = p;
    o.refs[r].next = o.free_ref;
    o.free_ref = r;
}

// Reference r now belongs to tensor `id` (its free releases it).
static inline void ref_own(uint32_t r, uint64_t id) {
    o.refs[r].tensor = id;
    ix_put(&o.ref_of, id, r); // out of memory: ref_remove finds it by a walk
}

static inline uint32_t ref_add(struct obs_storage *s, uint32_t op, uint32_t stack, uint32_t sid) {
    return ref_push(&s->refs, op, stack, sid);
}

// Gives every record of the list *head back to the pool.
static inline void refs_release(uint32_t *head) {
    while (*head) {
        uint32_t r = *head;
        *head = o.refs[r].next;
        if (o.refs[r].tensor && ix_get(&o.ref_of, o.refs[r].tensor) == r) ix_take(&o.ref_of, o.refs[r].tensor);
        o.refs[r].next = o.free_ref;
        o.free_ref = r;
    }
}

// Unlinks the newest reference matching (tensor != 0: owned by it; else an
// unowned one of the given strength); NULL if none, else the reference,
// whose fields stay readable until the next ref_add.
// A tensor's reference is found through ref_of, not by a walk: a storage
// with 100,000 live views freed oldest first took 12 s here when each free
// walked its list.
static inline const struct obs_ref *ref_remove(struct obs_storage *s, uint64_t tensor, bool weak) {
    if (tensor) {
        uint32_t r = ix_get(&o.ref_of, tensor);
        if (TPPROF_LIKELY(r && o.refs[r].tensor == tensor)) {
            ix_take(&o.ref_of, tensor);
            ref_unlink(&s->refs, r);
            return &o.refs[r];
        }
    }
    for (uint32_t r = s->refs; r; r = o.refs[r].next) {
        struct obs_ref *x = &o.refs[r];
        bool match = tensor ? x->tensor == tensor
                            : x->tensor == 0 && (weak ? x->op == TP_OBS_REFOP_WEAK_RETAIN
                                                      : x->op != TP_OBS_REFOP_WEAK_RETAIN);
        if (!match) continue;
        if (tensor && ix_get(&o.ref_of, tensor) == r) ix_take(&o.ref_of, tensor);
        ref_unlink(&s->refs, r);
        return x;
    }
    return NULL;
}

// ---------------------------------------------------------------------------
// Record lifetime and the peak.

// "At the peak" is the last moment of the peak: the storage total reaches
// its maximum at peak_seq and everything stays until peak_end (the first
// tensor free or data release after it; 0 while none came). So the tensor
// created on the storage that made the peak is in it, and so is the first
// tensor freed after it.
static inline bool alive_at_peak(uint64_t created_seq, bool dead, uint64_t dead_seq) {
    uint64_t end = o.peak_end ? o.peak_end : UINT64_MAX;
    return o.peak_seq && created_seq < end && (!dead || dead_seq >= end);
}

static inline __attribute__((always_inline)) void block_unlink(struct obs_storage *s, uint32_t slot) {
    if (!(s->flags & S_HAS_BLOCK) || (s->flags & S_BLOCK_FREED)) return;
    // Heading the block's list (nearly always its only storage): the next one heads it now.
    if (ix_replace(&o.by_block, s->block_addr, slot + 1, s->next_in_block)) return;
    for (uint32_t k = ix_get(&o.by_block, s->block_addr); k; k = o.st[k - 1].next_in_block)
        if (o.st[k - 1].next_in_block == slot + 1) {
            o.st[k - 1].next_in_block = s->next_in_block;
            return;
        }
}

static inline __attribute__((always_inline)) void storage_drop(uint32_t slot) {
    struct obs_storage *s = &o.st[slot];
    block_unlink(s, slot);
    refs_release(&s->refs);
    ix_take(&o.st_ids, s->id);
    s->used = false;
    s->next_kept = o.free_st;
    o.free_st = slot + 1;
}

static void tensor_drop(uint32_t slot) {
    struct obs_tensor *x = &o.tn[slot];
    ix_take(&o.tn_ids, x->id);
    x->used = false;
    x->next_kept = o.free_tn;
    o.free_tn = slot + 1;
}

// A new storage peak: the records kept only for the old one go.
static __attribute__((noinline)) void new_peak(uint64_t seq, uint64_t time) {
    o.peak_bytes = o.storage_bytes;
    o.peak_seq = seq;
    o.peak_end = 0;
    o.peak_ns = time;
    if (tpprof_cfg.full) return;
    while (o.kept_st) {
        uint32_t slot = o.kept_st - 1;
        o.kept_st = o.st[slot].next_kept;
        storage_drop(slot);
    }
    while (o.kept_tn) {
        uint32_t slot = o.kept_tn - 1;
        o.kept_tn = o.tn[slot].next_kept;
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
    for (uint32_t i = 0; i < o.nsegs; i++)
        if (data >= o.segs[i].base && data < o.segs[i].base + o.segs[i].size) {
            b = tpprof_live_find(&w->live, o.segs[i].base);
            if (b && data < b->addr + b->size) return b;
        }
    int64_t k = tpprof_writer_map_at(data); // a mapping of its own: found by its start
    if (k >= 0) return &w->maps[k];
    for (uint64_t i = 0; i < w->nmaps; i++)
        if (data >= w->maps[i].addr && data < w->maps[i].addr + w->maps[i].size) return &w->maps[i];
    return NULL;
}

static inline __attribute__((always_inline)) void attach_block(struct obs_storage *s, uint32_t slot) {
    s->flags &= (uint16_t)~(S_HAS_BLOCK | S_BLOCK_FREED);
    if (!s->data) return;
    struct tpprof_block *b = block_of(s->data);
    if (!b) return;
    b->backs = 1;
    s->block_addr = b->addr;
    s->block_size = b->size;
    s->block_kind = tpprof_w.sites[b->site].kind;
    s->flags |= S_HAS_BLOCK;
    if (!ix_swap(&o.by_block, b->addr, slot + 1, &s->next_in_block)) {
        s->next_in_block = 0;
        s->flags &= (uint16_t)~S_HAS_BLOCK; // out of memory: not linked, not claimed
    }
}

static void lifetime_add_delay(struct obs_storage *s, uint64_t delay) {
    struct lifetime *l = &o.lifetimes[s->allocator];
    l->delay_sum += (int64_t)delay;
    l->delay_count++;
    if ((int64_t)delay > l->delay_max) l->delay_max = (int64_t)delay;
    s->flags &= (uint16_t)~S_LIFETIME_PENDING;
}

// The storages backed by the block at `addr` (k: the first's slot + 1).
static __attribute__((noinline)) void block_freed(uint64_t addr, uint64_t time, uint32_t k) {
    while (k) {
        struct obs_storage *s = &o.st[k - 1];
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
    ix_take(&o.by_block, addr);
}

// Usually no storage is left on the block: its last one was dropped first.
void tpprof_obs_block_freed(uint64_t addr, uint64_t time) {
    uint32_t k = ix_get(&o.by_block, addr);
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
    if (TPPROF_LIKELY(o.free_st)) {
        uint32_t slot = o.free_st - 1;
        o.free_st = o.st[slot].next_kept;
        return slot;
    }
    if (!grow((void **)&o.st, &o.capst, o.nst, sizeof *o.st, 1024)) return UINT32_MAX;
    return o.nst++;
}

static inline uint32_t new_tensor_slot(void) {
    if (TPPROF_LIKELY(o.free_tn)) {
        uint32_t slot = o.free_tn - 1;
        o.free_tn = o.tn[slot].next_kept;
        return slot;
    }
    if (!grow((void **)&o.tn, &o.captn, o.ntn, sizeof *o.tn, 1024)) return UINT32_MAX;
    return o.ntn++;
}

static inline struct obs_storage *storage_get(uint64_t id, uint32_t *slot) {
    uint32_t k = ix_get(&o.st_ids, id);
    if (!k) return NULL;
    *slot = k - 1;
    return &o.st[k - 1];
}

static __attribute__((noinline)) void rc_count_slow(uint32_t op, uint32_t stack, uint32_t sid) {
    uint32_t hint = sid << 1 | (op & 1);
    uint64_t key = ((uint64_t)stack << 3 | op) + 1;
    uint32_t k = tpprof_map_get(&o.rc_index, key);
    if (!k) {
        if (!grow((void **)&o.rc, &o.caprc, o.nrc, sizeof *o.rc, 256)) return;
        o.rc[o.nrc].stack = stack;
        o.rc[o.nrc].op = op;
        o.rc[o.nrc].count = 0;
        if (!tpprof_map_put(&o.rc_index, key, o.nrc + 1)) return;
        k = ++o.nrc;
    }
    o.rc[k - 1].count++;
    if (sid && grow((void **)&o.rc_hint, &o.caprc_hint, hint, sizeof *o.rc_hint, 8192)) o.rc_hint[hint] = k;
}

// Counts one refcount change; `sid` (the depot id of `stack`) remembers the
// row it used last, so the common case skips the hash lookup. A retain site
// also counts its tensors' releases (TPPROF_OBS_TENSOR_REF), so each sid has
// two hints: odd ops (retains, lock) and even ones (releases).
static inline void rc_count(uint32_t op, uint32_t stack, uint32_t sid) {
    uint32_t hint = sid << 1 | (op & 1);
    if (TPPROF_LIKELY(hint < o.caprc_hint) && o.rc_hint[hint]) {
        uint32_t h = o.rc_hint[hint] - 1;
        if (TPPROF_LIKELY(o.rc[h].op == op)) {
            o.rc[h].count++;
            return;
        }
    }
    rc_count_slow(op, stack, sid);
}

// r: the record, its storage's words from r[2]; `name`: its allocator's index.
static void on_storage_created(const struct rec *c, const uint64_t *r, uint16_t name) {
    uint32_t slot = new_storage_slot();
    if (slot == UINT32_MAX) return;
    struct obs_storage *s = &o.st[slot];
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
    if (!ix_put(&o.st_ids, s->id, slot + 1)) {
        s->used = false;
        s->next_kept = o.free_st;
        o.free_st = slot + 1;
        return;
    }
    ref_add(s, 0, c->stack, c->sid);
    attach_block(s, slot);
    o.storage_bytes += (int64_t)s->nbytes;
    if (o.storage_bytes > o.peak_bytes) new_peak(c->seq, c->time);
}

// The tensor `id` is freed (its storage reference is paired by the caller).
static inline __attribute__((always_inline)) void tensor_freed_at(uint64_t id, uint64_t seq, uint64_t time) {
    if (o.peak_seq && !o.peak_end) o.peak_end = seq;
    // Full mode keeps every record under its id; aggregate mode lets go of it.
    bool full = tpprof_cfg.full;
    uint32_t k = full ? ix_get(&o.tn_ids, id) : ix_take(&o.tn_ids, id);
    if (!k) return;
    uint32_t slot = k - 1;
    struct obs_tensor *x = &o.tn[slot];
    x->freed = true;
    x->freed_ns = time;
    x->freed_seq = seq;
    refs_release(&x->handle_refs); // its handles went with it
    if (full) return;
    if (alive_at_peak(x->created_seq, true, seq)) {
        x->next_kept = o.kept_tn;
        o.kept_tn = slot + 1;
    } else {
        x->used = false;
        x->next_kept = o.free_tn;
        o.free_tn = slot + 1;
    }
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
    if (tensor_ref) tensor_freed_at(tensor, c->seq, c->time);
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
            struct freed_stack *f = &o.freed[c->tindex];
            for (uint32_t i = th->nfreed; i-- > 0;)
                if (f->e[i].storage == s->id) {
                    owner = f->e[i].tensor;
                    memmove(&f->e[i], &f->e[i + 1], (th->nfreed - i - 1) * sizeof f->e[0]);
                    th->nfreed--;
                    break;
                }
        }
        const struct obs_ref *gone = owner ? ref_remove(s, owner, false) : NULL;
        if (!gone) gone = ref_remove(s, 0, false);
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
        else ref_remove(s, 0, true);
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
    s->released_batch_ns = o.batch_ns;
    s->released_seq = seq;
    o.storage_bytes -= (int64_t)s->nbytes;
    if (s->nbytes && !o.peak_end) o.peak_end = seq;
    struct lifetime *l = &o.lifetimes[s->allocator];
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
        s->next_kept = o.kept_st;
        o.kept_st = slot + 1;
        ix_take(&o.st_ids, s->id); // the id may not come again, but the record is history now
    } else {
        storage_drop(slot);
    }
}

static void on_data_swapped(const struct rec *c, const uint64_t *r) {
    uint32_t slot;
    struct obs_storage *s = storage_get(r[2], &slot);
    if (!s) return;
    block_unlink(s, slot);
    o.storage_bytes += (int64_t)r[4] - (int64_t)s->nbytes;
    if (r[4] < s->nbytes && !o.peak_end) o.peak_end = c->seq;
    s->data = r[3];
    s->nbytes = r[4];
    attach_block(s, slot);
    if (o.storage_bytes > o.peak_bytes) new_peak(c->seq, c->time);
}

// The storage's creation reference (op 0), if no tensor owns it yet; 0 none.
static inline uint32_t creation_ref(const struct obs_storage *s) {
    for (uint32_t r = s->refs; r; r = o.refs[r].next)
        if (o.refs[r].op == 0 && o.refs[r].tensor == 0) return r;
    return 0;
}

// `adopted`: the tensor took over its storage's creation reference (no
// RETAIN came): that reference becomes the tensor's, taken where the tensor
// was made (the storage's creation stack stays when the tensor has none),
// so the tensor's free pairs with it, its release counts under the tensor's
// stack, and a tensor alive at the end is that reference's holder.
// Otherwise the RETAIN just before, if of this storage, is its.
static inline void on_tensor_created(const struct rec *c, const uint64_t *r, bool adopted) {
    struct obs_thread *th = c->th;
    if (adopted) {
        uint32_t slot, ref;
        struct obs_storage *s = storage_get(r[3], &slot);
        if (s && (ref = creation_ref(s)) != 0) {
            ref_own(ref, r[2]);
            if (c->sid) {
                o.refs[ref].stack = c->stack;
                o.refs[ref].sid = c->sid;
            }
        }
    } else if (th && th->retain_storage == r[3] && th->retain_ref) {
        ref_own(th->retain_ref, r[2]);
    }
    uint32_t slot = new_tensor_slot();
    if (slot == UINT32_MAX) return;
    struct obs_tensor *x = &o.tn[slot];
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
    x->creation_dropped = false;
    if (!ix_put(&o.tn_ids, x->id, slot + 1)) {
        x->used = false;
        x->next_kept = o.free_tn;
        o.free_tn = slot + 1;
    }
}

// A TENSOR_FREED on its own (full mode, or more nested than observe.c
// holds): its RELEASE comes later and is paired through the freed stack.
static void on_tensor_freed(const struct rec *c, const uint64_t *r) {
    struct obs_thread *th = c->th;
    if (th) {
        struct freed_stack *f = &o.freed[c->tindex];
        if (th->nfreed == FREED_STACK) { // deeper than any release chain: forget the oldest
            memmove(&f->e[0], &f->e[1], (FREED_STACK - 1) * sizeof f->e[0]);
            th->nfreed--;
        }
        f->e[th->nfreed].tensor = r[2];
        f->e[th->nfreed].storage = r[3];
        th->nfreed++;
    }
    tensor_freed_at(r[2], c->seq, c->time);
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
    uint32_t k = ix_get(&o.tn_ids, r[2]);
    if (!k) return;
    struct obs_tensor *x = &o.tn[k - 1];
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
    for (uint32_t *link = &x->handle_refs; *link && seen < HANDLE_WINDOW; link = &o.refs[*link].next, seen++) {
        int d = common_frames(c->stack, o.refs[*link].stack);
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
    uint32_t k = ix_get(&o.tn_ids, r[2]);
    if (!k) return;
    struct obs_tensor *x = &o.tn[k - 1];
    x->version = (uint32_t)r[3];
    uint32_t slot;
    struct obs_storage *s = storage_get(x->storage, &slot);
    if (s) s->version_bumps++;
}

static void on_allocator(struct tpprof_thread *t, const uint64_t *r, uint64_t seq, uint64_t time, uint32_t stack) {
    uint32_t action = (uint32_t)(r[2] & 0xff);
    if (action == TP_OBS_ALLOC_SEGMENT_RESERVE) {
        uint32_t n = o.nsegs;
        if (grow((void **)&o.segs, &o.capsegs, n, sizeof *o.segs, 64)) {
            o.segs[n].base = r[3];
            o.segs[n].size = r[4];
            o.nsegs++;
        }
    } else if (action == TP_OBS_ALLOC_SEGMENT_RELEASE) {
        for (uint32_t i = 0; i < o.nsegs; i++)
            if (o.segs[i].base == r[3]) {
                o.segs[i] = o.segs[--o.nsegs];
                break;
            }
    }
    if (o.naev == o.capaev) {
        uint64_t ncap = o.capaev ? o.capaev * 2 : 4096;
        struct alloc_event *n = tpprof_mem_grow(o.aev, o.capaev * sizeof *n, ncap * sizeof *n);
        if (!n) return;
        o.aev = n;
        o.capaev = ncap;
    }
    struct alloc_event *e = &o.aev[o.naev++];
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
    static const int op_of[] = {0, 10, 11, 12, 13, 0, 14, 15, 16, 0, 17};
    uint64_t addr = r[2], size = 0, old = 0;
    int k = 0;
    switch (kind) {
    case TP_OBS_STORAGE_CREATED: size = r[4]; old = r[3]; break;
    case TP_OBS_STORAGE_REFCOUNT: size = r[3] & 0xffffffffu; old = r[3] >> 32; k = (int)refop; break;
    case TP_OBS_TENSOR_CREATED: size = r[3]; old = r[4]; break;
    case TP_OBS_TENSOR_FREED: size = r[3]; break;
    case TP_OBS_VERSION_BUMPED: size = r[3]; break;
    case TP_OBS_TENSOR_REFCOUNT: size = r[3]; k = (int)refop; break;
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
    o.batch_ns = time;
    cur_order = order;
    if (r[1] & TPPROF_OBS_TICKS) time = tpprof_writer_ticks_to_ns(r[(r[1] & 0xff) - 1], time);
    int kind = (int)(r[0] & 15);
    // Its events row needs nothing from the ledger: kept first.
    if (TPPROF_UNLIKELY(tpprof_cfg.full) &&
        ((kind >= TP_OBS_STORAGE_CREATED && kind <= TP_OBS_VERSION_BUMPED) || kind == TP_OBS_TENSOR_REFCOUNT))
        keep_event(t, r, kind, (uint32_t)(r[1] >> 8 & 0xff), order, time, (uint32_t)(r[1] >> 32));
    uint32_t slot;
    struct obs_storage *s;
    // The two kinds of nearly every record first: a compare costs less than a switch's jump.
    if (kind == TP_OBS_STORAGE_REFCOUNT) {
        uint64_t storage = r[2], tensor = 0;
        bool packed = r[1] & TPPROF_OBS_PACKED, tensor_ref = (r[1] & TPPROF_OBS_TENSOR_REF) && (r[1] & 0xff) >= 5;
        if (tensor_ref) tensor = r[4];
        if (packed) { // a tensor's release: the tensor in word 2, its storage a delta below it in word 1's top half
            tensor_ref = (r[1] & TPPROF_OBS_TENSOR_REF) && (r[1] & 0xff) >= 4;
            tensor = r[2];
            storage = tensor - (r[1] >> 32);
        }
        struct rec c = rec_of(t, r, time, true, packed ? 0 : (uint32_t)(r[1] >> 32));
        if (packed && !tensor_ref) return;
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
        on_tensor_created(&c, r, (r[1] & TPPROF_OBS_ADOPTED) != 0);
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
        on_storage_created(&c, r, name);
        if (!(r[1] & TPPROF_OBS_WITH_TENSOR)) break;
        // And the tensor made on it: record + b - 1 reads as its own, or,
        // packed (TPPROF_OBS_PACKED), word b its stack and its id's delta
        // above the storage's, then its shape (no base, offset 0).
        const uint64_t *x = r + b - 1;
        uint64_t u[7 + 2 * MAX_DIMS];
        if (r[1] & TPPROF_OBS_PACKED) {
            uint32_t nd = (uint32_t)(r[b + 1] & 0xff);
            if (nd > MAX_DIMS || words < b + 2 + 2 * nd) break; // (+ 1 with its ticks)
            u[0] = r[0];
            u[1] = r[1];
            u[2] = r[2] + (r[b] >> 32);
            u[3] = r[2];
            u[4] = u[5] = 0;
            memcpy(&u[6], &r[b + 1], (1 + 2 * nd) * sizeof u[0]);
            x = u;
        } else {
            uint32_t nd = (uint32_t)(r[b + 5] & 0xff);
            if (nd > MAX_DIMS || words < b + 6 + 2 * nd) break; // (+ 1 with its ticks)
        }
        uint32_t tsid = (uint32_t)r[b];
        struct rec ct = c;
        ct.sid = tsid;
        ct.stack = stack_of(tsid);
        on_tensor_created(&ct, x, (r[1] & TPPROF_OBS_ADOPTED) != 0);
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
    default: break;
    }
}

// ---------------------------------------------------------------------------
// Output (db.c calls this inside its flush transaction).

static bool step(sqlite3_stmt *st) {
    bool ok = sqlite3_step(st) == SQLITE_DONE;
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    return ok;
}

static void bind_time(sqlite3_stmt *st, int col, bool set, uint64_t v) {
    if (set) sqlite3_bind_int64(st, col, (sqlite3_int64)v);
    else sqlite3_bind_null(st, col);
}

static void dims_json(char *out, size_t cap, const int64_t *v, int n) {
    size_t k = 0;
    out[k++] = '[';
    for (int i = 0; i < n && k + 24 < cap; i++)
        k += (size_t)snprintf(out + k, cap - k, i ? ", %lld" : "%lld", (long long)v[i]);
    out[k++] = ']';
    out[k] = 0;
}

static const char *const dtype_names[] = {"float32", "float64", "float16", "bfloat16", "int8", "int16",
                                          "int32", "int64", "uint8", "bool"};

static bool put_allocator_events(sqlite3 *db) {
    if (!o.naev) return true;
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, "INSERT OR REPLACE INTO allocator_events(seq, time_ns, tid, allocator, action, device,"
                               " segment, segment_size, block, block_size, requested, stream, stack_id)"
                               " VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?)", -1, &st, NULL) != SQLITE_OK)
        return false;
    bool ok = true;
    for (uint64_t i = 0; i < o.naev && ok; i++) {
        const struct alloc_event *e = &o.aev[i];
        char dev[32];
        device_text(dev, sizeof dev, e->dev_type, e->dev_index);
        sqlite3_bind_int64(st, 1, (sqlite3_int64)e->seq);
        sqlite3_bind_int64(st, 2, (sqlite3_int64)e->time_ns);
        sqlite3_bind_int64(st, 3, tpprof_db_tid_of(e->thread));
        sqlite3_bind_text(st, 4, e->allocator ? o.names[e->allocator] : "", -1, SQLITE_TRANSIENT);
        sqlite3_bind_int64(st, 5, e->action);
        sqlite3_bind_text(st, 6, dev, -1, SQLITE_TRANSIENT);
        sqlite3_bind_int64(st, 7, (sqlite3_int64)e->segment);
        sqlite3_bind_int64(st, 8, (sqlite3_int64)e->segment_size);
        sqlite3_bind_int64(st, 9, (sqlite3_int64)e->block);
        sqlite3_bind_int64(st, 10, (sqlite3_int64)e->block_size);
        sqlite3_bind_int64(st, 11, (sqlite3_int64)e->requested);
        sqlite3_bind_int64(st, 12, (sqlite3_int64)e->stream);
        sqlite3_bind_int64(st, 13, e->stack);
        ok = step(st);
    }
    sqlite3_finalize(st);
    if (ok) o.naev = 0;
    return ok;
}

// Writes the references of list `head` as rows (put: binds and steps one,
// false when it fails): a tensor's own as a row of its own (a tensor owns
// one), the others grouped by (op, stack) in a few slots, in one pass
// however many there are. A group past the slots may take two rows; the
// counts still add up. (Comparing each reference with all the others took
// 25 s for a storage with 100,000 live views.)
// (owner: the storage or tensor the list is of; holder: the tensor a reference belongs to, 0 none.)
typedef bool (*ref_row_fn)(sqlite3_stmt *st, uint64_t owner, uint32_t op, uint32_t stack, uint64_t holder, int64_t n);

static bool put_ref_rows(sqlite3_stmt *st, uint64_t owner, uint32_t head, ref_row_fn put) {
    struct ref_count { uint32_t op, stack; int64_t n; } by[16];
    int nby = 0;
    for (uint32_t r = head;; r = o.refs[r].next) {
        const struct obs_ref *x = r ? &o.refs[r] : NULL;
        if (x && x->tensor) { // held by a tensor: its own row
            if (!put(st, owner, x->op, x->stack, x->tensor, 1)) return false;
            continue;
        }
        int k = 0;
        while (x && k < nby && (by[k].op != x->op || by[k].stack != x->stack)) k++;
        if (!x || k == (int)(sizeof by / sizeof by[0])) { // the end, or full: write them out
            for (int i = 0; i < nby; i++)
                if (!put(st, owner, by[i].op, by[i].stack, 0, by[i].n)) return false;
            nby = k = 0;
            if (!x) return true;
        }
        if (k == nby) by[nby++] = (struct ref_count){x->op, x->stack, 0};
        by[k].n++;
    }
}

static bool storage_ref_row(sqlite3_stmt *st, uint64_t storage, uint32_t op, uint32_t stack, uint64_t holder,
                            int64_t n) {
    sqlite3_bind_int64(st, 1, (sqlite3_int64)storage);
    sqlite3_bind_int64(st, 2, op);
    sqlite3_bind_int64(st, 3, stack);
    sqlite3_bind_int64(st, 4, (sqlite3_int64)holder);
    sqlite3_bind_int64(st, 5, n);
    return step(st);
}

static bool put_storages(sqlite3 *db) {
    sqlite3_stmt *st, *rs;
    if (sqlite3_prepare_v2(db, "INSERT OR REPLACE INTO storages(id, data, nbytes, allocator, device, resizable,"
                               " created_ns, created_stack, last_release_ns, data_released_ns, freed_ns, strong, weak,"
                               " block_address, block_size, block_kind, block_freed_ns, at_peak, version_bumps)"
                               " VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", -1, &st, NULL) != SQLITE_OK)
        return false;
    if (sqlite3_prepare_v2(db, "INSERT INTO storage_refs(storage_id, op, stack_id, tensor_id, count) VALUES(?,?,?,?,?)",
                           -1, &rs, NULL) != SQLITE_OK) {
        sqlite3_finalize(st);
        return false;
    }
    bool ok = true;
    for (uint32_t i = 0; i < o.nst && ok; i++) {
        const struct obs_storage *s = &o.st[i];
        if (!s->used) continue;
        char dev[32];
        device_text(dev, sizeof dev, s->dev_type, s->dev_index);
        sqlite3_bind_int64(st, 1, (sqlite3_int64)s->id);
        sqlite3_bind_int64(st, 2, (sqlite3_int64)s->data);
        sqlite3_bind_int64(st, 3, (sqlite3_int64)s->nbytes);
        if (s->allocator) sqlite3_bind_text(st, 4, o.names[s->allocator], -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 5, dev, -1, SQLITE_TRANSIENT);
        sqlite3_bind_int(st, 6, (s->flags & S_RESIZABLE) != 0);
        sqlite3_bind_int64(st, 7, (sqlite3_int64)s->created_ns);
        sqlite3_bind_int64(st, 8, s->created_stack);
        bind_time(st, 9, s->flags & S_LAST_RELEASE, s->last_release_ns);
        bind_time(st, 10, s->flags & S_RELEASED, s->data_released_ns);
        bind_time(st, 11, s->flags & S_FREED, s->freed_ns);
        sqlite3_bind_int64(st, 12, s->strong);
        sqlite3_bind_int64(st, 13, s->weak);
        if (s->flags & S_HAS_BLOCK) {
            sqlite3_bind_int64(st, 14, (sqlite3_int64)s->block_addr);
            sqlite3_bind_int64(st, 15, (sqlite3_int64)s->block_size);
            sqlite3_bind_int64(st, 16, s->block_kind);
        }
        bind_time(st, 17, s->flags & S_BLOCK_FREED, s->block_freed_ns);
        sqlite3_bind_int(st, 18, alive_at_peak(s->created_seq, s->flags & S_RELEASED, s->released_seq));
        sqlite3_bind_int64(st, 19, s->version_bumps);
        ok = step(st);
        if (ok) ok = put_ref_rows(rs, s->id, s->refs, storage_ref_row);
    }
    sqlite3_finalize(st);
    sqlite3_finalize(rs);
    return ok;
}

static bool put_tensors(sqlite3 *db) {
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, "INSERT OR REPLACE INTO tensors(id, storage_id, base_id, storage_offset, sizes, strides,"
                               " dtype, itemsize, created_ns, created_stack, freed_ns, version, at_peak)"
                               " VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?)", -1, &st, NULL) != SQLITE_OK)
        return false;
    bool ok = true;
    for (uint32_t i = 0; i < o.ntn && ok; i++) {
        const struct obs_tensor *x = &o.tn[i];
        if (!x->used) continue;
        char sizes[256], strides[256], dt[32];
        dims_json(sizes, sizeof sizes, x->sizes, x->ndim);
        dims_json(strides, sizeof strides, x->strides, x->ndim);
        if (x->dtype >= 0 && x->dtype < (int)(sizeof dtype_names / sizeof *dtype_names))
            snprintf(dt, sizeof dt, "%s", dtype_names[x->dtype]);
        else
            snprintf(dt, sizeof dt, "dtype%d", x->dtype);
        sqlite3_bind_int64(st, 1, (sqlite3_int64)x->id);
        sqlite3_bind_int64(st, 2, (sqlite3_int64)x->storage);
        sqlite3_bind_int64(st, 3, (sqlite3_int64)x->base);
        sqlite3_bind_int64(st, 4, x->offset);
        sqlite3_bind_text(st, 5, sizes, -1, SQLITE_TRANSIENT);
        sqlite3_bind_text(st, 6, strides, -1, SQLITE_TRANSIENT);
        sqlite3_bind_text(st, 7, dt, -1, SQLITE_TRANSIENT);
        sqlite3_bind_int64(st, 8, x->itemsize);
        sqlite3_bind_int64(st, 9, (sqlite3_int64)x->created_ns);
        sqlite3_bind_int64(st, 10, x->created_stack);
        bind_time(st, 11, x->freed, x->freed_ns);
        sqlite3_bind_int64(st, 12, x->version);
        sqlite3_bind_int(st, 13, alive_at_peak(x->created_seq, x->freed, x->freed_seq));
        ok = step(st);
    }
    sqlite3_finalize(st);
    return ok;
}

static bool tensor_ref_row(sqlite3_stmt *st, uint64_t tensor, uint32_t op, uint32_t stack, uint64_t holder, int64_t n) {
    (void)holder; // a handle is held by no tensor: always 0
    sqlite3_bind_int64(st, 1, (sqlite3_int64)tensor);
    sqlite3_bind_int(st, 2, (int)op);
    sqlite3_bind_int64(st, 3, stack);
    sqlite3_bind_int64(st, 4, n);
    return step(st);
}

// tensor_refs: the handles of every tensor alive at the end, by (op,
// stack): the one it was created with (op 0, its created_stack), unless
// released, and the retains no release matched (op 1).
static bool put_tensor_refs(sqlite3 *db) {
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, "INSERT INTO tensor_refs(tensor_id, op, stack_id, count) VALUES(?,?,?,?)", -1, &st,
                           NULL) != SQLITE_OK)
        return false;
    bool ok = true;
    for (uint32_t i = 0; i < o.ntn && ok; i++) {
        const struct obs_tensor *x = &o.tn[i];
        if (!x->used || x->freed) continue;
        if (!x->creation_dropped) ok = tensor_ref_row(st, x->id, 0, x->created_stack, 0, 1);
        if (ok) ok = put_ref_rows(st, x->id, x->handle_refs, tensor_ref_row);
    }
    sqlite3_finalize(st);
    return ok;
}

static bool put_aggregates(sqlite3 *db) {
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, "INSERT OR REPLACE INTO refcount_sites(op, stack_id, count) VALUES(?,?,?)", -1, &st,
                           NULL) != SQLITE_OK)
        return false;
    bool ok = true;
    for (uint32_t i = 0; i < o.nrc && ok; i++) {
        sqlite3_bind_int64(st, 1, o.rc[i].op);
        sqlite3_bind_int64(st, 2, o.rc[i].stack);
        sqlite3_bind_int64(st, 3, o.rc[i].count);
        ok = step(st);
    }
    sqlite3_finalize(st);
    if (!ok) return false;
    if (sqlite3_prepare_v2(db, "INSERT OR REPLACE INTO storage_lifetimes(allocator, count, live_ns_sum, live_ns_max,"
                               " release_delay_ns_sum, release_delay_ns_max, release_delay_count, live_count)"
                               " VALUES(?,?,?,?,?,?,?,?)", -1, &st, NULL) != SQLITE_OK)
        return false;
    for (uint32_t i = 0; i < MAX_NAMES && ok; i++) {
        const struct lifetime *l = &o.lifetimes[i];
        if (!l->count) continue;
        sqlite3_bind_text(st, 1, i ? o.names[i] : "(borrowed)", -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 2, l->count);
        sqlite3_bind_int64(st, 3, l->live_sum);
        sqlite3_bind_int64(st, 4, l->live_max);
        sqlite3_bind_int64(st, 5, l->delay_sum);
        sqlite3_bind_int64(st, 6, l->delay_max);
        sqlite3_bind_int64(st, 7, l->delay_count);
        sqlite3_bind_int64(st, 8, l->live_count);
        ok = step(st);
    }
    sqlite3_finalize(st);
    return ok;
}

static bool exec_sql(sqlite3 *db, const char *sql) { return sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK; }

bool tpprof_obs_db_put(sqlite3 *db, bool final) {
    if (!put_allocator_events(db)) return false;
    if (!final) return true;
    // The final state replaces whatever an earlier image (a forked parent) wrote.
    return exec_sql(db, "DELETE FROM storages; DELETE FROM storage_refs; DELETE FROM tensors; DELETE FROM tensor_refs;") &&
           put_storages(db) && put_tensors(db) && put_tensor_refs(db) && put_aggregates(db);
}

void tpprof_obs_peak(int64_t *bytes, uint64_t *time_ns) {
    *bytes = o.peak_bytes;
    *time_ns = o.peak_ns;
}

// A forked child's database starts empty of allocator events: the parent's
// are in the parent's file.
void tpprof_obs_fork_child(void) { o.naev = 0; }
