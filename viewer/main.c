// main.c: `tpprof`, the command-line half of the profiler: dispatches to one
// file per command (cmd_run.c, cmd_report.c, cmd_check.c, cmd_graph.c,
// cmd_fragmentation.c, cmd_export.c, cmd_merge.c).
//
// It knows recordings only through docs/schema.md and never includes src/.
// Exit statuses: report and check use 0 ok, 1 gate failed (or, for check, a
// recording it cannot vouch for), 2 usage or input error; run returns the
// program's own status (docs/tpprof-cli.md).
#include "viewer.h"

#include <stdlib.h>
#include <string.h>

#ifndef TPPROF_VERSION
#define TPPROF_VERSION "unknown"
#endif

static const char usage[] =
    "usage: tpprof <command> [options]\n"
    "\n"
    "A memory profiler and leak checker for Linux programs.\n"
    "\n"
    "commands:\n"
    "  run [-o PATH] [--depth N] [--full] [--error-exitcode N] [--check \"GATES\"]\n"
    "      [check's gates] [--suppressions FILE] [--] CMD [ARGS...]\n"
    "        run CMD under the recorder, then symbolize and summarize; with gates,\n"
    "        exit N when CMD exits 0 but a gate fails (a test runner's wrapper)\n"
    "  report DB... [--leaks] [--peak] [--top N] [--temporary] [--timeline]\n"
    "            [--storages] [--lifetimes] [--diff OLD.db]\n"
    "            [--format text|json|folded|html] [-o FILE] [--suppressions FILE]\n"
    "        leaks, peak, top and temporary allocation sites of a recording\n"
    "  check DB... [--max-lost-bytes N] [--max-leaked-bytes N] [--max-peak-bytes N]\n"
    "           [--baseline OLD.db --max-growth PCT] [--suppress PATTERN] [--junit FILE]\n"
    "           [--suppressions FILE]\n"
    "           [--max-leaked-storages N] [--max-inactive-split-bytes N] [--allow-incomplete]\n"
    "        CI gate: exit 0 when every limit holds, 1 when one fails or the recording\n"
    "        is missing something (incomplete, events dropped, ...)\n"
    "  graph DB [--at-exit | --at-peak | --at TIME] [--format text|dot|json]\n"
    "        the storage-sharing graph: storages, their tensors and views\n"
    "  fragmentation DB [--at-exit | --at-peak | --at TIME | --at-event SEQ]\n"
    "                   [--allocator NAME] [--format text|json|svg]\n"
    "        a caching allocator's block map and fragmentation, replayed from its events\n"
    "  export DB [--format perfetto] [--max-events-per-thread N] [-o FILE]\n"
    "        Chrome trace-event JSON for Perfetto UI and chrome://tracing\n"
    "  merge OUT.db IN.db...\n"
    "        the recordings of one job in one database, with a processes table\n"
    "\n"
    "  tpprof <command> --help   options of one command\n"
    "  tpprof --version          version and database schema read\n";

int main(int argc, char **argv) {
    if (argc < 2) {
        fputs(usage, stderr);
        return TPPROF_EXIT_USAGE;
    }
    const char *cmd = argv[1];
    atexit(tpprof_symbolize_release);
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        fputs(usage, stdout);
        return TPPROF_EXIT_OK;
    }
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "-V") == 0) {
        printf("tpprof %s (database schema %d)\n", TPPROF_VERSION, TPPROF_SCHEMA_VERSION);
        return TPPROF_EXIT_OK;
    }
    if (strcmp(cmd, "run") == 0)
        return tpprof_cmd_run(argc - 1, argv + 1);
    if (strcmp(cmd, "report") == 0)
        return tpprof_cmd_report(argc - 1, argv + 1);
    if (strcmp(cmd, "check") == 0)
        return tpprof_cmd_check(argc - 1, argv + 1);
    if (strcmp(cmd, "graph") == 0)
        return tpprof_cmd_graph(argc - 1, argv + 1);
    if (strcmp(cmd, "fragmentation") == 0)
        return tpprof_cmd_fragmentation(argc - 1, argv + 1);
    if (strcmp(cmd, "export") == 0)
        return tpprof_cmd_export(argc - 1, argv + 1);
    if (strcmp(cmd, "merge") == 0)
        return tpprof_cmd_merge(argc - 1, argv + 1);
    fprintf(stderr, "tpprof: unknown command '%s' (try tpprof --help)\n", cmd);
    return TPPROF_EXIT_USAGE;
}
