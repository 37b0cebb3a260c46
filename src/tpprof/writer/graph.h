// graph.h: the writer's functions over the autograd graph ledger
// (writer/graph.c; the ledger itself, data only, is in graph_state.h, which
// the store reads through state.h). Called with the writer's lock held.
#ifndef TPPROF_WRITER_GRAPH_H
#define TPPROF_WRITER_GRAPH_H

#include "writer/writer.h"
#include "base/base.h"
#include "writer/graph_state.h"

// One graph record (kind TP_OBS_NODE_* or TP_OBS_TENSOR_SAVED /
// TP_OBS_SAVED_RELEASED), r as the ring holds it; stack: the stack_nodes id
// of its stack (NODE_CREATED), time its time.
TPPROF_HIDDEN void tpprof_graph_apply(int kind, const uint64_t *r, uint64_t time, uint32_t stack);

// A tensor was freed: its grad link goes (aggregate mode; full mode keeps
// it, the viewer checks the tensor's freed_ns).
TPPROF_HIDDEN void tpprof_graph_tensor_freed(uint64_t tensor_id);

#endif
