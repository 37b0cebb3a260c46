// test_device.c: device (CUDA) memory in `tpprof report`, `check`, `export`
// and the HTML page, on the hand-written device tables of
// device_fixture.h, and an older recording without them.
//
// Usage: test_device TPPROF SCENARIO [CUPTI_BUILT]; meson registers one test
// per scenario (device_<scenario>).
#define _POSIX_C_SOURCE 200809L
#include "device_fixture.h"

#include <sqlite3.h>
#include "fixture.h"
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *dev_db, *old_db;
// dev_db as aggregate mode writes it: device_sites and device_peaks, and
// without the blocks a quiet site's freed ones (train_step's two).
static char *sites_db;
static const char sites_sql[] =
    "CREATE TABLE device_sites(stack_id INTEGER NOT NULL, kind INTEGER NOT NULL, device INTEGER NOT NULL,"
    " api TEXT NOT NULL, alloc_count INTEGER NOT NULL, alloc_bytes INTEGER NOT NULL, free_count INTEGER NOT NULL,"
    " freed_bytes INTEGER NOT NULL, peak_count INTEGER NOT NULL, peak_bytes INTEGER NOT NULL,"
    " total_peak_count INTEGER NOT NULL, total_peak_bytes INTEGER NOT NULL, PRIMARY KEY (stack_id, kind, device));"
    "CREATE TABLE device_peaks(scope TEXT NOT NULL, device INTEGER NOT NULL, peak_bytes INTEGER NOT NULL,"
    " peak_time_ns INTEGER NOT NULL, PRIMARY KEY (scope, device));"
    "INSERT INTO device_sites VALUES"
    " (20, 20, 0, 'cudaMalloc', 1, 1048576, 0, 0, 1, 1048576, 1, 1048576),"
    " (21, 21, 0, 'cudaMallocAsync', 2, 8388608, 2, 8388608, 2, 8388608, 2, 8388608),"
    " (22, 20, 0, 'cudaMalloc', 1, 2097152, 0, 0, 1, 2097152, 1, 2097152),"
    " (23, 25, 0, 'cuMemAddressReserve', 1, 67108864, 0, 0, 0, 0, 0, 0),"
    " (23, 26, 0, 'cuMemCreate', 1, 2097152, 1, 2097152, 1, 2097152, 1, 2097152),"
    " (23, 27, 0, 'cuMemMap', 1, 2097152, 1, 2097152, 0, 0, 0, 0),"
    " (26, 20, 1, 'cuMemAlloc_v2', 1, 8388608, 1, 8388608, 0, 0, 1, 8388608),"
    " (26, 22, 1, 'cudaMallocManaged', 1, 16777216, 0, 0, 1, 16777216, 0, 0),"
    " (25, 24, -1, 'cudaMallocHost', 2, 98304, 1, 65536, 1, 65536, 0, 0);"
    "INSERT INTO device_peaks VALUES ('device', 0, 13631488, 4000000), ('device', 1, 16777216, 10000000),"
    " ('total', -1, 22020096, 4000000), ('pinned', -1, 65536, 1000000);"
    "DELETE FROM device_blocks WHERE stack_id = 21;";

static int sites_fixture_write(const char *path) {
    if (device_fixture_write(path) != 0)
        return -1;
    sqlite3 *db = NULL;
    int rc = sqlite3_open(path, &db) == SQLITE_OK && sqlite3_exec(db, sites_sql, NULL, NULL, NULL) == SQLITE_OK ? 0 : -1;
    if (rc != 0)
        fprintf(stderr, "sites fixture: %s\n", sqlite3_errmsg(db));
    sqlite3_close(db);
    return rc;
}

// The JSON of `report DB ARGS... --format json`, squashed (caller frees).
static char *report_json(const char *db, const char *a, const char *b) {
    run_result r = harness_tpprof("report", db, "--format", "json", a, b, NULL);
    CHECK(r.status == 0, "status %d: %s", r.status, r.err);
    CHECK(harness_json_valid(r.out), "not JSON: %.300s", r.out);
    char *s = harness_json_squash(r.out);
    harness_result_free(&r);
    return s;
}

// ---------------------------------------------------------------------------
// report

// The recorder's device_sites (aggregate mode: freed blocks past a site's
// first ones are no rows) give every figure the blocks gave: counts, top
// sites, per-device and total peaks with their stacks, leaks, pools.
static void test_sites_give_the_same_report_as_the_blocks(void) {
    const char *args[][4] = {
        {"--format", "json", "--peak", "--leaks"}, {"--peak", "--leaks", "--device", "0"},
        {"--peak", "--leaks", "--device", "1"}, {"--format", "json", "--device", "1"}, {"--peak", "--leaks", "--top", "20"},
    };
    for (size_t i = 0; i < sizeof args / sizeof *args; i++) {
        run_result a = harness_tpprof("report", dev_db, args[i][0], args[i][1], args[i][2], args[i][3], NULL);
        run_result b = harness_tpprof("report", sites_db, args[i][0], args[i][1], args[i][2], args[i][3], NULL);
        CHECK(a.status == 0 && b.status == 0, "%s %s: status %d %d: %s%s", args[i][0], args[i][2], a.status, b.status,
              a.err, b.err);
        // The paths differ; nothing else may.
        for (char *at; (at = strstr(b.out, "device_sites.db"));)
            memmove(at + strlen("device"), at + strlen("device_sites"), strlen(at + strlen("device_sites")) + 1);
        size_t k = 0;
        while (a.out[k] && a.out[k] == b.out[k])
            k++;
        CHECK(a.out[k] == b.out[k], "%s %s %s: reports differ at:\n%.400s\n-- blocks above, sites below --\n%.400s",
              args[i][0], args[i][1], args[i][2], a.out + k, b.out + k);
        harness_result_free(&a);
        harness_result_free(&b);
    }
    run_result r = harness_tpprof("report", sites_db, "--peak", NULL);
    CHECK(strstr(r.out, "\nDevice peak: all devices together 21.0 MiB at 0.004 s;"), "%s", r.out);
    harness_result_free(&r);
}

