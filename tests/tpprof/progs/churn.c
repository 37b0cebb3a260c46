// churn.c: 300 short-lived threads, one after another. Each makes 10
// temporaries and leaks one 2000 B block (churn_leak). Exits 0.
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

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

int main(void) {
    for (int k = 0; k < 300; k++) {
        pthread_t t;
        if (pthread_create(&t, NULL, run, NULL) != 0) return 1;
        pthread_join(t, NULL);
    }
    return 0;
}
