// errnos.c: the allocation calls a program makes, each with errno set to a
// sentinel beforehand, on the main thread and on new threads (whose first
// call sets up the recorder's per-thread state): a successful call must leave
// errno as it was (glibc's do; free is documented to), and a failing one set
// what glibc sets. Prints one line per call; the recorded run must print
// exactly what the native run prints.
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define SENTINEL 4242
#define TRY(what, call)                                                                  \
    do {                                                                                 \
        errno = SENTINEL;                                                                \
        call;                                                                            \
        printf("%s %s: errno %s\n", who, what, errno == SENTINEL ? "kept" : strerror(errno)); \
    } while (0)

void *volatile sink;

static void calls(const char *who) {
    void *p = NULL;
    TRY("malloc", p = malloc(24));
    TRY("free", free(p));
    TRY("calloc", p = calloc(3, 40));
    TRY("realloc", p = realloc(p, 4000));
    TRY("free", free(p));
    TRY("posix_memalign", (void)posix_memalign(&p, 64, 200));
    TRY("free", free(p));
    TRY("aligned_alloc", p = aligned_alloc(256, 512));
    TRY("free", free(p));
    TRY("big malloc", p = malloc(1 << 20));
    TRY("big free", free(p));
    TRY("mmap", p = mmap(NULL, 65536, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    TRY("munmap", munmap(p, 65536));
    TRY("free(NULL)", free(NULL));
    static volatile size_t huge_v = SIZE_MAX / 2; // opaque: the compiler would reject the calls
    size_t huge = huge_v;
    TRY("failing malloc", sink = malloc(huge));
    TRY("failing calloc", sink = calloc(huge, 4));
    p = malloc(8);
    TRY("failing realloc", sink = realloc(p, huge));
    free(p);
}

static void *thread_main(void *arg) {
    calls((const char *)arg);
    return NULL;
}

int main(void) {
    calls("main");
    for (int i = 0; i < 3; i++) {
        pthread_t t;
        char name[16];
        snprintf(name, sizeof name, "thread%d", i);
        if (pthread_create(&t, NULL, thread_main, name) != 0) return 1;
        pthread_join(t, NULL);
    }
    return 0;
}
