// dlerr.c: a failed dlopen whose error the program reads with dlerror(), as
// a plugin loader or the CUDA runtime looking for its driver does: glibc
// keeps that error (two blocks) for the thread's next dlerror() call,
// pointed at from its thread-local storage, so they are reachable at exit.
// One block of 321 bytes is lost in lose. Prints the error's first word,
// then "dlerr ok".
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void *volatile sink;

__attribute__((noinline)) static void lose(void) {
    sink = malloc(321);
    sink = NULL;
    __asm__ volatile("");
}

int main(void) {
    void *h = dlopen("libtpprof-test-no-such-plugin.so", RTLD_NOW);
    if (h) return 2;
    const char *e = dlerror();
    printf("%.9s\n", e ? e : "(none)");
    lose();
    printf("dlerr ok\n");
    return 0;
}
