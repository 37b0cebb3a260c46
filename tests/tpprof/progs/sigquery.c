// sigquery.c: a program built as strict ISO C with POSIX (no _GNU_SOURCE),
// whose signal() is glibc's __sysv_signal, sets and reads back SIGTERM's
// and SIGINT's dispositions. Under the preload it must see exactly what it
// sees natively (the recorder's stand-in handler is invisible: it reads
// SIG_DFL, its own handler is what it set). Prints what it saw.
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <stdio.h>

static void on_term(int sig) { (void)sig; }

static const char *name(void (*h)(int)) {
    return h == SIG_DFL ? "default" : h == SIG_IGN ? "ignore" : h == on_term ? "on_term" : "something else";
}

static const char *current(int sig) {
    struct sigaction now;
    sigaction(sig, NULL, &now);
    return (now.sa_flags & SA_SIGINFO) ? "something else (siginfo)" : name(now.sa_handler);
}

int main(void) {
    printf("SIGTERM at start: %s, SIGINT: %s\n", current(SIGTERM), current(SIGINT));
    const char *was = name(signal(SIGTERM, on_term)); // (each call before the read that reports it)
    printf("signal(SIGTERM, on_term) returned %s; now %s\n", was, current(SIGTERM));
    was = name(signal(SIGTERM, SIG_DFL));
    printf("signal(SIGTERM, SIG_DFL) returned %s; now %s\n", was, current(SIGTERM));
    was = name(signal(SIGINT, SIG_IGN));
    printf("signal(SIGINT, SIG_IGN) returned %s; now %s\n", was, current(SIGINT));
    struct sigaction sa = {0}, old;
    sa.sa_handler = on_term;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old);
    printf("sigaction(SIGINT, on_term) found %s; now %s\n", name(old.sa_handler), current(SIGINT));
    return 0;
}
