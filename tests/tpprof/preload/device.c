// device.c: a scenario of the preload suite (tests/tpprof/meson.build gives
// each mode its test; harness.h runs the program under libtpprof.so):
// device memory capture on the CUDA test doubles (tests/tpprof/cuda/).
// Modes:
//   drv_gpa, drv_direct  drv_app through cuGetProcAddress (both forms) or
//                        linked calls: every allocation and free once, with
//                        its function, the leak alive, VMM counted once,
//                        failed and bad calls flagged
//   drv_nosymbolic       drv_gpa on a driver double linked without -Bsymbolic,
//                        whose lookups return tpprof's own hooks
//   drv_loop             drv_app's loop of 3000 allocations at one site, the
//                        last one leaked, and a 3 MiB leak:
//                        aggregate mode's device_sites and the rows it keeps
//   drv_nodriver         the same with a driver that finds no GPU: failed
//                        calls recorded, no memory
//   rt_shared, rt_ptds   rt_app (nvcc -cudart shared [per-thread stream]) on
//                        the runtime double layered on the driver double:
//                        the runtime's calls, not its nested driver calls
//   rt_static            rt_app with the static runtime on the driver
//                        double: its driver lookups are wrapped; it runs
//                        as natively
//   rt_nodriver          rt_app (shared) on the real libcudart, no driver:
//                        every call recorded as failed
//   rtld_next            drv_app direct with another preload that uses
//                        RTLD_NEXT, in both preload orders
//   tensor_async,        libtensorplay's CUDA storages on its libcudart double
//   tensor_caching       (cudaMallocAsync backend, caching allocator): each
//                        tied to its device block
//   cupti_exit,          cupti_app under the CUPTI backend (TPPROF_CUPTI=1,
//   cupti_exit_          CUDA_INJECTION64_PATH=libtpprof.so, the fake
//                        libcupti): each allocation once, by CUPTI, with its
//                        stack (exit, _exit)
//   cupti_activity,      the fake gives only activity records: they reach
//   cupti_activity_exit, the database through the exit flush (_exit, exit,
//   cupti_activity_quick quick_exit)
//   cupti_lazy           CUPTI starts inside the first allocation: that one
//                        is the hook's, the rest CUPTI's, none twice
//   cupti_refused        another subscriber owns CUPTI: one line, and
//                        interposition records each allocation once
//   cupti_runtime        rt_app (-cudart shared): CUPTI starts inside the
//                        first cudaMalloc; each allocation once
// EXTRA: the LD_LIBRARY_PATH the program runs with ('|' then another
// preload for rtld_next, or the fake libcupti for cupti_*). A PROGRAM of '-' means nvcc is absent: skipped.
#include "harness.h"

static char libpath[2048];

// Runs prog (mode arg) natively and recorded; same exit and output.
static bool run_pair(const char *name, char *prog, char *arg, const char *env, struct result *r) {
    char *argv[] = {prog, arg, NULL};
    struct result native = run(NULL, argv, env);
    if (!record(name, argv, env, r)) return false;
    CHECK_MSG(r->status == native.status, "%s: exit %d vs native %d", name, r->status, native.status);
    CHECK_MSG(strcmp(r->out, native.out) == 0, "%s: same output:\n%s\n-- vs native --\n%s", name, r->out, native.out);
    return true;
}

// Whether the innermost frame of stack `id` is in function fn.
static bool frame0_in(int64_t id, const char *fn) {
    int64_t ips[4];
    int n = stack_ips(id, ips, 4);
    return n > 0 && ip_in(ips[0], fn, NULL);
}

static int64_t events(const char *where) {
    return qi("SELECT count(*) FROM device_events WHERE %s", where);
}

static int64_t kind_id(const char *name) { return qi("SELECT id FROM kinds WHERE name = '%s'", name); }

static void common_checks(const char *what) {
    CHECK_MSG(qi("SELECT count(*) FROM meta WHERE key = 'device_capture' AND value = 'interpose'") == 1,
              "%s: device_capture interpose", what);
    CHECK_MSG(kind_id("cuda_device") == 13 && kind_id("cuda_vmm_mapping") == 20, "%s: device kinds named", what);
}

// ---------------------------------------------------------------------------
// The driver program.