static void test_summary_has_each_device_pinned_host_and_vmm_apart(void) {
    run_result r = harness_tpprof("report", dev_db, "--leaks", NULL);
    CHECK(r.status == 0, "status %d: %s", r.status, r.err);
    CHECK(strstr(r.out, "  device 0    5 allocations, 13.0 MiB; peak 13.0 MiB at 0.004 s; at exit 3.00 MiB in 2 "
                        "blocks leaked (2.00 MiB in 1 ended by a device reset); pools reserved up to 16.0 MiB\n"),
          "%s", r.out);
    CHECK(strstr(r.out, "              4 failed calls (1 out of memory), 3 bad frees\n"), "%s", r.out);
    CHECK(strstr(r.out, "  device 1    2 allocations, 24.0 MiB; peak 16.0 MiB at 0.010 s; at exit 16.0 MiB in 1 "
                        "block leaked\n"),
          "%s", r.out);
    CHECK(strstr(r.out, "  pinned host 2 allocations, 96.0 KiB; peak 64.0 KiB at 0.001 s; at exit 32.0 KiB in 1 "
                        "block leaked\n"),
          "%s", r.out);
    // Reservations and mappings are shown, never added: device 0's 13 MiB
    // has the 2 MiB physical handle once, not the 64 MiB range or the mapping.
    CHECK(strstr(r.out, "  VMM         1 reservation (64.0 MiB of address space), 1 mapping (2.00 MiB): not counted"),
          "%s", r.out);
    CHECK(strstr(r.out, "  device      capture interpose; 5 failed calls, 3 bad frees"), "%s", r.out);
    // The host figures are the app recording's, untouched.
    CHECK(strstr(r.out, "  at exit     12.2 KiB in 4 blocks still allocated: lost 12.0 KiB in 2"), "%s", r.out);
    harness_result_free(&r);
}

static void test_leaks_are_grouped_by_stack_alive_or_ended_by_reset(void) {
    run_result r = harness_tpprof("report", dev_db, "--leaks", NULL);
    CHECK(r.status == 0, "status %d: %s", r.status, r.err);
    const char *s = strstr(r.out, "\nDevice leaks: 19.0 MiB in 3 blocks of device memory from 3 stacks");
    CHECK(s, "%s", r.out);
    if (s) {
        // Biggest first: managed on device 1, the reset's, then the cudaMalloc never freed.
        const char *managed = strstr(s, "16.0 MiB in      1 block   device 1  cuda_managed       cudaMallocManaged  "
                                        "alive at exit\n      dev1_work (multi.cu:70)\n      main (app.c:50)\n");
        const char *reset = strstr(s, "2.00 MiB in      1 block   device 0  cuda_device        cudaMalloc  ended by "
                                      "device_reset\n      reset_all (reset.cu:30)\n");
        const char *alive = strstr(s, "1.00 MiB in      1 block   device 0  cuda_device        cudaMalloc  alive at "
                                      "exit\n      leak_dev (dev.cu:10)\n");
        const char *pinned = strstr(s, "32.0 KiB in      1 block   host      cuda_pinned_host   cudaHostAlloc  alive at exit\n");
        const char *reserve = strstr(s, "64.0 MiB in      1 block   device 0  cuda_vmm_reserve   cuMemAddressReserve  "
                                        "alive at exit (address space, not counted)\n");
        CHECK(managed && reset && alive && pinned && reserve, "%s", s);
        CHECK(managed < reset && reset < alive && alive < pinned && pinned < reserve, "order: %s", s);
        // Freed blocks are no leak: the async blocks, the physical handle, the mapping.
        const char *bad = strstr(s, "\nDevice bad frees");
        size_t len = bad ? (size_t)(bad - s) : strlen(s);
        char *leaks = strndup(s, len);
        CHECK(!strstr(leaks, "train_step") && !strstr(leaks, "cuMemCreate") && !strstr(leaks, "cuMemMap"), "%s",
              leaks);
        free(leaks);
    }
    CHECK(strstr(r.out, "       1  double free  device 0  cudaFree, first at 0x7f0000200000\n      bad_free (bad.cu:50)\n"),
          "%s", r.out);
    CHECK(strstr(r.out, "       1  free of a pointer never allocated  device 0  cudaFree, first at 0x1234\n"), "%s",
          r.out);
    CHECK(strstr(r.out, "       1  free of a host pointer  device 0  cudaFree, first at 0x5555aaaa0000\n"), "%s",
          r.out);
    harness_result_free(&r);
}

