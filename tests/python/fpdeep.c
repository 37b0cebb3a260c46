// A recursion built with frame pointers, for fpdeep.py (through ctypes):
// its allocations' stacks are deeper than the captured depth in code the
// frame-pointer walk stands for, so the recorder takes them on its
// verified frame-pointer path and then puts the Python frames in. Also
// called on a thread of its own, which runs no Python: the same native
// stack, recorded as it is.
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

__attribute__((noinline)) void *fp_deep(int n, size_t size) {
    void *p = n > 0 ? fp_deep(n - 1, size) : malloc(size);
    __asm__ volatile("" ::: "memory"); // (built -O0: no tail call either way)
    return p;
}

void fp_free(void *p) { free(p); }

static void *thread_main(void *arg) {
    free(fp_deep(40, (size_t)(uintptr_t)arg));
    return NULL;
}

int fp_deep_on_a_thread(size_t size) {
    pthread_t t;
    if (pthread_create(&t, NULL, thread_main, (void *)(uintptr_t)size) != 0) return -1;
    return pthread_join(t, NULL);
}
