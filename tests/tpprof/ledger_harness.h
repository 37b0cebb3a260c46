// ledger_harness.h: the set-up test_storages.c and test_graph_ledger.c share
// (ledger_harness.c): the writer's tensor ledger fed through one ring, and
// observe.c fed runtime events, into an in-memory SQLite database.
#ifndef TPPROF_TESTS_LEDGER_HARNESS_H
#define TPPROF_TESTS_LEDGER_HARNESS_H

#include <sqlite3.h>
#include <stdint.h>

#include "tensorplay/observer.h"

// Points the writer's thread ids at threads 0-3 (tids 1000-1003) and opens
// the database with the recorder's tensor, graph and meta tables.
void ledger_harness_open(void);

// What the stubs and the ring saw: tpprof_writer_keep_event calls (full mode
// only), captures (unwinds) and records applied, and their words.
extern int kept_events;
extern int captures, records;
extern uint64_t record_words;
extern uint32_t site; // the stack id the next capture returns

// Hands what observe.c put in the ring straight to the writer's apply.
void obs_drain(void);

// The database, and the first column of the first row of `sql`: -1 for no
// row or NULL, -2 (and a message) for SQL that does not prepare.
extern sqlite3 *db;
long long q(const char *sql);

// observe.c's provider, as the runtime finds it, and the observer it gave
// (set by the test).
const tp_observer *tp_observer_provide(uint32_t runtime_abi);
extern const tp_observer *observer;

// Runtime events, as libtensorplay sends them: obs_send sends `ev` with the
// next capture returning `stack`, then drains the ring.
void obs_send(tp_obs_event *ev, uint32_t stack);
void ev_created(uint64_t id, uint64_t nbytes, uint32_t stack);
void ev_refcount(uint64_t id, uint32_t op, uint32_t strong, uint32_t weak, uint32_t stack);
void ev_storage(int kind, uint64_t id);
void ev_tensor(int kind, uint64_t id, uint64_t storage, uint32_t stack);

// The hooks' record of an allocation this thread just made (the struct an
// event's `object` names), as hooks.c keeps it.
void remember_alloc(uint64_t addr, uint32_t sid);

#endif
