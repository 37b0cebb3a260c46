// graph.c: the autograd graph ledger. Applies the runtime's graph records
// (observe.c on_graph_node, on_graph_saved) to a table of nodes: each with
// its name, creation stack, edges, whether a backward ran it (and kept its
// saved tensors: retain_graph), and the tensors it saved with the storage
// each is on. In aggregate mode a freed node is dropped (what tables show
// is the graph alive at the end: what it holds); full mode keeps them all.
// No SQL here (store/graph.c writes it out).
#include <string.h>

#include "tensorplay/observer.h"
#include "record/format.h"
#include "base/mem.h"
#include "writer/graph.h"

struct tpprof_graph tpprof_graph;

static uint16_t name_of(const uint64_t *words) {
    char name[32];
    memcpy(name, words, 31);
    name[31] = 0;
    struct tpprof_graph *g = &tpprof_graph;
    if (!g->nnames) {
        strcpy(g->names[0], "?");
        g->nnames = 1;
    }
    if (!name[0]) return 0;
    for (uint32_t i = 1; i < g->nnames; i++)
        if (strcmp(g->names[i], name) == 0) return (uint16_t)i;
    if (g->nnames == GRAPH_NAMES) return 0;
    memcpy(g->names[g->nnames], name, 32);
    return (uint16_t)g->nnames++;
}

static struct graph_node *node_get(uint64_t id, uint32_t *slot) {
    uint32_t k = tpprof_map_get(&tpprof_graph.ids, id);
    if (!k) return NULL;
    *slot = k - 1;
    return &tpprof_graph.nodes[k - 1];
}

static struct graph_node *node_new(uint64_t id) {
    struct tpprof_graph *g = &tpprof_graph;
    uint32_t slot;
    if (g->free_head) {
        slot = g->free_head - 1;
        g->free_head = g->nodes[slot].next_free;
    } else {
        if (g->n == g->cap) {
            uint32_t ncap = g->cap ? g->cap * 2 : 256;
            void *p = tpprof_mem_grow(g->nodes, (size_t)g->cap * sizeof *g->nodes, (size_t)ncap * sizeof *g->nodes);
            if (!p) return NULL;
            g->nodes = p;
            g->cap = ncap;
        }
        slot = g->n++;
    }
    if (!tpprof_map_put(&g->ids, id, slot + 1)) {
        g->nodes[slot].used = false;
        g->nodes[slot].next_free = g->free_head;
        g->free_head = slot + 1;
        return NULL;
    }
    struct graph_node *x = &g->nodes[slot];
    memset(x, 0, sizeof *x);
    x->id = id;
    x->used = true;
    return x;
}

// Appends edge id (| GRAPH_LEAF) to x; false when out of memory (the edge
// is lost, the node kept).
static bool edge_add(struct graph_node *x, uint64_t id) {
    if (x->nedges < GRAPH_NEXT) {
        x->next[x->nedges++] = id;
        return true;
    }
    uint32_t i = x->nedges - GRAPH_NEXT;
    if (i == x->capmore) {
        uint32_t ncap = x->capmore ? x->capmore * 2 : 512; // a page
        void *p = tpprof_mem_grow(x->more, (size_t)x->capmore * sizeof *x->more, (size_t)ncap * sizeof *x->more);
        if (!p) return false;
        x->more = p;
        x->capmore = ncap;
    }
    x->more[i] = id;
    x->nedges++;
    return true;
}

// The k node edges then kl leaf edges at ids.
static void edges_add(struct graph_node *x, const uint64_t *ids, uint32_t k, uint32_t kl) {
    for (uint32_t i = 0; i < k + kl; i++)
        if (!edge_add(x, ids[i] | (i >= k ? GRAPH_LEAF : 0))) return;
}

static void node_drop(uint64_t id, uint32_t slot) {
    struct tpprof_graph *g = &tpprof_graph;
    struct graph_node *x = &g->nodes[slot];
    tpprof_mem_unmap(x->more, (size_t)x->capmore * sizeof *x->more);
    x->more = NULL;
    x->capmore = 0;
    tpprof_map_take(&g->ids, id);
    g->nodes[slot].used = false;
    g->nodes[slot].next_free = g->free_head;
    g->free_head = slot + 1;
}

// ----------------------------------------------------------------------------
// grads: which tensor holds which grad (GRAD_SET)

