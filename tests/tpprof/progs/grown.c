// grown.c: a buffer grown by realloc in a loop (doubling from 16 B), then
// dropped: 1 block of 1024 B lost at exit, which memcheck and LeakSanitizer
// call definitely lost. Built at -O1 without frame pointers, a stale copy of
// its address left on the stack by the recorder's own calls once made it
// read reachable. Prints one number; exits 0.
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) static char *grow(int n) {
    char *buf = NULL;
    size_t cap = 0;
    for (int i = 0; i < n; i++) {
        if ((size_t)i >= cap) {
            cap = cap ? cap * 2 : 16;
            char *more = realloc(buf, cap);
            if (!more) exit(2);
            buf = more;
        }
        buf[i] = (char)i;
    }
    return buf;
}

int main(int argc, char **argv) {
    (void)argv;
    char *b = grow(1000 + argc);
    printf("%d\n", b[5]);
    b = NULL; // dropped: lost
    return 0;
}
