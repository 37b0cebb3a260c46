// report.h: report's output pieces: device memory (report_device.c), --diff (report_diff.c), --format folded (folded.c) and html (html*.c).
// Private to viewer/; viewer.h includes every header of the viewer.
#ifndef TPPROF_VIEWER_REPORT_H
#define TPPROF_VIEWER_REPORT_H

#include "util.h"
#include "profile.h"
#include "device.h"
#include "diff.h"
#include "tensors.h"
#include "json.h"
#include "storages.h"

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

#endif
