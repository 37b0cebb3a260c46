// sitecount.c: many allocation sites, for the writer's site-count flush
// triggers. `sitecount MAKE FREE`: MAKE blocks, each from its own stack (a
// 4-way recursion 9 deep: 262,144 distinct stacks at most), kept; a pause
// (the writer drains and flushes what is due); then the first FREE blocks
// freed, another pause, and the others freed at exit (`sitecount MAKE FREE
// keep`: kept). Prints "sitecount ok".
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static void **blocks;
static int made, want;

__attribute__((noinline)) static void rec(int d);

#define BRANCH(name)                              \
    __attribute__((noinline)) static void name(int d) { \
        rec(d - 1);                               \
        __asm__ volatile("");                     \
    }
BRANCH(b0)
BRANCH(b1)
BRANCH(b2)
BRANCH(b3)

static void rec(int d) {
    if (made >= want) return;
    if (d == 0) {
        blocks[made] = malloc(16 + (size_t)(made & 7) * 16);
        made++;
        return;
    }
    b0(d);
    b1(d);
    b2(d);
    b3(d);
    __asm__ volatile("");
}

static void pause_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

int main(int argc, char **argv) {
    want = argc > 1 ? atoi(argv[1]) : 1000;
    int nfree = argc > 2 ? atoi(argv[2]) : 0;
    if (want > 1 << 18) want = 1 << 18;
    if (nfree > want) nfree = want;
    blocks = calloc((size_t)want, sizeof *blocks);
    rec(9);
    pause_ms(1000);
    for (int i = 0; i < nfree; i++) free(blocks[i]);
    // Longer: a flush of changed sites comes no sooner than twice the last
    // flush's own time after it (writer.c), which a loaded machine makes long.
    pause_ms(nfree ? 2500 : 0);
    if (!(argc > 3 && argv[3][0] == 'k')) {
        for (int i = nfree; i < want; i++) free(blocks[i]);
        free(blocks);
    }
    printf("sitecount ok\n");
    return 0;
}
