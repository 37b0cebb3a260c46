// sym.c: the program symbols_by_compiler.sh builds with each compiler and
// debug-info format. make_op allocates through an inlined helper (fill,
// always inlined into it) and leaks one block of 4321 B; main calls make_op
// through a static function. The report must name make_op, fill and main
// with this file and the lines marked below. Prints "sym ok"; exits 0.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void *volatile sink;

static inline __attribute__((always_inline)) void *fill(size_t n) {
    void *p = malloc(n); // LINE_FILL
    if (p) memset(p, 7, n);
    return p;
}

__attribute__((noinline)) void make_op(size_t n) {
    sink = fill(n); // LINE_MAKE_OP
    __asm__ volatile("" ::: "memory"); // not a tail call
}

__attribute__((noinline)) static void run(int k) {
    for (int i = 0; i < k; i++) make_op(4321); // LINE_RUN
    __asm__ volatile("" ::: "memory");
}

int main(int argc, char **argv) {
    (void)argv;
    run(argc); // one block, lost when sink is cleared
    sink = NULL;
    printf("sym ok\n");
    return 0;
}
