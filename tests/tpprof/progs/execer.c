// execer.c: replaces itself by exec. Without arguments it execs itself with
// "child"; the child leaks 999 B (exec_child_leak) and exits 0.
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void *volatile sink;

__attribute__((noinline)) void exec_child_leak(void) { sink = malloc(999); sink = NULL; }

// Overwrites dead stack slots so no stale copy of the leaked pointer survives
// into the uninitialized parts of later frames (exit's, at the leak scan).
__attribute__((noinline)) void clobber_stack(void) {
    volatile char buf[16384];
    memset((char *)buf, 0, sizeof buf);
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "child") == 0) {
        exec_child_leak();
        clobber_stack();
        printf("execer: child done\n");
        return 0;
    }
    sink = malloc(10);
    free(sink);
    execl("/proc/self/exe", argv[0], "child", (char *)NULL);
    perror("execl");
    return 2;
}
