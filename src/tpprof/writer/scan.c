// scan.c: classifying the blocks live at exit as lost or reachable.
//
// Like LeakSanitizer: roots are the writable PT_LOAD segments of the loaded
// modules (data, bss), the exiting thread's stack from its current stack
// pointer (its registers are spilled there by the caller), the other live
// threads' stacks, registers and static TLS (they are stopped for the scan:
// stop_others); then a flood fill through reachable blocks. Conservative:
// any aligned word pointing anywhere inside a block keeps it. libtpprof.so's own data and the
// writer thread are never roots, and tpprof's tables live in mmap'd memory
// that is not scanned (the live table holds every block's address).
// Memory that may be unmapped or protected is read with process_vm_readv;
// heap blocks in place only where /proc/self/maps says they are readable.
// Called with the writer mutex and the re-entry guard held; does not
// allocate from the heap.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/auxv.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "writer/roots.h"
#include "writer/writer.h"
#include "base/base.h"
#include "base/elfsym.h"
#include "base/mem.h"
#include "base/modules.h"
#include "base/fdguard.h"
#include "record/rings.h"
#include "record/stacks.h"

#define SMALL (64u << 10) // below glibc's smallest mmap threshold

struct ref {
    uint64_t lo, hi;
    struct tpprof_block *b;
    bool heap;
    bool direct; // a small heap block in readable memory: read in place
    bool opaque; // bytes, not pointers: reachable, but not read (see below)
    bool loader; // the dynamic loader allocated it
    bool libc;   // libc allocated it for itself (see "The C library's")
    bool late;   // first reached from the C library's own data
};

// A stdio buffer (the block glibc's _IO_file_doallocate mallocs for a
// stream) holds the bytes that went through the stream, and, past them,
// whatever the chunk held before: malloc does not clear it. A freed tensor
// struct's copy of a leaked storage's data address, left there, made that
// leak look reachable through stdout (cache_leak's second 256 KiB block,
// every run without MALLOC_PERTURB_). Such a block is kept when pointed to
// but its contents are not scanned. [stdio_lo, stdio_hi): the function's
// code, found in the constructor (a dlsym at the scan would drop the
// thread's pending dlerror state).
static uintptr_t stdio_lo, stdio_hi;

// A lookup failed: the thread's dlerror() state is ours, not the program's.
static bool lookup_failed;

// [lo, hi) of the code of the C library's function `name` (0, 0 if absent).
static void code_of(const char *name, uintptr_t *lo, uintptr_t *hi) {
    void *f = dlsym(RTLD_DEFAULT, name);
    if (!f) lookup_failed = true;
    Dl_info info;
    const ElfW(Sym) *sym = NULL;
    *lo = *hi = 0;
    size_t size = f ? tpprof_elfsym_size(f, name) : 0; // (dladdr1 is slow: elfsym.h)
    if (f && !size && dladdr1(f, &info, (void **)&sym, RTLD_DL_SYMENT) && sym) size = sym->st_size;
    if (size) {
        *lo = (uintptr_t)f;
        *hi = *lo + size;
    }
}

// The C library's own. glibc keeps caches for the life of the process
// (locale data, NSS modules, time zone, resolver and interface state, the
// loader's records of what dlopen loaded) and frees them only in
// __libc_freeres, which valgrind runs at exit, so it never shows them. That
// cannot be run here (code may still run after the scan and use them), so
// the scan tells them apart: first from the program's roots (every module's
// data but libc's and the loader's, thread stacks, registers and TLS, and
// the FILEs of streams the program opened and never closed, which glibc
// lists), then from libc's and the loader's data. A block first reached in
// the second pass and allocated inside libc or the loader is the C
// library's (reachability 3, not a leak); one the program allocated is the
// program's, reachable, wherever it is held. "Allocated inside libc" means
// by libc for itself: the allocating function and its caller are libc's
// (or the loader's), or the allocating function is one of the getters that
// keep their result in a buffer of their own (getpwuid and the like). A
// strdup the program called is the program's, so a stale copy of its
// address in some cache of libc's (malloc does not clear the chunks it
// hands out) cannot hide a leak of the program's; it makes it look
// reachable, as anywhere else. [_IO_list_all]: glibc's list of open
// streams (NULL elsewhere).
static FILE **io_list_all;

