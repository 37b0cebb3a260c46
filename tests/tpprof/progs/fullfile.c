// fullfile.c: a program that closes its stderr and opens a data file of its
// own, which gets descriptor 2, then keeps 100,000 blocks to its end under
// a 256 KiB limit on file sizes (RLIMIT_FSIZE, SIGXFSZ ignored: writes past
// it fail with EFBIG, as on a full disk). The recorder's final write fails;
// its one line must go to the stderr the program started with, not into
// the data file, which must hold exactly what the program wrote.
// Usage: fullfile DATA_FILE
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

void *keep[100000]; // (not static: the stores must stay)

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit lim = {.rlim_cur = 256 << 10, .rlim_max = RLIM_INFINITY};
    if (setrlimit(RLIMIT_FSIZE, &lim) != 0) return 2;
    close(2);
    int fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd != 2) return 3;
    for (int i = 0; i < 100000; i++) keep[i] = malloc(16 + i % 64);
    const char *msg = "the program's own data\n";
    if (write(fd, msg, strlen(msg)) != (ssize_t)strlen(msg)) return 4;
    printf("fullfile kept %d\n", (int)(sizeof keep / sizeof keep[0]));
    return 0;
}
