// vmlimit.c: how much a program can allocate under a limit on its address
// space (`ulimit -v`, RLIMIT_AS: embedded boards, batch schedulers; strict
// overcommit counts much the same). `vmlimit MIB` sets the limit and execs
// itself as `vmlimit fill`, which takes 1 MiB blocks until malloc fails (at
// most 4096), prints how many, frees them, and loses one block of 2222 bytes
// in vm_leak. The recorder's own mappings come out of the same limit; they
// must stay small (they were 350 MiB, and the program got 102 MiB of 386).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

void *volatile sink;

__attribute__((noinline)) static void vm_leak(void) {
    char *p = malloc(2222);
    memset(p, 2, 2222);
    sink = p;
    sink = NULL;
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "fill") != 0) {
        struct rlimit lim = {.rlim_cur = strtoull(argv[1], NULL, 10) << 20, .rlim_max = RLIM_INFINITY};
        lim.rlim_max = lim.rlim_cur;
        if (setrlimit(RLIMIT_AS, &lim) != 0) {
            perror("setrlimit");
            return 2;
        }
        execl("/proc/self/exe", argv[0], "fill", (char *)NULL);
        perror("exec");
        return 2;
    }
    static void *blocks[4096];
    int n = 0;
    while (n < 4096 && (blocks[n] = malloc((size_t)1 << 20)) != NULL) {
        memset(blocks[n], 1, (size_t)1 << 20);
        n++;
    }
    printf("filled %d\n", n);
    for (int i = 0; i < n; i++) free(blocks[i]);
    vm_leak();
    return 0;
}
