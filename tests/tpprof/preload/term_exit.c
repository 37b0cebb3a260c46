// term_exit.c: a scenario of the preload suite (tests/tpprof/meson.build gives
// each mode its test; harness.h runs the program under libtpprof.so).
// Mode: term_exit.
#include "harness.h"

// A child sent SIGTERM while its _exit writes the recording (the leak scan
// of 400,000 blocks) ends as natively, of the signal or of its _exit, and
// its recording is complete: the signal waits for the write instead of the
// write's lock (which the same thread holds) for 2 s, then cutting it.
static void test_term_exit(char *prog) {
    char out[600];
    db_path(out, sizeof out, "term.db");
    char *argv[] = {prog, NULL};
    for (int round = 0; round < 3; round++) {
        struct result r = run(out, argv, NULL);
        CHECK_MSG(r.status == 0, "exit status %d: %s", r.status, r.err);
        int child = 0;
        char how[16] = "";
        double ms = -1;
        const char *c = strstr(r.out, "child=");
        if (!c || sscanf(c, "child=%d how=%15s ms=%lf", &child, how, &ms) != 3) {
            CHECK_MSG(false, "the program printed: %s", r.out);
            return;
        }
        CHECK_MSG(strcmp(how, "signal") == 0 || strcmp(how, "exit") == 0, "the child ended %s", how);
        if (!open_child_db("term", child, "child")) return;
        char reason[32] = "";
        qs(reason, sizeof reason, "SELECT value FROM meta WHERE key = 'end_reason'");
        // Ended by the signal when it came before the write was over.
        if (strcmp(how, "signal") == 0)
            CHECK_MSG(strcmp(reason, "signal") == 0 && qi("SELECT value FROM meta WHERE key = 'end_signal'") == SIGTERM,
                      "end_reason %s for a child the signal ended", reason);
        CHECK_MSG(qi("SELECT COUNT(*) FROM live_blocks WHERE size = 64") >= 400000, "the child's blocks: %lld",
                  (long long)qi("SELECT COUNT(*) FROM live_blocks WHERE size = 64"));
    }
}

int preload_scenario(const char *mode, char *prog, char *extra) {
    (void)extra;
    if (strcmp(mode, "term_exit") == 0) test_term_exit(prog);
    else return -1;
    return check_failures;
}
