/*
 * tensorplay/observer.h - the versioned observer ABI.
 *
 * The runtime reports every storage and tensor lifecycle event, every strong
 * and weak refcount change, version bumps and allocator events to at most one
 * observer.  With no observer attached the cost is one predictable branch.
 *
 * This header is the only thing a profiler needs from the runtime: it
 * depends on nothing else in tensorplay and uses only fixed-width types, so
 * an observer built against version N works with any runtime that speaks
 * version N (events are only ever appended; unknown kinds must be ignored).
 * A runtime attaches an observer of its own version or an older one it
 * still speaks (TP_OBSERVER_ABI_VERSION_MIN; see "Versions").
 *
 * Versions:
 *   1  every tensor retains its storage (REFCOUNT RETAIN, object = the
 *      tensor); a call that creates a storage for a new tensor then
 *      releases the storage's creation reference (REFCOUNT RELEASE,
 *      object = the storage).
 *   2  such a call hands the creation reference to the new
 *      tensor instead, as c10 moves a new Storage into its TensorImpl: no
 *      RETAIN and no RELEASE; the tensor's TENSOR_CREATED carries
 *      TP_OBS_TENSOR_ADOPTED_REF.  Its RELEASE when the tensor is freed is
 *      unchanged, so a version-1 ledger would see a release it never saw
 *      taken: hence the new version.  tp_obs_tensor.reserved became flags.
 *   3  (this header) the autograd graph: NODE_CREATED, NODE_RAN,
 *      NODE_FREED, TENSOR_SAVED and SAVED_RELEASED (.node, .saved).  Only
 *      kinds are appended, so the runtime still attaches a version-2
 *      observer and sends it none of them: it sees exactly what a version-2
 *      runtime sent.  An observer of version 3 is handed to a version-2
 *      runtime only under that runtime's number (tp_observer_provide is
 *      told it), and then gets no graph event either.  GRAD_SET (.grad)
 *      was appended to version 3 later: the number stayed, since an
 *      observer ignores kinds it does not know.
 *
 * Attaching:
 *   1. In process:  tp_observer_set(&my_observer);
 *   2. Without changing the program (LD_PRELOAD): the observer library
 *      exports a function named TP_OBSERVER_PROVIDER_SYMBOL with the type
 *      tp_observer_provider_fn.  When the runtime initializes (a constructor
 *      of libtensorplay, or of the program when linked statically) it looks
 *      the symbol up with dlsym(RTLD_DEFAULT, ...); a preloaded library is
 *      first in the lookup order, so it is found.  If the provider returns
 *      an observer whose abi_version the runtime understands, it is attached.
 *      With a shared libtensorplay the provider runs BEFORE the preloaded
 *      library's own constructors (glibc initializes a program's
 *      dependencies before the preloaded objects), so it must not rely on
 *      them: return a static observer and initialize lazily.
 *
 *     static void on_event(void *user, const tp_obs_event *ev) {
 *         if (ev->kind == TP_OBS_STORAGE_CREATED) count++;
 *     }
 *     static const tp_observer obs = {
 *         .abi_version = TP_OBSERVER_ABI_VERSION, .struct_size = sizeof obs,
 *         .on_event = on_event,
 *     };
 *     const tp_observer *tp_observer_provide(uint32_t runtime_abi) { return &obs; }
 *
 * A runtime attaches an observer whose abi_version lies between
 * TP_OBSERVER_ABI_VERSION_MIN and its own TP_OBSERVER_ABI_VERSION, and
 * sends it only the events of that version.
 *
 * Storage event order (counts are the values after each change):
 *     STORAGE_CREATED                      counts start at strong 1, weak 1
 *     [TENSOR_CREATED, ADOPTED_REF]        the creation reference is now the
 *                                          tensor's: no count changes
 *     REFCOUNT RETAIN/RELEASE/LOCK/...     one event per change
 *     REFCOUNT RELEASE strong 0            then DATA_RELEASED, then either
 *       FREED at once (no weak refs: c10 deletes directly), or
 *       REFCOUNT WEAK_RELEASE (weak - 1) and, when weak reaches 0, FREED.
 * A failed weak_lock changes nothing and sends nothing.  TENSOR_FREED comes
 * before the storage RELEASE of the tensor's reference (retained or
 * adopted alike).  A tensor on an existing storage (a view, detach,
 * tp_tensor_new_from_storage) sends REFCOUNT RETAIN, then TENSOR_CREATED
 * without the ADOPTED_REF flag.
 *
 * Callbacks run synchronously on the thread that caused the event, possibly
 * many threads at once; they must not call back into the runtime.  Pointers
 * inside an event are valid only during the callback.
 */
