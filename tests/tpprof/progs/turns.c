// turns.c: two threads take turns holding one big block, the way a program
// that caps its memory lets one worker at a time hold its scratch buffer:
// a thread waits for its turn, allocates TURN_BYTES, makes small temporary
// allocations (so both threads' rings fill while the writer is away and
// their records are merged in bulk), frees the big block and passes the
// turn. Two big blocks are never live at once: the recorded peak must stay
// under 2 * TURN_BYTES whatever order the writer merges the threads' rings in
// (the big blocks lie in different threads' arenas). Prints "turns: N" and
// exits 0.
#define _DEFAULT_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TURN_BYTES (2u << 20)
#define TURNS 500
#define SMALL_PER_TURN 40

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int turn;
static volatile unsigned long sink;

static void *worker(void *arg) {
    int id = (int)(long)arg;
    for (int i = 0; i < TURNS; i++) {
        pthread_mutex_lock(&mu);
        while (turn % 2 != id) pthread_cond_wait(&cv, &mu);
        pthread_mutex_unlock(&mu);
        char *big = malloc(TURN_BYTES);
        if (!big) return NULL;
        big[0] = (char)i;
        for (int k = 0; k < SMALL_PER_TURN; k++) {
            char *s = malloc(32 + (size_t)k);
            if (!s) break;
            s[0] = big[0];
            sink += (unsigned char)s[0];
            free(s);
        }
        free(big);
        pthread_mutex_lock(&mu);
        turn++;
        pthread_cond_broadcast(&cv);
        pthread_mutex_unlock(&mu);
    }
    return NULL;
}

int main(void) {
    pthread_t t[2];
    for (long i = 0; i < 2; i++)
        if (pthread_create(&t[i], NULL, worker, (void *)i) != 0) return 1;
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    printf("turns: %d\n", turn);
    return 0;
}
