// closer.c: a program that treats every file descriptor above 2 as its own,
// as daemons and forked children before exec do. MODE (argv[1]):
//   loop        close 3 .. sysconf(_SC_OPEN_MAX) - 1 one by one
//   range       close_range(3, ~0U, 0)
//   from        closefrom(3)
//   dup         dup2 onto every number from 3 to 2047 (or the soft limit)
// Then it opens 8 files in DIR (argv[2]) and writes each one's name into it
// (the recorder must not have written into them), loses 4321 B in
// lose_after_closing, makes 20000 more allocations, and with "fork" as
// argv[3] does the same in a forked child first (its recording must survive
// too; prints "child=PID"). Prints "closer ok" when every file reads back as
// written.
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

void *volatile sink;

__attribute__((noinline)) void lose_after_closing(void) {
    sink = malloc(4321);
    sink = NULL;
}

__attribute__((noinline)) static void scrub_stack(void) {
    volatile char buf[16384];
    memset((char *)buf, 0, sizeof buf);
}

static int take_over(const char *mode) {
    long max = sysconf(_SC_OPEN_MAX);
    if (strcmp(mode, "loop") == 0) {
        for (long fd = 3; fd < max; fd++) close((int)fd);
    } else if (strcmp(mode, "range") == 0) {
        if (close_range(3, ~0U, 0) != 0) return perror("close_range"), 1;
    } else if (strcmp(mode, "from") == 0) {
        closefrom(3);
    } else if (strcmp(mode, "dup") == 0) {
        if (max > 2048) max = 2048; // past tpprof's numbers (below 1024)
        for (long fd = 3; fd < max; fd++)
            if (dup2(2, (int)fd) != fd) return perror("dup2"), 1;
        for (long fd = 3; fd < max; fd++) close((int)fd);
    } else {
        return fprintf(stderr, "closer: unknown mode %s\n", mode), 1;
    }
    return 0;
}

static int work(const char *mode, const char *dir, const char *who) {
    if (take_over(mode) != 0) return 1;
    int fds[8];
    char names[8][4096];
    for (int i = 0; i < 8; i++) {
        snprintf(names[i], sizeof names[i], "%s/%s-file%d", dir, who, i);
        fds[i] = open(names[i], O_RDWR | O_CREAT | O_TRUNC, 0644);
        if (fds[i] < 0) return perror(names[i]), 1;
        if (write(fds[i], names[i], strlen(names[i])) != (ssize_t)strlen(names[i])) return perror("write"), 1;
    }
    lose_after_closing();
    for (int i = 0; i < 20000; i++) {
        sink = malloc((size_t)(16 + i % 512));
        free(sink);
    }
    sink = NULL;
    scrub_stack();
    // Give the recorder's writer time to flush (it would have written into
    // one of these files if it still held their numbers).
    usleep(100 * 1000);
    for (int i = 0; i < 8; i++) {
        char got[4200];
        ssize_t n = pread(fds[i], got, sizeof got, 0);
        if (n != (ssize_t)strlen(names[i]) || memcmp(got, names[i], (size_t)n) != 0)
            return fprintf(stderr, "closer: %s was written to by someone else (%zd bytes)\n", names[i], n), 1;
        close(fds[i]);
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 3) return fprintf(stderr, "usage: closer MODE DIR [fork]\n"), 2;
    if (argc > 3 && strcmp(argv[3], "fork") == 0) {
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) _exit(work(argv[1], argv[2], "child") == 0 ? 0 : 1);
        int st = 0;
        if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
            return fprintf(stderr, "closer: child failed\n"), 1;
        printf("child=%d\n", (int)pid);
    }
    if (work(argv[1], argv[2], "parent") != 0) return 1;
    printf("closer ok\n");
    return 0;
}
