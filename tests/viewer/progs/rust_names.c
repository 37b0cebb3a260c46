// rust_names.c: functions under the names rustc gives them, as asm labels:
// the v0 scheme (_RNvNtCs..._7mycrate5cache3put: mycrate::cache::put) and
// the legacy one (_ZN...17h<hash>E: mycrate::cache::Store::insert, which
// reads as C++ with a hash at the end). insert calls put, which pushes onto
// a vector through the standard library's frames as Rust's are named
// (<alloc::vec::Vec>::push < alloc::raw_vec::grow < alloc::alloc::alloc,
// which calls malloc): one block of 777 bytes is lost. Built with the
// project's flags.
#include <stdlib.h>
#include <string.h>

void *volatile sink;

__attribute__((noinline)) void *lib_alloc(size_t n) __asm__("_RNvNtCslNYArtu3iFV_5alloc5alloc5alloc");
__attribute__((noinline)) void *lib_grow(size_t n) __asm__("_RNvNtCslNYArtu3iFV_5alloc7raw_vec4grow");
__attribute__((noinline)) void *lib_push(size_t n) __asm__("_RNvMNtCslNYArtu3iFV_5alloc3vecNtB2_3Vec4push");
__attribute__((noinline)) void put(size_t n) __asm__("_RNvNtCs4fqI2P2rA04_7mycrate5cache3put");
__attribute__((noinline)) void insert(size_t n) __asm__("_ZN7mycrate5cache5Store6insert17h0123456789abcdefE");

// (The empty asm after each call keeps it from being a tail call.)
void *lib_alloc(size_t n) {
    void *p = malloc(n);
    __asm__ volatile("");
    return p;
}

void *lib_grow(size_t n) {
    void *p = lib_alloc(n);
    __asm__ volatile("");
    return p;
}

void *lib_push(size_t n) {
    void *p = lib_grow(n);
    __asm__ volatile("");
    return p;
}

void put(size_t n) {
    char *p = lib_push(n); // lost
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
