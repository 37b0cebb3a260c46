// tensors.h: storages, tensors, references and DataPtr lifetimes, and what they mean (tensors.c).
// Private to viewer/; viewer.h includes every header of the viewer.
#ifndef TPPROF_VIEWER_TENSORS_H
#define TPPROF_VIEWER_TENSORS_H

#include "util.h"
#include "db.h"

// ---------------------------------------------------------------------------
// tensors.c

// A nullable time column reads as this.
#define TPPROF_NO_TIME INT64_MIN

// One row of `storages`. Strings owned by the tpprof_tensors.
typedef struct tpprof_storage {
    int64_t id, data, nbytes;
    char *allocator, *device;
    bool resizable, at_peak;
    int64_t created_ns, created_stack, last_release_ns, data_released_ns, freed_ns;
    int64_t strong, weak;
    int64_t block_address, block_size, block_kind, block_freed_ns;
    int64_t version_bumps;
} tpprof_storage;

#define TPPROF_MAX_DIMS 16

// One row of `tensors`, with sizes/strides parsed (ndim -1: unparsable).
typedef struct tpprof_tensor {
    int64_t id, storage_id, base_id, offset, itemsize;
    char *sizes, *strides, *dtype; // as stored ("[3, 4]")
    int ndim;
    int64_t shape[TPPROF_MAX_DIMS], stride[TPPROF_MAX_DIMS];
    int64_t created_ns, created_stack, freed_ns, version;
    bool at_peak;
} tpprof_tensor;

// Reference ops of storage_refs and refcount_sites.
enum {
    TPPROF_REF_CREATE = 0,
    TPPROF_REF_RETAIN = 1,
    TPPROF_REF_RELEASE = 2,
    TPPROF_REF_WEAK_RETAIN = 3,
    TPPROF_REF_WEAK_RELEASE = 4,
    TPPROF_REF_LOCK = 5,
};

typedef struct tpprof_ref {
    int64_t storage_id, op, stack_id, tensor_id, count;
} tpprof_ref;

// A tensor's handles alive at the end (tensor_refs): op TPPROF_REF_CREATE
// (the one it was made with) or TPPROF_REF_RETAIN (tp_tensor_retain calls no
// release matched), by stack.
typedef struct tpprof_handle_ref {
    int64_t tensor_id, op, stack_id, count;
} tpprof_handle_ref;

typedef struct tpprof_lifetime {
    char *allocator;
    int64_t count, live_ns_sum, live_ns_max, delay_ns_sum, delay_ns_max;
    int64_t delay_count; // storages whose release delay was measured (<= count)
    int64_t live_count;  // storages whose live time was measured (<= count: timed ones)
} tpprof_lifetime;

// The tensor tables of one recording, all in memory (they hold only what
// was alive at the end or at the peak in aggregate mode).
typedef struct tpprof_tensors {
    tpprof_storage *storages; // by id
    size_t nstorages;
    tpprof_tensor *tensors;   // by id
    size_t ntensors;
    tpprof_ref *refs;         // by storage, op, stack
    size_t nrefs;
    tpprof_lifetime *lifetimes; // by allocator
    size_t nlifetimes;
    tpprof_handle_ref *handles; // by tensor, op, stack
    size_t nhandles;
    bool attached;            // meta.tensors = 1
    bool full;                // meta.mode = full
    int64_t peak_storage_bytes, peak_storage_time_ns;
    // Indexes built at load (full-mode recordings hold every tensor):
    size_t *on_storage;       // tensor indices by (storage_id, id)
    size_t *by_base;          // tensor indices by (base_id, id)
} tpprof_tensors;

// Load the tensor tables; absent tables read as empty. 0 or -1 + error.
int tpprof_tensors_load(tpprof_db *db, tpprof_tensors *out);
void tpprof_tensors_free(tpprof_tensors *t);

// Lookups by id (borrowed pointers), NULL if absent.
const tpprof_storage *tpprof_tensors_storage(const tpprof_tensors *t, int64_t id);
const tpprof_tensor *tpprof_tensors_tensor(const tpprof_tensors *t, int64_t id);

