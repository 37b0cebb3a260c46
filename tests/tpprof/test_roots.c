// test_roots.c: unit tests of the leak scan's roots (src/tpprof/writer/roots.c,
// roots.h), on hand-built program headers and thread structs: which
// segments of which loaded objects are read in which pass (the program's
// first, then the C library's and the loader's, each with its own rule),
// that libtpprof.so's own data never is, and which part of each thread's
// stack and TLS is read. No process is scanned: runs under ASan+UBSan too.
#define _GNU_SOURCE
#include <elf.h>
#include <link.h>
#include <stdio.h>
#include <string.h>

#include "writer/roots.h"
#include "../check.h"

// ---------------------------------------------------------------------------
// Hand-built objects.

#define LOADER_BASE 0x7f0000000000u
#define SELF_LO 0x7f1000000000u
#define SELF_HI 0x7f1000100000u
static const struct tpprof_root_rules rules = {.loader_base = LOADER_BASE, .self_lo = SELF_LO, .self_hi = SELF_HI};

// A typical object's headers: code, read-only data, data + bss (p_memsz
// past p_filesz), and non-PT_LOAD headers over the data (dynamic, RELRO).
static const ElfW(Phdr) typical[] = {
    {.p_type = PT_LOAD, .p_flags = PF_R | PF_X, .p_vaddr = 0x0, .p_memsz = 0x5000},
    {.p_type = PT_LOAD, .p_flags = PF_R, .p_vaddr = 0x5000, .p_memsz = 0x2000},
    {.p_type = PT_LOAD, .p_flags = PF_R | PF_W, .p_vaddr = 0x8000, .p_filesz = 0x800, .p_memsz = 0x3000},
    {.p_type = PT_DYNAMIC, .p_flags = PF_R | PF_W, .p_vaddr = 0x8100, .p_memsz = 0x200},
    {.p_type = PT_GNU_RELRO, .p_flags = PF_R, .p_vaddr = 0x8000, .p_memsz = 0x1000},
    {.p_type = PT_TLS, .p_flags = PF_R, .p_vaddr = 0x8800, .p_memsz = 0x40},
};
#define NTYPICAL ((int)(sizeof typical / sizeof typical[0]))

static struct dl_phdr_info object(const char *name, uintptr_t base, const ElfW(Phdr) *ph, int n) {
    return (struct dl_phdr_info){.dlpi_addr = base, .dlpi_name = name, .dlpi_phdr = ph, .dlpi_phnum = (ElfW(Half))n};
}

// The roots of one object in one pass, as "lo-hi[e][h] ..." (e: exact
// only, h: heap only).
static char text[1024];
static const char *roots_of(const struct dl_phdr_info *info, bool libc_pass) {
    size_t n = 0;
    text[0] = 0;
    struct tpprof_root r;
    for (int i = 0; tpprof_roots_next_segment(info, &rules, libc_pass, &i, &r);)
        n += (size_t)snprintf(text + n, sizeof text - n, "%s%lx-%lx%s%s", n ? " " : "", (unsigned long)r.lo,
                              (unsigned long)r.hi, r.exact_only ? "e" : "", r.heap_only ? "h" : "");
    return text;
}

// ---------------------------------------------------------------------------
// Loaded objects.

static void test_writable_load_segments_with_their_bss_are_the_roots(void) {
    struct dl_phdr_info prog = object("", 0x555500000000u, typical, NTYPICAL);
    CHECK_STR_EQ(roots_of(&prog, false), "555500008000-55550000b000");
    CHECK_STR_EQ(roots_of(&prog, true), ""); // the program's data is read in the first pass only
    struct dl_phdr_info lib = object("/usr/lib/libfoo.so.1", 0x7f2000000000u, typical, NTYPICAL);
    CHECK_STR_EQ(roots_of(&lib, false), "7f2000008000-7f200000b000");
}

static void test_an_object_with_two_data_segments_gives_both(void) {
    const ElfW(Phdr) two[] = {
        {.p_type = PT_LOAD, .p_flags = PF_R | PF_W, .p_vaddr = 0x1000, .p_memsz = 0x100},
        {.p_type = PT_LOAD, .p_flags = PF_R | PF_X, .p_vaddr = 0x2000, .p_memsz = 0x100},
        {.p_type = PT_LOAD, .p_flags = PF_W, .p_vaddr = 0x3000, .p_memsz = 0x200},
    };
    struct dl_phdr_info o = object("/opt/two.so", 0x10000, two, 3);
    CHECK_STR_EQ(roots_of(&o, false), "11000-11100 13000-13200");
}

static void test_libc_and_the_loader_are_read_in_the_second_pass_with_their_rules(void) {
    struct dl_phdr_info libc = object("/lib/x86_64-linux-gnu/libc.so.6", 0x7f3000000000u, typical, NTYPICAL);
    CHECK_STR_EQ(roots_of(&libc, false), "");
    CHECK_STR_EQ(roots_of(&libc, true), "7f3000008000-7f300000b000e");
    struct dl_phdr_info bare = object("libc.so.6", 0x7f3000000000u, typical, NTYPICAL);
    CHECK_STR_EQ(roots_of(&bare, true), "7f3000008000-7f300000b000e");
    struct dl_phdr_info ld = object("/lib64/ld-linux-x86-64.so.2", LOADER_BASE, typical, NTYPICAL);
    CHECK_STR_EQ(roots_of(&ld, false), "");
    CHECK_STR_EQ(roots_of(&ld, true), "7f0000008000-7f000000b000h");
    // Named like libc, but another library: the program's.
    struct dl_phdr_info crypt = object("/lib/x86_64-linux-gnu/libcrypt.so.1", 0x7f4000000000u, typical, NTYPICAL);
    CHECK_STR_EQ(roots_of(&crypt, false), "7f4000008000-7f400000b000");
    CHECK_STR_EQ(roots_of(&crypt, true), "");
    CHECK(tpprof_roots_is_libc(&libc) && tpprof_roots_is_libc(&bare) && !tpprof_roots_is_libc(&crypt));
}

