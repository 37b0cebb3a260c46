// autograd.c: what the autograd graph keeps alive (graph_nodes, graph_edges,
// saved_tensors, tensor_grads: docs/schema-tensors.md). Loads the graph a
// recording holds at its end, splits it into graphs (connected by edges)
// each named by its root (the node no other node of the graph points to:
// the loss's), and says which node keeps which storage (a tensor it saved,
// a leaf input, or that leaf's .grad) and why the graph is still there
// (backward never ran through it, or ran with retain_graph).
//
// A recording made before these tables, or of a runtime that sends no graph
// events (observer ABI 2), reads as an empty graph. Nothing here prints.
#define _POSIX_C_SOURCE 200809L
#include "viewer.h"

#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

static int by_node_id(const void *a, const void *b) {
    int64_t x = ((const tpprof_gnode *)a)->id, y = ((const tpprof_gnode *)b)->id;
    return x < y ? -1 : x > y;
}

static int by_storage(const void *a, const void *b) {
    const tpprof_gsaved *x = a, *y = b;
    if (x->storage_id != y->storage_id)
        return x->storage_id < y->storage_id ? -1 : 1;
    return x->node_id < y->node_id ? -1 : x->node_id > y->node_id;
}

static int by_leaf(const void *a, const void *b) {
    const tpprof_gleaf *x = a, *y = b;
    if (x->tensor_id != y->tensor_id)
        return x->tensor_id < y->tensor_id ? -1 : 1;
    return x->node_id < y->node_id ? -1 : x->node_id > y->node_id;
}

static int by_grad(const void *a, const void *b) {
    const tpprof_ggrad *x = a, *y = b;
    return x->grad_id < y->grad_id ? -1 : x->grad_id > y->grad_id;
}

static int64_t col_time(sqlite3_stmt *st, int i) {
    return sqlite3_column_type(st, i) == SQLITE_NULL ? TPPROF_NO_TIME : sqlite3_column_int64(st, i);
}

static int load_nodes(tpprof_db *db, tpprof_autograd *g) {
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db->sql,
                           "SELECT id, name, created_ns, created_stack, freed_ns, backward_ran, retained "
                           "FROM graph_nodes ORDER BY id", -1, &st, NULL) != SQLITE_OK)
        return tpprof_db_error(db, "reading graph_nodes");
    size_t cap = 0;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        tpprof_gnode *grown = tpprof_grow(g->nodes, g->nnodes, &cap, sizeof *grown);
        if (!grown) {
            sqlite3_finalize(st);
            return -1;
        }
        g->nodes = grown;
        tpprof_gnode *n = &g->nodes[g->nnodes++];
        memset(n, 0, sizeof *n);
        n->id = sqlite3_column_int64(st, 0);
        const unsigned char *name = sqlite3_column_text(st, 1);
        n->name = strdup(name ? (const char *)name : "?");
        n->created_ns = col_time(st, 2);
        n->created_stack = sqlite3_column_int64(st, 3);
        n->freed_ns = col_time(st, 4);
        n->backward_ran = sqlite3_column_int64(st, 5) != 0;
        n->retained = sqlite3_column_int64(st, 6) != 0;
        n->root = -1;
    }
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? 0 : tpprof_db_error(db, "reading graph_nodes");
}

static int load_saved(tpprof_db *db, tpprof_autograd *g) {
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db->sql, "SELECT node_id, slot, storage_id, tensor_id, saved_ns, released_ns "
                                    "FROM saved_tensors", -1, &st, NULL) != SQLITE_OK)
        return tpprof_db_error(db, "reading saved_tensors");
    size_t cap = 0;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        tpprof_gsaved *grown = tpprof_grow(g->saved, g->nsaved, &cap, sizeof *grown);
        if (!grown) {
            sqlite3_finalize(st);
            return -1;
        }
        g->saved = grown;
        g->saved[g->nsaved++] = (tpprof_gsaved){
            .node_id = sqlite3_column_int64(st, 0), .slot = sqlite3_column_int64(st, 1),
            .storage_id = sqlite3_column_int64(st, 2), .tensor_id = sqlite3_column_int64(st, 3),
            .saved_ns = col_time(st, 4), .released_ns = col_time(st, 5)};
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE)
        return tpprof_db_error(db, "reading saved_tensors");
    if (g->nsaved)
        qsort(g->saved, g->nsaved, sizeof *g->saved, by_storage);
    return 0;
}

