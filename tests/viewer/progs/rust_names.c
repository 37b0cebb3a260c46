// rust_names.c: functions under the names rustc gives them, as asm labels:
// the v0 scheme (_RNvNtCs..._7mycrate5cache3put: mycrate::cache::put) and
// the legacy one (_ZN...17h<hash>E: mycrate::cache::Store::insert, which
// reads as C++ with a hash at the end). insert calls put, which loses one
// block of 777 bytes. Built with the project's flags.
#include <stdlib.h>
#include <string.h>

void *volatile sink;

__attribute__((noinline)) void put(size_t n) __asm__("_RNvNtCs4fqI2P2rA04_7mycrate5cache3put");
__attribute__((noinline)) void insert(size_t n) __asm__("_ZN7mycrate5cache5Store6insert17h0123456789abcdefE");

void put(size_t n) {
    char *p = malloc(n); // lost
    if (p) memset(p, 7, n);
    sink = p;
    sink = NULL;
    __asm__ volatile("");
}

void insert(size_t n) {
    put(n);
    __asm__ volatile("");
}

int main(void) {
    insert(777);
    return 0;
}
