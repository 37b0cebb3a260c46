// graph.h: the autograd graph ledger (writer/graph.c keeps it; store/graph.c
// writes it out): the runtime's grad_fn nodes, their edges and the tensors
// they saved for backward (observer ABI 3; docs/schema-tensors.md).
//
// Writer-owned like writer.h's state: touched with the writer's lock held.
#ifndef TPPROF_WRITER_GRAPH_H
#define TPPROF_WRITER_GRAPH_H

#include "writer/writer.h"
#include "base/base.h"

#define GRAPH_NEXT 16  // edges kept per node (observe.c sends at most this many)
#define GRAPH_SAVED 4  // saved tensors kept per node (the runtime saves at most 4: TP__NODE_MAX_SAVED)
#define GRAPH_NAMES 256

enum { G_RAN = 1, G_RETAINED = 2, G_FREED = 4 };

struct graph_saved {
    uint64_t tensor, storage, saved_ns, released_ns;
    bool used, released;
};

struct graph_node {
    uint64_t id, created_ns, freed_ns, ran_ns;
    uint64_t next[GRAPH_NEXT]; // node ids of the inputs' nodes, then tensor ids of its leaf inputs
    struct graph_saved saved[GRAPH_SAVED];
    uint32_t stack;      // stack_nodes id of its creation
    uint16_t nnext, nleaves; // next[0..nnext): nodes; next[nnext..nnext + nleaves): leaves
    uint32_t next_free;  // free list (slot + 1)
    uint16_t name;       // index into names
    uint16_t flags;      // G_*
    bool used;
};

struct tpprof_graph {
    struct graph_node *nodes;
    uint32_t n, cap, free_head;
    struct tpprof_map ids; // node id -> slot + 1
    char names[GRAPH_NAMES][32];
    uint32_t nnames; // names[0] is "?"
    uint64_t created, freed; // nodes seen made and freed over the run
};

TPPROF_HIDDEN extern struct tpprof_graph tpprof_graph;

// One graph record (kind TP_OBS_NODE_* or TP_OBS_TENSOR_SAVED /
// TP_OBS_SAVED_RELEASED), r as the ring holds it; stack: the stack_nodes id
// of its stack (NODE_CREATED), time its time.
TPPROF_HIDDEN void tpprof_graph_apply(int kind, const uint64_t *r, uint64_t time, uint32_t stack);

#endif
