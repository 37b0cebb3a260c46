// cupti_app.c: a driver-API program for the CUPTI backend's end-to-end
// tests (tests/tpprof/preload/device.c, modes cupti_*), on the driver
// double (fakes/fake_libcuda.c), which loads CUDA_INJECTION64_PATH at
// cuInit and reports its cuMemAlloc_v2/cuMemFree_v2 to the fake libcupti.
//   cupti_app exit    cuInit, then 4 blocks of 64 KiB made in cupti_alloc,
//                     3 of them freed; a block of 1 MiB made in cupti_leak;
//                     returns from main (2 blocks live at the end)
//   cupti_app _exit   the same, ending with _exit
//   cupti_app quick_exit  the same, ending with quick_exit
//   cupti_app lazy    no cuInit of its own: the driver double initializes
//                     inside the first cuMemAlloc_v2 (TPFAKE_CU_INIT_IN_ALLOC)
// Every status is printed, so a run under tpprof prints the same as one
// without.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef unsigned long long dptr;
int cuInit(unsigned flags);
int cuMemAlloc_v2(dptr *p, size_t n);
int cuMemFree_v2(dptr p);

// noipa: one function of this name on the stack (no constprop clone).
__attribute__((noipa)) static dptr cupti_alloc(size_t n) {
    dptr p = 0;
    printf("alloc %zu: %d\n", n, cuMemAlloc_v2(&p, n));
    return p;
}

__attribute__((noipa)) static void cupti_leak(void) {
    dptr p = 0;
    printf("leak: %d\n", cuMemAlloc_v2(&p, 1 << 20));
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "exit";
    if (strcmp(mode, "lazy") != 0) printf("cuInit: %d\n", cuInit(0));
    dptr blocks[4];
    for (int i = 0; i < 4; i++) blocks[i] = cupti_alloc(65536);
    for (int i = 0; i < 3; i++) printf("free: %d\n", cuMemFree_v2(blocks[i]));
    cupti_leak();
    if (strcmp(mode, "_exit") == 0) {
        fflush(stdout);
        _exit(0);
    }
    if (strcmp(mode, "quick_exit") == 0) {
        fflush(stdout);
        quick_exit(0);
    }
    return 0;
}
