// harness.c: running a program under the preload and querying what it
// left (harness.h), and the main of every preload scenario.
#include "harness.h"

const char *lib;

char tmpdir[] = "/tmp/tpprof-test-XXXXXX";

sqlite3 *db;

void slurp(const char *path, char *buf, size_t cap) {
    buf[0] = 0;
    FILE *f = fopen(path, "r");
    if (!f) return;
    size_t n = fread(buf, 1, cap - 1, f);
    buf[n] = 0;
    fclose(f);
}

int kill_after_ms;
const char *kill_when_sql;

struct result run(const char *out_db, char *const argv[], const char *env) {
    struct result r;
    char so[600], se[600];
    snprintf(so, sizeof so, "%s/stdout", tmpdir);
    snprintf(se, sizeof se, "%s/stderr", tmpdir);
    pid_t pid = fork();
    if (pid == 0) {
        if (chdir(tmpdir) != 0) _exit(126);
        int fo = open(so, O_WRONLY | O_CREAT | O_TRUNC, 0644), fe = open(se, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(fo, 1);
        dup2(fe, 2);
        unsetenv("LD_PRELOAD");
        unsetenv("TPPROF_RECORDED_PID");
        unsetenv("TPPROF_PREV_OUTPUT");
        if (out_db) {
            setenv("LD_PRELOAD", lib, 1);
            setenv("TPPROF_OUTPUT", out_db, 1);
        }
        if (env) putenv((char *)env);
        execv(argv[0], argv);
        _exit(127);
    }
    int st = 0;
    if (kill_after_ms > 0) {
        // Kill once a flush has written what the test wants to find (or after
        // 10 s): a fixed delay raced the writer on a loaded machine.
        usleep((useconds_t)kill_after_ms * 1000);
        for (int waited = 0; kill_when_sql && out_db && waited < 10000; waited += 50) {
            sqlite3 *h = NULL;
            int64_t got = 0;
            if (sqlite3_open_v2(out_db, &h, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK) {
                sqlite3_stmt *q = NULL;
                if (sqlite3_prepare_v2(h, kill_when_sql, -1, &q, NULL) == SQLITE_OK && sqlite3_step(q) == SQLITE_ROW)
                    got = sqlite3_column_int64(q, 0);
                sqlite3_finalize(q);
            }
            sqlite3_close(h);
            if (got > 0) break;
            usleep(50 * 1000);
        }
        kill(pid, SIGKILL);
    }
    waitpid(pid, &st, 0);
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    slurp(so, r.out, sizeof r.out);
    slurp(se, r.err, sizeof r.err);
    return r;
}

bool open_db(const char *path) {
    if (db) sqlite3_close(db);
    db = NULL;
    if (access(path, F_OK) != 0) return false;
    return sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL) == SQLITE_OK;
}

// First column of the first row as an integer; INT64_MIN if no row.
int64_t qi(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *sql = sqlite3_vmprintf(fmt, ap);
    va_end(ap);
    sqlite3_stmt *st;
    int64_t v = INT64_MIN;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
        fprintf(stderr, "sql error: %s in %s\n", sqlite3_errmsg(db), sql);
        sqlite3_free(sql);
        return v;
    }
    if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL) v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_free(sql);
    return v;
}

void qs(char *out, size_t cap, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *sql = sqlite3_vmprintf(fmt, ap);
    va_end(ap);
    sqlite3_stmt *st;
    out[0] = 0;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK) {
        if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0))
            snprintf(out, cap, "%s", (const char *)sqlite3_column_text(st, 0));
        sqlite3_finalize(st);
    }
    sqlite3_free(sql);
}

int strcmp_ptr(const char **a, const char **b) { return strcmp(*a, *b); }

int stack_ips(int64_t id, int64_t *ips, int max) {
    int n = 0;
    while (id > 0 && n < max) {
        ips[n++] = qi("SELECT ip FROM stack_nodes WHERE id = %lld", (long long)id);
        id = qi("SELECT parent FROM stack_nodes WHERE id = %lld", (long long)id);
    }
    return n;
}

