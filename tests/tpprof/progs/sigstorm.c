// sigstorm.c: four threads allocate and free as fast as they can until a
// signal ends the process; main prints "ready" once they run, then waits.
// Each thread keeps 1000 blocks of 300 B live in a ring (storm_keep), so
// the recording ended by the signal has a live set to write. The test
// sends the ending signal many times, as `timeout` does (to the process
// group, and tpprof forwards it), and from several senders at once.
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define KEEP 1000

__attribute__((noinline)) static void *storm_keep(void) { return malloc(300); }

static void *worker(void *arg) {
    (void)arg;
    void *ring[KEEP] = {0};
    for (unsigned long i = 0;; i++) {
        free(ring[i % KEEP]);
        ring[i % KEEP] = storm_keep();
    }
    return NULL;
}

int main(void) {
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        if (pthread_create(&t[i], NULL, worker, NULL) != 0) return 1;
    usleep(100000);
    printf("ready\n");
    fflush(stdout);
    for (;;) pause();
}
