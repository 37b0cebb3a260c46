// odd_names.cpp: a program whose leaks are made in functions whose names
// hold the characters HTML and JSON must escape: a template's `<`, `>` and
// `&` (hold<int&>(int&)) and a user-defined literal's quotes
// (operator"" _kib). test_run.c also runs it from a file whose name is not
// UTF-8, so the module path and the program's name are not either.
#include <cstdio>
#include <cstring>

template <typename T> __attribute__((noinline)) char *hold(T value) {
    char *p = new char[96];
    std::memset(p, (int)sizeof value, 96);
    __asm__ volatile("" : : "r"(p) : "memory");
    return p;
}

__attribute__((noinline)) char *operator"" _kib(unsigned long long n) {
    char *p = new char[n * 1024];
    std::memset(p, 5, n * 1024);
    __asm__ volatile("" : : "r"(p) : "memory");
    return p;
}

__attribute__((noinline)) static void scrub_stack() {
    volatile char buf[32768];
    std::memset((char *)buf, 0, sizeof buf);
}

int main() {
    int x = 3;
    hold<int &>(x); // the only pointers to both are dropped here
    (void)2_kib;
    scrub_stack();
    std::printf("made\n");
    return 0;
}
