// cfi_walk.c: a scenario of the preload suite (tests/tpprof/meson.build gives
// each mode its test; harness.h runs the program under libtpprof.so): the
// CFI walk (record/cfiwalk.c) takes the stacks that code built without
// frame pointers makes, and they are libunwind's.
// Modes: cfi_deep (progs/cfideep.c, built with gcc or clang), cfi_python
// (/usr/bin/python3 running EXTRA, a script; skipped where it is absent).
#include "harness.h"

// The open recording's sites, each a key (its frames as module+offset,
// and its kind) and its allocation count, sorted by key. Reads the stack
// trie and the modules once (site_lines asks per frame: too slow for a
// Python program's 10,000 sites).
struct site {
    char *key;
    long long count;
};
static int site_cmp(const void *a, const void *b) {
    return strcmp(((const struct site *)a)->key, ((const struct site *)b)->key);
}
struct node {
    int64_t id, parent, ip;
};
struct mod {
    int64_t lo, hi, base;
    char name[128];
};
static int node_find(const struct node *v, int n, int64_t id) {
    int lo = 0, hi = n;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (v[mid].id < id) lo = mid + 1;
        else hi = mid;
    }
    return lo < n && v[lo].id == id ? lo : -1;
}
static struct site *sites_now(int *count) {
    int nn = 0, cap = 1 << 16, nm = 0;
    struct node *nodes = malloc((size_t)cap * sizeof *nodes);
    struct mod *mods = calloc(4096, sizeof *mods);
    sqlite3_stmt *st;
    sqlite3_prepare_v2(db, "SELECT id, parent, ip FROM stack_nodes ORDER BY id", -1, &st, NULL);
    while (sqlite3_step(st) == SQLITE_ROW) {
        if (nn == cap) nodes = realloc(nodes, (size_t)(cap *= 2) * sizeof *nodes);
        nodes[nn++] = (struct node){sqlite3_column_int64(st, 0), sqlite3_column_int64(st, 1), sqlite3_column_int64(st, 2)};
    }
    sqlite3_finalize(st);
    sqlite3_prepare_v2(db, "SELECT lo, hi, base, path FROM modules ORDER BY id DESC", -1, &st, NULL);
    while (sqlite3_step(st) == SQLITE_ROW && nm < 4096) {
        const char *path = (const char *)sqlite3_column_text(st, 3), *slash = strrchr(path, '/');
        mods[nm] = (struct mod){sqlite3_column_int64(st, 0), sqlite3_column_int64(st, 1), sqlite3_column_int64(st, 2), ""};
        snprintf(mods[nm++].name, sizeof mods[0].name, "%s", slash ? slash + 1 : path);
    }
    sqlite3_finalize(st);
    int ns = 0, scap = 1024;
    struct site *v = malloc((size_t)scap * sizeof *v);
    sqlite3_prepare_v2(db, "SELECT stack_id, kind, alloc_count FROM sites", -1, &st, NULL);
    while (sqlite3_step(st) == SQLITE_ROW) {
        char line[8192];
        size_t k = 0;
        int depth = 0;
        for (int64_t id = sqlite3_column_int64(st, 0); id > 0 && depth < 256 && k < sizeof line - 300; depth++) {
            int i = node_find(nodes, nn, id);
            if (i < 0) break;
            int m = 0;
            while (m < nm && !(mods[m].lo <= nodes[i].ip && nodes[i].ip < mods[m].hi)) m++;
            k += (size_t)(m < nm ? snprintf(line + k, sizeof line - k, "%s+%llx/", mods[m].name,
                                            (unsigned long long)(nodes[i].ip - mods[m].base))
                                 : snprintf(line + k, sizeof line - k, "?%llx/", (unsigned long long)nodes[i].ip));
            id = nodes[i].parent;
        }
        snprintf(line + k, sizeof line - k, "kind=%d", sqlite3_column_int(st, 1));
        if (ns == scap) v = realloc(v, (size_t)(scap *= 2) * sizeof *v);
        v[ns++] = (struct site){strdup(line), sqlite3_column_int64(st, 2)};
    }
    sqlite3_finalize(st);
    free(nodes);
    free(mods);
    qsort(v, (size_t)ns, sizeof *v, site_cmp);
    *count = ns;
    return v;
}

// Allocations whose stack (frames as module+offset) both recordings hold
// equally often: the sum over stacks of the smaller count; *total_x: x's
// allocations; *differ: sites whose count differs.
static long long same_allocs(const struct site *x, int nx, const struct site *y, int ny, long long *total_x,
                             int *differ) {
    long long same = 0;
    *total_x = 0;
    *differ = 0;
    for (int i = 0; i < nx; i++) *total_x += x[i].count;
    for (int i = 0, j = 0; i < nx || j < ny;) {
        int c = i == nx ? 1 : j == ny ? -1 : strcmp(x[i].key, y[j].key);
        if (c == 0) same += x[i].count < y[j].count ? x[i].count : y[j].count;
        if (c != 0 || x[i].count != y[j].count) ++*differ;
        if (c <= 0) i++;
        if (c >= 0) j++;
    }
    return same;
}

