// mainexit.c: main ends with pthread_exit while a worker thread goes on,
// allocates, loses 5555 B in worker_leak and returns: the process ends with
// its last thread, with status 0 (glibc calls exit(0) then). With "alone" as
// argv[1] there is no worker: main's pthread_exit is the end. With "fork" the
// worker first forks a child that works 300 ms on its own (its forking
// thread is its main, running: the child must not end early) and waits.
// With "fork_return" the child's main thread (the forking worker) returns
// from its thread function instead of calling _exit: glibc ends the child
// with exit(0) when no thread is left, the writer's aside (as a Python
// thread that forks: threading's threads end so).
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

void *volatile sink;

__attribute__((noinline)) void worker_leak(void) {
    sink = malloc(5555);
    sink = NULL;
}

static bool forking, returning;

static void *worker(void *arg) {
    (void)arg;
    usleep(50 * 1000); // main is gone by now
    if (forking) {
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            usleep(300 * 1000);
            free(malloc(10));
            printf("mainexit: child done\n");
            fflush(stdout);
            if (returning) return NULL;
            _exit(0);
        }
        // (A child that never ends is killed after 10 s: status 4.)
        int st = 0, waited = 0;
        pid_t got;
        while ((got = waitpid(pid, &st, WNOHANG)) == 0 && waited++ < 1000) usleep(10 * 1000);
        if (got == 0) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            _exit(4);
        }
        if (got != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) _exit(3);
    }
    for (int i = 0; i < 10000; i++) {
        sink = malloc(64);
        free(sink);
    }
    worker_leak();
    volatile char scrub[8192];
    memset((char *)scrub, 0, sizeof scrub);
    printf("mainexit: worker done\n");
    fflush(stdout);
    return NULL;
}

int main(int argc, char **argv) {
    returning = argc > 1 && strcmp(argv[1], "fork_return") == 0;
    forking = returning || (argc > 1 && strcmp(argv[1], "fork") == 0);
    if (argc < 2 || strcmp(argv[1], "alone") != 0) {
        pthread_t t;
        if (pthread_create(&t, NULL, worker, NULL) != 0) return 1;
        pthread_detach(t);
    }
    pthread_exit(NULL);
}
