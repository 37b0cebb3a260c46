// keeper.c: keeps N blocks (argv[1], default 100000) of 48 B in a linked
// list (reachable from a global), loses one of 5000 B in keeper_lose, prints
// "keeper N" and exits 0. Its final write (N live blocks) takes long enough
// for kill -9 to land in it, or in any earlier part of the run.
#include <stdio.h>
#include <stdlib.h>

struct node {
    struct node *next;
    char pad[40];
};
struct node *kept;
void *volatile sink;

__attribute__((noinline)) static void keeper_lose(void) {
    sink = malloc(5000);
    sink = NULL;
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 100000;
    for (long i = 0; i < n; i++) {
        struct node *x = malloc(sizeof *x);
        if (!x) return 2;
        x->next = kept;
        kept = x;
    }
    keeper_lose();
    printf("keeper %ld\n", n);
    return 0;
}
