/*
 * src/autograd/engine.c - tp_backward: runs a graph from one output.
 *
 * Two passes, both with explicit stacks so graph depth never becomes
 * C-stack depth (a 100,000-op chain is a test):
 *   1. from the output's node, count for every reachable node how many
 *      edges point at it (its dependencies);
 *   2. a ready stack, seeded with the output's node: pop a node, run its
 *      formula on its summed gradient, send each result along its edge
 *      (summed into the next node's buffer, or accumulated into a leaf's
 *      .grad), and push a node once all its dependencies have reported.
 * Without retain_graph each node's saved tensors go as soon as it ran.
 * Single-threaded, on the calling thread, with grad mode off.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd_internal.h"

static _Atomic uint64_t tp__epoch;

/* bench/train_step only (autograd_internal.h): walk without formulas. */
bool tp__backward_noop;

// ----------------------------------------------------------------------------
// a growable array of node pointers

typedef struct node_vec {
    tp__node **items;
    size_t len, cap;
} node_vec;

static tp_status vec_push(node_vec *v, tp__node *n) {
    if (v->len == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 64;
        tp__node **p = realloc(v->items, cap * sizeof *p);
        if (!p) return tp__error(TP_STATUS_OUT_OF_MEMORY, "backward: out of memory for the graph walk");
        v->items = p;
        v->cap = cap;
    }
    v->items[v->len++] = n;
    return TP_STATUS_OK;
}

// ----------------------------------------------------------------------------
// gradients

/* Can the engine keep g itself as a .grad or buffer it may add into in
 * place?  Only if nothing else sees its memory. */
static bool owned_alone(const tp_tensor *g) {
    return atomic_load_explicit(&((tp_tensor *)g)->refcount, memory_order_relaxed) == 1 &&
           tp_storage_use_count(g->storage) == 1 && !g->base && tp_tensor_is_contiguous(g);
}

/* AccumulateGrad: new into leaf's .grad (consumes the caller's reference). */
static tp_status accumulate(tp_tensor *leaf, tp_tensor *g) {
    tp_status st = TP_STATUS_OK;
    if (!leaf->grad) {
        tp_tensor *keep = owned_alone(g) ? tp_tensor_retain(g) : tp_clone(g);
        if (!keep) st = tp_last_status();
        else {
            st = tp_tensor_set_grad(leaf, keep);
            tp_tensor_release(keep);
        }
    } else {
        st = tp_add_(leaf->grad, g);
    }
    tp_tensor_release(g);
    return st;
}

/* Sums g into n's buffer (consumes the caller's reference). */
static tp_status buffer_add(tp__node *n, tp_tensor *g) {
    if (!n->buffer) {
        n->buffer = g;
        return TP_STATUS_OK;
    }
    tp_status st = TP_STATUS_OK;
    if (owned_alone(n->buffer)) {
        st = tp_add_(n->buffer, g);
    } else {
        tp_tensor *sum = tp_add(n->buffer, g);
        if (!sum) st = tp_last_status();
        else {
            tp_tensor_release(n->buffer);
            n->buffer = sum;
        }
    }
    tp_tensor_release(g);
    return st;
}

/* Checks a formula's result against its edge (validate_outputs in
 * PyTorch) and converts its dtype.  Consumes g; new reference or NULL. */
static tp_tensor *validate(const tp__node *n, int i, tp_tensor *g) {
    const tp__edge *e = &n->next[i];
    bool same = g->ndim == e->ndim;
    for (int d = 0; same && d < e->ndim; d++) same = g->sizes[d] == e->sizes[d];
    if (!same) {
        char got[256], want[256];
        tp__error(TP_STATUS_INTERNAL,
                  "Function %s returned an invalid gradient at index %d - got %s but expected "
                  "shape compatible with %s",
                  n->name, i, tp__format_shape(g->ndim, g->sizes, got, sizeof got),
                  tp__format_shape(e->ndim, e->sizes, want, sizeof want));
        tp_tensor_release(g);
        return NULL;
    }
    if (g->dtype == e->dtype) return g;
    tp_tensor *c = tp_to_dtype(g, e->dtype);
    tp_tensor_release(g);
    return c;
}

// ----------------------------------------------------------------------------
// the root's gradient