static void check_driver(const char *what, bool via_gpa) {
    common_checks(what);
    // Each allocation once: weights, leak, two async, managed, pitch, pinned,
    // pool, the out-of-memory one, the small one, 8 on another thread.
    CHECK_MSG(events("op = 1") == 18, "%s: 18 allocation events, got %lld", what, (long long)events("op = 1"));
    CHECK_MSG(events("op = 1 AND result = 0") == 17, "%s: 17 succeeded", what);
    CHECK_MSG(events("api = 'cuMemAlloc_v2' AND op = 1") == 12, "%s: cuMemAlloc_v2 x12", what);
    // Made on one thread, freed on another: each ended, none flagged.
    CHECK_MSG(qi("SELECT count(*) FROM device_blocks b WHERE size = 65536 AND api = 'cuMemAlloc_v2' AND free_ns IS NOT NULL"
                 " AND tid != (SELECT tid FROM device_events WHERE api = 'cuMemFree_v2' AND address = b.address)") == 8,
              "%s: 8 blocks freed on another thread than their allocation's", what);
    CHECK_MSG(events("api = 'cuMemAllocAsync' AND stream = 17 AND size = 65536") == 1, "%s: legacy async on stream 1",
              what);
    CHECK_MSG(events("api = 'cuMemAllocAsync_ptsz' AND stream = 34 AND size = 131072") == 1,
              "%s: per-thread async on stream 2", what);
    CHECK_MSG(events("api = 'cuMemFreeAsync' AND op = 2") == 2 && events("api = 'cuMemFreeAsync_ptsz' AND op = 2") == 1,
              "%s: async frees, both forms", what);
    CHECK_MSG(events("api = 'cuMemAllocManaged' AND kind = 15") == 1, "%s: managed (via %s)", what,
              via_gpa ? "the 4-argument cuGetProcAddress" : "the linked name");
    CHECK_MSG(events("api = 'cuMemAllocPitch_v2' AND kind = 16 AND size = 10240") == 1, "%s: pitch, pitch x height",
              what);
    CHECK_MSG(events("api = 'cuMemHostAlloc' AND kind = 17 AND device = -1") == 1, "%s: pinned host, no device", what);
    // The leak, alive, with its function; the freed block with both stacks.
    CHECK_MSG(qi("SELECT count(*) FROM device_blocks WHERE free_ns IS NULL AND ended_by IS NULL") == 1,
              "%s: one device block alive at exit", what);
    int64_t leak = qi("SELECT stack_id FROM device_blocks WHERE free_ns IS NULL AND size = %d", 3 << 20);
    CHECK_MSG(leak > 0 && frame0_in(leak, "leak_buffer"), "%s: the leak's stack is leak_buffer's", what);
    int64_t w = qi("SELECT stack_id FROM device_blocks WHERE size = %d", 1 << 20);
    int64_t wf = qi("SELECT free_stack_id FROM device_blocks WHERE size = %d", 1 << 20);
    CHECK_MSG(w > 0 && frame0_in(w, "weights_alloc"), "%s: allocated in weights_alloc", what);
    CHECK_MSG(wf > 0 && frame0_in(wf, "weights_free"), "%s: freed in weights_free", what);
    CHECK_MSG(qi("SELECT count(*) FROM device_blocks WHERE size = %d AND free_api = 'cuMemFree_v2' AND device = 0",
                 1 << 20) == 1, "%s: free api and device", what);
    // VMM: three things, each once; the mapping not counted as memory.
    CHECK_MSG(events("op = 7 AND kind = 18") == 1 && events("op = 9 AND kind = 19 AND device = 1") == 1 &&
              events("op = 11 AND kind = 20") == 1 && events("op = 12") == 1 && events("op = 10") == 1 &&
              events("op = 8") == 1, "%s: reserve, create (device 1), map, unmap, release, free", what);
    CHECK_MSG(qi("SELECT count(*) FROM device_blocks WHERE kind IN (18, 19, 20) AND free_ns IS NOT NULL") == 3,
              "%s: reservation, handle and mapping each a block, all ended", what);
    CHECK_MSG(qi("SELECT max(allocated_bytes) FROM device_timeline WHERE device = 1") == 2 << 20,
              "%s: device 1 peaks at the physical 2 MiB (the mapping is not counted again): %lld", what,
              (long long)qi("SELECT max(allocated_bytes) FROM device_timeline WHERE device = 1"));
    CHECK_MSG(qi("SELECT max(allocated_bytes) FROM device_timeline WHERE device = 0") >= 4 << 20,
              "%s: device 0 held weights and the leak at once", what);
    // Pools.
    CHECK_MSG(events("op = 3 AND pool IS NOT NULL") == 1 && events("op = 5") == 1 && events("op = 4") == 1,
              "%s: pool create, trim, destroy", what);
    CHECK_MSG(events("api = 'cuMemAllocFromPoolAsync' AND pool IS NOT NULL AND result = 0") == 1,
              "%s: allocation from the pool", what);
    CHECK_MSG(qi("SELECT count(*) FROM device_timeline WHERE reserved_bytes IS NOT NULL") >= 1,
              "%s: a pool's reserved bytes sampled", what);
    // Faults.
    CHECK_MSG(events("op = 1 AND result = 2 AND flag = 4 AND size = 4294967296") == 1, "%s: out of memory flagged",
              what);
    CHECK_MSG(qi("SELECT count(*) FROM device_blocks WHERE size = 4294967296") == 0, "%s: no block for the failure",
              what);
    CHECK_MSG(events("op = 2 AND flag = 1 AND result != 0") == 1, "%s: double free flagged", what);
    CHECK_MSG(events("op = 2 AND flag = 2 AND address = 3735879680") == 1, "%s: unknown pointer flagged", what);
    CHECK_MSG(events("op = 2 AND flag = 3") == 1, "%s: host pointer flagged", what);
    CHECK_MSG(qi("SELECT value FROM meta WHERE key = 'device_bad_frees'") == 3, "%s: 3 bad frees", what);
    CHECK_MSG(qi("SELECT value FROM meta WHERE key = 'device_calls_failed'") == 4, "%s: 4 failed calls", what);
}

