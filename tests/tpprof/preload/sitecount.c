// sitecount.c: a scenario of the preload suite (tests/tpprof/meson.build gives
// each mode its test; harness.h runs the program under libtpprof.so).
// Modes: sites_new, sites_changed, sites_exact. The program (progs/sitecount.c)
// runs with a flush period of ten minutes (TPPROF_TEST_FLUSH_MS), so that a
// periodic flush while it runs is one the site counts made due
// (writer/writer.c); meta.flushes_count counts those.
#include "harness.h"

#define NO_PERIOD "TPPROF_TEST_FLUSH_MS=600000"

static char *sitecount_prog;

static bool sitecount(const char *name, const char *make, const char *nfree, const char *keep) {
    char *argv[] = {sitecount_prog, (char *)make, (char *)nfree, (char *)keep, NULL};
    struct result r;
    if (!record(name, argv, NO_PERIOD, &r)) return false;
    CHECK_MSG(strcmp(r.out, "sitecount ok\n") == 0, "stdout '%s'", r.out);
    return true;
}

static int64_t meta(const char *key) { return qi("SELECT value FROM meta WHERE key = '%s'", key); }

// 100,000 new sites, their blocks kept: at least one flush while the
// program runs, and the final one has fewer than 65,536 left; 30,000: none.
static void test_new(void) {
    if (sitecount("few.db", "30000", "0", "keep")) {
        CHECK_MSG(meta("flushes_count") == 0, "30,000 new sites: %lld periodic flushes", (long long)meta("flushes_count"));
        CHECK_MSG(meta("final_flush_site_rows") >= 30000, "the final flush wrote them: %lld",
                  (long long)meta("final_flush_site_rows"));
    }
    if (sitecount("many.db", "100000", "0", "keep")) {
        CHECK_MSG(meta("flushes_count") >= 1, "100,000 new sites: %lld periodic flushes", (long long)meta("flushes_count"));
        CHECK_MSG(meta("flushes_site_rows") >= 65536, "%lld site rows written while it ran",
                  (long long)meta("flushes_site_rows"));
        CHECK_MSG(meta("final_flush_site_rows") < 65536, "the final flush wrote %lld site rows",
                  (long long)meta("final_flush_site_rows"));
    }
}

// 100,000 sites written while the program runs, then all their blocks
// freed: a flush of those changed sites while it still runs, and the final
// flush has little left.
static void test_changed(void) {
    if (!sitecount("changed.db", "100000", "100000", NULL)) return;
    CHECK_MSG(meta("flushes_count") >= 2, "new sites, then changed ones: %lld periodic flushes",
              (long long)meta("flushes_count"));
    CHECK_MSG(meta("flushes_site_rows") >= 100000 + 65536, "%lld site rows written while it ran",
              (long long)meta("flushes_site_rows"));
    CHECK_MSG(meta("final_flush_site_rows") < 65536, "the final flush wrote %lld site rows",
              (long long)meta("final_flush_site_rows"));
}

// Half the blocks freed while the program runs (a flush due for them), the
// others at exit: every site's row holds its exact totals.
static void test_exact(void) {
    if (!sitecount("exact.db", "100000", "50000", NULL)) return;
    int64_t exact = qi("SELECT count(*) FROM sites WHERE kind = 1 AND alloc_count = 1 AND free_count = 1"
                       " AND freed_bytes = alloc_bytes AND alloc_bytes BETWEEN 16 AND 128 AND peak_count = 1"
                       " AND peak_bytes = alloc_bytes");
    CHECK_MSG(exact == 100000, "%lld of 100,000 sites with exact totals", (long long)exact);
    site_totals_match(); // (written by periodic flushes and the final one)
    CHECK_MSG(qi("SELECT count(*) FROM sites WHERE kind = 1 AND alloc_bytes BETWEEN 16 AND 128"
                 " AND free_count <> alloc_count") == 0,
              "no site of those blocks with a free missing");
    CHECK_MSG(meta("flushes_count") >= 2 && meta("flushes_site_rows") > 100000,
              "written by periodic flushes too: %lld flushes, %lld site rows", (long long)meta("flushes_count"),
              (long long)meta("flushes_site_rows"));
}

int preload_scenario(const char *mode, char *prog, char *extra) {
    (void)extra;
    sitecount_prog = prog;
    if (strcmp(mode, "sites_new") == 0) test_new();
    else if (strcmp(mode, "sites_changed") == 0) test_changed();
    else if (strcmp(mode, "sites_exact") == 0) test_exact();
    else return -1;
    return check_failures;
}
