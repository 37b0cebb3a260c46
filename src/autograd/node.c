/*
 * src/autograd/node.c - a graph node's life: grad mode, making a node from
 * an op's inputs, saving tensors with their version, unpacking them with
 * PyTorch's checks, and freeing a graph without recursion.
 *
 * This is the one place node refcounts change.  The engine that runs
 * nodes is engine.c; the formulas are in functions/.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd_internal.h"

// ----------------------------------------------------------------------------
// grad mode: thread-local, as c10's GradMode

static _Thread_local bool tp__grad_disabled;

bool tp__grad_enabled(void) { return !tp__grad_disabled; }
bool tp_grad_is_enabled(void) { return !tp__grad_disabled; }

bool tp_grad_set_enabled(bool enabled) {
    bool prev = !tp__grad_disabled;
    tp__grad_disabled = !enabled;
    return prev;
}

bool tp__needs_node(int n, tp_tensor *const *inputs) {
    if (tp__grad_disabled) return false;
    for (int i = 0; i < n; i++)
        if (inputs[i] && inputs[i]->requires_grad) return true;
    return false;
}

// ----------------------------------------------------------------------------
// queries

bool tp_tensor_is_leaf(const tp_tensor *t) { return t && !t->grad_fn; }

const char *tp_tensor_grad_fn_name(const tp_tensor *t) {
    return t && t->grad_fn ? t->grad_fn->name : NULL;
}

const char *tp__tensor_type_name(tp_dtype dtype) {
    switch (dtype) {
    case TP_DTYPE_FLOAT32: return "tensorplay.FloatTensor";
    case TP_DTYPE_FLOAT64: return "tensorplay.DoubleTensor";
    case TP_DTYPE_FLOAT16: return "tensorplay.HalfTensor";
    case TP_DTYPE_BFLOAT16: return "tensorplay.BFloat16Tensor";
    case TP_DTYPE_INT8: return "tensorplay.CharTensor";
    case TP_DTYPE_INT16: return "tensorplay.ShortTensor";
    case TP_DTYPE_INT32: return "tensorplay.IntTensor";
    case TP_DTYPE_INT64: return "tensorplay.LongTensor";
    case TP_DTYPE_UINT8: return "tensorplay.ByteTensor";
    case TP_DTYPE_BOOL: return "tensorplay.BoolTensor";
    default: return "tensorplay.Tensor";
    }
}

// ----------------------------------------------------------------------------
// the observer's graph events (observer.h, version 3): sent only when an
// observer of that version is attached, so without one they cost a branch

static void observe_node(uint32_t kind, const tp__node *node, const void *object, uint32_t flags) {
    const tp_observer *o = tp__observer_graph();
    if (!o) return;
    /* NODE_CREATED: its edges' node ids, then its leaves' tensor ids */
    uint64_t small[32], *ids = small;
    uint32_t n = 0, nl = 0;
    if (kind == TP_OBS_NODE_CREATED) {
        if (2 * node->n_next > 32 && !(ids = malloc(2 * (size_t)node->n_next * sizeof *ids))) {
            tp__error(TP_STATUS_OUT_OF_MEMORY, "autograd: no memory to report the %s node's edges", node->name);
            return; /* the observer misses this node: nothing else changes */
        }
        for (int i = 0; i < node->n_next; i++)
            if (node->next[i].node) ids[n++] = node->next[i].node->id;
        for (int i = 0; i < node->n_next; i++)
            if (node->next[i].leaf) ids[n + nl++] = node->next[i].leaf->id;
    }
    tp_obs_event ev = {.kind = kind, .struct_size = sizeof ev, .object = (uint64_t)(uintptr_t)object};
    ev.u.node = (tp_obs_node){.node_id = node->id, .name = node->name, .next_ids = n ? ids : NULL, .n_next = n,
                              .flags = flags, .leaf_ids = nl ? ids + n : NULL, .n_leaves = nl};
    o->on_event(o->user, &ev);
    if (ids != small) free(ids);
}

static void observe_saved(uint32_t kind, const tp__node *node, int slot) {
    const tp_observer *o = tp__observer_graph();
    if (!o) return;
    const tp_tensor *t = node->saved[slot].tensor;
    tp_obs_event ev = {.kind = kind, .struct_size = sizeof ev};
    ev.u.saved = (tp_obs_saved){.node_id = node->id, .tensor_id = t->id, .storage_id = t->storage->id,
                                .slot = (uint32_t)slot};
    o->on_event(o->user, &ev);
}