static const char *const getters[] = {
    "getpwuid", "getpwnam", "getpwent", "getgrgid", "getgrnam", "getgrent", "getspnam",
    "gethostbyname", "gethostbyname2", "gethostbyaddr", "gethostent", "getservbyname", "getservbyport",
    "getprotobyname", "getprotobynumber", "getnetbyname", "getnetbyaddr",
};
#define NGETTERS (sizeof getters / sizeof getters[0])
static uintptr_t getter_code[NGETTERS][2];

void tpprof_scan_prepare(void) {
    io_list_all = dlsym(RTLD_DEFAULT, "_IO_list_all");
    code_of("_IO_file_doallocate", &stdio_lo, &stdio_hi);
    for (size_t i = 0; i < NGETTERS; i++) code_of(getters[i], &getter_code[i][0], &getter_code[i][1]);
    if (!io_list_all) lookup_failed = true;
    if (lookup_failed) (void)dlerror(); // else the program's first dlerror() would report our lookup
}

static bool in_getter(uintptr_t ip) {
    for (size_t i = 0; i < NGETTERS; i++)
        if (ip >= getter_code[i][0] && ip < getter_code[i][1]) return true;
    return false;
}

static struct ref *refs;
static uint64_t nrefs;
static uint32_t *work;
static uint64_t nwork;
static uint64_t min_addr, max_addr;

// ---------------------------------------------------------------------------
// Finding the block a word points into.

static void sort_refs(struct ref *a, int64_t n) { // heapsort: no malloc, no recursion
    for (int64_t start = n / 2 - 1, end = n; end > 1;) {
        int64_t root;
        if (start >= 0) {
            root = start--;
        } else {
            struct ref t = a[0];
            a[0] = a[--end];
            a[end] = t;
            root = 0;
        }
        for (;;) {
            int64_t c = 2 * root + 1;
            if (c >= end) break;
            if (c + 1 < end && a[c + 1].lo > a[c].lo) c++;
            if (a[root].lo >= a[c].lo) break;
            struct ref t = a[root];
            a[root] = a[c];
            a[c] = t;
            root = c;
        }
    }
}

// The last ref at or below the previous word looked up (-1: none yet; reset
// with each sort). Words read one after another mostly point near each
// other: into the same block, or the same mapping (a compiler's garbage-
// collected heap, mmap'd in MiB chunks, is pointers into itself), and a
// binary search over every block for each was most of the scan's own time.
// [refs[last].lo, refs[last + 1].lo) is the span where the search would
// answer `last` again.
static int64_t last;

static int64_t find(uint64_t v) {
    int64_t found = -1;
    if (last >= 0 && refs[last].lo <= v && (last + 1 == (int64_t)nrefs || v < refs[last + 1].lo)) {
        found = last;
    } else {
        int64_t lo = 0, hi = (int64_t)nrefs - 1;
        while (lo <= hi) {
            int64_t mid = (lo + hi) / 2;
            if (refs[mid].lo <= v) {
                found = mid;
                lo = mid + 1;
            } else {
                hi = mid - 1;
            }
        }
        last = found;
    }
    if (found < 0 || v >= refs[found].hi) return -1;
    const struct ref *r = &refs[found];
    // glibc keeps pointers to the chunk header that follows a block (the top
    // chunk, free-list links); that header lies inside the block's usable tail
    // when the request filled it. Such a word points at the next chunk, not
    // into this block. The block's own chunk header (the size word before
    // it) says where the next one is; an mmapped chunk has none after it.
    // (Only for small blocks in readable memory: a large one may be an
    // mmapped chunk that a still-running thread frees, and unmaps, during
    // the scan, and a block freed behind the hooks may be gone.)
    if (r->direct && (v & 15) == 0 && v != r->lo) {
        uint64_t size = ((const uint64_t *)r->lo)[-1];
        if (!(size & 2) && v == r->lo - 16 + (size & ~(uint64_t)7)) return -1;
    }
    return found;
}

// Inside glibc's own data only a pointer to a block's first byte counts:
// malloc's arena there keeps chunk-header pointers (bins, last_remainder)
// that go stale inside live blocks after in-place growth or splitting.
static bool exact_only;
// Inside the dynamic loader's own data no pointer to a mapping the program
// made counts: the loader never keeps one, but its start-up allocator keeps
// the end of its last page (alloc_end, one past it) in its bss, which is the
// start of whatever mapping the kernel puts right above that page, and made
// such a lost mapping look reachable.
static bool heap_only;
// Set for the second pass, from the C library's data.
static bool late_pass;

