// harness.h: what the preload scenarios share (tests/tpprof/preload/*.c).
//
// A scenario runs a test program (tests/tpprof/progs/) under libtpprof.so
// and checks the database it leaves, with the sqlite3 C API. Each scenario
// file defines preload_scenario(); harness.c's main parses
//     tpprof_preload_<scenario> MODE LIBTPPROF PROGRAM [EXTRA]
// makes a fresh temporary directory, calls it, and exits 0, 1 (a check
// failed; the files are kept) or 77 (skipped: meson's skip). The program
// runs in that directory with LD_PRELOAD and TPPROF_OUTPUT in its
// environment only; the scenario itself is never preloaded. Function
// addresses are checked against the ELF symbol tables of the program and
// plugin, through the `modules` rows tpprof wrote.
#ifndef TPPROF_TESTS_PRELOAD_HARNESS_H
#define TPPROF_TESTS_PRELOAD_HARNESS_H

#define _GNU_SOURCE
#include <elf.h>
#include <fcntl.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../check.h"

// The scenario's entry point (one per scenario file): runs the checks of
// `mode` on prog (extra: argv[4] or NULL) and returns its check failures,
// or -1 for a mode it does not know.
int preload_scenario(const char *mode, char *prog, char *extra);

// ---------------------------------------------------------------------------
// State: the preload, the temporary directory, the open database.

extern const char *lib;
extern char tmpdir[];
extern sqlite3 *db;
// > 0: run() SIGKILLs the program after this long...
extern int kill_after_ms;
// ...and once this query on its database gives a count > 0.
extern const char *kill_when_sql;
// Set by a scenario that could not check what it is for (exit status 77).
extern bool skipped;

struct result {
    int status;       // exit code, or 128 + signal
    char out[8192], err[8192];
};

// ---------------------------------------------------------------------------
// Running a program and querying its database.

// Runs argv; with `out_db` under the preload writing there. `env` is an
// optional extra "NAME=value".
void slurp(const char *path, char *buf, size_t cap);
struct result run(const char *out_db, char *const argv[], const char *env);
bool open_db(const char *path);
// First column of the first row as an integer; INT64_MIN if no row.
int64_t qi(const char *fmt, ...);
void qs(char *out, size_t cap, const char *fmt, ...);
int strcmp_ptr(const char **a, const char **b);
// Whether the open recording's meta.site_totals and site_totals_reserved
// say what SUM() over its sites' rows says (docs/schema.md); a failed
// CHECK says which differs.
bool site_totals_match(void);
int stack_ips(int64_t id, int64_t *ips, int max);
// [value, value+size) of symbol `name` in the ELF file at `path`.
bool elf_symbol(const char *path, const char *name, uint64_t *lo, uint64_t *hi);
// Whether return address `ip` lies in function `fn` of the module that
// contains it (per the database's module map). `unloaded` gets that
// module's unloaded_ns (0 when still loaded).
bool ip_in(int64_t ip, const char *fn, int64_t *unloaded);
// Number of live blocks with the given reachability (1 lost, 2 reachable),
// size and kind (-1: any) whose frame `frame` is inside function `fn`.
int count_blocks(int reach, int64_t size, int kind, const char *fn, int frame);
void db_path(char *out, size_t cap, const char *name);
void expect_complete(const char *what);
// Opens a child process's recording, tmpdir/STEM.PID.db, and checks it is
// complete (expect_complete(what)); false (a failed check) if it is not there.
bool open_child_db(const char *stem, int pid, const char *what);
// Runs prog under the preload into NAME.db and opens it; false if not there.
bool record(const char *name, char *const argv[], const char *env, struct result *r);
// `n` blocks of 16..256 B handed between threads (the sites of a thousand
// allocations or more, which no other site of the program reaches): every
// one counted, every one's free counted at its site, none left live.
void check_handed(long long n);
// Every site as "module+offset/.../kind=K count=N", sorted: comparable across
// runs (addresses differ with ASLR).
int site_lines(char ***out);
void test_unwind_same(char *prog);
// Runs argv natively into *native, then under the preload into *r,
// recording into NAME (whose path goes to out).
void run_both(const char *name, char *const argv[], struct result *native, struct result *r, char *out, size_t cap);
// record, and the recorder attached to the runtime.
bool record_tensors(const char *name, char *const argv[], const char *env, struct result *r);
// Whether some frame of stack `id` lies in function fn.
bool stack_has(int64_t id, const char *fn);
// Stack ids of storage_refs rows matching `where`, into ids (at most max).
int ref_stacks(const char *where, int64_t *ids, int max);

#endif
