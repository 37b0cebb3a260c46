// smallstack.c: threads with the smallest stack a thread may have
// (PTHREAD_STACK_MIN, 16 KiB), allocating 8 KiB deep in their own calls, as
// a program whose threads have tiny stacks does: the recorder's hooks run
// on that stack and must fit in what is left. Then threads of that size
// that allocate with about 8 KiB of it left, too little for libunwind to
// run there, through mid1 -> mid2 -> mid3 (each loses 20 blocks of 555
// bytes in mid3): built without frame pointers (tpprof_prog_smallstack_nofp)
// only libunwind gets that stack right. Prints "smallstack ok".
#define _GNU_SOURCE
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
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

// (The empty asm after each call keeps it from being a tail call.)
__attribute__((noinline)) static void mid3(void) {
    sink = malloc(555); // lost
    sink = NULL;
    __asm__ volatile("");
}

__attribute__((noinline)) static void mid2(void) {
    mid3();
    __asm__ volatile("");
}

__attribute__((noinline)) static void mid1(void) {
    for (int i = 0; i < 20; i++) mid2();
    __asm__ volatile("");
}

// Goes down the stack until about 8 KiB of it are left above lo.
__attribute__((noinline)) static void down(uintptr_t lo) {
    volatile char pad[256];
    memset((char *)pad, 0, sizeof pad);
    if ((uintptr_t)pad > lo + 8448) down(lo);
    else mid1();
    __asm__ volatile("");
}

static void *thread_main2(void *arg) {
    (void)arg;
    pthread_attr_t attr;
    void *lo = NULL;
    size_t size = 0;
    if (pthread_getattr_np(pthread_self(), &attr) != 0) return NULL;
    pthread_attr_getstack(&attr, &lo, &size);
    pthread_attr_destroy(&attr);
    down((uintptr_t)lo);
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
    for (int k = 0; k < 4; k++) {
        pthread_t t;
        if (pthread_create(&t, &attr, thread_main2, NULL) != 0) return perror("pthread_create"), 1;
        pthread_join(t, NULL);
    }
    printf("smallstack ok\n");
    return 0;
}
