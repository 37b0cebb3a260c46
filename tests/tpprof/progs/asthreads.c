// asthreads.c: N threads (argv[1], default 200) with 64 KiB stacks, all
// alive at once (a barrier), each making 100 temporaries: a server or a
// pool sized to fit a batch scheduler's address-space limit. Prints
// "asthreads ok", or "create failed at I" (exit 1) when pthread_create
// fails.
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static pthread_barrier_t all_up;
void *volatile sink;

static void *run(void *arg) {
    (void)arg;
    for (int i = 0; i < 100; i++) {
        void *p = malloc(64); // (not freed through sink: other threads write it too)
        sink = p;
        free(p);
    }
    pthread_barrier_wait(&all_up);
    return NULL;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 200;
    if (n < 1 || pthread_barrier_init(&all_up, NULL, (unsigned)n + 1) != 0) return 2;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 64 << 10);
    pthread_t *t = calloc((size_t)n, sizeof *t);
    if (!t) return 2;
    for (int i = 0; i < n; i++)
        if (pthread_create(&t[i], &attr, run, NULL) != 0) {
            printf("create failed at %d\n", i);
            return 1;
        }
    pthread_barrier_wait(&all_up);
    for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
    printf("asthreads ok\n");
    return 0;
}