static void test_peak_per_device_shows_the_stacks_live_at_it(void) {
    run_result r = harness_tpprof("report", dev_db, "--peak", NULL);
    CHECK(r.status == 0, "status %d: %s", r.status, r.err);
    const char *d0 = strstr(r.out, "\nDevice peak: device 0 13.0 MiB at 0.004 s; live at that moment by site:\n"
                                   "    8.00 MiB in      2 blocks  device 0  cuda_async         cudaMallocAsync\n"
                                   "      train_step (train.cu:20)\n");
    CHECK(d0, "%s", r.out);
    const char *d1 = strstr(r.out, "\nDevice peak: device 1 16.0 MiB at 0.010 s; live at that moment by site:\n"
                                   "    16.0 MiB in      1 block   device 1  cuda_managed       cudaMallocManaged\n");
    CHECK(d1, "%s", r.out);
    // All devices together peak at 4 ms (21 MiB), not the sum of the peaks (29 MiB).
    const char *all = strstr(r.out, "\nDevice peak: all devices together 21.0 MiB at 0.004 s;");
    CHECK(all, "%s", r.out);
    if (d0 && d1) {
        // Device 0 at its peak: the reset's block, the physical handle and
        // the leak, never the mapping; device 1's block is not in its list.
        size_t len = (size_t)(d1 - d0);
        char *sec = strndup(d0, len);
        CHECK(strstr(sec, "2.00 MiB in      1 block   device 0  cuda_device        cudaMalloc\n      reset_all"), "%s",
              sec);
        CHECK(strstr(sec, "2.00 MiB in      1 block   device 0  cuda_vmm_physical  cuMemCreate\n"), "%s", sec);
        CHECK(strstr(sec, "1.00 MiB in      1 block   device 0  cuda_device        cudaMalloc\n      leak_dev"), "%s",
              sec);
        CHECK(!strstr(sec, "cuMemMap") && !strstr(sec, "device 1"), "%s", sec);
        free(sec);
    }
    CHECK(strstr(r.out, "\nDevice peak: pinned host 64.0 KiB at 0.001 s;"), "%s", r.out);
    harness_result_free(&r);
}

static void test_device_option_keeps_only_that_device(void) {
    run_result r = harness_tpprof("report", dev_db, "--device", "1", NULL);
    CHECK(r.status == 0, "status %d: %s", r.status, r.err);
    CHECK(strstr(r.out, "  device 1    2 allocations, 24.0 MiB;"), "%s", r.out);
    CHECK(!strstr(r.out, "device 0") && !strstr(r.out, "pinned host") && !strstr(r.out, "VMM"), "%s", r.out);
    CHECK(strstr(r.out, "  device      capture interpose; 1 failed call, 0 bad frees"), "%s", r.out);
    CHECK(strstr(r.out, "\nDevice leaks: 16.0 MiB in 1 block of device memory from 1 stack"), "%s", r.out);
    CHECK(strstr(r.out, "\nDevice peak: device 1 16.0 MiB"), "%s", r.out);
    CHECK(!strstr(r.out, "all devices together"), "%s", r.out);
    harness_result_free(&r);
    // A device the program never used.
    r = harness_tpprof("report", dev_db, "--device", "7", NULL);
    CHECK(r.status == 0, "status %d: %s", r.status, r.err);
    CHECK(strstr(r.out, "  device      no device memory was allocated on device 7; capture interpose\n"), "%s", r.out);
    harness_result_free(&r);
    harness_expect_usage_error("--device x", harness_tpprof("report", dev_db, "--device", "x", NULL), "--device");
    harness_expect_usage_error("--device -1", harness_tpprof("report", dev_db, "--device", "-1", NULL), "--device");
}

