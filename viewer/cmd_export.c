// cmd_export.c: `tpprof export DB --format perfetto [-o FILE]`: a recording
// in the format of a viewer people already have. Today one format: Chrome
// trace-event JSON for Perfetto UI and chrome://tracing (perfetto.c). This
// file only takes the options and opens the output; it never writes the
// database.
#define _POSIX_C_SOURCE 200809L
#include "viewer.h"

#include <errno.h>
#include <string.h>

const char tpprof_usage_export[] =
    "usage: tpprof export DB [--format perfetto] [--max-events-per-thread N] [-o FILE]\n"
    "\n"
    "Write the recording for another viewer.\n"
    "\n"
    "  --format perfetto  Chrome trace-event JSON (default), opened by Perfetto UI\n"
    "                     (ui.perfetto.dev: Open trace file) and chrome://tracing:\n"
    "                     counter tracks for heap, mmap and RSS and each caching\n"
    "                     allocator's reserved/allocated; in --full recordings every\n"
    "                     allocation and free on its thread with its stack; tensor\n"
    "                     storage lifetimes as slices\n"
    "  --max-events-per-thread N  write at most N allocation events per thread\n"
    "                     (default 100000; 0: all); the rest are counted on a\n"
    "                     counter track per thread, with a note event\n"
    "  -o FILE            write to FILE instead of stdout\n";

// 230 to 400 bytes an event (the stack is most of it): 100,000 events a
// thread keep a busy thread's part of the file at 25-40 MB (alloc_heavy's
// 12-20-frame stacks: 40.7 MB in all for 23.8 M events), which Perfetto UI
// opens; uncapped, 4 M events were 927 MB.
#define DEFAULT_MAX_EVENTS 100000

int tpprof_cmd_export(int argc, char **argv) {
    const char *path = NULL, *output = NULL;
    uint64_t max_events = DEFAULT_MAX_EVENTS;
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        int r;
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(tpprof_usage_export, stdout);
            return TPPROF_EXIT_OK;
        } else if ((r = tpprof_opt(argc, argv, &i, "--format", &v)) != 0) {
            if (r < 0)
                goto usage_error;
            if (strcmp(v, "perfetto") != 0 && strcmp(v, "chrome") != 0) {
                tpprof_error_set("--format: expected perfetto, got '%s'", v);
                goto usage_error;
            }
        } else if ((r = tpprof_opt(argc, argv, &i, "--max-events-per-thread", &v)) != 0) {
            if (r < 0 || tpprof_parse_count("--max-events-per-thread", v, &max_events) != 0)
                goto usage_error;
        } else if ((r = tpprof_opt(argc, argv, &i, "-o", &v)) != 0 ||
                   (r = tpprof_opt(argc, argv, &i, "--output", &v)) != 0) {
            if (r < 0)
                goto usage_error;
            output = v;
        } else if (tpprof_opt_database("export", argv[i], &path) != 0) {
            goto usage_error;
        }
    }
    if (!path) {
        tpprof_error_set("missing the database (usage: tpprof export DB [--format perfetto] [-o FILE])");
        goto usage_error;
    }
    tpprof_profile *p = tpprof_profile_load(path);
    if (!p)
        goto usage_error;
    tpprof_tensors t = {0};
    if (tpprof_tensors_load(p->db, &t) != 0) {
        tpprof_profile_free(p);
        goto usage_error;
    }
    int status = TPPROF_EXIT_OK;
    FILE *out = output ? fopen(output, "w") : stdout;
    if (!out) {
        tpprof_error_set("cannot write %s: %s", output, strerror(errno));
        status = TPPROF_EXIT_USAGE;
    } else if (tpprof_export_perfetto(out, p, &t, path, max_events) != 0) {
        status = TPPROF_EXIT_USAGE;
    } else if (fflush(out) != 0 || ferror(out)) {
        tpprof_error_set("cannot write %s: %s", output ? output : "stdout", strerror(errno));
        status = TPPROF_EXIT_USAGE;
    }
    if (out && out != stdout && fclose(out) != 0 && status == TPPROF_EXIT_OK) {
        tpprof_error_set("cannot write %s: %s", output, strerror(errno));
        status = TPPROF_EXIT_USAGE;
    }
    tpprof_tensors_free(&t);
    tpprof_profile_free(p);
    if (status != TPPROF_EXIT_OK)
        fprintf(stderr, "tpprof export: %s\n", tpprof_error());
    return status;

usage_error:
    fprintf(stderr, "tpprof export: %s\n", tpprof_error());
    return TPPROF_EXIT_USAGE;
}