void tp__node_observe_ran(const tp__node *node, bool retained) {
    observe_node(TP_OBS_NODE_RAN, node, NULL, retained ? TP_OBS_NODE_RETAINED : 0);
}

// ----------------------------------------------------------------------------
// making a node

tp__node *tp__node_new(const char *name, tp__backward_fn backward, int n, tp_tensor *const *inputs) {
    tp__node *node = calloc(1, sizeof *node + (size_t)n * sizeof(tp__edge));
    if (!node) {
        tp__error(TP_STATUS_OUT_OF_MEMORY, "autograd: cannot allocate the %s node", name);
        return NULL;
    }
    atomic_init(&node->refcount, 1);
    node->id = tp__next_id();
    node->name = name;
    node->backward = backward;
    node->n_next = n;
    for (int i = 0; i < n; i++) {
        tp_tensor *in = inputs[i];
        tp__edge *e = &node->next[i];
        if (!in) continue;
        e->dtype = in->dtype;
        e->ndim = in->ndim;
        memcpy(e->sizes, in->sizes, (size_t)in->ndim * sizeof(int64_t));
        if (!in->requires_grad) continue;
        if (in->grad_fn) {
            e->node = in->grad_fn;
            atomic_fetch_add_explicit(&e->node->refcount, 1, memory_order_relaxed);
        } else {
            e->leaf = tp_tensor_retain(in);
        }
    }
    observe_node(TP_OBS_NODE_CREATED, node, node, 0);
    return node;
}

tp_status tp__node_save(tp__node *node, tp_tensor *t, bool is_output) {
    if (node->n_saved >= TP__NODE_MAX_SAVED)
        return tp__error(TP_STATUS_INTERNAL, "autograd: %s saves more than %d tensors", node->name,
                         TP__NODE_MAX_SAVED);
    /* A detached alias: same storage and version counter, no grad_fn, so
     * saving the node's own output does not make a cycle. */
    tp_tensor *alias = tp_tensor_detach(t);
    if (!alias) return tp_last_status();
    tp__saved *s = &node->saved[node->n_saved++];
    s->tensor = alias;
    s->version = tp_tensor_version(t);
    s->grad_fn = is_output ? node->name : (t->grad_fn ? t->grad_fn->name : NULL);
    observe_saved(TP_OBS_TENSOR_SAVED, node, node->n_saved - 1);
    return TP_STATUS_OK;
}

tp_status tp__node_attach(tp__node *node, tp_tensor *out, bool save_out) {
    if (save_out) {
        tp_status st = tp__node_save(node, out, true);
        if (st != TP_STATUS_OK) {
            tp__node_release(node);
            return st;
        }
    }
    node->out_dtype = out->dtype;
    node->out_ndim = out->ndim;
    memcpy(node->out_sizes, out->sizes, (size_t)out->ndim * sizeof(int64_t));
    tp__node *old = out->grad_fn;
    out->grad_fn = node;
    out->requires_grad = true;
    tp__node_release(old);
    return TP_STATUS_OK;
}

void tp__node_move(tp_tensor *from, tp_tensor *to) {
    tp__node *old = to->grad_fn;
    to->grad_fn = from->grad_fn;
    from->grad_fn = NULL;
    from->requires_grad = false;
    to->requires_grad = true;
    tp__node_release(old);
}

tp_tensor *tp__record(tp_tensor *out, const char *name, tp__backward_fn backward, int n,
                      tp_tensor *const *inputs, tp__fill_fn fill, void *ctx) {
    if (!out) return NULL;
    if (!tp__needs_node(n, inputs)) {
        /* Views in tensor.h copy requires_grad; a result made without
         * recording never requires grad (PyTorch's no_grad views too). */
        out->requires_grad = false;
        return out;
    }
    tp__node *node = tp__node_new(name, backward, n, inputs);
    if (!node) goto fail;
    if (fill && fill(node, out, ctx) != TP_STATUS_OK) {
        tp__node_release(node);
        goto fail;
    }
    if (tp__node_attach(node, out, false) != TP_STATUS_OK) goto fail;
    return out;
fail:
    tp_tensor_release(out);
    return NULL;
}

// ----------------------------------------------------------------------------
// unpacking (saved_variable.cpp's checks and texts)

