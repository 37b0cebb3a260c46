// gates.h: check's gates in one table, parsed by check and run (gates.c).
// Private to viewer/; viewer.h includes every header of the viewer.
#ifndef TPPROF_VIEWER_GATES_H
#define TPPROF_VIEWER_GATES_H

#include "util.h"
#include "profile.h"
#include "device.h"
#include "suppressions.h"

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

#endif
