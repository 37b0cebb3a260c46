// libcache.c: what the C library keeps to the end, beside what the program
// keeps. getpwuid loads an NSS module and keeps its buffer; dlopen and
// dlclose of libm leave the loader's records; localtime may read the time
// zone. None of that is the program's. The program keeps a strdup'd string
// in a global (its own, reachable, at libcache_keep), drops another (lost,
// at libcache_drop), and hands a 777-byte block of its own to on_exit,
// which only the C library holds (still the program's: reachable, at
// libcache_arg). Prints "libcache ok" and exits 0.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

char *kept;

__attribute__((noinline)) char *libcache_keep(const char *s) {
    char *p = strdup(s);
    __asm__ volatile("" : : "r"(p) : "memory"); // not a tail call: this frame allocates
    return p;
}

char *volatile sink;

__attribute__((noinline)) void libcache_drop(const char *s) {
    sink = strdup(s); // (through a volatile: the compiler may not elide the block)
    sink = NULL;
}

__attribute__((noinline)) void *libcache_arg(void) {
    void *p = malloc(777);
    __asm__ volatile("" : : "r"(p) : "memory");
    return p;
}

static void at_end(int status, void *arg) {
    (void)status;
    (void)arg;
}

// Overwrites the dead frames below, where copies of the dropped pointer may lie.
__attribute__((noinline)) static void scrub_stack(void) {
    volatile char pad[4096];
    memset((char *)pad, 0, sizeof pad);
}

int main(void) {
    // The program's blocks first: dlclose leaves the loader's records with
    // dangling pointers to chunks it freed (seen: one, to the chunk a
    // strdup after it took), and such a stale address keeps a block, as in
    // any conservative scan.
    kept = libcache_keep("kept string");
    libcache_drop("dropped string");
    on_exit(at_end, libcache_arg());
    struct passwd *pw = getpwuid(getuid());
    time_t now = time(NULL);
    struct tm *tm = localtime(&now);
    void *m = dlopen("libm.so.6", RTLD_NOW);
    if (m) dlclose(m);
    scrub_stack();
    printf("libcache ok %d %d\n", pw != NULL, tm != NULL);
    return 0;
}
