// stacks.h: the stack trie and its symbols, loaded once (stacks.c), and a Python program's frames (pyframes.c).
// Private to viewer/; viewer.h includes every header of the viewer.
#ifndef TPPROF_VIEWER_STACKS_H
#define TPPROF_VIEWER_STACKS_H

#include "util.h"
#include "db.h"
#include "symbolize.h"

// ---------------------------------------------------------------------------
// stacks.c

// A printable frame; strings borrowed from the stacks object.
typedef struct tpprof_frame {
    int64_t ip;
    const char *function; // NULL: unknown (print the ip)
    const char *file;     // NULL: unknown
    int64_t line;         // 0: unknown
    const char *module;   // NULL: unknown
} tpprof_frame;

typedef struct tpprof_stacks tpprof_stacks;

// The index of id in ids[0..n) (sorted ascending, as the recorder numbers
// stack nodes and Python frames), or -1 (stacks.c).
ptrdiff_t tpprof_ids_index(const int64_t *ids, size_t n, int64_t id);

// The stack trie's nodes in id order, however the recording keeps them: as
// stack_chunks (the recorder's since schema 3) or stack_nodes rows (older
// and merged recordings). fn gets each node; a non-zero return stops the walk
// and is returned. -1 with a message when the recording cannot be read or
// a chunk is malformed.
typedef int (*tpprof_node_fn)(void *arg, int64_t id, int64_t parent, int64_t ip);
int tpprof_stack_nodes_each(tpprof_db *db, tpprof_node_fn fn, void *arg);

// Each site of the recording attached to sql as `schema` ("main", "src"):
// its ten values (stack_id, kind, then the sites columns alloc_count to
// peak_bytes, docs/schema.md; NULL reads as 0) and which were not NULL (bit
// c: value c; a chunk's sites have all ten), from its site_chunks (schema 4
// on), decoded here (the sites view's json_each and ten ->> a row cost
// SQLite several times this: a build's fold of 169 recordings took 1.7 s
// more through it), else from its sites table. 0, fn's non-zero return, or
// -1 with the error set (a damaged chunk: not a tpprof recording's; path
// names the file).
// (A row's values: v[10] for a site, v[7] for a live block.)
typedef int (*tpprof_row_fn)(void *arg, const int64_t *v, unsigned have);
typedef tpprof_row_fn tpprof_site_fn;
int tpprof_sites_each(sqlite3 *sql, const char *schema, const char *path, tpprof_site_fn fn, void *arg);

// Each block alive at the end (live_blocks, docs/schema.md) of the recording
// attached to sql as `schema`: its seven
// values (address, size, kind, stack_id, tid, time_ns, reachability; NULL
// reads as 0) and which were not NULL (bit c: value c), from its
// live_chunks (schema 6 on), decoded here, else from its live_blocks table
// (older and merged recordings). 0, fn's non-zero return, or -1 with the
// error set (a damaged chunk: not a tpprof recording's).
typedef tpprof_row_fn tpprof_live_fn;
int tpprof_live_each(sqlite3 *sql, const char *schema, const char *path, tpprof_live_fn fn, void *arg);

// The number of stack nodes and their largest id (either may be NULL),
// without decoding chunks; -1 with a message on error.
int tpprof_stack_nodes_count(tpprof_db *db, int64_t *count, int64_t *max_id);

// Load the whole stack trie and the symbols into memory (one query each).
// Takes ownership of the contents of `symbols` (left empty).
tpprof_stacks *tpprof_stacks_load(tpprof_db *db, tpprof_symtab *symbols);
// Every node's ip, in node order (borrowed; repeats in it).
const int64_t *tpprof_stacks_ips(const tpprof_stacks *st, size_t *n);
// Replaces the symbols, taking the contents of `symbols` (left empty).
void tpprof_stacks_take_symbols(tpprof_stacks *st, tpprof_symtab *symbols);
void tpprof_stacks_free(tpprof_stacks *st);

// The frames of stack `stack_id`, innermost first, inlined frames expanded,
// frames in libtpprof.so dropped. Returns the number of frames written (at
// most cap); *total gets the full count when not NULL.
size_t tpprof_stacks_frames(const tpprof_stacks *st, int64_t stack_id,
                            tpprof_frame *out, size_t cap, size_t *total);

// "function (file:line)", "function (module)" or "0x1234 (module)" for one
// frame, into buf (truncated to size). Returns buf.
char *tpprof_frame_format(const tpprof_frame *f, char *buf, size_t size);

// The first frame of a stack formatted as above, or "(no stack)".
char *tpprof_stacks_describe(const tpprof_stacks *st, int64_t stack_id, char *buf, size_t size);

// Frames of the tensor runtime itself (a libtensorplay* module, or a tp_*
// function): tensor, reference and allocator events are recorded inside it.
bool tpprof_frame_is_runtime(const tpprof_frame *f);
// Whether f is a frame of a language's standard library by its (demangled)
// name: Rust's alloc::, core:: and std:: (statically linked into the
// program, so they are in its own module), C++'s std:: and __gnu_cxx::
// templates, operator new.
bool tpprof_frame_is_stdlib(const tpprof_frame *f);
// The first of frames[from..n) that is not a standard library's (n if none).
size_t tpprof_frames_past_stdlib(const tpprof_frame *frames, size_t n, size_t from);
// The index of the first frame outside the runtime (0 when all are inside).
size_t tpprof_stacks_first_caller(const tpprof_frame *frames, size_t n);
// tpprof_stacks_describe of that first frame outside the runtime.
char *tpprof_stacks_describe_caller(const tpprof_stacks *st, int64_t stack_id, char *buf,
                                    size_t size);

// ---------------------------------------------------------------------------
// pyframes.c: a Python program's frames (py_frames)

// Whether ip is a Python pseudo frame (the recorder's tag in its top bits).
bool tpprof_ip_is_python(int64_t ip);
// Whether f is a resolved Python frame ("hoard (leaky.py:12)").
bool tpprof_frame_is_python(const tpprof_frame *f);
// Whether a Python frame is a library's: frozen or <string> code, the
// standard library, an installed package (by its file's path).
bool tpprof_frame_is_python_library(const tpprof_frame *f);
// The first Python frame of frames[from..n) that is the program's own (not
// a library's), else the first Python frame; n if none.
size_t tpprof_frames_first_python(const tpprof_frame *frames, size_t n, size_t from);

typedef struct tpprof_py_table tpprof_py_table;
// Loads py_frames (*out NULL when the recording has none). 0 or -1 + error.
// The caller frees *out with tpprof_py_table_free.
int tpprof_py_table_load(tpprof_db *db, tpprof_py_table **out);
void tpprof_py_table_free(tpprof_py_table *t);
// The row of ip: strings borrowed from t. False if none.
bool tpprof_py_table_find(const tpprof_py_table *t, int64_t ip, const char **function, const char **file,
                          int64_t *line);

#endif