static void test_json_device_object_has_the_figures(void) {
    char *s = report_json(dev_db, NULL, NULL);
    CHECK(strstr(s, "\"device\":{\"recorded\":true,\"capture\":\"interpose\",\"filter\":null,\"calls_failed\":5,"
                    "\"bad_frees\":3,\"devices\":[{\"device\":0,\"allocations\":5,\"allocated_bytes\":13631488,"
                    "\"frees\":3,\"peak_bytes\":13631488,\"peak_time_ns\":4000000,\"leaked_bytes\":3145728,"
                    "\"leaked_count\":2,\"reset_bytes\":2097152,\"reset_count\":1,\"failed_calls\":4,\"oom_calls\":1,"
                    "\"bad_frees\":3,\"pool_reserved_peak_bytes\":16777216,\"vmm_reservations\":1,"
                    "\"vmm_reserved_bytes\":67108864,\"vmm_mappings\":1,\"vmm_mapped_bytes\":2097152,"
                    "\"peak_sites\":[{\"device\":0,\"kind\":\"cuda_async\",\"api\":\"cudaMallocAsync\",\"counted\":true,"
                    "\"bytes\":8388608,\"count\":2,\"stack\":[{\"function\":\"train_step\""),
          "%.3000s", strstr(s, "\"device\":{") ? strstr(s, "\"device\":{") : s);
    CHECK(strstr(s, "{\"device\":1,\"allocations\":2,\"allocated_bytes\":25165824,\"frees\":1,\"peak_bytes\":16777216,"
                    "\"peak_time_ns\":10000000,\"leaked_bytes\":16777216,\"leaked_count\":1,"),
          "device 1");
    CHECK(strstr(s, "\"pool_reserved_peak_bytes\":null"), "device 1's pools unknown");
    CHECK(strstr(s, "\"total\":{\"device\":null,\"allocations\":7,\"allocated_bytes\":38797312,\"frees\":4,"
                    "\"peak_bytes\":22020096,\"peak_time_ns\":4000000,\"leaked_bytes\":19922944,\"leaked_count\":3,"),
          "total");
    CHECK(strstr(s, "\"pinned_host\":{\"device\":-1,\"allocations\":2,\"allocated_bytes\":98304,\"frees\":1,"
                    "\"peak_bytes\":65536,\"peak_time_ns\":1000000,\"leaked_bytes\":32768,\"leaked_count\":1,"),
          "pinned");
    CHECK(strstr(s, "\"leaks\":[{\"device\":1,\"kind\":\"cuda_managed\",\"api\":\"cudaMallocManaged\",\"counted\":true,"
                    "\"bytes\":16777216,\"count\":1,\"ended_by\":null,"),
          "leaks[0]");
    CHECK(strstr(s, "{\"device\":0,\"kind\":\"cuda_device\",\"api\":\"cudaMalloc\",\"counted\":true,\"bytes\":2097152,"
                    "\"count\":1,\"ended_by\":\"device_reset\",\"stack\":[{\"function\":\"reset_all\""),
          "reset leak");
    CHECK(strstr(s, "{\"device\":0,\"kind\":\"cuda_vmm_reserve\",\"api\":\"cuMemAddressReserve\",\"counted\":false,"
                    "\"bytes\":67108864,\"count\":1,\"ended_by\":null,"),
          "reservation leak, not counted");
    CHECK(strstr(s, "\"bad_free_list\":[{\"flag\":\"double_free\",\"device\":0,\"api\":\"cudaFree\","
                    "\"address\":\"0x7f0000200000\",\"count\":1,"),
          "bad frees");
    CHECK(strstr(s, "{\"flag\":\"host_pointer\",\"device\":0,\"api\":\"cudaFree\",\"address\":\"0x5555aaaa0000\""),
          "host pointer free");
    free(s);
    // --device 0 in JSON: the filter, and only device 0's rows.
    s = report_json(dev_db, "--device", "0");
    CHECK(strstr(s, "\"device\":{\"recorded\":true,\"capture\":\"interpose\",\"filter\":0,\"calls_failed\":4,"
                    "\"bad_frees\":3,\"devices\":[{\"device\":0,"),
          "%.400s", strstr(s, "\"device\":{") ? strstr(s, "\"device\":{") : s);
    CHECK(!strstr(s, "\"device\":1,"), "device 1 filtered out");
    free(s);
}

// ---------------------------------------------------------------------------
// check

static void test_check_device_gates_pass_and_fail_with_exit_codes(void) {
    // Only device gates: the default lost gate does not apply (the host
    // side has 12 KiB lost), so all passing is exit 0.
    HARNESS_EXPECT_CHECK(0,
                         "PASS device leaked bytes 19922944 <= 19922944\n"
                         "PASS device peak bytes 22020096 <= 22020096\n",
                         dev_db, "--max-device-leaked-bytes", "19M", "--max-device-peak-bytes", "21M");
    HARNESS_EXPECT_CHECK(1,
                         "FAIL device leaked bytes 19922944 > 0: 16777216 B in dev1_work (multi.cu:70) "
                         "(cudaMallocManaged)\n",
                         dev_db, "--max-device-leaked-bytes", "0");
    HARNESS_EXPECT_CHECK(1,
                         "FAIL device peak bytes 22020096 > 20971520: 8388608 B in train_step (train.cu:20) "
                         "(cudaMallocAsync)\n",
                         dev_db, "--max-device-peak-bytes", "20M");
    // Per device (DEV:N), repeatable, in the order given per gate.
    HARNESS_EXPECT_CHECK(1,
                         "PASS device 0 leaked bytes 3145728 <= 3145728\n"
                         "FAIL device 1 leaked bytes 16777216 > 16776192: 16777216 B in dev1_work (multi.cu:70) "
                         "(cudaMallocManaged)\n"
                         "PASS device 0 peak bytes 13631488 <= 13631488\n"
                         "FAIL device 1 peak bytes 16777216 > 15728640: 16777216 B in dev1_work (multi.cu:70) "
                         "(cudaMallocManaged)\n"
                         "PASS device 5 peak bytes 0 <= 0\n",
                         dev_db, "--max-device-leaked-bytes", "0:3M", "--max-device-leaked-bytes=1:16383k",
                         "--max-device-peak-bytes", "0:13M", "--max-device-peak-bytes", "1:15M",
                         "--max-device-peak-bytes", "5:0");
    // The reset's block counts as leaked on device 0.
    HARNESS_EXPECT_CHECK(1,
                         "FAIL device 0 leaked bytes 3145728 > 1048576: 2097152 B in reset_all (reset.cu:30) "
                         "(cudaMalloc)\n",
                         dev_db, "--max-device-leaked-bytes", "0:1M");
}

