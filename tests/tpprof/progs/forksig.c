// forksig [ROUNDS]: forks a child ROUNDS times and sends each SIGUSR1 a
// little after the fork (0 to 2.7 ms), whose handler (installed before the
// fork) calls _exit(7): the signal lands anywhere in the child's first
// moments, the preload's fork handler included. A child still there after
// 3 s is killed and counted as hung. Prints "rounds=N exited7=N hung=N".
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void on_usr1(int sig) {
    (void)sig;
    _exit(7);
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 20;
    signal(SIGUSR1, on_usr1);
    // Some heap for each child's exit to write, kept (reachable) to the end.
    void **keep = malloc(1000 * sizeof *keep);
    for (int i = 0; keep && i < 1000; i++)
        keep[i] = malloc(100 + (size_t)i);
    int hung = 0, seven = 0;
    for (int r = 0; r < rounds; r++) {
        pid_t c = fork();
        if (c < 0)
            return 2;
        if (c == 0)
            for (;;)
                pause();
        struct timespec d = {0, (r % 10) * 300 * 1000};
        nanosleep(&d, NULL);
        kill(c, SIGUSR1);
        int st = 0, waited = 0;
        while (waitpid(c, &st, WNOHANG) == 0) {
            struct timespec ts = {0, 10 * 1000 * 1000};
            nanosleep(&ts, NULL);
            if (++waited > 300) {
                kill(c, SIGKILL);
                waitpid(c, &st, 0);
                hung++;
                break;
            }
        }
        if (WIFEXITED(st) && WEXITSTATUS(st) == 7)
            seven++;
    }
    printf("rounds=%d exited7=%d hung=%d\n", rounds, seven, hung);
    return keep ? 0 : 2;
}