// [value, value+size) of symbol `name` in the ELF file at `path`.
bool elf_symbol(const char *path, const char *name, uint64_t *lo, uint64_t *hi) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) return false;
    struct stat sb;
    fstat(fd, &sb);
    const char *base = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (base == MAP_FAILED) return false;
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)base;
    const Elf64_Shdr *sh = (const Elf64_Shdr *)(base + eh->e_shoff);
    bool found = false;
    for (int i = 0; i < eh->e_shnum && !found; i++) {
        if (sh[i].sh_type != SHT_SYMTAB && sh[i].sh_type != SHT_DYNSYM) continue;
        const Elf64_Sym *sym = (const Elf64_Sym *)(base + sh[i].sh_offset);
        const char *str = base + sh[sh[i].sh_link].sh_offset;
        for (size_t k = 0; k < sh[i].sh_size / sizeof *sym; k++) {
            if (strcmp(str + sym[k].st_name, name) == 0 && sym[k].st_size) {
                *lo = sym[k].st_value;
                *hi = sym[k].st_value + sym[k].st_size;
                found = true;
                break;
            }
        }
    }
    munmap((void *)base, (size_t)sb.st_size);
    return found;
}

// Whether return address `ip` lies in function `fn` of the module that
// contains it (per the database's module map). `unloaded` gets that
// module's unloaded_ns (0 when still loaded).
bool ip_in(int64_t ip, const char *fn, int64_t *unloaded) {
    char path[1024];
    qs(path, sizeof path, "SELECT path FROM modules WHERE lo <= %lld AND %lld < hi ORDER BY id DESC", (long long)ip,
       (long long)ip);
    int64_t bias = qi("SELECT base FROM modules WHERE lo <= %lld AND %lld < hi ORDER BY id DESC", (long long)ip,
                      (long long)ip);
    if (unloaded)
        *unloaded = qi("SELECT coalesce(unloaded_ns, 0) FROM modules WHERE lo <= %lld AND %lld < hi ORDER BY id DESC",
                       (long long)ip, (long long)ip);
    uint64_t lo, hi;
    if (!path[0] || !elf_symbol(path, fn, &lo, &hi)) return false;
    uint64_t off = (uint64_t)(ip - 1 - bias);
    return off >= lo && off < hi;
}

// Number of live blocks with the given reachability (1 lost, 2 reachable),
// size and kind (-1: any) whose frame `frame` is inside function `fn`.
int count_blocks(int reach, int64_t size, int kind, const char *fn, int frame) {
    sqlite3_stmt *st;
    char *sql = sqlite3_mprintf("SELECT stack_id FROM live_blocks WHERE reachability = %d AND (%lld < 0 OR size = %lld)"
                                " AND (%d < 0 OR kind = %d)", reach, (long long)size, (long long)size, kind, kind);
    int n = 0;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK) {
        static int64_t ids[4096];
        int k = 0;
        while (sqlite3_step(st) == SQLITE_ROW && k < 4096) ids[k++] = sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
        for (int i = 0; i < k; i++) {
            int64_t ips[64];
            int depth = stack_ips(ids[i], ips, 64);
            if (!fn || (frame < depth && ip_in(ips[frame], fn, NULL))) n++;
        }
    }
    sqlite3_free(sql);
    return n;
}

bool skipped;

void db_path(char *out, size_t cap, const char *name) { snprintf(out, cap, "%s/%s", tmpdir, name); }

void expect_complete(const char *what) {
    char v[64];
    qs(v, sizeof v, "SELECT value FROM meta WHERE key = 'complete'");
    CHECK_MSG(strcmp(v, "1") == 0, "%s: meta.complete is '%s'", what, v);
    qs(v, sizeof v, "SELECT value FROM meta WHERE key = 'tool'");
    CHECK_MSG(strcmp(v, "tpprof") == 0, "%s: meta.tool is '%s'", what, v);
    CHECK_MSG(qi("SELECT value FROM meta WHERE key = 'schema_version'") == TPPROF_SCHEMA_VERSION, "%s: schema_version", what);
    // Each site once (site_chunks whole, none written over another's numbers).
    CHECK_MSG(qi("SELECT COUNT(*) - COUNT(DISTINCT stack_id || ',' || kind) FROM sites") == 0, "%s: a site twice", what);
}