static void test_driver(const char *mode, char *prog, char *extra) {
    setenv("LD_LIBRARY_PATH", extra, 1);
    struct result r;
    bool nosym = strcmp(mode, "drv_nosymbolic") == 0, gpa = nosym || strcmp(mode, "drv_gpa") == 0;
    if (!run_pair(mode, prog, gpa ? "gpa" : "direct", NULL, &r)) return;
    CHECK_MSG(strstr(r.out, "oom: 2\n") && strstr(r.out, "free twice: 1\n"), "%s: the double's statuses: %s", mode,
              r.out);
    CHECK_MSG(strstr(r.out, "cudaMalloc probe: absent\n") != NULL, "%s: a probe for the runtime finds none", mode);
    check_driver(mode, gpa);
    int64_t wrapped = qi("SELECT value FROM meta WHERE key = 'device_entry_points_wrapped'");
    if (nosym) // the double's lookups handed out tpprof's own hooks: nothing to wrap, no recursion
        CHECK_MSG(wrapped < 5, "drv_nosymbolic: the lookups returned tpprof's hooks (%lld wrapped)", (long long)wrapped);
    else if (gpa)
        CHECK_MSG(wrapped >= 20, "drv_gpa: entry points wrapped (%lld)", (long long)wrapped);
}

// drv_app loop: 3000 pairs at one site, then 1 MiB and the 3 MiB leak
// live together (device 0's peak), then the 1 MiB freed.
static void test_driver_loop(char *prog, char *extra) {
    setenv("LD_LIBRARY_PATH", extra, 1);
    struct result r;
    if (!run_pair("drv_loop", prog, "loop", NULL, &r)) return;
    CHECK_MSG(strstr(r.out, "loop: 3000 pairs\n") != NULL, "drv_loop: the double's statuses: %s", r.out);
    // The loop site's first 1024 blocks, and its last (alive at the end).
    CHECK_MSG(qi("SELECT count(*) FROM device_blocks WHERE size = 4096") == 1025,
              "drv_loop: the loop site's first 1024 blocks and its leak are rows, got %lld",
              (long long)qi("SELECT count(*) FROM device_blocks WHERE size = 4096"));
    CHECK_MSG(qi("SELECT count(*) FROM device_blocks WHERE size = 4096 AND free_ns IS NULL AND ended_by IS NULL") == 1,
              "drv_loop: the quiet block alive at the end is a row (a leak)");
    CHECK_MSG(events("op = 1 AND size = 4096") == 1025 && events("op = 2") == 1025,
              "drv_loop: their calls in device_events");
    CHECK_MSG(qi("SELECT count(*) FROM device_sites WHERE alloc_count = 3000 AND alloc_bytes = 3000 * 4096"
                 " AND free_count = 2999 AND freed_bytes = 2999 * 4096 AND peak_count = 1 AND peak_bytes = 4096"
                 " AND device = 0") == 1,
              "drv_loop: its site counts all 3000, one block live at the peak");
    CHECK_MSG(qi("SELECT count(*) FROM device_blocks WHERE free_ns IS NULL AND size = %d", 3 << 20) == 1,
              "drv_loop: the 3 MiB leak is a row");
    int64_t peak = (4 << 20) + 4096;
    CHECK_MSG(qi("SELECT peak_bytes FROM device_peaks WHERE scope = 'device' AND device = 0") == peak &&
                  qi("SELECT peak_bytes FROM device_peaks WHERE scope = 'total'") == peak,
              "drv_loop: device 0 and the total peak at 4 MiB + 4 KiB");
    CHECK_MSG(qi("SELECT sum(peak_bytes) FROM device_sites WHERE device = 0") == peak &&
                  qi("SELECT sum(total_peak_bytes) FROM device_sites") == peak &&
                  qi("SELECT count(*) FROM device_sites WHERE peak_count = 1") == 3,
              "drv_loop: the three sites live at the peak add up to it");
    CHECK_MSG(qi("SELECT max(allocated_bytes) FROM device_timeline WHERE device = 0") == peak,
              "drv_loop: the timeline's peak agrees");
}