#ifndef TENSORPLAY_OBSERVER_H
#define TENSORPLAY_OBSERVER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TP_OBSERVER_ABI_VERSION 3u
/* The oldest observer version this runtime still attaches. */
#define TP_OBSERVER_ABI_VERSION_MIN 2u
#define TP_OBSERVER_PROVIDER_SYMBOL "tp_observer_provide"

typedef enum tp_obs_kind {
    TP_OBS_STORAGE_CREATED = 1,   /* .storage */
    TP_OBS_STORAGE_REFCOUNT = 2,  /* .refcount */
    TP_OBS_STORAGE_DATA_RELEASED = 3, /* .storage: the DataPtr deleter ran (strong hit 0) */
    TP_OBS_STORAGE_FREED = 4,     /* .storage: the struct itself is gone (weak hit 0) */
    TP_OBS_STORAGE_DATA_SWAPPED = 5, /* .storage: resize/set_data_ptr installed new data */
    TP_OBS_TENSOR_CREATED = 6,    /* .tensor */
    TP_OBS_TENSOR_FREED = 7,      /* .tensor (only ids are meaningful) */
    TP_OBS_VERSION_BUMPED = 8,    /* .version */
    TP_OBS_ALLOCATOR = 9,         /* .allocator (reserved for caching allocators) */
    TP_OBS_TENSOR_REFCOUNT = 10,  /* .tensor_ref: a tensor handle taken or dropped (appended to version 2) */
    /* Version 3: the autograd graph (only to observers of version 3 or later). */
    TP_OBS_NODE_CREATED = 11,     /* .node: a grad_fn node made by a differentiable op */
    TP_OBS_NODE_RAN = 12,         /* .node: backward ran its formula (flags: TP_OBS_NODE_RETAINED) */
    TP_OBS_NODE_FREED = 13,       /* .node: the node is gone (only node_id and name are set) */
    TP_OBS_TENSOR_SAVED = 14,     /* .saved: a tensor saved into a node for backward */
    TP_OBS_SAVED_RELEASED = 15,   /* .saved: the node let that saved tensor go */
    TP_OBS_GRAD_SET = 16,         /* .grad: a tensor's .grad was set or cleared (appended to version 3) */
} tp_obs_kind;

typedef enum tp_obs_refop {
    TP_OBS_REFOP_RETAIN = 1,       /* strong +1 */
    TP_OBS_REFOP_RELEASE = 2,      /* strong -1 */
    TP_OBS_REFOP_WEAK_RETAIN = 3,  /* weak +1 */
    TP_OBS_REFOP_WEAK_RELEASE = 4, /* weak -1 */
    TP_OBS_REFOP_LOCK = 5,         /* weak upgraded to strong: strong +1 */
} tp_obs_refop;

typedef struct tp_obs_storage {
    uint64_t storage_id;
    uint64_t data;      /* data pointer (new one for DATA_SWAPPED) */
    uint64_t nbytes;
    const char *allocator; /* allocator name, NULL for borrowed memory; static
                            * (tp_allocator.name), so an observer may tell
                            * allocators apart by the pointer */
    int16_t device_type;
    int16_t device_index;
    uint32_t resizable;
    uint64_t old_data;  /* DATA_SWAPPED: the data pointer replaced */
} tp_obs_storage;

typedef struct tp_obs_refcount {
    uint64_t storage_id;
    uint32_t op;     /* tp_obs_refop */
    uint32_t strong; /* counts after the change */
    uint32_t weak;
} tp_obs_refcount;

typedef struct tp_obs_tensor {
    uint64_t tensor_id;
    uint64_t storage_id;
    uint64_t base_id;     /* root base of a view, 0 if not a view */
    int64_t storage_offset; /* in elements */
    int32_t ndim;
    int32_t dtype;        /* tp_dtype */
    const int64_t *sizes;
    const int64_t *strides;
    uint32_t itemsize;
    uint32_t flags;       /* TENSOR_CREATED: TP_OBS_TENSOR_* bits; 0 otherwise */
} tp_obs_tensor;

