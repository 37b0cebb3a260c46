// small_views.c: a scenario of the preload suite (tests/tpprof/meson.build gives
// each mode its test; harness.h runs the program under libtpprof.so).
// Mode: small_views.
#include "harness.h"

static void test_small_views(char *prog) {
    char *argv[] = {prog, NULL};
    struct result r;
    if (!record_tensors("small_views.db", argv, NULL, &r)) return;
    // At the peak (step 5's relu): the 5 activations pinned by the rows kept
    // at steps 0-4, plus step 5's input and activation.
    CHECK_MSG(qi("SELECT count(*) FROM storages WHERE at_peak AND nbytes = 4194304") == 7, "7 x 4 MiB at the peak (%lld)",
          (long long)qi("SELECT count(*) FROM storages WHERE at_peak AND nbytes = 4194304"));
    CHECK_MSG(qi("SELECT value FROM meta WHERE key = 'peak_storage_bytes'") >= 7 * 4194304 &&
              qi("SELECT value FROM meta WHERE key = 'peak_storage_bytes'") < 7 * 4194304 + 65536,
          "peak_storage_bytes");
    const char *pinned = "SELECT count(*) FROM storages s WHERE s.at_peak AND s.nbytes = 4194304 AND "
                         "(SELECT count(*) FROM tensors t WHERE t.storage_id = s.id AND t.at_peak AND "
                         "t.sizes = '[1024]' AND t.strides = '[1]' AND t.dtype = 'float32' AND t.base_id != 0) = 1";
    CHECK_MSG(qi("%s", pinned) == 5, "5 of them pinned by one 1024-element view each (%lld)", (long long)qi("%s", pinned));
    CHECK_MSG(qi("SELECT count(*) FROM tensors t WHERE t.at_peak AND t.sizes = '[1024]' AND "
             "t.base_id IN (SELECT id FROM tensors WHERE sizes = '[1024, 1024]' AND storage_id = t.storage_id)") == 5,
          "each view's base is the activation on the same storage");
    CHECK_MSG(qi("SELECT count(*) FROM storages WHERE freed_ns IS NULL") == 0, "nothing alive at exit");
}

int preload_scenario(const char *mode, char *prog, char *extra) {
    (void)extra;
    if (strcmp(mode, "small_views") == 0) test_small_views(prog);
    else return -1;
    return check_failures;
}