static void scan_words(const uint64_t *p, size_t n) {
    for (size_t i = 0; i < n; i++) {
        uint64_t v = p[i];
        if (v < min_addr || v >= max_addr) continue;
        int64_t k = find(v);
        if (k < 0 || refs[k].b->reach == 2) continue;
        if (exact_only && v != refs[k].lo) continue;
        if (heap_only && !refs[k].heap) continue;
        refs[k].b->reach = 2;
        refs[k].late = late_pass;
        work[nwork++] = (uint32_t)k;
    }
}

static void scan_direct(uintptr_t lo, uintptr_t hi) {
    lo = (lo + 7) & ~(uintptr_t)7;
    if (hi > lo) scan_words((const uint64_t *)lo, (hi - lo) / 8);
}

// Copies [p, p+n) into buf through the kernel, so an unmapped or protected
// page fails instead of faulting: process_vm_readv on ourselves, or, where a
// seccomp policy forbids it, a round trip through a pipe. Returns bytes read.
static int pipe_fd[2] = {-1, -1};
static bool use_pipe;

static ssize_t safe_copy(void *buf, uintptr_t p, size_t n) {
    if (!use_pipe) {
        struct iovec local = {buf, n}, remote = {(void *)p, n};
        // This thread's id, not the process's: after main's pthread_exit
        // the process id names a thread that has no memory any more, and
        // every read failed (ESRCH): nothing was read, and a block held
        // only from the C library's data (stdout's buffer) read lost.
        ssize_t got = process_vm_readv((pid_t)syscall(SYS_gettid), &local, 1, &remote, 1, 0);
        if (got >= 0 || (errno != EPERM && errno != ENOSYS)) return got;
        use_pipe = true;
    }
    if (pipe_fd[0] < 0 && pipe2(pipe_fd, O_CLOEXEC | O_NONBLOCK) != 0) return -1;
    if (n > 4096) n = 4096;
    ssize_t w = write(pipe_fd[1], (const void *)p, n);
    if (w <= 0) return -1;
    return read(pipe_fd[0], buf, (size_t)w);
}

static void scan_range(uintptr_t lo, uintptr_t hi) {
    static uint64_t buf[8192];
    lo = (lo + 7) & ~(uintptr_t)7;
    while (lo + 8 <= hi) {
        size_t want = hi - lo < sizeof buf ? (hi - lo) & ~(size_t)7 : sizeof buf;
        ssize_t got = safe_copy(buf, lo, want);
        if (got >= 8) scan_words(buf, (size_t)got / 8);
        else got = 4096 - (ssize_t)(lo & 4095); // skip the bad page
        lo += (uintptr_t)got & ~(uintptr_t)7;
    }
}

// Pages never touched. A mapping of gigabytes reserved up front (an
// allocator's arena, a NORESERVE region, a big bss) is mostly pages the
// program never touched, and reading one made the kernel map it: 16 GiB
// reserved took 3 s to scan at exit. /proc/self/pagemap says which pages are
// present or swapped out; only those are read (a file mapping's pages not in
// memory hold the file's bytes, not pointers of this run). Without pagemap,
// everything is read, as before.
#define SPARSE_MIN ((uintptr_t)1 << 20) // ranges at least this big are looked up first
#define PM_WINDOW 512                    // pages per pagemap read

// The calling thread's /proc file `name` (maps, pagemap): thread-self, not
// self, which after main's pthread_exit names a thread whose memory is gone
// (its maps read empty: nothing was readable in place).
static int open_own(const char *name) {
    char path[64];
    snprintf(path, sizeof path, "/proc/thread-self/%s", name);
    int fd = tpprof_fd_open(path);
    if (fd >= 0) return fd;
    snprintf(path, sizeof path, "/proc/self/%s", name); // before Linux 3.17
    return tpprof_fd_open(path);
}

static int pagemap_fd = -2; // -2: not opened yet (per scan)

