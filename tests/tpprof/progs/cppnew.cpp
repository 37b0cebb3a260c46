// cppnew.cpp: allocations through libstdc++, whose operator new and string
// internals are built without frame pointers (Debian's): new at four call
// sites, three calls deep (about 114,000 calls), and 2,000 std::string
// buffers made inside the library. The default unwinder must give exactly
// libunwind's stacks, and take them itself: libunwind walked every one (a
// C++ program allocating flat out ran 9x native). The string constructor
// also uses the frame-pointer register for its own data (a SKIP with the
// saved frame pointer).
#include <cstdio>
#include <string>
#include <vector>

static std::vector<void *> keep;
static std::vector<std::string> names;

__attribute__((noinline)) static void make(int i) {
    int *a = new int[4 + i % 5];
    if (i % 100 == 0) keep.push_back(a);
    else delete[] a;
    double *b = new double[2 + i % 3];
    if (i % 100 == 1) keep.push_back(b);
    else delete[] b;
}

__attribute__((noinline)) static void name(int i) {
    std::string s(40 + i % 30, 'x');
    if (i % 100 == 0) names.push_back(s);
}

__attribute__((noinline)) static void level2(int i) {
    make(i);
    if (i % 25 == 0) name(i);
}

__attribute__((noinline)) static void level1(int i) {
    level2(i);
    if (i % 7 == 0) make(i + 1);
}

int main() {
    for (int i = 0; i < 50000; i++) level1(i);
    std::printf("cppnew %zu %zu\n", keep.size(), names.size());
    return 0;
}
