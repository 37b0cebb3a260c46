// bigset.c: makes a million allocations in a row and keeps them all (a
// program building a big in-memory index), then exits: the recorder must
// keep up (its live table grows to 64 MiB on the way, and the producer waits
// for it rather than drop events) and write every block at exit. Prints
// "bigset N".
#include <stdio.h>
#include <stdlib.h>

void **volatile keep;

int main(void) {
    long n = 1000000;
    keep = malloc((size_t)n * sizeof *keep);
    if (!keep) return 1;
    for (long i = 0; i < n; i++) keep[i] = malloc((size_t)(16 + (i & 7) * 8));
    printf("bigset %ld\n", n);
    return 0;
}