static void test_check_device_gates_in_junit_and_with_host_gates(void) {
    const char *junit = harness_path("device.xml");
    run_result r = harness_tpprof("check", dev_db, "--max-lost-bytes", "12k", "--max-device-leaked-bytes", "0:1M",
                                  "--max-device-peak-bytes", "1G", "--junit", junit, NULL);
    CHECK(r.status == 1, "status %d: %s", r.status, r.out);
    CHECK(strcmp(r.out, "PASS lost bytes 12288 <= 12288\n"
                        "FAIL device 0 leaked bytes 3145728 > 1048576: 2097152 B in reset_all (reset.cu:30) "
                        "(cudaMalloc)\n"
                        "PASS device peak bytes 22020096 <= 1073741824\n") == 0,
          "%s", r.out);
    harness_result_free(&r);
    char *xml = harness_read_file(junit);
    CHECK(xml && strstr(xml, "<testcase classname=\"tpprof.check\" name=\"max-device-leaked-bytes-dev0\">"), "%s",
          xml ? xml : "(none)");
    CHECK(xml && strstr(xml, "<testcase classname=\"tpprof.check\" name=\"max-device-peak-bytes\"/>"), "%s",
          xml ? xml : "(none)");
    CHECK(xml && strstr(xml, "tests=\"3\" failures=\"1\""), "%s", xml ? xml : "(none)");
    free(xml);
}

static void test_check_reports_bad_frees_and_failed_calls_without_failing(void) {
    run_result r = harness_tpprof("check", dev_db, "--max-device-leaked-bytes", "1G", NULL);
    CHECK(r.status == 0, "status %d: %s%s", r.status, r.out, r.err);
    CHECK(strstr(r.err, ": 3 bad device frees (1 double, 1 of a pointer never allocated, 1 of a host pointer), "
                        "the first in bad_free (bad.cu:50)\n"),
          "%s", r.err);
    CHECK(strstr(r.err, ": 5 device calls failed (recorded as failed, not as allocations)\n"), "%s", r.err);
    harness_result_free(&r);
}

static void test_check_bad_device_limits_are_usage_errors(void) {
    harness_expect_usage_error("x:1", harness_tpprof("check", dev_db, "--max-device-peak-bytes", "x:1", NULL),
                               "--max-device-peak-bytes: 'x' is not a device ordinal");
    harness_expect_usage_error("0:", harness_tpprof("check", dev_db, "--max-device-peak-bytes", "0:", NULL),
                               "--max-device-peak-bytes");
    harness_expect_usage_error(":5", harness_tpprof("check", dev_db, "--max-device-leaked-bytes", ":5", NULL),
                               "expected N or DEV:N");
    harness_expect_usage_error("missing", harness_tpprof("check", dev_db, "--max-device-leaked-bytes", NULL),
                               "--max-device-leaked-bytes");
}

// A row (and device) given again takes the later limit: one gate, one
// line; the lines follow the table's order, not the command line's.
static void test_check_device_gate_given_again_takes_the_later_limit(void) {
    HARNESS_EXPECT_CHECK(0,
                         "PASS lost bytes 12288 <= 12288\n"
                         "PASS device 0 peak bytes 13631488 <= 13631488\n"
                         "PASS device peak bytes 22020096 <= 22020096\n",
                         dev_db, "--max-device-peak-bytes", "0:1M", "--max-device-peak-bytes", "0:13M",
                         "--max-device-peak-bytes", "21M", "--max-lost-bytes", "12k");
    // Each DEV:N is a gate of its own, up to 32 on one command line.
    char *argv[80];
    char limits[40][16];
    int n = 0;
    argv[n++] = (char *)harness_tpprof_path();
    argv[n++] = "check";
    argv[n++] = dev_db;
    for (int d = 0; d < 33; d++) {
        snprintf(limits[d], sizeof limits[d], "%d:1G", d);
        argv[n++] = "--max-device-peak-bytes";
        argv[n++] = limits[d];
    }
    argv[n] = NULL;
    harness_expect_usage_error("33 gates", harness_run(argv, NULL, NULL), "--max-device-peak-bytes: more than 32 gates");
    argv[n - 2] = NULL; // 32: all pass, one line each
    run_result r = harness_run(argv, NULL, NULL);
    CHECK(r.status == 0 && harness_lines(r.out) == 32, "status %d: %s%s", r.status, r.out, r.err);
    CHECK(strstr(r.out, "PASS device 31 peak bytes 0 <= 1073741824\n"), "%s", r.out);
    harness_result_free(&r);
}

