// leak_once.c: a small program with known allocations for the 'preload'
// suite (test_run.c). It prints where each one is made ("lost FILE:LINE"),
// so the test can check tpprof's report against the truth.
//
//   leak_once [STATUS | kill | interrupt | handler]
//     loses 4096 B (malloc) in leak_once, keeps 100 B reachable (calloc) in
//     keep_some, loses an anonymous 8192 B mapping in map_some, makes 1000
//     temporary 32 B allocations in churn, then exits with STATUS (default
//     0), kills itself with SIGTERM (kill), or sends SIGINT to its whole
//     process group as a terminal's ^C would (interrupt); `handler` also
//     loses 555 B in handler_leak, called by a SIGUSR1 handler.
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

void *leak_once_keep; // a root: what it points to stays reachable

static const char *base(const char *path) {
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

__attribute__((noinline)) static void leak_once(void) {
    char *p = malloc(4096); int line = __LINE__;
    memset(p, 1, 4096);
    __asm__ volatile("" : : "r"(p) : "memory");
    printf("lost %s:%d\n", base(__FILE__), line);
}

__attribute__((noinline)) static void keep_some(void) {
    leak_once_keep = calloc(25, 4); int line = __LINE__;
    printf("reachable %s:%d\n", base(__FILE__), line);
}

__attribute__((noinline)) static void map_some(void) {
    void *m = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0); int line = __LINE__;
    if (m == MAP_FAILED)
        exit(99);
    memset(m, 2, 8192);
    printf("mapped %s:%d\n", base(__FILE__), line);
}

__attribute__((noinline)) static void churn(void) {
    for (int i = 0; i < 1000; i++) {
        char *volatile t = malloc(32);
        t[0] = (char)i;
        free(t);
    }
}

void *volatile leak_once_sink;

__attribute__((noinline)) static void handler_leak(void) {
    leak_once_sink = malloc(555);
    leak_once_sink = NULL;
}

static volatile int handled;

static void on_usr1(int sig) {
    handler_leak();
    handled = sig; // not a tail call: this frame stays on the stack
}

// Overwrite dead stack slots so that no stale copy of the lost pointer
// makes it look reachable to a conservative scan.
__attribute__((noinline)) static void scrub_stack(void) {
    volatile char buf[32768];
    memset((char *)buf, 0, sizeof buf);
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "handler") == 0) {
        signal(SIGUSR1, on_usr1);
        raise(SIGUSR1);
    }
    leak_once();
    keep_some();
    map_some();
    churn();
    scrub_stack();
    fflush(stdout);
    if (argc > 1 && strcmp(argv[1], "kill") == 0)
        raise(SIGTERM);
    if (argc > 1 && strcmp(argv[1], "interrupt") == 0)
        kill(0, SIGINT);
    return argc > 1 && strcmp(argv[1], "handler") != 0 ? atoi(argv[1]) : 0;
}
