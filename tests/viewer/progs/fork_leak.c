// fork_leak.c: a parent and a forked child that each lose one block, for the
// 'preload' suite: the child's recording is a separate database named by the
// recorder (<db without .db>.<child pid>.db). Prints "child PID".
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

__attribute__((noinline)) static void lose(size_t n) {
    char *p = malloc(n);
    memset(p, 3, n);
    __asm__ volatile("" : : "r"(p) : "memory");
}

__attribute__((noinline)) static void scrub_stack(void) {
    volatile char buf[32768];
    memset((char *)buf, 0, sizeof buf);
}

int main(void) {
    lose(1000);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        lose(2000);
        scrub_stack();
        return 0;
    }
    printf("child %d\n", (int)pid);
    int status = 0;
    waitpid(pid, &status, 0);
    scrub_stack();
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
