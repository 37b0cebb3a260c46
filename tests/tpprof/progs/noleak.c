// noleak.c: a program that leaks nothing but uses libc's caching parts
// (stdio buffers, locale, time zone, threads, dlerror); tpprof must report
// no lost block. Prints one line; exits 0.
#define _GNU_SOURCE
#include <locale.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int cmp(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

static void *worker(void *p) {
    char *s = strdup("worker");
    int n = (int)strlen(s);
    free(s);
    *(int *)p = n;
    return NULL;
}

int main(void) {
    setlocale(LC_ALL, "C");
    time_t t = 0;
    struct tm tm;
    localtime_r(&t, &tm);
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    int lines = 0;
    while (f && fgets(line, sizeof line, f)) lines++;
    if (f) fclose(f);
    int *v = malloc(1000 * sizeof *v);
    for (int i = 0; i < 1000; i++) v[i] = (i * 7919) % 1000;
    qsort(v, 1000, sizeof *v, cmp);
    int r = 0;
    pthread_t th;
    pthread_create(&th, NULL, worker, &r);
    pthread_join(th, NULL);
    printf("noleak: lines>0=%d sorted=%d worker=%d\n", lines > 0, v[999] == 999, r);
    free(v);
    return 0;
}