static void grad_set(uint64_t tensor, uint64_t grad, uint64_t storage, uint64_t time) {
    struct tpprof_graph *g = &tpprof_graph;
    uint32_t k = tpprof_map_get(&g->grad_ids, tensor);
    if (!grad) { // cleared (zero_grad(set_to_none)): the link goes
        if (k) tpprof_graph_tensor_freed(tensor);
        return;
    }
    if (!k) {
        uint32_t slot;
        if (g->free_grad) {
            slot = g->free_grad - 1;
            g->free_grad = (uint32_t)g->grads[slot].grad;
        } else {
            if (g->ngrads == g->capgrads) {
                uint32_t ncap = g->capgrads ? g->capgrads * 2 : 256;
                void *p = tpprof_mem_grow(g->grads, (size_t)g->capgrads * sizeof *g->grads,
                                          (size_t)ncap * sizeof *g->grads);
                if (!p) return;
                g->grads = p;
                g->capgrads = ncap;
            }
            slot = g->ngrads++;
        }
        if (!tpprof_map_put(&g->grad_ids, tensor, slot + 1)) {
            g->grads[slot] = (struct graph_grad){.grad = g->free_grad};
            g->free_grad = slot + 1;
            return;
        }
        k = slot + 1;
    }
    g->grads[k - 1] = (struct graph_grad){.tensor = tensor, .grad = grad, .storage = storage, .set_ns = time,
                                          .used = true};
}

void tpprof_graph_tensor_freed(uint64_t tensor_id) {
    struct tpprof_graph *g = &tpprof_graph;
    if (!g->grad_ids.count) return;
    uint32_t k = tpprof_map_take(&g->grad_ids, tensor_id);
    if (!k) return;
    g->grads[k - 1] = (struct graph_grad){.grad = g->free_grad};
    g->free_grad = k;
}

void tpprof_graph_apply(int kind, const uint64_t *r, uint64_t time, uint32_t stack) {
    uint32_t words = (uint32_t)(r[1] & 0xff), slot;
    struct graph_node *x;
    switch (kind) {
    case TP_OBS_NODE_CREATED: {
        if (r[1] & TPPROF_OBS_MORE_EDGES) { // the rest of a wide node's edges
            if (words < 4 || (x = node_get(r[2], &slot)) == NULL) return;
            uint32_t k = (uint32_t)(r[3] & 0xffff), kl = (uint32_t)(r[3] >> 16 & 0xffff);
            if (words >= 4 + k + kl) edges_add(x, &r[4], k, kl);
            return;
        }
        if (words < 8 || (x = node_new(r[2])) == NULL) return;
        tpprof_graph.created++;
        x->created_ns = time;
        x->stack = stack;
        x->name = name_of(&r[3]);
        uint32_t k = (uint32_t)(r[7] & 0xffff), kl = (uint32_t)(r[7] >> 16 & 0xffff);
        if (words >= 8 + k + kl) edges_add(x, &r[8], k, kl);
        return;
    }
    case TP_OBS_NODE_RAN:
        if (words < 4 || (x = node_get(r[2], &slot)) == NULL) return;
        x->flags |= G_RAN;
        x->flags = (uint16_t)((x->flags & ~G_RETAINED) | (r[3] & TP_OBS_NODE_RETAINED ? G_RETAINED : 0));
        x->ran_ns = time;
        return;
    case TP_OBS_NODE_FREED:
        if ((x = node_get(r[2], &slot)) == NULL) return;
        tpprof_graph.freed++;
        if (!tpprof_cfg.full) {
            node_drop(r[2], slot);
            return;
        }
        x->flags |= G_FREED;
        x->freed_ns = time;
        return;
    case TP_OBS_TENSOR_SAVED:
        if (r[1] & TPPROF_OBS_GRAD) {
            if (words >= 5) grad_set(r[2], r[3], r[4], time);
            return;
        }
        /* fallthrough */
    case TP_OBS_SAVED_RELEASED: {
        if (words < 6 || (x = node_get(r[2], &slot)) == NULL || r[5] >= GRAPH_SAVED) return;
        struct graph_saved *s = &x->saved[r[5]];
        if (kind == TP_OBS_TENSOR_SAVED) {
            *s = (struct graph_saved){.tensor = r[3], .storage = r[4], .saved_ns = time, .used = true};
        } else if (s->used && s->tensor == r[3]) {
            s->released = true;
            s->released_ns = time;
        }
        return;
    }
    default: return;
    }
}
