// graph_state.h: the autograd graph ledger, data only (writer/graph.c
// keeps it; store/graph.c writes it out): the runtime's grad_fn nodes,
// their edges, the tensors they saved for backward and the grads tensors
// hold (observer ABI 3; docs/schema-tensors.md). Part of the store's one
// view of the writer: state.h includes it. The writer's functions over it
// are in graph.h.
//
// Writer-owned like state.h's: touched with the writer's lock held.
#ifndef TPPROF_WRITER_GRAPH_STATE_H
#define TPPROF_WRITER_GRAPH_STATE_H

#include "base/base.h"
#include "writer/state.h" // struct tpprof_map (state.h includes this file after defining it)

#define GRAPH_NEXT 16  // edges kept in the node itself; a wider node's others in `more`
#define GRAPH_SAVED 4  // saved tensors kept per node (the runtime saves at most 4: TP__NODE_MAX_SAVED)
#define GRAPH_NAMES 256

enum { G_RAN = 1, G_RETAINED = 2, G_FREED = 4 };

struct graph_saved {
    uint64_t tensor, storage, saved_ns, released_ns;
    bool used, released;
};

// An edge's id with GRAPH_LEAF set is a leaf input's tensor id, else the
// input's node id (ids come from one counter that stays far below 2^63).
#define GRAPH_LEAF ((uint64_t)1 << 63)

struct graph_node {
    uint64_t id, created_ns, freed_ns, ran_ns;
    uint64_t next[GRAPH_NEXT]; // its first edges (| GRAPH_LEAF for a leaf input), in the order sent
    uint64_t *more;            // edges GRAPH_NEXT.. (own memory, base/mem.h), NULL if none
    uint32_t nedges, capmore;  // edges in all; capacity of more, in edges
    struct graph_saved saved[GRAPH_SAVED];
    uint32_t stack;      // stack_nodes id of its creation
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
    // The grad each tensor holds (GRAD_SET), while the tensor lives: its
    // tensor id -> slot + 1 of grads.
    struct graph_grad { uint64_t tensor, grad, storage, set_ns; bool used; } *grads;
    uint32_t ngrads, capgrads, free_grad; // free_grad: a free slot + 1 (chained through .grad)
    struct tpprof_map grad_ids;
};

TPPROF_HIDDEN extern struct tpprof_graph tpprof_graph;

// Edge i of x (GRAPH_LEAF set for a leaf input).
static inline uint64_t tpprof_graph_edge(const struct graph_node *x, uint32_t i) {
    return i < GRAPH_NEXT ? x->next[i] : x->more[i - GRAPH_NEXT];
}

#endif
