// early.c: a program whose library (early_lib.c) made a list head before the
// recorder started; the 5 nodes appended to it later are reachable through
// that head, which the recorder never saw allocated; so are the 3 blocks
// kept only in slots of a pool the library mapped then. One block of 77
// bytes is lost in lose_one.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void early_push(void);
void early_drop(void);
void early_pool_keep(int i);

void *volatile sink;

__attribute__((noinline)) static void lose_one(void) {
    char *p = malloc(77);
    memset(p, 7, 77);
    sink = p;
    sink = NULL;
}

int main(void) {
    for (int i = 0; i < 5; i++) early_push();
    early_drop();
    for (int i = 0; i < 3; i++) early_pool_keep(i * 1000);
    lose_one();
    printf("early done\n");
    return 0;
}
