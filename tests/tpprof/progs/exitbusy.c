// exitbusy.c: main loses 4444 B in exit_leak and calls exit while three
// threads still allocate as fast as they can: the recording's last drain
// and the leak scan must not chase them. Prints "exitbusy: exiting".
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

void *volatile sink;

__attribute__((noinline)) void exit_leak(void) {
    sink = malloc(4444);
    sink = NULL;
}

static void *spin(void *arg) {
    (void)arg;
    for (;;) {
        void *p[32];
        for (int i = 0; i < 32; i++) p[i] = malloc((size_t)(16 + i * 24));
        for (int i = 0; i < 32; i++) free(p[i]);
    }
    return NULL;
}

int main(void) {
    pthread_t t[3];
    for (int i = 0; i < 3; i++) pthread_create(&t[i], NULL, spin, NULL);
    usleep(200 * 1000);
    exit_leak();
    printf("exitbusy: exiting\n");
    fflush(stdout);
    exit(0);
}
