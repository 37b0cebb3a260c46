// sigsetter.c: SysV's sigset() on signals the recorder stands in for: what
// it returns must be what it returns natively (SIG_DFL where the stand-in
// is, SIG_HOLD for a blocked signal), and SIG_DFL set through it must put
// the stand-in back, so that the SIGTERM raised at the end is recorded.
// Prints one line per call, then dies of SIGTERM. (sigset is looked up as
// the dynamic linker would bind it: its declaration is marked deprecated.)
#define _GNU_SOURCE
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

void *volatile sink;
static sighandler_t (*sigset_fn)(int, sighandler_t);
#define sigset(sig, disp) sigset_fn(sig, disp)

static void handler(int sig) { (void)sig; }

static const char *name(sighandler_t h) {
    return h == SIG_DFL ? "SIG_DFL" : h == SIG_IGN ? "SIG_IGN" : h == SIG_HOLD ? "SIG_HOLD" : h == handler ? "handler"
         : h == SIG_ERR ? "SIG_ERR" : "other";
}

int main(void) {
    *(void **)&sigset_fn = dlsym(RTLD_DEFAULT, "sigset");
    if (!sigset_fn) return 2;
    printf("TERM first: %s\n", name(sigset(SIGTERM, handler)));
    printf("TERM back: %s\n", name(sigset(SIGTERM, SIG_DFL)));
    printf("USR1 hold: %s\n", name(sigset(SIGUSR1, SIG_HOLD)));
    printf("USR1 release: %s\n", name(sigset(SIGUSR1, SIG_DFL)));
    printf("HUP ignore: %s\n", name(sigset(SIGHUP, SIG_IGN)));
    printf("HUP back: %s\n", name(sigset(SIGHUP, SIG_DFL)));
    fflush(stdout);
    sink = malloc(6161);
    raise(SIGTERM);
    return 0;
}