// Several recordings: each device gate over the sum of their figures, the
// biggest named when it fails; a recording without device tables adds 0,
// and a total none of them recorded says so. Notes per recording.
static void test_check_several_recordings_sum_device_figures(void) {
    char *dev2 = strdup(harness_path("device2.db")), *old2 = strdup(harness_path("old2.db"));
    fixture_options fo = {0};
    CHECK(device_fixture_write(dev2) == 0 && fixture_write(old2, &fo) == 0, "fixtures");
    const char *junit = harness_path("several.xml");
    run_result r = harness_tpprof("check", dev_db, dev2, old_db, "--max-device-leaked-bytes", "30M",
                                  "--max-device-peak-bytes", "1:20M", "--junit", junit, NULL);
    CHECK(r.status == 1, "status %d: %s%s", r.status, r.out, r.err);
    char want[1024];
    snprintf(want, sizeof want,
             "FAIL total device leaked bytes 39845888 > 31457280 over 3 recordings (0 failing): 19922944 in %s\n"
             "FAIL total device 1 peak bytes 33554432 > 20971520 over 3 recordings (0 failing): 16777216 in %s\n",
             dev_db, dev_db);
    CHECK(strcmp(r.out, want) == 0, "got: %s", r.out);
    CHECK(harness_count(r.err, " bad device frees ") == 2 && strstr(r.err, dev2) && !strstr(r.err, old_db),
          "a note per recording with device tables: %s", r.err);
    harness_result_free(&r);
    char *xml = harness_read_file(junit);
    CHECK(xml && strstr(xml, "name=\"max-device-peak-bytes-dev1\">") && strstr(xml, "tests=\"2\" failures=\"2\""),
          "%s", xml ? xml : "(none)");
    free(xml);
    // A recording that fails a device gate is a line of its own.
    r = harness_tpprof("check", dev_db, old_db, "--max-device-leaked-bytes", "0:1M", NULL);
    CHECK(r.status == 1, "status %d: %s%s", r.status, r.out, r.err);
    snprintf(want, sizeof want,
             "FAIL %s: device 0 leaked bytes 3145728 > 1048576: 2097152 B in reset_all (reset.cu:30) (cudaMalloc)\n"
             "FAIL total device 0 leaked bytes 3145728 > 1048576 over 2 recordings (1 failing): 3145728 in %s\n",
             dev_db, dev_db);
    CHECK(strcmp(r.out, want) == 0, "got: %s", r.out);
    harness_result_free(&r);
    // None recorded device memory: the total passes and says so.
    r = harness_tpprof("check", old_db, old2, "--max-device-peak-bytes", "0", "--max-lost-bytes", "24k", NULL);
    CHECK(r.status == 0, "status %d: %s%s", r.status, r.out, r.err);
    CHECK(strcmp(r.out, "PASS total lost bytes 24576 <= 24576 over 2 recordings (0 failing)\n"
                        "PASS total device peak bytes 0 <= 0 over 2 recordings (0 failing) "
                        "(device memory was not recorded)\n") == 0,
          "got: %s", r.out);
    harness_result_free(&r);
    free(dev2);
    free(old2);
}

// ---------------------------------------------------------------------------
// Export, HTML

static void test_perfetto_has_a_counter_track_per_device(void) {
    const char *out = harness_path("device.trace.json");
    run_result r = harness_tpprof("export", dev_db, "-o", out, NULL);
    CHECK(r.status == 0, "status %d: %s", r.status, r.err);
    harness_result_free(&r);
    char *t = harness_read_file(out);
    CHECK(t && harness_json_valid(t), "not JSON");
    CHECK(t && strstr(t, "{\"ph\":\"C\",\"name\":\"CUDA device 0\",\"pid\":4242,\"ts\":4000.000,"
                         "\"args\":{\"allocated\":13631488,\"reserved\":16777216}}"),
          "device 0 counter");
    // Reserved unknown on device 1: only allocated.
    CHECK(t && strstr(t, "{\"ph\":\"C\",\"name\":\"CUDA device 1\",\"pid\":4242,\"ts\":10000.000,"
                         "\"args\":{\"allocated\":16777216}}"),
          "device 1 counter");
    free(t);
}

static void test_html_timeline_has_device_lines(void) {
    const char *out = harness_path("device.html");
    run_result r = harness_tpprof("report", dev_db, "--format", "html", "-o", out, NULL);
    CHECK(r.status == 0, "status %d: %s", r.status, r.err);
    harness_result_free(&r);
    char *h = harness_read_file(out);
    CHECK(h && strstr(h, "{\"name\":\"CUDA device 0\",\"t\":[1000000,4000000,9000000],"
                         "\"allocated\":[3145728,13631488,1048576],\"reserved\":[8388608,16777216,4194304]}"),
          "device 0 line");
    CHECK(h && strstr(h, "{\"name\":\"CUDA device 1\",\"t\":[2000000,10000000],\"allocated\":[8388608,16777216]}"),
          "device 1 line");
    // The summary: each device, pinned host memory and the capture, as the text report's.
    CHECK(h && strstr(h, "<tr><td>device 0</td><td>5 allocations, 13.0 MiB; peak 13.0 MiB at 0.004 s; at exit 3.00 MiB "
                         "in 2 blocks leaked (2.00 MiB in 1 ended by a device reset); pools reserved up to 16.0 MiB"
                         "</td></tr>"),
          "device 0 in the summary");
    CHECK(h && strstr(h, "<tr><td>device 1</td><td>2 allocations, 24.0 MiB; peak 16.0 MiB at 0.010 s; at exit 16.0 MiB "
                         "in 1 block leaked</td></tr>"),
          "device 1 in the summary");
    CHECK(h && strstr(h, "<tr><td>pinned host</td><td>2 allocations, 96.0 KiB;"), "pinned host in the summary");
    CHECK(h && strstr(h, "<tr><td>device</td><td>capture interpose; 5 failed calls, 3 bad frees</td></tr>"),
          "capture in the summary");
    free(h);
    // A recording without device memory has no such line.
    r = harness_tpprof("report", old_db, "--format", "html", "-o", harness_path("old.html"), NULL);
    CHECK(r.status == 0, "status %d: %s", r.status, r.err);
    harness_result_free(&r);
    h = harness_read_file(harness_path("old.html"));
    CHECK(h && !strstr(h, "<tr><td>device") && !strstr(h, "<tr><td>pinned host"), "no device facts in an old page");
    free(h);
}

