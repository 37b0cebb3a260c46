// graph.c: the autograd graph's tables (docs/schema-tensors.md): the nodes
// the graph ledger kept (writer/graph_state.h: alive at the end, or all of
// them in full mode), their edges and saved tensors, and the run's node
// counts in meta. Written at the final flush, inside its transaction, after
// the tensor tables. Reads the ledger through writer/state.h; calls nothing
// in writer/.
#define _GNU_SOURCE
#include "base/sqlite_api.h"
#include <stdio.h>

#include "store/rows.h"
#include "store/store.h"
#include "writer/state.h"

static bool put_node(sqlite3_stmt *nodes, sqlite3_stmt *edges, sqlite3_stmt *saved, const struct graph_node *x) {
    const struct tpprof_graph *g = &tpprof_graph;
    sqlite3_bind_int64(nodes, 1, (sqlite3_int64)x->id);
    sqlite3_bind_text(nodes, 2, x->name < g->nnames ? g->names[x->name] : "?", -1, SQLITE_STATIC);
    sqlite3_bind_int64(nodes, 3, (sqlite3_int64)x->created_ns);
    sqlite3_bind_int64(nodes, 4, x->stack);
    tpprof_store_bind_time(nodes, 5, x->flags & G_FREED, x->freed_ns);
    sqlite3_bind_int(nodes, 6, (x->flags & G_RAN) != 0);
    sqlite3_bind_int(nodes, 7, (x->flags & G_RETAINED) != 0);
    tpprof_store_bind_time(nodes, 8, x->flags & G_RAN, x->ran_ns);
    if (!tpprof_store_step(nodes)) return false;
    for (uint32_t i = 0; i < x->nedges; i++) {
        uint64_t e = tpprof_graph_edge(x, i);
        sqlite3_bind_int64(edges, 1, (sqlite3_int64)x->id);
        sqlite3_bind_int64(edges, 2, (sqlite3_int64)(e & ~GRAPH_LEAF));
        sqlite3_bind_int(edges, 3, (e & GRAPH_LEAF) != 0);
        if (!tpprof_store_step(edges)) return false;
    }
    for (uint32_t i = 0; i < GRAPH_SAVED; i++) {
        const struct graph_saved *s = &x->saved[i];
        if (!s->used) continue;
        sqlite3_bind_int64(saved, 1, (sqlite3_int64)x->id);
        sqlite3_bind_int64(saved, 2, i);
        sqlite3_bind_int64(saved, 3, (sqlite3_int64)s->storage);
        sqlite3_bind_int64(saved, 4, (sqlite3_int64)s->tensor);
        sqlite3_bind_int64(saved, 5, (sqlite3_int64)s->saved_ns);
        tpprof_store_bind_time(saved, 6, s->released, s->released_ns);
        if (!tpprof_store_step(saved)) return false;
    }
    return true;
}

static bool put_meta_count(sqlite3 *db, const char *key, uint64_t v) {
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, "INSERT OR REPLACE INTO meta(key, value) VALUES(?, ?)", -1, &st, NULL) != SQLITE_OK)
        return false;
    char text[32];
    snprintf(text, sizeof text, "%llu", (unsigned long long)v);
    sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, text, -1, SQLITE_TRANSIENT);
    bool ok = tpprof_store_step(st);
    sqlite3_finalize(st);
    return ok;
}

bool tpprof_store_graph_put(sqlite3 *db) {
    const struct tpprof_graph *g = &tpprof_graph;
    sqlite3_stmt *nodes = NULL, *edges = NULL, *saved = NULL;
    bool ok = sqlite3_prepare_v2(db, "INSERT OR REPLACE INTO graph_nodes(id, name, created_ns, created_stack, freed_ns,"
                                     " backward_ran, retained, ran_ns) VALUES(?,?,?,?,?,?,?,?)", -1, &nodes,
                                 NULL) == SQLITE_OK &&
              sqlite3_prepare_v2(db, "INSERT INTO graph_edges(node_id, next_id, leaf) VALUES(?,?,?)", -1, &edges, NULL) ==
                  SQLITE_OK &&
              sqlite3_prepare_v2(db, "INSERT OR REPLACE INTO saved_tensors(node_id, slot, storage_id, tensor_id,"
                                     " saved_ns, released_ns) VALUES(?,?,?,?,?,?)", -1, &saved, NULL) == SQLITE_OK;
    for (uint32_t i = 0; ok && i < g->n; i++)
        if (g->nodes[i].used) ok = put_node(nodes, edges, saved, &g->nodes[i]);
    sqlite3_finalize(nodes);
    sqlite3_finalize(edges);
    sqlite3_finalize(saved);
    sqlite3_stmt *grads = NULL;
    ok = ok && sqlite3_prepare_v2(db, "INSERT OR REPLACE INTO tensor_grads(tensor_id, grad_id, grad_storage_id, set_ns)"
                                      " VALUES(?,?,?,?)", -1, &grads, NULL) == SQLITE_OK;
    for (uint32_t i = 0; ok && i < g->ngrads; i++) {
        const struct graph_grad *x = &g->grads[i];
        if (!x->used) continue;
        sqlite3_bind_int64(grads, 1, (sqlite3_int64)x->tensor);
        sqlite3_bind_int64(grads, 2, (sqlite3_int64)x->grad);
        sqlite3_bind_int64(grads, 3, (sqlite3_int64)x->storage);
        sqlite3_bind_int64(grads, 4, (sqlite3_int64)x->set_ns);
        ok = tpprof_store_step(grads);
    }
    sqlite3_finalize(grads);
    return ok && put_meta_count(db, "graph_nodes_created", g->created) &&
           put_meta_count(db, "graph_nodes_freed", g->freed);
}