static void scan_safe(uintptr_t lo, uintptr_t hi) {
    if (hi <= lo || hi - lo < SPARSE_MIN) return scan_range(lo, hi);
    if (pagemap_fd == -2) pagemap_fd = open_own("pagemap");
    if (pagemap_fd < 0) return scan_range(lo, hi);
    uintptr_t ps = (uintptr_t)getauxval(AT_PAGESZ);
    if (!ps) ps = 4096;
    uint64_t ent[PM_WINDOW];
    for (uintptr_t page = lo & ~(ps - 1); page < hi;) {
        size_t n = (size_t)((hi - page + ps - 1) / ps);
        if (n > PM_WINDOW) n = PM_WINDOW;
        ssize_t got = pread(pagemap_fd, ent, n * sizeof ent[0], (off_t)(page / ps * sizeof ent[0]));
        if (got < (ssize_t)sizeof ent[0]) return scan_range(page > lo ? page : lo, hi); // cannot tell: read it
        size_t k = (size_t)got / sizeof ent[0];
        for (size_t i = 0; i < k;) {
            if (!(ent[i] >> 62)) { // neither present (bit 63) nor swapped (62)
                i++;
                continue;
            }
            size_t j = i;
            while (j < k && ent[j] >> 62) j++;
            uintptr_t a = page + i * ps, b = page + j * ps;
            scan_range(a < lo ? lo : a, b > hi ? hi : b);
            i = j;
        }
        page += k * ps;
    }
}

// ---------------------------------------------------------------------------
// Roots.

// The data of the modules of one pass: *arg false, all but libc and the
// loader; true, those two (roots.c picks the segments).
static int module_roots(struct dl_phdr_info *info, size_t size, void *arg) {
    (void)size;
    const struct tpprof_root_rules rules = {
        .loader_base = getauxval(AT_BASE), .self_lo = tpprof_self_lo, .self_hi = tpprof_self_hi};
    struct tpprof_root r;
    for (int i = 0; tpprof_roots_next_segment(info, &rules, *(const bool *)arg, &i, &r);) {
        exact_only = r.exact_only;
        heap_only = r.heap_only;
        scan_safe(r.lo, r.hi);
        exact_only = heap_only = false;
    }
    return 0;
}

// libc's code: the span of its PT_LOAD segments (arg: lo, hi).
static int libc_range(struct dl_phdr_info *info, size_t size, void *arg) {
    (void)size;
    if (!tpprof_roots_is_libc(info)) return 0;
    uintptr_t *r = arg;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD) continue;
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
        if (!r[0] || lo < r[0]) r[0] = lo;
        if (lo + ph->p_memsz > r[1]) r[1] = lo + ph->p_memsz;
    }
    return 1;
}

// The FILEs of the streams open now that are heap blocks (fopen's and the
// like: stdin, stdout and stderr are libc's data): the program opened them.
// The list is read through safe_copy (a stream half torn down by a thread
// still running).
static void open_streams(void) {
    if (!io_list_all) return;
    FILE *fp = NULL;
    if (safe_copy(&fp, (uintptr_t)io_list_all, sizeof fp) != sizeof fp) return;
    for (int n = 0; fp && n < 100000; n++) {
        uint64_t v = (uint64_t)(uintptr_t)fp;
        int64_t k = v >= min_addr && v < max_addr ? find(v) : -1;
        if (k >= 0 && refs[k].lo == v && refs[k].b->reach != 2) {
            refs[k].b->reach = 2;
            work[nwork++] = (uint32_t)k;
        }
        FILE *next = NULL;
        if (safe_copy(&next, (uintptr_t)&fp->_chain, sizeof next) != sizeof next) break;
        fp = next;
    }
}

// Narrows ld.lo's guess to the PT_LOAD range of the object based there.
static int range_of(struct dl_phdr_info *info, size_t size, void *arg) {
    (void)size;
    uintptr_t *r = arg;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_LOAD && r[0] >= lo && r[0] < lo + ph->p_memsz) {
            uintptr_t mlo = UINTPTR_MAX, mhi = 0;
            for (int k = 0; k < info->dlpi_phnum; k++) {
                const ElfW(Phdr) *p = &info->dlpi_phdr[k];
                if (p->p_type != PT_LOAD) continue;
                uintptr_t a = info->dlpi_addr + p->p_vaddr;
                if (a < mlo) mlo = a;
                if (a + p->p_memsz > mhi) mhi = a + p->p_memsz;
            }
            r[0] = mlo;
            r[1] = mhi;
            return 1;
        }
    }
    return 0;
}

static int tls_size(struct dl_phdr_info *info, size_t size, void *arg) {
    (void)size;
    for (int i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_TLS)
            *(uintptr_t *)arg += (info->dlpi_phdr[i].p_memsz + 63) & ~(uintptr_t)63;
    return 0;
}