/* tp_obs_tensor.flags (version 2).  ADOPTED_REF: the tensor took over the
 * reference its storage was created with (the storage's STORAGE_CREATED
 * came earlier in this same runtime call, on this thread); no RETAIN was
 * sent for it and none of the creator's RELEASE will follow.  The tensor
 * now owns that reference: its free releases it like any tensor's.  If the
 * tensor cannot be made, no TENSOR_CREATED is sent and the creator releases
 * the reference instead (REFCOUNT RELEASE, object = the storage). */
#define TP_OBS_TENSOR_ADOPTED_REF 1u

/* TENSOR_REFCOUNT: tp_tensor_retain took a handle on a tensor (op
 * TP_OBS_REFOP_RETAIN), or tp_tensor_release dropped one that was not the
 * last (TP_OBS_REFOP_RELEASE); count: the tensor's handles after it.  The
 * handle every tensor starts with is not announced (its TENSOR_CREATED is),
 * and the release of the last one is its TENSOR_FREED.  The handles the
 * runtime keeps for itself (a view's on its base, a tensor's on its grad)
 * send nothing. */
typedef struct tp_obs_tensor_ref {
    uint64_t tensor_id;
    uint32_t op;    /* TP_OBS_REFOP_RETAIN or TP_OBS_REFOP_RELEASE */
    uint32_t count; /* handles after the change */
} tp_obs_tensor_ref;

/* NODE_CREATED, NODE_RAN, NODE_FREED (version 3).  A node is made by one
 * differentiable call (tp_ag_* in autograd.h) for its one output and holds
 * its inputs' nodes (next_ids: the node ids of the inputs that have one,
 * in input order; NULL when n_next is 0), a handle on each input that is a
 * leaf requiring grad (leaf_ids: those tensors' ids, its gradient goes
 * there; their handles were taken with tp_tensor_retain, whose
 * TENSOR_REFCOUNT events came before) and the tensors it saved.  Its
 * id comes from the counter storages and tensors share, so it names no
 * other object.  NODE_CREATED's object (tp_obs_event.object) is the node
 * struct, allocated with the C heap in the same call.  Order for one node:
 * NODE_CREATED, its TENSOR_SAVED events, then for each backward through it
 * NODE_RAN (flags: TP_OBS_NODE_RETAINED when that backward kept the saved
 * tensors, retain_graph; without it the node's SAVED_RELEASED events
 * follow), and last its remaining SAVED_RELEASED events and NODE_FREED.
 * A node whose op fails after it was made is freed at once. */
typedef struct tp_obs_node {
    uint64_t node_id;
    const char *name;         /* "MmBackward0": static */
    const uint64_t *next_ids; /* NODE_CREATED only; valid during the callback */
    uint32_t n_next;
    uint32_t flags;           /* NODE_RAN: TP_OBS_NODE_* bits; 0 otherwise */
    const uint64_t *leaf_ids; /* NODE_CREATED only; valid during the callback */
    uint32_t n_leaves;
    uint32_t reserved;
} tp_obs_node;

#define TP_OBS_NODE_RETAINED 1u /* NODE_RAN: the saved tensors were kept (retain_graph) */

/* TENSOR_SAVED, SAVED_RELEASED (version 3).  The node keeps a saved tensor
 * as a tensor of its own on the saved tensor's storage (a detached alias:
 * tensor_id is the alias, made just before TENSOR_SAVED with its usual
 * TENSOR_CREATED; its TENSOR_FREED follows SAVED_RELEASED), so the storage
 * stays alive while the node keeps it. */
typedef struct tp_obs_saved {
    uint64_t node_id;
    uint64_t tensor_id;  /* the node's alias */
    uint64_t storage_id;
    uint32_t slot;       /* which of the node's saved tensors */
    uint32_t reserved;
} tp_obs_saved;