// The same loop in full mode: every record on the rings ends with a
// timestamp word, device records too (without it the merge misread every
// record after the first device one: garbage blocks, a crash or a hang in
// the exit scan).
static void test_driver_loop_full(char *prog, char *extra) {
    setenv("LD_LIBRARY_PATH", extra, 1);
    struct result r;
    if (!run_pair("drv_loop_full", prog, "loop", "TPPROF_MODE=full", &r)) return;
    CHECK_MSG(strstr(r.out, "loop: 3000 pairs\n") != NULL, "drv_loop_full: the double's statuses: %s", r.out);
    expect_complete("drv_loop_full");
    CHECK_MSG(qi("SELECT count(*) FROM device_blocks WHERE size = 4096") == 3000,
              "drv_loop_full: every block of the loop is a row, got %lld",
              (long long)qi("SELECT count(*) FROM device_blocks WHERE size = 4096"));
    CHECK_MSG(events("op = 1 AND size = 4096") == 3000 && events("op = 2") == 3000,
              "drv_loop_full: every call in device_events");
    CHECK_MSG(qi("SELECT count(*) FROM device_blocks WHERE free_ns IS NULL AND size = %d", 3 << 20) == 1,
              "drv_loop_full: the 3 MiB leak");
    CHECK_MSG(qi("SELECT count(*) FROM events") > 0 && qi("SELECT count(*) FROM events WHERE size > (1 << 40)") == 0,
              "drv_loop_full: the host events read whole (no size from a misread record)");
}

static void test_driver_nodriver(char *prog, char *extra) {
    setenv("LD_LIBRARY_PATH", extra, 1);
    struct result r;
    if (!run_pair("nodriver", prog, "gpa", "TPFAKE_CU_NODRIVER=1", &r)) return;
    CHECK_MSG(strstr(r.out, "weights_alloc: 100\n") != NULL, "nodriver: the double failed: %s", r.out);
    CHECK_MSG(events("op = 1") == 18 && events("result = 0") == 0, "nodriver: every allocation recorded, failed");
    CHECK_MSG(events("op = 1 AND result = 100") == 18, "nodriver: with the driver's status");
    CHECK_MSG(qi("SELECT count(*) FROM device_blocks") == 0, "nodriver: no memory");
    CHECK_MSG(qi("SELECT value FROM meta WHERE key = 'device_calls_failed'") == events("1"),
              "nodriver: every call counted failed");
}

// ---------------------------------------------------------------------------
// The runtime program.