static void drain_work(void) {
    while (nwork) {
        const struct ref *r = &refs[work[--nwork]];
        if (r->opaque) continue;
        if (r->direct) scan_direct(r->lo, r->hi);
        else scan_safe(r->lo, r->hi); // mappings, and chunks that may be unmapped
    }
}

// ---------------------------------------------------------------------------
// Reservations.
//
// A program that reserves address space PROT_NONE and commits parts of it
// (a JVM's heap and its card tables and bitmaps, V8's and Go's arenas)
// reaches a committed part by the reservation's base plus an offset, or by
// a base biased to lie outside it, not by a pointer into the part: the
// JVM's java -version left nine such parts "lost". So the pieces of one
// reservation, contiguous (its reserved parts and the mappings carved from
// it), stand or fall together: when one of them is reached, every carved
// piece is, and its contents are scanned. (Two reservations side by side
// count as one: a lost one beside a reachable one is missed.) Returns
// whether it marked any.

static bool in_reservation(const struct tpprof_wstate *w, const struct ref *r) {
    return !r->heap && (r->b->carved || w->sites[r->b->site].kind == TPPROF_KIND_MMAP_RESERVED);
}

static bool reservations_reach(const struct tpprof_wstate *w) {
    bool marked = false;
    for (uint64_t i = 0; i < nrefs;) {
        if (!in_reservation(w, &refs[i])) {
            i++;
            continue;
        }
        uint64_t j = i + 1, hi = refs[i].hi;
        bool reached = refs[i].b->reach == 2;
        for (; j < nrefs && refs[j].lo <= hi; j++) { // (refs are sorted by start)
            if (refs[j].heap) continue;
            if (refs[j].lo != hi || !in_reservation(w, &refs[j])) break;
            hi = refs[j].hi;
            reached |= refs[j].b->reach == 2;
        }
        for (uint64_t k = i; reached && k < j; k++)
            if (!refs[k].heap && refs[k].b->carved && refs[k].b->reach != 2) {
                refs[k].b->reach = 2;
                work[nwork++] = (uint32_t)k;
                marked = true;
            }
        i = j;
    }
    return marked;
}

// ---------------------------------------------------------------------------
// Readable memory, from /proc/self/maps as the scan starts (in address order,
// touching ranges merged). A heap block outside it is one the recording still
// holds live although its memory is gone: freed where the hooks do not see
// it (a library bound to libc's free by RTLD_DEEPBIND, meta.bypassing_modules)
// and then given back to the kernel. It is read only through safe_copy.
// (Reading the program's anonymous memory in place when the scanner is its
// only thread, signals blocked, instead of through process_vm_readv, was
// tried: a small cc1's scan 2.45 -> 2.28 ms, 0.4% of what `gcc -c` pays
// under the preload; not worth a second read path.)

#define MAX_READABLE (1u << 16)
static uint64_t (*readable)[2];
static uint32_t nreadable;

static void readable_add(uint64_t lo, uint64_t hi) {
    if (nreadable && readable[nreadable - 1][1] == lo) readable[nreadable - 1][1] = hi;
    else if (nreadable < MAX_READABLE) readable[nreadable][0] = lo, readable[nreadable++][1] = hi;
}

// Parses one line of the maps file: "lo-hi perms ...".
static void readable_line(const char *p, const char *end) {
    uint64_t v[2] = {0, 0};
    for (int k = 0; k < 2; k++, p++) {
        for (; p < end; p++) {
            int c = *p, d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
            if (d < 0) break;
            v[k] = v[k] << 4 | (uint64_t)d;
        }
        if (p >= end || *p != (k == 0 ? '-' : ' ')) return;
    }
    if (p < end && *p == 'r' && v[1] > v[0]) readable_add(v[0], v[1]);
}

static void readable_load(void) {
    nreadable = 0;
    int fd = open_own("maps");
    if (fd < 0) return;
    static char buf[1 << 16];
    size_t have = 0;
    for (;;) {
        ssize_t n = read(fd, buf + have, sizeof buf - have);
        if (n <= 0) break;
        have += (size_t)n;
        char *p = buf, *end = buf + have, *nl;
        while ((nl = memchr(p, '\n', (size_t)(end - p))) != NULL) {
            readable_line(p, nl);
            p = nl + 1;
        }
        have = (size_t)(end - p);
        if (have == sizeof buf) have = 0; // a line longer than the buffer: dropped
        memmove(buf, p, have);
    }
    tpprof_fd_close(fd);
}

