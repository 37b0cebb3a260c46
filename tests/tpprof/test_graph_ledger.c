// test_graph_ledger.c: the writer's autograd graph (src/tpprof/writer/graph.c;
// its tables written by store/graph.c, through store/tensors.c) fed runtime
// events through observe.c, as the runtime sends them (observer ABI 3), then
// written into an in-memory SQLite database: the nodes alive, their edges
// and leaf inputs, the tensors they save, and each tensor's grad.
// The set-up is ledger_harness.c's, shared with test_storages.c.
// No preload: runs under ASan+UBSan too.
#include <sqlite3.h>
#include <stdio.h>

#include "tensorplay/observer.h"
#include "store/store.h"
#include "ledger_harness.h"
#include "../check.h"

// ---------------------------------------------------------------------------
// The autograd graph (observer ABI 3): nodes, edges, saved tensors.

static const uint64_t *leaves_next; // the leaf inputs the next ev_node sends
static uint32_t nleaves_next;

static void ev_node(int kind, uint64_t id, const char *name, const uint64_t *next, uint32_t nnext, uint32_t flags,
                    uint64_t object) {
    tp_obs_event ev = {.kind = (uint32_t)kind, .object = object,
                       .u.node = {.node_id = id, .name = name, .next_ids = next, .n_next = nnext, .flags = flags,
                                  .leaf_ids = leaves_next, .n_leaves = nleaves_next}};
    leaves_next = NULL;
    nleaves_next = 0;
    obs_send(&ev, 88);
}

static void ev_saved(int kind, uint64_t node, uint32_t slot, uint64_t tensor, uint64_t storage) {
    tp_obs_event ev = {.kind = (uint32_t)kind,
                       .u.saved = {.node_id = node, .tensor_id = tensor, .storage_id = storage, .slot = slot}};
    obs_send(&ev, 89);
}

static void test_graph_records_keep_live_nodes_their_edges_and_saved_tensors(void) {
    int before = captures;
    // Node 500 (its struct allocated at stack 81) saves two tensors; node
    // 501 on it, with a name longer than 23 characters, runs with
    // retain_graph; 500 lets its second saved tensor go; 502 is made and
    // freed (aggregate mode: no row).
    remember_alloc(0x50000, 81);
    static const uint64_t leaves[2] = {700, 701}; // two leaf inputs (tensor ids)
    leaves_next = leaves;
    nleaves_next = 2;
    ev_node(TP_OBS_NODE_CREATED, 500, "MmBackward0", NULL, 0, 0, 0x50000);
    CHECK_MSG(captures == before, "a node's stack is its struct's allocation's: no unwind");
    ev_saved(TP_OBS_TENSOR_SAVED, 500, 0, 600, 20);
    ev_saved(TP_OBS_TENSOR_SAVED, 500, 1, 601, 21);
    uint64_t next[2] = {500, 500};
    remember_alloc(0x50100, 82);
    ev_node(TP_OBS_NODE_CREATED, 501, "NativeLayerNormBackward0x", next, 2, 0, 0x50100);
    ev_node(TP_OBS_NODE_RAN, 501, "NativeLayerNormBackward0x", NULL, 0, TP_OBS_NODE_RETAINED, 0);
    ev_saved(TP_OBS_SAVED_RELEASED, 500, 1, 601, 21);
    remember_alloc(0x50200, 83);
    ev_node(TP_OBS_NODE_CREATED, 502, "AddBackward0", next, 1, 0, 0x50200);
    ev_saved(TP_OBS_TENSOR_SAVED, 502, 0, 602, 22);
    ev_saved(TP_OBS_SAVED_RELEASED, 502, 0, 602, 22);
    ev_node(TP_OBS_NODE_FREED, 502, "AddBackward0", NULL, 0, 0, 0);
    // Events for a node never seen change nothing.
    ev_saved(TP_OBS_TENSOR_SAVED, 999, 0, 603, 23);
    ev_node(TP_OBS_NODE_RAN, 999, "X", NULL, 0, 0, 0);
    CHECK_MSG(captures == before, "graph events other than a node's creation take no stack (%d)", captures - before);
    CHECK_MSG(tpprof_store_tensors_put(db, true), "written: %s", sqlite3_errmsg(db));
    CHECK_MSG(q("SELECT count(*) FROM graph_nodes") == 2, "nodes alive: 500 and 501 (%lld)",
              q("SELECT count(*) FROM graph_nodes"));
    CHECK_MSG(q("SELECT created_stack FROM graph_nodes WHERE id = 500 AND name = 'MmBackward0' AND backward_ran = 0"
                " AND retained = 0 AND freed_ns IS NULL AND ran_ns IS NULL") == 81, "node 500, made at stack 81");
    CHECK_MSG(q("SELECT created_stack FROM graph_nodes WHERE id = 501 AND name = 'NativeLayerNormBackward0x'"
                " AND backward_ran = 1 AND retained = 1 AND ran_ns IS NOT NULL") == 82,
              "node 501: its whole name, ran with retain_graph, made at stack 82");
    CHECK_MSG(q("SELECT count(*) FROM graph_edges WHERE node_id = 501 AND next_id = 500 AND leaf = 0") == 2,
              "two edges 501 -> 500");
    CHECK_MSG(q("SELECT count(*) FROM graph_edges WHERE node_id = 500 AND leaf = 1 AND next_id IN (700, 701)") == 2,
              "500's two leaf inputs");
    CHECK_MSG(q("SELECT count(*) FROM graph_edges") == 4, "no other edge");
    CHECK_MSG(q("SELECT storage_id FROM saved_tensors WHERE node_id = 500 AND slot = 0 AND tensor_id = 600"
                " AND released_ns IS NULL") == 20, "500 keeps tensor 600 on storage 20");
    CHECK_MSG(q("SELECT storage_id FROM saved_tensors WHERE node_id = 500 AND slot = 1 AND tensor_id = 601"
                " AND released_ns IS NOT NULL") == 21, "500 let tensor 601 go");
    CHECK_MSG(q("SELECT count(*) FROM saved_tensors") == 2, "none of the freed node's or the unknown node's");
    CHECK_MSG(q("SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'graph_nodes_created'") == 3 &&
                  q("SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'graph_nodes_freed'") == 1,
              "3 nodes made, 1 freed");
}