static void test_runtime(const char *mode, char *prog, char *extra) {
    setenv("LD_LIBRARY_PATH", extra, 1);
    struct result r;
    if (!run_pair(mode, prog, NULL, NULL, &r)) return;
    bool ptds = strcmp(mode, "rt_ptds") == 0;
    common_checks(mode);
    CHECK_MSG(strstr(r.out, "weights_alloc: 0\n") && strstr(r.out, "oom: 2\n"), "%s: ran on the doubles: %s", mode,
              r.out);
    // The runtime's calls, each once; its nested driver calls not again.
    CHECK_MSG(events("api LIKE 'cu%%' AND api NOT LIKE 'cuda%%' AND op NOT BETWEEN 7 AND 12") == 0,
              "%s: no nested driver call recorded (only the program's own VMM calls carry driver names)", mode);
    CHECK_MSG(events("op = 1") == 13, "%s: 13 allocation events, got %lld", mode, (long long)events("op = 1"));
    CHECK_MSG(events("api = 'cudaMalloc' AND op = 1") == 5, "%s: cudaMalloc x5", mode);
    const char *async = ptds ? "cudaMallocAsync_ptsz" : "cudaMallocAsync";
    CHECK_MSG(qi("SELECT count(DISTINCT stream) FROM device_events WHERE api = '%s'", async) == 2,
              "%s: %s on two streams", mode, async);
    CHECK_MSG(events(ptds ? "api = 'cudaFreeAsync_ptsz'" : "api = 'cudaFreeAsync'") == 3, "%s: async frees", mode);
    CHECK_MSG(events("api = 'cudaMallocManaged' AND kind = 15") == 1 && events("api = 'cudaMallocPitch' AND kind = 16") == 1 &&
              events("api = 'cudaMalloc3D' AND kind = 16") == 1, "%s: managed, pitch, 3D", mode);
    CHECK_MSG(events("kind = 17 AND op = 1") == 2 && events("api = 'cudaFreeHost'") == 2, "%s: pinned host", mode);
    CHECK_MSG(events(ptds ? "api = 'cudaMallocFromPoolAsync_ptsz'" : "api = 'cudaMallocFromPoolAsync'") == 1 &&
              events("op = 3 AND device = 0") == 1, "%s: pool", mode);
    int64_t leak = qi("SELECT stack_id FROM device_blocks WHERE free_ns IS NULL AND ended_by IS NULL AND size = %d",
                      3 << 20);
    CHECK_MSG(qi("SELECT count(*) FROM device_blocks WHERE free_ns IS NULL AND ended_by IS NULL") == 1 && leak > 0 &&
              frame0_in(leak, "_ZL11leak_bufferv"), "%s: the leak alive, in leak_buffer", mode);
    CHECK_MSG(qi("SELECT count(*) FROM device_blocks WHERE ended_by = 'device_reset' AND device = 1 AND size = %d",
                 2 << 20) == 1, "%s: the reset ended device 1's block", mode);
    CHECK_MSG(events("op = 6 AND api = 'cudaDeviceReset' AND device = 1") == 1, "%s: the reset recorded", mode);
    CHECK_MSG(events("flag = 1") == 1 && events("flag = 2") == 1 && events("flag = 4") == 1, "%s: faults flagged",
              mode);
    // VMM through cudaGetDriverEntryPointByVersion: the driver's names, the
    // handle on device 0 counted once.
    CHECK_MSG(events("op = 7 AND api = 'cuMemAddressReserve'") == 1 && events("op = 9 AND api = 'cuMemCreate' AND device = 0") == 1 &&
              events("op = 11") == 1 && events("op = 12") == 1 && events("op = 10") == 1 && events("op = 8") == 1,
              "%s: the VMM calls from cudaGetDriverEntryPointByVersion", mode);
}

static void test_runtime_static(char *prog, char *extra) {
    setenv("LD_LIBRARY_PATH", extra, 1);
    struct result r;
    if (!run_pair("rt_static", prog, NULL, NULL, &r)) return;
    // The static runtime found the driver through dlsym + cuGetProcAddress,
    // and was handed tpprof's hooks for its memory entry points.
    CHECK_MSG(qi("SELECT value FROM meta WHERE key = 'device_entry_points_wrapped'") >= 10,
              "rt_static: the static runtime's driver lookups wrapped (%lld)",
              (long long)qi("SELECT value FROM meta WHERE key = 'device_entry_points_wrapped'"));
    CHECK_MSG(qi("SELECT count(*) FROM meta WHERE key = 'device_capture' AND value = 'interpose'") == 1,
              "rt_static: device_capture interpose");
    // What it did with them is what the double allows (its private export
    // tables are not there): whatever reached the driver is recorded once,
    // under the driver's names.
    CHECK_MSG(events("api LIKE 'cuda%%'") == 0, "rt_static: no runtime-level names");
    CHECK_MSG(events("op = 1 AND result = 0") == qi("SELECT count(*) FROM device_blocks WHERE kind < 18"),
              "rt_static: a block per successful allocation");
}

static void test_runtime_nodriver(char *prog, char *extra) {
    setenv("LD_LIBRARY_PATH", extra, 1);
    struct result r;
    if (!run_pair("rt_nodriver", prog, NULL, NULL, &r)) return;
    CHECK_MSG(strstr(r.out, "weights_alloc: 35\n") != NULL, "rt_nodriver: the real runtime says 35: %s", r.out);
    CHECK_MSG(events("op = 1 AND api = 'cudaMalloc' AND result = 35") == 4,
              "rt_nodriver: each cudaMalloc failed, 35 (no devices: no reset step)");
    CHECK_MSG(events("result = 0") == 0 && qi("SELECT count(*) FROM device_blocks") == 0, "rt_nodriver: no memory");
    CHECK_MSG(qi("SELECT value FROM meta WHERE key = 'device_calls_failed'") == events("1"),
              "rt_nodriver: all counted failed");
}

// ---------------------------------------------------------------------------
// Another preload using RTLD_NEXT.