// [lo, hi) lies inside one readable range.
static bool is_readable(uint64_t lo, uint64_t hi) {
    uint32_t a = 0, b = nreadable;
    while (a < b) { // first range ending above lo
        uint32_t m = (a + b) / 2;
        if (readable[m][1] <= lo) a = m + 1;
        else b = m;
    }
    return a < nreadable && readable[a][0] <= lo && hi <= readable[a][1];
}

// ---------------------------------------------------------------------------
// Stopping the other threads. Each live thread that recorded and is running
// (its /proc state is R) is sent a real-time signal that nothing else
// handles; its handler notes where it runs on the thread's stack and waits
// until the scan is done. The kernel saved the thread's registers in the
// signal frame right there, so they are read as roots with the rest of the
// stack, which is read from that point up: not the dead frames below where
// the thread was stopped (stale copies there made lost blocks look
// reachable). A thread blocked in the kernel is not signalled: that would
// cut short a system call that a signal interrupts whatever SA_RESTART says
// (poll, nanosleep, epoll_wait: EINTR), and the program could act on that.
// It stays where it is; its stack is read from the stack pointer the kernel
// reports for it (/proc/self/task/TID/syscall), its registers are not. A
// thread that blocks the signal (its /proc status says so), one that does not
// answer within STOP_WAIT_NS, one left running when no signal was free, or
// one whose stack pointer cannot be read, is read as before: its whole stack,
// without its registers. A thread that can take the signal answers as soon as
// it is scheduled, which on a loaded machine can take a while: the wait is
// long (a 100 ms wait, under a parallel test run, left a spinning thread's
// dead frames as roots). The handler gives up waiting after HOLD_NS whatever
// happens.

// Reads /proc/self/task/TID/NAME into buf (NUL-terminated); bytes read or -1.
static ssize_t task_file(pid_t tid, const char *name, char *buf, size_t cap) {
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%d/%s", (int)tid, name);
    int fd = tpprof_fd_open(path);
    if (fd < 0) return -1;
    ssize_t n = read(fd, buf, cap - 1);
    tpprof_fd_close(fd);
    if (n < 0) return -1;
    buf[n] = 0;
    return n;
}

// The thread's scheduler state letter (R running, S sleeping, ...), or 0.
static char task_state(pid_t tid) {
    char buf[512];
    if (task_file(tid, "stat", buf, sizeof buf) <= 0) return 0;
    const char *p = strrchr(buf, ')'); // the name may hold spaces and parentheses
    return p && p[1] == ' ' ? p[2] : 0;
}

// The user stack pointer of a thread blocked in the kernel: the syscall
// file is "NR ARG1..ARG6 SP PC", or "-1 SP PC" outside a system call, or
// "running". 0 when it cannot be read.
static uintptr_t task_blocked_sp(pid_t tid) {
    char buf[256];
    if (task_file(tid, "syscall", buf, sizeof buf) <= 0 || buf[0] == 'r') return 0;
    uint64_t v[9];
    int n = 0;
    for (char *p = buf; *p && n < 9;) {
        while (*p == ' ') p++;
        if (!*p || *p == '\n') break;
        char *end;
        v[n++] = strtoull(p, &end, 0);
        if (end == p) return 0;
        p = end;
    }
    if (n == 3 && (int64_t)v[0] == -1) return (uintptr_t)v[1];
    return n == 9 ? (uintptr_t)v[7] : 0;
}

// Whether thread `tid` blocks signal `sig` (its status's SigBlk mask); a
// thread whose status cannot be read counts as blocking it.
static bool task_blocks(pid_t tid, int sig) {
    char buf[2048];
    if (task_file(tid, "status", buf, sizeof buf) <= 0) return true;
    const char *p = strstr(buf, "\nSigBlk:");
    if (!p) return true;
    unsigned long long mask = strtoull(p + 8, NULL, 16);
    return (mask >> (sig - 1)) & 1;
}

#define STOP_WAIT_NS 1500000000ull
#define HOLD_NS 10000000000ull

static _Atomic int stop_acks, stop_release;
static int stop_sig;
static struct sigaction stop_old;

static uint64_t mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void nap(void) {
    struct timespec ts = {0, 100000};
    nanosleep(&ts, NULL);
}

