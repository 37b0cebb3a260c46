// cfideep.c: allocations 32 calls deep in a library built without frame
// pointers (cfideep_lib.c), from the main thread and from another, each
// entering the chain from a few call sites; one block lost from each
// thread (4242 B from main, 4343 B from the other); then 6 more threads
// one after another (whose thread structs, and CFI walk state, the
// recorder may hand from one to the next). Built with gcc and with clang,
// both -O2 -fomit-frame-pointer. Prints "cfideep ok".
#include <pthread.h>
#include <stdio.h>

#define NOINLINE __attribute__((noinline))
#define KEEP() __asm__ volatile("" ::: "memory")

void cfi_d31(int n, int sz);

NOINLINE static void via_a(int i, int sz) {
    cfi_d31(i, sz);
    KEEP();
}

NOINLINE static void via_b(int i, int sz) {
    cfi_d31(i + 1, sz);
    KEEP();
}

NOINLINE static void rounds(int base) {
    for (int i = 0; i < 400; i++) {
        if (i % 3 == 0) via_a(i, base + i % 16);
        else if (i % 3 == 1) via_b(i, base + i % 16);
        else cfi_d31(i, base + i % 16);
        KEEP();
    }
}

NOINLINE static void *other(void *arg) {
    (void)arg;
    rounds(40);
    cfi_d31(0, 4343);
    KEEP();
    return NULL;
}

NOINLINE static void *another(void *arg) {
    (void)arg;
    rounds(60);
    KEEP();
    return NULL;
}

int main(void) {
    rounds(24);
    cfi_d31(0, 4242);
    pthread_t t;
    if (pthread_create(&t, NULL, other, NULL) != 0) return 1;
    pthread_join(t, NULL);
    for (int i = 0; i < 6; i++) {
        if (pthread_create(&t, NULL, another, NULL) != 0) return 1;
        pthread_join(t, NULL);
    }
    puts("cfideep ok");
    return 0;
}