bool open_child_db(const char *stem, int pid, const char *what) {
    char path[700];
    snprintf(path, sizeof path, "%s/%s.%d.db", tmpdir, stem, pid);
    if (!open_db(path)) {
        CHECK_MSG(false, "%s: no database at %s", what, path);
        return false;
    }
    expect_complete(what);
    return true;
}

// Runs prog under the preload into NAME.db and opens it; false if not there.
bool record(const char *name, char *const argv[], const char *env, struct result *r) {
    char out[600];
    db_path(out, sizeof out, name);
    *r = run(out, argv, env);
    CHECK_MSG(r->status == 0, "%s exit status %d: %s", name, r->status, r->err);
    if (!open_db(out)) {
        CHECK_MSG(false, "no database for %s", name);
        return false;
    }
    expect_complete(name);
    return true;
}

// `n` blocks of 16..256 B handed between threads (the sites of a thousand
// allocations or more, which no other site of the program reaches): every
// one counted, every one's free counted at its site, none left live.
void check_handed(long long n) {
    const char *sites = "FROM sites WHERE kind = 1 AND alloc_count >= 1000";
    long long allocs = qi("SELECT sum(alloc_count) %s", sites), unfreed = qi("SELECT sum(alloc_count) - sum(free_count) %s", sites),
              live = qi("SELECT count(*) FROM live_blocks WHERE size BETWEEN 16 AND 256");
    CHECK_MSG(live == 0, "no handed block is left live (%lld)", live);
    CHECK_MSG(unfreed == 0, "every handed block's free is counted at its site (%lld)", unfreed);
    CHECK_MSG(allocs == n, "%lld handed blocks (%lld)", n, allocs);
}

// Every site as "module+offset/.../kind=K count=N", sorted: comparable across
// runs (addresses differ with ASLR).
int site_lines(char ***out) {
    sqlite3_stmt *st;
    int n = 0, cap = 64;
    char **v = malloc((size_t)cap * sizeof *v);
    if (sqlite3_prepare_v2(db, "SELECT stack_id, kind, alloc_count FROM sites", -1, &st, NULL) != SQLITE_OK) return 0;
    while (sqlite3_step(st) == SQLITE_ROW) {
        int64_t ips[64];
        int d = stack_ips(sqlite3_column_int64(st, 0), ips, 64);
        char line[4096];
        size_t k = 0;
        for (int i = 0; i < d && k < sizeof line - 200; i++) {
            char path[1024];
            qs(path, sizeof path, "SELECT path FROM modules WHERE lo <= %lld AND %lld < hi ORDER BY id DESC",
               (long long)ips[i], (long long)ips[i]);
            int64_t base = qi("SELECT base FROM modules WHERE lo <= %lld AND %lld < hi ORDER BY id DESC",
                              (long long)ips[i], (long long)ips[i]);
            const char *slash = strrchr(path, '/');
            k += (size_t)snprintf(line + k, sizeof line - k, "%s+%llx/", slash ? slash + 1 : path,
                                  (unsigned long long)(ips[i] - base));
        }
        snprintf(line + k, sizeof line - k, "kind=%d count=%lld", sqlite3_column_int(st, 1),
                 (long long)sqlite3_column_int64(st, 2));
        if (n == cap) v = realloc(v, (size_t)(cap *= 2) * sizeof *v);
        v[n++] = strdup(line);
    }
    sqlite3_finalize(st);
    qsort(v, (size_t)n, sizeof *v, (int (*)(const void *, const void *))strcmp_ptr);
    *out = v;
    return n;
}

void test_unwind_same(char *prog) {
    char a[600], b[600];
    db_path(a, sizeof a, "default.db");
    db_path(b, sizeof b, "libunwind.db");
    char *argv[] = {prog, NULL};
    struct result r1 = run(a, argv, NULL);
    struct result r2 = run(b, argv, "TPPROF_UNWIND=libunwind");
    CHECK_MSG(r1.status == 0 && r2.status == 0, "exit status %d %d", r1.status, r2.status);
    char **x, **y;
    if (!open_db(a)) {
        CHECK_MSG(false, "no database");
        return;
    }
    int nx = site_lines(&x);
    if (!open_db(b)) {
        CHECK_MSG(false, "no database");
        return;
    }
    int ny = site_lines(&y);
    CHECK_MSG(nx == ny && nx > 5, "%d sites vs %d", nx, ny);
    int shown = 0;
    for (int i = 0; i < nx && i < ny; i++)
        if (strcmp(x[i], y[i]) != 0 && shown++ < 3) CHECK_MSG(false, "site differs:\n  %s\n  %s", x[i], y[i]);
}

