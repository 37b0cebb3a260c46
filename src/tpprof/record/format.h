// format.h: the ring record format: block kinds, record ops, observer
// record flags and the header word. What the hooks write and the writer
// reads.
#ifndef TPPROF_RECORD_FORMAT_H
#define TPPROF_RECORD_FORMAT_H

#include "base/base.h"

// Block kinds (the `kinds` table) and record ops (the `events.op` column).

enum tpprof_kind {
    TPPROF_KIND_EARLY = 0, // the site of the blocks from before the start (writer.c adopt_early): never written
    TPPROF_KIND_MALLOC = 1,
    TPPROF_KIND_CALLOC = 2,
    TPPROF_KIND_REALLOC = 3,
    TPPROF_KIND_REALLOCARRAY = 4,
    TPPROF_KIND_POSIX_MEMALIGN = 5,
    TPPROF_KIND_ALIGNED_ALLOC = 6,
    TPPROF_KIND_MEMALIGN = 7,
    TPPROF_KIND_VALLOC = 8,
    TPPROF_KIND_PVALLOC = 9,
    TPPROF_KIND_MMAP = 10,
    TPPROF_KIND_MMAP_FILE = 11,
    TPPROF_KIND_MMAP_RESERVED = 12, // an anonymous PROT_NONE mapping: address space, no memory (see hooks.c)
    TPPROF_KIND_COUNT = 13,
};

// Ops 1-6 are the values of `events.op`; the others exist only in rings.
enum tpprof_op {
    TPPROF_OP_ALLOC = 1,        // addr, size, stack
    TPPROF_OP_FREE = 2,         // addr
    TPPROF_OP_REALLOC = 3,      // addr, size, stack, old_addr (old freed by a REALLOC_FREE)
    TPPROF_OP_MMAP = 4,         // addr, len, stack
    TPPROF_OP_MUNMAP = 5,       // addr, len
    TPPROF_OP_MREMAP = 6,       // new_addr, new_len, stack, old_addr, old_len
    TPPROF_OP_REALLOC_FREE = 7, // addr: the old block of a realloc, freed
    TPPROF_OP_NOP = 8,          // a ticket taken for nothing (failed realloc)
    TPPROF_OP_OBS = 9,          // a runtime observer event (observe.c): kind = tp_obs_kind,
                                // word 1 = words | refop << 8 | flags << 16 | stack << 32, payload after
    TPPROF_OP_ALLOC_PACKED = 10, // an ALLOC in 3 words: addr, size | stack << TPPROF_PACKED_SIZE_BITS
    TPPROF_OP_COMMIT = 11,      // addr, len, stack: mprotect made the range accessible (its reserved parts become mmap)
    TPPROF_OP_DEVICE = 12,      // a device memory event (record/device.c): TPPROF_DEVICE_WORDS words,
                                // op | kind << 8 | device << 32, stream, pool, address, size,
                                // result | stack << 32, api (a static string), time_ns, pool reserved
    TPPROF_OP_WRAP = 15,        // ring padding: continue at the ring's start
};

// A DEVICE record's words (it always carries its own time: device events
// are rare, and the timeline needs them exact).
#define TPPROF_DEVICE_WORDS 10

// ALLOC_PACKED's size bits (allocations of 1 TiB and more, and stack ids of
// 2^24 and more, take the 4-word ALLOC): the stack id in the 24 above.
#define TPPROF_PACKED_SIZE_BITS 40

static inline uint64_t tpprof_packed_size(const uint64_t *r) {
    return r[2] & (((uint64_t)1 << TPPROF_PACKED_SIZE_BITS) - 1);
}
// The stack id of an ALLOC, ALLOC_PACKED or REALLOC record.
static inline uint32_t tpprof_alloc_sid(const uint64_t *r, int op) {
    return op == TPPROF_OP_ALLOC_PACKED ? (uint32_t)(r[2] >> TPPROF_PACKED_SIZE_BITS) : (uint32_t)r[3];
}

