// execer.c: replaces itself by exec. Without arguments it execs itself with
// "child" through execl; with "fexecve" or "execveat", through that call (on
// a descriptor of its own executable). The child leaks 999 B
// (exec_child_leak) and exits 0. The first image leaks 444 B (first_leak)
// before it execs.
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void *volatile sink;
extern char **environ;
int execveat(int dirfd, const char *path, char *const argv[], char *const envp[], int flags);

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
    sink = malloc(444); // first_leak
    sink = NULL;
    char *args[] = {argv[0], "child", NULL};
    if (argc > 1 && strcmp(argv[1], "fexecve") == 0) {
        int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
        fexecve(fd, args, environ);
    } else if (argc > 1 && strcmp(argv[1], "execveat") == 0) {
        execveat(AT_FDCWD, "/proc/self/exe", args, environ, 0);
    } else {
        execl("/proc/self/exe", argv[0], "child", (char *)NULL);
    }
    perror("exec");
    return 2;
}
