// getattr.c: a program whose threads ask for their own stack first thing,
// as Rust's runtime does (std's stack-overflow guard calls
// pthread_getattr_np on the main thread before main, and on each thread as
// it starts). glibc's pthread_getattr_np holds the thread's lock while it
// allocates (realloc of a CPU set): that allocation is then the thread's
// first under the recorder, which must register the thread without asking
// pthread_getattr_np again. Each thread then loses 20 blocks of 333 bytes
// in leaf < middle < top, and the main thread one of 444 in main_leaf.
// Prints "getattr ok".
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void *volatile sink;

static void ask(void) {
    pthread_attr_t attr;
    void *lo;
    size_t size;
    if (pthread_getattr_np(pthread_self(), &attr) != 0) exit(3);
    if (pthread_attr_getstack(&attr, &lo, &size) != 0 || size == 0) exit(3);
    pthread_attr_destroy(&attr);
}

// (The empty asm after each call keeps it from being a tail call.)
__attribute__((noinline)) static void leaf(void) {
    sink = malloc(333); // lost
    sink = NULL;
    __asm__ volatile("");
}

__attribute__((noinline)) static void middle(void) {
    leaf();
    __asm__ volatile("");
}

__attribute__((noinline)) static void top(void) {
    for (int i = 0; i < 20; i++) middle();
    __asm__ volatile("");
}

static void *thread_main(void *arg) {
    (void)arg;
    ask();
    top();
    return NULL;
}

__attribute__((noinline)) static void main_leaf(void) {
    sink = malloc(444); // lost
    sink = NULL;
    __asm__ volatile("");
}

int main(void) {
    ask();
    main_leaf();
    for (int k = 0; k < 4; k++) {
        pthread_t t;
        if (pthread_create(&t, NULL, thread_main, NULL) != 0) return perror("pthread_create"), 1;
        pthread_join(t, NULL);
    }
    printf("getattr ok\n");
    return 0;
}