static void test_rtld_next(char *prog, char *extra) {
    char dir[1024], other[1024];
    const char *bar = strchr(extra, '|');
    if (!bar) {
        CHECK_MSG(false, "rtld_next: EXTRA is DIR|OTHER");
        return;
    }
    snprintf(dir, sizeof dir, "%.*s", (int)(bar - extra), extra);
    snprintf(other, sizeof other, "%s", bar + 1);
    setenv("LD_LIBRARY_PATH", dir, 1);
    char *argv[] = {prog, "direct", NULL};
    char native_env[1200];
    snprintf(native_env, sizeof native_env, "LD_PRELOAD=%s", other);
    struct result native = run(NULL, argv, native_env);
    CHECK_MSG(native.status == 0 && strstr(native.out, "other: 12 cuMemAlloc_v2 calls") &&
              strstr(native.out, "[other] drv_app done"), "rtld_next: the other preload works alone: %s", native.out);
    for (int order = 0; order < 2; order++) {
        static char env[2][2200];
        snprintf(env[order], sizeof env[order], "LD_PRELOAD=%s:%s", order ? other : lib, order ? lib : other);
        char out[600];
        db_path(out, sizeof out, order ? "rtld_next_b.db" : "rtld_next_a.db");
        struct result r = run(out, argv, env[order]);
        CHECK_MSG(r.status == 0 && strcmp(r.out, native.out) == 0, "rtld_next (order %d): same output:\n%s\n-- vs --\n%s",
                  order, r.out, native.out);
        if (!open_db(out)) {
            CHECK_MSG(false, "rtld_next: no database");
            continue;
        }
        CHECK_MSG(events("api = 'cuMemAlloc_v2' AND op = 1") == 12, "rtld_next (order %d): each allocation once", order);
    }
}

// ---------------------------------------------------------------------------
// libtensorplay's CUDA storages and their device blocks.

static void test_tensor_cuda(const char *mode, char *prog, char *extra) {
    setenv("LD_LIBRARY_PATH", extra, 1);
    setenv("TPFAKE_DEVICES", "1", 1);
    bool async = strcmp(mode, "tensor_async") == 0;
    char *argv[] = {prog, NULL};
    struct result r;
    if (!record_tensors(mode, argv, async ? "TP_ALLOC_CONF=backend:cudaMallocAsync" : NULL, &r)) return;
    unsigned long long kept = 0, freed = 0;
    CHECK_MSG(sscanf(r.out, "kept=%llu freed=%llu", &kept, &freed) == 2, "%s: output: %s", mode, r.out);
    CHECK_MSG(events(async ? "api = 'cudaMallocAsync' AND op = 1" : "api = 'cudaMalloc' AND op = 1") >= 1,
              "%s: libtensorplay's dlsym'ed runtime calls captured", mode);
    int64_t kind = async ? 14 : 13;
    int64_t block = qi("SELECT block_address FROM storages WHERE data = %lld", (long long)kept);
    CHECK_MSG(qi("SELECT block_kind FROM storages WHERE data = %lld", (long long)kept) == kind,
              "%s: the kept storage's block is a device block of kind %lld", mode, (long long)kind);
    CHECK_MSG(qi("SELECT count(*) FROM device_blocks WHERE address = %lld AND free_ns IS NULL", (long long)block) == 1,
              "%s: that block is alive in device_blocks", mode);
    if (async) {
        CHECK_MSG(block == (int64_t)kept, "tensor_async: the block is the storage's own allocation");
        CHECK_MSG(qi("SELECT count(*) FROM storages WHERE data = %lld AND block_freed_ns IS NOT NULL AND block_kind = 14",
                     (long long)freed) == 1, "tensor_async: the released storage's block was freed (cudaFreeAsync)");
    } else {
        CHECK_MSG(block <= (int64_t)kept && qi("SELECT size FROM device_blocks WHERE address = %lld", (long long)block) +
                                                  block > (int64_t)kept,
                  "tensor_caching: the block is the caching allocator's segment around the data");
    }
}

// ---------------------------------------------------------------------------
// The CUPTI backend, end to end on the doubles.

// Runs cupti_app ARG natively and then recorded as `tpprof run --cupti`
// runs it; same exit and output.
static bool record_cupti(const char *name, char *prog, char *arg, char *extra, const char *env, struct result *r) {
    char dir[1024];
    const char *bar = strchr(extra, '|');
    if (!bar) {
        CHECK_MSG(false, "%s: EXTRA is DIR|LIBCUPTI", name);
        return false;
    }
    snprintf(dir, sizeof dir, "%.*s", (int)(bar - extra), extra);
    setenv("LD_LIBRARY_PATH", dir, 1);
    setenv("TPPROF_CUPTI_LIB", bar + 1, 1);
    char *argv[] = {prog, arg, NULL};
    struct result native = run(NULL, argv, env);
    setenv("CUDA_INJECTION64_PATH", lib, 1);
    setenv("TPPROF_CUPTI", "1", 1);
    bool ok = record(name, argv, env, r);
    unsetenv("CUDA_INJECTION64_PATH");
    unsetenv("TPPROF_CUPTI");
    if (!ok) return false;
    if (strcmp(name, "cupti_runtime") != 0)
        CHECK_MSG(strstr(r->out, "alloc 65536: 0\n") && strstr(r->out, "leak: 0\n"), "%s: the double allocated: %s",
                  name, r->out);
    CHECK_MSG(r->status == native.status, "%s: exit %d vs native %d", name, r->status, native.status);
    CHECK_MSG(strcmp(r->out, native.out) == 0, "%s: same output:\n%s\n-- vs native --\n%s", name, r->out, native.out);
    return true;
}

