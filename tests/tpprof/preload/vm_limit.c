// vm_limit.c: a scenario of the preload suite (tests/tpprof/meson.build gives
// each mode its test; harness.h runs the program under libtpprof.so).
// Mode: vmlimit.
#include "harness.h"

// Under a 256 MiB limit on its address space (progs/vmlimit.c) a program
// gets nearly as many MiB as natively: the recorder reserves little. The
// limit is set before an exec, so the exec'd image is recorded under it.
static void test_vm_limit(char *prog) {
    char out[600];
    db_path(out, sizeof out, "vmlimit.db");
    char *argv[] = {prog, "256", NULL};
    struct result native = run(NULL, argv, NULL);
    struct result r = run(out, argv, NULL);
    int n0 = -1, n1 = -1;
    sscanf(native.out, "filled %d", &n0);
    sscanf(r.out, "filled %d", &n1);
    CHECK_MSG(native.status == 0 && n0 > 128, "native run: status %d, '%s'", native.status, native.out);
    CHECK_MSG(r.status == 0 && n1 >= n0 - 48, "recorded: %d MiB of native %d (status %d, stderr '%s')", n1, n0, r.status, r.err);
    CHECK_MSG(strstr(r.err, "tpprof:") == NULL, "no complaint from tpprof: '%s'", r.err);
    char edb[700];
    snprintf(edb, sizeof edb, "%s/vmlimit.exec1.db", tmpdir);
    if (!open_db(edb)) {
        CHECK_MSG(false, "no database for the image under the limit at %s", edb);
        return;
    }
    expect_complete("the image under the limit");
    CHECK_MSG(count_blocks(1, 2222, 1, "vm_leak", 0) == 1, "its lost block");
}

int preload_scenario(const char *mode, char *prog, char *extra) {
    (void)extra;
    if (strcmp(mode, "vmlimit") == 0) test_vm_limit(prog);
    else return -1;
    return check_failures;
}
