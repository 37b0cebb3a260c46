// termexit: a forked child keeps a big pointer-rich heap (so that its exit
// leak scan takes a while under the preload) and calls _exit(0); the parent
// sends it SIGTERM a few ms after it said it was about to, as Python's
// multiprocessing pool does to workers that may be exiting already. Prints
// "child=PID how=exit|signal ms=N" (N: from the signal to the child's end).
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct node {
    struct node *next;
    char pad[56];
};

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static struct node *kept;

int main(void) {
    int p[2];
    if (pipe(p) != 0)
        return 1;
    pid_t child = fork();
    if (child < 0)
        return 1;
    if (child == 0) {
        for (int i = 0; i < 400000; i++) { // 400,000 blocks, 25 MiB, all reachable
            struct node *n = malloc(sizeof *n);
            if (!n)
                _exit(1);
            n->next = kept;
            kept = n;
        }
        if (write(p[1], "x", 1) != 1)
            _exit(1);
        _exit(0);
    }
    char c;
    if (read(p[0], &c, 1) != 1)
        return 1;
    struct timespec pause_ts = {0, 3 * 1000 * 1000};
    nanosleep(&pause_ts, NULL);
    double t0 = now_ms();
    kill(child, SIGTERM);
    int st = 0;
    if (waitpid(child, &st, 0) != child)
        return 1;
    printf("child=%d how=%s ms=%.0f\n", (int)child,
           WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM ? "signal" : WIFEXITED(st) && WEXITSTATUS(st) == 0 ? "exit" : "other",
           now_ms() - t0);
    return 0;
}