// tensor_grads (absent in recordings from before it: no grad is linked).
static int load_grads(tpprof_db *db, tpprof_autograd *g) {
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db->sql, "SELECT grad_id, tensor_id, grad_storage_id FROM tensor_grads", -1, &st, NULL) !=
        SQLITE_OK)
        return tpprof_db_error(db, "reading tensor_grads");
    size_t cap = 0;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        tpprof_ggrad *grown = tpprof_grow(g->grads, g->ngrads, &cap, sizeof *grown);
        if (!grown) {
            sqlite3_finalize(st);
            return -1;
        }
        g->grads = grown;
        g->grads[g->ngrads++] = (tpprof_ggrad){sqlite3_column_int64(st, 0), sqlite3_column_int64(st, 1),
                                               sqlite3_column_int64(st, 2)};
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE)
        return tpprof_db_error(db, "reading tensor_grads");
    if (g->ngrads)
        qsort(g->grads, g->ngrads, sizeof *g->grads, by_grad);
    return 0;
}

static size_t find_root(size_t *parent, size_t i) {
    while (parent[i] != i) {
        parent[i] = parent[parent[i]];
        i = parent[i];
    }
    return i;
}

// Splits the alive nodes into graphs by their edges (union-find) and gives
// each node the index of its graph's root: the newest node of the graph no
// other node of it points to.
static int find_graphs(tpprof_db *db, tpprof_autograd *g) {
    size_t n = g->nnodes;
    if (!n)
        return 0;
    size_t *parent = malloc(n * sizeof *parent);
    unsigned char *pointed = calloc(n, 1);
    if (!parent || !pointed) {
        free(parent);
        free(pointed);
        return tpprof_error_set("out of memory reading the autograd graph");
    }
    for (size_t i = 0; i < n; i++)
        parent[i] = i;
    sqlite3_stmt *st = NULL;
    int rc = SQLITE_DONE;
    if (tpprof_db_has_table(db, "graph_edges")) {
        // (graph_edges without its leaf column: every edge a node's)
        if (sqlite3_prepare_v2(db->sql, "SELECT node_id, next_id, leaf FROM graph_edges", -1, &st, NULL) != SQLITE_OK &&
            sqlite3_prepare_v2(db->sql, "SELECT node_id, next_id, 0 FROM graph_edges", -1, &st, NULL) != SQLITE_OK) {
            free(parent);
            free(pointed);
            return tpprof_db_error(db, "reading graph_edges");
        }
        size_t cap = 0;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
            if (sqlite3_column_int64(st, 2)) { // a leaf input: a handle on a tensor
                tpprof_gleaf *grown = tpprof_grow(g->leaves, g->nleaves, &cap, sizeof *grown);
                if (!grown) {
                    rc = SQLITE_NOMEM;
                    break;
                }
                g->leaves = grown;
                g->leaves[g->nleaves++] = (tpprof_gleaf){sqlite3_column_int64(st, 1), sqlite3_column_int64(st, 0)};
                continue;
            }
            const tpprof_gnode *a = tpprof_autograd_node(g, sqlite3_column_int64(st, 0));
            const tpprof_gnode *b = tpprof_autograd_node(g, sqlite3_column_int64(st, 1));
            if (!a || !b || a == b)
                continue;
            size_t ia = (size_t)(a - g->nodes), ib = (size_t)(b - g->nodes);
            pointed[ib] = 1;
            size_t ra = find_root(parent, ia), rb = find_root(parent, ib);
            if (ra != rb)
                parent[ra] = rb;
        }
        sqlite3_finalize(st);
    }
    // Each graph's root: its newest node nothing points to (nodes are by id,
    // ids grow with time), else (a cycle cannot happen, but) its newest.
    int64_t *best = malloc(n * sizeof *best);
    if (best) {
        for (size_t i = 0; i < n; i++)
            best[i] = -1;
        for (size_t pass = 0; pass < 2; pass++)
            for (size_t i = 0; i < n; i++) {
                size_t r = find_root(parent, i);
                if ((pass == 0 && !pointed[i]) || (pass == 1 && best[r] < 0))
                    best[r] = (int64_t)i;
            }
        for (size_t i = 0; i < n; i++)
            g->nodes[i].root = best[find_root(parent, i)];
    }
    bool ok = best != NULL;
    if (g->nleaves)
        qsort(g->leaves, g->nleaves, sizeof *g->leaves, by_leaf);
    free(best);
    free(parent);
    free(pointed);
    if (rc != SQLITE_DONE)
        return tpprof_db_error(db, "reading graph_edges");
    return ok ? 0 : tpprof_error_set("out of memory reading the autograd graph");
}