static int64_t cupti_line_count(const char *err) {
    int64_t n = 0;
    for (const char *p = err; (p = strstr(p, "tpprof: --cupti:")) != NULL; p++) n++;
    return n;
}

// The allocations and frees of cupti_app, each once, whoever recorded them;
// the 4th 64 KiB block and the 1 MiB one still live at the end.
static void check_cupti_counts(const char *what, const char *capture) {
    CHECK_MSG(qi("SELECT count(*) FROM meta WHERE key = 'device_capture' AND value = '%s'", capture) == 1,
              "%s: device_capture %s", what, capture);
    CHECK_MSG(events("op = 1") == 5, "%s: 5 allocations, got %lld", what, (long long)events("op = 1"));
    CHECK_MSG(events("op = 2") == 3, "%s: 3 frees, got %lld", what, (long long)events("op = 2"));
    CHECK_MSG(events("op = 1 AND result = 0 AND size = 65536") == 4 && events("op = 1 AND size = 1048576") == 1,
              "%s: the sizes", what);
    CHECK_MSG(qi("SELECT count(*) FROM device_blocks WHERE free_ns IS NULL") == 2, "%s: 2 blocks live at the end",
              what);
    CHECK_MSG(qi("SELECT count(*) FROM device_events WHERE flag != 0") == 0, "%s: no free flagged", what);
}

// How many allocations of 64 KiB have cupti_alloc on their stack.
static int64_t allocs_with_stack(void) {
    int64_t ids[8];
    int n = 0;
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, "SELECT stack_id FROM device_events WHERE op = 1 AND size = 65536", -1, &st, NULL) ==
        SQLITE_OK) {
        while (n < 8 && sqlite3_step(st) == SQLITE_ROW) ids[n++] = sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
    }
    int64_t with = 0;
    for (int i = 0; i < n; i++) with += stack_has(ids[i], "cupti_alloc");
    return with;
}

// rt_app (-cudart shared) on the runtime double: its first cudaMalloc loads
// CUPTI (the double's lazy cuInit), so that call is its hook's; every later
// allocation reaches the driver double's cuMemAlloc_v2, which alone (with
// cuMemFree_v2) the fake CUPTI reports: recorded by CUPTI's callback, under
// the driver's name, once (neither the runtime hook nor the wrapped driver
// pointer records it again).
static void test_cupti_runtime(char *prog, char *extra) {
    struct result r;
    if (!record_cupti("cupti_runtime", prog, NULL, extra, NULL, &r)) return;
    CHECK_MSG(strstr(r.out, "weights_alloc: 0\n") && strstr(r.out, "oom: 2\n"), "cupti_runtime: ran on the doubles: %s",
              r.out);
    CHECK_MSG(cupti_line_count(r.err) == 0, "cupti_runtime: CUPTI subscribed: %s", r.err);
    CHECK_MSG(qi("SELECT count(*) FROM meta WHERE key = 'device_capture' AND value = 'cupti'") == 1,
              "cupti_runtime: device_capture cupti");
    CHECK_MSG(events("op = 1 AND size = 1048576") == 1 && events("op = 1 AND size = 1048576 AND api = 'cudaMalloc'") == 1,
              "cupti_runtime: the first cudaMalloc once, by its hook");
    CHECK_MSG(events("op = 1 AND api = 'cuMemAlloc_v2'") == 4 && events("op = 1 AND api = 'cuMemAlloc_v2' AND device = 3") == 4,
              "cupti_runtime: the 4 later cudaMalloc once each, by CUPTI (%lld)",
              (long long)events("op = 1 AND api = 'cuMemAlloc_v2'"));
    CHECK_MSG(events("op = 1 AND api = 'cudaMalloc'") == 1, "cupti_runtime: no runtime hook recorded after CUPTI started");
    CHECK_MSG(events("op = 1 AND size = 4294967296 AND result = 2") == 1, "cupti_runtime: the out-of-memory call, failed");
    int64_t leak = qi("SELECT stack_id FROM device_events WHERE op = 1 AND size = %d", 3 << 20);
    CHECK_MSG(leak > 0 && stack_has(leak, "_ZL11leak_bufferv"), "cupti_runtime: the leak with leak_buffer on its stack");
}

