// run_preflight.c: what `tpprof run` finds out before it starts the program,
// so that a run that could record nothing, or would destroy a file of the
// user's, is refused in one line (exit 2) instead of running for nothing:
// programs a preload cannot record (statically linked; built with a
// sanitizer whose runtime must come first) and output paths the recorder
// cannot or must not write. It reads ELF headers and the file system; it
// starts nothing and writes nothing (a probe file it creates it removes).
#define _GNU_SOURCE
#include "viewer.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <limits.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

// Did an snprintf into a PATH_MAX buffer keep the whole path?
static bool fits(int written) {
    return written >= 0 && written < PATH_MAX;
}

// ---------------------------------------------------------------------------
// Programs a preload cannot record, found out before they start.
//
// A program built with a sanitizer that links its runtime dynamically
// (gcc's -fsanitize=address, thread, leak; clang's with -shared-libsan)
// needs that runtime first in the process's library list, and the runtime
// brings an allocator of its own: with libtpprof.so ahead of it, it stops at
// once ("ASan runtime does not come first in initial library list").
// A statically linked program (no PT_INTERP: no dynamic loader runs) never
// reads LD_PRELOAD at all.

static const char *const sanitizer_runtimes[][2] = {
    {"libasan.so", "AddressSanitizer"}, {"libhwasan.so", "HWAddressSanitizer"},
    {"libtsan.so", "ThreadSanitizer"},  {"liblsan.so", "LeakSanitizer"},
    {"libmsan.so", "MemorySanitizer"},  {"libclang_rt.asan", "AddressSanitizer"},
};

// CMD's executable as execvp would find it, into out; false if none.
static bool find_command(const char *cmd, char *out, size_t size) {
    if (strchr(cmd, '/'))
        return fits(snprintf(out, size, "%s", cmd)) && access(out, X_OK) == 0;
    const char *path = getenv("PATH");
    for (const char *p = path && *path ? path : "/usr/local/bin:/usr/bin:/bin"; p;) {
        const char *colon = strchr(p, ':');
        int len = colon ? (int)(colon - p) : (int)strlen(p);
        if (fits(snprintf(out, size, "%.*s/%s", len, len ? p : ".", cmd)) && access(out, X_OK) == 0) {
            struct stat sb;
            if (stat(out, &sb) == 0 && S_ISREG(sb.st_mode))
                return true;
        }
        p = colon ? colon + 1 : NULL;
    }
    return false;
}

// The sanitizer whose runtime the ELF file e needs (its DT_NEEDED), with the
// library's name in lib; NULL if none.
static const char *sanitizer_needed(Elf *e, char *lib, size_t size) {
    const char *found = NULL;
    for (Elf_Scn *scn = NULL; !found && (scn = elf_nextscn(e, scn)) != NULL;) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNAMIC || !sh.sh_entsize)
            continue;
        Elf_Data *d = elf_getdata(scn, NULL);
        for (size_t i = 0; d && !found && i < sh.sh_size / sh.sh_entsize; i++) {
            GElf_Dyn dyn;
            if (!gelf_getdyn(d, (int)i, &dyn) || dyn.d_tag != DT_NEEDED)
                continue;
            const char *name = elf_strptr(e, sh.sh_link, dyn.d_un.d_val);
            for (size_t k = 0; name && k < sizeof sanitizer_runtimes / sizeof sanitizer_runtimes[0]; k++)
                if (strncmp(name, sanitizer_runtimes[k][0], strlen(sanitizer_runtimes[k][0])) == 0) {
                    snprintf(lib, size, "%s", name);
                    found = sanitizer_runtimes[k][1];
                    break;
                }
        }
    }
    return found;
}

// Is the ELF executable e statically linked (no program interpreter)?
static bool statically_linked(Elf *e) {
    GElf_Ehdr eh;
    size_t n = 0;
    if (!gelf_getehdr(e, &eh) || (eh.e_type != ET_EXEC && eh.e_type != ET_DYN) || elf_getphdrnum(e, &n) != 0 ||
        n == 0)
        return false;
    for (size_t i = 0; i < n; i++) {
        GElf_Phdr ph;
        if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_INTERP)
            return false;
    }
    return true;
}