static void stop_handler(int sig, siginfo_t *si, void *uc) {
    (void)sig, (void)si, (void)uc;
    int saved = errno;
    volatile uintptr_t here = 0; // below the signal frame: the stack is read from here
    struct tpprof_thread *t = tpprof_self;
    if (t) atomic_store(&t->stop_sp, (uintptr_t)&here);
    atomic_fetch_add(&stop_acks, 1);
    uint64_t start = mono_ns();
    while (!atomic_load(&stop_release) && mono_ns() - start < HOLD_NS) nap();
    if (t) atomic_store(&t->stop_sp, 0);
    errno = saved;
}

// Installs stop_handler on a real-time signal nobody handles (stop_sig);
// false when there is none, or when TPPROF_SCAN_STOP=0 (a program whose
// threads take every signal with sigwait would be handed ours).
static bool stop_install(void) {
    stop_sig = 0;
    if (!tpprof_cfg.scan_stop) return false;
    for (int s = SIGRTMAX; s >= SIGRTMIN && !stop_sig; s--) {
        struct sigaction cur;
        if (sigaction(s, NULL, &cur) == 0 && !(cur.sa_flags & SA_SIGINFO) && cur.sa_handler == SIG_DFL) stop_sig = s;
    }
    if (!stop_sig) return false;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = stop_handler;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigfillset(&sa.sa_mask);
    if (sigaction(stop_sig, &sa, &stop_old) == 0) return true;
    stop_sig = 0;
    return false;
}

// Stops every running thread but `me` and notes where each blocked one's
// stack is (t->stop_sp); returns how many were stopped.
static int stop_others(struct tpprof_thread *me) {
    bool can_stop = stop_install();
    atomic_store(&stop_acks, 0);
    atomic_store(&stop_release, 0);
    int sent = 0;
    pid_t pid = getpid();
    for (struct tpprof_thread *t = atomic_load(&tpprof_threads); t; t = t->next) {
        atomic_store(&t->stop_sp, 0);
        if (t == me || atomic_load(&t->exited) || t->tid <= 0) continue;
        if (task_state(t->tid) != 'R') {
            // Blocked: read from its stack pointer down to the 128-byte red
            // zone below it (a leaf function's own data), without stopping it.
            uintptr_t sp = task_blocked_sp(t->tid);
            if (sp) atomic_store(&t->stop_sp, sp - 128);
            continue;
        }
        if (can_stop && !task_blocks(t->tid, stop_sig) && syscall(SYS_tgkill, pid, t->tid, stop_sig) == 0) sent++;
    }
    uint64_t start = mono_ns();
    while (atomic_load(&stop_acks) < sent && mono_ns() - start < STOP_WAIT_NS) nap();
    return atomic_load(&stop_acks);
}

static void resume_others(void) {
    if (!stop_sig) return;
    atomic_store(&stop_release, 1);
    // A signal still pending (blocked by its thread) must not arrive later
    // with the default action, which ends the process: ignoring it drops it.
    struct sigaction ign;
    memset(&ign, 0, sizeof ign);
    ign.sa_handler = SIG_IGN;
    sigaction(stop_sig, &ign, NULL);
    sigaction(stop_sig, &stop_old, NULL);
    stop_sig = 0;
}

// ---------------------------------------------------------------------------
// Entry.

