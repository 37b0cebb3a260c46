// threadcount [N]: starts N idle threads, then prints the thread count this
// process reads of itself through fopen: field 20 of /proc/self/stat and of
// /proc/<pid>/stat, and the Threads: line of /proc/self/status. Each line
// must read as natively under the preload (tpprof's writer not counted).
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static long stat_threads(const char *text) {
    const char *t = strrchr(text, ')'); // comm may hold spaces and parentheses
    for (int field = 3; t; field++) {
        while (*t == ')' || *t == ' ')
            t++;
        if (field == 20)
            return strtol(t, NULL, 10);
        t = strchr(t, ' ');
    }
    return -1;
}

static void show(const char *path, const char *mode) {
    char text[4096];
    FILE *f = fopen(path, mode);
    size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
    text[n] = 0;
    if (f)
        fclose(f);
    long count = -1;
    if (strstr(path, "status")) {
        const char *t = strstr(text, "\nThreads:");
        count = t ? strtol(t + 9, NULL, 10) : -1;
    } else {
        count = stat_threads(text);
    }
    printf("%s %s %ld\n", strncmp(path, "/proc/self", 10) == 0 ? path : "/proc/PID/stat", mode, count);
}

static void *idle(void *arg) {
    (void)arg;
    for (;;)
        pause();
    return NULL;
}

int main(int argc, char **argv) {
    int extra = argc > 1 ? atoi(argv[1]) : 0;
    for (int i = 0; i < extra; i++) {
        pthread_t t;
        if (pthread_create(&t, NULL, idle, NULL) != 0)
            return 1;
    }
    char own[64];
    snprintf(own, sizeof own, "/proc/%d/stat", (int)getpid());
    show("/proc/self/stat", "r");
    show(own, "re");
    show("/proc/self/status", "rb");
    return 0;
}
