// test_elfsym.c: unit tests of base/elfsym.c, the size of a loaded
// function looked up by name: the same answer as dladdr1's for the C
// library's functions the recorder asks about, and nothing for a name that
// is not the symbol at that address. Runs under ASan+UBSan too.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <stdio.h>

#include "base/elfsym.h"
#include "../check.h"

// dladdr1's size for the symbol at f (0 if none).
static size_t dladdr1_size(void *f) {
    Dl_info info;
    const ElfW(Sym) *sym = NULL;
    return dladdr1(f, &info, (void **)&sym, RTLD_DL_SYMENT) && sym ? sym->st_size : 0;
}

static void test_sizes_of_the_c_librarys_functions_are_dladdr1s(void) {
    const char *names[] = {"exit", "getpwuid", "gethostbyname", "_IO_file_doallocate", "qsort", "strtol"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        void *f = dlsym(RTLD_DEFAULT, names[i]);
        CHECK_MSG(f != NULL, "%s found", names[i]);
        if (!f) continue;
        size_t got = tpprof_elfsym_size(f, names[i]), want = dladdr1_size(f);
        CHECK_MSG(want > 0 && got == want, "%s: %zu, dladdr1 says %zu", names[i], got, want);
    }
}

static void test_a_name_not_at_that_address_has_no_size(void) {
    void *f = dlsym(RTLD_DEFAULT, "exit");
    CHECK(tpprof_elfsym_size(f, "qsort") == 0);
    CHECK(tpprof_elfsym_size(f, "no_such_symbol_anywhere") == 0);
    CHECK(tpprof_elfsym_size((char *)f + 1, "exit") == 0);
    CHECK(tpprof_elfsym_size(NULL, "exit") == 0);
    CHECK(tpprof_elfsym_size(f, NULL) == 0);
    static int local_data;
    CHECK(tpprof_elfsym_size(&local_data, "exit") == 0);
}

int main(void) {
    RUN(test_sizes_of_the_c_librarys_functions_are_dladdr1s);
    RUN(test_a_name_not_at_that_address_has_no_size);
    return CHECK_EXIT_STATUS();
}