// Flags in bits 16-23 of an OBS record's word 1. TENSOR_REF: a RELEASE made
// by a tensor's free that also carries that TENSOR_FREED (word 4: the tensor
// id), sent without a stack; the writer counts it under the stack of the
// reference it releases (observe.c, writer/ledger.c).
#define TPPROF_OBS_TENSOR_REF ((uint64_t)1 << 16)
// WITH_RETAIN: a TENSOR_CREATED that also carries the RETAIN of its storage
// made just before (same stack; the counts after the dims).
#define TPPROF_OBS_WITH_RETAIN ((uint64_t)1 << 17)
// DATA_RELEASED: a RELEASE to strong 0 that also carries the storage's
// DATA_RELEASED (the next event of the thread, per the observer ABI).
#define TPPROF_OBS_DATA_RELEASED ((uint64_t)1 << 18)
// TICKS: the record's last payload word is tpprof_ticks() taken in the
// event (aggregate mode: a storage's creation and data release, so DataPtr
// lifetimes are not rounded to the writer's merge time).
#define TPPROF_OBS_TICKS ((uint64_t)1 << 20)
// FREED: such a RELEASE that leaves weak 1 (no weak references: the runtime
// deletes the struct at once, as c10 does) also carries its FREED.
#define TPPROF_OBS_FREED ((uint64_t)1 << 19)
// ADOPTED: a TENSOR_CREATED whose tensor took over its storage's creation
// reference (TP_OBS_TENSOR_ADOPTED_REF): no RETAIN came for it.
#define TPPROF_OBS_ADOPTED ((uint64_t)1 << 21)
// WITH_TENSOR: a STORAGE_CREATED that also carries the TENSOR_CREATED of the
// tensor made on it in the same runtime call (it adopts the storage's
// reference, so ADOPTED is set too): after the storage's words the tensor's
// stack, then the tensor's words as a TENSOR_CREATED has them from word 2,
// the ticks last (observe.c tensor_new).
#define TPPROF_OBS_WITH_TENSOR ((uint64_t)1 << 22)
// SAME_NAME: a STORAGE_CREATED whose allocator is the one named by this
// thread's last STORAGE_CREATED that carried a name (the same name pointer:
// allocator names are static, tensorplay/allocator.h), so it carries none:
// its storage's words are 4, not 7 (observe.c put_storage).
#define TPPROF_OBS_SAME_NAME ((uint64_t)1 << 23)
// MORE_EDGES: a NODE_CREATED that continues the one before it for the same
// node (a node of more inputs than one record holds: a wide cat): word 2
// the node id, word 3 its node edges | its leaf edges << 16, then their ids
// (observe.c on_graph_node, writer/graph.c).
#define TPPROF_OBS_MORE_EDGES ((uint64_t)1 << 25)
// GRAD: a TENSOR_SAVED record that carries the observer's GRAD_SET (the
// ring has 4 bits of kind, all taken): word 2 the tensor, 3 its new grad
// tensor (0: cleared), 4 the grad's storage.
#define TPPROF_OBS_GRAD ((uint64_t)1 << 26)
// (Bit 24 was PACKED, compact layouts of a tensor's release and of a
// WITH_TENSOR record: measured 2-3 points dearer on bench/tensor_overhead,
// it went.)

// Words per record, excluding the optional trailing timestamp of full mode.
static inline int tpprof_op_words(int op) {
    switch (op) {
    case TPPROF_OP_ALLOC: return 4;
    case TPPROF_OP_ALLOC_PACKED: return 3;
    case TPPROF_OP_FREE: return 2;
    case TPPROF_OP_REALLOC: return 5;
    case TPPROF_OP_MMAP: return 4;
    case TPPROF_OP_COMMIT: return 4;
    case TPPROF_OP_MUNMAP: return 3;
    case TPPROF_OP_MREMAP: return 6;
    case TPPROF_OP_REALLOC_FREE: return 2;
    case TPPROF_OP_NOP: return 1;
    case TPPROF_OP_DEVICE: return TPPROF_DEVICE_WORDS;
    default: return 1;
    }
}

// Words of the record at r (observer records carry their length).
static inline int tpprof_rec_words(const uint64_t *r) {
    int op = (int)(r[0] >> 4 & 15);
    return op == TPPROF_OP_OBS ? (int)(r[1] & 0xff) : tpprof_op_words(op);
}

// Record header word: order << 8 | op << 4 | kind, where order is what
// tpprof_order_tag returns (or, in tests, any number).
static inline uint64_t tpprof_hdr(uint64_t order, int op, int kind) {
    return order << 8 | (uint64_t)op << 4 | (uint64_t)kind;
}

#endif