int tpprof_autograd_load(tpprof_db *db, tpprof_autograd *out) {
    memset(out, 0, sizeof *out);
    out->present = tpprof_db_has_table(db, "graph_nodes");
    int64_t v;
    if (tpprof_db_meta_i64(db, "graph_nodes_created", &v))
        out->created = v;
    if (tpprof_db_meta_i64(db, "graph_nodes_freed", &v))
        out->freed = v;
    if (!out->present)
        return 0;
    if (load_nodes(db, out) != 0 || (tpprof_db_has_table(db, "saved_tensors") && load_saved(db, out) != 0) ||
        find_graphs(db, out) != 0 || (tpprof_db_has_table(db, "tensor_grads") && load_grads(db, out) != 0)) {
        tpprof_autograd_free(out);
        return -1;
    }
    return 0;
}

void tpprof_autograd_free(tpprof_autograd *g) {
    for (size_t i = 0; i < g->nnodes; i++)
        free(g->nodes[i].name);
    free(g->nodes);
    free(g->saved);
    free(g->leaves);
    free(g->grads);
    memset(g, 0, sizeof *g);
}

const tpprof_gnode *tpprof_autograd_node(const tpprof_autograd *g, int64_t id) {
    tpprof_gnode key = {.id = id};
    return g->nnodes ? bsearch(&key, g->nodes, g->nnodes, sizeof key, by_node_id) : NULL;
}

const tpprof_gnode *tpprof_autograd_root(const tpprof_autograd *g, const tpprof_gnode *n) {
    return n && n->root >= 0 ? &g->nodes[n->root] : n;
}

bool tpprof_gnode_alive(const tpprof_gnode *n) { return n->freed_ns == TPPROF_NO_TIME; }

const char *tpprof_gnode_why(const tpprof_gnode *n) {
    if (!n->backward_ran)
        return "backward never ran";
    return n->retained ? "retain_graph" : "backward ran";
}