// The tensors on a storage / whose base_id is `base` (views), by id:
// *n indices into t->tensors (borrowed).
const size_t *tpprof_tensors_on(const tpprof_tensors *t, int64_t storage_id, size_t *n);
const size_t *tpprof_tensors_views_of(const tpprof_tensors *t, int64_t base, size_t *n);
// How many of those views are alive at exit (each holds the base).
size_t tpprof_tensors_live_views(const tpprof_tensors *t, int64_t base);
// Of the storages alive at exit, how many tensors alive at exit hold
// (*held), and the tensor that stands for them: on the biggest such
// storage, one no live view holds (a view holds its base, so the view is
// named). Borrowed; NULL when no live tensor holds a live storage.
const tpprof_tensor *tpprof_tensors_holder_lead(const tpprof_tensors *t, uint64_t *held);
// The storage_refs rows of a storage (borrowed, contiguous).
const tpprof_ref *tpprof_tensors_refs(const tpprof_tensors *t, int64_t storage_id, size_t *n);

// Is h a tp_tensor_retain no release matched (not the creation handle)?
static inline bool tpprof_handle_unmatched(const tpprof_handle_ref *h) { return h->op == TPPROF_REF_RETAIN && h->count > 0; }
// The tensor_refs rows of a tensor (borrowed, contiguous).
const tpprof_handle_ref *tpprof_tensors_handles(const tpprof_tensors *t, int64_t tensor_id, size_t *n);
// Of those, the retains no release matched: how many, and the stack of the
// first (0 if none).
int64_t tpprof_tensors_unmatched_handles(const tpprof_tensors *t, int64_t tensor_id, int64_t *stack);


// Struct alive at the end (freed_ns NULL); data alive (data_released_ns NULL).
bool tpprof_storage_alive(const tpprof_storage *s);
bool tpprof_storage_data_alive(const tpprof_storage *s);
bool tpprof_tensor_alive(const tpprof_tensor *t);

// Bytes of the storage a tensor's elements reach (distinct elements bounded
// by numel and by the span of its strides, times itemsize).
uint64_t tpprof_tensor_covered_bytes(const tpprof_tensor *t);
uint64_t tpprof_tensor_numel(const tpprof_tensor *t);

// Is op a strong reference (creation, retain, lock)?
bool tpprof_ref_is_strong(int64_t op);
// Is r a reference no release matched (tensor_id 0) of the kind asked: a
// weak retain (weak true) or a strong reference (weak false)?
bool tpprof_ref_unmatched(const tpprof_ref *r, bool weak);
// "create", "retain", "weak_retain", "lock", ...
const char *tpprof_ref_op_name(int64_t op);

// A group of references no release matched (or weak holders), by (op, stack)
// over storages.
typedef struct tpprof_ref_group {
    int64_t op, stack_id;
    uint64_t storages, refs, bytes; // distinct storages, references, their nbytes
} tpprof_ref_group;

// Unmatched references (tensor_id 0) of storages alive at the end, grouped by
// (op, stack), weak (true: op weak retain) or strong ones, most storages
// first. New array (caller frees), *n its length. NULL + *n 0 when none.
tpprof_ref_group *tpprof_ref_groups(const tpprof_tensors *t, bool weak, size_t *n);
// Handle retains no release matched of tensors alive at the end, grouped by
// stack as tpprof_ref_groups groups references (op TPPROF_REF_RETAIN;
// storages: those the tensors are on; refs: the handles). New array (caller
// frees), *n its length.
tpprof_ref_group *tpprof_handle_groups(const tpprof_tensors *t, size_t *n);

// A small view pinning a big storage: the tensor covering the most of its
// storage still covers under `fraction` of a storage of at least min_bytes.
// A base tensor with a live view does not count as covering (a view keeps
// its base alive whether or not anything else uses it): held_base names
// one such base (0 if none).
typedef struct tpprof_pinned {
    int64_t tensor_id, storage_id, held_base;
    uint64_t storage_bytes, covered_bytes, pinned_bytes;
} tpprof_pinned;

#define TPPROF_PIN_FRACTION 0.25
#define TPPROF_PIN_MIN_BYTES (1u << 20)

// at_peak false: tensors and storages alive at the end; true: at the peak.
// New array sorted by pinned bytes (caller frees).
tpprof_pinned *tpprof_pinned_views(const tpprof_tensors *t, bool at_peak, size_t *n);

// Parse a time: ns digits, or a number with suffix ns, us, ms, s. 0 or -1 + error.
int tpprof_parse_time(const char *what, const char *s, int64_t *out);

#endif
