// symbolize.h: ip -> (function, file, line, module) frames with libdw (symbolize.c).
// Private to viewer/; viewer.h includes every header of the viewer.
#ifndef TPPROF_VIEWER_SYMBOLIZE_H
#define TPPROF_VIEWER_SYMBOLIZE_H

#include "util.h"
#include "db.h"

// ---------------------------------------------------------------------------
// symbolize.c

// One row of the `symbols` table. Strings owned by the symtab.
typedef struct tpprof_symbol {
    int64_t ip;
    int32_t idx;         // 0 = innermost (inlined) frame at this ip
    int64_t line;        // 0 when unknown
    char *function;      // NULL when unknown
    char *file;          // NULL when unknown
    char *module;        // NULL when the ip lies in no recorded module
} tpprof_symbol;

typedef struct tpprof_symtab {
    tpprof_symbol *rows; // sorted by (ip, idx) once loaded or symbolized
    size_t n, cap;
} tpprof_symtab;

// Symbolize every distinct ip of stack_nodes using the modules table: libdw
// offline reporting of each module's file at its base, build-ids checked,
// debuginfod never asked. Appends to `out` (sorted on return). Modules whose
// file is missing or whose build-id differs give rows with only `module` set.
// Returns 0, or -1 + error when the database cannot be read.
int tpprof_symbolize(tpprof_db *db, tpprof_symtab *out);
// The same for the stack nodes' ips already in memory (ips[0..n), repeats
// allowed): a load that has read the nodes does not read them twice.
int tpprof_symbolize_ips(tpprof_db *db, const int64_t *ips, size_t n, tpprof_symtab *out);

// Symbolize a merged recording (tpprof merge): every distinct ip of its
// stack_nodes that has no `symbols` row yet, as tpprof_symbolize would have
// named it in its own process's recording (ip >> 48 is the process, whose
// rows of `modules` place ip & 0xffffffffffff), each (module file, offset)
// looked up once for all the processes. Appends to `out` (sorted on
// return); *lookups (when not NULL): how many addresses were looked up.
// Returns 0, or -1 + error when the database cannot be read.
int tpprof_symbolize_merged(tpprof_db *db, tpprof_symtab *out, size_t *lookups);

// Write the rows into `symbols` and set meta.symbolized = 1, in one
// transaction. db must be writable. Returns 0 or -1 + error.
int tpprof_symtab_save(tpprof_db *db, const tpprof_symtab *tab);

// Load the `symbols` table (sorted). Returns 0 or -1 + error.
int tpprof_symtab_load(tpprof_db *db, tpprof_symtab *out);

void tpprof_symtab_free(tpprof_symtab *tab);

// The index of ip's first row in a sorted table (its innermost frame), or
// where ip's rows would be: tab->n or a row of a higher ip when it has none.
size_t tpprof_symtab_first(const tpprof_symtab *tab, int64_t ip);

// Symbolize the database at path in place if `symbols` is empty. Used by
// `run`. Returns 0 or -1 + error.
int tpprof_symbolize_file(const char *path);

// Close the files symbolizing opened: they stay open between calls, so that
// the many recordings of one program tree read each library once.
void tpprof_symbolize_release(void);

#endif
