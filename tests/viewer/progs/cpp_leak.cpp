// cpp_leak.cpp: a C++ program whose leak is made in a member function of a
// namespaced class, for the 'preload' suite: the report must show the name
// demangled, with its signature: ns::Widget::make(int).
#include <cstdio>
#include <cstring>

namespace ns {
struct Widget {
    __attribute__((noinline)) static char *make(int n);
};

char *Widget::make(int n) {
    char *p = new char[n];
    std::memset(p, 4, n);
    __asm__ volatile("" : : "r"(p) : "memory");
    return p;
}
} // namespace ns

__attribute__((noinline)) static void scrub_stack() {
    volatile char buf[32768];
    std::memset((char *)buf, 0, sizeof buf);
}

int main() {
    ns::Widget::make(640); // the only pointer to it is dropped here
    scrub_stack();
    std::printf("made\n");
    return 0;
}
