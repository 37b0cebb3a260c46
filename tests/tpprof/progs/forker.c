// forker.c: a child that forks without exec and leaks into its own database.
//
// Before the fork: 111 B lost (pre_fork_leak). The child leaks 777 B
// (child_leak) and exits 0; the parent waits, leaks 555 B (parent_leak) and
// prints "child=<pid>". Exits 0.
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

void *volatile sink;

NOINLINE void pre_fork_leak(void) { sink = malloc(111); sink = NULL; }
NOINLINE void child_leak(void) { sink = malloc(777); sink = NULL; }
NOINLINE void parent_leak(void) { sink = malloc(555); sink = NULL; }

NOINLINE void clobber_stack(void) {
    volatile char buf[16384];
    memset((char *)buf, 0, sizeof buf);
}

int main(void) {
    pre_fork_leak();
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) return 2;
    if (pid == 0) {
        child_leak();
        clobber_stack();
        exit(0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    parent_leak();
    clobber_stack();
    // write(2), not printf: a stdio buffer allocated now is uninitialized heap
    // memory that may hold a stale copy of a leaked pointer.
    char line[64];
    int n = snprintf(line, sizeof line, "child=%d\n", (int)pid);
    if (write(1, line, (size_t)n) != n) return 1;
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}
