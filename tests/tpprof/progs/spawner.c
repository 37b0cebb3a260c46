// spawner.c: starts a copy of itself with posix_spawn (argv[1] "spawnp":
// posix_spawnp) and an environment of its own making that holds none of
// the recorder's settings, as subprocess modules build, and waits for it.
// Prints "child=PID". The child ("child") leaks 321 B in spawn_child_leak.
#define _GNU_SOURCE
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

void *volatile sink;

__attribute__((noinline)) static void spawn_child_leak(void) {
    sink = malloc(321);
    sink = NULL;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "child") == 0) {
        spawn_child_leak();
        return getenv("SPAWNED") ? 0 : 3;
    }
    char *args[] = {argv[0], "child", NULL};
    char *env[] = {"SPAWNED=1", NULL};
    pid_t pid;
    int rc = argc > 1 && strcmp(argv[1], "spawnp") == 0 ? posix_spawnp(&pid, "/proc/self/exe", NULL, NULL, args, env)
                                                          : posix_spawn(&pid, "/proc/self/exe", NULL, NULL, args, env);
    if (rc != 0) return 2;
    int st;
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) return 4;
    printf("child=%d\n", (int)pid);
    return 0;
}
