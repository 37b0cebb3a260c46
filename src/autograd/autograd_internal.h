/*
 * src/autograd/autograd_internal.h - the graph node, its edges and saved
 * tensors, shared by the engine (engine.c, node.c) and the backward
 * formulas (the files in functions/).  Private to src/autograd.
 *
 * A node is made by one differentiable call (tp_ag_* in autograd.h) for its
 * one output.  It holds, all as strong references:
 *   - one edge per input: the input's own grad_fn node, or the input itself
 *     when it is a leaf that requires grad (the engine accumulates into its
 *     .grad), or nothing when the input needs no gradient;
 *   - its saved tensors, each a detached alias (same storage and version
 *     counter, no grad_fn: so a node that saves its own output makes no
 *     cycle) with the version it had when saved.
 * The output tensor holds the node (tp_tensor.grad_fn).
 */
#ifndef TENSORPLAY_AUTOGRAD_INTERNAL_H
#define TENSORPLAY_AUTOGRAD_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include "../core/internal.h"
#include "tensorplay/autograd.h"

#define TP__NODE_MAX_SAVED 4

typedef struct tp__node tp__node;

/* Computes one gradient per edge into grads_out (new references; NULL =
 * none) from grad, the gradient of the node's output (borrowed).  Runs with
 * grad mode off.  Returns a status with the error set. */
typedef tp_status (*tp__backward_fn)(tp__node *node, tp_tensor *grad, tp_tensor **grads_out);

typedef struct tp__edge {
    tp__node *node;  /* strong: the input's grad_fn, or NULL */
    tp_tensor *leaf; /* strong: a leaf input that requires grad, or NULL */
    /* The input's dtype and shape: every gradient sent along the edge must
     * have this shape and is converted to this dtype. */
    tp_dtype dtype;
    int ndim;
    int64_t sizes[TP_MAX_DIMS];
} tp__edge;

typedef struct tp__saved {
    tp_tensor *tensor;     /* detached alias (strong), NULL once released */
    uint32_t version;      /* the version counter's value when saved */
    const char *grad_fn;   /* the node the tensor was output of (static name), or NULL */
} tp__saved;

struct tp__node {
    _Atomic uint32_t refcount;
    uint64_t id;      /* from tp__next_id: names the node to an observer */
    const char *name; /* "MulBackward0": static */
    tp__backward_fn backward;
    int n_saved;
    bool released; /* saved tensors freed by a backward without retain_graph */
    tp__saved saved[TP__NODE_MAX_SAVED];
    /* Op parameters the formula needs, by the op's own convention. */
    int64_t iarg[2 * TP_MAX_DIMS + 2];
    double darg[2];
    /* The output's geometry when made. */
    tp_dtype out_dtype;
    int out_ndim;
    int64_t out_sizes[TP_MAX_DIMS];
    /* engine scratch, valid during one tp_backward */
    uint64_t epoch;
    uint32_t deps;
    tp_tensor *buffer; /* the summed gradient of the output so far */
    int n_next;
    tp__edge next[]; /* one per input */
};

/* For bench/train_step's bookkeeping figure only: when set, tp_backward
 * walks the graph, counts dependencies and frees saved tensors exactly as
 * usual but runs no formula (no gradient flows past the output). */
extern bool tp__backward_noop;

/* Is anything recording on this thread right now? (grad mode) */
bool tp__grad_enabled(void);

/* True if a call on these inputs must build a node: grad mode is on and
 * one of them requires grad. */
bool tp__needs_node(int n, tp_tensor *const *inputs);

/* A node for an op on n inputs (edges filled from them; an input that
 * needs no gradient gets an empty edge).  Call only when tp__needs_node.
 * Returns a new node with refcount 1, or NULL (error set). */
tp__node *tp__node_new(const char *name, tp__backward_fn backward, int n, tp_tensor *const *inputs);

/* Saves t (any tensor of the call: an input, or the output when
 * is_output) into slot n->n_saved++.  `of` names the node t is output of
 * in the error text, read from t's grad_fn unless is_output. */
tp_status tp__node_save(tp__node *node, tp_tensor *t, bool is_output);

/* Makes node the grad_fn of out (consuming the caller's node reference)
 * and marks out as requiring grad; saves out first if save_out. */
tp_status tp__node_attach(tp__node *node, tp_tensor *out, bool save_out);

/* Moves from's grad_fn to to (to's old one released) and marks to as
 * requiring grad: an in-place op recorded out of place on a copy gives its
 * node to the tensor it wrote into. */
void tp__node_move(tp_tensor *from, tp_tensor *to);

/* Borrowed saved tensor i, after PyTorch's checks: freed graph ("Trying to
 * backward through the graph a second time ...") or modified in place
 * since saved ("one of the variables needed for gradient computation has
 * been modified by an inplace operation: ..."). NULL with the error set. */
tp_tensor *tp__node_unpack(tp__node *node, int i);

/* Releases the saved tensors (after backward without retain_graph). */
void tp__node_release_saved(tp__node *node);

/* Tells an observer of ABI version 3 that backward ran node's formula
 * (retained: with retain_graph).  Nothing without one. */
void tp__node_observe_ran(const tp__node *node, bool retained);

/* Whether edge i carries a gradient (the input needs one). */
static inline bool tp__edge_wants(const tp__node *n, int i) {
    return n->next[i].node || n->next[i].leaf;
}

/* The broadcast inverse: sums g over the dims it was expanded along so
 * that it has sizes (ndim dims).  New reference. */
tp_tensor *tp__sum_to(tp_tensor *g, int ndim, const int64_t *sizes);

/* The one-output op helper every differentiable call ends with: if a node
 * is needed for inputs, makes it (name, backward), lets fill() save what it
 * needs and store its parameters, and attaches it to out.  Returns out, or
 * NULL (out released, error set). */
typedef tp_status (*tp__fill_fn)(tp__node *node, tp_tensor *out, void *ctx);
tp_tensor *tp__record(tp_tensor *out, const char *name, tp__backward_fn backward, int n,
                      tp_tensor *const *inputs, tp__fill_fn fill, void *ctx);

/* "tensorplay.FloatTensor" for the error texts (torch.FloatTensor in PyTorch). */
const char *tp__tensor_type_name(tp_dtype dtype);

#endif
