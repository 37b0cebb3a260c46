// test_html_browser.c: the HTML report opened in a real browser, headless
// Chromium (Debian's `chromium`), from file://: the script ran without an
// error (the page's own error hook writes any into the DOM), the timeline
// and the flame graph were drawn, the flame graph's top frame is main, and a
// click-free page already shows what was live. Saves a screenshot of each
// page next to the test (argv[2]) for a person to look at.
//
// Exits 77 (skipped) when no chromium is installed: scripts/deps.sh installs it.
#define _POSIX_C_SOURCE 200809L
#include "fixture.h"
#include "harness.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char chromium[512];
static const char *shots = ".";

static bool find_chromium(void) {
    const char *env = getenv("TPPROF_TEST_CHROMIUM");
    if (env && *env) {
        snprintf(chromium, sizeof chromium, "%s", env);
        return access(chromium, X_OK) == 0;
    }
    const char *path = getenv("PATH");
    static const char *const names[] = {"chromium", "chromium-browser"};
    for (size_t k = 0; k < 2 && path; k++) {
        const char *p = path;
        while (*p) {
            size_t len = strcspn(p, ":");
            snprintf(chromium, sizeof chromium, "%.*s/%s", (int)len, p, names[k]);
            if (len && access(chromium, X_OK) == 0)
                return true;
            p += len + (p[len] == ':');
        }
    }
    return false;
}

// Run chromium headless on file://page with one more argument (--dump-dom or
// --screenshot=PATH). Returns its result.
static run_result browse(const char *page, const char *what) {
    char url[1024], profile[600];
    snprintf(url, sizeof url, "file://%s", page);
    snprintf(profile, sizeof profile, "--user-data-dir=%s", harness_path("chromium-profile"));
    char *argv[] = {chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                    "--no-first-run", "--hide-scrollbars", "--window-size=1280,2400",
                    "--virtual-time-budget=5000", profile, (char *)what, url, NULL};
    char *env[] = {"HOME=/tmp", NULL};
    return harness_run(argv, env, NULL);
}

static void check_page(const char *db, const char *name, bool tensors) {
    char page[600], shot[600], copy[600];
    snprintf(page, sizeof page, "%s", harness_path(name));
    run_result r = harness_tpprof("report", db, "--format", "html", "-o", page, NULL);
    CHECK(r.status == 0, "%s: status %d: %s", name, r.status, r.err);
    harness_result_free(&r);

    r = browse(page, "--dump-dom");
    CHECK(r.status == 0, "%s: chromium status %d: %s", name, r.status, r.err);
    const char *dom = r.out;
    CHECK(strstr(dom, "data-errors=\"0\""), "%s: no script error:\n%.2000s", name, dom);
    CHECK(strstr(dom, "<pre id=\"tp-errors\" class=\"warn\" hidden=\"\"></pre>"), "%s: error box empty", name);
    CHECK(strstr(dom, "data-ready=\"1\""), "%s: the script ran to its end", name);
    CHECK(strstr(dom, "<svg width=") && strstr(dom, "id=\"timeline-svg\""), "%s: timeline drawn", name);
    CHECK(strstr(dom, "id=\"peak-mark\""), "%s: peak marked", name);
    CHECK(strstr(dom, "id=\"flame-chart\" data-top=\"main\""), "%s: the flame graph's top frame is main:\n%.3000s",
          name, strstr(dom, "flame-chart") ? strstr(dom, "flame-chart") : dom);
    CHECK(harness_count(dom, "class=\"frame\"") >= 5, "%s: frames drawn", name);
    CHECK(strstr(dom, "data-name=\"inner_helper\""), "%s: the biggest site's frame", name);
    const char *live = strstr(dom, "<div id=\"live-at\">");
    CHECK(live && strstr(live, "<table>") && strstr(live, "by allocation site"), "%s: what was live is shown", name);
    CHECK(strstr(dom, "id=\"verdict\" class=\"verdict leak\""), "%s: verdict", name);
    if (tensors)
        CHECK(strstr(dom, "cache_put (cache.c:27)"), "%s: the unmatched references", name);
    harness_result_free(&r);

    // A link to a moment and a search: #at=3000000 shows what was live at
    // 3 ms (a click on the timeline does the same), #search= lights frames.
    if (tensors) {
        char linked[700];
        snprintf(linked, sizeof linked, "%s#at=3000000&search=inner", page);
        r = browse(linked, "--dump-dom");
        live = strstr(r.out, "<div id=\"live-at\">");
        CHECK(live && strstr(live, "Live at 0.003 s: 1.00 MiB in 2 blocks"), "%s: live at 3 ms:\n%.600s", name,
              live ? live : r.out);
        CHECK(live && strstr(live, "inner_helper (helpers.h:7)"), "%s: the 1 MiB block's site", name);
        CHECK(strstr(r.out, "class=\"frame match\" data-depth=\"3\" data-name=\"inner_helper\""),
              "%s: the search lights inner_helper:\n%.2000s", name, strstr(r.out, "flame-chart") ? strstr(r.out, "flame-chart") : r.out);
        CHECK(strstr(r.out, "<span id=\"flame-matched\">matched 1.00 MiB (91.8%)</span>"), "%s: and says its share", name);
        CHECK(strstr(r.out, "data-errors=\"0\""), "%s: no script error", name);
        harness_result_free(&r);
    }

    snprintf(shot, sizeof shot, "--screenshot=%s/%.*s.png", shots, (int)(strlen(name) - 5), name);
    r = browse(page, shot);
    CHECK(r.status == 0, "%s: screenshot status %d: %s", name, r.status, r.err);
    CHECK(access(shot + strlen("--screenshot="), R_OK) == 0, "%s: screenshot at %s", name, shot);
    harness_result_free(&r);
    // Keep the page beside its screenshot.
    snprintf(copy, sizeof copy, "%s/%s", shots, name);
    char *text = harness_read_file(page);
    FILE *f = text ? fopen(copy, "w") : NULL;
    if (f) {
        fputs(text, f);
        fclose(f);
    }
    free(text);
}

int main(int argc, char **argv) {
    harness_init(argc, argv);
    if (argc > 2)
        shots = argv[2];
    if (!find_chromium()) {
        fprintf(stderr, "SKIP: no chromium in PATH (scripts/deps.sh installs it)\n");
        return 77;
    }
    const char *full = harness_path("full.db");
    CHECK(fixture_write_edited(full, &(fixture_options){.tensors = true, .full_mode = true},
                               "INSERT INTO events VALUES (100, 1000000, 100, 1, 1, 65536, 4096, 3, NULL),"
                               "(101, 2000000, 100, 1, 1, 9437184, 1048576, 6, NULL),"
                               "(102, 4000000, 100, 2, NULL, 9437184, NULL, NULL, NULL);"
                               "INSERT INTO timeline VALUES (1000000, 4096, 1, 0, 1, 0, 900000),"
                               "(3000000, 1052672, 2, 0, 2, 0, 2000000), (7000000, 4096, 1, 0, 2, 1, 1000000)") == 0,
          "fixture");
    char *full_db = strdup(full);
    const char *plain = harness_path("plain.db");
    CHECK(fixture_write_edited(plain, &(fixture_options){0},
                               "INSERT INTO timeline VALUES (1000000, 4096, 1, 0, 1, 0, 900000),"
                               "(3000000, 14000, 2, 8192, 2, 0, 1500000)") == 0,
          "fixture");
    char *plain_db = strdup(plain);
    check_page(full_db, "html_full.html", true);
    check_page(plain_db, "html_aggregate.html", false);
    free(full_db);
    free(plain_db);
    return harness_finish();
}
