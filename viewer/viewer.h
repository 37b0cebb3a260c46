// viewer.h: the pieces the `tpprof` commands share, private to viewer/.
//
// The viewer knows a recording only through docs/schema.md: it never includes
// src/ headers. Layers, bottom up:
//   util.c       sizes, numbers, the thread-local error message
//   db.c         opening and validating a database (read-only or read-write)
//   symbolize.c  ip -> (function, file, line, module) frames with libdw
//   stacks.c     the stack trie and the symbols, loaded into memory once
//   profile.c    summary, leaks, sites: everything report and check show
//   gaps.c       what a recording is missing, in the words every command uses
//   timeline.c   the sampled timeline, cut down to a few points
//   diff.c       two recordings matched stack by stack
//   json.c       a small streaming JSON writer
//   device.c     device (CUDA) memory: per-device figures, leaks, peaks
//                (report_device.c prints them)
//   tensors.c    storages, tensors, references and DataPtr lifetimes
//                (docs/schema-tensors.md), and what they mean: unmatched
//                retains, weak holders, small views pinning big storages
//   replay.c     allocator_events replayed into block maps (fragmentation)
//   run_preflight.c  what `tpprof run` refuses before starting the program
//   verdict.c    the summary's first lines: lost or not, what is reachable
//   suppressions.c  LeakSanitizer suppression files applied to a profile
//   gates.c      check's gates in one table (check and run parse it)
//   inputs.c     several recordings on a command line, globs expanded
//   html*.c      report --format html: the page (html.c), its data
//                (html_data.c: timeline, live sets) and flame tree
//                (html_flame.c); its script and style are html/ files
//   perfetto.c   export --format perfetto: Chrome trace-event JSON
//   cmd_*.c      one file per command; main.c dispatches
//
// Errors: functions that can fail return NULL or -1 and leave one line in
// tpprof_error() (no trailing newline). Commands print it and exit 2.
#ifndef TPPROF_VIEWER_H
#define TPPROF_VIEWER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct sqlite3 sqlite3;

// The newest schema this viewer reads (docs/schema.md).
#define TPPROF_SCHEMA_VERSION 2

// Exit statuses of report/check: 0 ok, 1 a gate failed, 2 usage or input error.
enum {
    TPPROF_EXIT_OK = 0,
    TPPROF_EXIT_FAIL = 1,
    TPPROF_EXIT_USAGE = 2,
};

// ---------------------------------------------------------------------------
// util.c