/* GRAD_SET (appended to version 3: a version-3 observer built before it
 * ignores the kind, as every observer must ignore kinds it does not know).
 * Sent by tp_tensor_set_grad, which the engine's AccumulateGrad uses for a
 * leaf's first gradient, and zero_grad(set_to_none) to clear one.  The
 * tensor holds its grad with a handle of the runtime's own (no
 * TENSOR_REFCOUNT for it), so this is how an observer learns which tensor
 * keeps a gradient alive. */
typedef struct tp_obs_grad {
    uint64_t tensor_id;       /* the tensor whose .grad changed (a leaf, a parameter) */
    uint64_t grad_id;         /* the new grad tensor; 0: cleared */
    uint64_t grad_storage_id; /* its storage; 0 when cleared */
} tp_obs_grad;

typedef struct tp_obs_version {
    uint64_t tensor_id;
    uint32_t version; /* value after the bump */
    uint32_t reserved;
} tp_obs_version;

typedef enum tp_obs_alloc_action {
    TP_OBS_ALLOC_SEGMENT_RESERVE = 1,
    TP_OBS_ALLOC_SEGMENT_RELEASE = 2,
    TP_OBS_ALLOC_BLOCK_ALLOC = 3,
    TP_OBS_ALLOC_BLOCK_FREE = 4,
    TP_OBS_ALLOC_BLOCK_SPLIT = 5,
    TP_OBS_ALLOC_BLOCK_MERGE = 6,
} tp_obs_alloc_action;

typedef struct tp_obs_allocator_event {
    const char *allocator;
    uint32_t action;     /* tp_obs_alloc_action */
    int16_t device_type;
    int16_t device_index;
    uint64_t segment;    /* segment base address */
    uint64_t segment_size;
    uint64_t block;      /* block address */
    uint64_t block_size; /* rounded size */
    uint64_t requested;  /* size asked for (0 if n/a) */
    uint64_t stream;
} tp_obs_allocator_event;

typedef struct tp_obs_event {
    uint32_t kind;        /* tp_obs_kind */
    uint32_t struct_size; /* sizeof(tp_obs_event) of the runtime that sent it */
    union {
        tp_obs_storage storage;
        tp_obs_refcount refcount;
        tp_obs_tensor tensor;
        tp_obs_version version;
        tp_obs_allocator_event allocator;
        tp_obs_tensor_ref tensor_ref;
        tp_obs_node node;   /* version 3 */
        tp_obs_saved saved; /* version 3 */
        tp_obs_grad grad;   /* version 3 (GRAD_SET) */
    } u;
    /* Appended to version 1 (present when struct_size reaches past it; an
     * older runtime's events end before it).  The address of a storage or
     * tensor struct that the runtime allocated with the C heap (malloc
     * family), on this thread, inside the same call into the runtime that
     * sends this event; 0 when there is none.  Set on STORAGE_CREATED and
     * TENSOR_CREATED (the struct being created), on the REFCOUNT RETAIN of a
     * new tensor's storage reference (the tensor), and on the RELEASE of a
     * storage's creation reference by the call that created it, when that
     * call does not hand it to a tensor (the storage; since version 2 a new
     * tensor adopts it, so this RELEASE comes only when the tensor could
     * not be made).  A heap profiler that recorded that allocation with its
     * stack has this event's stack from the first frame outside the runtime
     * outward: the call into the runtime has not returned since. */
    uint64_t object;
} tp_obs_event;

