// merge_trie.h: the stack tries of several recordings folded into one, so
// that a stack the processes share (a build's cc1 processes) is stored once
// in a merged recording (merge_trie.c; used by cmd_merge.c only).
//
//     tpprof_trie *t = tpprof_trie_new();
//     tpprof_trie_input in;
//     for each input k (1, 2, ...):
//         tpprof_trie_add(t, db_k, k, &in);   // in.nodes: rows to write
//                                             // in.map: old id -> merged id
//     tpprof_trie_input_free(&in);
//     tpprof_trie_free(t);
//
// Frames are compared as (module identity, offset in it): a module is the
// same in two processes when its path and build id are. A Python frame (bit
// 47 of the ip) is its py_frames function, file and line. Without a build
// id, outside every module or without a py_frames row, a frame is its
// input's own. A merged node's ip is that of the first input that had
// it, tagged with that input's number in the bits above 48, so the symbols
// of that input name it.
#ifndef TPPROF_VIEWER_MERGE_TRIE_H
#define TPPROF_VIEWER_MERGE_TRIE_H

#include "db.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct tpprof_trie tpprof_trie;

// A merged node new to the trie: write it as a stack_nodes row.
typedef struct tpprof_trie_node {
    int64_t id, parent;
    int64_t ip;     // tagged: (input << 48) | ip
    uint64_t raw;   // the input's own ip (its symbols' key)
} tpprof_trie_node;

// What adding one input gave: the nodes it added (owned, reused by the next
// tpprof_trie_add) and, for each of its own node ids, the merged one.
typedef struct tpprof_trie_input {
    tpprof_trie_node *nodes;
    size_t nnodes, cap_nodes;
    int64_t *old_ids, *new_ids; // n pairs, old_ids ascending
    size_t n, cap;
} tpprof_trie_input;

// A new empty trie (owned by the caller), or NULL with a message.
tpprof_trie *tpprof_trie_new(void);
void tpprof_trie_free(tpprof_trie *t);

// Fold the stack trie of input number k (1..65535), read from db (its
// modules and stack nodes, either format), into t. 0, or -1 with a message
// (unreadable or damaged input, out of memory); out is filled on success.
int tpprof_trie_add(tpprof_trie *t, tpprof_db *db, int64_t k, tpprof_trie_input *out);
void tpprof_trie_input_free(tpprof_trie_input *in);

#endif