// A node of more inputs than one record holds (a cat of 40 tensors): every
// edge is kept, in the order sent, node edges and leaf edges each.
static void test_graph_keeps_every_edge_of_a_wide_node(void) {
    static uint64_t next[40], leaves[30];
    for (int i = 0; i < 40; i++) next[i] = 1000 + (uint64_t)i;
    for (int i = 0; i < 30; i++) leaves[i] = 2000 + (uint64_t)i;
    leaves_next = leaves;
    nleaves_next = 30;
    remember_alloc(0x51000, 84);
    ev_node(TP_OBS_NODE_CREATED, 510, "CatBackward0", next, 40, 0, 0x51000);
    CHECK_MSG(tpprof_store_tensors_put(db, true), "written: %s", sqlite3_errmsg(db));
    CHECK_MSG(q("SELECT count(*) FROM graph_edges WHERE node_id = 510 AND leaf = 0") == 40 &&
                  q("SELECT count(DISTINCT next_id) FROM graph_edges WHERE node_id = 510 AND leaf = 0 AND "
                    "next_id BETWEEN 1000 AND 1039") == 40,
              "40 node edges (%lld)", q("SELECT count(*) FROM graph_edges WHERE node_id = 510 AND leaf = 0"));
    CHECK_MSG(q("SELECT count(DISTINCT next_id) FROM graph_edges WHERE node_id = 510 AND leaf = 1 AND "
                "next_id BETWEEN 2000 AND 2029") == 30 &&
                  q("SELECT count(*) FROM graph_edges WHERE node_id = 510") == 70,
              "30 leaf edges, nothing else (%lld)", q("SELECT count(*) FROM graph_edges WHERE node_id = 510"));
    // in input order: the rows were inserted as sent
    CHECK_MSG(q("SELECT count(*) FROM (SELECT next_id, lag(next_id) OVER (ORDER BY rowid) p FROM graph_edges "
                "WHERE node_id = 510 AND leaf = 0) WHERE p IS NOT NULL AND p >= next_id") == 0,
              "node edges in input order");
    ev_node(TP_OBS_NODE_FREED, 510, "CatBackward0", NULL, 0, 0, 0);
}

static void ev_grad(uint64_t tensor, uint64_t grad, uint64_t storage) {
    tp_obs_event ev = {.kind = TP_OBS_GRAD_SET,
                       .u.grad = {.tensor_id = tensor, .grad_id = grad, .grad_storage_id = storage}};
    obs_send(&ev, 90);
}

// GRAD_SET: tensor_grads holds each tensor's grad now, while the tensor lives.
static void test_grad_links_follow_their_tensor(void) {
    ev_grad(800, 810, 40); // kept
    ev_grad(801, 811, 41); // replaced
    ev_grad(801, 812, 42);
    ev_grad(802, 813, 43); // cleared (set_to_none)
    ev_grad(802, 0, 0);
    ev_grad(803, 814, 44); // its tensor freed
    ev_tensor(TP_OBS_TENSOR_FREED, 803, 45, 91); // tp_tensor_release's order: the free, then its release
    ev_refcount(45, TP_OBS_REFOP_RELEASE, 0, 1, 92);
    CHECK_MSG(tpprof_store_tensors_put(db, true), "written: %s", sqlite3_errmsg(db));
    CHECK_MSG(q("SELECT count(*) FROM tensor_grads") == 2, "800 and 801 (%lld)", q("SELECT count(*) FROM tensor_grads"));
    CHECK_MSG(q("SELECT grad_storage_id FROM tensor_grads WHERE tensor_id = 800 AND grad_id = 810 AND "
                "set_ns IS NOT NULL") == 40,
              "800 holds 810 on storage 40");
    CHECK_MSG(q("SELECT grad_storage_id FROM tensor_grads WHERE tensor_id = 801 AND grad_id = 812") == 42,
              "801 holds its newer grad");
    ev_grad(800, 0, 0);
    ev_grad(801, 0, 0);
    CHECK_MSG(tpprof_store_tensors_put(db, true) && q("SELECT count(*) FROM tensor_grads") == 0, "all cleared");
}

// A runtime of observer ABI 2 gets an observer that says version 2 (it

// ---------------------------------------------------------------------------

int main(void) {
    ledger_harness_open();
    observer = tp_observer_provide(TP_OBSERVER_ABI_VERSION);
    CHECK_MSG(observer != NULL, "the observer attaches");
    if (!observer) return CHECK_DONE();
    test_graph_records_keep_live_nodes_their_edges_and_saved_tensors();
    test_graph_keeps_every_edge_of_a_wide_node();
    test_grad_links_follow_their_tensor();
    sqlite3_close(db);
    return CHECK_DONE();
}