// Runs argv natively into *native, then under the preload into *r,
// recording into NAME (whose path goes to out).
void run_both(const char *name, char *const argv[], struct result *native, struct result *r, char *out,
                     size_t cap) {
    db_path(out, cap, name);
    *native = run(NULL, argv, NULL);
    *r = run(out, argv, NULL);
}

// record, and the recorder attached to the runtime.
bool record_tensors(const char *name, char *const argv[], const char *env, struct result *r) {
    if (!record(name, argv, env, r)) return false;
    CHECK_MSG(qi("SELECT value FROM meta WHERE key = 'tensors'") == 1, "%s: meta.tensors = 1", name);
    return true;
}

// Whether some frame of stack `id` lies in function fn.
bool stack_has(int64_t id, const char *fn) {
    int64_t ips[64];
    int n = stack_ips(id, ips, 64);
    for (int i = 0; i < n; i++)
        if (ip_in(ips[i], fn, NULL)) return true;
    return false;
}

// Stack ids of storage_refs rows matching `where`, into ids (at most max).
int ref_stacks(const char *where, int64_t *ids, int max) {
    sqlite3_stmt *st;
    char *sql = sqlite3_mprintf("SELECT stack_id FROM storage_refs WHERE %s", where);
    int n = 0;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK) {
        while (n < max && sqlite3_step(st) == SQLITE_ROW) ids[n++] = sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
    }
    sqlite3_free(sql);
    return n;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s MODE LIBTPPROF PROGRAM [EXTRA]\n", argv[0]);
        return 2;
    }
    const char *mode = argv[1];
    // Arguments come relative to the build directory; programs run elsewhere.
    for (int i = 2; i < argc; i++) {
        char *abs = realpath(argv[i], NULL);
        if (abs) argv[i] = abs;
    }
    lib = argv[2];
    if (!mkdtemp(tmpdir)) return 2;
    int failures = preload_scenario(mode, argv[3], argc > 4 ? argv[4] : NULL);
    if (failures < 0) {
        fprintf(stderr, "unknown mode %s\n", mode);
        return 2;
    }
    failures += check_failures; // (the harness's own checks: record, expect_complete)
    if (db) sqlite3_close(db);
    if (failures == 0) {
        char cmd[700];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
        if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
    } else {
        fprintf(stderr, "%d check(s) failed; files kept in %s\n", failures, tmpdir);
    }
    return failures ? 1 : skipped ? 77 : 0; // 77: meson's skip
}

bool site_totals_match(void) {
    static const char cols[] = "SUM(alloc_count), SUM(alloc_bytes), SUM(free_count), SUM(temp_count), SUM(temp_bytes)";
    char meta[256], rows[256], meta_r[256], rows_r[256];
    qs(meta, sizeof meta, "SELECT value FROM meta WHERE key = 'site_totals'");
    qs(rows, sizeof rows, "SELECT printf('%%lld %%lld %%lld %%lld %%lld', %s) FROM sites", cols);
    qs(meta_r, sizeof meta_r, "SELECT value FROM meta WHERE key = 'site_totals_reserved'");
    qs(rows_r, sizeof rows_r, "SELECT printf('12 %%lld %%lld %%lld %%lld %%lld', %s) FROM sites WHERE kind = 12", cols);
    CHECK_MSG(strcmp(meta, rows) == 0, "meta.site_totals '%s', the rows' sums '%s'", meta, rows);
    CHECK_MSG(strcmp(meta_r, rows_r) == 0, "meta.site_totals_reserved '%s', the rows' sums '%s'", meta_r, rows_r);
    return strcmp(meta, rows) == 0 && strcmp(meta_r, rows_r) == 0;
}