// Set the thread-local error message (printf-style). Returns -1 for `return
// tpprof_error_set(...)` convenience.
int tpprof_error_set(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
// The last message; borrowed, valid until the next tpprof_error_set on this thread.
const char *tpprof_error(void);

// Parse a byte size: digits with an optional suffix k, M, G, T (powers of
// 1024, any case, optional trailing "B"/"iB"). Returns 0, or -1 with an error
// naming `what` (e.g. "--max-lost-bytes").
int tpprof_parse_size(const char *what, const char *s, uint64_t *out);
// Parse a non-negative decimal integer (no suffix).
int tpprof_parse_count(const char *what, const char *s, uint64_t *out);
// Parse a non-negative decimal number, possibly fractional, optional '%'.
int tpprof_parse_percent(const char *what, const char *s, double *out);

// Human-readable size: "512 B", "4.0 KiB", "1.25 MiB". Writes into buf, returns buf.
char *tpprof_format_size(uint64_t bytes, char buf[32]);
// Integer with thousands separators: "1,234,567". Writes into buf, returns buf.
char *tpprof_format_count(uint64_t n, char buf[32]);

// Basename of a path (borrowed pointer into path).
const char *tpprof_basename(const char *path);

// Command-line option with a value: if argv[*i] is `name` (value in the next
// argument, *i advanced) or `name=VALUE`, set *value and return 1; return 0
// if argv[*i] is another argument; -1 + error when the value is missing.
int tpprof_opt(int argc, char **argv, int *i, const char *name, const char **value);
// An argument that no option of `command` took: an unknown option (it starts
// with '-' and is not "-") or the database, which may be named once (*path
// is set). 0, or -1 + error.
int tpprof_opt_database(const char *command, const char *arg, const char **path);

// strdup that returns NULL for NULL.
char *tpprof_strdup(const char *s);

// Room for one more element in an array v of n elements of `size` bytes with
// *cap allocated: v while n < *cap, else v reallocated to twice *cap (16 at
// first) and *cap updated. Returns the array to use from now on, or NULL +
// error, v then untouched and still the caller's to free.
void *tpprof_grow(void *v, size_t n, size_t *cap, size_t size);

// ---------------------------------------------------------------------------
// db.c

typedef struct tpprof_db {
    sqlite3 *sql;
    char *path;           // owned copy of the path it was opened with
    bool writable;
    int64_t schema_version;
} tpprof_db;

// Is path a recording tpprof created but could not write (an empty file, or
// a SQLite database without a single table)? Then why, in words, into why.
bool tpprof_recording_unwritten(const char *path, char *why, size_t size);
// Has the file system holding path too little room left for a recording
// (under 1 MiB)? Then "the file system holding it is full (N free)" into why.
bool tpprof_fs_full(const char *path, char *why, size_t size);

// Open and validate a recording. `writable` false opens it with
// SQLITE_OPEN_READONLY. Refuses (NULL + error): a missing file, a file that is
// not SQLite, a truncated file, a SQLite database without tpprof's meta, a
// newer schema_version, missing tables. Returns a new handle the caller closes.
tpprof_db *tpprof_db_open(const char *path, bool writable);
void tpprof_db_close(tpprof_db *db);

// meta.value for key as a new string (caller frees), or NULL if absent.
char *tpprof_db_meta(tpprof_db *db, const char *key);
// meta.value for key parsed as an integer; returns false if absent or not a number.
bool tpprof_db_meta_i64(tpprof_db *db, const char *key, int64_t *out);

// Run a statement that returns one integer (e.g. a COUNT). -1 + error on failure.
int tpprof_db_scalar(tpprof_db *db, const char *sql, int64_t *out);

// Turn a failed SQLite call on db into an error message ("reading X: ...").
int tpprof_db_error(tpprof_db *db, const char *doing);

// Does the database have this table? Optional tables (docs/schema-tensors.md)
// read as empty when absent.
bool tpprof_db_has_table(tpprof_db *db, const char *name);

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

// Write the rows into `symbols` and set meta.symbolized = 1, in one
// transaction. db must be writable. Returns 0 or -1 + error.
int tpprof_symtab_save(tpprof_db *db, const tpprof_symtab *tab);

// Load the `symbols` table (sorted). Returns 0 or -1 + error.
int tpprof_symtab_load(tpprof_db *db, tpprof_symtab *out);

void tpprof_symtab_free(tpprof_symtab *tab);

// Symbolize the database at path in place if `symbols` is empty. Used by
// `run`. Returns 0 or -1 + error.
int tpprof_symbolize_file(const char *path);

// Close the files symbolizing opened: they stay open between calls, so that
// the many recordings of one program tree read each library once.
void tpprof_symbolize_release(void);

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

// Load the whole stack trie and the symbols into memory (one query each).
// Takes ownership of the contents of `symbols` (left empty).
tpprof_stacks *tpprof_stacks_load(tpprof_db *db, tpprof_symtab *symbols);
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

// ---------------------------------------------------------------------------
// profile.c

enum {
    TPPROF_REACH_UNSCANNED = 0,
    TPPROF_REACH_LOST = 1,
    TPPROF_REACH_REACHABLE = 2,
};
// live_blocks.reachability 3: a block the C library keeps to the end (not a leak).
#define TPPROF_REACH_STORED_LIBC 3
// live_blocks.reachability as stored (anything but 1 or 2: not scanned;
// load_leaks sets 3 apart before this).
static inline int tpprof_reach_of(int64_t stored) {
    return stored == 1 ? TPPROF_REACH_LOST : stored == 2 ? TPPROF_REACH_REACHABLE : TPPROF_REACH_UNSCANNED;
}

typedef struct tpprof_summary {
    uint64_t allocations, frees, total_bytes;
    uint64_t temporary_count, temporary_bytes;
    uint64_t peak_bytes;
    int64_t peak_time_ns;
    uint64_t leaked_bytes, leaked_count;
    uint64_t lost_bytes, lost_count;
    uint64_t reachable_bytes, reachable_count;
    uint64_t unscanned_bytes, unscanned_count;
    // Anonymous PROT_NONE mappings (kind mmap_reserved): address space, no
    // memory; left out of every other figure. Reserved in total, and still
    // reserved at exit.
    uint64_t reserved_total_bytes, reserved_count;
    uint64_t reserved_bytes, reserved_live_count;
    // Blocks the C library keeps to the end (reachability 3: its caches,
    // stdio buffers), freed only by its __libc_freeres; not leaks, so in no
    // leak figure.
    uint64_t libc_bytes, libc_count;
    bool complete;
    bool leak_scanned; // meta.leak_scan = 1: unscanned blocks came after the scan
    int64_t dropped_events; // meta.dropped_events: a dropped free fakes a leak
    int64_t stacks_full;    // meta.stacks_full: allocations recorded without a stack, the stack table full
    int64_t pid, duration_ns;
    // The recording ended without its final flush (killed, the OOM killer,
    // a crash) and has no live set: the leaks are what each site had live
    // at its last flush (sites: allocated minus freed), all "unscanned".
    bool live_from_sites;
    // Not complete, and the recorded process is still running (its pid is
    // alive and started when the recording did): a recording being written.
    bool still_running;
    // The signal the program died of, when the recorder's handler wrote the
    // recording on the way (meta.end_signal), or 0.
    int end_signal;
    // meta.threads_unrecorded: threads the recorder could not record (no
    // event buffer for them); absent in recordings that do not count them.
    int64_t threads_unrecorded;
    // meta.events_unrecorded: the program's allocations and frees that were
    // not recorded (those threads', and a signal handler's inside a hook).
    int64_t events_unrecorded;
} tpprof_summary;

// Live blocks at the end, grouped by (stack, kind, reachability).
typedef struct tpprof_leak {
    int64_t stack_id;
    int64_t kind;
    int reachability;
    uint64_t bytes, count;
} tpprof_leak;

// One row of `sites`.
typedef struct tpprof_site {
    int64_t stack_id, kind;
    uint64_t alloc_count, alloc_bytes, free_count, freed_bytes;
    uint64_t temp_count, temp_bytes, peak_count, peak_bytes;
} tpprof_site;

typedef struct tpprof_profile {
    tpprof_db *db;
    tpprof_stacks *stacks;
    tpprof_summary summary;
    char *mode, *exe, *tool_version; // owned; may be NULL
    char *malloc_owner;   // meta.malloc_replaced_by: whose malloc the program called; owned, NULL: ours
    char *end_reason;     // meta.end_reason: "exit", "exec", "signal"; owned, NULL: absent
    char *malloc_skipped; // meta.malloc_skipped: the preloaded allocator glibc's stood in for; owned, NULL: none
    tpprof_leak *leaks;   // sorted: lost, unscanned, reachable; then bytes desc
    size_t nleaks;
    tpprof_site *sites;   // in table order
    size_t nsites;
    char **kind_names;    // indexed by kind id; NULL where unknown
    size_t nkinds;
    int64_t reserved_kind; // the id of kind mmap_reserved (0: none)
    bool symbolized_now;  // symbols were computed by this load
    bool symbols_saved;   // ... and written back into the file
    // meta.bypassing_modules: libraries seen calling the C library's
    // allocator directly (RTLD_DEEPBIND): their allocations are missing and
    // blocks they freed look leaked. Owned.
    char **bypassing;
    size_t nbypassing;
} tpprof_profile;

// The line about an allocator preloaded after tpprof (meta.malloc_skipped),
// starting with `prefix`, when there is one. (What the recording is missing
// is for tpprof_profile_gaps.)
void tpprof_profile_warn_skipped(const tpprof_profile *p, FILE *out, const char *prefix);

// Open path read-only, symbolize if `symbols` is empty (saving the result if
// the file is writable, keeping it in memory otherwise) and load everything.
// New object the caller frees, or NULL + error.
tpprof_profile *tpprof_profile_load(const char *path);
void tpprof_profile_free(tpprof_profile *p);

// Name of a kind ("malloc", "mmap", ...); "kind<N>" (static buffer) if unknown.
const char *tpprof_profile_kind(const tpprof_profile *p, int64_t kind);
const char *tpprof_reach_name(int reachability);

// ---------------------------------------------------------------------------
// device.c: device (CUDA) memory (device_blocks, device_events,
// device_timeline; docs/schema.md). Absent tables: recorded false.

// What a device kind's bytes are.
enum {
    TPPROF_DEV_MEMORY = 0,  // device, async, managed, pitch, VMM physical: counted
    TPPROF_DEV_PINNED = 1,  // pinned host memory: counted on its own
    TPPROF_DEV_ADDRESS = 2, // VMM reservations and mappings: shown, never added to bytes
};
// device_events.flag
enum {
    TPPROF_DEV_FLAG_OK = 0,
    TPPROF_DEV_FLAG_DOUBLE_FREE = 1,
    TPPROF_DEV_FLAG_UNKNOWN_POINTER = 2,
    TPPROF_DEV_FLAG_HOST_POINTER = 3,
    TPPROF_DEV_FLAG_OUT_OF_MEMORY = 4,
};
// The device of figures taken over every device together.
#define TPPROF_DEV_ALL INT32_MIN

// One row of device_blocks. Strings owned by the tpprof_devices.
typedef struct tpprof_dev_block {
    int64_t address, kind, stack_id, alloc_ns, free_ns; // free_ns TPPROF_NO_TIME: never freed
    uint64_t size;
    int32_t device;
    int cls;          // TPPROF_DEV_*
    bool is_mapping;  // kind cuda_vmm_mapping (else a reservation, when cls is ADDRESS)
    char *api, *ended_by; // ended_by: "device_reset", "context_destroyed" or NULL
} tpprof_dev_block;

// Blocks grouped by (device, stack, kind[, ended_by]): a leak group, a site,
// or what was live at a peak. Strings borrowed from the tpprof_devices.
typedef struct tpprof_dev_group {
    int32_t device;
    int cls;
    int64_t stack_id, kind;
    const char *ended_by; // leaks: NULL alive at exit, else what ended it
    const char *api;      // the API of the group's first block
    uint64_t bytes, count;
} tpprof_dev_group;

// Figures of one device (or of all together, or of pinned host memory).
typedef struct tpprof_dev_stats {
    int32_t device;
    uint64_t allocations, allocated_bytes, frees;
    uint64_t peak_bytes;      // the most bytes live at once (device_blocks swept by time)
    int64_t peak_time_ns;     // when first reached
    uint64_t leaked_bytes, leaked_count; // alive at exit or ended by a reset
    uint64_t reset_bytes, reset_count;   // ... of which ended by a reset
    uint64_t failed_calls, oom_calls, bad_frees;
    int64_t pool_reserved_peak;          // most reserved by pools (device_timeline); -1 unknown
    uint64_t vmm_reservations, vmm_reserved_bytes, vmm_mappings, vmm_mapped_bytes;
    tpprof_dev_group *peak_sites;        // live at the peak, by bytes; owned
    size_t npeak_sites;
} tpprof_dev_stats;

// Bad frees grouped by (flag, device, stack, api).
typedef struct tpprof_dev_bad {
    int64_t flag, stack_id, address; // address: the first one
    int32_t device;
    char *api; // owned
    uint64_t count;
} tpprof_dev_bad;

typedef struct tpprof_devices {
    bool recorded;          // the recording has device_blocks
    bool filtered;          // only filter_device's rows were read (report --device)
    int32_t filter_device;
    char *capture;          // meta.device_capture; owned, NULL when absent
    int64_t meta_calls_failed, meta_bad_frees; // -1 when absent
    uint64_t failed_calls, bad_frees;          // counted in device_events
    tpprof_dev_block *blocks; // by alloc_ns
    size_t nblocks;
    tpprof_dev_stats *devices; // device memory per ordinal, ascending
    size_t ndevices, cap_devices;
    tpprof_dev_stats total;    // every device together (device TPPROF_DEV_ALL)
    tpprof_dev_stats pinned;   // pinned host memory
    tpprof_dev_group *leaks;   // memory and pinned first, by bytes; then address space
    size_t nleaks;
    tpprof_dev_group *sites;   // every block by (device, stack, kind), same order
    size_t nsites;
    tpprof_dev_bad *bad;
    size_t nbad;
} tpprof_devices;

// Load p's device tables (only `device`'s rows when filtered). 0, or -1 +
// error (out emptied). Free with tpprof_devices_free.
int tpprof_devices_load(const tpprof_profile *p, bool filtered, int32_t device, tpprof_devices *out);
void tpprof_devices_free(tpprof_devices *d);
// The stats of an ordinal (TPPROF_DEV_ALL: the total); borrowed, NULL if none.
const tpprof_dev_stats *tpprof_devices_find(const tpprof_devices *d, int32_t device);
// Failed calls and bad frees: meta's counts when larger (the recorder counts
// calls it could not list), the counted ones when filtered.
uint64_t tpprof_devices_calls_failed(const tpprof_devices *d);
uint64_t tpprof_devices_bad_frees(const tpprof_devices *d);
// TPPROF_DEV_* of a kind id, by its name.
int tpprof_device_kind_class(const tpprof_profile *p, int64_t kind);
// "double_free", "unknown_pointer", "host_pointer", "out_of_memory", "ok".
const char *tpprof_device_flag_name(int64_t flag);
// Whether b still held its memory at the end (never freed, or a reset ended it).
bool tpprof_dev_block_leaked(const tpprof_dev_block *b);
// Parse a device limit: "N" (*device TPPROF_DEV_ALL) or "DEV:N". 0 or -1 + error.
int tpprof_parse_device_size(const char *what, const char *s, int32_t *device, uint64_t *bytes);

// ---------------------------------------------------------------------------
// gaps.c: what a recording is missing (check refuses to vouch for it)

// How `tpprof run` saw the program end: exit status or killing signal.
typedef struct tpprof_program_end {
    bool signaled;
    int value;
} tpprof_program_end;

#define TPPROF_GAPS_MAX 8

// The reasons a recording cannot be vouched for, each a clause such as
// "incomplete: ..." or "17 events were dropped while recording (...)".
typedef struct tpprof_gaps {
    size_t n;
    char reason[TPPROF_GAPS_MAX][600];
} tpprof_gaps;

// Fill g with what p (read from path, which may be NULL) is missing: not
// complete (and why, as far as can be told: `end`, from `tpprof run`, may be
// NULL), events dropped, threads not recorded, allocations without a stack,
// a leak scan that did not finish, allocations made past the preload.
// Returns g->n; 0: nothing is missing.
size_t tpprof_profile_gaps(const tpprof_profile *p, const char *path, const tpprof_program_end *end,
                           tpprof_gaps *g);
// The reasons joined by "; " into out; returns out.
char *tpprof_gaps_join(const tpprof_gaps *g, char *out, size_t size);

// ---------------------------------------------------------------------------
// run_preflight.c: what `tpprof run` refuses before starting the program

// 0 when the preload can record cmd[0] (or it is no ELF file: a script, or
// not found: exec will say), else -1 + error saying why in one line (a
// statically linked program; one built with a sanitizer whose runtime it
// loads dynamically).
int tpprof_run_refuse_unrecordable(char **cmd);
// Can the recorder create its database at path (absolute, %p expanded): the
// folder exists and can be written into, no component is longer than
// NAME_MAX, and what the recorder deletes first (path and its -wal, -shm,
// -journal) is a tpprof recording's or absent? 0, or -1 + error.
int tpprof_run_check_output(const char *path);

// ---------------------------------------------------------------------------
// diff.c

// A new string naming stack_id of p by its function names, innermost first,
// at most max_frames of them (0: all): equal across runs and builds when the
// call path is the same. NULL when out of memory.
char *tpprof_stack_key(const tpprof_profile *p, int64_t stack_id, size_t max_frames);

// Does the lost gate count this group? Lost blocks, and unscanned ones when
// no reachability scan ran (after a scan they were allocated later).
bool tpprof_leak_counts_as_lost(const tpprof_profile *p, const tpprof_leak *l);

// One stack key's totals in both runs (bytes; *_old from the baseline).
typedef struct tpprof_delta {
    char *key;                    // owned by the array
    int64_t stack_new, stack_old; // a stack with this key in each run, -1 if none
    int64_t leaked_new, leaked_old, lost_new, lost_old;
    int64_t bytes_new, bytes_old, calls_new, calls_old, peak_new, peak_old;
} tpprof_delta;

// Match the leaks and sites of two recordings by stack key (max_frames as
// for tpprof_stack_key). *out: a new array sorted by key, freed with
// tpprof_diff_free. 0 or -1 + error.
int tpprof_diff(const tpprof_profile *now, const tpprof_profile *old, size_t max_frames,
                tpprof_delta **out, size_t *n);
void tpprof_diff_free(tpprof_delta *d, size_t n);

// ---------------------------------------------------------------------------
// verdict.c: the summary's first lines, as memcheck and LSan order them

enum {
    TPPROF_VERDICT_NO_LEAK = 0,     // nothing lost
    TPPROF_VERDICT_LEAK = 1,        // blocks no pointer reached at exit
    TPPROF_VERDICT_NOT_SCANNED = 2, // blocks live at exit, but no scan ran (killed, crashed)
};

typedef struct tpprof_verdict {
    int verdict;
    uint64_t lost_bytes, lost_count;           // what check's lost gate counts
    uint64_t reachable_bytes, reachable_count; // still referenced at exit: not leaks
    uint64_t late_bytes, late_count;           // unscanned: allocated after the scan
    char holder[256];      // the library that allocated most reachable bytes ("" if none)
    uint64_t holder_bytes; // ... and how many
} tpprof_verdict;

// Compute the verdict of a loaded profile (no database access).
void tpprof_verdict_of(const tpprof_profile *p, tpprof_verdict *v);
// "no_leak", "leak" or "not_scanned" (the JSON value; static string).
const char *tpprof_verdict_name(int verdict);
// "no leak: 0 B lost", "LEAK: 12.0 KiB lost in 2 blocks", ... into buf. Returns buf.
char *tpprof_verdict_headline(const tpprof_verdict *v, char *buf, size_t size);
// "256 MiB in 26 blocks still reachable at exit (referenced, not lost); most
// of it allocated by libopenblas.so.0: 256 MiB (100%)" into buf. Returns buf.
char *tpprof_verdict_reachable(const tpprof_verdict *v, char *buf, size_t size);

// ---------------------------------------------------------------------------
// timeline.c

typedef struct tpprof_sample {
    int64_t time_ns;
    uint64_t heap_bytes, heap_blocks, mmap_bytes, alloc_calls, free_calls, rss_bytes;
} tpprof_sample;

// At most max_points samples of the `timeline` table in time order, each the
// largest (heap + mmap) of its group of consecutive samples. *out is a new
// array (caller frees; NULL when the table is empty or absent). 0 or -1 + error.
int tpprof_timeline_load(tpprof_db *db, size_t max_points, tpprof_sample **out, size_t *n);

// ---------------------------------------------------------------------------
// tensors.c

// A nullable time column reads as this.
#define TPPROF_NO_TIME INT64_MIN

// One row of `storages`. Strings owned by the tpprof_tensors.
typedef struct tpprof_storage {
    int64_t id, data, nbytes;
    char *allocator, *device;
    bool resizable, at_peak;
    int64_t created_ns, created_stack, last_release_ns, data_released_ns, freed_ns;
    int64_t strong, weak;
    int64_t block_address, block_size, block_kind, block_freed_ns;
    int64_t version_bumps;
} tpprof_storage;

#define TPPROF_MAX_DIMS 16

// One row of `tensors`, with sizes/strides parsed (ndim -1: unparsable).
typedef struct tpprof_tensor {
    int64_t id, storage_id, base_id, offset, itemsize;
    char *sizes, *strides, *dtype; // as stored ("[3, 4]")
    int ndim;
    int64_t shape[TPPROF_MAX_DIMS], stride[TPPROF_MAX_DIMS];
    int64_t created_ns, created_stack, freed_ns, version;
    bool at_peak;
} tpprof_tensor;

// Reference ops of storage_refs and refcount_sites.
enum {
    TPPROF_REF_CREATE = 0,
    TPPROF_REF_RETAIN = 1,
    TPPROF_REF_RELEASE = 2,
    TPPROF_REF_WEAK_RETAIN = 3,
    TPPROF_REF_WEAK_RELEASE = 4,
    TPPROF_REF_LOCK = 5,
};

typedef struct tpprof_ref {
    int64_t storage_id, op, stack_id, tensor_id, count;
} tpprof_ref;

// A tensor's handles alive at the end (tensor_refs): op TPPROF_REF_CREATE
// (the one it was made with) or TPPROF_REF_RETAIN (tp_tensor_retain calls no
// release matched), by stack.
typedef struct tpprof_handle_ref {
    int64_t tensor_id, op, stack_id, count;
} tpprof_handle_ref;

typedef struct tpprof_lifetime {
    char *allocator;
    int64_t count, live_ns_sum, live_ns_max, delay_ns_sum, delay_ns_max;
    int64_t delay_count; // storages whose release delay was measured (<= count)
    int64_t live_count;  // storages whose live time was measured (<= count: timed ones)
} tpprof_lifetime;

// The tensor tables of one recording, all in memory (they hold only what
// was alive at the end or at the peak in aggregate mode).
typedef struct tpprof_tensors {
    tpprof_storage *storages; // by id
    size_t nstorages;
    tpprof_tensor *tensors;   // by id
    size_t ntensors;
    tpprof_ref *refs;         // by storage, op, stack
    size_t nrefs;
    tpprof_lifetime *lifetimes; // by allocator
    size_t nlifetimes;
    tpprof_handle_ref *handles; // by tensor, op, stack
    size_t nhandles;
    bool attached;            // meta.tensors = 1
    bool full;                // meta.mode = full
    int64_t peak_storage_bytes, peak_storage_time_ns;
    // Indexes built at load (full-mode recordings hold every tensor):
    size_t *on_storage;       // tensor indices by (storage_id, id)
    size_t *by_base;          // tensor indices by (base_id, id)
} tpprof_tensors;

// Load the tensor tables; absent tables read as empty. 0 or -1 + error.
int tpprof_tensors_load(tpprof_db *db, tpprof_tensors *out);
void tpprof_tensors_free(tpprof_tensors *t);

// Lookups by id (borrowed pointers), NULL if absent.
const tpprof_storage *tpprof_tensors_storage(const tpprof_tensors *t, int64_t id);
const tpprof_tensor *tpprof_tensors_tensor(const tpprof_tensors *t, int64_t id);

// The tensors on a storage / whose base_id is `base` (views), by id:
// *n indices into t->tensors (borrowed).
const size_t *tpprof_tensors_on(const tpprof_tensors *t, int64_t storage_id, size_t *n);
const size_t *tpprof_tensors_views_of(const tpprof_tensors *t, int64_t base, size_t *n);
// How many of those views are alive at exit (each holds the base).
size_t tpprof_tensors_live_views(const tpprof_tensors *t, int64_t base);
// Of the storages alive at exit, how many tensors alive at exit hold
// (*held), and the tensor that stands for them: on the biggest such
// storage, one no live view holds (a view holds its base, so the view is
// named). Borrowed; NULL when no live tensor holds a live storage.
const tpprof_tensor *tpprof_tensors_holder_lead(const tpprof_tensors *t, uint64_t *held);
// The storage_refs rows of a storage (borrowed, contiguous).
const tpprof_ref *tpprof_tensors_refs(const tpprof_tensors *t, int64_t storage_id, size_t *n);

// Is h a tp_tensor_retain no release matched (not the creation handle)?
static inline bool tpprof_handle_unmatched(const tpprof_handle_ref *h) { return h->op == TPPROF_REF_RETAIN && h->count > 0; }
// The tensor_refs rows of a tensor (borrowed, contiguous).
const tpprof_handle_ref *tpprof_tensors_handles(const tpprof_tensors *t, int64_t tensor_id, size_t *n);
// Of those, the retains no release matched: how many, and the stack of the
// first (0 if none).
int64_t tpprof_tensors_unmatched_handles(const tpprof_tensors *t, int64_t tensor_id, int64_t *stack);


// Struct alive at the end (freed_ns NULL); data alive (data_released_ns NULL).
bool tpprof_storage_alive(const tpprof_storage *s);
bool tpprof_storage_data_alive(const tpprof_storage *s);
bool tpprof_tensor_alive(const tpprof_tensor *t);

// Bytes of the storage a tensor's elements reach (distinct elements bounded
// by numel and by the span of its strides, times itemsize).
uint64_t tpprof_tensor_covered_bytes(const tpprof_tensor *t);
uint64_t tpprof_tensor_numel(const tpprof_tensor *t);

// Is op a strong reference (creation, retain, lock)?
bool tpprof_ref_is_strong(int64_t op);
// Is r a reference no release matched (tensor_id 0) of the kind asked: a
// weak retain (weak true) or a strong reference (weak false)?
bool tpprof_ref_unmatched(const tpprof_ref *r, bool weak);
// "create", "retain", "weak_retain", "lock", ...
const char *tpprof_ref_op_name(int64_t op);

// A group of references no release matched (or weak holders), by (op, stack)
// over storages.
typedef struct tpprof_ref_group {
    int64_t op, stack_id;
    uint64_t storages, refs, bytes; // distinct storages, references, their nbytes
} tpprof_ref_group;

// Unmatched references (tensor_id 0) of storages alive at the end, grouped by
// (op, stack), weak (true: op weak retain) or strong ones, most storages
// first. New array (caller frees), *n its length. NULL + *n 0 when none.
tpprof_ref_group *tpprof_ref_groups(const tpprof_tensors *t, bool weak, size_t *n);
// Handle retains no release matched of tensors alive at the end, grouped by
// stack as tpprof_ref_groups groups references (op TPPROF_REF_RETAIN;
// storages: those the tensors are on; refs: the handles). New array (caller
// frees), *n its length.
tpprof_ref_group *tpprof_handle_groups(const tpprof_tensors *t, size_t *n);

// A small view pinning a big storage: the tensor covering the most of its
// storage still covers under `fraction` of a storage of at least min_bytes.
// A base tensor with a live view does not count as covering (a view keeps
// its base alive whether or not anything else uses it): held_base names
// one such base (0 if none).
typedef struct tpprof_pinned {
    int64_t tensor_id, storage_id, held_base;
    uint64_t storage_bytes, covered_bytes, pinned_bytes;
} tpprof_pinned;

#define TPPROF_PIN_FRACTION 0.25
#define TPPROF_PIN_MIN_BYTES (1u << 20)

// at_peak false: tensors and storages alive at the end; true: at the peak.
// New array sorted by pinned bytes (caller frees).
tpprof_pinned *tpprof_pinned_views(const tpprof_tensors *t, bool at_peak, size_t *n);

// Parse a time: ns digits, or a number with suffix ns, us, ms, s. 0 or -1 + error.
int tpprof_parse_time(const char *what, const char *s, int64_t *out);

// ---------------------------------------------------------------------------
// autograd.c: what the autograd graph keeps alive (graph_nodes, graph_edges,
// saved_tensors, tensor_grads; docs/schema-tensors.md)

// One row of graph_nodes (a grad_fn node; in aggregate mode those alive at
// the end). root: index of its graph's root node in tpprof_autograd.nodes.
typedef struct tpprof_gnode {
    int64_t id;
    char *name; // "MmBackward0"; owned
    int64_t created_ns, created_stack, freed_ns;
    bool backward_ran, retained;
    int64_t root;
} tpprof_gnode;

// One row of saved_tensors: a tensor node_id saved (tensor_id: the node's
// alias of it) on storage_id, released_ns TPPROF_NO_TIME while kept.
typedef struct tpprof_gsaved {
    int64_t node_id, slot, storage_id, tensor_id, saved_ns, released_ns;
} tpprof_gsaved;

// A leaf input of a node (graph_edges.leaf = 1): the node holds a handle on
// tensor_id, a leaf that requires grad, to accumulate its gradient.
typedef struct tpprof_gleaf {
    int64_t tensor_id, node_id;
} tpprof_gleaf;

// A row of tensor_grads: tensor_id holds grad_id as its .grad (the runtime's
// own handle, not in tensor_refs).
typedef struct tpprof_ggrad {
    int64_t grad_id, tensor_id, grad_storage_id;
} tpprof_ggrad;

typedef struct tpprof_autograd {
    tpprof_gnode *nodes; // by id
    size_t nnodes;
    tpprof_gsaved *saved; // by storage, node
    size_t nsaved;
    tpprof_gleaf *leaves; // by tensor, node
    size_t nleaves;
    tpprof_ggrad *grads; // by grad_id (empty without tensor_grads)
    size_t ngrads;
    bool present;            // the recording has the tables
    int64_t created, freed;  // meta.graph_nodes_created / _freed (0: absent)
} tpprof_autograd;

// Load the graph tables (absent: an empty graph). 0 or -1 + error.
int tpprof_autograd_load(tpprof_db *db, tpprof_autograd *out);
void tpprof_autograd_free(tpprof_autograd *g);
// The node with this id (borrowed), NULL if none; its graph's root (n itself
// when it is one).
const tpprof_gnode *tpprof_autograd_node(const tpprof_autograd *g, int64_t id);
const tpprof_gnode *tpprof_autograd_root(const tpprof_autograd *g, const tpprof_gnode *n);
bool tpprof_gnode_alive(const tpprof_gnode *n);
// Why a node alive at the end is still there: "backward never ran",
// "retain_graph" (it ran, keeping its saved tensors) or "backward ran".
const char *tpprof_gnode_why(const tpprof_gnode *n);
// The saved tensors of storage_id that nodes alive at the end still keep:
// the first cap into out (borrowed); returns how many there are.
size_t tpprof_autograd_holders(const tpprof_autograd *g, int64_t storage_id, const tpprof_gsaved **out,
                               size_t cap);

// The saved tensor that tensor_id (on storage_id) is, when a node alive at
// the end still keeps it (borrowed), else NULL.
const tpprof_gsaved *tpprof_autograd_saved_as(const tpprof_autograd *g, int64_t storage_id, int64_t tensor_id);

// The nodes alive at the end that hold leaf tensor_id as an input (one
// entry a handle: a node that takes the leaf twice holds two): the first
// cap into out (borrowed); returns how many.
size_t tpprof_autograd_leaf_holders(const tpprof_autograd *g, int64_t tensor_id, const tpprof_gleaf **out, size_t cap);
// The tensor alive at exit whose .grad tensor_id is (borrowed), NULL if none.
const tpprof_tensor *tpprof_autograd_grad_owner(const tpprof_autograd *g, const tpprof_tensors *t, int64_t tensor_id);

// How a node keeps a storage (tpprof_autograd_storage_node).
enum {
    TPPROF_GKEEP_SAVED = 0, // a saved tensor of the node is on it
    TPPROF_GKEEP_LEAF = 1,  // a leaf input of the node is on it
    TPPROF_GKEEP_GRAD = 2,  // the .grad of a leaf input of the node is on it
};
// The first node alive at the end that keeps storage s's data: one that
// saved a tensor on it, else one holding a leaf alive on it, else one
// holding a leaf whose .grad is alive on it. NULL if none. *how:
// TPPROF_GKEEP_*; *tensor (when not NULL): the saved alias, the leaf, or
// the leaf whose grad it is.
const tpprof_gnode *tpprof_autograd_storage_node(const tpprof_autograd *g, const tpprof_tensors *t,
                                                 const tpprof_storage *s, int *how, int64_t *tensor);
// Whether graphs alone keep s (data alive at exit): every tensor alive on it
// is a saved tensor of a node alive then, or a leaf whose every handle
// outstanding at exit is a node's and that no tensor holds as its .grad,
// or the .grad of such a leaf (on a storage graphs alone keep) that no
// handle of its own holds; and no reference no release matched holds it;
// so it goes when the graphs go.
bool tpprof_autograd_keeps_alone(const tpprof_autograd *g, const tpprof_tensors *t, const tpprof_storage *s);

// Storages alive at exit that graphs keep (tpprof_autograd_storage_node),
// grouped by the graph's root (its name, the stack that made it, and why
// the graph is alive); storages/bytes count them all, alone_* those only
// graphs keep (tpprof_autograd_keeps_alone).
typedef struct tpprof_graph_group {
    int64_t stack_id;      // the root node's created_stack
    const char *root_name; // borrowed from the graph
    bool backward_ran, retained;
    uint64_t graphs, nodes, storages, bytes, alone_storages, alone_bytes;
} tpprof_graph_group;

// Totals over the groups (each storage once).
typedef struct tpprof_graph_held {
    uint64_t storages, bytes;             // storages alive at exit graphs keep
    uint64_t alone_storages, alone_bytes; // of them, those only graphs keep: graph-held
} tpprof_graph_held;

// The groups (new array, most graph-held bytes first; caller frees; NULL
// when none) and the totals.
tpprof_graph_group *tpprof_autograd_groups(const tpprof_autograd *g, const tpprof_tensors *t, size_t *n,
                                          tpprof_graph_held *held);

// The summary's graph line (verdict.c; run's summary and the HTML page):
// "graphs: 490 KiB in 24 storages kept by 5 autograd graphs (root
// NllLossBackward0 made in main (leak_loss_history.c:39)); backward never
// ran" into buf: the graph-held bytes (those only graphs keep), the alive
// graphs, and the root, creation site and why of the group that holds the
// most. false (buf "") when no graph node is alive at exit or the graph
// cannot be read (a recording without graph tables has none).
bool tpprof_verdict_graphs(const tpprof_profile *p, const tpprof_tensors *t, char *buf, size_t size);

// ---------------------------------------------------------------------------
// replay.c

enum {
    TPPROF_ALLOC_SEGMENT_RESERVE = 1,
    TPPROF_ALLOC_SEGMENT_RELEASE = 2,
    TPPROF_ALLOC_BLOCK_ALLOC = 3,
    TPPROF_ALLOC_BLOCK_FREE = 4,
    TPPROF_ALLOC_BLOCK_SPLIT = 5,
    TPPROF_ALLOC_BLOCK_MERGE = 6,
};

typedef struct tpprof_alloc_event {
    int64_t seq, time_ns, action, segment, segment_size, block, block_size, requested, stack_id;
} tpprof_alloc_event;

typedef struct tpprof_block {
    int64_t address, size, requested, stack_id;
    bool allocated;
} tpprof_block;

typedef struct tpprof_segment {
    int64_t address, size, stack_id;
    tpprof_block *blocks; // in address order
    size_t nblocks, cap;
} tpprof_segment;

// One point of the reserved/allocated series (after an event).
typedef struct tpprof_alloc_point {
    int64_t time_ns;
    int64_t reserved, allocated;
} tpprof_alloc_point;

// One allocator's events and its state after replaying a prefix of them.
typedef struct tpprof_alloc_state {
    char *allocator;
    char *device;
    tpprof_alloc_event *events; // in seq order
    size_t nevents;
    size_t replayed;            // events applied to segments
    tpprof_segment *segments;   // in address order
    size_t nsegments, cap;
    size_t peak_index;          // events[0..peak_index] reach the largest allocated total
    int64_t peak_allocated;
} tpprof_alloc_state;

// Figures of a state (what `fragmentation` prints and `check` gates).
typedef struct tpprof_frag {
    int64_t segments, reserved, allocated, requested, internal;
    int64_t inactive_split_bytes, inactive_split, free_bytes, largest_free;
    int64_t blocks_allocated, blocks_free;
} tpprof_frag;

// Load allocator_events (absent: none), one state per allocator, nothing
// replayed yet. *out new array freed with tpprof_alloc_states_free.
int tpprof_alloc_load(tpprof_db *db, tpprof_alloc_state **out, size_t *n);
void tpprof_alloc_states_free(tpprof_alloc_state *s, size_t n);
// Free what one state holds (it stays in its array, zeroed).
void tpprof_alloc_state_clear(tpprof_alloc_state *s);

// Replay events[0..count) from scratch. 0 or -1 + error (out of memory).
int tpprof_alloc_replay(tpprof_alloc_state *s, size_t count);
// How many events happened at or before time_ns.
size_t tpprof_alloc_count_until(const tpprof_alloc_state *s, int64_t time_ns);
void tpprof_alloc_figures(const tpprof_alloc_state *s, tpprof_frag *out);

// ---------------------------------------------------------------------------
// json.c

// A streaming writer of pretty-printed JSON. Keys and values are written in
// call order; the writer inserts commas, newlines and indentation.
typedef struct tpprof_json {
    FILE *out;
    int depth;
    bool first[32];   // per depth: no element written yet
    bool after_key;
    int inline_depth; // containers opened at or deeper than this stay on one line
} tpprof_json;

void tpprof_json_init(tpprof_json *j, FILE *out);
// Init j and open the document's object with the keys every tpprof document
// starts with: format ("tpprof-report"), its version, the database path.
void tpprof_json_document_begin(tpprof_json *j, FILE *out, const char *format, int64_t version,
                                const char *database);
void tpprof_json_key(tpprof_json *j, const char *key);
void tpprof_json_object_begin(tpprof_json *j);
void tpprof_json_object_end(tpprof_json *j);
void tpprof_json_array_begin(tpprof_json *j);
void tpprof_json_array_end(tpprof_json *j);
// Begin a container whose contents stay on one line (frames, shapes).
void tpprof_json_object_begin_inline(tpprof_json *j);
void tpprof_json_array_begin_inline(tpprof_json *j);
void tpprof_json_string(tpprof_json *j, const char *s); // NULL writes null
void tpprof_json_int(tpprof_json *j, int64_t v);
void tpprof_json_uint(tpprof_json *j, uint64_t v);
void tpprof_json_bool(tpprof_json *j, bool v);
void tpprof_json_null(tpprof_json *j);
// Finish the document with a newline.
void tpprof_json_finish(tpprof_json *j);
// Length of the valid UTF-8 sequence at s (1-4), or 0 when s does not start
// one (a stray continuation byte, an overlong form, a surrogate, a cut end).
// Strings are written with U+FFFD for such bytes, so output is valid UTF-8.
size_t tpprof_utf8_len(const unsigned char *s);

// Shorthands: a key and its value in one call.
void tpprof_json_kv_int(tpprof_json *j, const char *key, int64_t v);
void tpprof_json_kv_uint(tpprof_json *j, const char *key, uint64_t v);
void tpprof_json_kv_string(tpprof_json *j, const char *key, const char *v); // NULL writes null
void tpprof_json_kv_bool(tpprof_json *j, const char *key, bool v);
// An address as a hex string ("0x7f12a000"), as the report writes every address.
void tpprof_json_kv_address(tpprof_json *j, const char *key, int64_t address);
// An id column where 0 means "none": 0 writes null.
void tpprof_json_kv_id(tpprof_json *j, const char *key, int64_t id);
// A tensor's sizes (strides false) or strides as an inline array of numbers;
// null when they did not parse (ndim -1).
void tpprof_json_kv_dims(tpprof_json *j, const char *key, const tpprof_tensor *x, bool strides);
// A tensor's keys in the open object: id, offset, sizes, strides, dtype and
// base (null for a tensor that is not a view).
void tpprof_json_tensor_fields(tpprof_json *j, const tpprof_tensor *x);

// ---------------------------------------------------------------------------
// storages.c: report's tensor sections and the stack printers commands share

// Print a stack innermost first, one frame a line after indent, at most
// max_frames, stopping at main. from_caller: start at the first frame
// outside the tensor runtime (saying how many runtime frames were skipped).
void tpprof_print_stack(const tpprof_stacks *st, int64_t stack_id, const char *indent,
                        size_t max_frames, bool from_caller);
// Write "stack": [frames...] (every frame) as the next key of j.
void tpprof_json_stack(tpprof_json *j, const tpprof_stacks *st, int64_t stack_id);
// "850 ns", "12.5 us", "3.2 ms", "1.50 s". Writes into buf, returns buf.
char *tpprof_format_ns(int64_t ns, char buf[32]);

// The --storages section (cap: list length, 0 = all) and its JSON keys
// (storages, unmatched_by_stack, weak_by_stack, pinned_views).
void tpprof_report_storages_text(const tpprof_profile *p, const tpprof_tensors *t, size_t cap);
void tpprof_report_storages_json(tpprof_json *j, const tpprof_profile *p, const tpprof_tensors *t);
// The storages whose data is alive at exit in a block still live then (not
// those a reused block held before), each with the block's leak group (stack, kind, reachability: a tpprof_leak's key), so
// a leak is shown as the storages it backs.
typedef struct tpprof_backing {
    int64_t storage_id, stack_id, kind;
    int reachability;
} tpprof_backing;
// Loads them (none when the recording has no tensor tables). 0, or -1 with
// tpprof_error() set.
int tpprof_backings_load(tpprof_db *db, const tpprof_tensors *t, tpprof_backing **out, size_t *n);
// Under a leak's stack: "backs storage #4 (16.0 KiB, cpu): ..." for up to 3
// of the storages its blocks back.
void tpprof_report_leak_storages_text(const tpprof_profile *p, const tpprof_tensors *t, const tpprof_backing *b,
                                      size_t nb, const tpprof_leak *l, const char *indent);
// Whether b's block is one of the leak group l's.
static inline bool tpprof_backing_in(const tpprof_backing *b, const tpprof_leak *l) {
    return b->stack_id == l->stack_id && b->kind == l->kind && b->reachability == l->reachability;
}
// The leak's "storages" key: the ids of the storages its blocks back.
void tpprof_report_leak_storages_json(tpprof_json *j, const tpprof_backing *b, size_t nb, const tpprof_leak *l);
// The --lifetimes section (with the longest per-storage release delays) and
// its JSON key (lifetimes); cap bounds the per-storage rows.
void tpprof_report_lifetimes_text(const tpprof_tensors *t, size_t cap);
void tpprof_report_lifetimes_json(tpprof_json *j, const tpprof_tensors *t, size_t cap);

// ---------------------------------------------------------------------------
// report_device.c: report's device memory (text and the JSON `device` object)

// The summary's device lines (one line "not recorded" only when filtered).
void tpprof_report_device_summary_text(const tpprof_devices *d);
// One device's summary figures as a line (no newline), into buf, which it
// returns: "3 allocations, 7.00 MiB; peak 6.00 MiB at 0.002 s; at exit ...".
const char *tpprof_dev_stats_line(const tpprof_dev_stats *s, char *buf, size_t size);
// The sections, each capped at top entries (0 = all); nothing when not recorded.
void tpprof_report_device_leaks_text(const tpprof_profile *p, const tpprof_devices *d, size_t top);
void tpprof_report_device_peak_text(const tpprof_profile *p, const tpprof_devices *d, size_t top);
void tpprof_report_device_top_text(const tpprof_profile *p, const tpprof_devices *d, size_t top);
// The "device" key and object (leaks never capped; peak_sites and top are).
void tpprof_report_device_json(tpprof_json *j, const tpprof_profile *p, const tpprof_devices *d, size_t top);

// ---------------------------------------------------------------------------
// report_diff.c: report --diff OLD.db (text and the JSON `diff` object)

// Two recordings matched stack by stack (diff.c), for the report.
typedef struct tpprof_report_diff {
    const tpprof_profile *now; // borrowed
    tpprof_profile *old;       // the baseline (owned)
    tpprof_delta *rows;        // owned
    size_t n;
    const char *baseline;      // its path, as shown
    uint64_t top;              // rows shown per list (0 = all)
} tpprof_report_diff;

// Loads the baseline and matches it with now. 0 or -1 + error; either way
// c is for tpprof_report_diff_free (which a zeroed c also takes).
int tpprof_report_diff_load(tpprof_report_diff *c, const tpprof_profile *now, const char *baseline, uint64_t top);
void tpprof_report_diff_free(tpprof_report_diff *c);
// The "Changes against" section; the JSON "diff" key and object.
void tpprof_report_diff_text(const tpprof_report_diff *c);
void tpprof_report_diff_json(tpprof_json *j, const tpprof_report_diff *c);

// ---------------------------------------------------------------------------
// folded.c: report --format folded (flame graph input), one line per stack

// The value each stack's line carries.
typedef enum tpprof_folded_value {
    TPPROF_FOLDED_ALLOCATED, // bytes allocated over the run (sites)
    TPPROF_FOLDED_LEAKS,     // bytes live at exit (leak groups)
    TPPROF_FOLDED_PEAK,      // bytes live at the peak (sites)
    TPPROF_FOLDED_TEMPORARY, // temporary allocations (sites)
} tpprof_folded_value;

// Writes p's stacks to stdout, outermost frame first; stacks whose value is
// 0 are left out.
void tpprof_report_folded(const tpprof_profile *p, tpprof_folded_value what);

// ---------------------------------------------------------------------------
// html.c, html_data.c, html_flame.c: report --format html

// Write the whole page for p (t: its tensor tables; b: the storages its live
// blocks back; path: the database, for the other commands' pictures).
// 0, or -1 + error.
int tpprof_report_html(FILE *out, const tpprof_profile *p, const tpprof_tensors *t, const tpprof_backing *b,
                       size_t nb, const char *path);
// s as HTML text: <, >, &, quotes as entities; bytes that are not UTF-8
// (and control characters) as U+FFFD. NULL writes nothing.
void tpprof_html_text(FILE *out, const char *s);
// s as a JSON string that is safe inside a <script> element (<, >, & as
// \u escapes) and valid UTF-8 (\ufffd for other bytes). NULL writes null.
void tpprof_html_json_string(FILE *out, const char *s);
// Run fn(arg) with stdout sent to a temporary file; returns what it wrote
// (new string, caller frees) and its return value in *status (may be NULL).
// NULL + error when no temporary file could be made.
char *tpprof_capture_stdout(int (*fn)(void *), void *arg, int *status);
// The page's data object (timeline, devices, live, flame). 0 or -1 + error.
int tpprof_html_data(FILE *out, const tpprof_profile *p);
// The flame graph's JSON value. 0 or -1 + error.
int tpprof_html_flame(FILE *out, const tpprof_profile *p);

// ---------------------------------------------------------------------------
// suppressions.c: LeakSanitizer's suppression files (leak:PATTERN lines)

typedef struct tpprof_suppression {
    char *pattern;                // after "leak:"; owned
    bool glob;                    // a --suppress shell glob, not an LSan pattern
    uint64_t bytes, count, groups; // what it matched (set by apply)
} tpprof_suppression;

typedef struct tpprof_suppressions {
    tpprof_suppression *rules;
    size_t n, cap;
} tpprof_suppressions;

// Read an LSan suppression file: `leak:PATTERN` lines, `#` comments, blank
// lines, and append its rules to out (zeroed, or holding earlier files').
// Any other line is an error naming its file and line. 0, or -1 + error
// (out keeps only the rules it had).
int tpprof_suppressions_load(const char *path, tpprof_suppressions *out);
// Append one rule: an LSan pattern, or with glob a shell glob matched
// against a frame's function name and module file name (--suppress). 0 or -1.
int tpprof_suppressions_add(tpprof_suppressions *s, const char *pattern, bool glob);
void tpprof_suppressions_free(tpprof_suppressions *s);
// Zero what each rule matched (before applying the rules to another profile).
void tpprof_suppressions_reset(tpprof_suppressions *s);
// "leak:PATTERN matched 8.00 KiB in 1 block (1 stack)" into out; returns out.
char *tpprof_suppression_describe(const tpprof_suppression *r, char *out, size_t size);
// LSan's pattern match: substring, '*' any run, leading '^' and trailing '$'
// anchors. false for a NULL or empty str.
bool tpprof_suppression_match(const char *pattern, const char *str);
// Drop from p the leak groups a rule matches (a frame's function, file or
// module), and their bytes and blocks from p->summary; each rule counts what
// it took (the first matching rule takes a group).
void tpprof_suppressions_apply(tpprof_profile *p, tpprof_suppressions *s);

// ---------------------------------------------------------------------------
// gates.c: check's gates, one table parsed by `check` and `run`

// What the gates of one recording measure: the recording and its device
// (CUDA) tables, loaded once for all gates (recorded false when it has
// none). Both borrowed.
typedef struct tpprof_gate_subject {
    const tpprof_profile *p;
    const tpprof_devices *devices;
} tpprof_gate_subject;

// One row of the table: adding a gate is adding a row.
typedef struct tpprof_gate_def {
    const char *option; // "--max-lost-bytes"
    const char *name;   // the JUnit testcase, "max-lost-bytes"
    const char *what;   // in its line: "lost bytes"
    const char *help;   // for --help
    bool count;         // the limit is a count (no size suffixes)
    // The limit is [DEV:]N and the option repeatable: over every device
    // together, or on device DEV (its line "device 0 peak bytes", its
    // testcase "max-device-peak-bytes-dev0").
    bool per_device;
    // What the line of a recording without the figure adds to its PASS
    // (" (device memory was not recorded)"), when measure says so.
    const char *unrecorded;
    // The figure compared with the limit into *value (device: the DEV of
    // a per_device row, else TPPROF_DEV_ALL), and what to name when it
    // fails (": 8192 B in f (a.c:3)") into detail (left "" when nothing).
    // 0; 1 when the recording does not have the figure (*value 0: the gate
    // passes and its line says so); -1 + error.
    int (*measure)(const tpprof_gate_subject *s, int32_t device, uint64_t *value, char *detail, size_t size);
} tpprof_gate_def;

// The most gates one command line chooses (each DEV:N of a per-device row
// is one), and so the room for a recording's table gates.
#define TPPROF_GATES_MAX 32

// A gate chosen on a command line: a row of the table, its limit, and for
// a per-device row the device (TPPROF_DEV_ALL for plain rows).
typedef struct tpprof_gate_choice {
    int def;
    int32_t device;
    uint64_t limit;
    char name[64]; // its JUnit testcase: "max-device-peak-bytes-dev0"
    char what[64]; // in its line: "device 0 peak bytes"
} tpprof_gate_choice;

// A gate evaluated on one recording.
typedef struct tpprof_gate {
    const char *name;  // JUnit testcase name (borrowed: the choice's, or static)
    int def;           // its row in the table, -1 for the recording and baseline gates
    int choice;        // its index in tpprof_gate_options.chosen, -1 likewise
    bool failed;
    bool unrecorded;   // the recording does not have the figure (the gate passed)
    uint64_t value, limit;
    char line[4096];   // "PASS ..." or "FAIL ..."
} tpprof_gate;

// Gates chosen on a command line (zero it first; free with _free).
typedef struct tpprof_gate_options {
    // In the order evaluated: the table's, a row's in the order given; a
    // row (and device) given again takes the later limit.
    tpprof_gate_choice chosen[TPPROF_GATES_MAX];
    size_t nchosen;
    const char *baseline; // borrowed from argv (or owned, below)
    bool has_growth, allow_incomplete;
    double max_growth;
    tpprof_suppressions suppressions;
    char **owned; // the words of --check strings
    size_t nowned;
} tpprof_gate_options;

// The table (borrowed) and its length.
const tpprof_gate_def *tpprof_gate_defs(size_t *n);
// The gates' lines of a --help text.
void tpprof_gates_help(FILE *out);
// If argv[*i] is a gate option (a table gate, --baseline, --max-growth,
// --suppress, --suppressions, --allow-incomplete), take it (and its value,
// *i advanced) and return 1; 0 if it is another argument; -1 + error.
int tpprof_gate_option(tpprof_gate_options *o, int argc, char **argv, int *i);
// The same for a string of gate options ("--max-lost-bytes 0
// --max-leaked-storages 2"), split at blanks. 0, or -1 + error.
int tpprof_gate_options_parse_string(tpprof_gate_options *o, const char *gates);
// Was any gate chosen?
bool tpprof_gate_options_any(const tpprof_gate_options *o);
// After parsing: with no gate, --max-lost-bytes 0. 0, or -1 + error.
int tpprof_gate_options_finish(tpprof_gate_options *o);
void tpprof_gate_options_free(tpprof_gate_options *o);
// Take the suppressed leaks out of p (and old, if given) and say on stderr
// how much in all and per rule (each line starting with prefix, e.g.
// "tpprof check: ").
void tpprof_gates_suppress(tpprof_gate_options *o, tpprof_profile *p, tpprof_profile *old, const char *prefix);
// Notes on how the program ended that change what the gates count.
void tpprof_gates_note_ending(const tpprof_profile *p, const char *path, const char *prefix);
// Evaluate o's gates on p (path: its name in messages; old: the baseline,
// or NULL) into g (room for TPPROF_GATES_MAX + 4): first the recording's
// own (a FAIL when something is missing from it, unless allow_incomplete:
// then a warning on stderr), then the chosen ones, then the baseline's
// three. Bad device frees and failed device calls are notes on stderr,
// never a failure. Returns how many, or -1 + error.
int tpprof_gates_evaluate(const tpprof_gate_options *o, const tpprof_profile *p, const char *path,
                          const tpprof_profile *old, const char *prefix, tpprof_gate *g);

// ---------------------------------------------------------------------------
// inputs.c: the recordings a command names (several, or a quoted glob)

typedef struct tpprof_inputs {
    char **v; // owned copies, in the order named (a glob's sorted)
    size_t n, cap;
} tpprof_inputs;

// Add a database argument; a pattern with *, ? or [ that names no file is
// expanded as a glob. A recording named twice is an error. 0 or -1 + error.
int tpprof_inputs_add(tpprof_inputs *in, const char *arg);
void tpprof_inputs_free(tpprof_inputs *in);

// ---------------------------------------------------------------------------
// cmd_merge.c

// Merge the recordings inputs[0..n) into a new database at out_path
// (docs/schema.md, "Merged recordings"); refuses an existing out_path.
// quiet: no warning for an input that cannot be symbolized. 0, or -1 +
// error (nothing left at out_path).
int tpprof_merge(const char *out_path, char *const *inputs, size_t n, bool quiet);

// ---------------------------------------------------------------------------
// perfetto.c: export --format perfetto

// Write p (x: its tensor tables; path: the database, named in the trace's
// otherData) as Chrome trace-event JSON; past max_events allocation events
// on a thread (0: no cap) the rest are counted on a counter track, with a
// note. 0 or -1 + error.
int tpprof_export_perfetto(FILE *out, const tpprof_profile *p, const tpprof_tensors *x, const char *path,
                           uint64_t max_events);

// ---------------------------------------------------------------------------
// Commands: argv[0] is the command name. Each returns the process exit status.

int tpprof_cmd_run(int argc, char **argv);
int tpprof_cmd_report(int argc, char **argv);
int tpprof_cmd_check(int argc, char **argv);
int tpprof_cmd_graph(int argc, char **argv);
int tpprof_cmd_fragmentation(int argc, char **argv);
int tpprof_cmd_export(int argc, char **argv);
int tpprof_cmd_merge(int argc, char **argv);

extern const char tpprof_usage_run[], tpprof_usage_report[],
    tpprof_usage_graph[], tpprof_usage_fragmentation[], tpprof_usage_export[],
    tpprof_usage_merge[];

#endif
