// autograd.h: what the autograd graph keeps alive (autograd.c).
// Private to viewer/; viewer.h includes every header of the viewer.
#ifndef TPPROF_VIEWER_AUTOGRAD_H
#define TPPROF_VIEWER_AUTOGRAD_H

#include "util.h"
#include "db.h"
#include "profile.h"
#include "tensors.h"

// ---------------------------------------------------------------------------
// autograd.c: what the autograd graph keeps alive (graph_nodes, graph_edges,
// saved_tensors, tensor_grads; docs/schema-tensors.md)

// One row of graph_nodes (a grad_fn node; in aggregate mode those alive at
// the end). root: index of its graph's root node in tpprof_autograd.nodes.
typedef struct tpprof_gnode {
    int64_t id;
    char *name; // "MmBackward0"; owned
    int64_t created_ns, created_stack, freed_ns;
    bool backward_ran, retained;
    int64_t root;
} tpprof_gnode;

// One row of saved_tensors: a tensor node_id saved (tensor_id: the node's
// alias of it) on storage_id, released_ns TPPROF_NO_TIME while kept.
typedef struct tpprof_gsaved {
    int64_t node_id, slot, storage_id, tensor_id, saved_ns, released_ns;
} tpprof_gsaved;

// A leaf input of a node (graph_edges.leaf = 1): the node holds a handle on
// tensor_id, a leaf that requires grad, to accumulate its gradient.
typedef struct tpprof_gleaf {
    int64_t tensor_id, node_id;
} tpprof_gleaf;

// A row of tensor_grads: tensor_id holds grad_id as its .grad (the runtime's
// own handle, not in tensor_refs).
typedef struct tpprof_ggrad {
    int64_t grad_id, tensor_id, grad_storage_id;
} tpprof_ggrad;

typedef struct tpprof_autograd {
    tpprof_gnode *nodes; // by id
    size_t nnodes;
    tpprof_gsaved *saved; // by storage, node
    size_t nsaved;
    tpprof_gleaf *leaves; // by tensor, node
    size_t nleaves;
    tpprof_ggrad *grads; // by grad_id (empty without tensor_grads)
    size_t ngrads;
    bool present;            // the recording has the tables
    int64_t created, freed;  // meta.graph_nodes_created / _freed (0: absent)
} tpprof_autograd;

// Load the graph tables (absent: an empty graph). 0 or -1 + error.
int tpprof_autograd_load(tpprof_db *db, tpprof_autograd *out);
void tpprof_autograd_free(tpprof_autograd *g);
// The node with this id (borrowed), NULL if none; its graph's root (n itself
// when it is one).
const tpprof_gnode *tpprof_autograd_node(const tpprof_autograd *g, int64_t id);
const tpprof_gnode *tpprof_autograd_root(const tpprof_autograd *g, const tpprof_gnode *n);
bool tpprof_gnode_alive(const tpprof_gnode *n);
// Why a node alive at the end is still there: "backward never ran",
// "retain_graph" (it ran, keeping its saved tensors) or "backward ran".
const char *tpprof_gnode_why(const tpprof_gnode *n);
// The saved tensors of storage_id that nodes alive at the end still keep:
// the first cap into out (borrowed); returns how many there are.
size_t tpprof_autograd_holders(const tpprof_autograd *g, int64_t storage_id, const tpprof_gsaved **out,
                               size_t cap);

// The saved tensor that tensor_id (on storage_id) is, when a node alive at
// the end still keeps it (borrowed), else NULL.
const tpprof_gsaved *tpprof_autograd_saved_as(const tpprof_autograd *g, int64_t storage_id, int64_t tensor_id);

// The nodes alive at the end that hold leaf tensor_id as an input (one
// entry a handle: a node that takes the leaf twice holds two): the first
// cap into out (borrowed); returns how many.
size_t tpprof_autograd_leaf_holders(const tpprof_autograd *g, int64_t tensor_id, const tpprof_gleaf **out, size_t cap);
// The tensor alive at exit whose .grad tensor_id is (borrowed), NULL if none.
const tpprof_tensor *tpprof_autograd_grad_owner(const tpprof_autograd *g, const tpprof_tensors *t, int64_t tensor_id);

// How a node keeps a storage (tpprof_autograd_storage_node).
enum {
    TPPROF_GKEEP_SAVED = 0, // a saved tensor of the node is on it
    TPPROF_GKEEP_LEAF = 1,  // a leaf input of the node is on it
    TPPROF_GKEEP_GRAD = 2,  // the .grad of a leaf input of the node is on it
};
// The first node alive at the end that keeps storage s's data: one that
// saved a tensor on it, else one holding a leaf alive on it, else one
// holding a leaf whose .grad is alive on it. NULL if none. *how:
// TPPROF_GKEEP_*; *tensor (when not NULL): the saved alias, the leaf, or
// the leaf whose grad it is.
const tpprof_gnode *tpprof_autograd_storage_node(const tpprof_autograd *g, const tpprof_tensors *t,
                                                 const tpprof_storage *s, int *how, int64_t *tensor);
// Whether graphs alone keep s (data alive at exit): every tensor alive on it
// is a saved tensor of a node alive then, or a leaf whose every handle
// outstanding at exit is a node's and that no tensor holds as its .grad,
// or the .grad of such a leaf (on a storage graphs alone keep) that no
// handle of its own holds; and no reference no release matched holds it;
// so it goes when the graphs go.
bool tpprof_autograd_keeps_alone(const tpprof_autograd *g, const tpprof_tensors *t, const tpprof_storage *s);

// Storages alive at exit that graphs keep (tpprof_autograd_storage_node),
// grouped by the graph's root (its name, the stack that made it, and why
// the graph is alive); storages/bytes count them all, alone_* those only
// graphs keep (tpprof_autograd_keeps_alone).
typedef struct tpprof_graph_group {
    int64_t stack_id;      // the root node's created_stack
    const char *root_name; // borrowed from the graph
    bool backward_ran, retained;
    uint64_t graphs, nodes, storages, bytes, alone_storages, alone_bytes;
} tpprof_graph_group;

// Totals over the groups (each storage once).
typedef struct tpprof_graph_held {
    uint64_t storages, bytes;             // storages alive at exit graphs keep
    uint64_t alone_storages, alone_bytes; // of them, those only graphs keep: graph-held
} tpprof_graph_held;

// The groups (new array, most graph-held bytes first; caller frees; NULL
// when none) and the totals.
tpprof_graph_group *tpprof_autograd_groups(const tpprof_autograd *g, const tpprof_tensors *t, size_t *n,
                                          tpprof_graph_held *held);

// The summary's graph line (verdict.c; run's summary and the HTML page):
// "graphs: 490 KiB in 24 storages kept by 5 autograd graphs (root
// NllLossBackward0 made in main (leak_loss_history.c:39)); backward never
// ran" into buf: the graph-held bytes (those only graphs keep), the alive
// graphs, and the root, creation site and why of the group that holds the
// most. false (buf "") when no graph node is alive at exit or the graph
// cannot be read (a recording without graph tables has none).
bool tpprof_verdict_graphs(const tpprof_profile *p, const tpprof_tensors *t, char *buf, size_t size);

#endif