size_t tpprof_autograd_holders(const tpprof_autograd *g, int64_t storage_id, const tpprof_gsaved **out,
                               size_t cap) {
    size_t lo = 0, hi = g->nsaved, n = 0;
    while (lo < hi) { // the first row of storage_id
        size_t mid = (lo + hi) / 2;
        if (g->saved[mid].storage_id < storage_id)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (size_t i = lo; i < g->nsaved && g->saved[i].storage_id == storage_id; i++) {
        const tpprof_gsaved *s = &g->saved[i];
        const tpprof_gnode *node = tpprof_autograd_node(g, s->node_id);
        if (s->released_ns != TPPROF_NO_TIME || !node || !tpprof_gnode_alive(node))
            continue;
        if (n < cap)
            out[n] = s;
        n++;
    }
    return n;
}

static int by_bytes_desc(const void *a, const void *b) {
    const tpprof_graph_group *x = a, *y = b;
    if (x->alone_bytes != y->alone_bytes)
        return x->alone_bytes < y->alone_bytes ? 1 : -1;
    if (x->bytes != y->bytes)
        return x->bytes < y->bytes ? 1 : -1;
    return x->stack_id < y->stack_id ? -1 : x->stack_id > y->stack_id;
}

static bool same_group(const tpprof_graph_group *x, const tpprof_gnode *root) {
    return x->stack_id == root->created_stack && strcmp(x->root_name, root->name) == 0 &&
           x->backward_ran == root->backward_ran && x->retained == root->retained;
}

tpprof_graph_group *tpprof_autograd_groups(const tpprof_autograd *g, const tpprof_tensors *t, size_t *n,
                                          tpprof_graph_held *held) {
    *n = 0;
    memset(held, 0, sizeof *held);
    tpprof_graph_group *groups = NULL;
    size_t cap = 0;
    // One pass over the storages alive at exit; each counted once, in the
    // graph of the first node that keeps it.
    for (size_t i = 0; i < t->nstorages; i++) {
        const tpprof_storage *s = &t->storages[i];
        int how;
        const tpprof_gnode *node = tpprof_autograd_storage_node(g, t, s, &how, NULL);
        if (!node)
            continue;
        bool alone = tpprof_autograd_keeps_alone(g, t, s);
        const tpprof_gnode *root = tpprof_autograd_root(g, node);
        size_t k = 0;
        while (k < *n && !same_group(&groups[k], root))
            k++;
        if (k == *n) {
            tpprof_graph_group *grown = tpprof_grow(groups, *n, &cap, sizeof *grown);
            if (!grown) {
                free(groups);
                *n = 0;
                return NULL;
            }
            groups = grown;
            groups[k] = (tpprof_graph_group){.stack_id = root->created_stack, .root_name = root->name,
                                             .backward_ran = root->backward_ran, .retained = root->retained};
            (*n)++;
        }
        groups[k].storages++;
        groups[k].bytes += (uint64_t)s->nbytes;
        held->storages++;
        held->bytes += (uint64_t)s->nbytes;
        if (alone) {
            groups[k].alone_storages++;
            groups[k].alone_bytes += (uint64_t)s->nbytes;
            held->alone_storages++;
            held->alone_bytes += (uint64_t)s->nbytes;
        }
    }
    // Graphs and nodes per group: every alive root, by its group.
    for (size_t i = 0; i < g->nnodes; i++) {
        const tpprof_gnode *x = &g->nodes[i];
        const tpprof_gnode *root = tpprof_autograd_root(g, x);
        if (!tpprof_gnode_alive(x))
            continue;
        for (size_t k = 0; k < *n; k++)
            if (same_group(&groups[k], root)) {
                groups[k].nodes++;
                if (root == x)
                    groups[k].graphs++;
                break;
            }
    }
    if (*n)
        qsort(groups, *n, sizeof *groups, by_bytes_desc);
    return groups;
}

size_t tpprof_autograd_leaf_holders(const tpprof_autograd *g, int64_t tensor_id, const tpprof_gleaf **out, size_t cap) {
    size_t lo = 0, hi = g->nleaves, n = 0;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (g->leaves[mid].tensor_id < tensor_id)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (size_t i = lo; i < g->nleaves && g->leaves[i].tensor_id == tensor_id; i++) {
        const tpprof_gnode *node = tpprof_autograd_node(g, g->leaves[i].node_id);
        if (!node || !tpprof_gnode_alive(node))
            continue;
        if (n < cap)
            out[n] = &g->leaves[i];
        n++;
    }
    return n;
}

const tpprof_tensor *tpprof_autograd_grad_owner(const tpprof_autograd *g, const tpprof_tensors *t, int64_t tensor_id) {
    tpprof_ggrad key = {.grad_id = tensor_id};
    const tpprof_ggrad *r = g->ngrads ? bsearch(&key, g->grads, g->ngrads, sizeof key, by_grad) : NULL;
    if (!r)
        return NULL;
    // A row per tensor: its grad now (a cleared grad has none). One grad may
    // be two tensors' (set_grad twice), and in full mode a freed tensor
    // keeps its row: the first alive owner wins.
    while (r > g->grads && r[-1].grad_id == tensor_id)
        r--;
    for (; r < g->grads + g->ngrads && r->grad_id == tensor_id; r++) {
        const tpprof_tensor *owner = tpprof_tensors_tensor(t, r->tensor_id);
        if (owner && tpprof_tensor_alive(owner))
            return owner;
    }
    return NULL;
}

// The first node alive at the end holding a leaf alive on storage s (its
// leaf into *leaf), or NULL.
static const tpprof_gnode *leaf_node_on(const tpprof_autograd *g, const tpprof_tensors *t, int64_t storage_id,
                                        int64_t *leaf) {
    size_t non = 0;
    const size_t *on = tpprof_tensors_on(t, storage_id, &non);
    for (size_t i = 0; i < non; i++) {
        const tpprof_tensor *x = &t->tensors[on[i]];
        const tpprof_gleaf *l[1];
        if (tpprof_tensor_alive(x) && tpprof_autograd_leaf_holders(g, x->id, l, 1)) {
            *leaf = x->id;
            return tpprof_autograd_node(g, l[0]->node_id);
        }
    }
    return NULL;
}

const tpprof_gnode *tpprof_autograd_storage_node(const tpprof_autograd *g, const tpprof_tensors *t,
                                                 const tpprof_storage *s, int *how, int64_t *tensor) {
    int64_t unused;
    if (!tensor)
        tensor = &unused;
    if (!tpprof_storage_alive(s) || !tpprof_storage_data_alive(s))
        return NULL;
    const tpprof_gsaved *h[1];
    if (tpprof_autograd_holders(g, s->id, h, 1)) {
        *how = TPPROF_GKEEP_SAVED;
        *tensor = h[0]->tensor_id;
        return tpprof_autograd_node(g, h[0]->node_id);
    }
    const tpprof_gnode *node = leaf_node_on(g, t, s->id, tensor);
    if (node) {
        *how = TPPROF_GKEEP_LEAF;
        return node;
    }
    // A gradient: kept by the leaf whose .grad it is, that a node holds.
    size_t non = 0;
    const size_t *on = tpprof_tensors_on(t, s->id, &non);
    for (size_t i = 0; i < non && g->ngrads; i++) {
        const tpprof_tensor *x = &t->tensors[on[i]];
        const tpprof_tensor *owner = tpprof_tensor_alive(x) ? tpprof_autograd_grad_owner(g, t, x->id) : NULL;
        const tpprof_gleaf *l[1];
        if (owner && tpprof_autograd_leaf_holders(g, owner->id, l, 1)) {
            *how = TPPROF_GKEEP_GRAD;
            *tensor = owner->id;
            return tpprof_autograd_node(g, l[0]->node_id);
        }
    }
    return NULL;
}

static int64_t handles_of(const tpprof_tensors *t, int64_t tensor_id) {
    size_t nh = 0;
    int64_t handles = 0;
    const tpprof_handle_ref *h = tpprof_tensors_handles(t, tensor_id, &nh);
    for (size_t k = 0; k < nh; k++)
        handles += h[k].count;
    return handles;
}

// keeps_alone; depth 1: checking the storage of a leaf whose grad is on
// the storage asked about (a grad of a grad is not followed).
static bool keeps_alone_at(const tpprof_autograd *g, const tpprof_tensors *t, const tpprof_storage *s, int depth) {
    int how;
    if (!tpprof_autograd_storage_node(g, t, s, &how, NULL))
        return false;
    size_t non = 0;
    const size_t *on = tpprof_tensors_on(t, s->id, &non);
    for (size_t i = 0; i < non; i++) {
        const tpprof_tensor *x = &t->tensors[on[i]];
        if (!tpprof_tensor_alive(x) || tpprof_autograd_saved_as(g, s->id, x->id))
            continue;
        // A tensor holding x as its .grad holds it with a handle
        // tensor_refs does not show (the runtime's own).
        const tpprof_tensor *owner = tpprof_autograd_grad_owner(g, t, x->id);
        // A leaf: only graphs keep it when every handle outstanding at exit
        // is a node's (its creator let go: no creation handle row), and no
        // tensor holds it as its .grad.
        const tpprof_gleaf *l[1];
        size_t edges = tpprof_autograd_leaf_holders(g, x->id, l, 1);
        if (edges) {
            if (owner || handles_of(t, x->id) != (int64_t)edges)
                return false;
            continue;
        }
        // A gradient: only graphs keep it when only its leaf holds it (no
        // handle of its own) and only graphs keep that leaf's storage.
        if (!owner || depth > 0 || handles_of(t, x->id) != 0 || !tpprof_autograd_leaf_holders(g, owner->id, l, 1))
            return false;
        const tpprof_storage *os = tpprof_tensors_storage(t, owner->storage_id);
        if (!os || !keeps_alone_at(g, t, os, depth + 1))
            return false;
    }
    size_t nr = 0;
    const tpprof_ref *refs = tpprof_tensors_refs(t, s->id, &nr);
    for (size_t i = 0; i < nr; i++)
        if (tpprof_ref_unmatched(&refs[i], false))
            return false;
    return true;
}

bool tpprof_autograd_keeps_alone(const tpprof_autograd *g, const tpprof_tensors *t, const tpprof_storage *s) {
    return keeps_alone_at(g, t, s, 0);
}

const tpprof_gsaved *tpprof_autograd_saved_as(const tpprof_autograd *g, int64_t storage_id, int64_t tensor_id) {
    const tpprof_gsaved *h[64];
    size_t n = tpprof_autograd_holders(g, storage_id, h, 64);
    for (size_t i = 0; i < n && i < 64; i++)
        if (h[i]->tensor_id == tensor_id)
            return h[i];
    return NULL;
}

