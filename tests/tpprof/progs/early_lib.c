// early_lib.c: a library whose constructor allocates, before the preload's
// constructor has run (a program's libraries are initialized first): the
// head of a list that the program later appends to (early_push), a block
// the program frees (early_drop), and a mapped pool of slots that the
// program later keeps blocks in (early_pool_keep).
#define _GNU_SOURCE
#include <stdlib.h>
#include <sys/mman.h>

struct early_node {
    struct early_node *next;
    char pad[40]; // 48 bytes
};

struct early_list {
    struct early_node *first;
    char pad[56]; // 64 bytes
};

struct early_list *early_list;
static char *early_spare;
void **early_pool;

__attribute__((constructor)) static void early_init(void) {
    early_list = calloc(1, sizeof *early_list);
    early_spare = malloc(96);
    early_pool = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
}

// A block of 56 bytes kept only in slot i of the pool.
__attribute__((noinline)) void early_pool_keep(int i) {
    if (early_pool != MAP_FAILED) early_pool[i] = malloc(56);
}

__attribute__((noinline)) void early_push(void) {
    struct early_node *n = calloc(1, sizeof *n);
    n->next = early_list->first;
    early_list->first = n;
}

void early_drop(void) {
    free(early_spare);
    early_spare = NULL;
}