typedef struct tp_observer {
    uint32_t abi_version; /* TP_OBSERVER_ABI_VERSION the observer was built for */
    uint32_t struct_size; /* sizeof(tp_observer) */
    void *user;
    void (*on_event)(void *user, const tp_obs_event *event);
    /* Optional direct forms of the frequent events (version 2; each read
     * only when struct_size reaches it).  When one is set, the runtime calls
     * it instead of on_event for its events, with the event's fields as
     * arguments (the union member by pointer, valid during the call); when
     * NULL those events go to on_event like the rest.  Same events, same
     * order on each thread, same meaning: only no tp_obs_event is built and
     * nothing is dispatched on its kind, which in a small tensor op is most
     * of what an event costs.  object as tp_obs_event.object.
     *   on_refcount       every REFCOUNT event (op: a tp_obs_refop)
     *   on_tensor_freed   every TENSOR_FREED
     *   on_tensor_created every TENSOR_CREATED
     *   on_storage        STORAGE_CREATED, DATA_RELEASED, FREED and
     *                     DATA_SWAPPED (kind: which) */
    void (*on_refcount)(void *user, uint64_t storage_id, uint32_t op, uint32_t strong, uint32_t weak,
                        uint64_t object);
    void (*on_tensor_freed)(void *user, uint64_t tensor_id, uint64_t storage_id, uint64_t base_id);
    void (*on_tensor_created)(void *user, const tp_obs_tensor *tensor, uint64_t object);
    void (*on_storage)(void *user, uint32_t kind, const tp_obs_storage *storage, uint64_t object);
    /* Optional fused forms (appended to version 2; read only when
     * struct_size reaches them, used only when set).  Each stands for two
     * or more events of the order above that always come together when a
     * tensor is made on an existing storage or freed, so an observer that
     * takes them gets one call where it would get two to four, and the
     * events it stands for are then not sent on their own:
     *   on_tensor_retained  a tensor made on an existing storage (a view,
     *       detach, tp_tensor_new_from_storage): its REFCOUNT RETAIN
     *       (strong, weak: the counts after it) and its TENSOR_CREATED, in
     *       one call where the TENSOR_CREATED would come.  object: the
     *       tensor struct, as both events name it.  A tensor that adopts a
     *       new storage's reference still sends plain TENSOR_CREATED.
     *   on_tensor_released  a tensor freed: its TENSOR_FREED and the
     *       REFCOUNT RELEASE of its storage reference (strong, weak: the
     *       counts after it, as that RELEASE reports them), in one call
     *       where the RELEASE would come, that is AFTER the events of
     *       releasing the tensor's grad and base (TENSOR_FREED alone comes
     *       before them).  flags: TP_OBS_RELEASED_DATA when strong reached
     *       0: the DATA_RELEASED that follows the data's deleter is not
     *       sent; with TP_OBS_RELEASED_FREED too when no weak reference
     *       was left: neither is the FREED after it.  When weak references
     *       remain, their WEAK_RELEASE and any later FREED are sent as
     *       usual.  Releases of a storage not by a tensor are unchanged. */
    void (*on_tensor_retained)(void *user, const tp_obs_tensor *tensor, uint32_t strong, uint32_t weak,
                               uint64_t object);
    void (*on_tensor_released)(void *user, uint64_t tensor_id, uint64_t storage_id, uint64_t base_id,
                               uint32_t strong, uint32_t weak, uint32_t flags);
    /*   on_tensor_new  a new tensor on a storage made for it in the same
     *       call (tp_empty and every op result built on it, a reshape's
     *       copy): the storage's STORAGE_CREATED and the tensor's
     *       TENSOR_CREATED (TP_OBS_TENSOR_ADOPTED_REF), in one call where
     *       the TENSOR_CREATED would come, so after the heap allocations of
     *       the tensor struct and its version counter.  storage_object and
     *       tensor_object as the two events' object.  Should the tensor
     *       not be made, STORAGE_CREATED is sent on its own, then the
     *       creator's RELEASE, as without this form. */
    void (*on_tensor_new)(void *user, const tp_obs_storage *storage, uint64_t storage_object,
                          const tp_obs_tensor *tensor, uint64_t tensor_object);
} tp_observer;

/* on_tensor_released flags. */
#define TP_OBS_RELEASED_DATA 1u  /* strong reached 0: DATA_RELEASED implied */
#define TP_OBS_RELEASED_FREED 2u /* and no weak reference: FREED implied */

/* Whether observer o provides the direct form `member` (a tp_observer field
 * after on_event): its struct reaches the field and the field is set. */
#define TP_OBSERVER_HAS(o, member)                                                     \
    ((o)->struct_size >= offsetof(tp_observer, member) + sizeof((o)->member) && \
     (o)->member != NULL)

typedef const tp_observer *(*tp_observer_provider_fn)(uint32_t runtime_abi_version);

/* Attaches an observer (NULL detaches).  Returns 0, or -1 if its
 * abi_version is not supported.  The observer must outlive its attachment. */
int tp_observer_set(const tp_observer *observer);
/* The attached observer, or NULL. */
const tp_observer *tp_observer_get(void);

#ifdef __cplusplus
}
#endif
#endif