int tpprof_run_refuse_unrecordable(char **cmd) {
    char exe[PATH_MAX], lib[256];
    if (!find_command(cmd[0], exe, sizeof exe))
        return 0;
    int fd = open(exe, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    Elf *e = elf_version(EV_CURRENT) != EV_NONE ? elf_begin(fd, ELF_C_READ, NULL) : NULL;
    const char *sanitizer = NULL;
    int rc = 0;
    if (e && elf_kind(e) == ELF_K_ELF && statically_linked(e))
        rc = tpprof_error_set("%s is statically linked: no dynamic loader runs in it, so libtpprof.so "
                              "cannot be preloaded and nothing would be recorded; link it dynamically to "
                              "profile it",
                              cmd[0]);
    else if (e && elf_kind(e) == ELF_K_ELF && (sanitizer = sanitizer_needed(e, lib, sizeof lib)))
        rc = tpprof_error_set("%s is built with %s: its runtime (%s) must be the first library loaded and has "
                              "an allocator of its own, so tpprof cannot be preloaded into it; build it without "
                              "-fsanitize to profile it",
                              cmd[0], sanitizer, lib);
    if (e)
        elf_end(e);
    close(fd);
    return rc;
}

// ---------------------------------------------------------------------------
// Where the recording goes, checked before the program starts.
//
// The recorder deletes its output and that file's -wal, -shm and -journal
// siblings before creating the database: each must be absent, empty, or
// SQLite's own file of a tpprof recording, so no file of the user's is ever
// destroyed. A path the recorder could not create is refused here too: the
// program would otherwise run for nothing.

// Is the regular file at path a tpprof recording (meta.tool = 'tpprof'), or
// one tpprof could not write (empty, or SQLite with no table)?
static bool is_recording(const char *path) {
    char why[512];
    if (tpprof_recording_unwritten(path, why, sizeof why))
        return true;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    char head[16] = {0};
    bool sqlite = fd >= 0 && read(fd, head, sizeof head) == (ssize_t)sizeof head &&
                  memcmp(head, "SQLite format 3", 16) == 0;
    if (fd >= 0)
        close(fd);
    if (!sqlite)
        return false;
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    bool ours = sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
                sqlite3_prepare_v2(db, "SELECT value FROM meta WHERE key = 'tool'", -1, &st, NULL) == SQLITE_OK &&
                sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0) &&
                strcmp((const char *)sqlite3_column_text(st, 0), "tpprof") == 0;
    sqlite3_finalize(st);
    sqlite3_close(db);
    return ours;
}

// Does the sibling at path (suffix "-wal", "-shm" or "-journal") look like
// SQLite's own file (its magic number; -shm: whole 32 KiB pieces)?
static bool is_sqlite_sibling(const char *path, const char *suffix, off_t size) {
    unsigned char h[8] = {0};
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t got = fd >= 0 ? read(fd, h, sizeof h) : -1;
    if (fd >= 0)
        close(fd);
    static const unsigned char journal[8] = {0xd9, 0xd5, 0x05, 0xf9, 0x20, 0xa1, 0x63, 0xd7};
    static const unsigned char zero[8] = {0};
    if (strcmp(suffix, "-wal") == 0)
        return got >= 4 && h[0] == 0x37 && h[1] == 0x7f && h[2] == 0x06 && (h[3] == 0x82 || h[3] == 0x83);
    if (strcmp(suffix, "-journal") == 0) // journal_mode=PERSIST zeroes the header
        return got == 8 && (memcmp(h, journal, 8) == 0 || memcmp(h, zero, 8) == 0);
    return size % 32768 == 0;
}

int tpprof_run_check_output(const char *path) {
    for (const char *c = path; *c;) {
        const char *slash = strchr(c, '/');
        size_t len = slash ? (size_t)(slash - c) : strlen(c);
        if (len > NAME_MAX)
            return tpprof_error_set("cannot write the recording at %s: a path component is longer than %d bytes",
                                    path, NAME_MAX);
        c += len + (slash != NULL);
    }
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash)
        *(slash == dir ? slash + 1 : slash) = 0;
    struct stat sb;
    const char *why = stat(dir, &sb) != 0            ? strerror(errno)
                      : !S_ISDIR(sb.st_mode)           ? "not a directory"
                      : access(dir, W_OK | X_OK) != 0 ? strerror(errno)
                                                       : NULL;
    if (why)
        return tpprof_error_set("cannot write the recording into %s: %s", dir, why);
    if (lstat(path, &sb) == 0) {
        if (S_ISDIR(sb.st_mode))
            return tpprof_error_set("cannot write the recording at %s: it is a directory", path);
        if (!S_ISREG(sb.st_mode) || !is_recording(path))
            return tpprof_error_set("refusing to overwrite %s: it is not a tpprof recording", path);
        int fd = open(path, O_RDWR | O_CLOEXEC);
        if (fd < 0)
            return tpprof_error_set("cannot write the recording at %s: %s", path, strerror(errno));
        close(fd);
    } else {
        // Created and removed again: what SQLite would meet (a name too long
        // for the file system, a read-only mount).
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd < 0)
            return tpprof_error_set("cannot write the recording at %s: %s", path, strerror(errno));
        close(fd);
        unlink(path);
    }
    static const char *const suffixes[] = {"-wal", "-shm", "-journal"};
    for (size_t i = 0; i < 3; i++) {
        char sibling[PATH_MAX + 16];
        snprintf(sibling, sizeof sibling, "%s%s", path, suffixes[i]);
        if (lstat(sibling, &sb) != 0)
            continue;
        if (!S_ISREG(sb.st_mode) || (sb.st_size > 0 && !is_sqlite_sibling(sibling, suffixes[i], sb.st_size)))
            return tpprof_error_set("refusing to overwrite %s: it is not SQLite's file of a tpprof recording",
                                    sibling);
    }
    return 0;
}
