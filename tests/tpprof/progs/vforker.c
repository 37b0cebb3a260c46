// vforker.c: vfork children that exec or _exit share the recorder's memory;
// they must not end the parent's recording. Leaks 456 B at the end
// (vfork_leak). Prints "child 3" three times; exits 0.
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

void *volatile sink;

__attribute__((noinline)) void vfork_leak(void) { sink = malloc(456); sink = NULL; }

int main(void) {
    for (int i = 0; i < 3; i++) {
        int st = 0;
        pid_t p = vfork();
        if (p == 0) {
            execl("/bin/true", "true", (char *)NULL);
            _exit(127);
        }
        waitpid(p, &st, 0);
        p = vfork();
        if (p == 0) _exit(3);
        waitpid(p, &st, 0);
        printf("child %d\n", WEXITSTATUS(st));
    }
    vfork_leak();
    return 0;
}