static long long meta_walks(const char *key) {
    long long v = qi("SELECT value FROM meta WHERE key = '%s'", key);
    return v == INT64_MIN ? -1 : v;
}

// Runs argv by default and with TPPROF_UNWIND=libunwind; the sites of
// each into *x, *y; the CFI walks of the default run into *cfi.
static bool both(char *const argv[], struct site **x, int *nx, struct site **y, int *ny, long long *cfi,
                 long long *unw) {
    char a[600], b[600];
    db_path(a, sizeof a, "default.db");
    db_path(b, sizeof b, "libunwind.db");
    struct result r1 = run(a, argv, NULL);
    struct result r2 = run(b, argv, "TPPROF_UNWIND=libunwind");
    CHECK_MSG(r1.status == 0 && r2.status == 0, "exit status %d %d: %s", r1.status, r2.status, r1.err);
    if (!open_db(b)) return false;
    *y = sites_now(ny);
    if (!open_db(a)) return false;
    *x = sites_now(nx);
    *cfi = meta_walks("cfi_walks");
    *unw = meta_walks("libunwind_walks");
    return true;
}

// (progs/cfideep.c) Every stack the same as libunwind's, whole (32 frames
// of the library, the program's, the thread's start), taken by the CFI walk.
static void test_cfi_deep(char *prog) {
    setenv("TPPROF_DEPTH", "64", 1);
    char *argv[] = {prog, NULL};
    struct site *x, *y;
    int nx = 0, ny = 0;
    long long cfi = 0, unw = 0;
    if (!both(argv, &x, &nx, &y, &ny, &cfi, &unw)) {
        CHECK_MSG(false, "no database");
        return;
    }
    CHECK_MSG(nx == ny && nx >= 6, "%d sites vs %d", nx, ny);
    int shown = 0;
    for (int i = 0; i < nx && i < ny; i++)
        if ((strcmp(x[i].key, y[i].key) != 0 || x[i].count != y[i].count) && shown++ < 3)
            CHECK_MSG(false, "site differs:\n  %s %lld\n  %s %lld", x[i].key, x[i].count, y[i].key, y[i].count);
    // 3,202 allocations in the chain, each a walk through code without frame
    // pointers: all the CFI walk's, none libunwind's.
    CHECK_MSG(cfi >= 3202 && unw == 0, "cfi_walks %lld, libunwind_walks %lld", cfi, unw);
    CHECK_MSG(count_blocks(1, 4242, 1, "cfi_d0", 0) == 1, "4242 B lost in cfi_d0");
    CHECK_MSG(count_blocks(1, 4242, 1, "cfi_d17", 17) == 1, "its frame 17 in cfi_d17");
    CHECK_MSG(count_blocks(1, 4242, 1, "cfi_d31", 31) == 1, "its frame 31 in cfi_d31");
    CHECK_MSG(count_blocks(1, 4242, 1, "main", 32) == 1, "its frame 32 in main");
    CHECK_MSG(count_blocks(1, 4343, 1, "cfi_d31", 31) == 1, "the thread's block: frame 31 in cfi_d31");
    CHECK_MSG(count_blocks(1, 4343, 1, "other", 32) == 1, "its frame 32 in the thread's function");
    CHECK_MSG(qi("SELECT coalesce(sum(alloc_count), 0) FROM sites WHERE kind = 1") >= 3202, "every allocation");
}

// Python built without frame pointers (Debian's), PYTHONMALLOC=malloc:
// nearly every allocation is the CFI walk's and its native stack the same
// as libunwind's. (Not all: a Python run is not quite the same twice; the
// loader's own allocations are walked by frame pointers alone, whatever
// the setting.) Measured: 357,599 of 357,601 allocations on the same stacks.
static void test_cfi_python(char *prog, char *script) {
    if (access(prog, X_OK) != 0 || !script) {
        fprintf(stderr, "%s not found: skipped\n", prog);
        skipped = true;
        return;
    }
    setenv("PYTHONMALLOC", "malloc", 1);
    setenv("PYTHONHASHSEED", "0", 1);
    setenv("TPPROF_PYTHON", "0", 1); // native frames only: Python's would hide nothing here
    char *argv[] = {prog, script, NULL};
    struct site *x, *y;
    int nx = 0, ny = 0, differ = 0;
    long long cfi = 0, unw = 0, total = 0;
    if (!both(argv, &x, &nx, &y, &ny, &cfi, &unw)) {
        CHECK_MSG(false, "no database");
        return;
    }
    long long same = same_allocs(x, nx, y, ny, &total, &differ);
    CHECK_MSG(total > 100000 && total - same <= total / 10000, "%lld of %lld allocations on libunwind's stacks",
              same, total);
    CHECK_MSG(differ <= nx / 1000, "%d of %d sites differ", differ, nx);
    CHECK_MSG(cfi >= total - total / 1000 && unw <= total / 1000, "cfi_walks %lld, libunwind_walks %lld of %lld", cfi,
              unw, total);
}

int preload_scenario(const char *mode, char *prog, char *extra) {
    if (strcmp(mode, "cfi_deep") == 0) test_cfi_deep(prog);
    else if (strcmp(mode, "cfi_python") == 0) test_cfi_python(prog, extra);
    else return -1;
    return check_failures;
}
