// churn.c: 300 short-lived threads, one after another. Each makes 10
// temporaries and leaks one 2000 B block (churn_leak). Exits 0.
// `churn N`: N threads that each make one temporary, then the resident
// memory (what a recorder that kept every thread's buffers would grow).
#define _DEFAULT_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void *volatile sink;

__attribute__((noinline)) void churn_leak(void) { sink = malloc(2000); sink = NULL; }

__attribute__((noinline)) void clobber_stack(void) {
    volatile char buf[8192];
    memset((char *)buf, 0, sizeof buf);
}

static void *run(void *arg) {
    (void)arg;
    for (int i = 0; i < 10; i++) {
        sink = malloc(48);
        free(sink);
    }
    churn_leak();
    clobber_stack();
    return NULL;
}

// A thread that only makes a temporary (`churn N`: N of them, then the
// process's resident memory is printed as "rss_kb=K").
static void *tiny(void *arg) {
    (void)arg;
    sink = malloc(64);
    free(sink);
    return NULL;
}

static long rss_kb(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "VmRSS:", 6) == 0) kb = atol(line + 6);
    if (f) fclose(f);
    return kb;
}

int main(int argc, char **argv) {
    if (argc > 1) {
        int n = atoi(argv[1]);
        for (int k = 0; k < n; k++) {
            pthread_t t;
            if (pthread_create(&t, NULL, tiny, NULL) != 0) return 1;
            pthread_join(t, NULL);
        }
        usleep(50000); // the recorder lets go of the last threads' memory
        printf("rss_kb=%ld\n", rss_kb());
        return 0;
    }
    for (int k = 0; k < 300; k++) {
        pthread_t t;
        if (pthread_create(&t, NULL, run, NULL) != 0) return 1;
        pthread_join(t, NULL);
    }
    return 0;
}
