// vforker.c: vfork children that exec or _exit share the recorder's memory;
// they must not end the parent's recording. Leaks 456 B at the end
// (vfork_leak). Prints "child 3" three times; exits 0. `vforker many`: 200
// vfork+execl, then prints by how many KiB the parent's mappings grew
// ("grew N"): what an exec'ing child maps stays in its parent.
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

void *volatile sink;

__attribute__((noinline)) void vfork_leak(void) { sink = malloc(456); sink = NULL; }

// One vfork per function, nothing live across it (vfork's rules).
static int spawn_exec(void) {
    pid_t p = vfork();
    if (p == 0) {
        execl("/bin/true", "true", (char *)NULL);
        _exit(127);
    }
    int st = 0;
    waitpid(p, &st, 0);
    return WEXITSTATUS(st);
}

static int spawn_exit(void) {
    pid_t p = vfork();
    if (p == 0) _exit(3);
    int st = 0;
    waitpid(p, &st, 0);
    return WEXITSTATUS(st);
}

static long vm_kb(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = 0;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "VmSize:", 7) == 0) v = atol(line + 7);
    if (f) fclose(f);
    return v;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "many") == 0) {
        long before = vm_kb();
        for (int i = 0; i < 200; i++)
            if (spawn_exec() != 0) return 1;
        printf("grew %ld\n", vm_kb() - before);
        return 0;
    }
    for (int i = 0; i < 3; i++) {
        if (spawn_exec() != 0) return 1;
        printf("child %d\n", spawn_exit());
    }
    vfork_leak();
    return 0;
}