static void test_tpprofs_own_data_is_never_a_root(void) {
    const ElfW(Phdr) self[] = {
        {.p_type = PT_LOAD, .p_flags = PF_R | PF_X, .p_vaddr = 0x0, .p_memsz = 0x1000},
        {.p_type = PT_LOAD, .p_flags = PF_R | PF_W, .p_vaddr = 0x2000, .p_memsz = 0x1000},
    };
    struct dl_phdr_info me = object("/usr/lib/tpprof/libtpprof.so", SELF_LO, self, 2);
    CHECK_STR_EQ(roots_of(&me, false), "");
    CHECK_STR_EQ(roots_of(&me, true), "");
    // Just above libtpprof.so's image: another object's data is read.
    struct dl_phdr_info next = object("/usr/lib/next.so", SELF_HI - 0x2000, self, 2);
    CHECK_STR_EQ(roots_of(&next, false), "7f1000100000-7f1000101000");
}

static void test_without_a_loader_base_no_object_is_the_loaders(void) {
    // A program run as `ld.so prog` has AT_BASE 0, and a non-PIE program
    // is based at 0: it is still the program's, not the loader's.
    const struct tpprof_root_rules none = {.loader_base = 0, .self_lo = SELF_LO, .self_hi = SELF_HI};
    struct dl_phdr_info prog = object("", 0, typical, NTYPICAL);
    struct tpprof_root r;
    int i = 0;
    CHECK(tpprof_roots_next_segment(&prog, &none, false, &i, &r) && r.lo == 0x8000 && !r.heap_only);
    i = 0;
    CHECK(!tpprof_roots_next_segment(&prog, &none, true, &i, &r));
}

// ---------------------------------------------------------------------------
// Threads.

static struct tpprof_thread thread_at(uintptr_t lo, uintptr_t hi, uintptr_t tp) {
    struct tpprof_thread t;
    memset(&t, 0, sizeof t);
    t.stack_lo = lo, t.stack_hi = hi, t.tp = tp;
    return t;
}

static void test_the_exiting_thread_is_read_from_its_stack_pointer_up(void) {
    struct tpprof_thread me = thread_at(0x10000, 0x20000, 0x30000);
    struct tpprof_root r[2];
    CHECK_EQ_U64(tpprof_roots_of_thread(&me, &me, 0x1f000, 0x800, r), 2);
    CHECK(r[0].lo == 0x1f000 && r[0].hi == 0x20000); // not the dead frames below sp
    CHECK(r[1].lo == 0x30000 - 0x800 && r[1].hi == 0x30000 + 2048); // static TLS and the TCB
    // sp above its recorded stack (a signal stack): a page from sp.
    CHECK_EQ_U64(tpprof_roots_of_thread(&me, &me, 0x50000, 0x800, r), 2);
    CHECK(r[0].lo == 0x50000 && r[0].hi == 0x51000);
}

static void test_a_stopped_thread_is_read_from_where_it_stopped(void) {
    struct tpprof_thread me = thread_at(0x10000, 0x20000, 0x30000), t = thread_at(0x40000, 0x50000, 0);
    struct tpprof_root r[2];
    atomic_store(&t.stop_sp, 0x4c000);
    CHECK_EQ_U64(tpprof_roots_of_thread(&t, &me, 0x1f000, 0x800, r), 1); // no thread pointer: no TLS
    CHECK(r[0].lo == 0x4c000 && r[0].hi == 0x50000);
    // Not stopped, or stopped somewhere else (an alternate signal stack):
    // the whole stack.
    atomic_store(&t.stop_sp, 0);
    CHECK_EQ_U64(tpprof_roots_of_thread(&t, &me, 0x1f000, 0x800, r), 1);
    CHECK(r[0].lo == 0x40000 && r[0].hi == 0x50000);
    atomic_store(&t.stop_sp, 0x90000);
    CHECK_EQ_U64(tpprof_roots_of_thread(&t, &me, 0x1f000, 0x800, r), 1);
    CHECK(r[0].lo == 0x40000 && r[0].hi == 0x50000);
}

static void test_an_exited_thread_has_no_roots(void) {
    struct tpprof_thread me = thread_at(0x10000, 0x20000, 0x30000), t = thread_at(0x40000, 0x50000, 0x60000);
    atomic_store(&t.exited, 1);
    struct tpprof_root r[2] = {{0}};
    CHECK_EQ_U64(tpprof_roots_of_thread(&t, &me, 0x1f000, 0x800, r), 0);
    // The exiting thread is read even when its struct says it exited (its
    // TLS destructors ran before the scan).
    atomic_store(&me.exited, 1);
    CHECK_EQ_U64(tpprof_roots_of_thread(&me, &me, 0x1f000, 0x800, r), 2);
}

int main(void) {
    RUN(test_writable_load_segments_with_their_bss_are_the_roots);
    RUN(test_an_object_with_two_data_segments_gives_both);
    RUN(test_libc_and_the_loader_are_read_in_the_second_pass_with_their_rules);
    RUN(test_tpprofs_own_data_is_never_a_root);
    RUN(test_without_a_loader_base_no_object_is_the_loaders);
    RUN(test_the_exiting_thread_is_read_from_its_stack_pointer_up);
    RUN(test_a_stopped_thread_is_read_from_where_it_stopped);
    RUN(test_an_exited_thread_has_no_roots);
    return CHECK_EXIT_STATUS();
}
