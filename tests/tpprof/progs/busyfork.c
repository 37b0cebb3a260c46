// busyfork.c: forks 20 times while three threads allocate as fast as they
// can (a busy server spawning helpers). Each child frees a block and leaves
// by _exit. Prints "busyfork ok" once every child ended well.
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static atomic_int stop;

static void *spin(void *arg) {
    (void)arg;
    while (!atomic_load(&stop)) {
        void *p[64];
        for (int i = 0; i < 64; i++) p[i] = malloc((size_t)(16 + i * 8));
        for (int i = 0; i < 64; i++) free(p[i]);
    }
    return NULL;
}

int main(void) {
    pthread_t t[3];
    for (int i = 0; i < 3; i++) pthread_create(&t[i], NULL, spin, NULL);
    int bad = 0;
    for (int k = 0; k < 20; k++) {
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            free(malloc(100));
            _exit(0);
        }
        int st = 0;
        if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) bad++;
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < 3; i++) pthread_join(t[i], NULL);
    if (bad) return fprintf(stderr, "busyfork: %d children failed\n", bad), 1;
    printf("busyfork ok\n");
    return 0;
}
