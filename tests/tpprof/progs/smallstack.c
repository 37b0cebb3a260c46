// smallstack.c: threads with the smallest stack a thread may have
// (PTHREAD_STACK_MIN, 16 KiB), allocating 8 KiB deep in their own calls, as
// a program whose threads have tiny stacks does: the recorder's hooks run
// on that stack and must fit in what is left. Prints "smallstack ok".
#define _GNU_SOURCE
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void *volatile sink;

__attribute__((noinline)) static void deep(int n) {
    volatile char pad[512];
    memset((char *)pad, 0, sizeof pad);
    if (n) {
        deep(n - 1);
        return;
    }
    for (int i = 0; i < 200; i++) {
        sink = malloc((size_t)(32 + i));
        free(sink);
    }
    sink = malloc(777); // lost
    sink = NULL;
}

static void *thread_main(void *arg) {
    (void)arg;
    deep(14);
    return NULL;
}

int main(void) {
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, PTHREAD_STACK_MIN);
    for (int k = 0; k < 8; k++) {
        pthread_t t;
        if (pthread_create(&t, &attr, thread_main, NULL) != 0) return perror("pthread_create"), 1;
        pthread_join(t, NULL);
    }
    printf("smallstack ok\n");
    return 0;
}