// ---------------------------------------------------------------------------
// A recording without device tables

static void test_old_recording_reads_as_before(void) {
    run_result r = harness_tpprof("report", old_db, NULL);
    CHECK(r.status == 0, "status %d: %s", r.status, r.err);
    CHECK(!strstr(r.out, "evice"), "device lines in an old recording: %s", r.out);
    harness_result_free(&r);
    r = harness_tpprof("report", old_db, "--device", "0", NULL);
    CHECK(r.status == 0, "status %d: %s", r.status, r.err);
    CHECK(harness_count(r.out, "evice") == 2 && strstr(r.out, "  device      device memory: not recorded\n"), "%s",
          r.out);
    harness_result_free(&r);
    char *s = report_json(old_db, NULL, NULL);
    CHECK(strstr(s, "\"device\":{\"recorded\":false,\"capture\":null,\"filter\":null}"), "%s", s);
    free(s);
    // A device gate on it passes and says why; the host gates are as before.
    r = harness_tpprof("check", old_db, "--max-device-leaked-bytes", "0", "--max-lost-bytes", "0", NULL);
    CHECK(r.status == 1, "status %d", r.status);
    CHECK(strcmp(r.out, "FAIL lost bytes 12288 > 0: 8192 B in map_arena (arena.c:30)\n"
                        "PASS device leaked bytes 0 <= 0 (device memory was not recorded)\n") == 0,
          "%s", r.out);
    CHECK(!strstr(r.err, "device"), "%s", r.err);
    harness_result_free(&r);
    r = harness_tpprof("export", old_db, "-o", harness_path("old.trace.json"), NULL);
    CHECK(r.status == 0, "status %d: %s", r.status, r.err);
    harness_result_free(&r);
    char *t = harness_read_file(harness_path("old.trace.json"));
    CHECK(t && !strstr(t, "CUDA device"), "old trace");
    free(t);
}

// ---------------------------------------------------------------------------
// merge

// Device memory survives `tpprof merge`: the merged recording reports the
// device leaks and figures of each input (with a process column), and a
// merge of host-only recordings has no device tables at all.
static void test_merge_carries_device_memory(void) {
    const char *one = harness_path("merged_one.db"), *two = harness_path("merged_two.db"),
               *host = harness_path("merged_host.db");
    run_result r = harness_tpprof("merge", one, dev_db, old_db, NULL);
    CHECK(r.status == 0, "status %d: %s", r.status, r.err);
    harness_result_free(&r);
    r = harness_tpprof("report", one, "--leaks", NULL);
    CHECK(r.status == 0, "status %d: %s", r.status, r.err);
    CHECK(strstr(r.out, "  device 0    5 allocations, 13.0 MiB;"), "%s", r.out);
    CHECK(strstr(r.out, "  device 1    2 allocations, 24.0 MiB;"), "%s", r.out);
    CHECK(strstr(r.out, "\nDevice leaks: 19.0 MiB in 3 blocks of device memory from 3 stacks"), "%s", r.out);
    CHECK(strstr(r.out, "      leak_dev (dev.cu:10)\n"), "the leak's own stack, by name: %s", r.out);
    CHECK(strstr(r.out, "  device      capture interpose; 5 failed calls, 3 bad frees"), "%s", r.out);
    harness_result_free(&r);
    // Both inputs with device memory: each one's blocks, with its process.
    r = harness_tpprof("merge", two, dev_db, dev_db, NULL);
    CHECK(r.status == 0, "status %d: %s", r.status, r.err);
    harness_result_free(&r);
    r = harness_tpprof("report", two, "--leaks", NULL);
    // The two processes' stacks are the same ones, stored once.
    CHECK(strstr(r.out, "\nDevice leaks: 38.0 MiB in 6 blocks of device memory from 3 stacks"), "%s", r.out);
    CHECK(strstr(r.out, "  device      capture interpose; 10 failed calls, 6 bad frees"), "%s", r.out);
    harness_result_free(&r);
    char *s = report_json(two, NULL, NULL);
    CHECK(s && strstr(s, "\"device\":{\"recorded\":true"), "%s", s ? s : "");
    free(s);
    // report of several recordings merges them the same way.
    r = harness_tpprof("report", dev_db, old_db, "--leaks", NULL);
    CHECK(r.status == 0, "status %d: %s", r.status, r.err);
    CHECK(strstr(r.out, "\nDevice leaks: 19.0 MiB in 3 blocks of device memory from 3 stacks"), "%s", r.out);
    harness_result_free(&r);
    // Recordings with device_sites (a quiet site's freed blocks are not
    // rows): the merge carries the sites, so the counts are each input's
    // in full, not only what the blocks left (13.0 MiB in 5 each).
    const char *sites = harness_path("merged_sites.db");
    r = harness_tpprof("merge", sites, sites_db, sites_db, NULL);
    CHECK(r.status == 0, "status %d: %s", r.status, r.err);
    harness_result_free(&r);
    r = harness_tpprof("report", sites, "--leaks", NULL);
    CHECK(strstr(r.out, "  device 0    10 allocations, 26.0 MiB;"), "merged site totals: %s", r.out);
    CHECK(strstr(r.out, "\nDevice leaks: 38.0 MiB in 6 blocks of device memory from 3 stacks"), "%s", r.out);
    harness_result_free(&r);
    // Host-only inputs: no device tables, so nothing about device memory.
    r = harness_tpprof("merge", host, old_db, old_db, NULL);
    CHECK(r.status == 0, "status %d: %s", r.status, r.err);
    harness_result_free(&r);
    r = harness_tpprof("report", host, NULL);
    CHECK(r.status == 0 && !strstr(r.out, "evice"), "device lines in a host-only merge: %s", r.out);
    harness_result_free(&r);
}

