// reserve.c: reserves 64 GiB of address space up front (MAP_NORESERVE, as
// allocators and runtimes do), touches a few pages across it, and keeps a
// heap block only in a page 40 GiB in (reserve_keep) and loses another
// (reserve_lose). The exit's leak scan must read the touched pages, not all
// 16 million (reading each made the kernel map it: seconds). Prints
// "reserve ok", or "reserve skipped" when the mapping is refused (strict
// overcommit).
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

char *reserve_region;
void *volatile sink;

__attribute__((noinline)) static void reserve_keep(void) {
    ((void **)(reserve_region + (40ull << 30)))[3] = malloc(4040);
}

__attribute__((noinline)) static void reserve_lose(void) {
    sink = malloc(5050);
    sink = NULL;
}

int main(void) {
    reserve_region = mmap(NULL, 64ull << 30, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (reserve_region == MAP_FAILED) {
        printf("reserve skipped\n");
        return 0;
    }
    for (int i = 0; i < 64; i++) reserve_region[(size_t)i << 30] = 1;
    reserve_keep();
    reserve_lose();
    printf("reserve ok\n");
    return 0;
}
