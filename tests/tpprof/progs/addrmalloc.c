// addrmalloc.c: a program built without -fpie that takes malloc's address
// (as Debian's node does): its executable then holds malloc's canonical
// PLT entry, which is what a lookup of "malloc" finds first, though malloc
// is still the C library's (or the preload's). Loses one block of 1234
// bytes through the pointer; prints "addrmalloc ok".
#include <stdio.h>
#include <stdlib.h>

void *(*volatile alloc)(size_t);
void *volatile sink;

int main(void) {
    alloc = malloc; // in code, not a data relocation: the address is the PLT entry's
    sink = alloc(1234); // lost
    sink = NULL;
    printf("addrmalloc ok\n");
    return 0;
}