tp_tensor *tp__node_unpack(tp__node *node, int i) {
    tp__saved *s = &node->saved[i];
    if (node->released || !s->tensor) {
        tp__error(TP_STATUS_INVALID_ARGUMENT,
                  "Trying to backward through the graph a second time (or directly access saved "
                  "tensors after they have already been freed). Saved intermediate values of the "
                  "graph are freed when you call .backward() or autograd.grad(). Specify "
                  "retain_graph=True if you need to backward through the graph a second time or "
                  "if you need to access saved tensors after calling backward.");
        return NULL;
    }
    uint32_t now = tp_tensor_version(s->tensor);
    if (now != s->version) {
        char shape[256], which[160] = "";
        tp__format_shape(s->tensor->ndim, s->tensor->sizes, shape, sizeof shape);
        if (s->grad_fn) snprintf(which, sizeof which, ", which is output 0 of %s,", s->grad_fn);
        tp__error(TP_STATUS_INVALID_ARGUMENT,
                  "one of the variables needed for gradient computation has been modified by an "
                  "inplace operation: [%s %s]%s is at version %u; expected version %u instead. "
                  "Hint: enable anomaly detection to find the operation that failed to compute "
                  "its gradient, with torch.autograd.set_detect_anomaly(True).",
                  tp__tensor_type_name(s->tensor->dtype), shape, which, now, s->version);
        return NULL;
    }
    return s->tensor;
}

void tp__node_release_saved(tp__node *node) {
    for (int i = 0; i < node->n_saved; i++) {
        if (!node->saved[i].tensor) continue;
        observe_saved(TP_OBS_SAVED_RELEASED, node, i);
        tp_tensor_release(node->saved[i].tensor);
        node->saved[i].tensor = NULL;
    }
    node->released = true;
}

// ----------------------------------------------------------------------------
// freeing: a worklist, never recursion (PyTorch's deleteNode does the same
// for the same reason: a long chain would overflow the stack)

void tp__node_release(tp__node *node) {
    if (!node || atomic_fetch_sub_explicit(&node->refcount, 1, memory_order_acq_rel) != 1) return;
    tp__node *small[64];
    tp__node **stack = small;
    size_t cap = 64, top = 0;
    stack[top++] = node;
    while (top) {
        tp__node *n = stack[--top];
        for (int i = 0; i < n->n_next; i++) {
            tp__edge *e = &n->next[i];
            tp_tensor_release(e->leaf); /* a leaf has no grad_fn: no recursion */
            if (!e->node || atomic_fetch_sub_explicit(&e->node->refcount, 1, memory_order_acq_rel) != 1)
                continue;
            if (top == cap) {
                size_t ncap = cap * 2;
                tp__node **grown = stack == small ? malloc(ncap * sizeof *grown)
                                                  : realloc(stack, ncap * sizeof *grown);
                if (!grown) {
                    /* Out of memory while freeing: leak this subgraph rather
                     * than recurse or abort. */
                    continue;
                }
                if (stack == small) memcpy(grown, small, sizeof small);
                stack = grown;
                cap = ncap;
            }
            stack[top++] = e->node;
        }
        for (int i = 0; i < n->n_saved; i++) {
            if (!n->saved[i].tensor) continue;
            observe_saved(TP_OBS_SAVED_RELEASED, n, i);
            tp_tensor_release(n->saved[i].tensor);
        }
        tp_tensor_release(n->buffer);
        observe_node(TP_OBS_NODE_FREED, n, NULL, 0);
        free(n);
    }
    if (stack != small) free(stack);
}

// ----------------------------------------------------------------------------
// broadcast inverse

tp_tensor *tp__sum_to(tp_tensor *g, int ndim, const int64_t *sizes) {
    bool same = g->ndim == ndim;
    for (int i = 0; same && i < ndim; i++) same = g->sizes[i] == sizes[i];
    if (same) return tp_tensor_retain(g);
    int lead = g->ndim - ndim;
    if (lead < 0) {
        tp__error(TP_STATUS_INTERNAL, "autograd: cannot sum a gradient of %d dims to %d dims",
                  g->ndim, ndim);
        return NULL;
    }
    int dims[TP_MAX_DIMS], nd = 0;
    for (int i = 0; i < g->ndim; i++)
        if (i < lead || (sizes[i - lead] == 1 && g->sizes[i] != 1)) dims[nd++] = i;
    tp_tensor *s = nd ? tp_sum(g, nd, dims, true) : tp_tensor_retain(g);
    if (!s) return NULL;
    tp_tensor *r = tp_tensor_reshape(s, ndim, sizes);
    tp_tensor_release(s);
    return r;
}
