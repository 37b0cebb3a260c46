// exceptions.cpp: throws and catches in a loop; output and exit status must
// be the same with and without tpprof (libunwind must not take over the
// program's _Unwind_* symbols), and nothing may be reported lost.
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

static int thrower(int i) {
    if (i % 3 == 0) throw std::runtime_error("boom " + std::to_string(i));
    if (i % 3 == 1) throw i;
    return i;
}

int main() {
    long sum = 0;
    std::vector<std::string> kept;
    for (int i = 0; i < 20000; i++) {
        try {
            sum += thrower(i);
        } catch (const std::runtime_error &e) {
            sum += (long)std::string(e.what()).size();
            if (kept.size() < 10) kept.emplace_back(e.what());
        } catch (int v) {
            sum -= v;
        }
    }
    std::printf("exceptions: sum=%ld kept=%zu first=%s\n", sum, kept.size(), kept.empty() ? "" : kept[0].c_str());
    return sum == 0 ? 1 : 0;
}
