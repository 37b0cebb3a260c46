// other_malloc.c: a stand-in for an allocator preloaded by the user
// (LD_PRELOAD=libjemalloc.so): it defines the malloc family, passing each
// call on to glibc's. Under `tpprof run`, which puts its preload first, the
// recorder's hooks come before it and call glibc's allocator themselves.
#include <stddef.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);

void *malloc(size_t n) { return __libc_malloc(n); }
void *calloc(size_t k, size_t n) { return __libc_calloc(k, n); }
void *realloc(void *p, size_t n) { return __libc_realloc(p, n); }
void free(void *p) { __libc_free(p); }
