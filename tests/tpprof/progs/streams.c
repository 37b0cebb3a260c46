// streams.c: stdio streams open at exit. stdout (redirected by the test:
// fully buffered) and a file opened with fopen and never closed each have a
// buffer glibc's _IO_file_doallocate malloc'd: the C library's own, not
// leaks (reachability 3). The FILE of the unclosed stream is the program's
// leak, reachable, at fopen in streams_open. A stream opened and closed
// leaves nothing. A stream given a buffer of the program's own (setvbuf)
// keeps that buffer, which is the program's: reachable, at streams_own.
// Prints "streams ok" and exits 0, or 1 if a file cannot be opened.
#include <stdio.h>
#include <stdlib.h>

FILE *kept, *own_stream;

__attribute__((noinline)) FILE *streams_open(const char *path) {
    FILE *f = fopen(path, "w");
    __asm__ volatile("" : : "r"(f) : "memory"); // not a tail call: this frame opens
    return f;
}

__attribute__((noinline)) char *streams_own(size_t n) {
    char *b = malloc(n);
    __asm__ volatile("" : : "r"(b) : "memory");
    return b;
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : "/tmp";
    char path[4096];
    snprintf(path, sizeof path, "%s/streams_kept.txt", dir);
    kept = streams_open(path);
    snprintf(path, sizeof path, "%s/streams_closed.txt", dir);
    FILE *closed = fopen(path, "w");
    snprintf(path, sizeof path, "%s/streams_own.txt", dir);
    own_stream = fopen(path, "w");
    if (!kept || !closed || !own_stream) return 1;
    fprintf(kept, "kept\n");
    fflush(kept);
    fprintf(closed, "closed\n");
    fclose(closed);
    setvbuf(own_stream, streams_own(3000), _IOFBF, 3000);
    fprintf(own_stream, "own\n");
    fflush(own_stream);
    printf("streams ok\n");
    return 0;
}