// ---------------------------------------------------------------------------
// run --cupti

static bool cupti_built; // argv[3]: the recorder has the CUPTI backend

static void test_run_cupti_sets_the_injection_library_or_says_why_not(void) {
    const char *seen = harness_path("injection.txt");
    char script[512];
    snprintf(script, sizeof script, "printf '%%s|%%s' \"$CUDA_INJECTION64_PATH\" \"$TPPROF_CUPTI\" > %s", seen);
    run_result r = harness_tpprof("run", "-o", harness_path("cupti.db"), "--cupti", "--", "/bin/sh", "-c", script, NULL);
    if (!cupti_built) {
        harness_expect_usage_error("--cupti without the backend", r, "built without the CUPTI backend");
        return;
    }
    CHECK(r.status == 0, "status %d: %s", r.status, r.err);
    harness_result_free(&r);
    char *text = harness_read_file(seen);
    CHECK(text && strstr(text, "/libtpprof.so|1"), "the program saw: %s", text ? text : "(nothing)");
    free(text);
    // Another tool's injection library is not replaced.
    char *env[] = {"CUDA_INJECTION64_PATH=/opt/other/libinject.so", NULL};
    char *argv[] = {(char *)harness_tpprof_path(), "run", "--cupti", "true", NULL};
    harness_expect_usage_error("another injection library", harness_run(argv, env, NULL),
                               "CUDA_INJECTION64_PATH is already set (/opt/other/libinject.so)");
}

static const struct {
    const char *name;
    void (*fn)(void);
} scenarios[] = {
    {"summary", test_summary_has_each_device_pinned_host_and_vmm_apart},
    {"leaks", test_leaks_are_grouped_by_stack_alive_or_ended_by_reset},
    {"peak", test_peak_per_device_shows_the_stacks_live_at_it},
    {"filter", test_device_option_keeps_only_that_device},
    {"json", test_json_device_object_has_the_figures},
    {"check_gates", test_check_device_gates_pass_and_fail_with_exit_codes},
    {"check_junit", test_check_device_gates_in_junit_and_with_host_gates},
    {"check_notes", test_check_reports_bad_frees_and_failed_calls_without_failing},
    {"check_usage", test_check_bad_device_limits_are_usage_errors},
    {"check_repeat", test_check_device_gate_given_again_takes_the_later_limit},
    {"check_several", test_check_several_recordings_sum_device_figures},
    {"perfetto", test_perfetto_has_a_counter_track_per_device},
    {"html", test_html_timeline_has_device_lines},
    {"old_recording", test_old_recording_reads_as_before},
    {"run_cupti", test_run_cupti_sets_the_injection_library_or_says_why_not},
    {"merge", test_merge_carries_device_memory},
    {"sites", test_sites_give_the_same_report_as_the_blocks},
};

int main(int argc, char **argv) {
    harness_init(argc, argv);
    const char *only = argc > 2 ? argv[2] : NULL;
    cupti_built = argc > 3 && strcmp(argv[3], "1") == 0;
    dev_db = strdup(harness_path("device.db"));
    old_db = strdup(harness_path("old.db"));
    sites_db = strdup(harness_path("device_sites.db"));
    fixture_options o = {0};
    if (device_fixture_write(dev_db) != 0 || fixture_write(old_db, &o) != 0 || sites_fixture_write(sites_db) != 0)
        return 1;
    bool ran = false;
    for (size_t i = 0; i < sizeof scenarios / sizeof *scenarios; i++) {
        if (only && strcmp(only, scenarios[i].name) != 0)
            continue;
        ran = true;
        int before = harness_failures;
        scenarios[i].fn();
        fprintf(stderr, "%s %s\n", harness_failures == before ? "ok  " : "FAIL", scenarios[i].name);
    }
    if (!ran) {
        fprintf(stderr, "test_device: no scenario '%s'\n", only);
        harness_failures++;
    }
    free(dev_db);
    free(old_db);
    free(sites_db);
    return harness_finish();
}