void tpprof_scan_run(struct tpprof_wstate *w, uintptr_t sp) {
    uint64_t n = w->live.count + w->nmaps;
    size_t rbytes = (n ? n : 1) * sizeof *refs, wbytes = (n ? n : 1) * sizeof *work;
    stop_others(tpprof_self);
    refs = tpprof_mem_map(rbytes);
    work = tpprof_mem_map(wbytes);
    readable = tpprof_mem_map(MAX_READABLE * sizeof *readable);
    if (!refs || !work || !readable) goto out;
    readable_load();
    nrefs = 0;
    nwork = 0;
    // The loader's code, and libc's: who allocated a block (its leaf frame).
    // (The loader's found by its load address, not by dlsym: a dlsym that
    // succeeds frees the calling thread's pending dlerror() state, here the
    // program's, and with the guard set that free went unrecorded: after a
    // failed dlopen, the error glibc kept for dlerror() showed as two lost
    // blocks.)
    struct { uintptr_t lo, hi; } ld = {0, 0}, libc = {0, 0};
    ld.lo = (uintptr_t)getauxval(AT_BASE);
    if (ld.lo) {
        ld.hi = ld.lo + ((uintptr_t)1 << 21);
        dl_iterate_phdr(range_of, &ld);
    }
    dl_iterate_phdr(libc_range, &libc);
#define IN(x, ip) ((ip) >= (x).lo && (ip) < (x).hi)
    for (uint64_t i = 0; i < w->live.cap; i++) {
        struct tpprof_block *b = &w->live.slots[i];
        if (!b->addr) continue;
        b->reach = 1;
        uint64_t hi = b->addr + (b->size ? b->size : 1);
        // Its chunk header too (the size word before it): find reads that.
        bool direct = hi - b->addr < SMALL && b->addr >= 16 && is_readable(b->addr - 16, hi);
        // Who allocated it: its leaf frame, and that frame's caller.
        uint32_t leaf = w->sites[b->site].stack, up = leaf ? w->nodes[leaf].parent : 0;
        uint64_t ip = leaf ? tpprof_node_ip(leaf) : 0, caller = up ? tpprof_node_ip(up) : 0;
        bool libc_own = (IN(libc, ip) || IN(ld, ip)) && (IN(libc, caller) || IN(ld, caller) || in_getter(ip));
        refs[nrefs++] = (struct ref){b->addr, hi, b, true, direct, ip >= stdio_lo && ip < stdio_hi, IN(ld, ip),
                                     libc_own, false};
    }
#undef IN
    for (uint64_t i = 0; i < w->nmaps; i++) {
        struct tpprof_block *b = &w->maps[i];
        b->reach = 1;
        refs[nrefs++] = (struct ref){b->addr, b->addr + b->size, b, false, false, false, false, false, false};
    }
    if (!nrefs) goto out;
    sort_refs(refs, (int64_t)nrefs);
    last = -1;
    min_addr = refs[0].lo;
    max_addr = 0;
    for (uint64_t i = 0; i < nrefs; i++)
        if (refs[i].hi > max_addr) max_addr = refs[i].hi;


    // First pass: the program's roots.
    late_pass = false;
    open_streams();
    bool libc_pass = false;
    dl_iterate_phdr(module_roots, &libc_pass);
    drain_work();
    uintptr_t tls = 2048;
    dl_iterate_phdr(tls_size, &tls);
    struct tpprof_thread *me = tpprof_self;
    for (struct tpprof_thread *t = atomic_load(&tpprof_threads); t; t = t->next) {
        struct tpprof_root r[2];
        int n = tpprof_roots_of_thread(t, me, sp, tls, r);
        if (!n) continue;
        for (int k = 0; k < n; k++) scan_safe(r[k].lo, r[k].hi);
        drain_work();
    }
    if (!me) { // exiting thread never allocated: still a root
        uintptr_t lo, hi;
        tpprof_unwind_thread_bounds(&lo, &hi);
        if (hi > sp) scan_safe(sp, hi);
        uintptr_t tp = (uintptr_t)__builtin_thread_pointer();
        scan_safe(tp - tls, tp + 2048);
        drain_work();
    }
    while (reservations_reach(w)) drain_work();

    // Second pass: the C library's data. Blocks the loader allocated itself
    // (DTVs, dynamic TLS) hang off thread control blocks that glibc caches
    // outside any root: never lost.
    late_pass = true;
    for (uint64_t i = 0; i < nrefs; i++) {
        if (refs[i].heap && refs[i].loader && refs[i].b->reach != 2) {
            refs[i].b->reach = 2;
            refs[i].late = true;
            work[nwork++] = (uint32_t)i;
        }
    }
    libc_pass = true;
    dl_iterate_phdr(module_roots, &libc_pass);
    drain_work();
    while (reservations_reach(w)) drain_work();
    late_pass = false;

    // The C library's (reachability 3): a reachable stdio buffer (a stream's,
    // open at exit: its FILE, if the program opened the stream and never
    // closed it, is still the program's, at fopen), anything reachable the
    // loader allocated, and what libc allocated that only the second pass
    // reached.
    for (uint64_t i = 0; i < nrefs; i++) {
        struct ref *r = &refs[i];
        if (r->b->reach == 2 && r->heap && (r->opaque || r->loader || (r->late && r->libc))) r->b->reach = 3;
    }
out:
    resume_others();
    if (pagemap_fd >= 0) tpprof_fd_close(pagemap_fd);
    pagemap_fd = -2;
    tpprof_mem_unmap(refs, rbytes);
    tpprof_mem_unmap(work, wbytes);
    tpprof_mem_unmap(readable, MAX_READABLE * sizeof *readable);
    refs = NULL;
    work = NULL;
    readable = NULL;
}