static void test_cupti(const char *mode, char *prog, char *extra) {
    struct result r;
    if (strcmp(mode, "cupti_runtime") == 0) {
        test_cupti_runtime(prog, extra);
        return;
    }
    if (strcmp(mode, "cupti_exit") == 0 || strcmp(mode, "cupti_exit_") == 0) {
        bool quick = strcmp(mode, "cupti_exit_") == 0;
        if (!record_cupti(mode, prog, quick ? "_exit" : "exit", extra, NULL, &r)) return;
        CHECK_MSG(cupti_line_count(r.err) == 0, "%s: CUPTI subscribed, nothing said: %s", mode, r.err);
        check_cupti_counts(mode, "cupti");
        // CUPTI's callbacks, not the hooks (which would give the double's
        // device 0) nor the activity records ('cupti:device', no stack).
        CHECK_MSG(events("api = 'cuMemAlloc_v2' AND device = 3") == 5 && events("api = 'cuMemFree_v2' AND device = 3") == 3,
                  "%s: every call recorded by CUPTI's callback (device 3)", mode);
        CHECK_MSG(allocs_with_stack() == 4, "%s: each 64 KiB block with cupti_alloc on its stack (%lld)", mode,
                  (long long)allocs_with_stack());
    } else if (strncmp(mode, "cupti_activity", 14) == 0) {
        char *how = strcmp(mode, "cupti_activity_exit") == 0    ? "exit"
                    : strcmp(mode, "cupti_activity_quick") == 0 ? "quick_exit"
                                                                : "_exit";
        if (!record_cupti(mode, prog, how, extra, "TPFAKE_CUPTI_ACTIVITY_ONLY=1", &r)) return;
        check_cupti_counts(mode, "cupti");
        CHECK_MSG(events("api = 'cupti:device'") == 8, "%s: all 8 from the activity records, flushed at %s (%lld)",
                  mode, how, (long long)events("api = 'cupti:device'"));
    } else if (strcmp(mode, "cupti_lazy") == 0) {
        if (!record_cupti(mode, prog, "lazy", extra, "TPFAKE_CU_INIT_IN_ALLOC=1", &r)) return;
        check_cupti_counts(mode, "cupti");
        // The first allocation started before CUPTI: the hook's (device 0);
        // its callbacks and activity record did not count it again.
        CHECK_MSG(events("op = 1 AND device != 3") == 1, "%s: the first allocation recorded by its hook", mode);
        CHECK_MSG(events("op = 1 AND device = 3") == 4, "%s: the other 4 by CUPTI", mode);
    } else {
        if (!record_cupti(mode, prog, "exit", extra, "TPFAKE_CUPTI_MULTIPLE=1", &r)) return;
        CHECK_MSG(cupti_line_count(r.err) == 1 && strstr(r.err, "another CUPTI subscriber owns this process"),
                  "%s: one line on stderr: %s", mode, r.err);
        check_cupti_counts(mode, "interpose");
        CHECK_MSG(events("api = 'cuMemAlloc_v2' AND device != 3") == 5, "%s: every allocation by interposition", mode);
        CHECK_MSG(allocs_with_stack() == 4, "%s: with its stack", mode);
    }
}

int preload_scenario(const char *mode, char *prog, char *extra) {
    if (strcmp(prog, "-") == 0) {
        fprintf(stderr, "nvcc not found: skipped\n");
        skipped = true;
        return 0;
    }
    if (!extra) extra = libpath;
    if (strcmp(mode, "drv_gpa") == 0 || strcmp(mode, "drv_direct") == 0 || strcmp(mode, "drv_nosymbolic") == 0)
        test_driver(mode, prog, extra);
    else if (strcmp(mode, "drv_nodriver") == 0) test_driver_nodriver(prog, extra);
    else if (strcmp(mode, "drv_loop") == 0) test_driver_loop(prog, extra);
    else if (strcmp(mode, "drv_loop_full") == 0) test_driver_loop_full(prog, extra);
    else if (strcmp(mode, "rt_shared") == 0 || strcmp(mode, "rt_ptds") == 0) test_runtime(mode, prog, extra);
    else if (strcmp(mode, "rt_static") == 0) test_runtime_static(prog, extra);
    else if (strcmp(mode, "rt_nodriver") == 0) test_runtime_nodriver(prog, extra);
    else if (strcmp(mode, "rtld_next") == 0) test_rtld_next(prog, extra);
    else if (strcmp(mode, "tensor_async") == 0 || strcmp(mode, "tensor_caching") == 0) test_tensor_cuda(mode, prog, extra);
    else if (strncmp(mode, "cupti_", 6) == 0) test_cupti(mode, prog, extra);
    else return -1;
    return check_failures;
}
