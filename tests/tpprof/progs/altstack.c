// altstack.c: allocations in signal handlers that run on an alternate
// signal stack (sigaltstack), as crash handlers and runtimes do.
//  - `garbage`: a 64 KiB signal stack with an unmapped page above it; the
//    signal comes while the frame-pointer register holds an address in that
//    page, as code built without frame pointers may leave it. The handler's
//    frame chain leads there: a walk bounded by a guess of 8 MiB read it.
//  - `small`: an 8 KiB signal stack (what SIGSTKSZ was), of which the
//    kernel's signal frame takes a good part: the handler's malloc must not
//    run libunwind there.
// Each handler loses one block of 4321 bytes in handler_leak; prints
// "altstack MODE ok".
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

void *volatile sink;

__attribute__((noinline)) static void handler_leak(void) {
    char *p = malloc(4321);
    if (p) memset(p, 3, 4321);
    sink = p;
    sink = NULL;
}

static void handler(int sig) {
    (void)sig;
    void *q = malloc(100);
    free(q);
    handler_leak();
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "garbage";
    size_t size = strcmp(mode, "small") == 0 ? 8192 : 64 << 10;
    char *alt = mmap(NULL, size + 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (alt == MAP_FAILED || munmap(alt + size, 4096) != 0) return 2;
    stack_t ss = {.ss_sp = alt, .ss_size = size};
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sa.sa_flags = SA_ONSTACK;
    if (sigaltstack(&ss, NULL) != 0 || sigaction(SIGUSR1, &sa, NULL) != 0) return 2;
    if (strcmp(mode, "small") == 0) {
        raise(SIGUSR1);
    } else {
#if defined(__x86_64__)
        // kill(getpid(), SIGUSR1) by hand, with %rbp pointing into the page.
        long garbage = (long)(alt + size + 64);
        __asm__ volatile("push %%rbp\n\t"
                         "mov %0, %%rbp\n\t"
                         "mov $39, %%eax\n\t"
                         "syscall\n\t"
                         "mov %%eax, %%edi\n\t"
                         "mov $10, %%esi\n\t"
                         "mov $62, %%eax\n\t"
                         "syscall\n\t"
                         "pop %%rbp"
                         :
                         : "r"(garbage)
                         : "rax", "rdi", "rsi", "rcx", "rdx", "r11", "memory");
#else
        raise(SIGUSR1);
#endif
    }
    printf("altstack %s ok\n", mode);
    return 0;
}