static tp_tensor *root_grad(tp_tensor *out, const tp_tensor *grad_output) {
    if (!grad_output) {
        if (out->numel != 1) {
            tp__error(TP_STATUS_INVALID_ARGUMENT, "grad can be implicitly created only for scalar outputs");
            return NULL;
        }
        return tp_full(out->ndim, out->sizes, 1.0, out->dtype);
    }
    bool same = grad_output->ndim == out->ndim;
    for (int d = 0; same && d < out->ndim; d++) same = grad_output->sizes[d] == out->sizes[d];
    if (!same) {
        char a[256], b[256];
        tp__error(TP_STATUS_INVALID_ARGUMENT,
                  "Mismatch in shape: grad_output[0] has a shape of tensorplay.Size(%s) and "
                  "output[0] has a shape of tensorplay.Size(%s).",
                  tp__format_shape(grad_output->ndim, grad_output->sizes, a, sizeof a),
                  tp__format_shape(out->ndim, out->sizes, b, sizeof b));
        return NULL;
    }
    if (!tp_dtype_is_floating(grad_output->dtype)) {
        tp__error(TP_STATUS_INVALID_ARGUMENT,
                  "invalid gradient at index 0 - expected dtype %s but got %s",
                  tp_dtype_name(out->dtype), tp_dtype_name(grad_output->dtype));
        return NULL;
    }
    return tp_to_dtype((tp_tensor *)grad_output, out->dtype);
}

// ----------------------------------------------------------------------------
// backward

static tp_status run(tp__node *root, tp_tensor *g, bool retain_graph) {
    node_vec all = {0}, ready = {0};
    tp_status st = TP_STATUS_OK;
    uint64_t epoch = atomic_fetch_add(&tp__epoch, 1) + 1;

    /* pass 1: dependencies */
    root->epoch = epoch;
    root->deps = 0;
    root->buffer = NULL;
    if ((st = vec_push(&all, root)) != TP_STATUS_OK) goto done;
    for (size_t k = 0; k < all.len; k++) {
        tp__node *n = all.items[k];
        for (int i = 0; i < n->n_next; i++) {
            tp__node *m = n->next[i].node;
            if (!m) continue;
            if (m->epoch != epoch) {
                m->epoch = epoch;
                m->deps = 0;
                m->buffer = NULL;
                if ((st = vec_push(&all, m)) != TP_STATUS_OK) goto done;
            }
            m->deps++;
        }
    }

    /* pass 2: the ready stack */
    root->buffer = g;
    g = NULL;
    if ((st = vec_push(&ready, root)) != TP_STATUS_OK) goto done;
    tp_tensor *small[8];
    while (ready.len) {
        tp__node *n = ready.items[--ready.len];
        tp_tensor *grad = n->buffer;
        n->buffer = NULL;
        tp_tensor **outs = n->n_next <= 8 ? small : calloc((size_t)n->n_next, sizeof *outs);
        if (!outs) {
            tp_tensor_release(grad);
            st = tp__error(TP_STATUS_OUT_OF_MEMORY, "backward: out of memory");
            goto done;
        }
        memset(outs, 0, (size_t)n->n_next * sizeof *outs);
        bool noop = tp__backward_noop;
        if (grad && !noop) st = n->backward(n, grad, outs);
        tp_tensor_release(grad);
        if (st == TP_STATUS_OK && (grad || noop)) tp__node_observe_ran(n, retain_graph);
        if (!retain_graph && st == TP_STATUS_OK && (grad || noop) && n->n_saved) tp__node_release_saved(n);
        for (int i = 0; i < n->n_next; i++) {
            tp__edge *e = &n->next[i];
            tp_tensor *gi = outs[i];
            outs[i] = NULL;
            if (gi && st == TP_STATUS_OK && (e->node || e->leaf)) {
                gi = validate(n, i, gi);
                if (!gi) st = tp_last_status();
                else if (e->leaf) st = accumulate(e->leaf, gi);
                else st = buffer_add(e->node, gi);
                gi = NULL;
            }
            tp_tensor_release(gi);
            if (st == TP_STATUS_OK && e->node && --e->node->deps == 0)
                st = vec_push(&ready, e->node);
        }
        if (outs != small) free(outs);
        if (st != TP_STATUS_OK) goto done;
    }

done:
    tp_tensor_release(g);
    for (size_t k = 0; k < all.len; k++) {
        tp_tensor_release(all.items[k]->buffer);
        all.items[k]->buffer = NULL;
    }
    free(all.items);
    free(ready.items);
    return st;
}

tp_status tp_backward(tp_tensor *output, const tp_tensor *grad_output, bool retain_graph) {
    if (!output) return tp__error(TP_STATUS_INVALID_ARGUMENT, "backward: tensor is NULL");
    if (!output->requires_grad)
        return tp__error(TP_STATUS_INVALID_ARGUMENT,
                         "element 0 of tensors does not require grad and does not have a grad_fn");
    tp_tensor *g = root_grad(output, grad_output);
    if (!g) return tp_last_status();
    bool prev = tp_grad_set_enabled(false);
    tp_status st;
    if (!output->grad_fn) st = accumulate(output, g); /* backward on a leaf */
    else st = run(output->grad_fn, g, retain_graph);
    tp_grad_set_enabled(prev);
    return st;
}
