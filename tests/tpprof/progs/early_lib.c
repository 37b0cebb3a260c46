// early_lib.c: a library whose constructor allocates, before the preload's
// constructor has run (a program's libraries are initialized first): the
// head of a list that the program later appends to (early_push), and a
// block the program frees (early_drop).
#include <stdlib.h>

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

__attribute__((constructor)) static void early_init(void) {
    early_list = calloc(1, sizeof *early_list);
    early_spare = malloc(96);
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
