// rawcloser.c: a program that closes every descriptor above 2 with the raw
// close system call (as some daemons, sandboxes and language runtimes do,
// past the C library), then opens files in DIR (argv[1]) until the process
// runs out of descriptors, so that its files take every number, those the
// recorder had included. It writes each file's own number into it, keeps
// allocating (the recorder's writer flushes meanwhile), loses 4321 B in
// raw_lose, then reads every file back: it prints "rawcloser ok N" (N files)
// if each holds exactly what it wrote, and "rawcloser corrupted FD"
// otherwise (exit 1).
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

void *volatile sink;

__attribute__((noinline)) static void raw_lose(void) {
    sink = malloc(4321);
    sink = NULL;
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return 2;
    long top = rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > 4096 ? 4096 : (long)rl.rlim_cur;
    // Between the recorder's writes (it writes at its start and then about
    // every 200 ms): a raw close that lands during one of its writes, after
    // its check, can still reach the file that takes the number (fdguard.c).
    // So after its first write: the recording file there and written (its
    // writer thread may start late on a loaded machine), then a little more.
    const char *rec = getenv("TPPROF_OUTPUT");
    struct stat sb;
    for (int i = 0; rec && i < 200 && !(stat(rec, &sb) == 0 && sb.st_size > 0); i++) usleep(5000);
    usleep(60000);
    for (long fd = 3; fd < top; fd++) syscall(SYS_close, fd);
    static int fds[4096];
    int n = 0;
    char path[4096], text[32];
    for (; n < 4096; n++) {
        snprintf(path, sizeof path, "%s/f%d", argv[1], n);
        int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
        if (fd < 0) break;
        fds[n] = fd;
        int len = snprintf(text, sizeof text, "file %d\n", fd);
        if (write(fd, text, (size_t)len) != len) return 2;
    }
    for (int i = 0; i < 200000; i++) { // the writer flushes meanwhile
        void *p = malloc(64 + (size_t)(i % 100));
        free(sink);
        sink = p;
    }
    usleep(300000);
    raw_lose();
    for (int i = 0; i < n; i++) {
        char want[32], got[64] = {0};
        int len = snprintf(want, sizeof want, "file %d\n", fds[i]);
        ssize_t r = pread(fds[i], got, sizeof got - 1, 0);
        off_t size = lseek(fds[i], 0, SEEK_END);
        if (r != len || size != len || memcmp(got, want, (size_t)len) != 0) {
            printf("rawcloser corrupted %d\n", fds[i]);
            return 1;
        }
    }
    printf("rawcloser ok %d\n", n);
    return 0;
}
